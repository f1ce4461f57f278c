/* SPDX-License-Identifier: MIT */
/*
 * minpool.h: the smallest pool that replays a trace with no failed
 * allocation, for gpubuddy-replay and gpubuddy-bench alike.
 *
 * Whether a pool fits a trace is not monotone in its size: a pool that is
 * not a power of two is covered by roots of its binary digits, and the
 * first-fit order over those roots changes with them, so a larger pool can
 * fail where a smaller one fits. Bisection can therefore stop above the
 * answer. This search is exact at its resolution instead: it tries every
 * size from the lower bound (peak live bytes, or the largest request)
 * upward in steps of the resolution, and the first size that fits is the
 * answer; every smaller size on that grid was tried and failed. A probe
 * replays from memory and stops at its first failed allocation, so even
 * hundreds of probes take a second or two on the sample traces.
 */
#ifndef GPBT_MINPOOL_H
#define GPBT_MINPOOL_H

#include "gpubuddy.h"
#include "opseq.h"

/* The largest pool the search tries. A probe reserves only address
 * space, but its metadata grows with the pool, and sizes stay far from
 * overflow in the grid's arithmetic. */
#define GPBT_MINPOOL_MAX ((uint64_t)1 << 46)

/* 1 when a pool of pool_size bytes fits, 0 when it does not, <0 error. */
typedef int (*gpbt_fits_fn)(void *ctx, uint64_t pool_size);

/* Called after each probe (may be NULL); probe counts from 1 over the
 * whole search. A positive return stops the search (a signal, say),
 * which then returns that value. */
typedef int (*gpbt_probe_fn)(void *user, uint64_t pool_size, int fits,
                             uint64_t probe);

/* Filled as the search goes, so a probe function holding a pointer to it
 * can show progress, and a search stopped early still tells what it
 * learned: the answer lies above failed_to and at most at fits_at. */
typedef struct gpbt_minpool {
  uint64_t size;   /* the answer: the smallest size on the grid that fits */
  uint64_t step;   /* the resolution: size - step did not fit */
  uint64_t lower;  /* where the scan began */
  uint64_t probes; /* pools tried */
  uint64_t upper;  /* where the scan ends: a size known to fit (0: still
                      doubling to find one) */
  uint64_t fits_at;   /* the smallest size seen to fit so far, or 0 */
  uint64_t failed_to; /* every size from lower to this failed, or 0 */
  uint64_t scan_from; /* probes before the scan (the doubling's) */
} gpbt_minpool_t;

/* Default resolution: 1/1024 of the peak, rounded up to min_block. */
uint64_t gpbt_minpool_step(uint64_t peak, uint64_t min_block);

/* The exact scan: the first size lower, lower + step, ... up to upper
 * that fits. lower and step must be multiples of min_block (the caller's
 * grid). 0 with *out filled, GPB_ENOMEM when nothing up to upper fits,
 * GPB_EINVAL for step 0, the fits function's negative code, or the probe
 * function's positive one. */
int gpbt_minpool_scan(uint64_t lower, uint64_t step, uint64_t upper,
                      gpbt_fits_fn fits, void *ctx, gpbt_probe_fn probe,
                      void *user, gpbt_minpool_t *out);

/* The whole search for a loaded trace on the virtual backend: step 0
 * means gpbt_minpool_step. The scan is bounded by a size that fits, found
 * first by doubling from twice the peak (at most GPBT_MINPOOL_MAX). 0;
 * GPB_ETOOBIG when the peak or largest request exceeds GPBT_MINPOOL_MAX;
 * GPB_ENOMEM when no pool up to it fits; GPB_EINVAL for a min_block that
 * is not a power of two up to it, or a larger step; another negative
 * GPB_E* code; or the probe function's positive one (out->probes filled). */
int gpbt_minpool_find(const gpbt_seq_t *q, size_t min_block,
                      gpb_policy_t policy, uint64_t step, gpbt_probe_fn probe,
                      void *user, gpbt_minpool_t *out);

/* The same, with every probe's pool following `plan` (best fit). */
int gpbt_minpool_find_plan(const gpbt_seq_t *q, size_t min_block,
                           gpb_policy_t policy, const gpb_plan_t *plan,
                           uint64_t step, gpbt_probe_fn probe, void *user,
                           gpbt_minpool_t *out);

/* One probe: replays q in a fresh virtual pool of pool_size bytes until
 * its first failed allocation. 1 fits, 0 fails, <0 error (pool creation). */
int gpbt_seq_fits(const gpbt_seq_t *q, void **ptrs, uint64_t pool_size,
                  size_t min_block, gpb_policy_t policy);
/* The same, the pool following `plan` (NULL: none). */
int gpbt_seq_fits_plan(const gpbt_seq_t *q, void **ptrs, uint64_t pool_size,
                       size_t min_block, gpb_policy_t policy,
                       const gpb_plan_t *plan);

#endif /* GPBT_MINPOOL_H */
