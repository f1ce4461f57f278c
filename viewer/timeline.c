/* SPDX-License-Identifier: MIT */
/*
 * timeline.c: memory over time, under the map.
 *
 * The band spans the whole replay (op 0 to its last op), or a live
 * view's history (its first event to now). In a tall enough frame it
 * draws the series' used bytes stacked by group: call sites, or tags in
 * the tag colour mode or when no allocation names a site; the groups are
 * the VTL_GROUPS with the most bytes over the points kept, each in its
 * colour on the map, the rest of the used bytes grey ("other"). A short
 * frame keeps the thin progress bar. Both mark every failed allocation
 * the series kept with a red tick (along the chart's top quarter), and
 * the position with a white line.
 * A click on a tick explains that failure (oomview.c); elsewhere a
 * replay seeks there, and a live view, which cannot go back, says so.
 */
#include "view.h"

#include <inttypes.h>
#include <string.h>

#define TL_OTHER 0xFF4B5563u /* the used bytes of no group shown */
#define TL_OOM VC_ALERT

int vtl_by_tag(const vapp_t *a) {
  if (a->map.color == VCOLOR_TAG) return 1;
  return !a->sites.v || a->sites.max_site == 0;
}

/* The x the band starts and ends at. */
static void tl_span(const vapp_t *a, uint64_t *lo, uint64_t *hi) {
  const vseries_t *se = &a->series;
  uint64_t pos = vapp_pos(a);
  *lo = 0;
  *hi = pos;
  if (a->kind == VSRC_REPLAY && a->total_ops) {
    *hi = a->total_ops;
  } else {
    if (a->kind == VSRC_LIVE && se->n) *lo = se->x[0];
    if (se->n && se->x[se->n - 1] > *hi) *hi = se->x[se->n - 1];
    if (se->noom && se->oom[se->noom - 1].x > *hi) *hi = se->oom[se->noom - 1].x;
  }
  if (*hi <= *lo) *hi = *lo + 1;
}

uint64_t vtl_x_at(const vapp_t *a, int px) {
  uint64_t lo, hi;
  tl_span(a, &lo, &hi);
  if (a->tl_w <= 0 || px <= a->tl_x) return lo;
  if (px >= a->tl_x + a->tl_w) return hi;
  return lo + (uint64_t)((double)(hi - lo) * (px - a->tl_x) / a->tl_w);
}

static int tl_px(const vapp_t *a, uint64_t x, uint64_t lo, uint64_t hi) {
  if (x < lo) x = lo;
  if (x > hi) x = hi;
  return a->tl_x + (int)((double)a->tl_w * (double)(x - lo) / (double)(hi - lo));
}

/* The groups drawn: those with the most bytes summed over the points. */
static int tl_groups(const vapp_t *a, int by_tag, uint32_t *ids) {
  enum { CAND = 4 * VSERIES_K * VTL_GROUPS };
  uint32_t cid[CAND];
  double csum[CAND];
  int nc = 0;
  const vseries_t *se = &a->series;
  for (int i = 0; i < se->n; i++) {
    const vseries_grp_t *g = by_tag ? &se->tag[i] : &se->site[i];
    for (int k = 0; k < g->n; k++) {
      int j = 0;
      while (j < nc && cid[j] != g->id[k]) j++;
      if (j == nc) {
        if (nc == CAND) continue; /* a group this small stays "other" */
        cid[nc] = g->id[k], csum[nc++] = 0;
      }
      csum[j] += (double)g->bytes[k];
    }
  }
  int n = 0;
  for (; n < VTL_GROUPS && n < nc; n++) {
    int best = n;
    for (int j = n + 1; j < nc; j++)
      if (csum[j] > csum[best] || (csum[j] == csum[best] && cid[j] < cid[best]))
        best = j;
    uint32_t ti = cid[n];
    double ts = csum[n];
    cid[n] = cid[best], csum[n] = csum[best];
    cid[best] = ti, csum[best] = ts;
    ids[n] = cid[n];
  }
  return n;
}

/* The stacked chart, a column per pixel: the last point at or before
 * the column's x (none before the first point, nor past the last). */
static void tl_chart(const vapp_t *a, gpbt_fb_t *fb, uint64_t lo, uint64_t hi,
                     int by_tag, const uint32_t *ids, int ng) {
  const vseries_t *se = &a->series;
  double ymax = (double)a->stats.managed_bytes;
  if (!se->n || ymax <= 0) return;
  int h = a->tl_h, i = 0;
  uint64_t end = se->x[se->n - 1], pos = vapp_pos(a);
  if (pos > end) end = pos;
  for (int px = 0; px < a->tl_w; px++) {
    uint64_t x = lo + (uint64_t)((double)(hi - lo) * px / a->tl_w);
    while (i + 1 < se->n && se->x[i + 1] <= x) i++;
    if (se->x[i] > x || x > end) continue; /* not replayed (yet) */
    const vseries_grp_t *g = by_tag ? &se->tag[i] : &se->site[i];
    double used = se->used[i], y = 0;
    for (int k = 0; k < ng; k++)
      for (int m = 0; m < g->n; m++) {
        if (g->id[m] != ids[k]) continue;
        int y0 = (int)(y / ymax * h), y1 = (int)((y + (double)g->bytes[m]) / ymax * h);
        gpbt_fb_fill(fb, a->tl_x + px, a->tl_y + h - y1, 1, y1 - y0,
                     by_tag ? vc_tag(ids[k]) : vc_site(ids[k]));
        y += (double)g->bytes[m];
      }
    if (used > y) {
      int y0 = (int)(y / ymax * h), y1 = (int)(used / ymax * h);
      gpbt_fb_fill(fb, a->tl_x + px, a->tl_y + h - y1, 1, y1 - y0, TL_OTHER);
    }
  }
}

/* What the stack is, and its groups' colors and names, on a dark strip
 * under the failure ticks, as far as the band's width goes. */
static void tl_legend(const vapp_t *a, gpbt_fb_t *fb, int dy, int by_tag,
                      const uint32_t *ids, int ng) {
  int s = a->scale < 1 ? 1 : a->scale, y = a->tl_y + dy;
  int end = a->tl_x + a->tl_w - 2 * s;
  const char *what = by_tag ? "LIVE BYTES BY TAG" : "LIVE BYTES BY SITE";
  int x = a->tl_x + 2 * s, w = gpbt_font_width(s, what);
  gpbt_fb_fill(fb, x - s, y - s, w + 2 * s, (GPBT_FONT_H + 2) * s, VC_PANEL);
  x = gpbt_font_draw(fb, x, y, s, VC_DIM, what) + 4 * s;
  for (int k = 0; k < ng; k++) {
    char t[40], sh[24];
    if (by_tag)
      snprintf(t, sizeof t, "%u", ids[k]);
    else
      snprintf(t, sizeof t, "#%u %s", ids[k],
               vsite_short(vapp_site_text(a, ids[k]), sh, sizeof sh));
    w = 8 * s + gpbt_font_width(s, t);
    if (x + w + 2 * s > end) break;
    gpbt_fb_fill(fb, x - s, y - s, w + 3 * s, (GPBT_FONT_H + 2) * s, VC_PANEL);
    gpbt_fb_fill(fb, x, y + s, 5 * s, 5 * s,
                 by_tag ? vc_tag(ids[k]) : vc_site(ids[k]));
    x = gpbt_font_draw(fb, x + 7 * s, y, s, VC_DIM, t) + 5 * s;
  }
}

void vtl_draw(vapp_t *a, gpbt_fb_t *fb) {
  int s = a->scale < 1 ? 1 : a->scale;
  if (a->tl_h <= 0) return;
  uint64_t lo, hi;
  tl_span(a, &lo, &hi);
  int tall = a->tl_h > 10 * s;
  gpbt_fb_fill(fb, a->tl_x, a->tl_y, a->tl_w, a->tl_h, VC_GRID);
  uint64_t pos = vapp_pos(a);
  int ppx = tl_px(a, pos, lo, hi);
  int by_tag = vtl_by_tag(a), ng = 0;
  uint32_t ids[VTL_GROUPS];
  if (tall) {
    ng = tl_groups(a, by_tag, ids);
    tl_chart(a, fb, lo, hi, by_tag, ids, ng);
  } else if (a->kind == VSRC_REPLAY && a->total_ops) {
    gpbt_fb_fill(fb, a->tl_x, a->tl_y, ppx - a->tl_x, a->tl_h, TL_OTHER);
  }
  /* Failures: ticks along the top of the chart, so that a run of them
   * leaves the stack below readable; the thin bar, its whole height. */
  const vseries_t *se = &a->series;
  int th = tall ? a->tl_h / 4 : a->tl_h;
  for (size_t i = 0; i < se->noom; i++) {
    int x = tl_px(a, se->oom[i].x, lo, hi);
    gpbt_fb_fill(fb, x - (s > 1 ? s / 2 : 0), a->tl_y, s, th, TL_OOM);
  }
  if (tall) tl_legend(a, fb, th + s, by_tag, ids, ng);
  /* The failure explained, marked above the band. */
  if (a->oom.sel >= 0) {
    int x = tl_px(a, a->oom.ex[a->oom.sel].rec.x, lo, hi);
    gpbt_fb_fill(fb, x - s, a->tl_y - 2 * s, 3 * s, 2 * s, TL_OOM);
  }
  if (a->kind == VSRC_REPLAY || tall)
    gpbt_fb_fill(fb, ppx - s, a->tl_y, 2 * s, a->tl_h, VC_TEXT);
}

int vtl_click(vapp_t *a, int x, int y) {
  int s = a->scale < 1 ? 1 : a->scale;
  if (a->tl_h <= 0 || y < a->tl_y - s || y >= a->tl_y + a->tl_h + s ||
      x < a->tl_x || x >= a->tl_x + a->tl_w)
    return 0;
  /* A tick within a few pixels: the nearest failure. */
  uint64_t lo, hi;
  tl_span(a, &lo, &hi);
  const vseries_t *se = &a->series;
  int best = -1, bd = 3 * s + 1;
  for (size_t i = 0; i < se->noom; i++) {
    int d = tl_px(a, se->oom[i].x, lo, hi) - x;
    if (d < 0) d = -d;
    if (d < bd) bd = d, best = (int)i;
  }
  if (best >= 0) {
    voom_pick(a, (size_t)best);
    return 1;
  }
  if (a->kind == VSRC_REPLAY) {
    a->seek_to = vtl_x_at(a, x);
    a->dragging = 2;
  } else {
    vapp_message(a, "live: the timeline shows what happened; it cannot go "
                    "back (click a red mark to explain a failure)");
  }
  return 1;
}
