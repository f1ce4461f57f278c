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
#include <stdio.h>
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
  if (d->last_failed_request) s->last_failed_request = d->last_failed_request;
  s->splits += d->splits;
  s->merges += d->merges;
  s->live_allocs += d->live_allocs;
  for (uint32_t k = 0; k < GPB_MAX_ORDERS; k++) s->free_blocks[k] += d->free_blocks[k];
  for (uint32_t t = 0; t < GPB_MAX_TAGS; t++) s->tag_bytes[t] += d->tag_bytes[t];
  PEAK(s->requested_bytes, s->requested_peak);
  PEAK(s->block_bytes, s->block_peak);
  PEAK(s->free_bytes, s->free_peak);
}

void gpb__stats_finish(gpb_stats_t *s, const int64_t *merged) {
  s->internal_frag_bytes = s->block_bytes - s->requested_bytes;
  s->largest_free = 0;
  /* Free buddies that deferred coalescing left unmerged are one block to
   * any request (the pool merges them before it fails one), so these
   * figures count them merged: two free 128 MiB buddies are a largest
   * free block of 256 MiB, not fragmentation. */
  double f[GPB_MAX_ORDERS];
  double sum = 0, sumsq = 0;
  for (uint32_t k = 0; k < s->num_orders && k < GPB_MAX_ORDERS; k++) {
    int64_t n = (int64_t)s->free_blocks[k] + (merged ? merged[k] : 0);
    f[k] = n > 0 ? (double)n : 0.0;
    double bytes = (double)(s->min_block << k);
    sum += f[k] * bytes;
    sumsq += f[k] * bytes * bytes;
    if (n > 0) s->largest_free = s->min_block << k;
  }
  s->external_frag = sum > 0 ? 1.0 - sqrt(sumsq) / sum : 0.0;
  /* Unusable free space index (as in Linux's extfrag): for order j, the
   * share of free bytes held in blocks smaller than 2^j units. */
  double below = 0;
  for (uint32_t j = 0; j < GPB_MAX_ORDERS; j++) {
    s->unusable_index[j] = (j < s->num_orders && sum > 0) ? below / sum : 0.0;
    if (j < s->num_orders) below += f[j] * (double)(s->min_block << j);
  }
}

/* Moves the bottom of the stack into the counts: it can merge no more. */
static void merge_walk_flush(gpb__merge_walk_t *w, uint32_t keep) {
  uint32_t drop = w->n > keep ? w->n - keep : 0;
  for (uint32_t x = 0; x < drop; x++) w->free[w->stk[x] >> 58]++;
  memmove(w->stk, w->stk + drop, (w->n - drop) * sizeof *w->stk);
  w->n -= drop;
}

int gpb__merge_walk_block(const gpb_block_info_t *bl, void *user) {
  gpb__merge_walk_t *w = user;
  if (bl->used) {
    merge_walk_flush(w, 0); /* nothing merges across a used block */
    return 0;
  }
  if (w->n == sizeof w->stk / sizeof *w->stk) merge_walk_flush(w, w->n / 2);
  uint64_t k = bl->order, i = (bl->offset / w->min_block) >> k;
  w->stk[w->n++] = GPB__NODE(k, i);
  /* The node just pushed is a right half whose left half is below it. */
  while (w->n >= 2) {
    uint64_t top = w->stk[w->n - 1], under = w->stk[w->n - 2];
    uint64_t tk = top >> 58, ti = top & ((1ull << 58) - 1);
    if (under != GPB__NODE(tk, ti ^ 1) || !(ti & 1) || tk + 1 >= w->norders ||
        (ti >> 1) >= (w->nunits >> (tk + 1)))
      break;
    w->n -= 2;
    w->stk[w->n++] = GPB__NODE(tk + 1, ti >> 1);
  }
  return 0;
}

void gpb__merge_walk_end(gpb__merge_walk_t *w) { merge_walk_flush(w, 0); }

int gpb__merge_walk_check(const gpb__merge_walk_t *w, const gpb_stats_t *s,
                          const int64_t *merged) {
  for (uint32_t k = 0; k < w->norders && k < GPB_MAX_ORDERS; k++) {
    int64_t want = (int64_t)s->free_blocks[k] + merged[k];
    if (want != (int64_t)w->free[k])
      return gpb__fail(GPB_ECORRUPT, "coalesced map: %lld free blocks of order "
                       "%u, the pair lists make %lld", (long long)w->free[k], k,
                       (long long)want);
  }
  return 0;
}

void gpb__stats_from_core(gpb_stats_t *s, const gpb__buddy_t *b) {
  uint64_t units = b->nunits;
  uint64_t min = 1ull << b->min_shift;
  uint64_t free_units = 0, nfree[GPB_MAX_ORDERS];
  gpb__buddy_nfree(b, nfree);
  for (uint32_t k = 0; k < b->norders; k++) {
    s->free_blocks[k] = nfree[k];
    free_units += nfree[k] << k;
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

int gpb_stats_json(const gpb_stats_t *s, char *buf, size_t len) {
  if (!s || (!buf && len)) return gpb__fail(GPB_EINVAL, "stats or buf is NULL");
  size_t n = 0;
  int w;
#define STATS_PUT(...)                                                  \
  do {                                                                  \
    w = snprintf(buf ? buf + (n < len ? n : len) : NULL,                \
                 n < len ? len - n : 0, __VA_ARGS__);                   \
    if (w < 0) return gpb__fail(GPB_EINVAL, "cannot format the stats"); \
    n += (size_t)w;                                                     \
  } while (0)
  STATS_PUT("{\"seq\":%llu,\"managed_bytes\":%llu,\"min_block\":%llu,"
            "\"used_bytes\":%llu,\"used_peak\":%llu,\"free_bytes\":%llu,"
            "\"requested_bytes\":%llu,\"requested_peak\":%llu,"
            "\"internal_waste_bytes\":%llu,\"largest_free\":%llu,"
            "\"external_frag\":%.6f,\"allocs\":%llu,\"frees\":%llu,"
            "\"failures\":%llu,\"splits\":%llu,\"merges\":%llu,"
            "\"live_allocs\":%llu,\"free_blocks\":[",
            (unsigned long long)s->seq, (unsigned long long)s->managed_bytes,
            (unsigned long long)s->min_block,
            (unsigned long long)s->block_bytes,
            (unsigned long long)s->block_peak,
            (unsigned long long)s->free_bytes,
            (unsigned long long)s->requested_bytes,
            (unsigned long long)s->requested_peak,
            (unsigned long long)s->internal_frag_bytes,
            (unsigned long long)s->largest_free, s->external_frag,
            (unsigned long long)s->allocs, (unsigned long long)s->frees,
            (unsigned long long)s->failures, (unsigned long long)s->splits,
            (unsigned long long)s->merges,
            (unsigned long long)s->live_allocs);
  for (uint32_t k = 0; k < s->num_orders && k < GPB_MAX_ORDERS; k++)
    STATS_PUT("%s%llu", k ? "," : "", (unsigned long long)s->free_blocks[k]);
  STATS_PUT("]}");
#undef STATS_PUT
  return n > INT32_MAX ? GPB_EINVAL : (int)n;
}
