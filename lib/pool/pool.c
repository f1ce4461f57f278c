/* SPDX-License-Identifier: MIT */
/*
 * pool.c: the public pool. It owns the lock, the backend reservation, the
 * offset <-> pointer translation and the event consumers.
 *
 * Without arenas every public call takes the pool's lock once (with
 * arenas, arena.c routes the calls); the buddy core below it does
 * O(orders) work and hands each event to the sink this file sets up
 * (pool_update_want_time), by who listens: with a hook or a trace,
 * gpb__pool_emit() stamps the sequence number and time and gives the
 * event to the stats, the hook, the live publisher and the trace writer,
 * in that order; with only the stats, the core counts in place; with
 * only the stats and the publisher, it also hands each event's fields to
 * the publisher's ring store. No call on the allocation path makes a
 * system call (the clock is read through the vDSO, and only when a
 * consumer wants times).
 */
#include "pool/pool.h"
#include "plan/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Caller holds the lock. */
void gpb__pool_emit(void *ctx, gpb_event_t *ev) {
  gpb_pool_t *p = ctx;
  ev->seq = ++p->stats.seq;
  ev->time_ns = p->now;
  gpb__stats_count(&p->stats, ev->type, ev->offset, ev->size, ev->requested,
                   ev->tag, ev->order); /* = gpb__stats_apply, inline */
  if (p->hook) p->hook(ev, p->hook_user);
  if (p->pub) gpb__pub_event(p->pub, ev);
  if (p->trace) {
    /* A site is defined in the trace before the first op that names it. */
    if (ev->site && !gpb__trace_has_site(p->trace, ev->site))
      gpb_trace_write_site(p->trace, ev->site,
                           gpb__sites_text(p->sites, ev->site));
    gpb__trace_event(p->trace, ev);
  }
}

/* Every lock held (gpb__pool_lock_all). A hook or a trace gets the fine
 * clock. The publisher alone gets the millisecond ticker (clock.c):
 * reading a clock on every call was half of what publishing cost, and
 * the viewer's ages and time series need milliseconds, not nanoseconds.
 * It also gets the core's direct path: stats counted in place and each
 * event handed to the ring's writer (the sink's put), with no event
 * built.
 * Arena cores, when loud, still come through gpb__pool_emit: both paths
 * number events from p->stats under the pool's lock. */
static void pool_update_want_time(gpb_pool_t *p) {
  gpb__buddy_unsync(&p->core); /* into the counters it has counted in */
  p->want_time = p->hook || p->trace ? 2 : p->pub ? 1 : 0;
  int direct = p->pub && p->want_time == 1;
  p->core.sink.counters = !p->want_time || direct ? &p->stats : NULL;
  p->core.sink.put = direct ? gpb__ring_sink_put : NULL;
  p->core.sink.put_ctx = direct ? gpb__pub_ring(p->pub) : NULL;
  gpb__arenas_set_loud(p, p->want_time != 0);
}

/* The keyframe's view of the pool (live.h), under the pool's lock. */
static int pool_visit_src(const void *src, gpb_visit_fn fn, void *user) {
  return gpb__pool_visit_locked(src, fn, user);
}

static const gpb_stats_t *pool_counters_src(const void *src) {
  return gpb__pool_counters(src);
}

static const char *pool_site_src(const void *src, uint32_t site) {
  return gpb__sites_text(((const gpb_pool_t *)src)->sites, site);
}

static int pool_host_visible(const gpb_pool_t *p) {
  return p->info.backend == GPB_BACKEND_HOST ||
         p->info.backend == GPB_BACKEND_PINNED;
}

static int pool_reserve(gpb_pool_t *p, const gpb_config_t *cfg) {
  size_t size = cfg->pool_size;
  switch (p->info.backend) {
  case GPB_BACKEND_HOST:
  case GPB_BACKEND_VIRTUAL: {
    /* Align the base to the largest root (capped at 1 GiB) so blocks are
     * aligned to their size as addresses, not just as offsets. */
    size_t a = (size_t)1 << (63 - __builtin_clzll(size));
    if (a > ((size_t)1 << 30)) a = (size_t)1 << 30;
    if (a < 4096) a = 4096;
    p->host_align = a;
    return gpb__host_reserve(size, a, p->info.backend == GPB_BACKEND_HOST,
                             (void **)&p->base);
  }
  case GPB_BACKEND_DEVICE:
    if (p->vmm_limit)
      return gpb__vmm_open(cfg->device, size, p->vmm_limit,
                           (void **)&p->base, &p->vmm);
    /* fall through */
  case GPB_BACKEND_PINNED:
    return gpb__cuda_reserve(p->info.backend, cfg->device, size,
                             (void **)&p->base);
  default:
    return gpb__fail(GPB_EINVAL, "unknown backend %d", (int)p->info.backend);
  }
}

static void pool_release(gpb_pool_t *p) {
  if (!p->base) return;
  switch (p->info.backend) {
  case GPB_BACKEND_HOST:
  case GPB_BACKEND_VIRTUAL:
    gpb__host_release(p->base, (size_t)p->info.pool_size, p->host_align);
    break;
  case GPB_BACKEND_DEVICE:
  case GPB_BACKEND_PINNED:
    if (p->vmm) {
      gpb__vmm_close(p->vmm);
      p->vmm = NULL;
    } else {
      gpb__cuda_release(p->info.backend, p->info.device, p->base);
    }
    break;
  default:
    break;
  }
  p->base = NULL;
}

/* VMM pools: pool_size is the physical budget (*limit); blocks are
 * placed in an address range GPB__VMM_SPAN times larger, whole granules
 * of 2 MiB. */
static int pool_vmm_config(gpb_config_t *cfg, size_t *limit) {
  *limit = 0;
  if (!(cfg->flags & GPB_CFG_VMM)) return 0;
  if (cfg->backend != GPB_BACKEND_DEVICE)
    return gpb__fail(GPB_EINVAL, "GPB_CFG_VMM needs the device backend");
  if (cfg->arenas != 1)
    return gpb__fail(GPB_EINVAL, "GPB_CFG_VMM pools have no arenas");
  if (cfg->pool_size > SIZE_MAX / GPB__VMM_SPAN)
    return gpb__fail(GPB_EINVAL, "pool_size %zu is too large", cfg->pool_size);
  *limit = cfg->pool_size;
  cfg->pool_size = (cfg->pool_size * GPB__VMM_SPAN + (2u << 20) - 1) &
                   ~(size_t)((2u << 20) - 1);
  return 0;
}

/* The pool, its core and its reservation, with nothing listening yet. */
static int pool_new(const gpb_config_t *cfg, size_t vmm_limit,
                    gpb_pool_t **out) {
  gpb_pool_t *p = calloc(1, sizeof *p);
  if (!p) return gpb__fail(GPB_EHOSTMEM, "no host memory for the pool");
  p->vmm_limit = vmm_limit;
  uint32_t shift = (uint32_t)__builtin_ctzll(cfg->min_block);
  p->info.pool_size = cfg->pool_size;
  p->info.min_block = cfg->min_block;
  p->info.managed_size = (cfg->pool_size >> shift) << shift;
  p->info.backend = cfg->backend;
  p->info.policy = cfg->policy;
  p->info.device = cfg->device;
  p->info.rank = gpb__env_rank();
  if (cfg->name) strcpy(p->info.name, cfg->name);
  p->debug = cfg->debug;
  int rc = gpb__buddy_init(&p->core, cfg->pool_size >> shift, shift,
                           cfg->policy);
  if (rc) {
    free(p);
    return rc;
  }
  if (cfg->flags & GPB_CFG_EAGER_MERGE) p->core.defer_cap = 0;
  p->core.sink.emit = gpb__pool_emit;
  p->core.sink.emit_ctx = p;
  p->info.num_orders = p->core.norders;
  p->info.num_roots = gpb__buddy_num_roots(&p->core);
  gpb__stats_init(&p->stats, p->info.managed_size, cfg->min_block,
                  p->core.norders);
  if ((rc = pool_reserve(p, cfg))) {
    gpb__buddy_fini(&p->core);
    free(p);
    return rc;
  }
  p->info.base = p->base;
  /* A first-touch page fault costs microseconds: take them all now, once
   * the memory is ours (a simulated pool may be far larger than RAM). */
  if (!(cfg->flags & GPB_CFG_LAZY_META) && cfg->backend != GPB_BACKEND_VIRTUAL)
    gpb__buddy_prefault(&p->core);
  uintptr_t b = (uintptr_t)p->base;
  p->base_align = b ? (1ull << __builtin_ctzll(b)) : (1ull << 63);
  p->narenas = 1;
  *out = p;
  return 0;
}

/* The GPU state, the arenas and the call-site table. */
static int pool_open_parts(gpb_pool_t *p, const gpb_config_t *cfg) {
  int rc;
  if ((rc = gpb__gpu_open(p->info.backend, p->info.device, p->base,
                          p->vmm ? 0 : (size_t)p->info.pool_size,
                          &p->gpu)) ||
      (rc = gpb__arenas_open(p, cfg->arenas)))
    return rc;
  /* Arenas have pending frees of their own: a fence on one stream of
   * the pool would not cover blocks another arena returned at once. */
  if ((cfg->flags & GPB_CFG_SOLO_STREAM) && p->narenas == 1)
    gpb__gpu_set_solo(p->gpu);
  p->info.num_arenas = p->narenas;
  if ((cfg->flags & GPB_CFG_ARENAS_EAGER) && p->narenas > 1)
    atomic_store_explicit(&p->arenas_on, 1, memory_order_relaxed);
  if (cfg->flags & GPB_CFG_CALLSITES) {
    uint32_t depth = (cfg->flags >> 24) & 0xffu;
    if ((rc = gpb__sites_open(depth ? depth : 1, &p->sites))) return rc;
  }
  return 0;
}

/* The trace, the live publisher and the plan the config names. */
static int pool_open_consumers(gpb_pool_t *p, const gpb_config_t *cfg,
                               const gpb__options_t *env) {
  int rc;
  if (env->trace_from_env)
    snprintf(p->env_trace, sizeof p->env_trace, "%s", cfg->trace_path);
  if (cfg->trace_path && (rc = gpb_pool_trace_start(p, cfg->trace_path)))
    return rc;
  if (cfg->name &&
      (rc = gpb__pub_open(cfg->name, &p->info, p->sites != NULL, &p->pub)))
    return rc;
  if (p->pub) {
    gpb__ring_t *r = gpb__pub_ring(p->pub);
    r->now = &p->now;
    r->src = p;
    r->visit = pool_visit_src;
    r->counters = pool_counters_src;
    r->site_text = pool_site_src;
  }
  if (env->plan && (rc = gpb_pool_set_plan_file(p, env->plan))) {
    char why[300];
    snprintf(why, sizeof why, "%s", gpb_last_error_detail());
    return gpb__fail(rc, "GPB_PLAN: %s", why);
  }
  return 0;
}

int gpb_pool_create(const gpb_config_t *cfg_in, gpb_pool_t **out) {
  gpb_config_t defaults, cfg;
  gpb__options_t env;
  size_t vmm_limit;
  if (!out) return gpb__fail(GPB_EINVAL, "out is NULL");
  *out = NULL;
  if (!cfg_in) {
    gpb_config_init(&defaults);
    cfg_in = &defaults;
  }
  int rc = gpb__options_pool(cfg_in, &cfg, &env);
  if (rc) return rc;
  if (cfg.backend == GPB_BACKEND_AUTO)
    cfg.backend = gpb__cuda_usable(cfg.device) ? GPB_BACKEND_DEVICE
                                               : GPB_BACKEND_HOST;
  gpb_pool_t *p = NULL;
  if ((rc = pool_vmm_config(&cfg, &vmm_limit)) ||
      (rc = pool_new(&cfg, vmm_limit, &p)))
    return rc;
  if ((rc = pool_open_parts(p, &cfg)) ||
      (rc = pool_open_consumers(p, &cfg, &env))) {
    gpb_pool_destroy(p);
    return rc;
  }
  pool_update_want_time(p);
  *out = p;
  return 0;
}

void gpb_pool_destroy(gpb_pool_t *p) {
  if (!p) return;
  /* A program that did not ask for the trace cannot check for its loss:
   * say it here, once (a full disk, say). */
  if (p->trace && gpb_trace_writer_close(p->trace) && p->env_trace[0])
    fprintf(stderr, "gpubuddy: the trace GPB_TRACE asked for (%s) is "
            "incomplete: %s\n", p->env_trace, gpb_last_error_detail());
  gpb__pub_close(p->pub);
  gpb__sites_close(p->sites);
  gpb__arenas_close(p);
  gpb__gpu_close(p->gpu);
  pool_release(p);
  gpb__buddy_fini(&p->core);
  free(p);
}

/* VMM pools: maps the granules of the allocation at `unit`, or gives it
 * back (stream-ordered: it may be a block reused from a pending free) and
 * fails. Pool's lock held. */
static int pool_vmm_use(gpb_pool_t *p, uint64_t unit, void *stream) {
  const gpb__arec_t *r = gpb__atab_find(&p->core.atab, unit);
  if (!r) return 0;
  uint32_t sh = p->core.min_shift;
  int rc = gpb__vmm_use(p->vmm, unit << sh, r->units << sh);
  if (rc) {
    gpb__arec_t a = *r; /* the free below removes the record */
    gpb__pool_core_free(p, &p->core, p->gpu, unit << sh, stream, 1);
    /* The core placed the block, so its ALLOC and FREE went out; the
     * request failed all the same, and consumers and stats must see it. */
    uint32_t order = gpb__ceil_log2(a.units);
    gpb__emit(&p->core, GPB_EV_FAIL, 0, 0, order, a.requested, a.tag, a.site,
              (uint64_t)(uintptr_t)stream);
  }
  return rc;
}

/* Every public allocation call: ra is where it returns to in its caller,
 * the innermost frame of the call site. Inlined into each entry point,
 * so that one with call sites off pays no call layer for ra. */
static GPB__INLINE int pool_alloc(gpb_pool_t *p, size_t size, size_t align, uint32_t tag,
                      void *stream, void **out, void *ra, uint32_t site) {
  if (!p || !out) return gpb__fail(GPB_EINVAL, "pool or out is NULL");
  *out = NULL;
  if (align & (align - 1))
    return gpb__fail(GPB_EALIGN, "alignment %zu is not a power of two", align);
  if (tag >= GPB_MAX_TAGS)
    return gpb__fail(GPB_EINVAL, "tag %u is not below %d", tag, GPB_MAX_TAGS);
  if (size == 0) return 0; /* like cudaMalloc: success, NULL, no event */
  uint32_t align_order = 0;
  if (align > p->info.min_block) {
    if (align > p->base_align || align > p->info.managed_size)
      return gpb__fail(GPB_EALIGN, "alignment %zu is larger than this pool "
                       "can give (base aligned to %llu, %llu bytes managed)",
                       align, (unsigned long long)p->base_align,
                       (unsigned long long)p->info.managed_size);
    align_order = (uint32_t)(__builtin_ctzll(align) - p->core.min_shift);
  }
  uint64_t unit;
  int rc;
  /* Off: this one predicted branch. On: found before any lock is taken
   * (a new stack is resolved under the site table's own lock). */
  if (GPB__UNLIKELY(p->sites != NULL) && ra) site = gpb__sites_here(p->sites, ra);
  if (!gpb__pool_lock_or_arenas(p)) {
    rc = gpb__arenas_alloc(p, size, align_order, tag, site, stream, &unit);
  } else {
    gpb__pool_stamp(p);
    rc = gpb__pool_core_alloc(&p->core, p->gpu, size, align_order, tag, site,
                              stream, p->now, &unit);
    if (rc == 0 && p->vmm) rc = pool_vmm_use(p, unit, stream);
    gpb__unlock(&p->lock);
  }
  if (rc) return rc;
  *out = p->base + (unit << p->core.min_shift);
  /* Not for pinned pools: a block reused from a pending async free may
   * still be in use by earlier work on its stream. */
  if (p->debug >= 1 && p->info.backend == GPB_BACKEND_HOST)
    memset(*out, 0xA5, size); /* mem5's habit: make stale reads visible */
  if (p->debug >= 2 && (rc = gpb_pool_check(p)) != 0) *out = NULL;
  gpb_assert_expensive(gpb_pool_check(p) == 0);
  return rc;
}

/* Each entry point passes its own return address: one called through
 * another would name the library as the call site. */
int gpb_alloc_ex(gpb_pool_t *p, size_t size, size_t align, uint32_t tag,
                 void *stream, void **out) {
  return pool_alloc(p, size, align, tag, stream, out,
                    __builtin_return_address(0), 0);
}

int gpb_alloc(gpb_pool_t *p, size_t size, void **out) {
  return pool_alloc(p, size, 0, 0, NULL, out, __builtin_return_address(0), 0);
}

int gpb_alloc_aligned(gpb_pool_t *p, size_t size, size_t align, void **out) {
  return pool_alloc(p, size, align, 0, NULL, out,
                    __builtin_return_address(0), 0);
}

int gpb_alloc_tagged(gpb_pool_t *p, size_t size, uint32_t tag, void **out) {
  return pool_alloc(p, size, 0, tag, NULL, out, __builtin_return_address(0), 0);
}

int gpb_pool_site_intern(gpb_pool_t *p, uint64_t key, const char *text,
                         uint32_t *site) {
  if (!p || !text || !site) return gpb__fail(GPB_EINVAL, "NULL argument");
  *site = p->sites ? gpb__sites_intern(p->sites, key, text) : 0;
  return 0;
}

int gpb_alloc_site(gpb_pool_t *p, size_t size, size_t align, uint32_t tag,
                   void *stream, uint32_t site, void **out) {
  if (p && site && !gpb__sites_text(p->sites, site))
    return gpb__fail(GPB_EINVAL, "call site %u was not given by "
                     "gpb_pool_site_intern", site);
  return pool_alloc(p, size, align, tag, stream, out, NULL, site);
}

int gpb_pool_site(const gpb_pool_t *p, uint32_t site, gpb_frame_t *frames,
                  uint32_t max, uint32_t *n) {
  if (!p || (max && !frames)) return gpb__fail(GPB_EINVAL, "NULL argument");
  return gpb__sites_frames(p->sites, site, frames, max, n);
}

int gpb_pool_site_text(const gpb_pool_t *p, uint32_t site, char *buf,
                       size_t len) {
  if (!p || (len && !buf)) return gpb__fail(GPB_EINVAL, "NULL argument");
  const char *t = gpb__sites_text(p->sites, site);
  if (!t) return gpb__sites_frames(p->sites, site, NULL, 0, NULL);
  return snprintf(buf, len, "%s", t);
}

/* Offset of ptr, or a misuse code. */
static int pool_offset(const gpb_pool_t *p, const void *ptr, uint64_t *off) {
  uintptr_t a = (uintptr_t)ptr, b = (uintptr_t)p->base;
  if (a < b || a - b >= p->info.managed_size)
    return gpb__fail(GPB_EFOREIGN, "pointer %p is outside the pool [%p, +%llu)",
                     ptr, (void *)p->base,
                     (unsigned long long)p->info.managed_size);
  *off = a - b;
  return 0;
}

void gpb__pool_fill_freed(gpb_pool_t *p, gpb__buddy_t *core, gpb__gpu_t *gpu,
                          uint64_t off) {
  if (pool_host_visible(p) &&
      !(gpu && gpb__gpu_pending(gpu, off >> core->min_shift))) {
    const gpb__arec_t *r = gpb__atab_find(&core->atab, off >> core->min_shift);
    if (r && r->tag != GPB__TAG_LENT && (off & (p->info.min_block - 1)) == 0)
      memset(p->base + off, 0xDD, r->units << core->min_shift);
  }
}

static int pool_free(gpb_pool_t *p, void *ptr, void *stream, int async) {
  if (!p) return gpb__fail(GPB_EINVAL, "pool is NULL");
  if (!ptr) return 0;
  uint64_t off = 0;
  int rc = pool_offset(p, ptr, &off);
  if (rc) return rc;
  if (p->narenas > 1 &&
      atomic_load_explicit(&p->arenas_on, memory_order_relaxed)) {
    rc = gpb__arenas_free(p, off, stream, async);
  } else {
    gpb__lock(&p->lock);
    gpb__pool_stamp(p);
    uint64_t units = 0;
    if (p->vmm) { /* what the free will release, before it does */
      const gpb__arec_t *r =
          (off & (p->info.min_block - 1)) ||
                  gpb__gpu_pending(p->gpu, off >> p->core.min_shift)
              ? NULL
              : gpb__atab_find(&p->core.atab, off >> p->core.min_shift);
      units = r ? r->units : 0;
    }
    rc = gpb__pool_core_free(p, &p->core, p->gpu, off, stream, async);
    if (rc == 0 && units)
      gpb__vmm_unuse(p->vmm, off, units << p->core.min_shift);
    gpb__unlock(&p->lock);
  }
  if (rc == 0 && p->debug >= 2) rc = gpb_pool_check(p);
  gpb_assert_expensive(gpb_pool_check(p) == 0);
  return rc;
}

int gpb_free(gpb_pool_t *p, void *ptr) { return pool_free(p, ptr, NULL, 0); }

int gpb_free_async(gpb_pool_t *p, void *ptr, void *stream) {
  return pool_free(p, ptr, stream, 1);
}

int gpb_pool_drain(gpb_pool_t *p) {
  if (!p) return gpb__fail(GPB_EINVAL, "pool is NULL");
  gpb__pool_lock_all(p);
  gpb__pool_stamp(p);
  int rc = gpb__gpu_drain(p->gpu, &p->core);
  for (uint32_t i = 0; i < p->narenas && p->arenas; i++)
    gpb__gpu_drain(p->arenas[i].gpu, &p->arenas[i].core);
  gpb__pool_unlock_all(p);
  return rc;
}

int gpb_pool_coalesce(gpb_pool_t *p) {
  if (!p) return gpb__fail(GPB_EINVAL, "pool is NULL");
  gpb__pool_lock_all(p);
  gpb__pool_stamp(p);
  gpb__arenas_reclaim(p, 0);
  gpb__buddy_coalesce(&p->core);
  gpb__pool_unlock_all(p);
  return 0;
}

int gpb_usable_size(const gpb_pool_t *cp, const void *ptr, size_t *out) {
  gpb_pool_t *p = (gpb_pool_t *)cp;
  if (!p || !ptr || !out) return gpb__fail(GPB_EINVAL, "NULL argument");
  uint64_t off = 0;
  int rc = pool_offset(p, ptr, &off);
  if (rc) return rc;
  if (p->narenas > 1) {
    rc = gpb__arenas_usable(p, off, out);
  } else {
    gpb__lock(&p->lock);
    const gpb__arec_t *r =
        (off & (p->info.min_block - 1))
            ? NULL
            : gpb__atab_find(&p->core.atab, off >> p->core.min_shift);
    if (r) *out = (size_t)(r->units << p->core.min_shift);
    else rc = GPB_EINTERIOR;
    gpb__unlock(&p->lock);
  }
  if (rc) return gpb__fail(GPB_EINTERIOR, "pointer %p is not the start of an "
                           "allocation", (void *)ptr);
  return 0;
}

int gpb_pool_check(const gpb_pool_t *cp) {
  gpb_pool_t *p = (gpb_pool_t *)cp;
  if (!p) return gpb__fail(GPB_EINVAL, "pool is NULL");
  gpb__pool_lock_all(p);
  /* Lent superblocks are records of the pool's core, blocks of arenas. */
  uint64_t nfree[GPB_MAX_ORDERS], live = gpb__atab_count(&p->core.atab);
  gpb__buddy_nfree(&p->core, nfree);
  int rc = gpb__buddy_check(&p->core);
  if (rc == 0) rc = gpb__arenas_check(p, nfree);
  gpb_stats_t s;
  int64_t merged[GPB_MAX_ORDERS] = {0};
  gpb__arenas_stats(p, &s, merged);
  if (rc == 0) {
    gpb__merge_walk_t w;
    memset(&w, 0, sizeof w);
    w.nunits = p->core.nunits;
    w.min_block = 1ull << p->core.min_shift;
    w.norders = p->core.norders;
    rc = gpb__pool_visit_locked(p, gpb__merge_walk_block, &w);
    gpb__merge_walk_end(&w);
    if (rc == 0) rc = gpb__merge_walk_check(&w, &s, merged);
  }
  for (uint32_t i = 0; i < p->narenas && p->arenas; i++)
    live += gpb__atab_count(&p->arenas[i].core.atab);
  for (uint64_t sb = 0; sb < p->nsb; sb++)
    live -= atomic_load_explicit(&p->owner[sb], memory_order_relaxed) != 0;
  for (uint32_t k = 0; rc == 0 && k < p->core.norders; k++)
    if (s.free_blocks[k] != nfree[k])
      rc = gpb__fail(GPB_ECORRUPT, "stats: order %u free count %llu, map has "
                     "%llu", k, (unsigned long long)s.free_blocks[k],
                     (unsigned long long)nfree[k]);
  if (rc == 0 && s.live_allocs != live)
    rc = gpb__fail(GPB_ECORRUPT, "stats: %llu live allocations, tables have "
                   "%llu", (unsigned long long)s.live_allocs,
                   (unsigned long long)live);
  if (rc == 0 && s.free_bytes + s.block_bytes != p->info.managed_size)
    rc = gpb__fail(GPB_ECORRUPT, "stats: free + used bytes != managed size");
  if (rc == 0 && p->vmm) rc = gpb__vmm_check(p->vmm);
  gpb__pool_unlock_all(p);
  return rc;
}

int gpb_pool_memory(const gpb_pool_t *cp, uint64_t *held, uint64_t *limit) {
  gpb_pool_t *p = (gpb_pool_t *)cp;
  if (!p) return gpb__fail(GPB_EINVAL, "pool is NULL");
  uint64_t h = p->info.backend == GPB_BACKEND_VIRTUAL ? 0 : p->info.pool_size;
  uint64_t l = h;
  if (p->vmm) {
    gpb__lock(&p->lock);
    gpb__vmm_usage(p->vmm, &h, &l);
    gpb__unlock(&p->lock);
  }
  if (held) *held = h;
  if (limit) *limit = l;
  return 0;
}

int gpb_pool_trim(gpb_pool_t *p) {
  if (!p) return gpb__fail(GPB_EINVAL, "pool is NULL");
  if (!p->vmm) return 0;
  gpb__lock(&p->lock);
  gpb__vmm_trim(p->vmm);
  gpb__unlock(&p->lock);
  return 0;
}

int gpb_pool_reset_peaks(gpb_pool_t *p) {
  if (!p) return gpb__fail(GPB_EINVAL, "pool is NULL");
  gpb__pool_lock_all(p);
  gpb_stats_t *s = &p->stats;
  s->requested_peak = s->requested_bytes;
  s->block_peak = s->block_bytes;
  s->free_peak = s->free_bytes;
  gpb__pool_unlock_all(p);
  return 0;
}

int gpb_pool_info(const gpb_pool_t *p, gpb_pool_info_t *out) {
  if (!p || !out) return gpb__fail(GPB_EINVAL, "NULL argument");
  *out = p->info;
  out->pid = (int32_t)getpid(); /* now, not at creation: a forked child's */
  return 0;
}

int gpb_pool_stats(const gpb_pool_t *cp, gpb_stats_t *out) {
  gpb_pool_t *p = (gpb_pool_t *)cp;
  if (!p || !out) return gpb__fail(GPB_EINVAL, "NULL argument");
  int64_t merged[GPB_MAX_ORDERS] = {0};
  if (p->narenas > 1) {
    gpb__pool_lock_all(p);
    gpb__arenas_stats(p, out, merged);
    gpb__pool_unlock_all(p);
  } else {
    gpb__lock(&p->lock);
    gpb__buddy_flush(&p->core);
    *out = p->stats;
    gpb__buddy_merged(&p->core, NULL, 0, merged, NULL, 0);
    gpb__unlock(&p->lock);
  }
  gpb__stats_finish(out, merged);
  return 0;
}

int gpb_pool_set_hook(gpb_pool_t *p, gpb_hook_fn fn, void *user) {
  if (!p) return gpb__fail(GPB_EINVAL, "pool is NULL");
  gpb__pool_lock_all(p);
  p->hook = fn;
  p->hook_user = user;
  pool_update_want_time(p);
  gpb__pool_unlock_all(p);
  return 0;
}

int gpb_pool_set_plan(gpb_pool_t *p, const gpb_plan_t *plan) {
  if (!p) return gpb__fail(GPB_EINVAL, "pool is NULL");
  if (plan && p->narenas > 1)
    return gpb__fail(GPB_EINVAL, "a pool with arenas cannot follow a plan: "
                     "its arenas place small requests themselves");
  gpb__pool_lock_all(p);
  int rc = gpb__buddy_set_plan(&p->core, plan);
  gpb__pool_unlock_all(p);
  return rc;
}

int gpb_pool_set_plan_file(gpb_pool_t *p, const char *path) {
  if (!p || !path) return gpb__fail(GPB_EINVAL, "NULL argument");
  gpb_plan_t *plan;
  int rc = gpb_plan_load(path, &plan);
  if (!rc) rc = gpb_pool_set_plan(p, plan);
  /* Entries past the pool's end go by best fit: the plan was made for a
   * larger pool (GPB_PLAN, GPB_TORCH_PLAN), which the user should hear. */
  if (!rc && gpb_plan_extent(plan) > p->info.managed_size)
    fprintf(stderr, "gpubuddy: warning: %s reaches %llu bytes, past this "
            "pool's %llu: requests planned beyond it go by best fit\n", path,
            (unsigned long long)gpb_plan_extent(plan),
            (unsigned long long)p->info.managed_size);
  if (!rc) gpb_plan_destroy(plan);
  else if (plan) { /* set_plan said why; name the file too */
    char why[256];
    snprintf(why, sizeof why, "%s", gpb_last_error_detail());
    gpb_plan_destroy(plan);
    rc = gpb__fail(rc, "%s: %s", path, why);
  }
  return rc;
}

int gpb_pool_plan_info(gpb_pool_t *p, gpb_plan_info_t *out) {
  if (!p || !out) return gpb__fail(GPB_EINVAL, "NULL argument");
  gpb__pool_lock_all(p);
  gpb__plan_info(p->core.plan, out);
  gpb__pool_unlock_all(p);
  return 0;
}

int gpb_pool_visit(const gpb_pool_t *cp, gpb_visit_fn fn, void *user) {
  gpb_pool_t *p = (gpb_pool_t *)cp;
  if (!p || !fn) return gpb__fail(GPB_EINVAL, "NULL argument");
  gpb__pool_lock_all(p);
  int rc = gpb__pool_visit_locked(p, fn, user);
  gpb__pool_unlock_all(p);
  return rc;
}

int gpb_pool_trace_start(gpb_pool_t *p, const char *path) {
  if (!p || !path) return gpb__fail(GPB_EINVAL, "NULL argument");
  gpb_trace_writer_t *w;
  int rc = gpb__options_output(NULL, path); /* no FIFO: it would block */
  if (rc) return rc;
  rc = gpb_trace_writer_open(path, &w);
  if (rc) return rc;
  gpb__pool_lock_all(p);
  gpb_trace_writer_t *old = p->trace;
  p->trace = w;
  pool_update_want_time(p);
  gpb__pool_unlock_all(p);
  if (old) gpb_trace_writer_close(old);
  return 0;
}

int gpb_pool_trace_stop(gpb_pool_t *p) {
  if (!p) return gpb__fail(GPB_EINVAL, "pool is NULL");
  gpb__pool_lock_all(p);
  gpb_trace_writer_t *w = p->trace;
  p->trace = NULL;
  pool_update_want_time(p);
  gpb__pool_unlock_all(p);
  return w ? gpb_trace_writer_close(w) : 0;
}

typedef struct pool_visit_ctx {
  const gpb_pool_t *p;
  gpb_visit_fn fn;
  void *user;
} pool_visit_ctx_t;

/* A lent superblock shows as the arena's blocks inside it. */
static int pool_visit_block(const gpb_block_info_t *b, void *user) {
  const pool_visit_ctx_t *c = user;
  if (!b->used || b->tag != GPB__TAG_LENT) return c->fn(b, c->user);
  const gpb_pool_t *p = c->p;
  uint64_t u = b->offset >> p->core.min_shift;
  uint8_t o = atomic_load_explicit(&p->owner[u >> p->sb_order],
                                   memory_order_relaxed);
  if (o == 0 || o > p->narenas)
    return gpb__fail(GPB_ECORRUPT, "superblock at unit %llu has no arena",
                     (unsigned long long)u);
  return gpb__buddy_visit_range(&p->arenas[o - 1].core, u,
                                u + (1ull << p->sb_order), c->fn, c->user);
}

int gpb__pool_visit_locked(const gpb_pool_t *p, gpb_visit_fn fn, void *user) {
  if (p->narenas <= 1) return gpb__buddy_visit(&p->core, fn, user);
  pool_visit_ctx_t c = {p, fn, user};
  return gpb__buddy_visit(&p->core, pool_visit_block, &c);
}
size_t gpb__pool_meta_bytes(const gpb_pool_t *p) {
  size_t n = sizeof *p + gpb__buddy_meta_bytes(&p->core);
  for (uint32_t i = 0; i < p->narenas && p->arenas; i++)
    n += gpb__buddy_meta_bytes(&p->arenas[i].core);
  return n + p->nsb;
}

const gpb_stats_t *gpb__pool_counters(const gpb_pool_t *p) { return &p->stats; }
