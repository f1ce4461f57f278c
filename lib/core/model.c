/* SPDX-License-Identifier: MIT */
/*
 * model.c: the block-map model. It rebuilds a pool's exact state from the
 * pool's events, in another process or another machine.
 *
 * It is a buddy core run without an allocator on top: each event is
 * checked against the current state by the core's validated primitives
 * and refused (model unchanged) if it does not fit, then fed to the same
 * stats function the pool uses. The viewer, gpubuddy-stat, the relay and
 * the tests all use it; tests compare it with the pool's own visitor.
 * A simulator (sim.c) holds one and drives its core itself.
 */
#include "core/core.h"

#include <stdlib.h>
#include <string.h>

int gpb__model_init(gpb_model_t *m, uint64_t managed_size, uint64_t min_block,
                    gpb_policy_t policy) {
  if (min_block < 16 || (min_block & (min_block - 1)))
    return gpb__fail(GPB_EINVAL, "min_block %llu is not a power of two >= 16",
                     (unsigned long long)min_block);
  int rc = gpb__buddy_init(&m->core, managed_size / min_block,
                           (uint32_t)__builtin_ctzll(min_block), policy);
  if (rc) return rc;
  /* The core starts with its roots free: only the stats need setting. */
  gpb__stats_init(&m->stats, m->core.nunits << m->core.min_shift,
                  1ull << m->core.min_shift, m->core.norders);
  return 0;
}

int gpb_model_create(uint64_t managed_size, uint64_t min_block,
                     gpb_model_t **out) {
  if (!out) return gpb__fail(GPB_EINVAL, "out is NULL");
  *out = NULL;
  gpb_model_t *m = calloc(1, sizeof *m);
  if (!m) return GPB_EHOSTMEM;
  int rc = gpb__model_init(m, managed_size, min_block, GPB_POLICY_BUDDY);
  if (rc) {
    free(m);
    return rc;
  }
  /* A model follows whatever pairs the stream leaves unmerged, and lists
   * them for the coalesced figures. */
  m->core.defer_cap = UINT32_MAX;
  m->core.list_pairs = 1;
  *out = m;
  return 0;
}

void gpb_model_destroy(gpb_model_t *m) {
  if (!m) return;
  gpb__buddy_fini(&m->core);
  free(m);
}

void gpb_model_reset(gpb_model_t *m) {
  gpb__buddy_reset(&m->core);
  gpb__stats_init(&m->stats, m->core.nunits << m->core.min_shift,
                  1ull << m->core.min_shift, m->core.norders);
}

int gpb_model_apply(gpb_model_t *m, const gpb_event_t *ev) {
  if (ev->seq != m->stats.seq + 1)
    return gpb__fail(GPB_EAGAIN, "event %llu follows %llu: events were missed",
                     (unsigned long long)ev->seq,
                     (unsigned long long)m->stats.seq);
  int rc = gpb__buddy_apply(&m->core, ev);
  if (rc) return rc;
  gpb__stats_apply(&m->stats, ev);
  return 0;
}

#define BADKEY(...) (gpb_model_reset(m), gpb__fail(GPB_EFORMAT, __VA_ARGS__))

int gpb_model_load(gpb_model_t *m, const gpb_block_info_t *blocks, size_t n,
                   uint64_t seq) {
  gpb__buddy_t *b = &m->core;
  gpb_model_reset(m);
  uint64_t expect = 0; /* next offset, in bytes */
  const gpb_block_info_t *cur_alloc = NULL; /* first block of open run */
  for (size_t x = 0; x < n; x++) {
    const gpb_block_info_t *bl = &blocks[x];
    if (bl->offset != expect || bl->order >= b->norders ||
        bl->size != (1ull << bl->order) << b->min_shift)
      return BADKEY("keyframe block %zu: offset %llu, order %u does not "
                    "continue the map at %llu",
                    x, (unsigned long long)bl->offset, bl->order,
                    (unsigned long long)expect);
    uint64_t i = (bl->offset >> b->min_shift) >> bl->order;
    int rc = gpb__buddy_carve_free(b, bl->order, i);
    if (rc) return BADKEY("keyframe block %zu: %s", x, gpb_last_error_detail());
    if (!bl->used) {
      /* Free buddies side by side are fine: a pool defers merging. */
      if (cur_alloc) return BADKEY("keyframe block %zu: allocation cut short", x);
    } else {
      if (!cur_alloc) {
        if (bl->alloc_offset != bl->offset || bl->tag >= GPB_MAX_TAGS ||
            bl->alloc_size == 0 || bl->requested > bl->alloc_size)
          return BADKEY("keyframe block %zu: bad allocation record", x);
        cur_alloc = bl;
      } else if (bl->alloc_offset != cur_alloc->alloc_offset ||
                 bl->alloc_size != cur_alloc->alloc_size) {
        return BADKEY("keyframe block %zu: allocation cut short", x);
      }
      if (bl->offset + bl->size == cur_alloc->alloc_offset + cur_alloc->alloc_size) {
        gpb__arec_t rec = {.requested = cur_alloc->requested,
                           .time_ns = cur_alloc->time_ns,
                           .tag = (uint16_t)cur_alloc->tag,
                           .site = (uint16_t)cur_alloc->site};
        rc = gpb__buddy_take(b, cur_alloc->alloc_offset >> b->min_shift,
                             cur_alloc->alloc_size >> b->min_shift, &rec);
        if (rc) return BADKEY("keyframe block %zu: %s", x, gpb_last_error_detail());
        cur_alloc = NULL;
      } else if (bl->offset + bl->size >
                 cur_alloc->alloc_offset + cur_alloc->alloc_size) {
        return BADKEY("keyframe block %zu: runs past its allocation", x);
      }
    }
    expect += bl->size;
  }
  if (cur_alloc || expect != b->nunits << b->min_shift)
    return BADKEY("keyframe covers %llu of %llu bytes",
                  (unsigned long long)expect,
                  (unsigned long long)(b->nunits << b->min_shift));
  gpb__stats_from_core(&m->stats, b);
  m->stats.seq = seq;
  return 0;
}

void gpb__model_set_counters(gpb_model_t *m, const gpb_stats_t *s) {
  gpb_stats_t *d = &m->stats;
  d->allocs = s->allocs;
  d->frees = s->frees;
  d->failures = s->failures;
  d->last_failed_request = s->last_failed_request;
  d->splits = s->splits;
  d->merges = s->merges;
  d->requested_peak = s->requested_peak > d->requested_peak ? s->requested_peak
                                                            : d->requested_peak;
  d->block_peak = s->block_peak > d->block_peak ? s->block_peak : d->block_peak;
  d->free_peak = s->free_peak > d->free_peak ? s->free_peak : d->free_peak;
}

int gpb_model_stats(const gpb_model_t *m, gpb_stats_t *out) {
  /* A simulator's model may hold counts pending in its core. */
  gpb__buddy_flush((gpb__buddy_t *)&m->core);
  *out = m->stats;
  int64_t d[GPB_MAX_ORDERS] = {0};
  gpb__buddy_merged(&m->core, NULL, 0, d, NULL, 0);
  gpb__stats_finish(out, d);
  return 0;
}

int gpb_model_visit(const gpb_model_t *m, gpb_visit_fn fn, void *user) {
  return gpb__buddy_visit(&m->core, fn, user);
}

int gpb_model_check(const gpb_model_t *m) {
  gpb__buddy_flush((gpb__buddy_t *)&m->core); /* as gpb_model_stats */
  int rc = gpb__buddy_check(&m->core);
  if (rc) return rc;
  uint64_t nfree[GPB_MAX_ORDERS];
  gpb__buddy_nfree(&m->core, nfree);
  for (uint32_t k = 0; k < m->core.norders; k++)
    if (m->stats.free_blocks[k] != nfree[k])
      return gpb__fail(GPB_ECORRUPT, "model stats: order %u free count %llu, "
                       "map has %llu", k,
                       (unsigned long long)m->stats.free_blocks[k],
                       (unsigned long long)nfree[k]);
  gpb__merge_walk_t w;
  memset(&w, 0, sizeof w);
  w.nunits = m->core.nunits;
  w.min_block = 1ull << m->core.min_shift;
  w.norders = m->core.norders;
  gpb__buddy_visit(&m->core, gpb__merge_walk_block, &w);
  gpb__merge_walk_end(&w);
  int64_t d[GPB_MAX_ORDERS] = {0};
  gpb__buddy_merged(&m->core, NULL, 0, d, NULL, 0);
  if ((rc = gpb__merge_walk_check(&w, &m->stats, d)) != 0) return rc;
  return 0;
}

uint64_t gpb_model_seq(const gpb_model_t *m) { return m->stats.seq; }

int gpb_model_lookup(const gpb_model_t *m, uint64_t offset,
                     gpb_block_info_t *out) {
  return gpb__buddy_lookup(&m->core, offset >> m->core.min_shift, out);
}
