/* SPDX-License-Identifier: MIT */
/*
 * arena.c: per-thread arenas, so that threads allocating from one pool do
 * not queue on one lock.
 *
 * An arena is a buddy core of its own, with its own lock, over the pool's
 * whole unit range; what it holds is a set of superblocks (aligned blocks
 * of order sb_order) that the pool's core lent it. Each thread uses one
 * arena (threads are numbered as they first allocate, round robin over
 * the arenas). A request of order arena_order (a quarter superblock) or
 * less goes to the caller's arena; when the arena has no room it borrows
 * one more superblock from the pool's core under the pool's lock. Larger
 * requests, and those no arena can hold, go to the pool's core. A free
 * finds the core that holds its block through `owner`, one byte per
 * superblock, read without a lock and checked again under the lock it
 * names (it only changes with that lock and the pool's held).
 *
 * Events stay exact. Lending emits the SPLITs that carve the superblock
 * out of the pool's core but no ALLOC: to anyone watching the events, a
 * lent superblock is just a free block, which the arena then splits and
 * allocates from with ordinary events. When an arena frees a superblock
 * whole and already has another free one, it gives it back: no FREE, then
 * the MERGEs in the pool's core. So a block-map model fed by the events
 * sees one buddy tree, whatever the arenas.
 *
 * Ordering them is the price. While a consumer listens (hook, publisher,
 * trace) every arena call also takes the pool's lock, so events get one
 * sequence as before: correct, and no faster than one lock. With no
 * consumer, arenas run in parallel and count their events into counters
 * of their own; reading the stats adds them up. Exact totals, except the
 * peaks, which are then the largest totals seen when stats were read or a
 * consumer attached.
 *
 * Out of memory, in order: the arena's own blocks (an arena merges its
 * deferred pairs first, like any core), a new superblock, the pool's
 * core, then with every lock held: every deferred pair merged, pending
 * async frees waited for, every wholly free superblock given back; then
 * each arena and the pool's core once more. Only that last failure emits
 * FAIL. So a request fails only when no free block of its order exists
 * anywhere, as in a pool without arenas.
 */
#include "pool/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Threads are numbered from 1 as they first allocate from any pool; a
 * thread remembers its arena in the last pool it used (pools are told
 * apart by an id, since a new pool may reuse a freed one's address). */
static _Atomic uint32_t arena_next_slot;
static _Atomic uint64_t arena_next_pool_id;
/* initial-exec: a plain TLS load, not a __tls_get_addr call per use. */
#define ARENA_TLS __attribute__((tls_model("initial-exec")))
static _Thread_local uint32_t arena_slot ARENA_TLS;
static _Thread_local uint64_t arena_last_pool ARENA_TLS;
static _Thread_local uint32_t arena_last_index ARENA_TLS;

static gpb__arena_t *arena_pick(gpb_pool_t *p) {
  if (!arena_slot)
    arena_slot = atomic_fetch_add_explicit(&arena_next_slot, 1,
                                           memory_order_relaxed) + 1;
  arena_last_pool = p->id;
  arena_last_index = (arena_slot - 1) % p->narenas;
  return &p->arenas[arena_last_index];
}

static inline gpb__arena_t *arena_mine(gpb_pool_t *p) {
  if (GPB__LIKELY(arena_last_pool == p->id))
    return &p->arenas[arena_last_index];
  return arena_pick(p);
}

/* The arena's event sink while no consumer listens: its own counters. */
static void arena_emit(void *ctx, gpb_event_t *ev) {
  gpb__arena_t *a = ctx;
  ev->seq = a->delta.seq + 1;
  ev->time_ns = 0;
  gpb__stats_apply(&a->delta, ev);
}

/* Zero counters, but the geometry gpb__stats_apply reads. */
static void arena_delta_reset(gpb_pool_t *p, gpb__arena_t *a) {
  memset(&a->delta, 0, sizeof a->delta);
  a->delta.min_block = p->info.min_block;
  a->delta.num_orders = p->info.num_orders;
}

static uint32_t arena_log2(uint64_t x) { return 63u - (uint32_t)__builtin_clzll(x); }

int gpb__arenas_open(gpb_pool_t *p, uint32_t n) {
  p->narenas = 1;
  p->id = atomic_fetch_add_explicit(&arena_next_pool_id, 1,
                                    memory_order_relaxed) + 1;
  if (n == 0) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    n = c < 1 ? 1 : (uint32_t)c;
  }
  if (n > GPB__MAX_ARENAS) n = GPB__MAX_ARENAS;
  if (n <= 1) return 0;
  /* Superblocks: 1/16 of an arena's fair share, so a few stay with each
   * arena and most of the pool stays shared; at most 8 MiB, so memory an
   * arena strands is small; at least 64 minimum blocks, so they are worth
   * lending. Smaller pools keep one lock. */
  uint32_t shift = p->core.min_shift;
  uint64_t units = p->core.nunits;
  uint64_t share = units / (16ull * n);
  if (share < 64) return 0;
  uint32_t s = arena_log2(share);
  uint32_t cap = arena_log2((8ull << 20) >> shift < 64 ? 64 : (8ull << 20) >> shift);
  if (s > cap) s = cap;
  p->sb_order = s;
  p->arena_order = s - 2;
  p->nsb = units >> s;
  p->owner = calloc(p->nsb, sizeof *p->owner);
  p->arenas = aligned_alloc(64, sizeof *p->arenas * n);
  if (!p->owner || !p->arenas) {
    free(p->owner);
    free(p->arenas);
    p->owner = NULL;
    p->arenas = NULL;
    return gpb__fail(GPB_EHOSTMEM, "no host memory for %u arenas", n);
  }
  memset(p->arenas, 0, sizeof *p->arenas * n);
  for (uint32_t i = 0; i < n; i++) {
    gpb__arena_t *a = &p->arenas[i];
    int rc = gpb__buddy_init_arena(&a->core, units, shift, p->info.policy, s);
    if (!rc) rc = gpb__gpu_open_child(p->gpu, &a->gpu); /* lock: zeroed */
    if (rc) {
      p->narenas = i + 1; /* close what exists, this one included */
      gpb__arenas_close(p);
      return rc;
    }
    if (p->core.defer_cap == 0) a->core.defer_cap = 0;
    a->index = i;
    arena_delta_reset(p, a);
    a->core.sink.emit = arena_emit;
    a->core.sink.emit_ctx = a;
    a->core.sink.counters = &a->delta;
  }
  p->narenas = n;
  return 0;
}

void gpb__arenas_close(gpb_pool_t *p) {
  if (!p->arenas) return;
  for (uint32_t i = 0; i < p->narenas; i++) {
    gpb__arena_t *a = &p->arenas[i];
    gpb__gpu_close(a->gpu);
    if (a->core.norders) gpb__buddy_fini(&a->core);
  }
  free(p->arenas);
  free(p->owner);
  p->arenas = NULL;
  p->owner = NULL;
  p->narenas = 1;
}

void gpb__pool_lock_all(gpb_pool_t *p) {
  for (uint32_t i = 0; i < p->narenas && p->arenas; i++)
    gpb__lock(&p->arenas[i].lock);
  gpb__lock(&p->lock);
}

void gpb__pool_unlock_all(gpb_pool_t *p) {
  gpb__unlock(&p->lock);
  for (uint32_t i = p->narenas; i-- > 0 && p->arenas;)
    gpb__unlock(&p->arenas[i].lock);
}

/* Arena's lock held, and the pool's (loud, or taken for this). */
static int arena_lend(gpb_pool_t *p, gpb__arena_t *a) {
  uint64_t u;
  int rc = gpb__buddy_lend(&p->core, p->sb_order, &u);
  if (rc) return rc;
  rc = gpb__buddy_adopt(&a->core, p->sb_order, u >> p->sb_order);
  if (rc) { /* the arena cannot hold it: it goes back unseen */
    gpb__buddy_unlend(&p->core, u);
    return rc;
  }
  atomic_store_explicit(&p->owner[u >> p->sb_order], (uint8_t)(a->index + 1),
                        memory_order_release);
  return 0;
}

/* Gives superblock sb, whole and free in the arena, back. Both locks held. */
static void arena_unlend(gpb_pool_t *p, gpb__arena_t *a, uint64_t sb) {
  gpb__buddy_disown(&a->core, p->sb_order, sb);
  atomic_store_explicit(&p->owner[sb], 0, memory_order_release);
  gpb__buddy_unlend(&p->core, sb << p->sb_order);
}

/* One try in arena a, borrowing a superblock when `lend` and it is full.
 * Muted: GPB_ENOMEM here is not yet a failure. */
static int arena_try(gpb_pool_t *p, gpb__arena_t *a, uint64_t size,
                     uint32_t align_order, uint32_t tag, uint32_t site,
                     void *stream, int lend, uint64_t *unit) {
  gpb__lock(&a->lock);
  int loud = p->loud;
  uint64_t now = 0;
  if (loud) {
    gpb__lock(&p->lock);
    gpb__pool_stamp(p);
    now = p->now;
  }
  a->core.mute_fail = 1;
  int rc = gpb__pool_core_alloc(&a->core, a->gpu, size, align_order, tag,
                                site, stream, now, unit);
  if (rc == GPB_ENOMEM && lend) {
    if (!loud) gpb__lock(&p->lock);
    int lr = arena_lend(p, a);
    if (!loud) gpb__unlock(&p->lock);
    if (lr == 0)
      rc = gpb__pool_core_alloc(&a->core, a->gpu, size, align_order, tag,
                                site, stream, now, unit);
  }
  a->core.mute_fail = 0;
  if (loud) gpb__unlock(&p->lock);
  gpb__unlock(&a->lock);
  return rc;
}

static int arena_try_pool(gpb_pool_t *p, uint64_t size, uint32_t align_order,
                          uint32_t tag, uint32_t site, void *stream, int mute,
                          uint64_t *unit) {
  gpb__lock(&p->lock);
  gpb__pool_stamp(p);
  p->core.mute_fail = (uint8_t)mute;
  int rc = gpb__pool_core_alloc(&p->core, p->gpu, size, align_order, tag,
                                site, stream, p->now, unit);
  p->core.mute_fail = 0;
  gpb__unlock(&p->lock);
  return rc;
}

int gpb__arenas_alloc(gpb_pool_t *p, uint64_t size, uint32_t align_order,
                      uint32_t tag, uint32_t site, void *stream,
                      uint64_t *unit) {
  uint64_t units = gpb__units(size, p->core.min_shift, p->info.managed_size);
  uint32_t k = gpb__ceil_log2(units);
  if (align_order > k) k = align_order;
  int fits = size <= p->info.managed_size && k < p->sb_order;
  /* Up to a quarter superblock starts in the caller's arena. Up to half
   * may still end in one: a free block that size can sit in a superblock
   * that is not wholly free, which the pool's core cannot see. */
  int small = fits && k <= p->arena_order;
  int rc;
  if (small) {
    rc = arena_try(p, arena_mine(p), size, align_order, tag, site, stream, 1,
                   unit);
    if (rc != GPB_ENOMEM) return rc;
  }
  if (size > p->info.managed_size) /* GPB_ETOOBIG: nothing to retry */
    return arena_try_pool(p, size, align_order, tag, site, stream, 0, unit);
  /* Reclaim, and look everywhere; with pending async frees, a second
   * round waits for them: the only wait, and only before failing. */
  for (int drain = 0; drain < (p->gpu ? 2 : 1); drain++) {
    rc = arena_try_pool(p, size, align_order, tag, site, stream, 1, unit);
    if (rc != GPB_ENOMEM) return rc;
    gpb__pool_lock_all(p);
    gpb__arenas_reclaim(p, drain);
    gpb__pool_unlock_all(p);
    if (fits) {
      gpb__arena_t *mine = arena_mine(p);
      rc = arena_try(p, mine, size, align_order, tag, site, stream, 1, unit);
      for (uint32_t i = 0; rc == GPB_ENOMEM && i < p->narenas; i++)
        if (&p->arenas[i] != mine)
          rc = arena_try(p, &p->arenas[i], size, align_order, tag, site,
                         stream, 0, unit);
      if (rc != GPB_ENOMEM) return rc;
    }
  }
  return arena_try_pool(p, size, align_order, tag, site, stream, 0, unit);
}

/* Locks the core holding unit u: returns its arena, or NULL for the
 * pool's core (then the pool's lock is held). */
static gpb__arena_t *arena_lock_owner(gpb_pool_t *p, uint64_t u) {
  uint64_t sb = u >> p->sb_order;
  if (sb >= p->nsb) { /* the tail past the last superblock: never lent */
    gpb__lock(&p->lock);
    return NULL;
  }
  for (;;) {
    uint8_t o = atomic_load_explicit(&p->owner[sb], memory_order_acquire);
    if (o) {
      gpb__arena_t *a = &p->arenas[o - 1];
      gpb__lock(&a->lock);
      if (atomic_load_explicit(&p->owner[sb], memory_order_relaxed) == o)
        return a;
      gpb__unlock(&a->lock);
    } else {
      gpb__lock(&p->lock);
      if (atomic_load_explicit(&p->owner[sb], memory_order_relaxed) == 0)
        return NULL;
      gpb__unlock(&p->lock);
    }
  }
}

int gpb__arenas_free(gpb_pool_t *p, uint64_t off, void *stream, int async) {
  uint64_t u = off >> p->core.min_shift;
  gpb__arena_t *a = arena_lock_owner(p, u);
  if (!a) {
    gpb__pool_stamp(p);
    int rc = gpb__pool_core_free(p, &p->core, p->gpu, off, stream, async);
    gpb__unlock(&p->lock);
    return rc;
  }
  int loud = p->loud;
  if (loud) {
    gpb__lock(&p->lock);
    gpb__pool_stamp(p);
  }
  int rc = gpb__pool_core_free(p, &a->core, a->gpu, off, stream, async);
  uint64_t sb = u >> p->sb_order;
  /* Keep one free superblock per arena; give back any more. */
  if (rc == 0 && a->core.nfree[p->sb_order] > 1 &&
      gpb__buddy_sb_free(&a->core, sb)) {
    if (!loud) gpb__lock(&p->lock);
    arena_unlend(p, a, sb);
    if (!loud) gpb__unlock(&p->lock);
  }
  if (loud) gpb__unlock(&p->lock);
  gpb__unlock(&a->lock);
  return rc;
}

int gpb__arenas_usable(gpb_pool_t *p, uint64_t off, size_t *out) {
  uint64_t u = off >> p->core.min_shift;
  gpb__arena_t *a = arena_lock_owner(p, u);
  const gpb__buddy_t *core = a ? &a->core : &p->core;
  const gpb__arec_t *r = (off & (p->info.min_block - 1))
                             ? NULL
                             : gpb__atab_find(&core->atab, u);
  if (r && r->tag != GPB__TAG_LENT) *out = (size_t)(r->units << core->min_shift);
  else r = NULL;
  gpb__unlock(a ? &a->lock : &p->lock);
  return r ? 0 : GPB_EINTERIOR;
}

void gpb__arenas_set_loud(gpb_pool_t *p, int loud) {
  for (uint32_t i = 0; i < p->narenas && p->arenas; i++) {
    gpb__arena_t *a = &p->arenas[i];
    gpb__buddy_unsync(&a->core); /* into the counters it has counted in */
    if (loud && !p->loud) {
      gpb__stats_add(&p->stats, &a->delta);
      arena_delta_reset(p, a);
    }
    a->core.sink.emit = loud ? gpb__pool_emit : arena_emit;
    a->core.sink.emit_ctx = loud ? (void *)p : (void *)a;
    a->core.sink.counters = loud ? NULL : &a->delta;
  }
  p->loud = loud;
}

void gpb__arenas_stats(gpb_pool_t *p, gpb_stats_t *out, int64_t *merged) {
  gpb__buddy_flush(&p->core);
  *out = p->stats;
  for (uint32_t i = 0; i < p->narenas && p->arenas; i++) {
    gpb__buddy_flush(&p->arenas[i].core);
    gpb__stats_add(out, &p->arenas[i].delta);
  }
  p->stats.requested_peak = out->requested_peak;
  p->stats.block_peak = out->block_peak;
  p->stats.free_peak = out->free_peak;
  /* The superblocks free as a whole in the arenas: a free block of the
   * superblock order there, or pieces that merge into one (many while
   * frees wait on streams, before the arenas give spares back). Each is
   * a distinct superblock, so nsb entries hold them all. */
  uint64_t few[64], *xs = few;
  size_t nx = 0, cap = p->arenas ? p->nsb : 0;
  if (cap > 64 && !(xs = malloc(cap * sizeof *xs)))
    xs = few, cap = 0; /* no memory: no merges across cores */
  for (uint32_t i = 0; i < p->narenas && p->arenas && cap; i++) {
    const gpb__buddy_t *c = &p->arenas[i].core;
    uint32_t k = c->cap;
    /* A best-fit arena keeps no bitsets: its whole superblocks are the
     * runs a superblock long, among the superblocks it owns. */
    for (uint64_t sb = 0; c->exts && sb < p->nsb && nx < cap; sb++)
      if (atomic_load_explicit(&p->owner[sb], memory_order_relaxed) == i + 1 &&
          gpb__buddy_sb_free(c, sb))
        xs[nx++] = GPB__NODE(k, sb);
    uint64_t x = c->freeb[k].nbits ? c->freeb[k].nbits - 1 : UINT64_MAX;
    for (uint64_t left = c->nfree[k]; left && x != UINT64_MAX && nx < cap; left--) {
      x = gpb__bits_prev(&c->freeb[k], x);
      if (x == UINT64_MAX) break;
      xs[nx++] = GPB__NODE(k, x);
      x = x ? x - 1 : UINT64_MAX;
    }
    size_t nt = gpb__buddy_merged(c, NULL, 0, merged, xs + nx, cap - nx);
    for (size_t t = 0; t < nt; t++, nx++) xs[nx] = GPB__NODE(k, xs[nx]);
  }
  gpb__buddy_merged(&p->core, xs, nx, merged, NULL, 0);
  if (xs != few) free(xs);
}

void gpb__arenas_reclaim(gpb_pool_t *p, int drain) {
  if (!p->arenas) return;
  for (uint32_t i = 0; i < p->narenas; i++) {
    gpb__arena_t *a = &p->arenas[i];
    if (drain) gpb__gpu_drain(a->gpu, &a->core);
    gpb__buddy_coalesce(&a->core);
  }
  for (uint64_t sb = 0; sb < p->nsb; sb++) {
    uint8_t o = atomic_load_explicit(&p->owner[sb], memory_order_relaxed);
    if (o && gpb__buddy_sb_free(&p->arenas[o - 1].core, sb))
      arena_unlend(p, &p->arenas[o - 1], sb);
  }
}

int gpb__arenas_check(const gpb_pool_t *p, uint64_t nfree[GPB_MAX_ORDERS]) {
  if (!p->arenas) return 0;
  uint64_t *sbs = malloc(sizeof *sbs * (p->nsb ? p->nsb : 1));
  if (!sbs) return gpb__fail(GPB_EHOSTMEM, "no host memory to check arenas");
  int rc = 0;
  for (uint64_t sb = 0; rc == 0 && sb < p->nsb; sb++) {
    uint8_t o = atomic_load_explicit(&p->owner[sb], memory_order_relaxed);
    const gpb__arec_t *r = gpb__atab_find(&p->core.atab, sb << p->sb_order);
    int is_lent = r && r->tag == GPB__TAG_LENT;
    if (o > p->narenas)
      rc = gpb__fail(GPB_ECORRUPT, "superblock %llu: owner %u of %u arenas",
                     (unsigned long long)sb, o, p->narenas);
    else if ((o != 0) != is_lent ||
             (is_lent && r->units != (1ull << p->sb_order)))
      rc = gpb__fail(GPB_ECORRUPT, "superblock %llu: owner says arena %d, "
                     "the pool's core %s", (unsigned long long)sb, (int)o - 1,
                     is_lent ? "lent it" : "did not lend it");
  }
  for (uint32_t i = 0; rc == 0 && i < p->narenas; i++) {
    uint64_t n = 0;
    for (uint64_t sb = 0; sb < p->nsb; sb++)
      if (atomic_load_explicit(&p->owner[sb], memory_order_relaxed) == i + 1)
        sbs[n++] = sb;
    rc = gpb__buddy_check_in(&p->arenas[i].core, sbs, n);
    if (rc) {
      char why[200];
      snprintf(why, sizeof why, "%s", gpb_last_error_detail());
      rc = gpb__fail(GPB_ECORRUPT, "arena %u: %s", i, why);
    } else {
      uint64_t c[GPB_MAX_ORDERS];
      gpb__buddy_nfree_in(&p->arenas[i].core, sbs, n, c);
      for (uint32_t k = 0; k < GPB_MAX_ORDERS; k++) nfree[k] += c[k];
    }
  }
  free(sbs);
  return rc;
}
