/* SPDX-License-Identifier: MIT */
/*
 * core.h: the buddy core and its parts, on offsets only: hierarchical
 * bitsets (bitset.c), the allocation table (alloctab.c), maximal free runs
 * for best fit (extents.c), the core itself with its checker and visitor
 * (buddy.c), the counters as a function of the events (stats.c), and the
 * models built on a core (model.c). No locks, no pointers, no CUDA, and
 * no knowledge of consumers: events leave through gpb__sink_t.
 */
#ifndef GPB_CORE_H
#define GPB_CORE_H

#include "base/base.h"

#include <string.h>

/* ---------------------------------------------------------------- bitset */

#define GPB__BITS_MAXLEV 8

/* A bitset with summary levels: bit j of level l+1 is set iff word j of
 * level l is nonzero, so the lowest set bit is found top-down with one
 * count-trailing-zeros per level. */
typedef struct gpb__bits {
  uint64_t nbits;
  int nlev;
  uint64_t nwords[GPB__BITS_MAXLEV];
  uint64_t *w[GPB__BITS_MAXLEV];
} gpb__bits_t;

GPB__HIDDEN int gpb__bits_init(gpb__bits_t *b, uint64_t nbits);
GPB__HIDDEN void gpb__bits_fini(gpb__bits_t *b);
GPB__HIDDEN void gpb__bits_zero(gpb__bits_t *b);
/* Maps every page now, so no allocation later takes a first-touch fault. */
GPB__HIDDEN void gpb__bits_prefault(gpb__bits_t *b);
/* Lowest set bit, or UINT64_MAX when empty. */
GPB__HIDDEN uint64_t gpb__bits_first(const gpb__bits_t *b);
/* Highest set bit at or below i, or UINT64_MAX. */
GPB__HIDDEN uint64_t gpb__bits_prev(const gpb__bits_t *b, uint64_t i);
/* The first set bit at or after i, or UINT64_MAX. */
GPB__HIDDEN uint64_t gpb__bits_next(const gpb__bits_t *b, uint64_t i);
/* 0 when the summary levels agree with the bits. */
GPB__HIDDEN int gpb__bits_check(const gpb__bits_t *b);
GPB__HIDDEN uint64_t gpb__bits_count(const gpb__bits_t *b);
GPB__HIDDEN size_t gpb__bits_bytes(const gpb__bits_t *b);

static inline int gpb__bits_test(const gpb__bits_t *b, uint64_t i) {
  return (int)((b->w[0][i >> 6] >> (i & 63)) & 1u);
}

/* Inline: a split or merge cascade calls these once per level. */
static inline void gpb__bits_set(gpb__bits_t *b, uint64_t i) {
  gpb_assert(i < b->nbits);
  for (int l = 0; l < b->nlev; l++) {
    uint64_t *w = &b->w[l][i >> 6];
    uint64_t was = *w;
    *w = was | (1ull << (i & 63));
    if (was) return; /* the word was already nonzero: summaries hold */
    i >>= 6;
  }
}

static inline void gpb__bits_clear(gpb__bits_t *b, uint64_t i) {
  gpb_assert(i < b->nbits);
  for (int l = 0; l < b->nlev; l++) {
    uint64_t *w = &b->w[l][i >> 6];
    *w &= ~(1ull << (i & 63));
    if (*w) return; /* still nonzero: summaries hold */
    i >>= 6;
  }
}

/* ------------------------------------------------------------ alloc table */

/* One live allocation. Key is the first unit; units is its length. */
typedef struct gpb__arec {
  uint64_t key; /* first unit + 1; 0 = empty, UINT64_MAX = deleted */
  uint64_t units;
  uint64_t requested;
  uint64_t time_ns;
  uint16_t tag;  /* < GPB_MAX_TAGS, or GPB__TAG_LENT */
  uint16_t site; /* call site (<= GPB_MAX_SITES), 0 unknown */
  uint32_t run;  /* best fit: the free run ending where this allocation
                    starts, if it still does (fit.c); the record stays
                    40 bytes */
} gpb__arec_t;

/* Open addressing with linear probing. Growth never rehashes at once: a
 * new table twice the size is made and a few old slots move per call, so
 * no single allocation pays for the whole table. */
typedef struct gpb__atab {
  gpb__arec_t *cur;
  uint64_t cap, used; /* used: live entries in cur */
  gpb__arec_t *old;   /* non-NULL while migrating */
  uint64_t old_cap, old_pos, old_live;
  uint32_t bits, old_bits; /* cap == 1 << bits, old_cap == 1 << old_bits */
} gpb__atab_t;

/* The home slot of key (unit + 1) in a table of 2^bits slots. Fibonacci
 * hashing: one multiply, whose top bits spread the keys' arithmetic
 * progressions (blocks of one size) evenly; gpb__hash64's two rounds
 * cost 10 instructions more per lookup and kept probes no shorter. */
static inline uint64_t gpb__atab_home(uint64_t key, uint32_t bits) {
  return gpb__hash_slot(key, bits);
}

/* Starts fetching the home slot of `unit` (for writing): a record that is
 * about to be found, inserted or removed. A hint; it changes nothing. */
static inline void gpb__atab_prefetch(const gpb__atab_t *t, uint64_t unit) {
  gpb__prefetchw(&t->cur[gpb__atab_home(unit + 1, t->bits)]);
}

GPB__HIDDEN int gpb__atab_init(gpb__atab_t *t, uint64_t cap);
GPB__HIDDEN void gpb__atab_fini(gpb__atab_t *t);
GPB__HIDDEN void gpb__atab_clear(gpb__atab_t *t);
/* The slot holding key in tab (2^bits slots), or NULL. */
static inline gpb__arec_t *gpb__atab_probe(gpb__arec_t *tab, uint32_t bits,
                                           uint64_t key) {
  uint64_t mask = (1ull << bits) - 1;
  for (uint64_t i = gpb__atab_home(key, bits);; i = (i + 1) & mask) {
    if (tab[i].key == key) return &tab[i];
    if (tab[i].key == 0) return NULL;
  }
}
/* The old table's record of key while migrating, or NULL. */
GPB__HIDDEN gpb__arec_t *gpb__atab_find_old(const gpb__atab_t *t,
                                            uint64_t key);
/* The record of the allocation starting at unit, or NULL. Inline: a free
 * looks one or two up, and the call cost a fifth of a lookup. */
static inline gpb__arec_t *gpb__atab_find(const gpb__atab_t *t,
                                          uint64_t unit) {
  gpb__arec_t *r = gpb__atab_probe(t->cur, t->bits, unit + 1);
  if (GPB__UNLIKELY(!r && t->old != NULL)) r = gpb__atab_find_old(t, unit + 1);
  return r;
}
GPB__HIDDEN int gpb__atab_grow(gpb__atab_t *t);
/* Makes room for one more record: after 0, the next insert cannot fail.
 * GPB_EHOSTMEM when the table cannot grow. */
static inline int gpb__atab_room(gpb__atab_t *t) {
  return 2 * (t->used + t->old_live + 1) > t->cap ? gpb__atab_grow(t) : 0;
}
/* Inserts a copy of *rec (rec->key is set from unit). GPB_EHOSTMEM when the
 * table cannot grow. */
GPB__HIDDEN int gpb__atab_insert(gpb__atab_t *t, uint64_t unit,
                                 const gpb__arec_t *rec);
/* While the table grows: moves a few records of the old table across. */
GPB__HIDDEN void gpb__atab_migrate(gpb__atab_t *t);
/* gpb__atab_insert after gpb__atab_room returned 0: cannot fail. Inline:
 * every allocation makes one. */
static inline void gpb__atab_put(gpb__atab_t *t, uint64_t unit,
                                 const gpb__arec_t *rec) {
  gpb_assert(gpb__atab_find(t, unit) == NULL); /* one record per unit */
  /* Migrating moves records, and the room they take, from the old table
   * to this one: the room made before still holds. */
  if (GPB__UNLIKELY(t->old != NULL)) gpb__atab_migrate(t);
  uint64_t mask = t->cap - 1, key = unit + 1;
  uint64_t i = gpb__atab_home(key, t->bits);
  while (t->cur[i].key != 0) i = (i + 1) & mask;
  t->cur[i] = *rec;
  t->cur[i].key = key;
  t->used++;
}
GPB__HIDDEN void gpb__atab_remove(gpb__atab_t *t, uint64_t unit);
/* Removes the record r that gpb__atab_find returned, with no second
 * lookup; r is invalid after. */
GPB__HIDDEN void gpb__atab_remove_rec(gpb__atab_t *t, gpb__arec_t *r);
/* Sizes an empty table for n entries at once (no growth while they
 * arrive); a table in use is left as it is. */
GPB__HIDDEN int gpb__atab_reserve(gpb__atab_t *t, uint64_t n);
GPB__HIDDEN uint64_t gpb__atab_count(const gpb__atab_t *t);
GPB__HIDDEN size_t gpb__atab_bytes(const gpb__atab_t *t);

/* ---------------------------------------------------------------- extents */

#define GPB__EXT_SLBITS 4
#define GPB__EXT_SL (1u << GPB__EXT_SLBITS)
#define GPB__EXT_BINS ((64u - GPB__EXT_SLBITS + 1) * GPB__EXT_SL)
#define GPB__EXT_CHUNK 4096u

typedef struct gpb__ext {
  uint64_t start, len; /* units; len 0: the record holds no run */
  uint32_t prev, next; /* bin list, or free list (next) */
  uint32_t bin;
} gpb__ext_t;

/* The cache of runs by start has 2^GPB__EXT_STARTS_BITS slots. */
#define GPB__EXT_STARTS_BITS 11
#define GPB__EXT_STARTS (1u << GPB__EXT_STARTS_BITS)

/* Maximal free runs, binned by length (extents.c). A run is named by a
 * record id that stays the same while the run grows, shrinks or moves;
 * who keeps which id where is the caller's (fit.c). */
typedef struct gpb__exts {
  gpb__ext_t **chunks;
  uint32_t nchunks, made, free_head;
  uint64_t count;
  uint32_t *tails; /* ntails slots the caller keeps ids in, zeroed */
  /* The id of a run last seen starting at a unit, by a hash of the unit:
   * a cache (a slot is overwritten, never chained), so gpb__exts_starting
   * checks what it finds. */
  uint32_t *starts;
  uint64_t ntails;
  /* Requests of at least this many units end where their run ends, not
   * start where it starts (UINT64_MAX: none do); see gpb__exts_take. */
  uint64_t high;
  uint32_t head[GPB__EXT_BINS];
  uint64_t binmap[(GPB__EXT_BINS + 63) / 64];
} gpb__exts_t;

/* Record `id` (1..made), live or on the free list. */
static inline gpb__ext_t *gpb__exts_rec(const gpb__exts_t *x, uint32_t id) {
  return &x->chunks[id / GPB__EXT_CHUNK][id % GPB__EXT_CHUNK];
}

/* The run named `id` if it ends exactly at `end`, else NULL: an id kept
 * for "the run ending here" may be stale, and this is its check. */
static inline const gpb__ext_t *gpb__exts_ending(const gpb__exts_t *x,
                                                 uint32_t id, uint64_t end) {
  if (!id || id > x->made) return NULL;
  const gpb__ext_t *e = gpb__exts_rec(x, id);
  return e->len && e->start + e->len == end ? e : NULL;
}

static inline uint32_t *gpb__exts_start_slot(const gpb__exts_t *x,
                                             uint64_t start) {
  return &x->starts[gpb__hash_slot(start, GPB__EXT_STARTS_BITS)];
}

/* The id of the run starting exactly at `start` if the cache still holds
 * it, else 0 (no such run, or its slot was taken since). */
static inline uint32_t gpb__exts_starting(const gpb__exts_t *x,
                                          uint64_t start) {
  uint32_t id = *gpb__exts_start_slot(x, start);
  if (!id || id > x->made) return 0;
  const gpb__ext_t *e = gpb__exts_rec(x, id);
  return e->len && e->start == start ? id : 0;
}

GPB__HIDDEN int gpb__exts_init(gpb__exts_t *x, uint64_t ntails);
GPB__HIDDEN void gpb__exts_fini(gpb__exts_t *x);
GPB__HIDDEN void gpb__exts_clear(gpb__exts_t *x);
/* Returns [start, start+len) to the free runs, merging with run l (0:
 * none), which ends at start, and run r (0: none), which starts at
 * start+len. [*rs, *re) is the run it is now part of, *id its name: r's
 * when r is given, so that only a run whose end moved needs its id
 * stored anew. GPB_EHOSTMEM (nothing changed) when no record can be
 * made. */
GPB__HIDDEN int gpb__exts_add(gpb__exts_t *x, uint64_t start, uint64_t len,
                              uint32_t l, uint32_t r, uint64_t *rs,
                              uint64_t *re, uint32_t *id);
/* Drops run `id` whole. */
GPB__HIDDEN void gpb__exts_drop(gpb__exts_t *x, uint32_t id);
/* Takes n units aligned to 2^align_order from a well-fitting run, at its
 * start, or as near its end as alignment allows when n >= x->high: *out is
 * the first, [*rs, *re) the run they came from, *before the run that now
 * ends at *out (0: none). A run that still ends at *re keeps its id.
 * GPB_ENOMEM when no run fits, GPB_EHOSTMEM when no record can be made;
 * either way nothing changed. */
GPB__HIDDEN int gpb__exts_take(gpb__exts_t *x, uint64_t n,
                               uint32_t align_order, uint64_t *out,
                               uint64_t *rs, uint64_t *re, uint32_t *before);
/* Takes [p, p+n) from run `id`, which holds it; the out-parameters are
 * gpb__exts_take's. 0 or GPB_EHOSTMEM (nothing changed). */
GPB__HIDDEN int gpb__exts_cut(gpb__exts_t *x, uint32_t id, uint64_t n,
                              uint64_t p, uint64_t *out, uint64_t *rs,
                              uint64_t *re, uint32_t *before);
GPB__HIDDEN size_t gpb__exts_bytes(const gpb__exts_t *x);
GPB__HIDDEN uint64_t gpb__exts_count(const gpb__exts_t *x);
/* Counts the canonical blocks of every run into out[k] (zeroed first):
 * the free blocks per order the runs make. O(runs), no walk of the map. */
GPB__HIDDEN void gpb__exts_blocks(const gpb__exts_t *x,
                                  uint64_t out[GPB_MAX_ORDERS]);
/* Bins and links agree with the count: 0 or GPB_ECORRUPT. */
GPB__HIDDEN int gpb__exts_check(const gpb__exts_t *x);

/* The core's one event sink. The core knows nothing of who listens:
 * the pool wires this up. With `counters` set, events are numbered and
 * counted in place (as gpb__stats_apply would count them) and no event
 * is built; `put`, when also set, then receives each event's fields (the
 * live writer's ring). Without `counters`, each event is built and given
 * to `emit` (NULL: nobody listens). */
typedef void (*gpb__emit_fn)(void *ctx, gpb_event_t *ev);
typedef void (*gpb__put_fn)(void *ctx, uint64_t seq, int type, uint64_t off,
                            uint64_t size, uint64_t requested, uint64_t stream,
                            uint32_t tag, uint32_t order, uint32_t site);
typedef struct gpb__sink {
  gpb_stats_t *counters;
  gpb__put_fn put;
  void *put_ctx;
  gpb__emit_fn emit;
  void *emit_ctx;
} gpb__sink_t;

/* Plans (lib/plan/plan.h) bind to a core: a best-fit core follows one. */
struct gpb__plan;

/* ------------------------------------------------------------- buddy core */

/* The buddy core. Units are min_block-sized; node (k, i) covers units
 * [i << k, (i + 1) << k) and exists iff it fits inside nunits. A node whose
 * parent does not fit is a root. State is just one free bitset per order
 * plus the allocation table: every unit lies either in exactly one free
 * block or in exactly one allocation. */
/* Most unmerged free buddy pairs kept per order (deferred coalescing). */
#define GPB__DEFER_MAX 8

typedef struct gpb__buddy {
  uint64_t nunits;
  uint32_t min_shift;
  uint32_t norders;
  gpb_policy_t policy;
  uint64_t nfree[GPB_MAX_ORDERS];
  gpb__bits_t freeb[GPB_MAX_ORDERS];
  gpb__bits_t starts; /* first unit of every live allocation */
  gpb__atab_t atab;
  gpb__exts_t *exts;  /* free runs, for GPB_POLICY_BESTFIT only */
  gpb__sink_t sink; /* where every event goes */
  /* Deferred coalescing. A freed block whose buddy is free stays unmerged
   * while its order has fewer than defer_cap such pairs, so a block freed
   * and asked for again costs no merge and no split cascade. npairs counts
   * the free buddy pairs of each order (kept by set_free/clear_free);
   * dq lists the parents of the pairs made by deferring, so they can be
   * merged when an allocation would otherwise fail. */
  uint32_t defer_cap; /* 0: merge at once; UINT32_MAX: no limit (models) */
  uint64_t npairs[GPB_MAX_ORDERS];
  uint32_t ndq[GPB_MAX_ORDERS];
  uint64_t dq[GPB_MAX_ORDERS][GPB__DEFER_MAX];
  /* A model cannot list only the pairs it defers: it follows whatever
   * pairs the stream leaves (and keyframes hold). With list_pairs set,
   * every pair made is listed in plist as (parent << 6 | order); pairs
   * broken since are dropped when the list fills. A pool's pairs are all
   * in dq. Either way the coalesced figures (gpb__buddy_merged) cost the
   * pairs, not a walk of the map. */
  uint64_t *plist;
  uint32_t nplist, capplist;
  uint8_t list_pairs;
  uint8_t plist_lost; /* the list could not grow: it may miss pairs */
  /* Highest order a merge may reach: norders - 1 for a pool or model; the
   * superblock order for an arena's core, whose roots are the superblocks
   * lent to it (two lent superblocks never merge inside the arena). */
  uint32_t cap;
  /* A best-fit arena core's runs stop at multiples of 2^cap: they never
   * reach into the next superblock, which may belong to another core. */
  uint8_t bounded;
  /* Set while an attempt may still be retried elsewhere: a failure then
   * emits no FAIL, since the request has not failed yet. */
  uint8_t mute_fail;
  /* A placement plan being followed (best fit, no arenas), or NULL. */
  struct gpb__plan *plan;
  /* Best fit, counting in place (only the stats listen). The free blocks
   * per order are a function of the runs, so while the runs are few a
   * call does not count them (the loop over an allocation's blocks cost
   * 80 instructions and two mispredicted branches): fsync is set, and
   * fcnt holds the runs' blocks (gpb__exts_blocks) as last added into the
   * counters, moved by the changes no event counts (lent and adopted
   * superblocks). With many runs, a call counts them: its chains of
   * splits or merges as difference arrays (fpend[lo] += d, fpend[hi] -=
   * d). Either way gpb__buddy_flush brings the counters' free_blocks up
   * to date; whoever reads them flushes first, and whoever rewires the
   * sink calls gpb__buddy_unsync. */
  uint8_t fpending, fsync;
  uint64_t fcnt[GPB_MAX_ORDERS];
  int64_t fpend[GPB_MAX_ORDERS];
} gpb__buddy_t;

/* Tag of the record a pool's core keeps for a superblock lent to an arena:
 * allocated in the core, free (and carved further) in the arena. Never a
 * user tag, and it never appears in an event. */
#define GPB__TAG_LENT GPB_MAX_TAGS

GPB__HIDDEN int gpb__buddy_init(gpb__buddy_t *b, uint64_t nunits,
                                uint32_t min_shift, gpb_policy_t policy);
/* An arena's core: the same unit range but nothing free until superblocks
 * of order `cap` are adopted; merges stop at `cap`. Its metadata pages are
 * touched only where superblocks land. */
GPB__HIDDEN int gpb__buddy_init_arena(gpb__buddy_t *b, uint64_t nunits,
                                      uint32_t min_shift, gpb_policy_t policy,
                                      uint32_t cap);
GPB__HIDDEN void gpb__buddy_fini(gpb__buddy_t *b);
/* All roots free, table empty; emits nothing. */
GPB__HIDDEN void gpb__buddy_reset(gpb__buddy_t *b);
GPB__HIDDEN size_t gpb__buddy_meta_bytes(const gpb__buddy_t *b);
GPB__HIDDEN void gpb__buddy_prefault(gpb__buddy_t *b);
GPB__HIDDEN uint32_t gpb__buddy_num_roots(const gpb__buddy_t *b);

/* gpb__buddy_alloc and gpb__buddy_free (below, inline) choose the
 * policy's implementation. The error for a free of `off`, which starts
 * no allocation (core.c): GPB_EDOUBLEFREE, GPB_EINTERIOR, GPB_EFOREIGN. */
GPB__HIDDEN int gpb__buddy_misuse(const gpb__buddy_t *b, uint64_t off);
/* Merges every deferred pair (emitting MERGEs): the map becomes the fully
 * coalesced one. */
GPB__HIDDEN void gpb__buddy_coalesce(gpb__buddy_t *b);
/* Key of node (order k, index i) for gpb__buddy_merged. */
#define GPB__NODE(k, i) ((uint64_t)(k) << 58 | (uint64_t)(i))
/* The fully coalesced map, without changing anything: a free block whose
 * buddy is free counts as their parent, recursively, as after
 * gpb__buddy_coalesce. Adds to d[k] (norders entries) how many more free
 * blocks of order k that map has than nfree[k] (negative: fewer). Costs
 * O(p log p) for p listed pairs; no walk of the map.
 * xs[0..nx): GPB__NODE keys of nodes free as a whole outside this core
 * (an arena's superblocks, for the pool's core), already counted in d's
 * base. top (ntop entries, or NULL): receives the nodes of order b->cap
 * that are free only once merged; returns how many (an arena's core).
 * Caller holds the core's lock. */
GPB__HIDDEN size_t gpb__buddy_merged(const gpb__buddy_t *b, const uint64_t *xs,
                                     size_t nx, int64_t *d, uint64_t *top,
                                     size_t ntop);
/* Lends a free block of order k to an arena: SPLITs are emitted as for an
 * allocation, but the block itself stays free to everyone watching events
 * (no ALLOC); the core records it with GPB__TAG_LENT. GPB_ENOMEM quietly
 * when no block of order k or more is free. */
GPB__HIDDEN int gpb__buddy_lend(gpb__buddy_t *b, uint32_t k, uint64_t *unit);
/* Takes back the superblock lent at `unit` (whole and free in the arena):
 * no FREE event, then MERGEs with its free buddies. */
GPB__HIDDEN int gpb__buddy_unlend(gpb__buddy_t *b, uint64_t unit);
/* An arena's core gains or loses the free block (k, i), silently. Adopt
 * fails (GPB_EHOSTMEM, nothing changed) only for a best-fit core that
 * cannot make the run's record. */
GPB__HIDDEN int gpb__buddy_adopt(gpb__buddy_t *b, uint32_t k, uint64_t i);
GPB__HIDDEN void gpb__buddy_disown(gpb__buddy_t *b, uint32_t k, uint64_t i);
/* Checks every invariant; 0 or GPB_ECORRUPT with a detail. An arena's
 * core is checked over the superblocks it holds: nsb of them, the order-
 * `cap` block indices in sb (sb NULL: the whole range, as for a pool). */
GPB__HIDDEN int gpb__buddy_check(const gpb__buddy_t *b);
GPB__HIDDEN int gpb__buddy_check_in(const gpb__buddy_t *b, const uint64_t *sb,
                                    uint64_t nsb);
/* The free blocks of each order: kept for a buddy core, counted from the
 * runs for a best-fit one (O(allocations), for checks and resyncs), over
 * the nsb superblocks in sb for an arena's core. */
GPB__HIDDEN void gpb__buddy_nfree(const gpb__buddy_t *b,
                                  uint64_t out[GPB_MAX_ORDERS]);
GPB__HIDDEN void gpb__buddy_nfree_in(const gpb__buddy_t *b, const uint64_t *sb,
                                     uint64_t nsb,
                                     uint64_t out[GPB_MAX_ORDERS]);
/* Brings sink.counters' free_blocks up to date (see fcnt). Caller holds
 * the core's lock. */
GPB__HIDDEN void gpb__fit_flush(gpb__buddy_t *b);
static inline void gpb__buddy_flush(gpb__buddy_t *b) {
  if (b->fpending) gpb__fit_flush(b);
}
/* Flushes before the sink changes: a best-fit core then finds again
 * how to count (see fsync). */
static inline void gpb__buddy_unsync(gpb__buddy_t *b) {
  gpb__buddy_flush(b);
  b->fsync = 0;
}
/* Superblock sb (a block of order cap) is one free block in this core. */
GPB__HIDDEN int gpb__buddy_sb_free(const gpb__buddy_t *b, uint64_t sb);
/* Visits the canonical blocks of allocation r, in address order. */
GPB__HIDDEN int gpb__buddy_visit_alloc(const gpb__buddy_t *b,
                                       const gpb__arec_t *r, gpb_visit_fn fn,
                                       void *user);
GPB__HIDDEN int gpb__buddy_visit(const gpb__buddy_t *b, gpb_visit_fn fn,
                                 void *user);
/* Visits the blocks of units [u0, u1), which must start and end on block
 * boundaries. */
GPB__HIDDEN int gpb__buddy_visit_range(const gpb__buddy_t *b, uint64_t u0,
                                       uint64_t u1, gpb_visit_fn fn,
                                       void *user);
GPB__HIDDEN int gpb__buddy_lookup(const gpb__buddy_t *b, uint64_t unit,
                                  gpb_block_info_t *out);

/* Validated primitives for the model: each checks before it changes. */
GPB__HIDDEN int gpb__buddy_apply(gpb__buddy_t *b, const gpb_event_t *ev);
/* Makes a free block (k, i) exist by splitting its free ancestor (quietly,
 * no events). 0 or GPB_EFORMAT. */
GPB__HIDDEN int gpb__buddy_carve_free(gpb__buddy_t *b, uint32_t k, uint64_t i);
/* Marks the canonical blocks of [u, u+n) used and records the allocation;
 * all must be free blocks. */
GPB__HIDDEN int gpb__buddy_take(gpb__buddy_t *b, uint64_t u, uint64_t n,
                                const gpb__arec_t *rec);

/* Canonical decomposition: the largest aligned block starting at unit u
 * that fits in n units. */
static inline uint32_t gpb__canon_order(uint64_t u, uint64_t n) {
  uint32_t k = 63u - (uint32_t)__builtin_clzll(n);
  if (u != 0) {
    uint32_t a = (uint32_t)__builtin_ctzll(u);
    if (a < k) k = a;
  }
  return k;
}

/* The block info of block (k, unit u) of allocation r, or of a free one. */
static inline void gpb__fill_used(const gpb__buddy_t *b, gpb_block_info_t *bi,
                                  const gpb__arec_t *r, uint64_t u,
                                  uint32_t k) {
  memset(bi, 0, sizeof *bi);
  bi->offset = u << b->min_shift;
  bi->size = (1ull << k) << b->min_shift;
  bi->order = k;
  bi->used = 1;
  bi->alloc_offset = (r->key - 1) << b->min_shift;
  bi->alloc_size = r->units << b->min_shift;
  bi->requested = r->requested;
  bi->time_ns = r->time_ns;
  bi->tag = r->tag;
  bi->site = r->site;
}

static inline void gpb__fill_free(const gpb__buddy_t *b, gpb_block_info_t *bi,
                                  uint64_t u, uint32_t k) {
  memset(bi, 0, sizeof *bi);
  bi->offset = u << b->min_shift;
  bi->size = (1ull << k) << b->min_shift;
  bi->order = k;
}

/* ------------------------------------------------- the two policy families */

/* A power-of-two core (GPB_POLICY_BUDDY, TRIM: buddy.c) keeps a free
 * bitset per order; a best-fit core (b->exts set: fit.c) keeps free runs
 * and no per-order bitsets. core.c (and the two inline calls below)
 * hands each its calls: contracts as for the gpb__buddy_* they serve.
 * pow2_init and fit_init run after the common fields are set. */
GPB__HIDDEN int gpb__pow2_init(gpb__buddy_t *b);
GPB__HIDDEN void gpb__pow2_init_arena(gpb__buddy_t *b);
GPB__HIDDEN void gpb__pow2_set_roots(gpb__buddy_t *b);
/* rec: the request's record, its units the request's in units (0 when
 * it is larger than the pool); the call may change it. Few arguments,
 * all in registers: the hot path passes the record it keeps. */
GPB__HIDDEN int gpb__pow2_alloc(gpb__buddy_t *b, gpb__arec_t *rec,
                                uint32_t align_order, uint64_t stream,
                                uint64_t *unit);
GPB__HIDDEN int gpb__pow2_free(gpb__buddy_t *b, uint64_t u, gpb__arec_t *r,
                               uint64_t stream);
GPB__HIDDEN int gpb__pow2_misuse(const gpb__buddy_t *b, uint64_t off);
GPB__HIDDEN size_t gpb__pow2_merged(const gpb__buddy_t *b, const uint64_t *xs,
                                    size_t nx, int64_t *d, uint64_t *top,
                                    size_t ntop);
GPB__HIDDEN void gpb__pow2_adopt(gpb__buddy_t *b, uint32_t k, uint64_t i);
GPB__HIDDEN void gpb__pow2_disown(gpb__buddy_t *b, uint32_t k, uint64_t i);
GPB__HIDDEN int gpb__pow2_lend(gpb__buddy_t *b, uint32_t k, uint64_t *unit);
GPB__HIDDEN void gpb__pow2_unlend(gpb__buddy_t *b, uint64_t u,
                                  const gpb__arec_t *r);
GPB__HIDDEN int gpb__pow2_visit_range(const gpb__buddy_t *b, uint64_t u0,
                                      uint64_t u1, gpb_visit_fn fn,
                                      void *user);
GPB__HIDDEN int gpb__pow2_lookup(const gpb__buddy_t *b, uint64_t u,
                                 gpb_block_info_t *out);
GPB__HIDDEN int gpb__pow2_sb_free(const gpb__buddy_t *b, uint64_t sb);
GPB__HIDDEN int gpb__pow2_check(const gpb__buddy_t *b, const uint64_t *sb,
                                uint64_t nsb);

GPB__HIDDEN int gpb__fit_init(gpb__buddy_t *b);
/* An arena's best-fit core (b->cap set): bounded, no run until a
 * superblock is adopted. */
GPB__HIDDEN int gpb__fit_init_arena(gpb__buddy_t *b);
/* Makes the whole core one free run (its record is the one made first,
 * which gpb__exts_init makes room for). */
GPB__HIDDEN void gpb__fit_roots(gpb__buddy_t *b);
GPB__HIDDEN int gpb__fit_alloc(gpb__buddy_t *b, gpb__arec_t *rec,
                               uint32_t align_order, uint64_t stream,
                               uint64_t *unit);
/* Frees the allocation at unit u, whose record the caller found. */
GPB__HIDDEN int gpb__fit_free(gpb__buddy_t *b, uint64_t u,
                              const gpb__arec_t *rec, uint64_t stream);
/* The error for a free of `off`, which starts no allocation. */
GPB__HIDDEN int gpb__fit_misuse(const gpb__buddy_t *b, uint64_t off);
GPB__HIDDEN int gpb__fit_visit_range(const gpb__buddy_t *b, uint64_t u0,
                                     uint64_t u1, gpb_visit_fn fn, void *user);
GPB__HIDDEN int gpb__fit_lookup(const gpb__buddy_t *b, uint64_t u,
                                gpb_block_info_t *out);
/* Checks the core (over the nsb superblocks listed in sb, or all of it
 * when sb is NULL) and counts its free blocks per order into nfree. */
GPB__HIDDEN int gpb__fit_check(const gpb__buddy_t *b, const uint64_t *sb,
                               uint64_t nsb, uint64_t nfree[GPB_MAX_ORDERS]);
/* gpb__buddy_merged for a best-fit core: it has no pairs of its own, so
 * only the outside nodes xs (all of one order) merge, with each other or
 * with its free blocks. */
GPB__HIDDEN size_t gpb__fit_merged(const gpb__buddy_t *b, const uint64_t *xs,
                                   size_t nx, int64_t *d);
GPB__HIDDEN int gpb__fit_lend(gpb__buddy_t *b, uint32_t k, uint64_t *unit);
GPB__HIDDEN int gpb__fit_unlend(gpb__buddy_t *b, uint64_t u,
                                const gpb__arec_t *rec);
/* Superblock sb is one whole free run of this (bounded) core. */
GPB__HIDDEN int gpb__fit_sb_free(const gpb__buddy_t *b, uint64_t sb);
GPB__HIDDEN int gpb__fit_adopt(gpb__buddy_t *b, uint64_t u);
GPB__HIDDEN void gpb__fit_disown(gpb__buddy_t *b, uint64_t u);

/* The same decomposition as two masks, with no loop-carried chain: the
 * blocks of orders set in *left ascend from u, then those set in *right
 * descend to u + n. With h the highest bit where u and v = u + n differ,
 * c = v with its low h bits cleared is the one point a block of order h
 * could start at; [u, c) is blocks of the set bits of c - u, smallest
 * first, and [c, v) of those of v - c, largest first. */
static inline void gpb__canon_masks(uint64_t u, uint64_t n, uint64_t *left,
                                    uint64_t *right) {
  uint64_t v = u + n;
  if (n == 0 || v < u) { /* nothing, or a range past 2^64: no blocks */
    *left = *right = 0;
    return;
  }
  uint32_t h = 63u - (uint32_t)__builtin_clzll(u ^ v);
  uint64_t c = (v >> h) << h;
  *left = c - u;
  *right = v - c;
}

/* ------------------------------------------------------------------ stats */

/* Applies one event to the counters. The pool and the model both run
 * their events through this, so their stats agree by construction. */
GPB__HIDDEN void gpb__stats_apply(gpb_stats_t *s, const gpb_event_t *ev);

/* What gpb__stats_apply counts for a SPLIT of order k or a MERGE into
 * order k (besides the sequence number). */
static inline void gpb__stats_split(gpb_stats_t *s, uint32_t k) {
  s->free_blocks[k]--;
  s->free_blocks[k - 1] += 2;
  s->splits++;
}

static inline void gpb__stats_merge(gpb_stats_t *s, uint32_t k) {
  s->free_blocks[k - 1] -= 2;
  s->free_blocks[k]++;
  s->merges++;
}

/* What gpb__stats_apply counts for an event of `type` on the range
 * [off, off+size) (besides the sequence number): the core calls it
 * directly when only the stats listen, so no event is built. */
/* What an ALLOC or FREE of `size` bytes counts besides its blocks. */
static inline void gpb__stats_count_bytes(gpb_stats_t *s, int type,
                                          uint64_t size, uint64_t requested,
                                          uint32_t tag) {
  if (type == GPB_EV_ALLOC) {
    s->allocs++;
    s->live_allocs++;
    s->requested_bytes += requested;
    s->block_bytes += size;
    s->free_bytes -= size;
    if (tag < GPB_MAX_TAGS) s->tag_bytes[tag] += size;
    if (s->requested_bytes > s->requested_peak)
      s->requested_peak = s->requested_bytes;
    if (s->block_bytes > s->block_peak) s->block_peak = s->block_bytes;
  } else {
    s->frees++;
    s->live_allocs--;
    s->requested_bytes -= requested;
    s->block_bytes -= size;
    s->free_bytes += size;
    if (tag < GPB_MAX_TAGS) s->tag_bytes[tag] -= size;
    if (s->free_bytes > s->free_peak) s->free_peak = s->free_bytes;
  }
}

/* Adds d to per_order[k] for every order k set in mask (a canonical
 * mask: one block of each such order). */
static inline void gpb__count_mask(uint64_t per_order[GPB_MAX_ORDERS],
                                   uint64_t mask, uint64_t d) {
  for (; mask; mask &= mask - 1) per_order[__builtin_ctzll(mask)] += d;
}

/* An ALLOC or FREE of units [u, u+n) (units of 2^shift bytes): its
 * canonical blocks leave or rejoin the free counts. */
static inline void gpb__stats_count_range(gpb_stats_t *s, int type,
                                          uint64_t u, uint64_t n,
                                          uint32_t shift, uint64_t requested,
                                          uint32_t tag) {
  uint64_t d = type == GPB_EV_ALLOC ? (uint64_t)-1 : 1, l, r;
  if (!(n & (n - 1)) && !(u & (n - 1))) { /* one block, the common case */
    s->free_blocks[__builtin_ctzll(n)] += d;
  } else {
    gpb__canon_masks(u, n, &l, &r);
    gpb__count_mask(s->free_blocks, l, d);
    gpb__count_mask(s->free_blocks, r, d);
  }
  gpb__stats_count_bytes(s, type, n << shift, requested, tag);
}

static inline void gpb__stats_count(gpb_stats_t *s, int type, uint64_t off,
                                    uint64_t size, uint64_t requested,
                                    uint32_t tag, uint32_t order) {
  switch (type) {
  case GPB_EV_ALLOC:
  case GPB_EV_FREE: {
    uint32_t shift = (uint32_t)__builtin_ctzll(s->min_block);
    gpb__stats_count_range(s, type, off >> shift, size >> shift, shift,
                           requested, tag);
    break;
  }
  case GPB_EV_SPLIT:
    gpb__stats_split(s, order);
    break;
  case GPB_EV_MERGE:
    gpb__stats_merge(s, order);
    break;
  case GPB_EV_FAIL:
    s->failures++;
    s->last_failed_request = requested;
    break;
  default:
    break;
  }
}
/* Adds counters that started from zero (an arena's) to s: wrapping sums,
 * so a delta may be "negative". Peaks are raised to the new totals. */
GPB__HIDDEN void gpb__stats_add(gpb_stats_t *s, const gpb_stats_t *d);
GPB__HIDDEN void gpb__stats_init(gpb_stats_t *s, uint64_t managed,
                                 uint64_t min_block, uint32_t norders);
/* Fills the derived fields (largest free, fragmentation) of a copy, on
 * the coalesced map: free_blocks[k] + merged[k] free blocks of order k
 * (merged from gpb__buddy_merged; NULL: the map as it is). free_blocks
 * itself stays the map as it is. */
GPB__HIDDEN void gpb__stats_finish(gpb_stats_t *s, const int64_t *merged);
/* The checkers' second opinion on gpb__buddy_merged: the coalesced map's
 * free blocks per order, from a visit of all blocks in address order (a
 * free block merges with the free one before it while they are buddies).
 * Zero it, set nunits and norders, visit with gpb__merge_walk_block, then
 * call gpb__merge_walk_end; free[] then holds the counts. */
typedef struct gpb__merge_walk {
  uint64_t nunits, min_block;
  uint32_t norders;
  uint32_t n;                        /* nodes on the stack */
  uint64_t stk[2 * GPB_MAX_ORDERS + 4]; /* GPB__NODE keys, in address order */
  uint64_t free[GPB_MAX_ORDERS];
} gpb__merge_walk_t;
GPB__HIDDEN int gpb__merge_walk_block(const gpb_block_info_t *bl, void *user);
GPB__HIDDEN void gpb__merge_walk_end(gpb__merge_walk_t *w);
/* 0 when free_blocks + merged equals the walk's counts, else
 * GPB_ECORRUPT naming the order. */
GPB__HIDDEN int gpb__merge_walk_check(const gpb__merge_walk_t *w,
                                      const gpb_stats_t *s,
                                      const int64_t *merged);

/* Rebuilds the state-derived fields from a core; counters are kept. */
GPB__HIDDEN void gpb__stats_from_core(gpb_stats_t *s, const gpb__buddy_t *b);

/* ------------------------------------------------------------- events */

/* The core's events go out through these (buddy.c and fit.c): counted in
 * place when only the stats listen, else built and handed to the sink. */
static inline void gpb__emit(gpb__buddy_t *b, int type, uint64_t unit,
                       uint64_t units, uint32_t order, uint64_t requested,
                       uint32_t tag, uint32_t site, uint64_t stream) {
  if (type == GPB_EV_FAIL && b->mute_fail) return;
  const gpb__sink_t *k = &b->sink;
  gpb_stats_t *q = k->counters;
  if (q) { /* counted in place, no event built */
    uint64_t seq = ++q->seq;
    if (type == GPB_EV_ALLOC || type == GPB_EV_FREE) /* already in units */
      gpb__stats_count_range(q, type, unit, units, b->min_shift, requested,
                             tag);
    else
      gpb__stats_count(q, type, unit << b->min_shift, units << b->min_shift,
                       requested, tag, order);
    if (k->put)
      k->put(k->put_ctx, seq, type, unit << b->min_shift, units << b->min_shift,
             requested, stream, tag, order, site);
    return;
  }
  if (!k->emit) return;
  gpb_event_t ev = {.offset = unit << b->min_shift,
                    .size = units << b->min_shift,
                    .requested = requested,
                    .stream = stream,
                    .tag = tag,
                    .type = (uint8_t)type,
                    .order = (uint8_t)order,
                    .site = (uint16_t)site};
  k->emit(k->emit_ctx, &ev);
}

/* SPLIT or MERGE of the block (k, i): counted in place when only the
 * stats listen, which keeps a 20-level cascade to a few adds per level. */
static inline void gpb__emit_sm(gpb__buddy_t *b, int type, uint32_t k,
                                 uint64_t i) {
  const gpb__sink_t *sk = &b->sink;
  if (sk->counters) {
    uint64_t seq = ++sk->counters->seq; /* numbered even when nobody sees it */
    if (type == GPB_EV_SPLIT)
      gpb__stats_split(sk->counters, k);
    else
      gpb__stats_merge(sk->counters, k);
    if (sk->put)
      sk->put(sk->put_ctx, seq, type, (i << k) << b->min_shift,
              (1ull << k) << b->min_shift, 0, 0, 0, k, 0);
    return;
  }
  gpb__emit(b, type, i << k, 1ull << k, k, 0, 0, 0, 0);
}

/* ------------------------------------------------------------ dispatch */

/* Allocates `requested` bytes (> 0) aligned to 2^align_order units. On
 * success *unit is the first unit. Emits SPLITs then ALLOC, or FAIL.
 * `site` (a call site id, 0 unknown) is kept in the record and carried
 * by the ALLOC, FAIL and later FREE events. Inline: the policy's choice
 * costs the hot path no call. */
static inline int gpb__buddy_alloc(gpb__buddy_t *b, uint64_t requested,
                                   uint32_t align_order, uint32_t tag,
                                   uint32_t site, uint64_t stream,
                                   uint64_t time_ns, uint64_t *unit) {
  gpb__arec_t rec = {
      .units = gpb__units(requested, b->min_shift, b->nunits << b->min_shift),
      .requested = requested, .time_ns = time_ns, .tag = (uint16_t)tag,
      .site = (uint16_t)site};
  if (rec.units && b->exts) /* best fit sizes by units, not by order */
    return gpb__fit_alloc(b, &rec, align_order, stream, unit);
  return gpb__pow2_alloc(b, &rec, align_order, stream, unit);
}

/* Frees the allocation starting at byte offset `off`; classifies misuse
 * (GPB_EDOUBLEFREE, GPB_EINTERIOR, GPB_EFOREIGN) without changing state.
 * Emits FREE then MERGEs. */
static inline int gpb__buddy_free(gpb__buddy_t *b, uint64_t off,
                                  uint64_t stream) {
  uint64_t u = off >> b->min_shift;
  gpb__arec_t *r = NULL;
  if (GPB__LIKELY(u < b->nunits && !(off & ((1ull << b->min_shift) - 1))))
    r = gpb__atab_find(&b->atab, u);
  if (GPB__UNLIKELY(!r || r->tag == GPB__TAG_LENT))
    return gpb__buddy_misuse(b, off);
  return b->exts ? gpb__fit_free(b, u, r, stream)
                 : gpb__pow2_free(b, u, r, stream);
}

/* ------------------------------------------------------------------ model */

/* A model is a core and the stats the pool would keep for it. A simulator
 * (sim.c) embeds one, so that its block map reads like any model's. */
struct gpb_model {
  gpb__buddy_t core;
  gpb_stats_t stats;
};

/* Sets up an embedded model with all roots free; fini with gpb__buddy_fini. */
GPB__HIDDEN int gpb__model_init(gpb_model_t *m, uint64_t managed_size,
                                uint64_t min_block, gpb_policy_t policy);
GPB__SHARED void gpb__model_set_counters(gpb_model_t *m, const gpb_stats_t *s);

#endif /* GPB_CORE_H */
