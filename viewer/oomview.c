/* SPDX-License-Identifier: MIT */
/*
 * oomview.c: why an allocation failed, in a panel over the map.
 *
 * The explanation is tools/common/oom.c's (gpubuddy-replay
 * --explain-oom's): the live blocks become a map, and the cheapest
 * window of the size the request needed is found, with the allocations
 * in it. It needs the blocks as they were when the request failed, so it
 * runs in the event hook (the model is at the failure then) for the first
 * VOOM_FIRST failures and, in a live view, for later ones as a budget of
 * block visits allows (view.h), into a ring of the last VOOM_LIVE; a
 * replay explains any other failure by seeking to it, where the model is
 * as it was (a failure changes nothing). A live view's keys and ticks go
 * through the failures it explained: with 150 failures a second it
 * explained one a second and o, [ and the ticks said "not explained".
 */
#include "view.h"

#include "json.h"
#include "replay.h" /* gpbt_ns_format */

#include <inttypes.h>
#include <string.h>

void voom_init(voom_t *o) {
  memset(o, 0, sizeof *o);
  gpbt_oom_map_init(&o->map);
  o->sel = -1;
  o->visits = VOOM_VISITS_MAX;
}

void voom_fini(voom_t *o) {
  for (int i = 0; i < VOOM_KEEP; i++) gpbt_oom_free(&o->ex[i].why);
  gpbt_oom_map_fini(&o->map);
}

/* A replay names each allocation by its trace id (what PyTorch calls
 * its address). */
static void oom_name(void *user, gpbt_oom_alloc_t *al) {
  vapp_t *a = user;
  uint64_t id;
  if (a->kind == VSRC_REPLAY && vreplay_trace_id(a->rp, al->offset, &id) == 0)
    al->id = id, al->has_id = 1;
}

/* Explains rec from the model now into slot i. */
static int oom_explain(vapp_t *a, const vseries_oom_t *rec, int i,
                       uint64_t now_ns) {
  voom_t *o = &a->oom;
  voom_ex_t *e = &o->ex[i];
  gpbt_oom_free(&e->why);
  memset(e, 0, sizeof *e);
  e->rec = *rec;
  int rc = gpbt_oom_map_model(&o->map, a->model, oom_name, a);
  if (!rc) rc = gpbt_oom_explain(&o->map, a->info.policy, rec->requested, &e->why);
  e->why.op = rec->x;
  e->why.time_ns = now_ns;
  e->why.tag = rec->tag;
  if (rc) {
    gpbt_oom_free(&e->why);
    e->rec.x = 0; /* a slot nothing matches */
    return rc;
  }
  if (i >= o->nex) o->nex = i + 1;
  return 0;
}

/* The slot holding the failure at x, or -1. */
static int oom_find(const voom_t *o, uint64_t x) {
  for (int i = 0; i < o->nex; i++)
    if (o->ex[i].rec.x == x) return i;
  return -1;
}

/* The slot for a failure explained later: the oldest of the others. */
static int oom_slot(voom_t *o) {
  int i = VOOM_FIRST + o->next_live;
  o->next_live = (o->next_live + 1) % VOOM_LIVE;
  if (i == o->sel) return oom_slot(o); /* keep the one shown */
  return i;
}

/* Live: whether the budget of block visits, refilled by event time,
 * pays for one more walk of the blocks; takes it if so. */
static int oom_budget(vapp_t *a, uint64_t t_ns) {
  voom_t *o = &a->oom;
  if (o->visits_ns && t_ns > o->visits_ns)
    o->visits += (double)(t_ns - o->visits_ns) * (VOOM_VISITS_PER_S / 1e9);
  if (o->visits > VOOM_VISITS_MAX) o->visits = VOOM_VISITS_MAX;
  if (t_ns > o->visits_ns) o->visits_ns = t_ns;
  double cost = 2.0 * (double)a->stats.live_allocs + 64;
  if (o->visits < cost) return 0;
  o->visits -= cost;
  return 1;
}

void voom_event(vapp_t *a, const gpb_event_t *ev, uint64_t x) {
  const vseries_t *se = &a->series;
  if (!se->noom || se->oom[se->noom - 1].x != x) return; /* not kept */
  const vseries_oom_t *rec = &se->oom[se->noom - 1];
  /* Live, the ring holds still while its panel is open: at 150 failures
   * a second it was all new again in a fifth of a second, and [ from the
   * failure shown went to the first ones. o again reopens on the latest. */
  if (se->ooms <= VOOM_FIRST)
    oom_explain(a, rec, (int)se->ooms - 1, ev->time_ns);
  else if (a->kind == VSRC_LIVE && a->oom.sel < 0 && oom_budget(a, ev->time_ns))
    oom_explain(a, rec, oom_slot(&a->oom), ev->time_ns);
}

/* The slots explained, ordered by x, into idx; returns how many. */
static int oom_sorted(const voom_t *o, int *idx) {
  int n = 0;
  for (int i = 0; i < o->nex; i++) {
    if (!o->ex[i].rec.x) continue;
    int j = n++;
    for (; j > 0 && o->ex[idx[j - 1]].rec.x > o->ex[i].rec.x; j--)
      idx[j] = idx[j - 1];
    idx[j] = i;
  }
  return n;
}

/* Live: the explained failure nearest x (its slot), or -1. */
static int oom_nearest(const voom_t *o, uint64_t x) {
  int best = -1;
  uint64_t bd = UINT64_MAX;
  for (int i = 0; i < o->nex; i++) {
    uint64_t r = o->ex[i].rec.x;
    if (!r) continue;
    uint64_t d = r > x ? r - x : x - r;
    if (d < bd) bd = d, best = i;
  }
  return best;
}

/* Shows rec, explained now from the model if no slot has it. */
static void oom_show(vapp_t *a, const vseries_oom_t *rec, uint64_t now_ns) {
  voom_t *o = &a->oom;
  int k = oom_find(o, rec->x);
  if (k < 0 && oom_explain(a, rec, k = oom_slot(o), now_ns) != 0) {
    vapp_message(a, "out of memory to explain the failure");
    return;
  }
  o->sel = k;
}

void voom_pick(vapp_t *a, size_t i) {
  voom_t *o = &a->oom;
  if (i >= a->series.noom) return;
  const vseries_oom_t *rec = &a->series.oom[i];
  /* A replay goes to the failure, so the map is what the panel says. */
  if (a->kind == VSRC_REPLAY && vapp_pos(a) != rec->x) {
    o->rec = *rec;
    o->want = 1;
    o->sel = oom_find(o, rec->x);
    a->paused = 1;
    a->seek_to = rec->x;
    return;
  }
  if (a->kind == VSRC_LIVE && oom_find(o, rec->x) < 0) {
    int k = oom_nearest(o, rec->x);
    if (k < 0) {
      vapp_message(a, "failure at event %" PRIu64 " was not explained (a "
                   "live view explains as its budget allows)", rec->x);
      return;
    }
    vapp_message(a, "failure at event %" PRIu64 " was not explained; the "
                 "nearest explained is at event %" PRIu64, rec->x,
                 o->ex[k].rec.x);
    o->sel = k;
    return;
  }
  oom_show(a, rec, a->map.now_ns);
}

void voom_update(vapp_t *a) {
  voom_t *o = &a->oom;
  if (a->seek_to != UINT64_MAX) return;
  /* A replay that moved off the failure shown shows another state than
   * the panel's: the panel closes. */
  if (!o->want && o->sel >= 0 && a->kind == VSRC_REPLAY &&
      vapp_pos(a) != o->ex[o->sel].rec.x)
    o->sel = -1;
  if (!o->want) return;
  o->want = 0;
  if (vapp_pos(a) != o->rec.x) {
    vapp_message(a, "could not replay to the failure at op %" PRIu64, o->rec.x);
    return;
  }
  oom_show(a, &o->rec, a->map.now_ns);
}

/* Index in the series of the failure shown, or of the last one at or
 * before the position. */
static size_t oom_index(const vapp_t *a) {
  const vseries_t *se = &a->series;
  uint64_t x = a->oom.sel >= 0 ? a->oom.ex[a->oom.sel].rec.x : vapp_pos(a);
  size_t i = 0;
  while (i + 1 < se->noom && se->oom[i + 1].x <= x) i++;
  return i;
}

/* Live: o shows the latest failure explained, [ ] the one before or
 * after the one shown, in the order they happened. */
static void oom_live_key(vapp_t *a, int key) {
  voom_t *o = &a->oom;
  int idx[VOOM_KEEP], n = oom_sorted(o, idx), at = -1;
  if (!n) {
    vapp_message(a, "no failed allocation explained yet (%" PRIu64 " seen)",
                 a->series.ooms);
    return;
  }
  for (int i = 0; i < n; i++)
    if (idx[i] == o->sel) at = i;
  if (at < 0) at = n - 1;
  else if (key == '[' && at > 0) at--;
  else if (key == ']' && at + 1 < n) at++;
  else if (key != 'o')
    vapp_message(a, "the %s failure explained (the last %d are kept)",
                 key == '[' ? "oldest" : "latest", VOOM_LIVE);
  o->sel = idx[at];
}

void voom_key(vapp_t *a, int key) {
  voom_t *o = &a->oom;
  const vseries_t *se = &a->series;
  if (key == VKEY_ESC || (key == 'o' && o->sel >= 0)) {
    o->sel = -1;
    o->want = 0;
    return;
  }
  if (a->kind == VSRC_LIVE) {
    oom_live_key(a, key);
    return;
  }
  if (!se->noom) {
    vapp_message(a, "no failed allocation %s", a->kind == VSRC_REPLAY
                 ? "in the ops replayed so far" : "seen yet");
    return;
  }
  size_t i = oom_index(a);
  int shown = o->sel >= 0 && o->ex[o->sel].rec.x == se->oom[i].x;
  if (key == '[' && shown && i > 0) i--;
  else if (key == ']' && shown && i + 1 < se->noom) i++;
  else if (key == ']' && !shown && se->oom[i].x < vapp_pos(a) && i + 1 < se->noom)
    i++;
  voom_pick(a, i);
}

/* -------------------------------------------------------------- drawing */

#define OOM_LINES (GPBT_OOM_LIST + 8)

static int oom_lines(const vapp_t *a, const voom_ex_t *e, char (*l)[96]) {
  const gpbt_oom_t *w = &e->why;
  char b1[32], b2[32];
  int n = 0;
  size_t k = 0;
  while (k < a->series.noom && a->series.oom[k].x != e->rec.x) k++;
  snprintf(l[n++], 96, "OUT OF MEMORY AT %s %" PRIu64 " (FAILURE %zu OF %" PRIu64 ")",
           a->kind == VSRC_REPLAY ? "OP" : "EVENT", e->rec.x, k + 1,
           a->series.ooms);
  if (!w->need)
    snprintf(l[n++], 96, "REQUESTED %s: MORE THAN THE POOL",
             vfmt_bytes(w->requested, b1, 32));
  else
    snprintf(l[n++], 96, "REQUESTED %s, NEEDS A %s OF %s",
             vfmt_bytes(w->requested, b1, 32), w->aligned ? "BLOCK" : "RUN",
             vfmt_bytes(w->need, b2, 32));
  snprintf(l[n++], 96, "FREE %s  LARGEST FREE BLOCK %s",
           vfmt_bytes(w->free_bytes, b1, 32), vfmt_bytes(w->largest_free, b2, 32));
  if (w->need && !w->win.size) {
    snprintf(l[n++], 96, "NO WINDOW OF THAT SIZE IN THE POOL");
  } else if (w->need) {
    snprintf(l[n++], 96, "CHEAPEST WINDOW 0x%" PRIx64 "+%s: %s LIVE IN %" PRIu64
             " ALLOC%s", w->win.offset, vfmt_bytes(w->win.size, b1, 32),
             vfmt_bytes(w->win.live_bytes, b2, 32), w->win.live_allocs,
             w->win.live_allocs == 1 ? "" : "S");
    for (size_t i = 0; i < w->nlist; i++) {
      const gpbt_oom_alloc_t *x = &w->list[i];
      char age[32], sh[48];
      gpbt_ns_format(age, sizeof age,
                     w->time_ns > x->time_ns ? w->time_ns - x->time_ns : 0);
      sh[0] = 0;
      if (x->site) {
        int k = snprintf(sh, sizeof sh, "SITE %u ", x->site);
        vsite_short(vapp_site_text(a, x->site), sh + k, sizeof sh - (size_t)k);
      }
      snprintf(l[n++], 96, " 0x%" PRIx64 " %s AGE %s %s", x->offset,
               vfmt_bytes(x->size, b1, 32), age, sh);
    }
    if (w->win.live_allocs > w->nlist)
      snprintf(l[n++], 96, " ... AND %" PRIu64 " MORE",
               w->win.live_allocs - w->nlist);
  }
  snprintf(l[n++], 96, "[ ] OTHER FAILURES   O ESC CLOSE");
  return n;
}

/* The rows of the map [y0, y1) the window at [off, off + len) covers
 * (all of them in the tree, whose rows are orders). */
static void oom_win_rows(const vapp_t *a, uint64_t off, uint64_t len, int *y0,
                         int *y1) {
  const vmap_t *m = &a->map;
  *y0 = a->map_y, *y1 = a->map_y + a->map_h;
  if (m->layout == VLAYOUT_TREE || !m->cols || !m->bpc) return;
  uint64_t lo = off > m->start ? off - m->start : 0;
  uint64_t hi = off + len > m->start ? off + len - m->start : 0;
  uint64_t row = (uint64_t)m->cols * m->bpc;
  *y0 = a->map_y + (int)(lo / row) * a->cell_px;
  *y1 = a->map_y + (int)((hi + row - 1) / row) * a->cell_px;
}

/* The panel: as wide as the map allows (longer lines end in "..."),
 * at the top of the map or, when the window it explains is there, at
 * the bottom (it covered the window it explained). */
void voom_draw(vapp_t *a, gpbt_fb_t *fb) {
  voom_t *o = &a->oom;
  if (o->sel < 0) return;
  const voom_ex_t *e = &o->ex[o->sel];
  int s = a->scale < 1 ? 1 : a->scale, lh = (GPBT_FONT_H + 1) * s;
  if (e->why.win.size)
    vframe_mark(a, fb, e->why.win.offset, e->why.win.size, VC_ALERT);
  char l[OOM_LINES][96];
  int n = oom_lines(a, e, l), w = 0;
  int fit = (a->map_w - 20 * s) / (GPBT_FONT_W * s);
  if (fit > 95) fit = 95;
  for (int i = 0; i < n; i++) {
    if (fit > 4 && (int)strlen(l[i]) > fit) memcpy(l[i] + fit - 3, "...", 4);
    int lw = gpbt_font_width(s, l[i]);
    if (lw > w) w = lw;
  }
  w += 8 * s;
  int h = n * lh + 6 * s, x = a->map_x + 6 * s, y = a->map_y + 6 * s;
  if (e->why.win.size) {
    int y0, y1;
    oom_win_rows(a, e->why.win.offset, e->why.win.size, &y0, &y1);
    int below = a->map_y + a->map_h - 6 * s - h;
    /* Whichever end of the map the window leaves more of. */
    if (y0 < y + h && y1 > y && below > y &&
        (y0 - a->map_y) < (a->map_y + a->map_h - y1))
      y = below;
  }
  gpbt_fb_fill(fb, x, y, w, h, 0xFF0B0E13u);
  gpbt_fb_rect(fb, x, y, w, h, VC_ALERT);
  for (int i = 0; i < n; i++)
    gpbt_font_draw(fb, x + 4 * s, y + 3 * s + i * lh, s,
                   i == 0 ? VC_ALERT : VC_TEXT, l[i]);
  o->panel_y = y, o->panel_h = h;
}

void voom_json(const vapp_t *a, FILE *f) {
  const voom_t *o = &a->oom;
  fprintf(f, ",\"ooms\":{\"count\":%" PRIu64 ",\"explained\":[", a->series.ooms);
  int first = 1;
  for (int i = 0; i < o->nex && i < VOOM_FIRST; i++) {
    const gpbt_oom_t *w = &o->ex[i].why;
    if (!o->ex[i].rec.x) continue;
    gpbt_json_t j = {f, ",", 0};
    fputs(first ? "{" : ",{", f);
    first = 0;
    gpbt_json_put_u64(&j, "op", o->ex[i].rec.x);
    gpbt_json_put_u64(&j, "requested", w->requested);
    gpbt_json_put_u64(&j, "free", w->free_bytes);
    gpbt_json_put_u64(&j, "largest", w->largest_free);
    gpbt_json_put_u64(&j, "site", o->ex[i].rec.site);
    gpbt_json_put_u64(&j, "window_live", w->win.live_bytes);
    fputs("}", f);
  }
  fputs("]}", f);
}
