/* SPDX-License-Identifier: MIT */
/*
 * plan.h: placement plans, the whole feature in one module (lib/plan/).
 *
 * A plan is a list of (size, offset) in the order a run allocates, with
 * an optional periodic tail ("repeat FROM"). Made offline from a recorded
 * run (planner.c, gpb_plan_make; trace.c reads the run from a trace),
 * kept in a text file (file.c: the object, load, atomic save), and
 * followed by a best-fit core (follow.c: binding a plan to a core,
 * matching each request to an entry, and giving the plan up when the run
 * departs from it; fit.c only checks that the entry's range is free and
 * cuts it). The public calls are gpb_plan_* and gpb_pool_set_plan* in
 * gpubuddy.h; these are the core's side.
 *
 * The module sits beside lib/core in libgpbcore: the core includes this
 * header for the bound plan, and this module includes core.h for
 * gpb__buddy_t. Only trace.c reads files of another layer (traces), and
 * it is built into libgpubuddy-read with the trace readers.
 */
#ifndef GPB_PLAN_H
#define GPB_PLAN_H

#include "base/base.h"

struct gpb__buddy;

/* The public gpb_plan_t: immutable once made (file.c makes them). */
struct gpb_plan {
  gpb_plan_entry_t *e;
  size_t n, repeat; /* entries [repeat, n) repeat; n: none */
  uint64_t extent;  /* the end of the highest planned range */
};

/* A plan bound to a core: entries in units, and how far the core has
 * followed them. The core's owner (pool, simulator) owns it. */
typedef struct gpb__plan {
  uint64_t *units, *at; /* per entry: its size and offset in units */
  uint64_t n, repeat;   /* the periodic part is [repeat, n); n: none */
  uint64_t pos;         /* the next entry to match */
  uint64_t next;        /* entries consumed, every lap counted */
  uint64_t placed, busy, unmatched, requests;
  uint64_t recent;      /* a bit per recent request, 1: it departed */
  uint64_t stopped_at;  /* the request the plan was given up at; 0 */
} gpb__plan_t;

/* Binds `plan` for a core of 2^min_shift-byte units: *out is NULL for a
 * NULL plan. GPB_EINVAL for an offset off the unit grid, GPB_EHOSTMEM. */
GPB__HIDDEN int gpb__plan_bind(const gpb_plan_t *plan, uint32_t min_shift,
                               gpb__plan_t **out);
GPB__HIDDEN void gpb__plan_unbind(gpb__plan_t *pl);
/* Makes best-fit core b follow `plan` from its first entry (NULL: none),
 * replacing any plan it had; the core owns the binding. GPB_EINVAL for a
 * core of another policy or an arena's (bounded) core. */
GPB__HIDDEN int gpb__buddy_set_plan(struct gpb__buddy *b,
                                    const gpb_plan_t *plan);
GPB__HIDDEN void gpb__plan_info(const gpb__plan_t *pl, gpb_plan_info_t *out);
/* Back to the first entry, counts zeroed (a reset core). */
GPB__HIDDEN void gpb__plan_rewind(gpb__plan_t *pl);

/* Following, for a request of `units` units: the entry the plan places
 * it at (its offset in units in *at), or -1 when the plan says nothing
 * for it (no entry of its size in the next GPB_PLAN_LOOKAHEAD, or the
 * plan was given up); a -1 counts as a departure. The caller then calls
 * gpb__plan_placed, or gpb__plan_busy when the range is taken. */
GPB__HIDDEN int gpb__plan_match(gpb__plan_t *pl, uint64_t units,
                                uint64_t *at);
GPB__HIDDEN void gpb__plan_placed(gpb__plan_t *pl);
GPB__HIDDEN void gpb__plan_busy(gpb__plan_t *pl);

#endif /* GPB_PLAN_H */
