/* SPDX-License-Identifier: MIT */
/*
 * replay.c: the replay source. Trace ops (from a trace file through
 * gpb_trace_open, or from a built-in synthetic pattern) run through a
 * simulator (gpb_sim_t): the placements a pool of the same config makes,
 * computed by the same buddy core, without the pool's memory, lock and
 * second copy of the map. The simulator's hook feeds
 * every event to the viewer exactly as a live reader's would, so replay
 * and live share one drawing path. Events carry the trace's times, so
 * ages are the trace's ages.
 *
 * Trace ops name allocations by id; the tools' id map (idmap.h) maps live
 * ids to offsets. Memory
 * is the simulator's metadata plus one slot per live allocation: bounded
 * by the pool, not by the length of the trace. Scrubbing backwards
 * restarts from op 0 (a simulator cannot load a keyframe; ingest is fast).
 */
#include "view.h"

#include "idmap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ op sources */

enum { OPS_TRACE = 1, OPS_CHURN, OPS_CHECKER, OPS_FILL, OPS_ARRAY };

struct vops {
  int kind;
  char err[256];
  /* trace */
  char *path;
  vra_t *rd;
  char warn[400]; /* vops_warning: said once, kept across rewinds */
  vsitetab_t *sites; /* its call sites' frames, kept across rewinds */
  /* pattern */
  uint64_t steps, total, pos, seed, rng, pool_size, min_block, next_id;
  uint64_t *live;
  uint64_t nlive;
  double lo, hi, target; /* churn: log size bounds, live count aimed at */
  /* array */
  gpb_trace_op_t *arr;
};

int vops_take_array(gpb_trace_op_t *ops, size_t n, vops_t **out) {
  *out = NULL;
  vops_t *o = calloc(1, sizeof *o);
  if (!o) return GPB_EHOSTMEM;
  o->kind = OPS_ARRAY;
  o->total = n;
  o->arr = ops;
  *out = o;
  return 0;
}

int vops_open_array(const gpb_trace_op_t *ops, size_t n, vops_t **out) {
  *out = NULL;
  gpb_trace_op_t *copy = malloc((n ? n : 1) * sizeof *ops);
  if (!copy) return GPB_EHOSTMEM;
  if (n) memcpy(copy, ops, n * sizeof *ops);
  int rc = vops_take_array(copy, n, out);
  if (rc) free(copy);
  return rc;
}

int vops_open_trace(const char *path, vops_t **out) {
  *out = NULL;
  vops_t *o = calloc(1, sizeof *o);
  if (!o) return GPB_EHOSTMEM;
  o->kind = OPS_TRACE;
  o->path = strdup(path);
  o->sites = vsitetab_new();
  int rc = o->path && o->sites ? vra_open(path, o->sites, &o->rd) : GPB_EHOSTMEM;
  if (rc) {
    vsitetab_free(o->sites);
    free(o->path);
    free(o);
    return rc;
  }
  *out = o;
  return 0;
}

int vops_open_pattern(const char *name, uint64_t steps, uint64_t pool_size,
                      uint64_t min_block, uint64_t seed, vops_t **out) {
  *out = NULL;
  int kind = !strcmp(name, "churn")     ? OPS_CHURN
             : !strcmp(name, "checker") ? OPS_CHECKER
             : !strcmp(name, "fill")    ? OPS_FILL
                                        : 0;
  if (!kind || !steps || steps > (1ull << 32) || !min_block) return GPB_EINVAL;
  vops_t *o = calloc(1, sizeof *o);
  if (!o) return GPB_EHOSTMEM;
  o->kind = kind;
  o->steps = steps;
  o->total = kind == OPS_CHURN     ? steps
             : kind == OPS_CHECKER ? steps + steps / 2
                                   : 2 * steps;
  o->seed = seed ? seed : 1;
  o->pool_size = pool_size;
  o->min_block = min_block;
  /* Churn: log-uniform sizes from min_block/4 to pool/64. */
  o->lo = log((double)(min_block / 4 ? min_block / 4 : 1));
  o->hi = log((double)(pool_size / 64 > min_block ? pool_size / 64 : min_block));
  double mean = (exp(o->hi) - exp(o->lo)) / (o->hi - o->lo > 0 ? o->hi - o->lo : 1);
  o->target = 0.5 * (double)pool_size / (mean > 1 ? mean : 1);
  o->live = malloc((size_t)steps * sizeof *o->live);
  if (!o->live) {
    free(o);
    return GPB_EHOSTMEM;
  }
  vops_rewind(o);
  *out = o;
  return 0;
}

static uint64_t ops_rand(vops_t *o) {
  uint64_t x = o->rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  o->rng = x;
  return x * 0x2545F4914F6CDD1Dull;
}

static double ops_unit(vops_t *o) {
  return (double)(ops_rand(o) >> 11) * (1.0 / 9007199254740992.0);
}

static void ops_alloc(vops_t *o, gpb_trace_op_t *op, uint64_t size,
                      uint32_t tag) {
  op->op = GPB_OP_ALLOC;
  op->id = o->next_id++;
  op->size = size ? size : 1;
  op->tag = tag;
  o->live[o->nlive++] = op->id;
}

static void ops_free_at(vops_t *o, gpb_trace_op_t *op, uint64_t i) {
  op->op = GPB_OP_FREE;
  op->id = o->live[i];
  o->live[i] = o->live[--o->nlive];
}

static int ops_pattern_next(vops_t *o, gpb_trace_op_t *op) {
  if (o->pos >= o->total) return 0;
  memset(op, 0, sizeof *op);
  uint64_t i = o->pos++;
  op->seq = i + 1;
  op->time_ns = i * 1000;
  switch (o->kind) {
  case OPS_CHURN: {
    /* Allocations lead while the live set is below what fills about
     * half the pool, frees lead above it, so the pool hovers around half
     * full. */
    double p_alloc = (double)o->nlive < o->target ? 0.6 : 0.4;
    if (o->nlive && (o->nlive == o->steps || ops_unit(o) >= p_alloc)) {
      ops_free_at(o, op, ops_rand(o) % o->nlive);
    } else {
      ops_alloc(o, op, (uint64_t)exp(o->lo + (o->hi - o->lo) * ops_unit(o)),
                (uint32_t)(ops_rand(o) % 8));
    }
    break;
  }
  case OPS_CHECKER:
    /* Allocate `steps` blocks of 1..2 min blocks, then free every other
     * one: a checkerboard that no large request can use. */
    if (i < o->steps) {
      uint64_t sz = o->min_block + (ops_rand(o) % o->min_block);
      ops_alloc(o, op, i % 3 ? sz : o->min_block / 2, (uint32_t)(i % 4));
    } else {
      uint64_t j = (i - o->steps) * 2;
      op->op = GPB_OP_FREE;
      op->id = j;
    }
    break;
  default: /* OPS_FILL */
    if (i < o->steps) {
      ops_alloc(o, op, o->min_block / 2 + ops_rand(o) % (o->min_block / 2),
                (uint32_t)(ops_rand(o) % 8));
    } else if (o->nlive && ((i - o->steps) & 1) == 0) {
      ops_free_at(o, op, ops_rand(o) % o->nlive);
    } else {
      ops_alloc(o, op, o->min_block, (uint32_t)(ops_rand(o) % 8));
    }
  }
  return 1;
}

int vops_next(vops_t *o, gpb_trace_op_t *op) {
  if (o->kind == OPS_ARRAY) {
    if (o->pos >= o->total) return 0;
    *op = o->arr[o->pos++];
    return 1;
  }
  if (o->kind != OPS_TRACE) return ops_pattern_next(o, op);
  if (!o->rd) return GPB_EIO;
  int rc = vra_next(o->rd, op);
  if (rc < 0) snprintf(o->err, sizeof o->err, "%s: %s", o->path, vra_error(o->rd));
  if (rc == 0 && !o->warn[0] && *vra_warning(o->rd)) {
    snprintf(o->warn, sizeof o->warn, "%s", vra_warning(o->rd));
    fprintf(stderr, "gpubuddy-view: warning: %s: %s\n", o->path, o->warn);
  }
  return rc;
}

int vops_rewind(vops_t *o) {
  if (o->kind != OPS_TRACE) {
    o->pos = 0;
    o->rng = o->seed * 0x9E3779B97F4A7C15ull | 1;
    o->nlive = 0;
    o->next_id = 0;
    return 0;
  }
  if (!strcmp(o->path, "-")) {
    snprintf(o->err, sizeof o->err, "standard input cannot be replayed again");
    return GPB_EINVAL;
  }
  vra_close(o->rd);
  o->rd = NULL;
  int rc = vra_open(o->path, o->sites, &o->rd);
  if (rc)
    snprintf(o->err, sizeof o->err, "%s: %s", o->path, gpb_strerror(rc));
  return rc;
}

const char *vops_error(const vops_t *o) { return o->err; }

const char *vops_warning(const vops_t *o) { return o->warn; }

const char *vops_site(vops_t *o, uint32_t site) {
  return o && site ? vsitetab_get(o->sites, site) : NULL;
}

void vops_close(vops_t *o) {
  if (!o) return;
  vra_close(o->rd);
  vsitetab_free(o->sites);
  free(o->path);
  free(o->live);
  free(o->arr);
  free(o);
}

/* ---------------------------------------------------------------- replay */

#define RP_AHEAD 16u
#define RP_HALF (RP_AHEAD / 2)

struct vreplay {
  vops_t *ops;
  gpb_config_t cfg;
  gpb_pool_info_t info;
  gpb_sim_t *sim;
  gpbt_idmap_t ids; /* id -> offset */
  /* offset -> id, for the hover and find (vreplay_trace_id): a second
   * table costs every op a miss at a million live blocks, so it is built
   * from ids the first time it is asked for, then kept along. */
  gpbt_idmap_t rev;
  int rev_on;
  vevent_fn fn;
  void *user;
  uint64_t pos, events, failures, unmatched, total;
  int at_end, bad;
  char err[320];
  /* Ops read ahead, so that each one's id slot is fetched from memory
   * while earlier ops run: with a million live ids the table is far
   * bigger than the caches, and this hides most of one miss per op. */
  gpb_trace_op_t ahead[RP_AHEAD];
  unsigned ahead_pos, ahead_n;
  int ahead_rc; /* what vops_next said after the last op read ahead */
};

static void rp_hook(const gpb_event_t *ev, void *user) {
  vreplay_t *r = user;
  r->events++;
  if (r->fn) r->fn(ev, r->user);
}

int vreplay_open(vops_t *ops, const gpb_config_t *cfg, vreplay_t **out) {
  *out = NULL;
  vreplay_t *r = calloc(1, sizeof *r);
  if (!r) return GPB_EHOSTMEM;
  r->ops = ops;
  r->cfg = *cfg;
  r->ahead_rc = 1;
  int rc = gpb_sim_create(&r->cfg, &r->sim);
  if (rc) {
    fprintf(stderr, "gpubuddy-view: cannot create the replay pool: %s: %s\n",
            gpb_strerror(rc), gpb_last_error_detail());
    free(r);
    return rc;
  }
  gpb_sim_set_hook(r->sim, rp_hook, r);
  /* What a pool of this config would report; a simulator has no memory. */
  gpb_stats_t st;
  gpb_model_stats(gpb_sim_model(r->sim), &st);
  r->info.pool_size = cfg->pool_size;
  r->info.min_block = cfg->min_block;
  r->info.managed_size = st.managed_bytes;
  r->info.num_orders = st.num_orders;
  r->info.backend = GPB_BACKEND_VIRTUAL;
  r->info.policy = cfg->policy;
  r->info.num_arenas = 1;
  *out = r;
  return 0;
}

void vreplay_close(vreplay_t *r) {
  if (!r) return;
  gpb_sim_destroy(r->sim);
  gpbt_idmap_fini(&r->ids);
  gpbt_idmap_fini(&r->rev);
  vops_close(r->ops);
  free(r);
}

void vreplay_set_hook(vreplay_t *r, vevent_fn fn, void *user) {
  r->fn = fn;
  r->user = user;
}

/* The next op, through the read-ahead window: 1, 0 at the end, <0. */
static int rp_next(vreplay_t *r, gpb_trace_op_t *op) {
  while (r->ahead_n < RP_AHEAD && r->ahead_rc == 1) {
    gpb_trace_op_t *a = &r->ahead[(r->ahead_pos + r->ahead_n) % RP_AHEAD];
    r->ahead_rc = vops_next(r->ops, a);
    if (r->ahead_rc != 1) break;
    r->ahead_n++;
    gpbt_idmap_prefetch(&r->ids, a->id);
  }
  if (r->ahead_n == 0) return r->ahead_rc;
  /* Half-way along, a free's id slot has arrived: it names the block, so
   * the model's record for it can be fetched too (the second miss). */
  if (r->ahead_n > RP_HALF) {
    const gpb_trace_op_t *h = &r->ahead[(r->ahead_pos + RP_HALF) % RP_AHEAD];
    const gpbt_idslot_t *s;
    if (h->op == GPB_OP_FREE && (s = gpbt_idmap_find(&r->ids, h->id)) != NULL)
      gpb_sim_prefetch(r->sim, s->val);
  }
  *op = r->ahead[r->ahead_pos];
  r->ahead_pos = (r->ahead_pos + 1) % RP_AHEAD;
  r->ahead_n--;
  return 1;
}

/* Notes that the allocation at off is trace id `id`; a table that cannot
 * grow is dropped (the hover then shows no id). */
static void rp_rev_put(vreplay_t *r, uint64_t off, uint64_t id) {
  int err;
  gpbt_idslot_t *s = gpbt_idmap_claim(&r->rev, off, &err);
  if (s) {
    gpbt_idmap_commit(&r->rev, s, off, id);
  } else if (err) {
    gpbt_idmap_fini(&r->rev);
    r->rev_on = 0;
  }
}

int vreplay_trace_id(vreplay_t *r, uint64_t off, uint64_t *id) {
  if (!r->rev_on) {
    r->rev_on = 1;
    gpbt_idmap_reserve(&r->rev, r->ids.n);
    for (uint64_t i = 0; i < r->ids.cap && r->rev_on; i++)
      if (r->ids.s[i].key) rp_rev_put(r, r->ids.s[i].val, r->ids.s[i].key - 1);
  }
  const gpbt_idslot_t *s = r->rev_on ? gpbt_idmap_find(&r->rev, off) : NULL;
  if (!s) return GPB_ENOTFOUND;
  *id = s->val;
  return 0;
}

int vreplay_find_trace(vreplay_t *r, uint64_t addr, uint64_t *off,
                       uint64_t *id) {
  const gpbt_idslot_t *s = gpbt_idmap_find(&r->ids, addr);
  if (s) {
    *off = s->val;
    *id = addr;
    return 0;
  }
  /* Inside an allocation: the live id just below, if its request reaches
   * addr. One pass over the ids, on a find only. */
  uint64_t best = 0, boff = 0;
  int found = 0;
  for (uint64_t i = 0; i < r->ids.cap; i++) {
    uint64_t k = r->ids.s[i].key;
    if (k && k - 1 <= addr && (!found || k - 1 > best))
      best = k - 1, boff = r->ids.s[i].val, found = 1;
  }
  gpb_block_info_t b;
  if (!found || gpb_model_lookup(gpb_sim_model(r->sim), boff, &b) || !b.used ||
      addr - best >= (b.requested ? b.requested : 1))
    return GPB_ENOTFOUND;
  *off = boff + (addr - best);
  *id = best;
  return 0;
}

int64_t vreplay_step(vreplay_t *r, uint64_t n) {
  if (r->bad) return GPB_EFORMAT;
  uint64_t done = 0;
  gpb_trace_op_t op = {0};
  while (done < n && !r->at_end) {
    int rc = rp_next(r, &op);
    if (rc == 0) {
      r->at_end = 1;
      break;
    }
    if (rc < 0) {
      r->bad = 1;
      snprintf(r->err, sizeof r->err, "bad trace after op %llu: %s",
               (unsigned long long)r->pos, vops_error(r->ops));
      return rc;
    }
    r->pos++;
    done++;
    if (op.op == GPB_OP_ALLOC) {
      int err;
      gpbt_idslot_t *slot = gpbt_idmap_claim(&r->ids, op.id, &err);
      if (!slot) {
        if (err) {
          r->bad = 1;
          snprintf(r->err, sizeof r->err, "out of memory for the id table");
          return err;
        }
        r->unmatched++; /* an id still live: the trace is inconsistent */
        continue;
      }
      uint64_t off;
      uint32_t tag = op.tag < GPB_MAX_TAGS ? op.tag : 0;
      rc = gpb_sim_alloc_site(r->sim, op.size, 0, tag, op.site, op.time_ns,
                              &off);
      if (rc == GPB_ENOMEM || rc == GPB_ETOOBIG) {
        r->failures++;
      } else if (rc) {
        r->bad = 1;
        snprintf(r->err, sizeof r->err, "op %llu: %s: %s",
                 (unsigned long long)r->pos, gpb_strerror(rc),
                 gpb_last_error_detail());
        return rc;
      } else {
        gpbt_idmap_commit(&r->ids, slot, op.id, off);
        if (r->rev_on) rp_rev_put(r, off, op.id);
      }
    } else if (op.op == GPB_OP_FREE) {
      gpbt_idslot_t *s = gpbt_idmap_find(&r->ids, op.id);
      if (!s) {
        r->unmatched++; /* its allocation failed, or the trace began late */
        continue;
      }
      uint64_t off = s->val;
      gpbt_idmap_remove(&r->ids, s);
      if (r->rev_on && (s = gpbt_idmap_find(&r->rev, off)) != NULL)
        gpbt_idmap_remove(&r->rev, s);
      if (off != GPB_NO_OFFSET &&
          (rc = gpb_sim_free(r->sim, off, op.time_ns)) != 0) {
        r->bad = 1;
        snprintf(r->err, sizeof r->err, "op %llu: %s",
                 (unsigned long long)r->pos, gpb_strerror(rc));
        return rc;
      }
    }
  }
  return (int64_t)done;
}

int vreplay_restart(vreplay_t *r) {
  gpb_sim_reset(r->sim);
  gpbt_idmap_clear(&r->ids);
  gpbt_idmap_clear(&r->rev);
  r->pos = r->events = r->failures = r->unmatched = 0;
  r->at_end = r->bad = 0;
  r->ahead_pos = r->ahead_n = 0;
  r->ahead_rc = 1;
  r->err[0] = 0;
  int rc = vops_rewind(r->ops);
  if (rc) {
    r->bad = 1;
    snprintf(r->err, sizeof r->err, "%s", vops_error(r->ops));
  }
  return rc;
}

uint64_t vreplay_count(vreplay_t *r) {
  if (r->total) return r->total;
  /* Ops and the most ids live at once (allocs less frees so far, a bound
   * good enough to size the id table). */
  uint64_t n = 0, live = 0, peak = 0;
  if (r->ops->kind == OPS_TRACE || r->ops->kind == OPS_ARRAY) {
    if (r->pos || vops_rewind(r->ops)) return 0;
    gpb_trace_op_t op;
    while (vops_next(r->ops, &op) > 0) {
      n++;
      if (op.op == GPB_OP_ALLOC && ++live > peak) peak = live;
      else if (op.op == GPB_OP_FREE && live) live--;
    }
    /* A trace that fails to parse shows its error when the replay gets
     * there; the timeline ends at the last good op. */
    if (vops_rewind(r->ops)) return 0;
  } else {
    n = r->ops->total;
    peak = r->ops->steps; /* a pattern never holds more */
  }
  gpbt_idmap_reserve(&r->ids, peak);
  if (r->pos == 0) gpb_sim_reserve(r->sim, peak);
  return r->total = n;
}

uint64_t vreplay_pos(const vreplay_t *r) { return r->pos; }
uint64_t vreplay_events(const vreplay_t *r) { return r->events; }
int vreplay_at_end(const vreplay_t *r) { return r->at_end; }
const gpb_model_t *vreplay_model(const vreplay_t *r) {
  return gpb_sim_model(r->sim);
}
const gpb_pool_info_t *vreplay_info(const vreplay_t *r) { return &r->info; }
const char *vreplay_error(const vreplay_t *r) { return r->err; }
const char *vreplay_warning(const vreplay_t *r) {
  return vops_warning(r->ops);
}
uint64_t vreplay_failures(const vreplay_t *r) { return r->failures; }
const char *vreplay_site(const vreplay_t *r, uint32_t site) {
  return vops_site(r->ops, site);
}
