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

static void app_event(const gpb_event_t *ev, void *user) {
  vapp_t *a = user;
  if (!ev) { /* resync from a keyframe: the sums must be rebuilt */
    a->map.need_rebuild = 1;
    return;
  }
  a->events++;
  vmap_event(&a->map, ev);
  vseries_tick(&a->series, ev->seq, a->model);
}

static int app_common(vapp_t *a) {
  int rc = vmap_init(&a->map, a->info.managed_size, a->info.min_block);
  if (rc) return rc;
  vseries_reset(&a->series);
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
  a->total_ops = vreplay_count(a->rp);
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
  rc = app_common(a);
  a->map.need_rebuild = 1;
  return rc;
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
  return vapp_open_attach(a, at, title);
}

void vapp_close(vapp_t *a) {
  vreplay_close(a->rp);
  gpb_attach_close(a->at);
  vmap_free(&a->map);
  a->rp = NULL;
  a->at = NULL;
}

uint64_t vapp_pos(const vapp_t *a) {
  return a->kind == VSRC_REPLAY ? vreplay_pos(a->rp) : gpb_model_seq(a->model);
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
    vseries_reset(&a->series);
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
  } else if (!a->paused && !a->disconnected && !a->failed) {
    int rc = gpb_attach_poll(a->at);
    a->model = gpb_attach_model(a->at);
    if (rc == GPB_ECLOSED) {
      a->disconnected = 1;
      vapp_message(a, "disconnected: the pool's program is gone");
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
}
