/* SPDX-License-Identifier: MIT */
/*
 * frame.c: lays out and draws a whole frame into the pixel buffer: the
 * block map (left, with an address ruler in its margin, or the buddy
 * tree's row labels), the panels (right: headline stats, the legend of
 * the coloring, free blocks per order, time series), the timeline and
 * status line (bottom), and the overlays (hover box, help,
 * "disconnected").
 *
 * Only the map's cells depend on the pool's size; everything else is a
 * few thousand pixels, so a frame costs about one pass over the screen.
 */
#include "view.h"

#include <inttypes.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define FRAME_PANEL_W 250  /* at scale 1 */
#define FRAME_MAX_CELLS 2500000u
#define FRAME_TALL_H 360   /* frames this tall (at scale 1) get ... */
#define FRAME_TL_H 76      /* ... a timeline this tall (with its axes) */

const char *vfmt_bytes(uint64_t v, char *buf, size_t n) {
  gpb_size_format(v, buf, n);
  return buf;
}

const char *vfmt_tail(const char *s, size_t max, char *buf, size_t n) {
  size_t len = strlen(s);
  if (max >= n) max = n - 1;
  if (len <= max) {
    snprintf(buf, n, "%s", s);
  } else if (max < 3) {
    snprintf(buf, n, "%.*s", (int)max, "...");
  } else {
    /* The end of a path is the file name: keep it, cut the directories. */
    snprintf(buf, n, "...%s", s + len - (max - 3));
  }
  return buf;
}

int vframe_auto_scale(int w, int h, int dpr) {
  if (dpr < 1) dpr = 1;
  return dpr * (w / dpr >= 1200 && h / dpr >= 700 ? 2 : 1);
}

/* A buddy-tree row's label: order and block size ("21 512 MiB": a power
 * of two needs no ".0"). */
static void frame_tree_label(const vapp_t *a, uint32_t k, char *buf, size_t n) {
  char b[32];
  vfmt_bytes(a->map.min_block << k, b, sizeof b);
  char *dot = strstr(b, ".0 ");
  if (dot) memmove(dot, dot + 2, strlen(dot + 2) + 1);
  snprintf(buf, n, "%u %s", k, b);
}

/* Characters of the map's left margin: the widest ruler offset and tree
 * label, so the map keeps its width when the layout changes. */
static int frame_gutter_chars(const vapp_t *a) {
  const vmap_t *m = &a->map;
  char b[48];
  snprintf(b, sizeof b, "0x%" PRIx64, m->managed ? m->managed - 1 : 0);
  int n = (int)strlen(b);
  for (uint32_t k = 0; k < m->norders; k++) {
    frame_tree_label(a, k, b, sizeof b);
    if ((int)strlen(b) > n) n = (int)strlen(b);
  }
  return n + 1;
}

void vframe_layout(vapp_t *a, int w, int h) {
  int s = a->scale < 1 ? 1 : a->scale;
  int line = (GPBT_FONT_H + 3) * s;
  /* The timeline: memory over time where there is room for it, else a
   * replay's thin progress bar (vtl_draw draws either). */
  int tlh = h >= FRAME_TALL_H * s ? FRAME_TL_H * s
            : a->kind == VSRC_REPLAY ? 7 * s : 0;
  int bottom = line + 2 * s + (tlh ? tlh + 3 * s : 0);
  int pw = w >= 560 * s ? FRAME_PANEL_W * s : 0;
  /* The ruler's margin, unless the window is too narrow for it. */
  int gut = frame_gutter_chars(a) * GPBT_FONT_W * s;
  if (w - pw < 4 * gut) gut = 0;
  /* The tree's addresses run across: a line of them under its rows. */
  int axis = a->map.layout == VLAYOUT_TREE && gut ? (GPBT_FONT_H + 1) * s : 0;
  a->map_x = gut;
  a->map_y = 0;
  a->map_w = w - pw - gut;
  a->map_h = h - bottom - axis;
  if (a->map_w < 1) a->map_w = 1;
  if (a->map_h < 1) a->map_h = 1;
  vtl_layout(a, 4 * s, a->map_h + axis + 2 * s, w - 8 * s, tlh);
  /* One cell per (scaled) pixel, coarser only on huge screens so the sums
   * stay a few tens of MB. */
  int cp = a->cell_scale > 0 ? a->cell_scale : s;
  while ((uint64_t)(a->map_w / cp) * (uint64_t)(a->map_h / cp) > FRAME_MAX_CELLS)
    cp *= 2;
  a->cell_px = cp;
  int cols = a->map_w / cp, rows;
  if (a->map.layout == VLAYOUT_TREE) {
    rows = (int)a->map.norders;
    a->row_px = a->map_h / rows;
    if (a->row_px < 1) a->row_px = 1;
  } else {
    rows = a->map_h / cp;
    a->row_px = cp;
  }
  if (cols != a->map.cols || rows != a->map.rows) {
    if (vmap_resize(&a->map, cols, rows))
      vapp_message(a, "out of memory for the block map");
  }
}

uint64_t vframe_offset_at(const vapp_t *a, int x, int y, uint64_t *cell) {
  x -= a->map_x;
  y -= a->map_y;
  if (x < 0 || y < 0 || x >= a->map_w || y >= a->map_h || !a->cell_px)
    return UINT64_MAX;
  int cx = x / a->cell_px;
  int cy = a->map.layout == VLAYOUT_TREE ? 0 : y / a->cell_px;
  uint64_t off = vmap_offset_at(&a->map, cx, cy);
  if (cell)
    *cell = a->map.layout == VLAYOUT_TREE
                ? (uint64_t)cx
                : (uint64_t)cy * (uint64_t)a->map.cols + (uint64_t)cx;
  return off;
}

/* ------------------------------------------------------------------ map */

void vframe_map(const vapp_t *a, gpbt_fb_t *fb) {
  const vmap_t *m = &a->map;
  int cp = a->cell_px;
  if (!m->ncells) {
    gpbt_fb_fill(fb, a->map_x, a->map_y, a->map_w, a->map_h, VC_BG);
    return;
  }
  /* The grid's cells cover all but a sliver of the map; fill only that. */
  int gw = m->cols * cp, gh = m->layout == VLAYOUT_TREE
                                 ? (int)m->norders * a->row_px
                                 : m->rows * cp;
  gpbt_fb_fill(fb, a->map_x + gw, a->map_y, a->map_w - gw, a->map_h, VC_BG);
  gpbt_fb_fill(fb, a->map_x, a->map_y + gh, gw, a->map_h - gh, VC_BG);
  if (m->layout == VLAYOUT_TREE) {
    int rp = a->row_px, gap = rp >= 4 ? 1 : 0;
    for (uint32_t k = 0; k < m->norders; k++) {
      int y = a->map_y + (int)(m->norders - 1 - k) * rp;
      const uint32_t *row = m->rgb + (size_t)k * (size_t)m->cols;
      for (int c = 0; c < m->cols; c++)
        gpbt_fb_fill(fb, a->map_x + c * cp, y, cp, rp - gap, row[c]);
      if (gap) gpbt_fb_fill(fb, a->map_x, y + rp - gap, gw, gap, VC_BG);
    }
    return;
  }
  for (int r = 0; r < m->rows; r++) {
    const uint32_t *src = m->rgb + (size_t)r * (size_t)m->cols;
    for (int dy = 0; dy < cp; dy++) {
      int y = a->map_y + r * cp + dy;
      if (y >= fb->h) return;
      uint32_t *dst = fb->px + (size_t)y * (size_t)fb->w + a->map_x;
      if (cp == 1) {
        memcpy(dst, src, (size_t)m->cols * sizeof *dst);
      } else {
        for (int c = 0; c < m->cols; c++)
          for (int dx = 0; dx < cp; dx++) dst[c * cp + dx] = src[c];
      }
    }
  }
}

/* The address ruler in the map's left margin: round offsets, each with a
 * tick at the row that holds it; in the tree, each row's order and block
 * size, and round offsets under the rows. */
static void frame_ruler(const vapp_t *a, gpbt_fb_t *fb) {
  const vmap_t *m = &a->map;
  int s = a->scale < 1 ? 1 : a->scale, lh = (GPBT_FONT_H + 1) * s;
  if (!a->map_x || !m->ncells) return;
  gpbt_fb_fill(fb, 0, a->map_y, a->map_x, a->map_h, VC_PANEL);
  char b[48];
  if (m->layout == VLAYOUT_TREE) {
    int rp = a->row_px, every = 1;
    while (every * rp < GPBT_FONT_H * s && every < (int)m->norders) every *= 2;
    for (uint32_t k = 0; k < m->norders; k += (uint32_t)every) {
      int y = a->map_y + (int)(m->norders - 1 - k) * rp;
      frame_tree_label(a, k, b, sizeof b);
      gpbt_font_draw(fb, 2 * s, y + (rp - GPBT_FONT_H * s) / 2 - s, s,
                     VC_DIM, b);
    }
    /* Round offsets across, under the rows, a label's width apart. */
    int y = a->map_y + a->map_h, cp = a->cell_px;
    gpbt_fb_fill(fb, 0, y, a->map_x + a->map_w, lh, VC_PANEL);
    snprintf(b, sizeof b, "0x%" PRIx64, m->end);
    uint64_t cols_apart = (uint64_t)((gpbt_font_width(s, b) + 6 * s) / cp + 1);
    uint64_t step = 1;
    while (step < m->bpc * cols_apart && step < (1ull << 62)) step <<= 1;
    for (uint64_t off = (m->start + step - 1) / step * step; off < m->end;
         off += step) {
      int x = a->map_x + (int)((off - m->start) / m->bpc) * cp;
      snprintf(b, sizeof b, "0x%" PRIx64, off);
      if (x + 2 * s + gpbt_font_width(s, b) > a->map_x + a->map_w) break;
      gpbt_fb_fill(fb, x, y, s, 2 * s, VC_DIM);
      gpbt_font_draw(fb, x + 2 * s, y, s, VC_DIM, b);
      if (off + step < off) break;
    }
    return;
  }
  /* Round offsets (a power of two apart, two lines at least), each at
   * the row that holds it: at the fit zoom rows start anywhere. */
  int cp = a->cell_px;
  uint64_t row_bytes = (uint64_t)m->cols * m->bpc;
  uint64_t rows_apart = (uint64_t)((2 * lh + cp - 1) / cp);
  uint64_t step = 1;
  while (step < row_bytes * rows_apart && step < (1ull << 62)) step <<= 1;
  for (uint64_t off = (m->start + step - 1) / step * step; off < m->end;
       off += step) {
    int y = a->map_y + (int)((off - m->start) / row_bytes) * cp;
    if (y + GPBT_FONT_H * s > a->map_y + a->map_h) break;
    snprintf(b, sizeof b, "0x%" PRIx64, off);
    int x = a->map_x - gpbt_font_width(s, b) - 3 * s;
    gpbt_font_draw(fb, x > 0 ? x : 0, y - s < a->map_y ? a->map_y : y - s, s,
                   VC_DIM, b);
    gpbt_fb_fill(fb, a->map_x - 2 * s, y, 2 * s, s, VC_DIM);
    if (off + step < off) break;
  }
}

/* Mixes col into the cells of [off, off + len) at the tree row `order`. */
static void frame_mark(const vapp_t *a, gpbt_fb_t *fb, uint64_t off,
                       uint64_t len, uint32_t order, uint32_t col, double t) {
  const vmap_t *m = &a->map;
  if (!m->ncells || off + len <= m->start || off >= m->end) return;
  if (order >= m->norders) order = m->norders - 1;
  uint64_t lo = off > m->start ? off : m->start;
  uint64_t hi = off + len < m->end ? off + len : m->end;
  uint64_t c0 = (lo - m->start) / m->bpc, c1 = (hi - 1 - m->start) / m->bpc;
  int cp = a->cell_px;
  if (c1 - c0 > 400000) return;
  for (uint64_t c = c0; c <= c1; c++) {
    int x, y, h;
    if (m->layout == VLAYOUT_TREE) {
      x = a->map_x + (int)c * cp;
      y = a->map_y + (int)(m->norders - 1 - order) * a->row_px;
      h = a->row_px;
    } else {
      x = a->map_x + (int)(c % (uint64_t)m->cols) * cp;
      y = a->map_y + (int)(c / (uint64_t)m->cols) * cp;
      h = cp;
    }
    for (int yy = y; yy < y + h && yy < fb->h; yy++)
      for (int xx = x; xx < x + cp && xx < fb->w; xx++) {
        uint32_t *p = fb->px + (size_t)yy * (size_t)fb->w + xx;
        *p = vc_mix(*p, col, t);
      }
  }
}

/* Brightens the cells of one block (hovered or found). */
static void frame_mark_block(vapp_t *a, gpbt_fb_t *fb,
                             const gpb_block_info_t *b) {
  frame_mark(a, fb, b->offset, b->size, b->order, VC_HILITE, 0.45);
}

void vframe_mark(const vapp_t *a, gpbt_fb_t *fb, uint64_t off, uint64_t len,
                 uint32_t c) {
  uint32_t k = 0;
  while (k + 1 < a->map.norders && (a->map.min_block << (k + 1)) <= len) k++;
  frame_mark(a, fb, off, len, k, c, 0.5);
}

/* The state of a block's buddy, for the hover box. */
static const char *frame_buddy(const vapp_t *a, const gpb_block_info_t *b) {
  uint32_t k = b->order, sh = a->map.min_shift;
  uint64_t units = a->map.managed >> sh, i = (b->offset >> sh) >> k;
  if (k + 1 >= a->map.norders || (((i >> 1) + 1) << (k + 1)) > units)
    return "none (root)";
  gpb_block_info_t bb;
  if (gpb_model_lookup(a->model, ((i ^ 1) << k) << sh, &bb)) return "?";
  if (bb.order == k) return bb.used ? "used" : "free";
  return bb.order < k ? "split" : "?";
}

/* --------------------------------------------------------------- panels */

typedef struct frame_pen {
  gpbt_fb_t *fb;
  int x, y, s, w;
} frame_pen_t;

static void pen_line(frame_pen_t *p, uint32_t c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void pen_line(frame_pen_t *p, uint32_t c, const char *fmt, ...) {
  char buf[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  gpbt_font_draw(p->fb, p->x, p->y, p->s, c, buf);
  p->y += (GPBT_FONT_H + 1) * p->s;
}

static void frame_stats(vapp_t *a, frame_pen_t *p) {
  const gpb_stats_t *st = &a->stats;
  char b1[32], b2[32];
  double pct = st->managed_bytes ? 100.0 * (double)st->block_bytes /
                                       (double)st->managed_bytes : 0;
  pen_line(p, VC_TEXT, "%s", a->kind == VSRC_LIVE ? "LIVE" : "REPLAY");
  char t[sizeof a->title];
  pen_line(p, VC_DIM, "%s",
           vfmt_tail(a->title, (size_t)(p->w / (GPBT_FONT_W * p->s)), t,
                     sizeof t));
  pen_line(p, VC_DIM, "POOL %s  MIN %s", vfmt_bytes(st->managed_bytes, b1, 32),
           vfmt_bytes(st->min_block, b2, 32));
  p->y += p->s * 3;
  pen_line(p, VC_USED, "USED      %s (%.1f%%)",
           vfmt_bytes(st->block_bytes, b1, 32), pct);
  pen_line(p, VC_TEXT, "REQUESTED %s", vfmt_bytes(st->requested_bytes, b1, 32));
  pen_line(p, VC_FREE == 0 ? VC_TEXT : 0xFF7FBF80u, "FREE      %s",
           vfmt_bytes(st->free_bytes, b1, 32));
  pen_line(p, VC_TEXT, "LARGEST   %s", vfmt_bytes(st->largest_free, b1, 32));
  pen_line(p, VC_WASTE, "WASTE     %s (%.1f%%)",
           vfmt_bytes(st->internal_frag_bytes, b1, 32),
           st->block_bytes ? 100.0 * (double)st->internal_frag_bytes /
                                 (double)st->block_bytes : 0);
  pen_line(p, VC_TEXT, "EXT FRAG  %.3f", st->external_frag);
  /* For the largest request seen, not for one as large as all free
   * memory: that read 1.000 whenever the largest free block held less
   * than half of the free bytes, which was most of the time. */
  uint64_t for_bytes;
  double unusable = vapp_unusable(a, &for_bytes);
  if (unusable < 0)
    pen_line(p, VC_DIM, "UNUSABLE  - (%s)",
             st->free_bytes ? "no request yet" : "nothing free");
  else
    pen_line(p, unusable >= 1.0 ? VC_ALERT : VC_TEXT, "UNUSABLE  %.3f FOR %s",
             unusable, vfmt_bytes(for_bytes, b1, 32));
  pen_line(p, VC_DIM, "LIVE %" PRIu64 "  FAIL %" PRIu64, st->live_allocs,
           st->failures);
  pen_line(p, VC_DIM, "SEQ %" PRIu64, st->seq);
}

/* A swatch and its label; returns the x after them. */
static int frame_swatch(frame_pen_t *p, int x, uint32_t c, const char *t) {
  int s = p->s;
  gpbt_fb_fill(p->fb, x, p->y + 2 * s, 6 * s, 6 * s, c);
  gpbt_fb_rect(p->fb, x, p->y + 2 * s, 6 * s, 6 * s, VC_GRID);
  return gpbt_font_draw(p->fb, x + 8 * s, p->y, s, VC_DIM, t) + 5 * s;
}

/* A ramp from t = 0 to 1 between two labels, over the pen's width. */
static void frame_ramp_bar(frame_pen_t *p, const char *lo, const char *hi,
                           uint32_t (*color)(double)) {
  int s = p->s;
  int x0 = gpbt_font_draw(p->fb, p->x, p->y, s, VC_DIM, lo) + 3 * s;
  int x1 = p->x + p->w - gpbt_font_width(s, hi) - 3 * s;
  for (int x = x0; x < x1; x++)
    gpbt_fb_fill(p->fb, x, p->y + 2 * s, 1, 6 * s,
                 color(x1 - 1 > x0 ? (double)(x - x0) / (x1 - 1 - x0) : 0));
  gpbt_font_draw(p->fb, x1 + 3 * s, p->y, s, VC_DIM, hi);
}

static uint32_t frame_age_color(double t) { return vc_ramp(1.0 - t); }

/* What the colors of the map mean, for the mode drawn. */
static void frame_legend(vapp_t *a, frame_pen_t *p) {
  const vmap_t *m = &a->map;
  int tree = m->layout == VLAYOUT_TREE, x = p->x;
  char b1[56], b2[32];
  switch (tree ? vmap_tree_color(m->color) : m->color) {
  case VCOLOR_ORDER:
    pen_line(p, VC_DIM, "COLOR: BLOCK SIZE (ORDER)%s",
             tree ? "" : ", BYTE-WEIGHTED");
    frame_ramp_bar(p, vfmt_bytes(m->min_block, b1, 32),
                   vfmt_bytes(m->min_block << (m->norders ? m->norders - 1 : 0),
                              b2, 32),
                   vc_ramp);
    p->y += (GPBT_FONT_H + 1) * p->s;
    x = frame_swatch(p, x, vc_free_of(vc_ramp(0.5)), "FREE: GREYED");
    if (tree) frame_swatch(p, x, VC_SPLIT, "SPLIT");
    break;
  case VCOLOR_TAG: {
    pen_line(p, VC_DIM, "COLOR: TAG OF THE ALLOCATION");
    int shown = 0;
    for (uint32_t t = 0; t < GPB_MAX_TAGS && x < p->x + p->w - 40 * p->s; t++) {
      if (!a->stats.tag_bytes[t]) continue;
      snprintf(b1, sizeof b1, "%u", t);
      x = frame_swatch(p, x, vc_tag(t), b1);
      shown++;
    }
    frame_swatch(p, x, VC_FREE, shown ? "FREE" : "FREE (NO TAGS LIVE)");
    break;
  }
  case VCOLOR_SITE: {
    pen_line(p, VC_DIM, "COLOR: CALL SITE, TOP BY LIVE BYTES");
    gpbt_site_row_t r[4];
    size_t n = vsite_top(a, r, 4);
    for (size_t i = 0; i < n; i++) {
      char sh[40];
      vsite_short(vapp_site_text(a, r[i].site), sh, sizeof sh);
      snprintf(b1, sizeof b1, "#%u %s", r[i].site, sh);
      if (x > p->x && x + gpbt_font_width(p->s, b1) + 14 * p->s > p->x + p->w) {
        p->y += (GPBT_FONT_H + 1) * p->s;
        x = p->x;
      }
      x = frame_swatch(p, x, vc_site(r[i].site), b1);
    }
    frame_swatch(p, x, VC_FREE, n ? "FREE" : "FREE (NOTHING LIVE)");
    break;
  }
  case VCOLOR_AGE: {
    pen_line(p, VC_DIM, "COLOR: AGE OF THE ALLOCATION (LOG)");
    double span = m->now_ns > m->t0_ns ? (double)(m->now_ns - m->t0_ns) / 1e9 : 0;
    snprintf(b2, sizeof b2, "%.3g S OLD", span);
    frame_ramp_bar(p, "NEW", b2, frame_age_color);
    p->y += (GPBT_FONT_H + 1) * p->s;
    frame_swatch(p, x, VC_FREE, "FREE");
    break;
  }
  default:
    x = frame_swatch(p, x, VC_FREE, "FREE");
    x = frame_swatch(p, x, VC_USED, "REQUESTED");
    x = frame_swatch(p, x, VC_WASTE, "WASTE");
    if (tree) frame_swatch(p, x, VC_SPLIT, "SPLIT");
    break;
  }
  p->y += (GPBT_FONT_H + 1) * p->s;
}

/* The orders the bars show: 0 up to the largest with a free block (the
 * empty ones above it are said in one line). */
static uint32_t frame_orders_shown(const gpb_stats_t *st) {
  uint32_t hi = 0;
  for (uint32_t k = 0; k < st->num_orders; k++)
    if (st->free_blocks[k]) hi = k;
  return st->num_orders ? hi + 1 : 0;
}

/* The height the bars take at text scale s: a header, a line of text
 * per order shown, and the "none free" line. */
static int frame_buddyinfo_h(const gpb_stats_t *st, int s) {
  uint32_t n = frame_orders_shown(st);
  int lh = (GPBT_FONT_H + 1) * s;
  return lh * (int)(n + 1 + (n < st->num_orders)) + 4 * s;
}

/* Free blocks per order, one labelled bar per line: the block size on
 * the left, the count on the right, log-scaled bars between. Text at the
 * panel's scale where it fits by max_y, else at scale 1; the bars were
 * 3-pixel slivers at 1280x800 and their labels collided at 900x600. */
static void frame_buddyinfo(vapp_t *a, frame_pen_t *p, int max_y) {
  const gpb_stats_t *st = &a->stats;
  uint32_t n = frame_orders_shown(st);
  if (!n) return;
  int s = p->s;
  if (s > 1 && p->y + frame_buddyinfo_h(st, s) > max_y) s = 1;
  if (p->y + frame_buddyinfo_h(st, s) > max_y) return;
  int lh = (GPBT_FONT_H + 1) * s;
  gpbt_font_draw(p->fb, p->x, p->y, s, VC_TEXT, "FREE BLOCKS PER ORDER");
  p->y += lh;
  uint64_t mx = 1;
  int cw = 1;
  for (uint32_t k = 0; k < n; k++) {
    char num[32];
    if (st->free_blocks[k] > mx) mx = st->free_blocks[k];
    int w = snprintf(num, sizeof num, "%" PRIu64, st->free_blocks[k]);
    if (w > cw) cw = w;
  }
  int fw = GPBT_FONT_W * s;
  int bx = p->x + 10 * fw, bw = p->w - 10 * fw - (cw + 1) * fw;
  for (uint32_t k = 0; k < n; k++) {
    int y = p->y + (int)(n - 1 - k) * lh;
    char b1[32], num[32];
    uint64_t c = st->free_blocks[k];
    gpbt_font_draw(p->fb, p->x, y, s, VC_DIM, vfmt_bytes(st->min_block << k, b1, 32));
    snprintf(num, sizeof num, "%" PRIu64, c);
    gpbt_font_draw(p->fb, p->x + p->w - gpbt_font_width(s, num), y, s,
                   VC_DIM, num);
    if (bw < 4) continue;
    int len = c ? (int)((double)bw * log1p((double)c) / log1p((double)mx)) : 0;
    if (c && len < 1) len = 1;
    gpbt_fb_fill(p->fb, bx, y + s, bw, lh - 3 * s, VC_GRID);
    gpbt_fb_fill(p->fb, bx, y + s, len, lh - 3 * s,
                 vc_ramp(st->num_orders > 1 ? (double)k / (st->num_orders - 1) : 0));
  }
  p->y += (int)n * lh;
  if (n < st->num_orders) {
    char b1[32];
    char t[64];
    snprintf(t, sizeof t, "NONE FREE FROM %s UP",
             vfmt_bytes(st->min_block << n, b1, 32));
    gpbt_font_draw(p->fb, p->x, p->y, s, VC_DIM, t);
    p->y += lh;
  }
  p->y += 4 * s;
}

/* The side panel grouped by call site (S): the sites holding the most
 * live bytes, each on one line with its frames cut to fit. */
static void frame_sites(vapp_t *a, frame_pen_t *p, int max_y) {
  int s = p->s, lh = (GPBT_FONT_H + 1) * s;
  pen_line(p, VC_TEXT, "LIVE BYTES BY CALL SITE");
  gpbt_site_row_t r[16];
  int rows = (max_y - p->y) / (2 * lh);
  size_t n = vsite_top(a, r, rows < 16 ? (size_t)(rows > 0 ? rows : 0) : 16);
  if (!n) pen_line(p, VC_DIM, "NOTHING LIVE");
  int chars = (p->w - 8 * s) / (GPBT_FONT_W * s);
  for (size_t i = 0; i < n; i++) {
    char b1[32], line[160], sh[96];
    const char *t = vapp_site_text(a, r[i].site);
    /* Its bytes, then its name (the first frame in the user's code) on
     * a line of its own, keeping its end when it must be cut. */
    snprintf(line, sizeof line, "#%u  %s", r[i].site,
             vfmt_bytes(r[i].bytes, b1, 32));
    gpbt_fb_fill(p->fb, p->x, p->y + 2 * s, 5 * s, 5 * s, vc_site(r[i].site));
    gpbt_font_draw(p->fb, p->x + 8 * s, p->y, s, VC_TEXT, line);
    p->y += lh;
    const char *name = t ? vsite_short(t, sh, sizeof sh)
                         : r[i].site ? "(NO FRAMES)" : "(UNKNOWN)";
    if (chars > 0) vfmt_tail(name, (size_t)chars, line, sizeof line);
    gpbt_font_draw(p->fb, p->x + 8 * s, p->y, s, VC_DIM, line);
    p->y += lh;
  }
}

static void frame_chart(frame_pen_t *p, const char *label, const double *v,
                        const vseries_t *se, double vmax, uint32_t color,
                        const char *now_text) {
  int s = p->s, h = 34 * s;
  gpbt_font_draw(p->fb, p->x, p->y, s, VC_DIM, label);
  gpbt_font_draw(p->fb, p->x + p->w - gpbt_font_width(s, now_text), p->y, s,
                 color, now_text);
  p->y += GPBT_FONT_H * s;
  gpbt_fb_fill(p->fb, p->x, p->y, p->w, h, VC_GRID);
  if (se->n > 0 && vmax > 0) {
    for (int x = 0; x < p->w; x++) {
      int i = se->n == 1 ? 0 : (int)((int64_t)x * (se->n - 1) / (p->w - 1));
      double f = v[i] / vmax;
      if (f > 1) f = 1;
      if (f < 0) f = 0;
      int bh = (int)(f * (h - 2) + 0.5);
      gpbt_fb_fill(p->fb, p->x + x, p->y + h - 1 - bh, 1, bh,
                   vc_scale(color, 0.7));
      gpbt_fb_put(p->fb, p->x + x, p->y + h - 1 - bh, color);
    }
  }
  p->y += h + 4 * s;
}

/* The last n of the charts: fragmentation first, then the largest
 * free block, then used bytes (which the timeline shows too). */
static void frame_series(vapp_t *a, frame_pen_t *p, int n) {
  const vseries_t *se = &a->series;
  char b1[32];
  double m = (double)a->stats.managed_bytes;
  if (n >= 3)
    frame_chart(p, "USED", se->used, se, m, VC_USED,
                vfmt_bytes(a->stats.block_bytes, b1, 32));
  if (n >= 2)
    frame_chart(p, "LARGEST FREE", se->largest, se, m, 0xFF7FBF80u,
                vfmt_bytes(a->stats.largest_free, b1, 32));
  char fr[32];
  snprintf(fr, sizeof fr, "%.3f", a->stats.external_frag);
  frame_chart(p, "EXT FRAGMENTATION", se->frag, se, 1.0, VC_WASTE, fr);
}

/* ------------------------------------------------------- bottom, overlays */

static const char *const frame_color_names[] = {"STATE", "ORDER", "TAG", "AGE",
                                                "SITE"};

/* The status line with a message: after the line where both fit, else
 * the message alone, on two lines (the one above cleared) when it is
 * longer than the window is wide. Messages ran off the right edge. */
void vframe_status_msg(gpbt_fb_t *fb, int s, int y, uint32_t col,
                      const char *line, const char *msg) {
  int fit = (fb->w - 8 * s) / (GPBT_FONT_W * s);
  int nl = (int)strlen(line), nm = (int)strlen(msg);
  if (fit < 8) return;
  if (nl + 4 + nm <= fit) {
    int x = gpbt_font_draw(fb, 4 * s, y, s, col, line);
    gpbt_font_draw(fb, x + 4 * GPBT_FONT_W * s, y, s, VC_WASTE, msg);
    return;
  }
  char buf[512];
  if (nm <= fit) {
    gpbt_font_draw(fb, 4 * s, y, s, VC_WASTE, msg);
    return;
  }
  /* Break at the last space that fits the first line. */
  int cut = fit;
  while (cut > fit / 2 && msg[cut] != ' ') cut--;
  if (msg[cut] != ' ') cut = fit;
  snprintf(buf, sizeof buf, "%.*s", cut, msg);
  int lh = (GPBT_FONT_H + 2) * s;
  gpbt_fb_fill(fb, 0, y - lh - s, fb->w, lh, VC_PANEL);
  gpbt_font_draw(fb, 4 * s, y - lh, s, VC_WASTE, buf);
  const char *rest = msg + cut + (msg[cut] == ' ');
  snprintf(buf, sizeof buf, "%.*s", fit, rest);
  gpbt_font_draw(fb, 4 * s, y, s, VC_WASTE, buf);
}

static void frame_bottom(vapp_t *a, gpbt_fb_t *fb) {
  int s = a->scale;
  char line[256], b1[32];
  vtl_draw(a, fb);
  int y = fb->h - (GPBT_FONT_H + 2) * s;
  const char *state = a->failed         ? "ERROR"
                      : a->disconnected ? "DISCONNECTED"
                      : a->paused       ? "PAUSED"
                      : (a->kind == VSRC_REPLAY && vreplay_at_end(a->rp)) ? "END"
                      : a->kind == VSRC_LIVE ? "LIVE" : "PLAYING";
  char speed[48] = "";
  if (a->kind == VSRC_REPLAY) {
    if (a->speed > 0)
      snprintf(speed, sizeof speed, " %.0f OPS/S", a->speed);
    else
      snprintf(speed, sizeof speed, " MAX SPEED");
  }
  char pos[64];
  if (a->kind == VSRC_REPLAY)
    snprintf(pos, sizeof pos, "OP %" PRIu64 "/%" PRIu64, vapp_pos(a), a->total_ops);
  else
    snprintf(pos, sizeof pos, "EVENT %" PRIu64, vapp_pos(a));
  /* The file (or pool) name first: the panel that heads with it is not
   * drawn in a narrow window. */
  const char *name = strrchr(a->title, '/');
  name = name && name[1] ? name + 1 : a->title;
  /* As much as fits, the least needed left out first: the keys hint,
   * the view's mode, the cell size, the speed (a half of --compare, a
   * narrow window). */
  int fit = (fb->w - 8 * s) / (GPBT_FONT_W * s);
  char cell[48], mode[32];
  snprintf(cell, sizeof cell, "  CELL %s", vfmt_bytes(a->map.bpc, b1, 32));
  snprintf(mode, sizeof mode, "  %s %s",
           a->map.layout == VLAYOUT_TREE ? "TREE" : "MAP",
           frame_color_names[a->map.layout == VLAYOUT_TREE
                                 ? vmap_tree_color(a->map.color)
                                 : a->map.color]);
  const char *keys = "  H: KEYS";
  for (int drop = 0; drop <= 4; drop++) {
    int n = snprintf(line, sizeof line, "%.60s%s%s%s  %s%s%s%s", name,
                     *name ? "  " : "", state, drop >= 4 ? "" : speed, pos,
                     drop >= 3 ? "" : cell, drop >= 2 ? "" : mode,
                     drop >= 1 ? "" : keys);
    if (n >= 0 && n <= fit) break; /* a cut line is longer than any fit */
  }
  uint32_t col = a->failed || a->disconnected ? VC_ALERT : VC_TEXT;
  if (a->searching) {
    snprintf(line, sizeof line, "FIND ADDRESS OR OFFSET: %s_", a->search);
    col = VC_WASTE;
  } else if (a->msg[0] && gpb_now_ns() < a->msg_until_ns) {
    vframe_status_msg(fb, s, y, col, line, a->msg);
    return;
  }
  gpbt_font_draw(fb, 4 * s, y, s, col, line);
}

static void frame_box(gpbt_fb_t *fb, int x, int y, int w, int h) {
  gpbt_fb_fill(fb, x, y, w, h, 0xFF0B0E13u);
  gpbt_fb_rect(fb, x, y, w, h, VC_DIM);
}

/* The box for block b, with byte `at` of it under the mouse (or found). */
static void frame_hover(vapp_t *a, gpbt_fb_t *fb, const gpb_block_info_t *b,
                        uint64_t at, int mx, int my) {
  int s = a->scale, lh = (GPBT_FONT_H + 1) * s;
  char l[64][80], b1[32], b2[32];
  int n = 0;
  snprintf(l[n++], 80, "OFFSET 0x%" PRIx64 " (%" PRIu64 ")", b->offset, b->offset);
  if (a->info.base)
    snprintf(l[n++], 80, "ADDR   0x%" PRIxPTR,
             (uintptr_t)a->info.base + (uintptr_t)b->offset);
  snprintf(l[n++], 80, "SIZE   %s  ORDER %u", vfmt_bytes(b->size, b1, 32), b->order);
  snprintf(l[n++], 80, "STATE  %s", b->used ? "USED" : "FREE");
  if (b->used) {
    snprintf(l[n++], 80, "REQ    %s OF %s", vfmt_bytes(b->requested, b1, 32),
             vfmt_bytes(b->alloc_size, b2, 32));
    snprintf(l[n++], 80, "WASTE  %s",
             vfmt_bytes(b->alloc_size > b->requested ? b->alloc_size - b->requested : 0,
                        b1, 32));
    uint64_t now = a->map.now_ns;
    double age = now > b->time_ns && b->time_ns ? (double)(now - b->time_ns) / 1e9 : 0;
    snprintf(l[n++], 80, "TAG    %u  AGE %.3f S", b->tag, age);
    /* A replay's block is the traced program's allocation: its id there
     * (the address, for PyTorch and RMM), and where in it the byte under
     * the mouse is, which / finds again. */
    uint64_t id;
    if (a->kind == VSRC_REPLAY && vreplay_trace_id(a->rp, b->alloc_offset, &id) == 0) {
      if (at > b->alloc_offset && at < b->alloc_offset + b->alloc_size)
        snprintf(l[n++], 80, "TRACE  ID 0x%" PRIx64 " +0x%" PRIx64, id,
                 at - b->alloc_offset);
      else
        snprintf(l[n++], 80, "TRACE  ID 0x%" PRIx64, id);
    }
  }
  snprintf(l[n++], 80, "BUDDY  %s", frame_buddy(a, b));
  /* Why it is there: its call site's whole stack, the user's frames
   * first, as many rows as the window is tall (j k scroll the rest). */
  if (b->used) {
    if (b->site != a->hover_site) a->hover_site = b->site, a->hover_skip = 0;
    int rows = (fb->h - 6 * s) / lh - n;
    if (rows > 64 - n) rows = 64 - n;
    n += vsite_hover(a, b->site, l + n, rows, a->map_w / (GPBT_FONT_W * s) - 4,
                     a->hover_skip);
  }
  int w = 0;
  for (int i = 0; i < n; i++) {
    int lw = gpbt_font_width(s, l[i]);
    if (lw > w) w = lw;
  }
  w += 8 * s;
  int h = n * lh + 6 * s;
  int x = mx + 14 * s, y = my + 14 * s;
  if (x + w > fb->w) x = mx - w - 6 * s;
  if (y + h > fb->h) y = fb->h - h;
  if (x < 0) x = 0;
  if (y < 0) y = 0;
  frame_box(fb, x, y, w, h);
  for (int i = 0; i < n; i++)
    gpbt_font_draw(fb, x + 4 * s, y + 3 * s + i * lh, s, VC_TEXT, l[i]);
}

void vframe_help(gpbt_fb_t *fb, int s) {
  int lh = (GPBT_FONT_H + 1) * s;
  int lines = 1, w = 0, cur = 0;
  for (const char *p = vinput_keys_help; *p; p++) {
    if (*p == '\n') {
      lines++;
      if (cur > w) w = cur;
      cur = 0;
    } else {
      cur++;
    }
  }
  w = (w > cur ? w : cur) * GPBT_FONT_W * s + 12 * s;
  int h = lines * lh + 10 * s;
  int x = (fb->w - w) / 2, y = (fb->h - h) / 2;
  frame_box(fb, x, y, w, h);
  char buf[128];
  const char *p = vinput_keys_help;
  for (int i = 0; *p; i++) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len >= sizeof buf) len = sizeof buf - 1;
    memcpy(buf, p, len);
    buf[len] = 0;
    gpbt_font_draw(fb, x + 6 * s, y + 5 * s + i * lh, s, VC_TEXT, buf);
    p += len + (e ? 1 : 0);
  }
}

/* The allocation bands in the map's place: bytes in its margin, the
 * timeline's ops (and zoom) across. */
static void frame_bands(vapp_t *a, gpbt_fb_t *fb) {
  int s = a->scale < 1 ? 1 : a->scale;
  uint64_t lo, hi;
  vtl_span(a, &lo, &hi);
  gpbt_fb_fill(fb, 0, 0, a->map_x, a->map_h, VC_PANEL);
  if (vbands_draw(&a->bands, fb, a->map_x, a->map_y, a->map_w, a->map_h, lo,
                  hi, gpb_now_ns()))
    vapp_message(a, "out of memory for the allocation bands");
  char t[64];
  for (int q = 0; q <= 2 && a->map_x > 0; q++) {
    vfmt_bytes((uint64_t)(a->bands.ymax * q / 2), t, sizeof t);
    int y = a->map_y + a->map_h - (int)((double)a->map_h * q / 2) -
            (q ? 0 : GPBT_FONT_H * s);
    gpbt_font_draw(fb, a->map_x - gpbt_font_width(s, t) - 2 * s, y, s,
                   VC_DIM, t);
  }
  snprintf(t, sizeof t, "%zu ALLOCATIONS, ONE BAND EACH (A: BLOCK MAP)%s",
           a->bands.n, a->bands.over ? " - NO MORE RECORDED" : "");
  gpbt_font_draw(fb, a->map_x + 4 * s, a->map_y + 2 * s, s, VC_TEXT, t);
}

/* The hover over a band: the allocation, its bytes, its ops, its site. */
static void frame_bands_hover(vapp_t *a, gpbt_fb_t *fb) {
  const vband_t *r = vbands_at(&a->bands, a->mouse_x - a->map_x,
                               a->mouse_y - a->map_y);
  if (!r) return;
  int s = a->scale < 1 ? 1 : a->scale, lh = (GPBT_FONT_H + 1) * s, n = 0;
  char l[5][96], b1[32], sh[64];
  snprintf(l[n++], 96, "ALLOCATION %zu OF %zu", (size_t)(r - a->bands.v) + 1,
           a->bands.n);
  snprintf(l[n++], 96, "SIZE   %s  TAG %u", vfmt_bytes(r->size, b1, 32), r->tag);
  if (r->t1 == UINT64_MAX)
    snprintf(l[n++], 96, "%s %" PRIu64 " TO NOW", a->kind == VSRC_REPLAY ?
             "OP" : "EVENT", r->t0);
  else
    snprintf(l[n++], 96, "%s %" PRIu64 " TO %" PRIu64, a->kind == VSRC_REPLAY ?
             "OPS" : "EVENTS", r->t0, r->t1);
  if (r->site)
    snprintf(l[n++], 96, "SITE   %u %s", r->site,
             vsite_short(vapp_site_text(a, r->site), sh, sizeof sh));
  int w = 0;
  for (int i = 0; i < n; i++)
    if (gpbt_font_width(s, l[i]) > w) w = gpbt_font_width(s, l[i]);
  w += 8 * s;
  int h = n * lh + 6 * s, x = a->mouse_x + 14 * s, y = a->mouse_y + 14 * s;
  if (x + w > fb->w) x = a->mouse_x - w - 6 * s;
  if (y + h > fb->h) y = fb->h - h;
  frame_box(fb, x < 0 ? 0 : x, y < 0 ? 0 : y, w, h);
  for (int i = 0; i < n; i++)
    gpbt_font_draw(fb, (x < 0 ? 0 : x) + 4 * s, (y < 0 ? 0 : y) + 3 * s + i * lh,
                   s, VC_TEXT, l[i]);
}

void vframe_draw(vapp_t *a, gpbt_fb_t *fb) {
  int s = a->scale < 1 ? 1 : a->scale;
  vframe_layout(a, fb->w, fb->h);
  vapp_sync_map(a);
  /* Background everywhere but the map, which vframe_map covers. */
  int right = a->map_x + a->map_w;
  gpbt_fb_fill(fb, right, 0, fb->w - right, fb->h, VC_PANEL);
  gpbt_fb_fill(fb, 0, a->map_h, right, fb->h - a->map_h, VC_PANEL);
  if (a->show_bands) {
    frame_bands(a, fb);
  } else {
    vframe_map(a, fb);
    frame_ruler(a, fb);
  }

  gpb_block_info_t hb;
  int hover = 0;
  uint64_t hoff = UINT64_MAX;
  if (a->mouse_in && !a->show_bands) {
    hoff = vframe_offset_at(a, a->mouse_x, a->mouse_y, NULL);
    if (hoff != UINT64_MAX && gpb_model_lookup(a->model, hoff, &hb) == 0) hover = 1;
  }
  gpb_block_info_t sb;
  if (a->have_sel && gpb_model_lookup(a->model, a->sel_off, &sb) == 0)
    frame_mark_block(a, fb, &sb);
  if (hover) frame_mark_block(a, fb, &hb);
  voom_draw(a, fb);

  int px = a->map_x + a->map_w;
  if (px < fb->w) {
    frame_pen_t p = {fb, px + 8 * s, 6 * s, s, fb->w - px - 14 * s};
    frame_stats(a, &p);
    p.y += 3 * s;
    frame_legend(a, &p);
    p.y += 3 * s;
    /* The charts at the bottom, as many as fit under the figures and
     * the bars per order (the bars come first: the charts are the
     * timeline's figures again, over time). */
    int ch = GPBT_FONT_H * s + 38 * s, nch = 3;
    int need = a->side_sites ? 6 * (GPBT_FONT_H + 1) * s
                             : frame_buddyinfo_h(&a->stats, 1);
    while (nch > 0 && a->map_h - nch * ch < p.y + need) nch--;
    int cy = a->map_h - nch * ch;
    if (a->side_sites)
      frame_sites(a, &p, cy - 4 * s);
    else
      frame_buddyinfo(a, &p, cy - 4 * s);
    if (nch) {
      p.y = cy;
      frame_series(a, &p, nch);
    }
  }
  frame_bottom(a, fb);

  if (a->disconnected || a->failed) {
    const char *t = a->disconnected && a->held
                        ? "DISCONNECTED - LAST STATE BEFORE TEARDOWN"
                    : a->disconnected ? "DISCONNECTED - LAST STATE SHOWN"
                                    : "STOPPED ON AN ERROR - LAST GOOD STATE SHOWN";
    int ts = 2 * s, w = gpbt_font_width(ts, t) + 16 * s;
    int x = a->map_x + (a->map_w - w) / 2, y = a->map_y + 10 * s;
    frame_box(fb, x, y, w, GPBT_FONT_H * ts + 8 * s);
    gpbt_font_draw(fb, x + 8 * s, y + 3 * s, ts, VC_ALERT, t);
  }
  if (hover) frame_hover(a, fb, &hb, hoff, a->mouse_x, a->mouse_y);
  if (a->show_bands && a->mouse_in) frame_bands_hover(a, fb);
  else if (a->have_sel && !a->mouse_in)
    frame_hover(a, fb, &sb, a->sel_off, a->map_x + a->map_w / 2,
                a->map_y + a->map_h / 3);
  if (a->show_help) vframe_help(fb, a->scale);
}
