/* SPDX-License-Identifier: MIT */
/*
 * fit.c: the best-fit core (GPB_POLICY_BESTFIT), buddy blocks without
 * per-block work.
 *
 * Under best fit, placement reads only the free runs (extents.c): maximal
 * runs of free units, binned by length. Every allocation is still the
 * canonical run of its range (maximal aligned power-of-two blocks, left to
 * right), and so is every free run, since a best-fit core merges at once
 * (no deferred pairs): a free block whose buddy is free is never left
 * standing. The block map is therefore a function of the runs and the
 * allocations, and this core keeps no per-order bitsets at all. What the
 * buddy core does block by block, here is arithmetic:
 *
 *  - Taking [u, u+n) out of the run [s, e) cuts the run at u and at u+n.
 *    The blocks that split are exactly the nodes inside [s, e) that hold a
 *    cut point strictly inside: for each cut, the orders from one above
 *    the point's alignment up to the largest node that still fits in the
 *    run. They split top-down; the rest of the run's blocks are untouched.
 *  - Freeing [u, u+n) into the merged run [s, e) is the mirror image: the
 *    nodes inside [s, e) that hold u or u+n strictly inside merge,
 *    bottom-up, and nothing else changes.
 *
 * So an allocation or free costs the run search, a few table operations
 * and O(orders) register arithmetic for its SPLIT and MERGE events,
 * instead of O(orders^2) bit tests and two bitset updates per block of
 * the run. The core does not count its free blocks per order (nfree
 * stays zero). When only the stats listen, nor does the call: it counts
 * how many nodes split or merged, and the free blocks per order, a
 * function of the runs, are added into the stats when they are read
 * (gpb__fit_flush, a pass over the runs). Otherwise the stats count them
 * from the events. gpb__buddy_nfree counts them from a walk of the map
 * when asked (the checks compare it with the stats). The start bit of each
 * allocation lets lookups find the run around any unit: it begins where
 * the previous allocation ends and ends where the next one starts.
 */
#include "core/core.h"
#include "plan/plan.h"

#include <stdlib.h>
#include <string.h>

/* The orders [*lo, *hi] of the nodes inside [s, e) holding unit p strictly
 * inside (s < p < e). Empty when *hi < *lo.
 *
 * A node of order k holds p strictly inside when k > ctz(p). It lies
 * inside [s, e) when its base, p with the low k bits cleared, is >= s and
 * its last unit, p with them set, is <= e - 1. Both hold for small k and
 * fail from some k on. For the base: where p and s first differ (bit d,
 * set in p) the base keeps p's bit for k <= d, so it exceeds s; at k = d+1
 * and above it equals s's own high bits, which is >= s only while s has
 * no set bit below k. The end mirrors it with e - 1 and p's clear bits. */
static inline void fit_chain(const gpb__buddy_t *b, uint64_t p, uint64_t s,
                             uint64_t e, uint32_t *lo, uint32_t *hi) {
  uint32_t kl = 64, kr, k;
  if (s) {
    uint32_t d = 63u - (uint32_t)__builtin_clzll(p ^ s);
    kl = (s & ((2ull << d) - 1)) ? d : (uint32_t)__builtin_ctzll(s);
  }
  uint64_t last = e - 1;
  if (last == p) {
    kr = (uint32_t)__builtin_ctzll(~p);
  } else {
    uint32_t d = 63u - (uint32_t)__builtin_clzll(p ^ last);
    kr = (~last & ((2ull << d) - 1)) ? d : (uint32_t)__builtin_ctzll(~last);
  }
  k = kl < kr ? kl : kr;
  *lo = (uint32_t)__builtin_ctzll(p) + 1;
  *hi = k < b->cap ? k : b->cap;
}

/* Counting in place, a best-fit core keeps its free blocks per order in
 * the counters one of two ways (fcnt in core.h): from the runs, when the
 * counters are read, while there are few runs; or call by call, so that
 * a read never scans more than FIT_RUNS_EAGER runs (about 8 ns each)
 * under the pool's lock. Two thresholds, so that a count hovering at one
 * does not switch back and forth. */
#define FIT_RUNS_LAZY 256
#define FIT_RUNS_EAGER 512

/* Before each take or release, when not counting from the runs, or when
 * the runs became too many for it: switches the way, flushing what was
 * pending the other way first. */
static void fit_mode(gpb__buddy_t *b) {
  if (b->fsync) { /* too many runs now */
    gpb__buddy_flush(b);
    b->fsync = 0;
  } else if (b->sink.counters && !b->sink.put &&
             gpb__exts_count(b->exts) <= FIT_RUNS_LAZY) {
    gpb__buddy_flush(b);
    gpb__exts_blocks(b->exts, b->fcnt);
    b->fsync = 1;
  }
}

void gpb__fit_flush(gpb__buddy_t *b) {
  gpb_stats_t *q = b->sink.counters;
  gpb_assert(q);
  if (b->fsync) { /* what the runs make now, against the baseline */
    uint64_t now[GPB_MAX_ORDERS];
    gpb__exts_blocks(b->exts, now);
    for (uint32_t k = 0; k < GPB_MAX_ORDERS; k++) {
      q->free_blocks[k] += now[k] - b->fcnt[k];
      b->fcnt[k] = now[k];
    }
  } else { /* the chains' ranges, as prefix sums */
    int64_t run = 0;
    for (uint32_t k = 0; k < b->norders; k++) {
      run += b->fpend[k];
      q->free_blocks[k] += (uint64_t)run;
      b->fpend[k] = 0;
    }
  }
  b->fpending = 0;
}

/* Counting call by call: a chain of splits (d = 1) or merges (d = -1) of
 * one node per order lo..hi makes one block of order hi fewer, one more
 * of each order lo..hi-1 (pending in b->fpend, a difference array), and
 * two more of order lo-1. */
static inline void fit_chain_blocks(gpb__buddy_t *b, gpb_stats_t *q,
                                    uint32_t lo, uint32_t hi, uint64_t d) {
  q->free_blocks[hi] -= d;
  b->fpend[lo] += (int64_t)d;
  b->fpend[hi] -= (int64_t)d;
  q->free_blocks[lo - 1] += 2 * d;
}

/* Counts the splits (d = 1) or merges (d = -1) of the nodes of [s, e)
 * holding cut a or cut c (0: no cut there), each node once, when only
 * the stats listen; the blocks they make only when not counted from the
 * runs. Forced inline: a call cost a fifth of it. */
static GPB__INLINE void fit_cuts_count(gpb__buddy_t *b, gpb_stats_t *q,
                                       int split, uint64_t a, uint64_t c,
                                       uint64_t s, uint64_t e) {
  uint64_t d = split ? 1 : (uint64_t)-1;
  uint32_t alo = 1, ahi = 0, clo = 1, chi = 0, m = 64;
  if (a) fit_chain(b, a, s, e, &alo, &ahi);
  if (c) fit_chain(b, c, s, e, &clo, &chi);
  uint64_t n = (ahi >= alo ? ahi - alo + 1 : 0) +
               (chi >= clo ? chi - clo + 1 : 0);
  if (ahi >= alo && chi >= clo) {
    /* Both cuts in one block: the chains share their top nodes, from the
     * order where a and c first agree. Count those once. */
    m = 64u - (uint32_t)__builtin_clzll(a ^ c); /* a>>m == c>>m */
    if (m < alo) m = alo;
    if (m < clo) m = clo;
    n -= m <= ahi ? ahi - m + 1 : 0;
  }
  if (!b->fsync) {
    if (ahi >= alo) fit_chain_blocks(b, q, alo, ahi, d);
    if (chi >= clo) fit_chain_blocks(b, q, clo, chi, d);
    if (m <= ahi) fit_chain_blocks(b, q, m, ahi, -d);
  }
  b->fpending = 1;
  q->seq += n;
  if (split)
    q->splits += n;
  else
    q->merges += n;
}

/* The same, building each node's event (someone else listens). Splits
 * run from the top down, merges from the bottom up, so a node is always
 * a whole free block, or two, when its event comes. */
static void fit_cuts_emit(gpb__buddy_t *b, int type, uint64_t a, uint64_t c,
                          uint64_t s, uint64_t e) {
  uint32_t alo = 1, ahi = 0, clo = 1, chi = 0;
  if (a) fit_chain(b, a, s, e, &alo, &ahi);
  if (c) fit_chain(b, c, s, e, &clo, &chi);
  uint32_t lo = alo < clo ? alo : clo, hi = ahi > chi ? ahi : chi;
  int split = type == GPB_EV_SPLIT;
  for (uint32_t x = 0; hi >= lo && x <= hi - lo; x++) {
    uint32_t k = split ? hi - x : lo + x;
    uint64_t na = UINT64_MAX, nc = UINT64_MAX;
    if (k >= alo && k <= ahi) na = a >> k;
    if (k >= clo && k <= chi) nc = c >> k;
    if (nc == na) nc = UINT64_MAX; /* both cuts in one node: it goes once */
    if (na != UINT64_MAX) gpb__emit_sm(b, type, k, na);
    if (nc != UINT64_MAX) gpb__emit_sm(b, type, k, nc);
  }
}

/* Splits (down) or merges (up) the nodes of [s, e) holding cut a or cut c
 * (0: no cut there), each node once. */
static GPB__INLINE void fit_cuts(gpb__buddy_t *b, int type, uint64_t a,
                                 uint64_t c, uint64_t s, uint64_t e) {
  gpb_stats_t *q = b->sink.counters;
  if (GPB__LIKELY(q && !b->sink.put))
    fit_cuts_count(b, q, type == GPB_EV_SPLIT, a, c, s, e);
  else
    fit_cuts_emit(b, type, a, c, s, e);
}

/* The ALLOC or FREE of units [u, u+n): counted in place without its
 * blocks when they are counted from the runs, else handed to gpb__emit
 * (whose counting loops over them). */
static GPB__INLINE void fit_event(gpb__buddy_t *b, int type, uint64_t u,
                                  uint64_t n, uint64_t requested,
                                  uint32_t tag, uint32_t site,
                                  uint64_t stream) {
  gpb_stats_t *q = b->sink.counters;
  if (GPB__LIKELY(b->fsync)) {
    gpb_assert(q && !b->sink.put); /* a rewiring clears fsync */
    q->seq++;
    gpb__stats_count_bytes(q, type, n << b->min_shift, requested, tag);
    return;
  }
  gpb__emit(b, type, u, n, gpb__canon_order(u, n), requested, tag, site,
            stream);
}

/* The first unit past the superblock that holds u (bounded cores), or
 * the pool's end. */
static inline uint64_t fit_limit(const gpb__buddy_t *b, uint64_t u) {
  if (!b->bounded) return b->nunits;
  uint64_t end = ((u >> b->cap) + 1) << b->cap;
  return end < b->nunits ? end : b->nunits;
}

/* Unit u ends the pool or (bounded cores) a superblock: a run ending
 * there keeps its id in a tail slot, as no allocation of this core need
 * start at u. */
static inline int fit_is_limit(const gpb__buddy_t *b, uint64_t u) {
  return u == b->nunits || (b->bounded && !(u & ((1ull << b->cap) - 1)));
}

static inline uint32_t *fit_tail(const gpb__buddy_t *b, uint64_t u) {
  return &b->exts->tails[b->bounded ? (u - 1) >> b->cap : 0];
}

/* The id of the run ending at unit u, or 0: in the record of the
 * allocation starting at u (r, or found), or in u's tail slot. */
static inline uint32_t fit_ending(const gpb__buddy_t *b, uint64_t u,
                                  const gpb__arec_t *r) {
  uint32_t id;
  if (fit_is_limit(b, u)) {
    id = *fit_tail(b, u);
  } else {
    if (!r) r = gpb__atab_find(&b->atab, u);
    if (!r) return 0;
    id = r->run;
  }
  return gpb__exts_ending(b->exts, id, u) ? id : 0;
}

/* Stores run `id` as the one ending at unit u, which is a limit or the
 * start of the allocation r. */
static inline void fit_set_ending(gpb__buddy_t *b, uint64_t u, gpb__arec_t *r,
                                  uint32_t id) {
  if (r)
    r->run = id;
  else
    *fit_tail(b, u) = id;
}

int gpb__fit_init(gpb__buddy_t *b) {
  b->exts = calloc(1, sizeof *b->exts);
  if (!b->exts || gpb__exts_init(b->exts, 1)) {
    free(b->exts);
    b->exts = NULL;
    return gpb__fail(GPB_EHOSTMEM, "no host memory for the free runs");
  }
  /* An eighth of the pool or more goes to the end of its run: such
   * requests then stack down from the top of the pool, clear of where
   * the small ones settle (docs/DESIGN.md, placement). */
  if (b->nunits >= 8) b->exts->high = b->nunits >> 3;
  return 0;
}

int gpb__fit_init_arena(gpb__buddy_t *b) {
  /* No run until a superblock is adopted, and a tail slot per one. */
  b->bounded = 1;
  gpb__exts_fini(b->exts);
  if (gpb__exts_init(b->exts, ((b->nunits - 1) >> b->cap) + 1))
    return gpb__fail(GPB_EHOSTMEM, "no host memory for the free runs");
  return 0;
}

void gpb__fit_roots(gpb__buddy_t *b) {
  uint64_t s, e;
  uint32_t id;
  gpb__exts_add(b->exts, 0, b->nunits, 0, 0, &s, &e, &id);
  fit_set_ending(b, b->nunits, NULL, id);
}

/* An arena's core counts its wholly free superblocks in nfree[cap], for
 * arena.c to give spares back; a run is one exactly when it is as long
 * as a superblock (it cannot cross one). */
static inline void fit_whole(gpb__buddy_t *b, uint64_t s, uint64_t e,
                             uint64_t d) {
  if (b->bounded && e - s == (1ull << b->cap)) b->nfree[b->cap] += d;
}

/* Records [u, u+units), just cut from the run [s, e), as `rec`: the
 * start bit and the SPLITs (the ALLOC is the caller's). */
static GPB__INLINE void fit_record(gpb__buddy_t *b, uint64_t units, uint64_t u,
                                   uint64_t s, uint64_t e, gpb__arec_t *rec) {
  gpb__atab_put(&b->atab, u, rec); /* the caller made room */
  gpb__atab_prefetch(&b->atab, u + units); /* as in gpb__buddy_alloc */
  gpb__bits_set(&b->starts, u);
  fit_whole(b, s, e, (uint64_t)-1);
  fit_cuts(b, GPB_EV_SPLIT, u > s ? u : 0, e - u > units ? u + units : 0, s, e);
}

/* Takes `units` from a fitting run and records them as `rec` (SPLITs
 * emitted, the ALLOC left to the caller). */
static GPB__INLINE int fit_take(gpb__buddy_t *b, uint64_t units,
                                uint32_t align_order, gpb__arec_t *rec,
                                uint64_t *unit) {
  uint64_t u, s, e;
  if (GPB__UNLIKELY(!b->fsync || b->exts->count > FIT_RUNS_EAGER))
    fit_mode(b);
  /* Room first, so that once the run is cut nothing can fail. */
  if (gpb__atab_room(&b->atab)) return GPB_EHOSTMEM;
  int rc = gpb__exts_take(b->exts, units, align_order, &u, &s, &e, &rec->run);
  if (rc) return rc;
  fit_record(b, units, u, s, e, rec);
  *unit = u;
  return 0;
}

/* Places the request where the core's plan says (lib/plan/follow.c
 * chooses the entry), when that range is free: 0, or 1 to fall back to
 * best fit (the plan says nothing, or the range is taken), or
 * GPB_EHOSTMEM. */
static int fit_take_planned(gpb__buddy_t *b, uint64_t units,
                            uint32_t align_order, gpb__arec_t *rec,
                            uint64_t *unit) {
  gpb__plan_t *pl = b->plan;
  uint64_t p, s, e;
  if (gpb__plan_match(pl, units, &p)) return 1;
  /* [p, p+units) is free when a run starts at p and is long enough (the
   * cache of runs by start says, usually: a layout packs its blocks), or
   * else when no allocation starts in it and the run ending where the
   * next one starts (or the pool ends) begins at p or before: one bitset
   * search and one table lookup. */
  if ((p & ((1ull << align_order) - 1)) || p >= b->nunits ||
      units > b->nunits - p) {
    gpb__plan_busy(pl);
    return 1;
  }
  uint32_t id = gpb__exts_starting(b->exts, p);
  if (!id || gpb__exts_rec(b->exts, id)->len < units) {
    e = gpb__bits_next(&b->starts, p);
    if (e > b->nunits) e = b->nunits;
    id = units <= e - p ? fit_ending(b, e, NULL) : 0;
    if (!id || gpb__exts_rec(b->exts, id)->start > p) {
      gpb__plan_busy(pl);
      return 1;
    }
  }
  if (GPB__UNLIKELY(!b->fsync || b->exts->count > FIT_RUNS_EAGER))
    fit_mode(b);
  if (gpb__atab_room(&b->atab)) return GPB_EHOSTMEM;
  int rc = gpb__exts_cut(b->exts, id, units, p, unit, &s, &e, &rec->run);
  if (rc) return rc;
  fit_record(b, units, p, s, e, rec);
  gpb__plan_placed(pl);
  return 0;
}

int gpb__fit_alloc(gpb__buddy_t *b, gpb__arec_t *rec, uint32_t align_order,
                   uint64_t stream, uint64_t *unit) {
  uint64_t units = rec->units;
  int rc = 1;
  if (GPB__UNLIKELY(b->plan != NULL))
    rc = fit_take_planned(b, units, align_order, rec, unit);
  if (rc > 0) rc = fit_take(b, units, align_order, rec, unit);
  if (rc) {
    gpb__emit(b, GPB_EV_FAIL, 0, 0, gpb__ceil_log2(units), rec->requested,
              rec->tag, rec->site, stream);
    if (rc == GPB_EHOSTMEM)
      return gpb__fail(rc, "no host memory to record the allocation");
    return gpb__fail(GPB_ENOMEM, "no free run of %llu units for %llu bytes",
                     (unsigned long long)units,
                     (unsigned long long)rec->requested);
  }
  fit_event(b, GPB_EV_ALLOC, *unit, units, rec->requested, rec->tag,
            rec->site, stream);
  return 0;
}

int gpb__fit_lend(gpb__buddy_t *b, uint32_t k, uint64_t *unit) {
  gpb__arec_t rec = {.units = 1ull << k, .tag = GPB__TAG_LENT};
  int rc = fit_take(b, 1ull << k, k, &rec, unit);
  /* No ALLOC: the block stays free in the counters, but not in the runs. */
  if (!rc && b->fsync) b->fcnt[k]--;
  if (rc == GPB_EHOSTMEM)
    return gpb__fail(rc, "no host memory to record a lent superblock");
  return rc; /* GPB_ENOMEM quietly, as gpb__buddy_lend */
}

/* Returns the allocation or lent block at u, whose record r the caller
 * found, to the free runs (the FREE, unless `quiet`, between the
 * bookkeeping and the MERGEs). */
static GPB__INLINE int fit_release(gpb__buddy_t *b, uint64_t u,
                                   const gpb__arec_t *r, uint64_t stream,
                                   int quiet) {
  gpb__arec_t a = *r; /* the table's slots move on removal */
  uint64_t s, e, n = a.units, end = u + n, lim = fit_limit(b, u);
  uint32_t l = 0, rt = 0, id;
  gpb__arec_t *next = NULL; /* the allocation at end, if its run changes */
  if (GPB__UNLIKELY(!b->fsync || b->exts->count > FIT_RUNS_EAGER))
    fit_mode(b);
  /* The run before: named in the record, unless u starts a superblock
   * (a bounded core's runs never cross one). */
  if (!b->bounded || (u & ((1ull << b->cap) - 1)))
    l = fit_ending(b, u, &a);
  /* The run after: free unless an allocation starts at end (or end is
   * the limit). The cache of runs by start usually names it; if not, it
   * ends where the next allocation starts. */
  if (end < lim && !gpb__bits_test(&b->starts, end)) {
    if (!(rt = gpb__exts_starting(b->exts, end))) {
      uint64_t nx = gpb__bits_next(&b->starts, end);
      rt = fit_ending(b, nx < lim ? nx : lim, NULL);
      if (!rt) return gpb__fail(GPB_ECORRUPT, "no free run ends at unit %llu",
                                (unsigned long long)(nx < lim ? nx : lim));
    }
  } else if (end < lim && !(next = gpb__atab_find(&b->atab, end))) {
    return gpb__fail(GPB_ECORRUPT, "unit %llu has a start bit but no "
                     "allocation", (unsigned long long)end);
  }
  /* First, as it alone can fail: then nothing has changed. */
  if (gpb__exts_add(b->exts, u, n, l, rt, &s, &e, &id))
    return gpb__fail(GPB_EHOSTMEM, "no host memory to record the free run");
  if (!rt) fit_set_ending(b, end, next, id); /* before the table moves */
  /* r is the table's own slot (const only to this file's readers): no
   * insert came between, so it is still there. */
  gpb__atab_remove_rec(&b->atab, (gpb__arec_t *)r);
  gpb__bits_clear(&b->starts, u);
  fit_whole(b, s, e, 1);
  if (!quiet)
    fit_event(b, GPB_EV_FREE, u, n, a.requested, a.tag, a.site, stream);
  fit_cuts(b, GPB_EV_MERGE, u > s ? u : 0, e - u > n ? u + n : 0, s, e);
  return 0;
}

int gpb__fit_free(gpb__buddy_t *b, uint64_t u, const gpb__arec_t *rec,
                  uint64_t stream) {
  return fit_release(b, u, rec, stream, 0);
}

int gpb__fit_unlend(gpb__buddy_t *b, uint64_t u, const gpb__arec_t *rec) {
  uint32_t k = (uint32_t)__builtin_ctzll(rec->units);
  /* No FREE: it was never allocated to watchers, and the block was free
   * in the counters all along. */
  int rc = fit_release(b, u, rec, 0, 1);
  if (!rc && b->fsync) b->fcnt[k]++;
  return rc;
}

int gpb__fit_sb_free(const gpb__buddy_t *b, uint64_t sb) {
  uint64_t end = (sb + 1) << b->cap;
  const gpb__ext_t *e =
      gpb__exts_ending(b->exts, fit_ending(b, end, NULL), end);
  return e && e->start == sb << b->cap;
}

int gpb__fit_adopt(gpb__buddy_t *b, uint64_t u) {
  uint64_t s, e;
  uint32_t id;
  /* A superblock arrives whole and merges with nothing: its neighbours
   * are other superblocks. */
  if (gpb__exts_add(b->exts, u, 1ull << b->cap, 0, 0, &s, &e, &id))
    return gpb__fail(GPB_EHOSTMEM, "no host memory for a superblock's run");
  fit_set_ending(b, e, NULL, id);
  b->nfree[b->cap]++;
  if (b->fsync) b->fcnt[b->cap]++; /* no event: the counters know it */
  return 0;
}

void gpb__fit_disown(gpb__buddy_t *b, uint64_t u) {
  uint32_t id = fit_ending(b, u + (1ull << b->cap), NULL);
  gpb_assert(id);
  gpb__exts_drop(b->exts, id);
  b->nfree[b->cap]--;
  if (b->fsync) b->fcnt[b->cap]--; /* no event, as gpb__fit_adopt */
}

/* The free run holding unit u: 0 and [*s, *e), or -1 when u lies in an
 * allocation (*s is then its first unit), or GPB_ECORRUPT. */
static int fit_run_around(const gpb__buddy_t *b, uint64_t u, uint64_t *s,
                          uint64_t *e) {
  uint64_t p = gpb__bits_prev(&b->starts, u), lim = fit_limit(b, u);
  uint64_t lo = b->bounded ? (u >> b->cap) << b->cap : 0;
  if (p != UINT64_MAX) {
    const gpb__arec_t *r = gpb__atab_find(&b->atab, p);
    if (!r) return GPB_ECORRUPT;
    if (p + r->units > u) {
      *s = p;
      return -1;
    }
    if (p + r->units > lo) lo = p + r->units;
  }
  uint64_t nx = gpb__bits_next(&b->starts, u);
  *s = lo;
  *e = nx < lim ? nx : lim;
  return 0;
}

int gpb__fit_misuse(const gpb__buddy_t *b, uint64_t off) {
  uint64_t s, e, u = off >> b->min_shift;
  int rc = fit_run_around(b, u, &s, &e);
  if (rc == 0)
    return gpb__fail(GPB_EDOUBLEFREE,
                     "offset %llu lies in a free block (freed twice?)",
                     (unsigned long long)off);
  return gpb__fail(GPB_EINTERIOR,
                   "offset %llu is inside the allocation at offset %llu",
                   (unsigned long long)off,
                   rc == -1 ? (unsigned long long)(s << b->min_shift) : 0ull);
}

int gpb__fit_visit_range(const gpb__buddy_t *b, uint64_t u0, uint64_t u1,
                         gpb_visit_fn fn, void *user) {
  gpb_block_info_t bi;
  for (uint64_t u = u0; u < u1;) {
    const gpb__arec_t *r =
        gpb__bits_test(&b->starts, u) ? gpb__atab_find(&b->atab, u) : NULL;
    uint64_t p, m;
    if (r) {
      int rc = gpb__buddy_visit_alloc(b, r, fn, user);
      if (rc) return rc;
      u += r->units;
      continue;
    }
    uint64_t s, e;
    if (fit_run_around(b, u, &s, &e))
      return gpb__fail(GPB_ECORRUPT, "unit %llu is in no block",
                       (unsigned long long)u);
    for (p = s, m = e - s; p < u;) { /* the run's blocks before u */
      uint32_t k = gpb__canon_order(p, m);
      p += 1ull << k;
      m -= 1ull << k;
    }
    if (p != u)
      return gpb__fail(GPB_ECORRUPT, "unit %llu starts no block",
                       (unsigned long long)u);
    while (m && p < u1) {
      uint32_t k = gpb__canon_order(p, m);
      gpb__fill_free(b, &bi, p, k);
      int rc = fn(&bi, user);
      if (rc) return rc;
      p += 1ull << k;
      m -= 1ull << k;
    }
    u = p;
  }
  return 0;
}

int gpb__fit_lookup(const gpb__buddy_t *b, uint64_t u, gpb_block_info_t *out) {
  uint64_t s, e;
  int rc = fit_run_around(b, u, &s, &e);
  const gpb__arec_t *r = NULL;
  if (rc == -1) {
    r = gpb__atab_find(&b->atab, s);
    e = s + r->units;
  } else if (rc) {
    return gpb__fail(GPB_ECORRUPT, "unit %llu is in no block",
                     (unsigned long long)u);
  }
  for (uint64_t p = s, m = e - s; m;) {
    uint32_t k = gpb__canon_order(p, m);
    if (u < p + (1ull << k)) {
      if (r)
        gpb__fill_used(b, out, r, p, k);
      else
        gpb__fill_free(b, out, p, k);
      return 0;
    }
    p += 1ull << k;
    m -= 1ull << k;
  }
  return gpb__fail(GPB_ECORRUPT, "unit %llu is in no block",
                   (unsigned long long)u);
}

/* Node (k, i) is one free block of this core: a run covers it whole.
 * Used where the node's buddy lies outside the core, so that the run
 * cannot hold the parent and the node is one of its canonical blocks. */
static int fit_node_free(const gpb__buddy_t *b, uint32_t k, uint64_t i) {
  uint64_t s, e, u = i << k;
  if (u >= b->nunits || (1ull << k) > b->nunits - u) return 0;
  return fit_run_around(b, u, &s, &e) == 0 && s <= u && e - u >= (1ull << k);
}

static int fit_key_cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

size_t gpb__fit_merged(const gpb__buddy_t *b, const uint64_t *xs, size_t nx,
                       int64_t *d) {
  /* A best-fit core merges at once, so only nodes free outside it (an
   * arena's wholly free superblocks) can merge: with each other, or with
   * a free block of this core next to them, level by level up. */
  if (!nx) return 0;
  uint64_t few[32], *cur = nx <= 16 ? few : malloc(2 * nx * sizeof *cur);
  if (!cur) return 0; /* no memory: the figures count the map as it is */
  uint64_t *next = cur + nx;
  const uint64_t imask = (1ull << 58) - 1;
  memcpy(cur, xs, nx * sizeof *cur);
  qsort(cur, nx, sizeof *cur, fit_key_cmp);
  size_t nc = nx;
  for (uint32_t k = (uint32_t)(cur[0] >> 58); nc && k + 1 < b->norders; k++) {
    size_t nn = 0;
    for (size_t x = 0; x < nc; x++) {
      uint64_t i = cur[x] & imask;
      if (x + 1 < nc && (cur[x + 1] & imask) == (i ^ 1) && !(i & 1)) {
        x++; /* both halves free outside */
      } else if (!fit_node_free(b, k, i ^ 1)) {
        continue; /* stays as it is */
      }
      d[k] -= 2;
      d[k + 1] += 1;
      next[nn++] = GPB__NODE(k + 1, i >> 1);
    }
    memcpy(cur, next, nn * sizeof *cur);
    nc = nn;
  }
  if (cur != few) free(cur);
  return 0;
}

#define CORRUPT(...) gpb__fail(GPB_ECORRUPT, __VA_ARGS__)

/* Walks units [u0, u1): allocations and runs, each run one extent. */
static int fit_check_walk(const gpb__buddy_t *b, uint64_t u0, uint64_t u1,
                          uint64_t nfree[GPB_MAX_ORDERS], uint64_t *allocs,
                          uint64_t *runs, uint64_t *whole) {
  for (uint64_t u = u0; u < u1;) {
    if (gpb__bits_test(&b->starts, u)) {
      const gpb__arec_t *r = gpb__atab_find(&b->atab, u);
      if (!r)
        return CORRUPT("unit %llu has a start bit but no allocation",
                       (unsigned long long)u);
      int lent = r->tag == GPB__TAG_LENT && !b->bounded &&
                 !(r->units & (r->units - 1)) && !(u & (r->units - 1));
      if (r->units == 0 || r->units > u1 - u ||
          r->requested > (r->units << b->min_shift) ||
          (r->tag >= GPB_MAX_TAGS && !lent))
        return CORRUPT("allocation at unit %llu has a bad record",
                       (unsigned long long)u);
      uint64_t nx = gpb__bits_next(&b->starts, u + 1);
      if (nx < u + r->units)
        return CORRUPT("allocations at units %llu and %llu overlap",
                       (unsigned long long)u, (unsigned long long)nx);
      (*allocs)++;
      u += r->units;
      continue;
    }
    /* A free run: up to the next allocation, and exactly one recorded. */
    uint64_t nx = gpb__bits_next(&b->starts, u);
    uint64_t e = nx < u1 ? nx : u1;
    uint32_t id = fit_ending(b, e, NULL);
    if (!id || gpb__exts_ending(b->exts, id, e)->start != u)
      return CORRUPT("free run of %llu units at unit %llu is not the run "
                     "its end names", (unsigned long long)(e - u),
                     (unsigned long long)u);
    (*runs)++;
    if (b->bounded && e - u == (1ull << b->cap)) (*whole)++;
    for (uint64_t p = u, m = e - u; m;) {
      uint32_t k = gpb__canon_order(p, m);
      nfree[k]++;
      p += 1ull << k;
      m -= 1ull << k;
    }
    u = e;
  }
  return 0;
}

int gpb__fit_check(const gpb__buddy_t *b, const uint64_t *sb, uint64_t nsb,
                   uint64_t nfree[GPB_MAX_ORDERS]) {
  uint64_t allocs = 0, runs = 0, whole = 0;
  memset(nfree, 0, GPB_MAX_ORDERS * sizeof *nfree);
  if (gpb__bits_check(&b->starts))
    return CORRUPT("start bits: summary disagrees with the bitset");
  if (gpb__exts_check(b->exts)) return GPB_ECORRUPT;
  if (!sb && b->bounded) return CORRUPT("an arena's core is walked by superblock");
  if (!sb) {
    int rc = fit_check_walk(b, 0, b->nunits, nfree, &allocs, &runs, &whole);
    if (rc) return rc;
  }
  for (uint64_t x = 0; sb && x < nsb; x++) {
    uint64_t u0 = sb[x] << b->cap;
    if (u0 >= b->nunits || (1ull << b->cap) > b->nunits - u0)
      return CORRUPT("superblock %llu is outside the pool",
                     (unsigned long long)sb[x]);
    int rc = fit_check_walk(b, u0, u0 + (1ull << b->cap), nfree, &allocs,
                            &runs, &whole);
    if (rc) return rc;
  }
  if (b->bounded && whole != b->nfree[b->cap])
    return CORRUPT("%llu wholly free superblocks, count says %llu",
                   (unsigned long long)whole,
                   (unsigned long long)b->nfree[b->cap]);
  if (allocs != gpb__atab_count(&b->atab))
    return CORRUPT("%llu allocations reachable, %llu recorded",
                   (unsigned long long)allocs,
                   (unsigned long long)gpb__atab_count(&b->atab));
  if (gpb__bits_count(&b->starts) != allocs)
    return CORRUPT("%llu start bits for %llu allocations",
                   (unsigned long long)gpb__bits_count(&b->starts),
                   (unsigned long long)allocs);
  if (runs != gpb__exts_count(b->exts))
    return CORRUPT("%llu free runs, %llu extents recorded",
                   (unsigned long long)runs,
                   (unsigned long long)gpb__exts_count(b->exts));
  for (uint32_t k = 0; k < GPB_MAX_ORDERS; k++) {
    if (b->npairs[k] || (k < b->norders && b->ndq[k]))
      return CORRUPT("order %u: a best-fit core left buddies unmerged", k);
  }
  return 0;
}
