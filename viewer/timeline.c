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
 *
 * A tall band reads like a chart: its legend on a strip above the data,
 * bytes up the left (0 to the peak rounded up, not the pool: a 6.6 MiB
 * run in a 512 MiB pool was a flat line), ops along the bottom, and a
 * hover that names the op, the bytes used and the group under the mouse.
 * The wheel zooms the time axis at the mouse; < and > pan it.
 */
#include "view.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
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
  if (a->kind == VSRC_REPLAY && (a->total_ops || a->tl_hi_fix)) {
    /* Compared runs share the longer one's op axis. */
    *hi = a->total_ops > a->tl_hi_fix ? a->total_ops : a->tl_hi_fix;
  } else {
    if (a->kind == VSRC_LIVE && se->n) *lo = se->x[0];
    if (se->n && se->x[se->n - 1] > *hi) *hi = se->x[se->n - 1];
    if (se->noom && se->oom[se->noom - 1].x > *hi) *hi = se->oom[se->noom - 1].x;
  }
  if (*hi <= *lo) *hi = *lo + 1;
  /* Zoomed: the window asked for, inside the run. */
  if (a->tl_zhi > a->tl_zlo && a->tl_zlo < *hi) {
    uint64_t zh = a->tl_zhi < *hi ? a->tl_zhi : *hi;
    if (a->tl_zlo > *lo) *lo = a->tl_zlo;
    if (zh > *lo) *hi = zh;
  }
}

void vtl_span(const vapp_t *a, uint64_t *lo, uint64_t *hi) {
  tl_span(a, lo, hi);
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

double vtl_peak(const vapp_t *a) {
  const vseries_t *se = &a->series;
  double peak = (double)a->stats.block_bytes;
  for (int i = 0; i < se->n; i++)
    if (se->used[i] > peak) peak = se->used[i];
  return peak;
}

double vtl_ymax(const vapp_t *a) {
  double peak = vtl_peak(a);
  if (a->tl_ymax_fix > peak) peak = a->tl_ymax_fix; /* compared runs */
  if (peak <= 0) return 0;
  double m = 1;
  while (m < peak) m *= 2;
  return m * 0.75 >= peak ? m * 0.75 : m;
}

/* The stacked chart, a column per pixel: the last point at or before
 * the column's x (none before the first point, nor past the last). */
static void tl_chart(const vapp_t *a, gpbt_fb_t *fb, uint64_t lo, uint64_t hi,
                     int by_tag, const uint32_t *ids, int ng) {
  const vseries_t *se = &a->series;
  double ymax = vtl_ymax(a);
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

/* What the stack is, and its groups' colors and names, on the strip
 * above the chart, as far as the band's width goes. */
static void tl_legend(const vapp_t *a, gpbt_fb_t *fb, int by_tag,
                      const uint32_t *ids, int ng) {
  int s = a->scale < 1 ? 1 : a->scale, y = a->tlb_y + s;
  int end = a->tlb_x + a->tlb_w - 2 * s;
  const char *what = by_tag ? "LIVE BYTES BY TAG" : "LIVE BYTES BY SITE";
  int x = gpbt_font_draw(fb, a->tlb_x + 2 * s, y, s, VC_DIM, what) + 6 * s;
  for (int k = 0; k < ng; k++) {
    char t[56], sh[40];
    if (by_tag)
      snprintf(t, sizeof t, "%u", ids[k]);
    else
      snprintf(t, sizeof t, "#%u %s", ids[k],
               vsite_short(vapp_site_text(a, ids[k]), sh, sizeof sh));
    int w = 8 * s + gpbt_font_width(s, t);
    if (x + w + 2 * s > end) break;
    gpbt_fb_fill(fb, x, y + s, 5 * s, 5 * s,
                 by_tag ? vc_tag(ids[k]) : vc_site(ids[k]));
    x = gpbt_font_draw(fb, x + 7 * s, y, s, VC_DIM, t) + 6 * s;
  }
}

/* "3801", "12.5k", "1.25M": an op count in at most 6 characters. */
static void tl_fmt_x(uint64_t x, char *buf, size_t n) {
  if (x < 10000) snprintf(buf, n, "%" PRIu64, x);
  else if (x < 10000000) snprintf(buf, n, "%.4gk", (double)x / 1e3);
  else snprintf(buf, n, "%.4gM", (double)x / 1e6);
}

/* The axes: bytes at the chart's quarters on the left (lines across),
 * ops under it at about every 120 pixels. */
static void tl_axes(const vapp_t *a, gpbt_fb_t *fb, uint64_t lo, uint64_t hi) {
  int s = a->scale < 1 ? 1 : a->scale;
  double ymax = vtl_ymax(a);
  char t[32];
  for (int q = 0; q <= 4 && ymax > 0; q++) {
    int y = a->tl_y + a->tl_h - (int)((double)a->tl_h * q / 4);
    if (q && q < 4) gpbt_fb_fill(fb, a->tl_x, y, a->tl_w, 1, VC_PANEL);
    if (q != 0 && q != 2 && q != 4) continue;
    vfmt_bytes((uint64_t)(ymax * q / 4), t, sizeof t);
    int ty = y - GPBT_FONT_H * s / 2;
    if (ty < a->tl_y) ty = a->tl_y;
    if (ty > a->tl_y + a->tl_h - GPBT_FONT_H * s)
      ty = a->tl_y + a->tl_h - GPBT_FONT_H * s;
    gpbt_font_draw(fb, a->tl_x - gpbt_font_width(s, t) - 2 * s, ty, s,
                   VC_DIM, t);
  }
  const char *unit = a->kind == VSRC_REPLAY ? "OP" : "EVENT";
  int ay = a->tl_y + a->tl_h + s, n = a->tl_w / (120 * s);
  if (n < 1) n = 1;
  int last_end = -1;
  uint64_t last_x = UINT64_MAX;
  for (int k = 0; k <= n; k++) {
    int px = a->tl_x + (int)((double)a->tl_w * k / n);
    uint64_t x = lo + (uint64_t)((double)(hi - lo) * k / n);
    if (x == last_x) continue; /* a short run: each op once */
    last_x = x;
    char num[24];
    tl_fmt_x(x, num, sizeof num);
    snprintf(t, sizeof t, k ? "%s" : "%s %s", k ? num : unit, num);
    int w = gpbt_font_width(s, t), tx = px - w / 2;
    if (tx < a->tlb_x) tx = a->tlb_x;
    if (tx + w > a->tl_x + a->tl_w) tx = a->tl_x + a->tl_w - w;
    if (tx <= last_end) continue;
    gpbt_fb_fill(fb, px, a->tl_y + a->tl_h, 1, s, VC_DIM);
    last_end = gpbt_font_draw(fb, tx, ay, s, VC_DIM, t) + 4 * s;
  }
}

void vtl_layout(vapp_t *a, int x, int y, int w, int h) {
  int s = a->scale < 1 ? 1 : a->scale;
  a->tlb_x = x, a->tlb_y = y, a->tlb_w = w, a->tlb_h = h;
  a->tl_x = x, a->tl_y = y, a->tl_w = w, a->tl_h = h;
  int line = (GPBT_FONT_H + 1) * s;
  if (h <= 10 * s || h < 4 * line) return; /* the thin bar */
  int gut = gpbt_font_width(s, "1023.9 MiB") + 4 * s;
  if (w < 4 * gut) return;
  a->tl_x = x + gut;
  a->tl_w = w - gut - 2 * s;
  a->tl_y = y + line + s;
  a->tl_h = h - 2 * line - 2 * s;
}

/* The hover's box, over the map above the band at the mouse. */
static void tl_hover_box(const vapp_t *a, gpbt_fb_t *fb) {
  char l[4][96];
  int n = vtl_hover(a, a->mouse_x, a->mouse_y, l, 4);
  if (!n) return;
  int s = a->scale < 1 ? 1 : a->scale, lh = (GPBT_FONT_H + 1) * s, w = 0;
  for (int i = 0; i < n; i++) {
    int lw = gpbt_font_width(s, l[i]);
    if (lw > w) w = lw;
  }
  w += 8 * s;
  int h = n * lh + 6 * s;
  int x = a->mouse_x + 10 * s, y = a->tlb_y - h - 2 * s;
  if (x + w > fb->w) x = a->mouse_x - w - 10 * s;
  if (x < 0) x = 0;
  if (y < 0) y = 0;
  gpbt_fb_fill(fb, a->mouse_x, a->tl_y, 1, a->tl_h, VC_HILITE);
  gpbt_fb_fill(fb, x, y, w, h, VC_PANEL);
  gpbt_fb_rect(fb, x, y, w, h, VC_DIM);
  for (int i = 0; i < n; i++)
    gpbt_font_draw(fb, x + 4 * s, y + 3 * s + i * lh, s, VC_TEXT, l[i]);
}

void vtl_draw(vapp_t *a, gpbt_fb_t *fb) {
  int s = a->scale < 1 ? 1 : a->scale;
  if (a->tl_h <= 0) return;
  uint64_t lo, hi;
  tl_span(a, &lo, &hi);
  int tall = a->tl_h > 10 * s, axes = a->tl_y > a->tlb_y;
  gpbt_fb_fill(fb, a->tl_x, a->tl_y, a->tl_w, a->tl_h, VC_GRID);
  uint64_t pos = vapp_pos(a);
  int ppx = tl_px(a, pos, lo, hi);
  int by_tag = vtl_by_tag(a), ng = 0;
  uint32_t ids[VTL_GROUPS];
  if (tall) {
    ng = tl_groups(a, by_tag, ids);
    if (axes) tl_axes(a, fb, lo, hi);
    tl_chart(a, fb, lo, hi, by_tag, ids, ng);
  } else if (a->kind == VSRC_REPLAY && a->total_ops) {
    gpbt_fb_fill(fb, a->tl_x, a->tl_y, ppx - a->tl_x, a->tl_h, TL_OTHER);
  }
  /* Failures: ticks along the top of the chart, so that a run of them
   * leaves the stack below readable; the thin bar, its whole height. */
  const vseries_t *se = &a->series;
  int th = tall ? a->tl_h / 4 : a->tl_h;
  for (size_t i = 0; i < se->noom; i++) {
    if (se->oom[i].x < lo || se->oom[i].x > hi) continue;
    int x = tl_px(a, se->oom[i].x, lo, hi);
    gpbt_fb_fill(fb, x - (s > 1 ? s / 2 : 0), a->tl_y, s, th, TL_OOM);
  }
  if (tall && axes) tl_legend(a, fb, by_tag, ids, ng);
  /* The failure explained, marked above the chart. */
  if (a->oom.sel >= 0) {
    int x = tl_px(a, a->oom.ex[a->oom.sel].rec.x, lo, hi);
    gpbt_fb_fill(fb, x - s, a->tl_y - 2 * s, 3 * s, 2 * s, TL_OOM);
  }
  if ((a->kind == VSRC_REPLAY || tall) && pos >= lo && pos <= hi)
    gpbt_fb_fill(fb, ppx - s, a->tl_y, 2 * s, a->tl_h, VC_TEXT);
  if (tall && a->tl_mouse) tl_hover_box(a, fb);
}

int vtl_hover(const vapp_t *a, int x, int y, char (*l)[96], int max) {
  const vseries_t *se = &a->series;
  if (max < 1 || !se->n || x < a->tl_x || x >= a->tl_x + a->tl_w ||
      y < a->tl_y || y >= a->tl_y + a->tl_h)
    return 0;
  uint64_t xv = vtl_x_at(a, x);
  int i = 0;
  while (i + 1 < se->n && se->x[i + 1] <= xv) i++;
  if (se->x[i] > xv) return 0;
  char b1[32], b2[32];
  double ymax = vtl_ymax(a);
  snprintf(l[0], 96, "%s %" PRIu64 "  USED %s", a->kind == VSRC_REPLAY ?
           "OP" : "EVENT", xv, vfmt_bytes((uint64_t)se->used[i], b1, 32));
  if (max < 2 || ymax <= 0) return 1;
  /* The group whose band holds the mouse, stacked as tl_chart does. */
  int by_tag = vtl_by_tag(a);
  uint32_t ids[VTL_GROUPS];
  int ng = tl_groups(a, by_tag, ids);
  const vseries_grp_t *g = by_tag ? &se->tag[i] : &se->site[i];
  double want = (double)(a->tl_y + a->tl_h - y) / a->tl_h * ymax, acc = 0;
  for (int k = 0; k < ng; k++)
    for (int m = 0; m < g->n; m++) {
      if (g->id[m] != ids[k]) continue;
      acc += (double)g->bytes[m];
      if (want > acc) continue;
      char sh[64];
      if (by_tag)
        snprintf(l[1], 96, "TAG %u  %s", ids[k],
                 vfmt_bytes(g->bytes[m], b2, 32));
      else
        snprintf(l[1], 96, "#%u %s  %s", ids[k],
                 vsite_short(vapp_site_text(a, ids[k]), sh, sizeof sh),
                 vfmt_bytes(g->bytes[m], b2, 32));
      return 2;
    }
  if (want <= se->used[i]) {
    snprintf(l[1], 96, "OTHER %s  %s", by_tag ? "TAGS" : "SITES",
             vfmt_bytes((uint64_t)(se->used[i] - acc), b2, 32));
    return 2;
  }
  return 1;
}

void vtl_zoom(vapp_t *a, int x, int steps) {
  uint64_t lo, hi, alo, ahi;
  tl_span(a, &lo, &hi);
  uint64_t zlo = a->tl_zlo, zhi = a->tl_zhi;
  a->tl_zlo = a->tl_zhi = 0;
  tl_span(a, &alo, &ahi); /* the whole run */
  a->tl_zlo = zlo, a->tl_zhi = zhi;
  uint64_t at = vtl_x_at(a, x);
  double f = steps > 0 ? 0.5 : 2.0, w = (double)(hi - lo);
  double nw = w * f;
  if (nw < 2) nw = 2;
  if (nw >= (double)(ahi - alo)) {
    a->tl_zlo = a->tl_zhi = 0;
    return;
  }
  double t = a->tl_w > 0 ? (double)(x - a->tl_x) / a->tl_w : 0.5;
  double nlo = (double)at - t * nw;
  if (nlo < (double)alo) nlo = (double)alo;
  if (nlo + nw > (double)ahi) nlo = (double)ahi - nw;
  a->tl_zlo = (uint64_t)nlo;
  a->tl_zhi = (uint64_t)(nlo + nw);
}

void vtl_pan(vapp_t *a, int quarters) {
  if (a->tl_zhi <= a->tl_zlo) return;
  uint64_t alo, ahi, w = a->tl_zhi - a->tl_zlo;
  uint64_t zlo = a->tl_zlo, zhi = a->tl_zhi;
  a->tl_zlo = a->tl_zhi = 0;
  tl_span(a, &alo, &ahi);
  int64_t d = (int64_t)(w / 4) * quarters;
  int64_t nlo = (int64_t)zlo + d;
  if (nlo < (int64_t)alo) nlo = (int64_t)alo;
  if ((uint64_t)nlo + w > ahi) nlo = (int64_t)(ahi > w ? ahi - w : 0);
  (void)zhi;
  a->tl_zlo = (uint64_t)nlo;
  a->tl_zhi = (uint64_t)nlo + w;
}

int vtl_click(vapp_t *a, int x, int y) {
  int s = a->scale < 1 ? 1 : a->scale;
  if (a->tl_h <= 0 || y < a->tl_y - s || y >= a->tlb_y + a->tlb_h + s ||
      y < a->tlb_y || x < a->tl_x || x >= a->tl_x + a->tl_w)
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
