/* SPDX-License-Identifier: MIT */
/*
 * sim.c: the simulator. It allocates the way a pool of the same config
 * would, on offsets with no memory behind them, and makes the same events
 * and stats: one buddy core, no lock, no backend, no consumers but a hook.
 *
 * It is its own type, not a mode of the model: a model follows events it
 * is given, a simulator makes them. What both share is the block map, so
 * gpb_sim_model() hands out the embedded model for reading (stats, visit,
 * lookup, check), and nothing can apply events to it.
 */
#include "core/core.h"
#include "plan/plan.h"

#include <stdlib.h>

struct gpb_sim {
  gpb_model_t model;
  uint64_t now; /* time of the call in progress */
  gpb_hook_fn hook;
  void *hook_user;
};

/* The core's event sink: what gpb__pool_emit does, minus the consumers a
 * simulator does not have. */
static void sim_emit(void *ctx, gpb_event_t *ev) {
  gpb_sim_t *s = ctx;
  gpb_stats_t *st = &s->model.stats;
  ev->seq = ++st->seq;
  ev->time_ns = s->now;
  gpb__stats_count(st, ev->type, ev->offset, ev->size, ev->requested,
                   ev->tag, ev->order);
  if (s->hook) s->hook(ev, s->hook_user);
}

int gpb_sim_create(const gpb_config_t *cfg, gpb_sim_t **out) {
  if (!out) return gpb__fail(GPB_EINVAL, "out is NULL");
  *out = NULL;
  gpb_config_t defaults;
  if (!cfg) {
    gpb_config_init(&defaults);
    cfg = &defaults;
  }
  if ((unsigned)cfg->policy >= GPB_NUM_POLICIES)
    return gpb__fail(GPB_EINVAL, "unknown policy %d", (int)cfg->policy);
  if (cfg->pool_size < cfg->min_block)
    return gpb__fail(GPB_EINVAL, "pool_size %zu is smaller than min_block %zu",
                     cfg->pool_size, cfg->min_block);
  gpb_sim_t *s = calloc(1, sizeof *s);
  if (!s) return GPB_EHOSTMEM;
  int rc = gpb__model_init(&s->model, cfg->pool_size, cfg->min_block,
                           cfg->policy);
  if (rc) {
    free(s);
    return rc;
  }
  gpb__buddy_t *b = &s->model.core;
  /* The merge setting a pool of this config would have. */
  b->defer_cap = cfg->flags & GPB_CFG_EAGER_MERGE ? 0 : GPB__DEFER_MAX;
  b->sink.emit = sim_emit;
  b->sink.emit_ctx = s;
  b->sink.counters = &s->model.stats; /* no hook yet: count in place */
  *out = s;
  return 0;
}

void gpb_sim_destroy(gpb_sim_t *s) {
  if (!s) return;
  gpb__buddy_fini(&s->model.core);
  free(s);
}

void gpb_sim_reset(gpb_sim_t *s) {
  if (s) gpb_model_reset(&s->model); /* the sink stays as it is */
}

const gpb_model_t *gpb_sim_model(const gpb_sim_t *s) {
  return s ? &s->model : NULL;
}

int gpb_sim_set_plan(gpb_sim_t *s, const gpb_plan_t *plan) {
  if (!s) return gpb__fail(GPB_EINVAL, "simulator is NULL");
  return gpb__buddy_set_plan(&s->model.core, plan);
}

int gpb_sim_plan_info(const gpb_sim_t *s, gpb_plan_info_t *out) {
  if (!s || !out) return gpb__fail(GPB_EINVAL, "NULL argument");
  gpb__plan_info(s->model.core.plan, out);
  return 0;
}

int gpb_sim_set_hook(gpb_sim_t *s, gpb_hook_fn fn, void *user) {
  if (!s) return gpb__fail(GPB_EINVAL, "simulator is NULL");
  s->hook = fn;
  s->hook_user = user;
  /* The counting fast path skips the sink; a hook needs every event. */
  gpb__buddy_unsync(&s->model.core);
  s->model.core.sink.counters = fn ? NULL : &s->model.stats;
  return 0;
}

int gpb_sim_alloc(gpb_sim_t *s, uint64_t size, uint64_t align, uint32_t tag,
                  uint64_t time_ns, uint64_t *offset) {
  return gpb_sim_alloc_site(s, size, align, tag, 0, time_ns, offset);
}

int gpb_sim_alloc_site(gpb_sim_t *s, uint64_t size, uint64_t align,
                       uint32_t tag, uint32_t site, uint64_t time_ns,
                       uint64_t *offset) {
  if (!s || !offset) return gpb__fail(GPB_EINVAL, "simulator or offset is NULL");
  *offset = GPB_NO_OFFSET;
  if (align & (align - 1))
    return gpb__fail(GPB_EALIGN, "alignment %llu is not a power of two",
                     (unsigned long long)align);
  if (tag >= GPB_MAX_TAGS)
    return gpb__fail(GPB_EINVAL, "tag %u is not below %d", tag, GPB_MAX_TAGS);
  if (site > GPB_MAX_SITES)
    return gpb__fail(GPB_EINVAL, "call site %u is above %u", site,
                     GPB_MAX_SITES);
  if (size == 0) return 0; /* as gpb_alloc_ex: success, nothing, no event */
  gpb__buddy_t *b = &s->model.core;
  uint64_t managed = b->nunits << b->min_shift;
  uint32_t align_order = 0;
  if (align > (1ull << b->min_shift)) {
    if (align > managed)
      return gpb__fail(GPB_EALIGN, "alignment %llu is larger than the %llu "
                       "bytes managed", (unsigned long long)align,
                       (unsigned long long)managed);
    align_order = (uint32_t)__builtin_ctzll(align) - b->min_shift;
  }
  s->now = time_ns;
  uint64_t unit;
  int rc = gpb__buddy_alloc(b, size, align_order, tag, site, 0, time_ns, &unit);
  if (rc == 0) *offset = unit << b->min_shift;
  return rc;
}

int gpb_sim_free(gpb_sim_t *s, uint64_t offset, uint64_t time_ns) {
  if (!s) return gpb__fail(GPB_EINVAL, "simulator is NULL");
  gpb__buddy_t *b = &s->model.core;
  if (offset >= (b->nunits << b->min_shift))
    return gpb__fail(GPB_EFOREIGN, "offset %llu is outside the %llu bytes "
                     "managed", (unsigned long long)offset,
                     (unsigned long long)(b->nunits << b->min_shift));
  s->now = time_ns;
  return gpb__buddy_free(b, offset, 0);
}

void gpb_sim_prefetch(const gpb_sim_t *s, uint64_t offset) {
  if (!s) return;
  const gpb__buddy_t *b = &s->model.core;
  if (offset < (b->nunits << b->min_shift))
    gpb__atab_prefetch(&b->atab, offset >> b->min_shift);
}

int gpb_sim_reserve(gpb_sim_t *s, uint64_t live) {
  if (!s) return gpb__fail(GPB_EINVAL, "simulator is NULL");
  gpb__buddy_t *b = &s->model.core;
  uint64_t most = b->nunits; /* no more allocations can be live */
  int rc = gpb__atab_reserve(&b->atab, live < most ? live : most);
  return rc ? gpb__fail(rc, "no memory for %llu allocation records",
                        (unsigned long long)live) : 0;
}
