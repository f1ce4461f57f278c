/* SPDX-License-Identifier: MIT */
/*
 * stats.c: pool statistics as a pure function of the event stream.
 *
 * The pool and the block-map model feed every event through
 * gpb__stats_apply(), so a model rebuilt from events reports exactly the
 * pool's numbers, and a test comparing the two checks the stream too.
 * Counters change in O(1) per event (an ALLOC or FREE touches one free
 * count per block of its run, at most 64). The fragmentation figures are
 * derived when read, in one pass over the orders.
 */
#include "core/core.h"

#include <math.h>
#include <string.h>

void gpb__stats_init(gpb_stats_t *s, uint64_t managed, uint64_t min_block,
                     uint32_t norders) {
  memset(s, 0, sizeof *s);
  s->version = GPB_STATS_VERSION;
  s->num_orders = norders;
  s->managed_bytes = managed;
  s->min_block = min_block;
  s->free_bytes = s->free_peak = managed;
  uint64_t units = managed / min_block;
  for (uint32_t k = 0; k < norders; k++)
    if (units & (1ull << k)) s->free_blocks[k] = 1;
}

#define PEAK(v, p) \
  do {             \
    if ((v) > (p)) (p) = (v); \
  } while (0)

void gpb__stats_apply(gpb_stats_t *s, const gpb_event_t *ev) {
  s->seq = ev->seq;
  gpb__stats_count(s, ev->type, ev->offset, ev->size, ev->requested, ev->tag,
                   ev->order);
}

void gpb__stats_add(gpb_stats_t *s, const gpb_stats_t *d) {
  s->seq += d->seq;
  s->requested_bytes += d->requested_bytes;
  s->block_bytes += d->block_bytes;
  s->free_bytes += d->free_bytes;
  s->allocs += d->allocs;
  s->frees += d->frees;
  s->failures += d->failures;
  s->splits += d->splits;
  s->merges += d->merges;
  s->live_allocs += d->live_allocs;
  for (uint32_t k = 0; k < GPB_MAX_ORDERS; k++) s->free_blocks[k] += d->free_blocks[k];
  for (uint32_t t = 0; t < GPB_MAX_TAGS; t++) s->tag_bytes[t] += d->tag_bytes[t];
  PEAK(s->requested_bytes, s->requested_peak);
  PEAK(s->block_bytes, s->block_peak);
  PEAK(s->free_bytes, s->free_peak);
}

void gpb__stats_finish(gpb_stats_t *s) {
  s->internal_frag_bytes = s->block_bytes - s->requested_bytes;
  s->largest_free = 0;
  double sum = 0, sumsq = 0;
  for (uint32_t k = 0; k < s->num_orders; k++) {
    double bytes = (double)(s->min_block << k);
    sum += (double)s->free_blocks[k] * bytes;
    sumsq += (double)s->free_blocks[k] * bytes * bytes;
    if (s->free_blocks[k]) s->largest_free = s->min_block << k;
  }
  s->external_frag = sum > 0 ? 1.0 - sqrt(sumsq) / sum : 0.0;
  /* Unusable free space index (as in Linux's extfrag): for order j, the
   * share of free bytes held in blocks smaller than 2^j units. */
  double below = 0;
  for (uint32_t j = 0; j < GPB_MAX_ORDERS; j++) {
    s->unusable_index[j] = (j < s->num_orders && sum > 0) ? below / sum : 0.0;
    if (j < s->num_orders)
      below += (double)s->free_blocks[j] * (double)(s->min_block << j);
  }
}

void gpb__stats_from_core(gpb_stats_t *s, const gpb__buddy_t *b) {
  uint64_t units = b->nunits;
  uint64_t min = 1ull << b->min_shift;
  uint64_t free_units = 0;
  for (uint32_t k = 0; k < b->norders; k++) {
    s->free_blocks[k] = b->nfree[k];
    free_units += b->nfree[k] << k;
  }
  s->free_bytes = free_units * min;
  s->block_bytes = (units - free_units) * min;
  s->requested_bytes = 0;
  memset(s->tag_bytes, 0, sizeof s->tag_bytes);
  const gpb__atab_t *t = &b->atab;
  const gpb__arec_t *tabs[2] = {t->cur, t->old};
  uint64_t caps[2] = {t->cap, t->old_cap};
  for (int x = 0; x < 2; x++)
    for (uint64_t i = 0; tabs[x] && i < caps[x]; i++) {
      const gpb__arec_t *r = &tabs[x][i];
      if (r->key == 0 || r->key == UINT64_MAX) continue;
      s->requested_bytes += r->requested;
      if (r->tag < GPB_MAX_TAGS) s->tag_bytes[r->tag] += r->units * min;
    }
  s->live_allocs = gpb__atab_count(t);
  PEAK(s->requested_bytes, s->requested_peak);
  PEAK(s->block_bytes, s->block_peak);
  PEAK(s->free_bytes, s->free_peak);
}
