/* SPDX-License-Identifier: MIT */
/*
 * extents.c: free runs for the best-fit core (fit.c).
 *
 * A free run is a maximal run of free units, whatever buddy blocks it is
 * made of. Best fit places an allocation at the start of a well-fitting
 * run (or its first aligned unit), or at its end when the request is an
 * eighth of the pool or more (x->high), and fit.c derives the buddy
 * blocks.
 *
 * Runs are binned by length as in TLSF: exact bins below 16 units, then
 * 16 sub-bins per power of two, with a bitmap of non-empty bins, so the
 * smallest bin that surely fits is found in O(1). The bin that holds the
 * request's own length is also searched, a few entries deep, for an exact
 * or closer fit. Records live in fixed-size chunks (stable ids for the bin
 * lists, no copying on growth).
 *
 * Runs are named by record id, and the id is all the caller keeps: fit.c
 * stores the id of the run ending at a unit in the record of the
 * allocation that starts there (or in a tail slot, at the end of the pool
 * or of a superblock), and checks it with gpb__exts_ending before use. A
 * run that an allocation takes from its front, the usual case, keeps its
 * end and its id, and so does one that a free extends to the left; the
 * ids of runs that end no more are left stale, not hunted down, since
 * the check refuses them.
 *
 * Runs are also found by where they start, through a small cache: a slot
 * per hash of the start, written whenever a run gets a new start, never
 * chained or cleared. What a slot names is checked like a kept id, so a
 * slot lost to another run only costs the caller its slower way.
 */
#include "core/core.h"

#include <stdlib.h>
#include <string.h>

#define EXT_PEEK 16 /* entries of a bin examined for the closest fit */

#define ext_rec gpb__exts_rec

static uint32_t ext_bin(uint64_t len) {
  if (len < GPB__EXT_SL) return (uint32_t)len;
  /* (fl - SLBITS + 1) * SL + the SLBITS bits below the top one, where
   * len >> (fl - SLBITS) is that top bit (SL) and those bits. */
  uint32_t sh = 63u - (uint32_t)__builtin_clzll(len) - GPB__EXT_SLBITS;
  return (uint32_t)(len >> sh) + sh * GPB__EXT_SL;
}

int gpb__exts_init(gpb__exts_t *x, uint64_t ntails) {
  memset(x, 0, sizeof *x);
  x->tails = calloc(ntails ? ntails : 1, sizeof *x->tails);
  x->starts = calloc(GPB__EXT_STARTS, sizeof *x->starts);
  if (!x->tails || !x->starts) {
    gpb__exts_fini(x);
    return GPB_EHOSTMEM;
  }
  x->ntails = ntails;
  x->high = UINT64_MAX;
  /* The first chunk now, so that the first run (the whole core, made
   * while nothing can fail) needs no allocation. */
  x->chunks = malloc(sizeof *x->chunks);
  if (x->chunks) x->chunks[0] = malloc(GPB__EXT_CHUNK * sizeof(gpb__ext_t));
  if (!x->chunks || !x->chunks[0]) {
    gpb__exts_fini(x);
    return GPB_EHOSTMEM;
  }
  x->nchunks = 1;
  return 0;
}

void gpb__exts_fini(gpb__exts_t *x) {
  for (uint32_t c = 0; c < x->nchunks; c++) free(x->chunks[c]);
  free(x->chunks);
  free(x->tails);
  free(x->starts);
  memset(x, 0, sizeof *x);
}

void gpb__exts_clear(gpb__exts_t *x) {
  memset(x->tails, 0, x->ntails * sizeof *x->tails);
  memset(x->starts, 0, GPB__EXT_STARTS * sizeof *x->starts);
  memset(x->head, 0, sizeof x->head);
  memset(x->binmap, 0, sizeof x->binmap);
  x->free_head = 0;
  x->count = 0;
  /* Every made record goes back on the free list, holding no run. */
  for (uint32_t id = x->made; id >= 1; id--) {
    ext_rec(x, id)->len = 0;
    ext_rec(x, id)->next = x->free_head;
    x->free_head = id;
  }
}

size_t gpb__exts_bytes(const gpb__exts_t *x) {
  return sizeof *x + x->ntails * sizeof *x->tails +
         GPB__EXT_STARTS * sizeof *x->starts +
         (size_t)x->nchunks * GPB__EXT_CHUNK * sizeof(gpb__ext_t);
}

static uint32_t ext_new(gpb__exts_t *x) {
  if (x->free_head) {
    uint32_t id = x->free_head;
    x->free_head = ext_rec(x, id)->next;
    return id;
  }
  uint32_t id = x->made + 1; /* id 0 means none */
  if (id / GPB__EXT_CHUNK >= x->nchunks) {
    gpb__ext_t **c = realloc(x->chunks, (x->nchunks + 1) * sizeof *c);
    if (!c) return 0;
    x->chunks = c;
    c[x->nchunks] = malloc(GPB__EXT_CHUNK * sizeof(gpb__ext_t));
    if (!c[x->nchunks]) return 0;
    x->nchunks++;
  }
  x->made = id;
  return id;
}

static void ext_put_back(gpb__exts_t *x, uint32_t id) {
  ext_rec(x, id)->len = 0; /* its id, kept anywhere, now finds nothing */
  ext_rec(x, id)->next = x->free_head;
  x->free_head = id;
}

/* The shortest run that bin b holds. */
static uint64_t ext_bin_min(uint32_t b) {
  if (b < GPB__EXT_SL) return b;
  return (uint64_t)(GPB__EXT_SL | (b % GPB__EXT_SL)) << (b / GPB__EXT_SL - 1);
}

static inline void ext_bin_add(gpb__exts_t *x, uint32_t id, uint32_t b) {
  gpb__ext_t *e = ext_rec(x, id);
  e->bin = b;
  e->prev = 0;
  e->next = x->head[b];
  if (e->next) ext_rec(x, e->next)->prev = id;
  x->head[b] = id;
  x->binmap[b / 64] |= 1ull << (b % 64);
}

static inline void ext_bin_remove(gpb__exts_t *x, uint32_t id) {
  gpb__ext_t *e = ext_rec(x, id);
  if (e->prev)
    ext_rec(x, e->prev)->next = e->next;
  else
    x->head[e->bin] = e->next;
  if (e->next) ext_rec(x, e->next)->prev = e->prev;
  if (!x->head[e->bin]) x->binmap[e->bin / 64] &= ~(1ull << (e->bin % 64));
}

/* Extent `id` now spans [start, start+len): its bin follows its length. */
static GPB__INLINE void ext_resize(gpb__exts_t *x, uint32_t id,
                                   uint64_t start, uint64_t len) {
  gpb__ext_t *e = ext_rec(x, id);
  uint32_t b = ext_bin(len);
  if (e->start != start) *gpb__exts_start_slot(x, start) = id;
  e->start = start;
  e->len = len;
  if (b != e->bin) {
    ext_bin_remove(x, id);
    ext_bin_add(x, id, b);
  }
}

/* A new run [start, start+len), not touching another: its id, or 0 when
 * no record can be made. */
static uint32_t ext_insert(gpb__exts_t *x, uint64_t start, uint64_t len) {
  gpb_assert(len > 0);
  uint32_t id = ext_new(x);
  if (!id) return 0;
  gpb__ext_t *e = ext_rec(x, id);
  e->start = start;
  e->len = len;
  *gpb__exts_start_slot(x, start) = id;
  ext_bin_add(x, id, ext_bin(len));
  x->count++;
  return id;
}

void gpb__exts_drop(gpb__exts_t *x, uint32_t id) {
  ext_bin_remove(x, id);
  ext_put_back(x, id);
  x->count--;
}

int gpb__exts_add(gpb__exts_t *x, uint64_t start, uint64_t len, uint32_t l,
                  uint32_t r, uint64_t *rs, uint64_t *re, uint32_t *id) {
  uint64_t s = l ? ext_rec(x, l)->start : start, end = start + len;
  gpb_assert(!l || s + ext_rec(x, l)->len == start);
  gpb_assert(!r || ext_rec(x, r)->start == end);
  if (r) { /* the right run grows to the left, and swallows the left one */
    end += ext_rec(x, r)->len;
    if (l) gpb__exts_drop(x, l);
    ext_resize(x, r, s, end - s);
    *id = r;
  } else if (l) { /* the left run grows to the right */
    ext_resize(x, l, s, end - s);
    *id = l;
  } else if (!(*id = ext_insert(x, start, len))) {
    return GPB_EHOSTMEM;
  }
  *rs = s;
  *re = end;
  return 0;
}

/* Start of the first position in e aligned to 2^a where n units fit, or
 * UINT64_MAX. */
static uint64_t ext_fit(const gpb__ext_t *e, uint64_t n, uint32_t a) {
  uint64_t p = (e->start + (1ull << a) - 1) & ~((1ull << a) - 1);
  return p + n <= e->start + e->len ? p : UINT64_MAX;
}

/* Takes [p, p+n) from run `best`, which holds it (gpb__exts_cut). */
static GPB__INLINE int ext_cut(gpb__exts_t *x, uint32_t best, uint64_t n,
                               uint64_t p, uint64_t *out, uint64_t *rs,
                               uint64_t *re, uint32_t *before) {
  gpb__ext_t *e = ext_rec(x, best);
  uint64_t s = e->start, end = s + e->len;
  *before = 0;
  if (p == s && p + n == end) { /* exact */
    gpb__exts_drop(x, best);
  } else if (p == s) { /* the usual case: the run keeps its end, and id */
    ext_resize(x, best, p + n, end - p - n);
  } else if (p + n == end) { /* aligned to the end: [s, p) ends at p now */
    ext_resize(x, best, s, p - s);
    *before = best;
  } else { /* aligned inside: [p+n, end) keeps the id, [s, p) is new */
    if (!(*before = ext_insert(x, s, p - s))) return GPB_EHOSTMEM;
    ext_resize(x, best, p + n, end - p - n);
  }
  *out = p;
  *rs = s;
  *re = end;
  return 0;
}

int gpb__exts_take(gpb__exts_t *x, uint64_t n, uint32_t align_order,
                   uint64_t *out, uint64_t *rs, uint64_t *re,
                   uint32_t *before) {
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
  const gpb__ext_t *e = ext_rec(x, best);
  uint64_t p = best_pos;
  if (n >= x->high) /* the last aligned place; best_pos fits, so p >= it */
    p = (e->start + e->len - n) & ~((1ull << align_order) - 1);
  return ext_cut(x, best, n, p, out, rs, re, before);
}

int gpb__exts_cut(gpb__exts_t *x, uint32_t id, uint64_t n, uint64_t p,
                  uint64_t *out, uint64_t *rs, uint64_t *re, uint32_t *before) {
  return ext_cut(x, id, n, p, out, rs, re, before);
}

uint64_t gpb__exts_count(const gpb__exts_t *x) { return x->count; }

void gpb__exts_blocks(const gpb__exts_t *x, uint64_t out[GPB_MAX_ORDERS]) {
  memset(out, 0, GPB_MAX_ORDERS * sizeof *out);
  /* Through the bins, not the records: after a burst of runs most
   * records may sit on the free list, and the pass must cost the runs. */
  for (uint32_t w = 0; w < (GPB__EXT_BINS + 63) / 64; w++) {
    for (uint64_t m = x->binmap[w]; m; m &= m - 1) {
      uint32_t b = w * 64 + (uint32_t)__builtin_ctzll(m);
      for (uint32_t id = x->head[b]; id; id = ext_rec(x, id)->next) {
        const gpb__ext_t *e = ext_rec(x, id);
        uint64_t l, r;
        gpb__canon_masks(e->start, e->len, &l, &r);
        gpb__count_mask(out, l, 1);
        gpb__count_mask(out, r, 1);
      }
    }
  }
}

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
          ext_bin(e->len) != b || e->len == 0 || ++n > x->count)
        return gpb__fail(GPB_ECORRUPT, "free-run bin %u: record %u is not "
                         "linked or binned by its length", b, id);
      prev = id;
    }
  }
  if (n != x->count)
    return gpb__fail(GPB_ECORRUPT, "%llu free runs binned, %llu counted",
                     (unsigned long long)n, (unsigned long long)x->count);
  return 0;
}
