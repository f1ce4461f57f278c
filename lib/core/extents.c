/* SPDX-License-Identifier: MIT */
/*
 * extents.c: free runs for the best-fit core (fit.c).
 *
 * A free run is a maximal run of free units, whatever buddy blocks it is
 * made of. Best fit places an allocation at the start of a well-fitting
 * run (or its first aligned unit), and fit.c derives the buddy blocks.
 *
 * Runs are binned by length as in TLSF: exact bins below 16 units, then
 * 16 sub-bins per power of two, with a bitmap of non-empty bins, so the
 * smallest bin that surely fits is found in O(1). The bin that holds the
 * request's own length is also searched, a few entries deep, for an exact
 * or closer fit. Records live in fixed-size chunks (stable ids for the bin
 * lists, no copying on growth).
 *
 * One table maps a run's end unit to its record. Keyed by the end, a run
 * that an allocation takes from its front, the usual case, keeps its key,
 * and so does a run that a free extends to the left; only a free that
 * extends a run to the right moves a key. The run that starts at a unit
 * is found through its end: the caller knows it as the next allocation's
 * start (fit.c's start bits), so a second table keyed by start is not
 * needed.
 */
#include "core/core.h"

#include <stdlib.h>
#include <string.h>

#define EXT_CHUNK 4096u
#define EXT_PEEK 16 /* entries of a bin examined for the closest fit */

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
  if (gpb__atab_init(&x->by_end, 256)) {
    gpb__exts_fini(x);
    return GPB_EHOSTMEM;
  }
  return 0;
}

void gpb__exts_fini(gpb__exts_t *x) {
  for (uint32_t c = 0; c < x->nchunks; c++) free(x->chunks[c]);
  free(x->chunks);
  gpb__atab_fini(&x->by_end);
  memset(x, 0, sizeof *x);
}

void gpb__exts_clear(gpb__exts_t *x) {
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

size_t gpb__exts_bytes(const gpb__exts_t *x) {
  return sizeof *x + gpb__atab_bytes(&x->by_end) +
         (size_t)x->nchunks * EXT_CHUNK * sizeof(gpb__ext_t);
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

static void ext_put_back(gpb__exts_t *x, uint32_t id) {
  ext_rec(x, id)->next = x->free_head;
  x->free_head = id;
}

/* The shortest run that bin b holds. */
static uint64_t ext_bin_min(uint32_t b) {
  if (b < GPB__EXT_SL) return b;
  uint32_t fl = b / GPB__EXT_SL + GPB__EXT_SLBITS - 1;
  return (1ull << fl) | ((uint64_t)(b % GPB__EXT_SL) << (fl - GPB__EXT_SLBITS));
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

/* Extent `id` now spans [start, start+len): its bin follows its length. */
static void ext_resize(gpb__exts_t *x, uint32_t id, uint64_t start,
                       uint64_t len) {
  gpb__ext_t *e = ext_rec(x, id);
  e->start = start;
  if (ext_bin(len) != e->bin) {
    ext_bin_remove(x, id);
    e->len = len;
    ext_bin_add(x, id);
  } else {
    e->len = len;
  }
}

/* The run ending at unit `end`, or 0. */
static uint32_t ext_ending(const gpb__exts_t *x, uint64_t end) {
  const gpb__arec_t *r = gpb__atab_find(&x->by_end, end);
  return r ? (uint32_t)r->units : 0;
}

/* Keys record `id` by `end`. GPB_EHOSTMEM when the table cannot grow. */
static int ext_key(gpb__exts_t *x, uint64_t end, uint32_t id) {
  gpb__arec_t r = {0};
  r.units = id;
  return gpb__atab_insert(&x->by_end, end, &r);
}

/* A new run [start, start+len), not touching another. */
static int ext_insert(gpb__exts_t *x, uint64_t start, uint64_t len) {
  gpb_assert(len > 0);
  uint32_t id = ext_new(x);
  if (!id) return GPB_EHOSTMEM;
  if (ext_key(x, start + len, id)) {
    ext_put_back(x, id);
    return GPB_EHOSTMEM;
  }
  gpb__ext_t *e = ext_rec(x, id);
  e->start = start;
  e->len = len;
  ext_bin_add(x, id);
  x->count++;
  return 0;
}

/* Drops run `id`, whose key the caller has removed or re-used. */
static void ext_drop(gpb__exts_t *x, uint32_t id) {
  ext_bin_remove(x, id);
  ext_put_back(x, id);
  x->count--;
}

int gpb__exts_add(gpb__exts_t *x, uint64_t start, uint64_t len, int left,
                  uint64_t right_end, uint64_t *rs, uint64_t *re) {
  uint64_t end = start + len;
  uint32_t l = left ? ext_ending(x, start) : 0;
  uint32_t r = right_end ? ext_ending(x, right_end) : 0;
  gpb_assert(!right_end || (r && ext_rec(x, r)->start == end));
  if (r) { /* the right run grows to the left: its key stays */
    uint64_t s = start;
    if (l) { /* and swallows the left run */
      s = ext_rec(x, l)->start;
      gpb__atab_remove(&x->by_end, start);
      ext_drop(x, l);
    }
    ext_resize(x, r, s, right_end - s);
    *rs = s;
    *re = right_end;
    return 0;
  }
  if (l) { /* the left run grows to the right: re-key it, insert first */
    uint64_t s = ext_rec(x, l)->start;
    if (ext_key(x, end, l)) return GPB_EHOSTMEM;
    gpb__atab_remove(&x->by_end, start);
    ext_resize(x, l, s, end - s);
    *rs = s;
    *re = end;
    return 0;
  }
  *rs = start;
  *re = end;
  return ext_insert(x, start, len);
}

/* Start of the first position in e aligned to 2^a where n units fit, or
 * UINT64_MAX. */
static uint64_t ext_fit(const gpb__ext_t *e, uint64_t n, uint32_t a) {
  uint64_t p = (e->start + (1ull << a) - 1) & ~((1ull << a) - 1);
  return p + n <= e->start + e->len ? p : UINT64_MAX;
}

int gpb__exts_take(gpb__exts_t *x, uint64_t n, uint32_t align_order,
                   uint64_t *out, uint64_t *rs, uint64_t *re) {
  uint64_t need = n + (1ull << align_order) - 1;
  uint32_t best = 0;
  uint64_t best_len = UINT64_MAX, best_pos = 0;
  /* The request's own bin may hold closer fits than the next bins. */
  uint32_t own = ext_bin(need < n ? UINT64_MAX : need);
  int peek = 0;
  uint32_t id = x->head[own];
  for (; id && peek < EXT_PEEK; id = ext_rec(x, id)->next, peek++) {
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
      /* Every run of a bin above `need`'s holds the request aligned;
       * the bin spans 1/16 of a power of two: the closest of a few. */
      int look = 0;
      uint64_t least = ext_bin_min(b); /* no closer fit in this bin */
      for (uint32_t id = x->head[b]; id && look < EXT_PEEK;
           id = ext_rec(x, id)->next, look++) {
        const gpb__ext_t *e = ext_rec(x, id);
        uint64_t p = ext_fit(e, n, align_order);
        if (p != UINT64_MAX && e->len < best_len) {
          best = id;
          best_len = e->len;
          best_pos = p;
          if (best_len == least) break;
        }
      }
      if (best) break;
      b++;
    }
  }
  /* Nothing larger: the rest of the own bin, past the peek, before
   * failing (only a request that would fail pays for it). */
  for (; !best && id; id = ext_rec(x, id)->next)
    if ((best_pos = ext_fit(ext_rec(x, id), n, align_order)) != UINT64_MAX)
      best = id;
  if (!best) return GPB_ENOMEM;
  gpb__ext_t *e = ext_rec(x, best);
  uint64_t s = e->start, end = s + e->len, p = best_pos;
  if (p == s && p + n == end) { /* exact */
    gpb__atab_remove(&x->by_end, end);
    ext_drop(x, best);
  } else if (p == s) { /* the usual case: the run keeps its end, and key */
    ext_resize(x, best, p + n, end - p - n);
  } else if (p + n == end) { /* aligned to the end: [s, p) re-keyed */
    if (ext_key(x, p, best)) return GPB_EHOSTMEM;
    gpb__atab_remove(&x->by_end, end);
    ext_resize(x, best, s, p - s);
  } else { /* aligned inside: [p+n, end) keeps record and key, [s, p) new */
    if (ext_insert(x, s, p - s)) return GPB_EHOSTMEM;
    ext_resize(x, best, p + n, end - p - n);
  }
  *out = p;
  *rs = s;
  *re = end;
  return 0;
}

int gpb__exts_remove(gpb__exts_t *x, uint64_t start, uint64_t end) {
  uint32_t id = ext_ending(x, end);
  if (!id || ext_rec(x, id)->start != start) return GPB_ENOTFOUND;
  gpb__atab_remove(&x->by_end, end);
  ext_drop(x, id);
  return 0;
}

const gpb__ext_t *gpb__exts_at(const gpb__exts_t *x, uint64_t start,
                               uint64_t end) {
  uint32_t id = ext_ending(x, end);
  if (!id || ext_rec(x, id)->start != start || ext_rec(x, id)->len != end - start)
    return NULL;
  return ext_rec(x, id);
}

uint64_t gpb__exts_count(const gpb__exts_t *x) { return x->count; }

int gpb__exts_check(const gpb__exts_t *x) {
  uint64_t n = 0;
  for (uint32_t b = 0; b < GPB__EXT_BINS; b++) {
    int bit = (int)((x->binmap[b / 64] >> (b % 64)) & 1u);
    if (bit != (x->head[b] != 0))
      return gpb__fail(GPB_ECORRUPT, "free-run bin %u: map bit %d, head %u", b,
                       bit, x->head[b]);
    uint64_t least = ext_bin_min(b);
    if (b && (ext_bin(least) != b || ext_bin(least - 1) == b))
      return gpb__fail(GPB_ECORRUPT, "free-run bin %u: shortest run %llu is "
                       "not the bin's first length", b, (unsigned long long)least);
    uint32_t prev = 0;
    for (uint32_t id = x->head[b]; id; id = ext_rec(x, id)->next) {
      const gpb__ext_t *e = ext_rec(x, id);
      if (id > x->made || e->prev != prev || e->bin != b ||
          ext_bin(e->len) != b || e->len == 0 || ++n > x->count ||
          ext_ending(x, e->start + e->len) != id)
        return gpb__fail(GPB_ECORRUPT, "free-run bin %u: record %u is not "
                         "linked, binned by its length or keyed by its end",
                         b, id);
      prev = id;
    }
  }
  if (n != x->count || gpb__atab_count(&x->by_end) != n)
    return gpb__fail(GPB_ECORRUPT, "%llu free runs binned, %llu counted, "
                     "%llu keyed", (unsigned long long)n,
                     (unsigned long long)x->count,
                     (unsigned long long)gpb__atab_count(&x->by_end));
  return 0;
}
