/* SPDX-License-Identifier: MIT */
/*
 * pool.h: the pool layer: the pool's private layout, shared by pool.c
 * (the public calls, one lock) and arena.c (per-thread arenas), and the
 * host backend. Only the pool layer (and white-box benches) include it.
 *
 * Locks: each arena's lock, then the pool's lock, never the other way
 * round. Operations that need every lock take the arenas' in index order,
 * then the pool's (gpb__pool_lock_all).
 */
#ifndef GPB_POOL_H
#define GPB_POOL_H

#include "core/core.h"
#include "gpu/gpu.h"
#include "live/live.h"
#include "trace/trace.h"

#include <pthread.h>
#include <stdatomic.h>

/* The pool's and the arenas' lock (lock.c): a futex word, so that
 * taking it free and giving it back unwaited are one atomic each, inline:
 * pthread_mutex_lock and unlock took 55 instructions a pair, a ninth of
 * an uncontended allocation. Not recursive; zeroed, it is free. */
typedef struct gpb__lock {
  _Atomic uint32_t w; /* 0 free, 1 held, 2 held and maybe waited for */
} gpb__lock_t;
GPB__HIDDEN void gpb__lock_wait(gpb__lock_t *l);
GPB__HIDDEN void gpb__lock_wake(gpb__lock_t *l);

static inline int gpb__lock_try(gpb__lock_t *l) {
  uint32_t z = 0;
  return atomic_compare_exchange_strong_explicit(
      &l->w, &z, 1, memory_order_acquire, memory_order_relaxed);
}

static inline void gpb__lock(gpb__lock_t *l) {
  if (GPB__UNLIKELY(!gpb__lock_try(l))) gpb__lock_wait(l);
}

static inline void gpb__unlock(gpb__lock_t *l) {
  if (GPB__UNLIKELY(atomic_exchange_explicit(&l->w, 0, memory_order_release) ==
                    2))
    gpb__lock_wake(l);
}

#define GPB__MAX_ARENAS 64
/* GPB_CFG_VMM: the address range is this many times the budget. */
#define GPB__VMM_SPAN 4u

/* Call sites (sites.c): a table of stacks, interned into ids 1..
 * GPB_MAX_SITES, each resolved once with dladdr. Adding takes the
 * table's own lock (never while a pool's is held); reading takes none. */
typedef struct gpb__sites gpb__sites_t;
/* depth 0: *out NULL (off). Depths above GPB_SITE_DEPTH_MAX are cut. */
GPB__HIDDEN int gpb__sites_open(uint32_t depth, gpb__sites_t **out);
GPB__HIDDEN void gpb__sites_close(gpb__sites_t *s);
/* The id of the calling stack, whose innermost frame returns to `ra`
 * (the public entry point's return address); 0 when the table is full. */
GPB__HIDDEN uint32_t gpb__sites_here(gpb__sites_t *s, void *ra);
/* The id of the stack the caller names by `key` (its own hash of it),
 * stored as `text` (frames, innermost first, ';' between; a Python frame
 * reads "FILE:LINE NAME") the first time; 0 when the table is full. */
GPB__HIDDEN uint32_t gpb__sites_intern(gpb__sites_t *s, uint64_t key,
                                       const char *text);
/* "MODULE+0xOFF SYMBOL;..." of a site, or NULL. NULL-safe. */
GPB__HIDDEN const char *gpb__sites_text(const gpb__sites_t *s, uint32_t id);
/* Up to max of site id's frames into frames, their count in *n (NULL:
 * not wanted); GPB_ENOTFOUND for an id never given. NULL-safe. */
GPB__HIDDEN int gpb__sites_frames(const gpb__sites_t *s, uint32_t id,
                                  gpb_frame_t *frames, uint32_t max,
                                  uint32_t *n);

/* A per-thread sub-allocator: a core over the pool's whole unit range
 * whose roots are superblocks the pool's core lent it. Aligned so that
 * two arenas never share a cache line. */
typedef struct gpb__arena {
  gpb__lock_t lock;
  gpb__buddy_t core;
  /* While no consumer listens, what this arena's events changed in the
   * counters since they were last folded into the pool's (wrapping sums:
   * only the total is meaningful). */
  gpb_stats_t delta;
  gpb__gpu_t *gpu; /* device/pinned pools: its own pending async frees */
  uint32_t index;
} __attribute__((aligned(64))) gpb__arena_t;

struct gpb_pool {
  gpb__lock_t lock;
  gpb__buddy_t core;
  gpb_stats_t stats;
  gpb_pool_info_t info;
  char *base;
  size_t host_align;   /* alignment the host backend reserved with */
  uint64_t base_align; /* largest power of two dividing base */
  uint64_t now;        /* time of the call in progress (0: not recorded) */
  uint64_t last_now;   /* latest time stamped */
  int want_time;        /* 0 no times, 1 tick clock, 2 fine clock */
  int debug;
  gpb_hook_fn hook;
  void *hook_user;
  gpb__pub_t *pub;
  gpb_trace_writer_t *trace;
  char env_trace[256]; /* the trace's path when GPB_TRACE started it */
  gpb__gpu_t *gpu; /* device/pinned pools: async frees, NVTX (stream.c) */
  gpb__vmm_t *vmm;    /* GPB_CFG_VMM: pages under live blocks (vmm.c) */
  size_t vmm_limit;   /* GPB_CFG_VMM: the physical budget; 0 without */
  /* Arenas (arena.c); narenas is 1 and the rest unused without them. */
  uint32_t narenas;
  /* 0 while the pool runs as one lock (see gpb__pool_lock_or_arenas);
   * set once, for good, when the arenas take over. */
  _Atomic int arenas_on;
  uint32_t sb_order;    /* a superblock is 2^sb_order units */
  uint32_t arena_order; /* requests of this order or less go to arenas */
  int loud;             /* a consumer listens: arena calls hold the pool's
                           lock too, so events form one ordered stream */
  uint64_t nsb;         /* superblocks in the pool */
  uint64_t id;          /* tells pools apart in a thread's memory */
  _Atomic uint8_t *owner; /* per superblock: 0 the pool's core, a+1 arena a */
  gpb__arena_t *arenas;
  gpb__sites_t *sites; /* GPB_CFG_CALLSITES; NULL when off */
};

/* pool.c: the pool's event sink (stats, hook, publisher, trace). Caller
 * holds the pool's lock. */
GPB__HIDDEN void gpb__pool_emit(void *ctx, gpb_event_t *ev);
/* Stamps the time of the call in progress into p->now. Pool's lock held.
 * Threads read the clock apart (clock.c), so a pool keeps its own times
 * from going back. */
static inline void gpb__pool_stamp(gpb_pool_t *p) {
  if (!p->want_time) {
    p->now = 0;
    return;
  }
  uint64_t t;
  if (p->want_time == 2) {
    t = gpb_now_ns();
  } else {
    t = atomic_load_explicit(&gpb__tick_ns, memory_order_relaxed);
    if (GPB__UNLIKELY(t == 0)) t = gpb__now_coarse_ns();
  }
  if (t > p->last_now) p->last_now = t;
  p->now = p->last_now;
}

/* A pool with arenas runs as one lock until two threads first meet on
 * that lock: a program that allocates from one thread at a time then
 * pays a trylock for the lock, not the arena layer's 100 or so
 * instructions a call, and its memory stays in one core. Returns 1 with the pool's lock
 * held, 0 when the call goes to the arenas. Once on, arenas stay on. A
 * block allocated in an arena was allocated after the flag was set, so
 * whoever frees it, having been handed the pointer, sees the flag set. */
static inline int gpb__pool_lock_or_arenas(gpb_pool_t *p) {
  if (p->narenas <= 1) {
    gpb__lock(&p->lock);
    return 1;
  }
  if (atomic_load_explicit(&p->arenas_on, memory_order_relaxed)) return 0;
  if (gpb__lock_try(&p->lock)) return 1;
  atomic_store_explicit(&p->arenas_on, 1, memory_order_relaxed);
  return 0;
}

/* One allocation or free in one core, through its GPU state when it has
 * one; the free fills host-visible memory first in debug mode. Caller
 * holds that core's lock. */
static inline int gpb__pool_core_alloc(gpb__buddy_t *core, gpb__gpu_t *gpu,
                                       uint64_t size, uint32_t align_order,
                                       uint32_t tag, uint32_t site,
                                       void *stream, uint64_t now,
                                       uint64_t *unit) {
  return gpu ? gpb__gpu_alloc(gpu, core, size, align_order, tag, site, stream,
                              now, unit)
             : gpb__buddy_alloc(core, size, align_order, tag, site,
                                (uint64_t)(uintptr_t)stream, now, unit);
}
/* Debug mode: fills the allocation at off, unless a stream still uses
 * it, before a synchronous free (pool.c). */
GPB__HIDDEN void gpb__pool_fill_freed(gpb_pool_t *p, gpb__buddy_t *core,
                                      gpb__gpu_t *gpu, uint64_t off);
static inline int gpb__pool_core_free(gpb_pool_t *p, gpb__buddy_t *core,
                                      gpb__gpu_t *gpu, uint64_t off,
                                      void *stream, int async) {
  if (GPB__UNLIKELY(p->debug >= 1) && !async)
    gpb__pool_fill_freed(p, core, gpu, off);
  return gpu ? gpb__gpu_free(gpu, core, off, stream, async)
             : gpb__buddy_free(core, off, (uint64_t)(uintptr_t)stream);
}

/* options.c: a pool's config, checked and completed from the environment
 * (unless GPB_CFG_NO_ENV), into cfg; o holds what cfg points into. */
typedef struct gpb__options {
  char name[GPB_NAME_MAX]; /* GPB_PUBLISH's, for this pool */
  char trace[4096];        /* GPB_TRACE's, for this pool */
  int trace_from_env;
  const char *plan;        /* GPB_PLAN, or NULL */
} gpb__options_t;
GPB__HIDDEN int gpb__options_pool(const gpb_config_t *in, gpb_config_t *cfg,
                                  gpb__options_t *o);
/* A size ("512M", "2G", bytes) into *bytes, or a percentage in (0, 100]
 * ("90%") into *share (0 to 1, *bytes 0): GPB_TORCH_POOL_SIZE's form.
 * GPB_EINVAL naming var=s. */
GPB__HIDDEN int gpb__options_size(const char *var, const char *s,
                                  double *share, size_t *bytes);
/* GPB_EINVAL when path (an output: trace) names something that is not a
 * regular file, "-" or a character device (a FIFO would block). */
GPB__HIDDEN int gpb__options_output(const char *var, const char *path);

/* arena.c. Open chooses the superblock size; with a pool too small for
 * superblocks (or n <= 1) it leaves narenas at 1 and does nothing. */
GPB__HIDDEN int gpb__arenas_open(gpb_pool_t *p, uint32_t n);
GPB__HIDDEN void gpb__arenas_close(gpb_pool_t *p);
/* The whole allocation path of a pool with arenas: the caller's arena,
 * a superblock from the pool's core, the pool's core, then everything
 * reclaimed. FAIL is emitted once, only when the request fails. */
GPB__HIDDEN int gpb__arenas_alloc(gpb_pool_t *p, uint64_t size,
                                  uint32_t align_order, uint32_t tag,
                                  uint32_t site, void *stream,
                                  uint64_t *unit);
GPB__HIDDEN int gpb__arenas_free(gpb_pool_t *p, uint64_t off, void *stream,
                                 int async);
/* Bytes usable in the allocation at off, or a misuse code. */
GPB__HIDDEN int gpb__arenas_usable(gpb_pool_t *p, uint64_t off, size_t *out);
/* Every lock, arenas first (none but the pool's without arenas). */
GPB__HIDDEN void gpb__pool_lock_all(gpb_pool_t *p);
GPB__HIDDEN void gpb__pool_unlock_all(gpb_pool_t *p);
/* With every lock held: switches the arenas' events to the pool's sink
 * (loud) after folding their counters in, or back to their own. */
GPB__HIDDEN void gpb__arenas_set_loud(gpb_pool_t *p, int loud);
/* With every lock held: the pool's counters plus every arena's, peaks
 * raised to the totals (and kept); and in merged (zeroed by the caller)
 * what the coalesced map changes in the free blocks per order, across
 * the cores: a superblock free as a whole in an arena merges with its
 * free buddy in the pool's core (gpb__buddy_merged). */
GPB__HIDDEN void gpb__arenas_stats(gpb_pool_t *p, gpb_stats_t *out,
                                   int64_t *merged);
/* With every lock held: merges deferred pairs everywhere, waits for
 * pending async frees in arenas when `drain`, and gives every wholly
 * free superblock back to the pool's core. */
GPB__HIDDEN void gpb__arenas_reclaim(gpb_pool_t *p, int drain);
/* With every lock held: every invariant of the arenas and of the pool's
 * core with them. */
/* Checks the arenas and adds their free blocks per order to nfree. */
GPB__HIDDEN int gpb__arenas_check(const gpb_pool_t *p,
                                  uint64_t nfree[GPB_MAX_ORDERS]);

/* The host backend (backend-host.c): backed = 0 reserves address space
 * only (the virtual backend). */
GPB__HIDDEN int gpb__host_reserve(size_t size, size_t align, int backed,
                                  void **base);
GPB__HIDDEN void gpb__host_release(void *base, size_t size, size_t align);

/* For consumers that must see the pool as it is (keyframes), called with
 * the pool's lock held while a consumer listens (then arenas, if any, run
 * under it too and their counters are folded into the pool's). */
GPB__HIDDEN int gpb__pool_visit_locked(const gpb_pool_t *pool, gpb_visit_fn fn,
                                       void *user);
GPB__HIDDEN const gpb_stats_t *gpb__pool_counters(const gpb_pool_t *pool);
/* Host metadata of a pool: its core's and every arena's (bench/). */
GPB__HIDDEN size_t gpb__pool_meta_bytes(const gpb_pool_t *pool);


#endif /* GPB_POOL_H */
