/* SPDX-License-Identifier: MIT */
/*
 * planner.h: lays out a recorded run offline, for a pool to follow the
 * next time the program runs (gpb_plan_t, gpubuddy-replay --plan-out).
 *
 * Online, best fit cannot know how long a block will live, and on some
 * streams that costs a few percent of memory (docs/DESIGN.md). Offline
 * every lifetime is known: allocations are placed largest first (ties:
 * the earlier), each at the lowest offset, in min_block units, clear of
 * every allocation already placed that is alive at the same time. This is
 * the greedy-by-size layout of static memory planners; it is not optimal,
 * but on the sample traces it needs 1.000 to 1.010 times peak live bytes.
 * A time index finds what each allocation meets, so it costs O(n log T)
 * plus, per allocation, a sort of the k it meets: 0.5 s for the 19,734
 * allocations of the recorded GPT-2 inference stream, 14 s for 200,266
 * with up to 1,024 live (gpubuddy-sample-churn --steps 400000), on a
 * 2-core VM.
 */
#ifndef GPBT_PLANNER_H
#define GPBT_PLANNER_H

#include "gpubuddy.h"
#include "opseq.h"

/* Called every 4,096 allocations placed (may be NULL): done of total. A
 * positive return stops the planner, which then returns that value. */
typedef int (*gpbt_plan_progress_fn)(void *user, uint64_t done,
                                     uint64_t total);

/* A plan for q's allocations in a pool of min_block-byte units: one entry
 * per alloc op, in order. 0 with *out set; GPB_EINVAL (min_block not a
 * power of two), GPB_EHOSTMEM, or the progress function's positive code. */
int gpbt_plan_make(const gpbt_seq_t *q, size_t min_block,
                   gpbt_plan_progress_fn progress, void *user,
                   gpb_plan_t **out);

#endif /* GPBT_PLANNER_H */
