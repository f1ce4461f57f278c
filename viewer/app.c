/* SPDX-License-Identifier: MIT */
/*
 * app.c: the viewer object: one source (replay or live), the block map,
 * the time series, and the glue that feeds events from the source to them.
 *
 * Both sources deliver the same thing: a gpb_model_t that is current, and
 * a callback per event applied (NULL after a resync from a keyframe). The
 * callback updates the map's cell sums and the series; nothing here knows
 * which source it is talking to except play/pause and seeking.
 */
#include "view.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Above this many ops in one update, the map is rebuilt once afterwards
 * instead of being updated per event: cheaper for big jumps. */
#define APP_BULK_OPS 200000u
/* Ops replayed per update while seeking, so the window stays responsive. */
#define APP_SEEK_CHUNK 2000000u
/* Playing spends at most this much of a 60 fps frame (16.7 ms) stepping:
 * --speed 0 ran 1e6 ops a frame, which took the window to 3-5 fps. */
#define APP_STEP_BUDGET_NS 8000000ull

void vmessage_set(char *msg, size_t n, uint64_t *until_ns, const char *fmt,
                  va_list ap) {
  vsnprintf(msg, n, fmt, ap);
  *until_ns = gpb_now_ns() + 4000000000ull; /* shown for 4 s */
}

void vapp_message(vapp_t *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmessage_set(a->msg, sizeof a->msg, &a->msg_until_ns, fmt, ap);
  va_end(ap);
}

/* Live: keeps the frees since the last split or alloc (vdrain_t). */
static void app_drain_note(vapp_t *a, const gpb_event_t *ev) {
  vdrain_t *d = &a->drain;
  if (ev->type == GPB_EV_ALLOC || ev->type == GPB_EV_SPLIT) {
    d->n = 0, d->over = 0;
    return;
  }
  if (ev->type != GPB_EV_FREE && ev->type != GPB_EV_MERGE) return;
  if (d->over) return;
  if (d->n == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 1024;
    void *v = d->n < VDRAIN_MAX ? realloc(d->ev, cap * sizeof *d->ev) : NULL;
    if (!v) {
      d->over = 1;
      return;
    }
    d->ev = v, d->cap = cap;
  }
  d->ev[d->n++] = *ev;
}

typedef struct app_blocks {
  gpb_block_info_t *v;
  size_t n, cap;
} app_blocks_t;

static int app_block_add(const gpb_block_info_t *b, void *user) {
  app_blocks_t *l = user;
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 256;
    void *v = realloc(l->v, cap * sizeof *l->v);
    if (!v) return -1;
    l->v = v, l->cap = cap;
  }
  l->v[l->n++] = *b;
  return 0;
}

/* A live pool that closed empty after a run of frees (its program's
 * teardown): its state before them, as a model of our own (a->held)
 * shown instead of the emptied pool. 0 when there was nothing to undo or
 * it could not be done (the emptied pool stays). */
static int app_hold_last(vapp_t *a) {
  vdrain_t *d = &a->drain;
  if (!d->n || d->over || !a->model || a->stats.live_allocs) return 0;
  app_blocks_t l = {0};
  gpb_model_t *m = NULL;
  uint64_t seq = gpb_model_seq(a->model);
  int rc = gpb_model_create(a->info.managed_size, a->info.min_block, &m);
  if (!rc) rc = gpb_model_visit(a->model, app_block_add, &l);
  if (!rc) rc = gpb_model_load(m, l.v, l.n, seq);
  for (size_t i = d->n; !rc && i-- > 0;) {
    gpb_event_t ev = d->ev[i];
    ev.type = ev.type == GPB_EV_FREE ? GPB_EV_ALLOC : GPB_EV_SPLIT;
    ev.seq = ++seq;
    rc = gpb_model_apply(m, &ev);
  }
  free(l.v);
  if (rc) {
    gpb_model_destroy(m);
    return 0;
  }
  a->held = m;
  a->model = m;
  a->map.need_rebuild = 1;
  vsite_resync(a);
  gpb_model_stats(a->model, &a->stats);
  return 1;
}

static void app_drop_held(vapp_t *a) {
  gpb_model_destroy(a->held);
  a->held = NULL;
  free(a->drain.ev);
  memset(&a->drain, 0, sizeof a->drain);
}

static void app_event(const gpb_event_t *ev, void *user) {
  vapp_t *a = user;
  a->changes++;
  if (!ev) { /* resync from a keyframe: the sums must be rebuilt */
    a->drain.n = 0, a->drain.over = 0; /* frees before it: not undoable */
    vbands_resync(&a->bands, vapp_pos(a));
    a->map.need_rebuild = 1;
    a->req_rescan = 1;
    vsite_resync(a);
    return;
  }
  a->events++;
  if (a->kind == VSRC_LIVE) app_drain_note(a, ev);
  if ((ev->type == GPB_EV_ALLOC || ev->type == GPB_EV_FAIL) &&
      ev->requested > a->max_req)
    a->max_req = ev->requested;
  vmap_event(&a->map, ev);
  /* A replay's x is its op, so the timeline seeks by it; live: the seq. */
  uint64_t x = a->kind == VSRC_REPLAY ? vreplay_pos(a->rp) : ev->seq;
  vbands_event(&a->bands, ev, x);
  if (ev->type == GPB_EV_ALLOC) {
    gpbt_sites_alloc(&a->sites, ev->site, ev->size);
  } else if (ev->type == GPB_EV_FREE) {
    gpbt_sites_free(&a->sites, ev->site, ev->size);
  } else if (ev->type == GPB_EV_FAIL) {
    gpbt_sites_fail(&a->sites, ev->site, ev->requested);
    if (vseries_fail(&a->series, x, ev)) voom_event(a, ev, x);
  }
  vseries_tick(&a->series, x, a->model, &a->sites);
}

static int app_common(vapp_t *a) {
  int rc = vmap_init(&a->map, a->info.managed_size, a->info.min_block);
  if (rc) return rc;
  vseries_reset(&a->series);
  a->series.oom_latest = a->kind == VSRC_LIVE;
  voom_init(&a->oom);
  vbands_init(&a->bands);
  if (gpbt_sites_init(&a->sites)) return GPB_EHOSTMEM;
  a->seek_to = UINT64_MAX;
  a->scale = 1;
  gpb_model_stats(a->model, &a->stats);
  return 0;
}

int vapp_open_replay(vapp_t *a, vops_t *ops, const gpb_config_t *cfg) {
  memset(a, 0, sizeof *a);
  a->kind = VSRC_REPLAY;
  int rc = vreplay_open(ops, cfg, &a->rp);
  if (rc) {
    vops_close(ops);
    return rc;
  }
  a->info = *vreplay_info(a->rp);
  a->model = vreplay_model(a->rp);
  vreplay_set_hook(a->rp, app_event, a);
  a->total_ops = vreplay_count(a->rp); /* says a cut trace's warning */
  if (*vreplay_warning(a->rp))
    vapp_message(a, "warning: %s", vreplay_warning(a->rp));
  /* Default pace: the whole trace in about 20 seconds. */
  a->speed = a->total_ops ? (double)a->total_ops / 20.0 : 10000.0;
  if (a->speed < 50) a->speed = 50;
  return app_common(a);
}

void vapp_attach_error(const char *where, int rc) {
  fprintf(stderr, "gpubuddy-view: cannot attach to %s: %s%s%s\n", where,
          gpb_strerror(rc), *gpb_last_error_detail() ? ": " : "",
          gpb_last_error_detail());
}

int vapp_open_attach(vapp_t *a, gpb_attach_t *at, const char *title) {
  memset(a, 0, sizeof *a);
  a->kind = VSRC_LIVE;
  a->at = at;
  int rc;
  if ((rc = gpb_attach_info(a->at, &a->info)) != 0 ||
      !(a->model = gpb_attach_model(a->at))) {
    fprintf(stderr, "gpubuddy-view: %s: the reader has no pool state\n",
            title);
    gpb_attach_close(a->at);
    a->at = NULL;
    return rc ? rc : GPB_EFORMAT;
  }
  snprintf(a->title, sizeof a->title, "%s", title);
  gpb_attach_set_hook(a->at, app_event, a);
  a->map.need_rebuild = 1;
  a->req_rescan = 1; /* the keyframe's blocks came before the hook */
  rc = app_common(a);
  a->map.need_rebuild = 1;
  if (!rc) vsite_resync(a); /* as req_rescan: the keyframe's blocks */
  return rc;
}

void vapp_set_source(vapp_t *a, const char *key, int remote,
                     const char *token) {
  snprintf(a->src, sizeof a->src, "%s", key);
  a->src_remote = remote;
  a->token = token;
}

int vapp_open_live(vapp_t *a, const char *name, const char *connect,
                   const char *token) {
  memset(a, 0, sizeof *a);
  gpb_attach_t *at;
  int rc = connect ? gpb_attach_connect(connect, token, &at)
                   : gpb_attach_open(name, &at);
  if (rc) {
    vapp_attach_error(connect ? connect : name, rc);
    return rc;
  }
  char title[sizeof a->title];
  snprintf(title, sizeof title, "%s%s", connect ? "remote " : "",
           connect ? connect : name);
  if ((rc = vapp_open_attach(a, at, title)) != 0) return rc;
  vapp_set_source(a, connect ? connect : name, !!connect, token);
  return 0;
}

/* The largest request among the live blocks: what a view that attached
 * (or resynchronized) late knows of the requests made before. */
static int app_req_cb(const gpb_block_info_t *b, void *user) {
  uint64_t *max = user;
  if (b->used && b->requested > *max) *max = b->requested;
  return 0;
}

/* A live view resynchronized (or attached) looks at the live blocks once
 * for the largest request, when UNUSABLE is shown and at most twice a
 * second: a view that falls behind resyncs often, and a walk of a
 * million blocks costs tens of ms. */
#define APP_REQ_RESCAN_NS 500000000ull

double vapp_unusable(vapp_t *a, uint64_t *for_bytes) {
  const gpb_stats_t *st = &a->stats;
  if (for_bytes) *for_bytes = 0;
  uint64_t now = a->req_rescan ? gpb_now_ns() : 0;
  if (a->req_rescan && a->model && now - a->req_rescan_ns >= APP_REQ_RESCAN_NS) {
    a->req_rescan = 0;
    a->req_rescan_ns = now;
    gpb_model_visit(a->model, app_req_cb, &a->max_req);
  }
  if (!a->max_req || !st->free_bytes || !st->min_block) return -1;
  uint64_t units = (a->max_req + st->min_block - 1) / st->min_block;
  uint32_t j = units > 1 ? 64u - (uint32_t)__builtin_clzll(units - 1) : 0;
  if (for_bytes) *for_bytes = j < 64 - 1 ? st->min_block << j : UINT64_MAX;
  /* Linux's index for the order of the workload's own largest request,
   * on the coalesced map. It was taken for the largest power of two in
   * the free bytes, a request as large as all free memory: 1.000 as soon
   * as the largest free block held less than half of it, most of the
   * time, whatever the requests. */
  if (j >= st->num_orders) return 1.0; /* larger than the pool's blocks */
  return st->unusable_index[j];
}

int vapp_reopen(vapp_t *a) {
  if (a->kind != VSRC_LIVE || !a->src[0]) return GPB_EINVAL;
  gpb_attach_t *at;
  int rc = a->src_remote ? gpb_attach_connect(a->src, a->token, &at)
                         : gpb_attach_open(a->src, &at);
  if (rc) return rc;
  /* The segment of a program that was killed opens too; its reader says
   * so by the second poll (the first reports the state it loaded). */
  for (int i = 0; i < 2 && rc >= 0; i++) rc = gpb_attach_poll(at);
  gpb_pool_info_t info;
  const gpb_model_t *model = gpb_attach_model(at);
  if (rc >= 0 && (rc = gpb_attach_info(at, &info)) == 0 && !model)
    rc = GPB_EFORMAT;
  if (rc < 0) {
    gpb_attach_close(at);
    return rc;
  }
  /* The new pool may be of another size: then another map, with the
   * view's coloring and layout, sized by the next layout. */
  if (info.managed_size != a->info.managed_size ||
      info.min_block != a->info.min_block) {
    vmap_t m;
    if ((rc = vmap_init(&m, info.managed_size, info.min_block)) != 0) {
      gpb_attach_close(at);
      return rc;
    }
    m.color = a->map.color;
    m.layout = a->map.layout;
    vmap_free(&a->map);
    a->map = m;
  }
  gpb_attach_close(a->at);
  a->at = at;
  a->info = info;
  a->model = model;
  gpb_attach_set_hook(at, app_event, a);
  app_drop_held(a); /* a->model is the new reader's now */
  vbands_fini(&a->bands); /* another program's allocations */
  a->disconnected = a->failed = 0;
  a->events = 0;
  a->have_sel = 0;
  a->max_req = 0;
  a->req_rescan = 1;
  a->req_rescan_ns = 0; /* a new reader: look at once */
  vseries_reset(&a->series);
  a->series.oom_latest = 1;
  voom_fini(&a->oom);
  voom_init(&a->oom);
  vsite_resync(a);
  a->map.t0_ns = a->map.now_ns = 0;
  a->map.need_rebuild = 1;
  gpb_model_stats(a->model, &a->stats);
  vapp_message(a, "attached again: %s is back (pid %d)", a->src,
               (int)info.pid);
  return 0;
}

void vapp_close(vapp_t *a) {
  app_drop_held(a);
  vbands_fini(&a->bands);
  vreplay_close(a->rp);
  gpb_attach_close(a->at);
  vmap_free(&a->map);
  voom_fini(&a->oom);
  gpbt_sites_fini(&a->sites);
  a->rp = NULL;
  a->at = NULL;
}

uint64_t vapp_pos(const vapp_t *a) {
  return a->kind == VSRC_REPLAY ? vreplay_pos(a->rp) : gpb_model_seq(a->model);
}

static uint64_t app_retry_ns(const vapp_t *a) {
  return a->src_remote ? VAPP_RETRY_REMOTE_NS : VAPP_RETRY_NS;
}

/* Runs n ops, with per-event map updates only for small steps. */
static void app_run(vapp_t *a, uint64_t n) {
  if (!n || a->failed) return;
  if (n > APP_BULK_OPS) a->map.need_rebuild = 1;
  int64_t rc = vreplay_step(a->rp, n);
  if (rc < 0) {
    a->failed = 1;
    vapp_message(a, "%s", vreplay_error(a->rp));
    fprintf(stderr, "gpubuddy-view: %s\n", vreplay_error(a->rp));
  }
}

/* Runs up to n ops in chunks of VAPP_STEP_CHUNK, reading the clock once
 * per chunk, until the step budget is spent; the rest is dropped, so a
 * replay too fast for the machine falls behind instead of the window. */
static void app_play(vapp_t *a, uint64_t n) {
  uint64_t budget = a->step_budget_ns ? a->step_budget_ns : APP_STEP_BUDGET_NS;
  uint64_t t0 = gpb_now_ns(), done = 0;
  /* A long run rebuilds the map once, as app_run does for one big step. */
  if (n > APP_BULK_OPS) a->map.need_rebuild = 1;
  while (done < n && !a->failed && !vreplay_at_end(a->rp)) {
    uint64_t k = n - done < VAPP_STEP_CHUNK ? n - done : VAPP_STEP_CHUNK;
    app_run(a, k);
    done += k;
    if (gpb_now_ns() - t0 >= budget) break;
  }
}

static void app_seek_some(vapp_t *a, uint64_t chunk) {
  uint64_t pos = vreplay_pos(a->rp);
  if (a->seek_to < pos) {
    if (vreplay_restart(a->rp)) {
      a->failed = 1;
      vapp_message(a, "cannot seek back: %s", vreplay_error(a->rp));
      a->seek_to = UINT64_MAX;
      return;
    }
    a->model = vreplay_model(a->rp);
    a->failed = 0;
    a->events = 0;
    a->max_req = 0;
    /* The series keeps its points and failures: they are the timeline
     * of the whole trace, and ops run again are not counted twice. */
    vsite_resync(a);
    a->map.t0_ns = a->map.now_ns = 0;
    a->map.need_rebuild = 1;
    pos = 0;
  }
  uint64_t want = a->seek_to - pos;
  if (want > chunk) want = chunk;
  app_run(a, want);
  if (vreplay_pos(a->rp) >= a->seek_to || vreplay_at_end(a->rp) || a->failed)
    a->seek_to = UINT64_MAX;
}

int vapp_seek(vapp_t *a, uint64_t n) {
  if (a->kind != VSRC_REPLAY) return GPB_EINVAL;
  a->seek_to = n;
  while (a->seek_to != UINT64_MAX) app_seek_some(a, UINT64_MAX);
  voom_update(a);
  return a->failed ? GPB_EFORMAT : 0;
}

void vapp_update(vapp_t *a, double dt) {
  if (a->kind == VSRC_REPLAY) {
    if (a->seek_to != UINT64_MAX) {
      app_seek_some(a, APP_SEEK_CHUNK);
    } else if (!a->paused && !vreplay_at_end(a->rp) && !a->failed) {
      double want = a->speed > 0 ? a->speed * dt + a->carry : 0;
      uint64_t n = a->speed > 0 ? (uint64_t)want : UINT64_MAX;
      a->carry = a->speed > 0 ? want - (double)n : 0;
      app_play(a, n);
    }
    voom_update(a);
  } else if (!a->paused && !a->disconnected && !a->failed) {
    int rc = gpb_attach_poll(a->at);
    a->model = gpb_attach_model(a->at);
    if (rc == GPB_ECLOSED) {
      a->disconnected = 1;
      a->retry_ns = gpb_now_ns() + app_retry_ns(a);
      if (app_hold_last(a))
        vapp_message(a, "disconnected: the program exited; the pool as it "
                     "was before its teardown freed %zu blocks",
                     a->drain.n);
      else if (a->src_remote)
        vapp_message(a, "disconnected: the relay stopped answering or the "
                     "pool's program is gone; trying again every %d s",
                     (int)(VAPP_RETRY_REMOTE_NS / 1000000000ull));
      else
        vapp_message(a, "disconnected: the pool's program is gone; "
                     "watching for it to come back");
    } else if (rc < 0) {
      a->failed = 1;
      vapp_message(a, "live stream error: %s%s%s", gpb_strerror(rc),
                   *gpb_last_error_detail() ? ": " : "",
                   gpb_last_error_detail());
      fprintf(stderr, "gpubuddy-view: %s\n", a->msg);
    }
    /* Same host, same clock: ages keep growing between events. */
    if (strncmp(a->title, "remote ", 7) != 0) {
      uint64_t now = gpb_now_ns();
      if (now > a->map.now_ns && a->map.t0_ns) a->map.now_ns = now;
    }
  } else if (a->kind == VSRC_LIVE && a->disconnected && !a->paused) {
    /* The program may come back under the same name (a restart). */
    uint64_t now = gpb_now_ns();
    if (now >= a->retry_ns) {
      a->retry_ns = now + app_retry_ns(a);
      vapp_reopen(a);
    }
  }
  /* Age colors drift as time passes; refresh them from the model. */
  if (a->map.color == VCOLOR_AGE) {
    uint64_t now = gpb_now_ns();
    if (now - a->last_age_rebuild_ns > 500000000ull) {
      a->map.need_rebuild = 1;
      a->last_age_rebuild_ns = now;
    }
  }
  vapp_sync_map(a);
  gpb_model_stats(a->model, &a->stats);
}

void vapp_sync_map(vapp_t *a) {
  if (a->map.need_rebuild) vmap_rebuild(&a->map, a->model);
  vmap_refresh(&a->map, a->model);
  vmap_colorize(&a->map);
}

/* FNV-1a over one 64-bit value at a time. */
static uint64_t app_mix(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; i++, v >>= 8) h = (h ^ (v & 0xff)) * 0x100000001b3ull;
  return h;
}

uint64_t vapp_signature(const vapp_t *a, uint64_t now) {
  uint64_t h = 0xcbf29ce484222325ull;
  h = app_mix(h, a->changes);
  h = app_mix(h, vapp_pos(a));
  h = app_mix(h, (uint64_t)a->paused | (uint64_t)a->disconnected << 1 |
                     (uint64_t)a->failed << 2 |
                     (uint64_t)(a->seek_to != UINT64_MAX) << 3 |
                     (uint64_t)(a->msg[0] && now < a->msg_until_ns) << 4);
  h = app_mix(h, a->msg_until_ns);
  h = app_mix(h, a->last_age_rebuild_ns);
  h = app_mix(h, a->series.count);
  h = app_mix(h, a->series.ooms);
  h = app_mix(h, (uint64_t)a->oom.nex << 32 | (uint32_t)a->oom.sel);
  return h;
}

int vapp_closed(const vapp_t *a) {
  return a->kind == VSRC_LIVE && (a->disconnected || a->failed);
}

void vapp_json_members(const vapp_t *a, FILE *f) {
  char buf[2048];
  int n = gpb_stats_json(&a->stats, buf, sizeof buf);
  fprintf(f, "\"ops\":%" PRIu64 ",\"total_ops\":%" PRIu64 ",\"pool_size\":%"
          PRIu64 ",\"failed_allocs\":%" PRIu64 ",\"bytes_used\":%" PRIu64
          ",\"largest_free\":%" PRIu64, vapp_pos(a), a->total_ops,
          (uint64_t)a->info.pool_size, a->stats.failures,
          a->stats.block_bytes, a->stats.largest_free);
  if (n > 2 && (size_t)n < sizeof buf) fprintf(f, ",\"stats\":%s", buf);
  voom_json(a, f);
  vsite_json(a, f);
}
