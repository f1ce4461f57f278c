/* SPDX-License-Identifier: MIT */
/*
 * plot.c: line plots written as PNG, with no plotting library.
 *
 * A plot is drawn into a pixel buffer (tools/common/raster.h): axes, grid
 * lines at the ticks, one polyline per series (solid or dashed), optional
 * horizontal reference lines, a legend and text in the viewer's 5x7 font
 * (lower case is drawn as capitals). Lines are Bresenham lines two pixels
 * wide. The PNG writer the viewer uses (zlib) writes the file.
 */
#include "bench.h"
#include "raster.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const uint32_t bench_colors[8] = {0x1f77b4, 0xd62728, 0x2ca02c, 0xff7f0e,
                                  0x9467bd, 0x8c564b, 0xe377c2, 0x17becf};

/* --------------------------------------------------------------- canvas */

/* Colors here are 0xRRGGBB; the buffer wants opaque 0xAARRGGBB. */
#define PLOT_OPAQUE(rgb) (0xFF000000u | (rgb))

/* Bresenham; `dash` counts pixels along the line across calls so a dashed
 * polyline keeps its rhythm from one segment to the next. */
static void canvas_line(gpbt_fb_t *c, int x0, int y0, int x1, int y1,
                        uint32_t rgb, int width, int *dash) {
  int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
  int dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
  int err = dx + dy;
  for (int guard = 0; guard < 100000; guard++) {
    int on = !dash || (((*dash)++ / 6) % 2 == 0);
    if (on)
      for (int a = 0; a < width; a++)
        for (int b = 0; b < width; b++)
          gpbt_fb_put(c, x0 + a, y0 + b, PLOT_OPAQUE(rgb));
    if (x0 == x1 && y0 == y1) break;
    int e2 = 2 * err;
    if (e2 >= dy) {
      err += dy;
      x0 += sx;
    }
    if (e2 <= dx) {
      err += dx;
      y0 += sy;
    }
  }
}

/* Text whose glyphs' top row is y (the font's cell starts a row above). */
static void canvas_text(gpbt_fb_t *c, int x, int y, const char *s, int scale,
                        uint32_t rgb) {
  gpbt_font_draw(c, x, y - scale, scale, PLOT_OPAQUE(rgb), s);
}

/* ---------------------------------------------------------------- ticks */

/* A step of 1, 2 or 5 times a power of ten giving about `n` ticks. */
static double plot_nice_step(double range, int n) {
  if (!(range > 0)) return 1;
  double raw = range / n, p = pow(10, floor(log10(raw))), f = raw / p;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

static void plot_fmt_tick(const bench_plot_t *p, double v, double unit,
                          const char *uname, char *buf, size_t n, int is_x) {
  if (is_x && p->xtime) {
    bench_fmt_ns(pow(10, v), buf, n);
  } else if (!is_x && p->ybytes) {
    snprintf(buf, n, "%.4g %s", v / unit, uname);
  } else if (fabs(v) >= 1e4 && fmod(v, 1000) == 0) {
    snprintf(buf, n, "%.0fK", v / 1000);
  } else {
    snprintf(buf, n, "%.4g", v);
  }
}

/* ------------------------------------------------------------------ png */

static int plot_png(const char *path, const gpbt_fb_t *c) {
  if (gpbt_png_write(path, c) == 0) return 0;
  fprintf(stderr, "gpubuddy-bench: cannot write %s: %s\n", path,
          strerror(errno));
  return -1;
}

/* ----------------------------------------------------------------- plot */

#define PLOT_W 1500
#define PLOT_H 720
#define PLOT_L 110 /* margins; the legend sits in the right one */
#define PLOT_R 360
#define PLOT_T 60
#define PLOT_B 70

/* The data's range and the plot area, and the mapping between them. */
typedef struct plot_frame {
  double x0, x1, y0, y1;
  int L, R, T, B;
} plot_frame_t;

static int plot_px(const plot_frame_t *f, double x) {
  return f->L + (int)lround((x - f->x0) / (f->x1 - f->x0) * (f->R - f->L));
}

static int plot_py(const plot_frame_t *f, double y) {
  return f->B - (int)lround((y - f->y0) / (f->y1 - f->y0) * (f->B - f->T));
}

/* The range of the data and of the reference lines, from 0 up. */
static void plot_range(plot_frame_t *f, const bench_plot_t *p,
                       const bench_series_t *s, size_t ns) {
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (size_t i = 0; i < ns; i++)
    for (size_t k = 0; k < s[i].n; k++) {
      double x = s[i].x ? s[i].x[k] : (double)k, y = s[i].y[k];
      if (!isfinite(x) || !isfinite(y)) continue;
      if (x < x0) x0 = x;
      if (x > x1) x1 = x;
      if (y < y0) y0 = y;
      if (y > y1) y1 = y;
    }
  for (int k = 0; k < 4; k++)
    if (p->hline[k] > 0 && p->hline[k] > y1) y1 = p->hline[k];
  if (!isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (y0 > 0) y0 = 0;
  if (p->xtime) {
    x0 = floor(x0);
    x1 = ceil(x1);
  }
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + 1;
  y1 += (y1 - y0) * 0.04;
  *f = (plot_frame_t){x0, x1, y0, y1, PLOT_L, PLOT_W - PLOT_R, PLOT_T,
                      PLOT_H - PLOT_B};
}

/* Ticks, grid and axes. */
static void plot_axes(gpbt_fb_t *c, const plot_frame_t *f,
                      const bench_plot_t *p) {
  double unit = 1;
  const char *uname = "";
  if (p->ybytes) {
    static const char *const un[] = {"B", "KIB", "MIB", "GIB", "TIB"};
    int u = 0;
    while (u < 4 && f->y1 / unit >= 1024) {
      unit *= 1024;
      u++;
    }
    uname = un[u];
  }
  char buf[48];
  double ys = plot_nice_step((f->y1 - f->y0) / unit, 6) * unit;
  for (double y = ceil(f->y0 / ys) * ys; y <= f->y1 + 1e-9 * ys; y += ys) {
    int py = plot_py(f, y);
    canvas_line(c, f->L, py, f->R, py, 0xe0e0e0, 1, NULL);
    plot_fmt_tick(p, y, unit, uname, buf, sizeof buf, 0);
    canvas_text(c, f->L - 8 - gpbt_font_width(2, buf), py - 7, buf, 2, 0x303030);
  }
  double xs = p->xtime ? 1 : plot_nice_step(f->x1 - f->x0, 8);
  for (double x = ceil(f->x0 / xs) * xs; x <= f->x1 + 1e-9 * xs; x += xs) {
    int px = plot_px(f, x);
    canvas_line(c, px, f->T, px, f->B, 0xe0e0e0, 1, NULL);
    plot_fmt_tick(p, x, 1, "", buf, sizeof buf, 1);
    canvas_text(c, px - gpbt_font_width(2, buf) / 2, f->B + 10, buf, 2, 0x303030);
  }
  canvas_line(c, f->L, f->B, f->R, f->B, 0x000000, 2, NULL);
  canvas_line(c, f->L, f->T, f->L, f->B, 0x000000, 2, NULL);
}

/* Reference lines; a label that would cover an earlier one moves left. */
static void plot_hlines(gpbt_fb_t *c, const plot_frame_t *f,
                        const bench_plot_t *p) {
  int placed[4][3], nplaced = 0; /* x0, x1, y of each label */
  for (int k = 0; k < 4; k++) {
    if (!(p->hline[k] > 0)) continue;
    uint32_t col = k ? bench_colors[k % 8] : 0x000000;
    int py = plot_py(f, p->hline[k]), dash = 0;
    canvas_line(c, f->L, py, f->R, py, col, 1, &dash);
    if (!p->hlabel[k]) continue;
    int w = gpbt_font_width(2, p->hlabel[k]), x = f->R - w - 4;
    for (int again = 1; again && x > f->L;) {
      again = 0;
      for (int j = 0; j < nplaced; j++)
        if (abs(placed[j][2] - py) < 18 && x < placed[j][1] && x + w > placed[j][0]) {
          x = placed[j][0] - w - 16;
          again = 1;
        }
    }
    canvas_text(c, x, py - 18, p->hlabel[k], 2, col);
    placed[nplaced][0] = x;
    placed[nplaced][1] = x + w;
    placed[nplaced++][2] = py;
  }
}

/* The series, then their legend in the right margin. */
static void plot_series(gpbt_fb_t *c, const plot_frame_t *f,
                        const bench_series_t *s, size_t ns) {
  for (size_t i = 0; i < ns; i++) {
    int dash = 0, have = 0, lx = 0, ly = 0;
    for (size_t k = 0; k < s[i].n; k++) {
      double x = s[i].x ? s[i].x[k] : (double)k, y = s[i].y[k];
      if (!isfinite(x) || !isfinite(y)) continue;
      int px = plot_px(f, x), py = plot_py(f, y);
      if (have)
        canvas_line(c, lx, ly, px, py, s[i].rgb, 2, s[i].dashed ? &dash : NULL);
      lx = px;
      ly = py;
      have = 1;
    }
  }
  int lx = f->R + 20, ly = f->T + 10;
  for (size_t i = 0; i < ns; i++) {
    int dash = 0, yy = ly + (int)i * 22 + 7;
    canvas_line(c, lx, yy, lx + 40, yy, s[i].rgb, 2, s[i].dashed ? &dash : NULL);
    if (s[i].label) canvas_text(c, lx + 50, yy - 7, s[i].label, 2, 0x000000);
  }
}

int bench_plot_write(const char *path, const bench_plot_t *p,
                     const bench_series_t *s, size_t ns) {
  gpbt_fb_t c;
  if (gpbt_fb_init(&c, PLOT_W, PLOT_H)) return -1;
  gpbt_fb_fill(&c, 0, 0, PLOT_W, PLOT_H, PLOT_OPAQUE(0xffffff));
  plot_frame_t f;
  plot_range(&f, p, s, ns);
  plot_axes(&c, &f, p);
  plot_hlines(&c, &f, p);
  plot_series(&c, &f, s, ns);
  /* Title and labels. */
  if (p->title) {
    int sc = gpbt_font_width(2, p->title) <= PLOT_W - 20 ? 2 : 1;
    canvas_text(&c, (PLOT_W - gpbt_font_width(sc, p->title)) / 2, 16,
                p->title, sc, 0x000000);
  }
  if (p->xlabel)
    canvas_text(&c, (f.L + f.R - gpbt_font_width(2, p->xlabel)) / 2,
                PLOT_H - 30, p->xlabel, 2, 0x000000);
  if (p->ylabel) canvas_text(&c, 10, f.T - 24, p->ylabel, 2, 0x000000);
  int rc = plot_png(path, &c);
  gpbt_fb_free(&c);
  return rc;
}

/* Points of a CDF from sorted samples: about 1,000 quantiles plus the
 * last sample, x in log10 ns. */
static size_t plot_cdf_points(const bench_samples_t *s, double *x, double *y,
                              size_t max) {
  if (s->n == 0) return 0;
  size_t k = 0, steps = max - 1 < s->n ? max - 1 : s->n;
  for (size_t q = 0; q < steps; q++) {
    size_t i = q * s->n / steps;
    x[k] = log10(s->ns[i] ? (double)s->ns[i] : 1.0);
    y[k++] = (double)(i + 1) / (double)s->n;
  }
  x[k] = log10(s->ns[s->n - 1] ? (double)s->ns[s->n - 1] : 1.0);
  y[k++] = 1.0;
  return k;
}

/* The samples must be sorted (bench_summarize sorts them). */
int bench_plot_cdf(const char *path, const char *title,
                   const char *const *names, bench_samples_t *const *allocs,
                   bench_samples_t *const *frees, int n) {
  enum { PTS = 1001 };
  if (n > 8) n = 8;
  double *buf = malloc((size_t)n * 4 * PTS * sizeof *buf);
  if (!buf) return -1;
  bench_series_t s[16];
  char lab[16][64];
  size_t ns = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < 2; j++) {
      const bench_samples_t *src = j ? frees[i] : allocs[i];
      double *x = buf + (size_t)(2 * i + j) * 2 * PTS, *y = x + PTS;
      size_t k = plot_cdf_points(src, x, y, PTS);
      if (!k) continue;
      snprintf(lab[ns], sizeof lab[ns], "%s %s", names[i], j ? "FREE" : "ALLOC");
      s[ns] = (bench_series_t){lab[ns], x, y, k, bench_colors[i % 8], j};
      ns++;
    }
  bench_plot_t p;
  memset(&p, 0, sizeof p);
  p.title = title;
  p.xlabel = "TIME PER CALL (LOG SCALE)";
  p.ylabel = "FRACTION OF CALLS";
  p.logx = 1;
  p.xtime = 1;
  int rc = bench_plot_write(path, &p, s, ns);
  free(buf);
  return rc;
}
