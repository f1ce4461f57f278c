/* SPDX-License-Identifier: MIT */
/*
 * extents.c: free extents for the best-fit placement policy.
 *
 * A free extent is a maximal run of free units, whatever buddy blocks it is
 * made of. GPB_POLICY_BESTFIT places an allocation at the start of a
 * well-fitting extent and carves it as a run of buddy blocks, which is
 * what lets a buddy pool approach best-fit memory use.
 *
 * Extents are binned by length as in TLSF: exact bins below 16 units, then
 * 16 sub-bins per power of two, with a bitmap of non-empty bins, so the
 * smallest bin that surely fits is found in O(1). The bin that holds the
 * request's own length is also searched, a few entries deep, for an exact
 * or closer fit. Records live in fixed-size chunks (stable ids for the bin
 * lists, no copying on growth); two allocation tables map start and end
 * units to record ids so that a free merges with its neighbours in O(1).
 */
#include "core/core.h"

#include <stdlib.h>
#include <string.h>

#define EXT_CHUNK 4096u
#define EXT_PEEK 16 /* entries of the request's own bin examined */

static inline gpb__ext_t *ext_rec(const gpb__exts_t *x, uint32_t id) {
  return &x->chunks[id / EXT_CHUNK][id % EXT_CHUNK];
}

static uint32_t ext_bin(uint64_t len) {
  if (len < GPB__EXT_SL) return (uint32_t)len;
  uint32_t fl = 63u - (uint32_t)__builtin_clzll(len);
  uint32_t sl = (uint32_t)(len >> (fl - GPB__EXT_SLBITS)) & (GPB__EXT_SL - 1);
  return (fl - GPB__EXT_SLBITS + 1) * GPB__EXT_SL + sl;
}

int gpb__exts_init(gpb__exts_t *x) {
  memset(x, 0, sizeof *x);
  if (gpb__atab_init(&x->by_start, 256) || gpb__atab_init(&x->by_end, 256)) {
    gpb__exts_fini(x);
    return GPB_EHOSTMEM;
  }
  return 0;
}

void gpb__exts_fini(gpb__exts_t *x) {
  for (uint32_t c = 0; c < x->nchunks; c++) free(x->chunks[c]);
  free(x->chunks);
  gpb__atab_fini(&x->by_start);
  gpb__atab_fini(&x->by_end);
  memset(x, 0, sizeof *x);
}

void gpb__exts_clear(gpb__exts_t *x) {
  gpb__atab_clear(&x->by_start);
  gpb__atab_clear(&x->by_end);
  memset(x->head, 0, sizeof x->head);
  memset(x->binmap, 0, sizeof x->binmap);
  x->free_head = 0;
  x->count = 0;
  /* Every made record goes back on the free list. */
  for (uint32_t id = x->made; id >= 1; id--) {
    ext_rec(x, id)->next = x->free_head;
    x->free_head = id;
  }
}

static uint32_t ext_new(gpb__exts_t *x) {
  if (x->free_head) {
    uint32_t id = x->free_head;
    x->free_head = ext_rec(x, id)->next;
    return id;
  }
  uint32_t id = x->made + 1; /* id 0 means none */
  if (id / EXT_CHUNK >= x->nchunks) {
    gpb__ext_t **c = realloc(x->chunks, (x->nchunks + 1) * sizeof *c);
    if (!c) return 0;
    x->chunks = c;
    c[x->nchunks] = malloc(EXT_CHUNK * sizeof(gpb__ext_t));
    if (!c[x->nchunks]) return 0;
    x->nchunks++;
  }
  x->made = id;
  return id;
}

static void ext_bin_add(gpb__exts_t *x, uint32_t id) {
  gpb__ext_t *e = ext_rec(x, id);
  uint32_t b = ext_bin(e->len);
  e->bin = b;
  e->prev = 0;
  e->next = x->head[b];
  if (e->next) ext_rec(x, e->next)->prev = id;
  x->head[b] = id;
  x->binmap[b / 64] |= 1ull << (b % 64);
}

static void ext_bin_remove(gpb__exts_t *x, uint32_t id) {
  gpb__ext_t *e = ext_rec(x, id);
  if (e->prev)
    ext_rec(x, e->prev)->next = e->next;
  else
    x->head[e->bin] = e->next;
  if (e->next) ext_rec(x, e->next)->prev = e->prev;
  if (!x->head[e->bin]) x->binmap[e->bin / 64] &= ~(1ull << (e->bin % 64));
}

/* Adds [start, start+len) as an extent. The caller has merged neighbours. */
static int ext_insert(gpb__exts_t *x, uint64_t start, uint64_t len) {
  gpb_assert(len > 0);
  uint32_t id = ext_new(x);
  if (!id) return GPB_EHOSTMEM;
  gpb__ext_t *e = ext_rec(x, id);
  e->start = start;
  e->len = len;
  gpb__arec_t r = {0};
  r.units = id;
  if (gpb__atab_insert(&x->by_start, start, &r) ||
      gpb__atab_insert(&x->by_end, start + len, &r)) {
    gpb__atab_remove(&x->by_start, start);
    e->next = x->free_head;
    x->free_head = id;
    return GPB_EHOSTMEM;
  }
  ext_bin_add(x, id);
  x->count++;
  return 0;
}

static void ext_delete(gpb__exts_t *x, uint32_t id) {
  gpb__ext_t *e = ext_rec(x, id);
  ext_bin_remove(x, id);
  gpb__atab_remove(&x->by_start, e->start);
  gpb__atab_remove(&x->by_end, e->start + e->len);
  e->next = x->free_head;
  x->free_head = id;
  x->count--;
}

int gpb__exts_add(gpb__exts_t *x, uint64_t start, uint64_t len) {
  const gpb__arec_t *l = gpb__atab_find(&x->by_end, start);
  if (l) {
    uint32_t id = (uint32_t)l->units;
    uint64_t s = ext_rec(x, id)->start;
    len += start - s;
    start = s;
    ext_delete(x, id);
  }
  const gpb__arec_t *r = gpb__atab_find(&x->by_start, start + len);
  if (r) {
    uint32_t id = (uint32_t)r->units;
    len += ext_rec(x, id)->len;
    ext_delete(x, id);
  }
  return ext_insert(x, start, len);
}

/* Start of the first position in e aligned to 2^a where n units fit, or
 * UINT64_MAX. */
static uint64_t ext_fit(const gpb__ext_t *e, uint64_t n, uint32_t a) {
  uint64_t p = (e->start + (1ull << a) - 1) & ~((1ull << a) - 1);
  return p + n <= e->start + e->len ? p : UINT64_MAX;
}

int gpb__exts_take(gpb__exts_t *x, uint64_t n, uint32_t align_order,
                   uint64_t *out) {
  uint64_t need = n + (1ull << align_order) - 1;
  uint32_t best = 0;
  uint64_t best_len = UINT64_MAX, best_pos = 0;
  /* The request's own bin may hold closer fits than the next bins. */
  uint32_t own = ext_bin(need < n ? UINT64_MAX : need);
  int peek = 0;
  for (uint32_t id = x->head[own]; id && peek < EXT_PEEK; id = ext_rec(x, id)->next, peek++) {
    const gpb__ext_t *e = ext_rec(x, id);
    uint64_t p = ext_fit(e, n, align_order);
    if (p != UINT64_MAX && e->len < best_len) {
      best = id;
      best_len = e->len;
      best_pos = p;
      if (e->len == n) break;
    }
  }
  if (!best) {
    for (uint32_t b = own + 1; b < GPB__EXT_BINS;) {
      uint64_t w = x->binmap[b / 64] & (~0ull << (b % 64));
      if (!w) {
        b = (b / 64 + 1) * 64;
        continue;
      }
      b = (b / 64) * 64 + (uint32_t)__builtin_ctzll(w);
      for (uint32_t id = x->head[b]; id; id = ext_rec(x, id)->next) {
        const gpb__ext_t *e = ext_rec(x, id);
        uint64_t p = ext_fit(e, n, align_order);
        if (p != UINT64_MAX) {
          best = id;
          best_pos = p;
          break;
        }
      }
      if (best) break;
      b++;
    }
  }
  if (!best) return GPB_ENOMEM;
  gpb__ext_t e = *ext_rec(x, best);
  ext_delete(x, best);
  int rc = 0;
  if (best_pos > e.start) rc |= ext_insert(x, e.start, best_pos - e.start);
  if (best_pos + n < e.start + e.len)
    rc |= ext_insert(x, best_pos + n, e.start + e.len - best_pos - n);
  if (rc) return GPB_EHOSTMEM;
  *out = best_pos;
  return 0;
}

uint64_t gpb__exts_count(const gpb__exts_t *x) { return x->count; }
