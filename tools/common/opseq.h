/* SPDX-License-Identifier: MIT */
/*
 * opseq.h: a trace as a sequence of alloc and free operations on numbered
 * slots, held in memory. It is the one trace loader of the programs that
 * replay a trace many times (gpubuddy-replay --find-min-pool, and every
 * replay of gpubuddy-bench): a slot is an index, so a replay needs no
 * hash lookup per op, and the file is read and parsed once.
 */
#ifndef GPBT_OPSEQ_H
#define GPBT_OPSEQ_H

#include <stddef.h>
#include <stdint.h>

#include "gpubuddy.h"

/* The planner's op (gpb_plan_make takes q->ops as they are). */
typedef gpb_plan_op_t gpbt_op_t;

typedef struct gpbt_seq {
  gpbt_op_t *ops;
  size_t n, nslots, cap;
  uint64_t peak_live;   /* most requested bytes live at once */
  uint64_t max_request; /* largest allocation */
  /* What loading saw: allocations, frees, frees of ids never allocated
   * (allocated before the trace began), allocations of an id already
   * live (skipped, as gpubuddy-replay skips them), zero-size requests
   * (skipped), and requests that failed when recorded (counted either
   * way; kept with with_failed: an alloc and its free at once). */
  uint64_t allocs, frees, unmatched, dup, zero, failed;
} gpbt_seq_t;

/* Reads the trace at path (any format gpb_trace_open reads) into q.
 * with_failed keeps the requests that failed when recorded (each an alloc
 * followed by its free), as a pool that serves every request must. 0, or
 * a negative GPB_E* code with a one-line message in err. */
int gpbt_seq_load(const char *path, int with_failed, gpbt_seq_t *q,
                  char *err, size_t errlen);
/* Appends one op; 0 or GPB_EHOSTMEM. */
int gpbt_seq_push(gpbt_seq_t *q, int alloc, uint32_t slot, uint64_t size);
/* Fills peak_live and max_request from the ops. 0 or GPB_EHOSTMEM. */
int gpbt_seq_peak(gpbt_seq_t *q);
void gpbt_seq_free(gpbt_seq_t *q);

/* The pool a trace is replayed into when none is given (gpubuddy-replay,
 * gpubuddy-view --trace): the next power of two at or above twice the
 * peak live bytes, the largest request, and 1 MiB. */
uint64_t gpbt_pool_size_for(uint64_t peak_live, uint64_t max_request);

#endif /* GPBT_OPSEQ_H */
