/* SPDX-License-Identifier: MIT */
/*
 * follow.c: a plan bound to a core, and which entry each request takes.
 *
 * A request takes the first of the plan's next GPB_PLAN_LOOKAHEAD entries
 * of its size (in units), so a run may skip a few planned requests that
 * it does not make; one of another size does not move the plan on. Once
 * more than GPB_PLAN_DEPART_MAX of the last 64 requests departed from the
 * plan (no entry, or its range taken), or a plan with no periodic part
 * has ended, the plan is given up: a run unlike the planned one falls
 * back to plain best fit instead of following scraps of a layout.
 */
#include "plan/plan.h"
#include "core/core.h"

#include <stdlib.h>
#include <string.h>

int gpb__plan_bind(const gpb_plan_t *plan, uint32_t min_shift,
                   gpb__plan_t **out) {
  *out = NULL;
  if (!plan) return 0;
  gpb__plan_t *pl = calloc(1, sizeof *pl);
  size_t n = plan->n ? plan->n : 1;
  if (pl) {
    pl->units = malloc(n * sizeof *pl->units);
    pl->at = malloc(n * sizeof *pl->at);
  }
  if (!pl || !pl->units || !pl->at) {
    gpb__plan_unbind(pl);
    return gpb__fail(GPB_EHOSTMEM, "no host memory for a plan of %zu "
                     "entries", plan->n);
  }
  uint64_t mask = (1ull << min_shift) - 1;
  for (size_t i = 0; i < plan->n; i++) {
    const gpb_plan_entry_t *e = &plan->e[i];
    if (e->offset & mask) {
      gpb__plan_unbind(pl);
      return gpb__fail(GPB_EINVAL, "plan entry %zu: offset %llu is not a "
                       "multiple of the pool's min_block (%llu)", i + 1,
                       (unsigned long long)e->offset,
                       (unsigned long long)(mask + 1));
    }
    /* As the core rounds a request: sizes match in units. */
    pl->units[i] = (e->size >> min_shift) + ((e->size & mask) != 0);
    pl->at[i] = e->offset >> min_shift;
  }
  pl->n = plan->n;
  pl->repeat = plan->repeat;
  *out = pl;
  return 0;
}

void gpb__plan_unbind(gpb__plan_t *pl) {
  if (!pl) return;
  free(pl->units);
  free(pl->at);
  free(pl);
}

void gpb__plan_info(const gpb__plan_t *pl, gpb_plan_info_t *out) {
  memset(out, 0, sizeof *out);
  if (!pl) return;
  out->entries = pl->n;
  out->next = pl->next;
  out->placed = pl->placed;
  out->busy = pl->busy;
  out->unmatched = pl->unmatched;
  out->repeat_from = pl->repeat;
  out->requests = pl->requests;
  out->stopped_at = pl->stopped_at;
}

void gpb__plan_rewind(gpb__plan_t *pl) {
  pl->pos = pl->next = 0;
  pl->placed = pl->busy = pl->unmatched = pl->requests = 0;
  pl->recent = pl->stopped_at = 0;
}

int gpb__buddy_set_plan(gpb__buddy_t *b, const gpb_plan_t *plan) {
  if (plan && (!b->exts || b->bounded))
    return gpb__fail(GPB_EINVAL, "only a best-fit pool without arenas can "
                     "follow a plan (policy %s)", gpb_policy_name(b->policy));
  gpb__plan_t *pl;
  int rc = gpb__plan_bind(plan, b->min_shift, &pl);
  if (rc) return rc;
  gpb__plan_unbind(b->plan);
  b->plan = pl;
  return 0;
}

/* The entry after i: past the last, the periodic part's first, or n. */
static inline uint64_t plan_after(const gpb__plan_t *pl, uint64_t i) {
  return ++i == pl->n ? pl->repeat : i;
}

/* A request the plan did not place: counted, and the plan given up when
 * the run has departed from it or it has ended. */
static void plan_depart(gpb__plan_t *pl, uint64_t *count) {
  (*count)++;
  pl->recent = pl->recent << 1 | 1;
  if (pl->pos >= pl->n ||
      __builtin_popcountll(pl->recent) > GPB_PLAN_DEPART_MAX)
    pl->stopped_at = pl->requests;
}

int gpb__plan_match(gpb__plan_t *pl, uint64_t units, uint64_t *at) {
  if (pl->stopped_at) return 1;
  pl->requests++;
  uint64_t i = pl->pos, k = 0;
  while (k < GPB_PLAN_LOOKAHEAD && i < pl->n && pl->units[i] != units) {
    i = plan_after(pl, i);
    k++;
  }
  if (k == GPB_PLAN_LOOKAHEAD || i >= pl->n) {
    plan_depart(pl, &pl->unmatched);
    return 1;
  }
  pl->pos = plan_after(pl, i);
  pl->next += k + 1;
  *at = pl->at[i];
  return 0;
}

void gpb__plan_placed(gpb__plan_t *pl) {
  pl->placed++;
  pl->recent <<= 1;
}

void gpb__plan_busy(gpb__plan_t *pl) { plan_depart(pl, &pl->busy); }
