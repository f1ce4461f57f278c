/* SPDX-License-Identifier: MIT */
/*
 * minpool.c: the exact smallest-pool search (minpool.h says why it scans
 * rather than bisects).
 */
#include "minpool.h"

#include <stdlib.h>
#include <string.h>

uint64_t gpbt_minpool_step(uint64_t peak, uint64_t min_block) {
  uint64_t s = (peak / 1024 + min_block - 1) / min_block * min_block;
  return s ? s : min_block;
}

/* The scan, numbering its probes on from n0 (the probes before it). */
static int minpool_scan_from(uint64_t lower, uint64_t step, uint64_t upper,
                             gpbt_fits_fn fits, void *ctx, gpbt_probe_fn probe,
                             void *user, uint64_t n0, gpbt_minpool_t *out) {
  out->lower = lower;
  out->step = step;
  out->probes = n0;
  out->scan_from = n0;
  out->upper = upper;
  if (step == 0) return GPB_EINVAL;
  for (uint64_t s = lower; s <= upper; s += step) {
    int f = fits(ctx, s);
    out->probes++;
    if (f > 0) out->fits_at = s;
    if (f == 0) out->failed_to = s;
    int stop = probe ? probe(user, s, f, out->probes) : 0;
    if (stop > 0) return stop;
    if (f < 0) return f;
    if (f) {
      out->size = s;
      return 0;
    }
    if (upper - s < step) break; /* s + step would pass upper, or wrap */
  }
  return GPB_ENOMEM;
}

int gpbt_minpool_scan(uint64_t lower, uint64_t step, uint64_t upper,
                      gpbt_fits_fn fits, void *ctx, gpbt_probe_fn probe,
                      void *user, gpbt_minpool_t *out) {
  memset(out, 0, sizeof *out);
  return minpool_scan_from(lower, step, upper, fits, ctx, probe, user, 0, out);
}

int gpbt_seq_fits(const gpbt_seq_t *q, void **ptrs, uint64_t pool_size,
                  size_t min_block, gpb_policy_t policy) {
  return gpbt_seq_fits_plan(q, ptrs, pool_size, min_block, policy, NULL);
}

int gpbt_seq_fits_plan(const gpbt_seq_t *q, void **ptrs, uint64_t pool_size,
                       size_t min_block, gpb_policy_t policy,
                       const gpb_plan_t *plan) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = (size_t)pool_size;
  cfg.min_block = min_block;
  cfg.policy = policy;
  /* A probe must not publish or record itself because the environment
   * says so, and it maps only the metadata it touches. */
  cfg.flags = GPB_CFG_NO_ENV | GPB_CFG_LAZY_META;
  gpb_pool_t *pool;
  int rc = gpb_pool_create(&cfg, &pool);
  if (rc) return rc;
  if (plan && (rc = gpb_pool_set_plan(pool, plan))) {
    gpb_pool_destroy(pool);
    return rc;
  }
  int ok = 1;
  for (size_t i = 0; i < q->n && ok; i++) {
    const gpbt_op_t *op = &q->ops[i];
    if (op->alloc) {
      if (gpb_alloc(pool, (size_t)op->size, &ptrs[op->slot])) ok = 0;
    } else if (ptrs[op->slot]) {
      gpb_free(pool, ptrs[op->slot]);
      ptrs[op->slot] = NULL;
    }
  }
  memset(ptrs, 0, q->nslots * sizeof *ptrs);
  gpb_pool_destroy(pool); /* live blocks die with the pool */
  return ok;
}

typedef struct minpool_ctx {
  const gpbt_seq_t *q;
  void **ptrs;
  size_t min_block;
  gpb_policy_t policy;
  const gpb_plan_t *plan;
} minpool_ctx_t;

static int minpool_fits(void *ctx, uint64_t size) {
  minpool_ctx_t *c = ctx;
  return gpbt_seq_fits_plan(c->q, c->ptrs, size, c->min_block, c->policy,
                            c->plan);
}

int gpbt_minpool_find(const gpbt_seq_t *q, size_t min_block,
                      gpb_policy_t policy, uint64_t step, gpbt_probe_fn probe,
                      void *user, gpbt_minpool_t *out) {
  return gpbt_minpool_find_plan(q, min_block, policy, NULL, step, probe, user,
                                out);
}

int gpbt_minpool_find_plan(const gpbt_seq_t *q, size_t min_block,
                           gpb_policy_t policy, const gpb_plan_t *plan,
                           uint64_t step, gpbt_probe_fn probe, void *user,
                           gpbt_minpool_t *out) {
  memset(out, 0, sizeof *out);
  const uint64_t max = GPBT_MINPOOL_MAX;
  uint64_t g = min_block;
  /* Every bound below is checked against max first, so no sum or product
   * of them comes near 2^64. */
  if (g == 0 || (g & (g - 1)) || g > max || step > max) return GPB_EINVAL;
  uint64_t need = q->peak_live > q->max_request ? q->peak_live : q->max_request;
  if (need > max) return GPB_ETOOBIG;
  if (need == 0) need = g;
  if (step == 0) step = gpbt_minpool_step(need, g);
  step = (step + g - 1) / g * g;
  uint64_t lower = (need + step - 1) / step * step;
  uint64_t top = max / step * step; /* the largest size on the grid */
  out->lower = lower;
  out->step = step;
  if (lower > top) return GPB_ENOMEM;
  minpool_ctx_t c = {q, calloc(q->nslots ? q->nslots : 1, sizeof(void *)), g,
                     policy, plan};
  if (!c.ptrs) return GPB_EHOSTMEM;
  /* A size that fits bounds the scan: twice the need, doubled until it
   * fits. */
  uint64_t upper = (2 * need + step - 1) / step * step, probes = 0;
  if (upper > top) upper = top;
  int f, rc = 0;
  for (;;) {
    f = minpool_fits(&c, upper);
    probes++;
    out->probes = probes;
    if (f > 0) out->fits_at = upper;
    int stop = probe ? probe(user, upper, f, probes) : 0;
    if (stop > 0 || f < 0) {
      rc = stop > 0 ? stop : f;
      out->probes = probes;
      goto out;
    }
    if (f) break;
    if (upper == top) {
      rc = GPB_ENOMEM;
      out->probes = probes;
      goto out;
    }
    upper = upper > top / 2 ? top : upper * 2;
  }
  rc = minpool_scan_from(lower, step, upper, minpool_fits, &c, probe, user,
                         probes, out);
out:
  free(c.ptrs);
  return rc;
}
