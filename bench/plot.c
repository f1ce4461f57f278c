/* SPDX-License-Identifier: MIT */
/*
 * plot.c: line plots written as PNG, with no plotting library.
 *
 * A plot is an RGB canvas: axes, grid lines at the ticks, one polyline per
 * series (solid or dashed), optional horizontal reference lines, a legend
 * and text drawn with a built-in 5x7 font (capitals, digits and a little
 * punctuation; lower case is drawn as capitals). Lines are Bresenham lines
 * two pixels wide. libpng writes the file; without it
 * bench_plot_available() is 0 and the harness skips its plots.
 */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef GPB_HAVE_PNG
#include <png.h>
#include <setjmp.h>
#endif

const uint32_t bench_colors[8] = {0x1f77b4, 0xd62728, 0x2ca02c, 0xff7f0e,
                                  0x9467bd, 0x8c564b, 0xe377c2, 0x17becf};

/* ----------------------------------------------------------------- font */

/* Rows top to bottom; bit 4 is the leftmost column. */
typedef struct glyph {
  char ch;
  uint8_t row[7];
} glyph_t;

static const glyph_t font[] = {
    {'0', {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}},
    {'1', {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'2', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}},
    {'3', {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}},
    {'4', {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}},
    {'5', {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}},
    {'6', {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}},
    {'7', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
    {'8', {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}},
    {'9', {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}},
    {'A', {0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}},
    {'B', {0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E}},
    {'C', {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E}},
    {'D', {0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C}},
    {'E', {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F}},
    {'F', {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10}},
    {'G', {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F}},
    {'H', {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}},
    {'I', {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'J', {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C}},
    {'K', {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11}},
    {'L', {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F}},
    {'M', {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11}},
    {'N', {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11}},
    {'O', {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}},
    {'P', {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10}},
    {'Q', {0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D}},
    {'R', {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11}},
    {'S', {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E}},
    {'T', {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}},
    {'U', {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}},
    {'V', {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04}},
    {'W', {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A}},
    {'X', {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11}},
    {'Y', {0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04}},
    {'Z', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F}},
    {' ', {0, 0, 0, 0, 0, 0, 0}},
    {'.', {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C}},
    {',', {0x00, 0x00, 0x00, 0x00, 0x0C, 0x04, 0x08}},
    {'-', {0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00}},
    {':', {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00}},
    {'/', {0x01, 0x01, 0x02, 0x04, 0x08, 0x10, 0x10}},
    {'%', {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03}},
    {'(', {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}},
    {')', {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}},
    {'[', {0x0E, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0E}},
    {']', {0x0E, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0E}},
    {'_', {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F}},
    {'+', {0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00}},
    {'=', {0x00, 0x00, 0x1F, 0x00, 0x1F, 0x00, 0x00}},
    {'<', {0x02, 0x04, 0x08, 0x10, 0x08, 0x04, 0x02}},
    {'>', {0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08}},
    {'!', {0x04, 0x04, 0x04, 0x04, 0x04, 0x00, 0x04}},
    {'#', {0x0A, 0x0A, 0x1F, 0x0A, 0x1F, 0x0A, 0x0A}},
    {'*', {0x00, 0x04, 0x15, 0x0E, 0x15, 0x04, 0x00}},
    {'|', {0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}},
    {'\'', {0x04, 0x04, 0x08, 0x00, 0x00, 0x00, 0x00}},
    {'?', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04}},
};

static const uint8_t *font_glyph(char ch) {
  if (ch >= 'a' && ch <= 'z') ch = (char)(ch - 'a' + 'A');
  for (size_t i = 0; i < sizeof font / sizeof font[0]; i++)
    if (font[i].ch == ch) return font[i].row;
  return font_glyph('?');
}

/* --------------------------------------------------------------- canvas */

typedef struct canvas {
  int w, h;
  uint8_t *px; /* w * h * 3 */
} canvas_t;

static void canvas_px(canvas_t *c, int x, int y, uint32_t rgb) {
  if (x < 0 || y < 0 || x >= c->w || y >= c->h) return;
  uint8_t *p = c->px + ((size_t)y * (size_t)c->w + (size_t)x) * 3;
  p[0] = (uint8_t)(rgb >> 16);
  p[1] = (uint8_t)(rgb >> 8);
  p[2] = (uint8_t)rgb;
}

static void canvas_rect(canvas_t *c, int x0, int y0, int x1, int y1,
                        uint32_t rgb) {
  for (int y = y0; y <= y1; y++)
    for (int x = x0; x <= x1; x++) canvas_px(c, x, y, rgb);
}

/* Bresenham; `dash` counts pixels along the line across calls so a dashed
 * polyline keeps its rhythm from one segment to the next. */
static void canvas_line(canvas_t *c, int x0, int y0, int x1, int y1,
                        uint32_t rgb, int width, int *dash) {
  int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
  int dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
  int err = dx + dy;
  for (int guard = 0; guard < 100000; guard++) {
    int on = !dash || (((*dash)++ / 6) % 2 == 0);
    if (on)
      for (int a = 0; a < width; a++)
        for (int b = 0; b < width; b++) canvas_px(c, x0 + a, y0 + b, rgb);
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

static int text_width(const char *s, int scale) {
  return (int)strlen(s) * 6 * scale;
}

static void canvas_text(canvas_t *c, int x, int y, const char *s, int scale,
                        uint32_t rgb) {
  for (; *s; s++, x += 6 * scale) {
    const uint8_t *g = font_glyph(*s);
    for (int r = 0; r < 7; r++)
      for (int col = 0; col < 5; col++)
        if (g[r] & (0x10 >> col))
          canvas_rect(c, x + col * scale, y + r * scale,
                      x + col * scale + scale - 1, y + r * scale + scale - 1,
                      rgb);
  }
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

int bench_plot_available(void) {
#ifdef GPB_HAVE_PNG
  return 1;
#else
  return 0;
#endif
}

static int plot_png(const char *path, const canvas_t *c) {
#ifdef GPB_HAVE_PNG
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror(path);
    return -1;
  }
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL,
                                            NULL);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!png || !info) {
    png_destroy_write_struct(&png, NULL);
    fclose(f);
    return -1;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    fclose(f);
    fprintf(stderr, "gpubuddy-bench: libpng failed writing %s\n", path);
    return -1;
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, (png_uint_32)c->w, (png_uint_32)c->h, 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < c->h; y++)
    png_write_row(png, c->px + (size_t)y * (size_t)c->w * 3);
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  if (fclose(f)) {
    perror(path);
    return -1;
  }
  return 0;
#else
  (void)c;
  fprintf(stderr, "gpubuddy-bench: built without libpng, %s not written\n",
          path);
  return -1;
#endif
}

/* ----------------------------------------------------------------- plot */

#define PLOT_W 1500
#define PLOT_H 720
#define PLOT_L 110 /* margins; the legend sits in the right one */
#define PLOT_R 360
#define PLOT_T 60
#define PLOT_B 70

int bench_plot_write(const char *path, const bench_plot_t *p,
                     const bench_series_t *s, size_t ns) {
  canvas_t c = {PLOT_W, PLOT_H, malloc((size_t)PLOT_W * PLOT_H * 3)};
  if (!c.px) return -1;
  memset(c.px, 0xff, (size_t)PLOT_W * PLOT_H * 3);

  /* Data range. */
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

  int L = PLOT_L, R = PLOT_W - PLOT_R, T = PLOT_T, B = PLOT_H - PLOT_B;
#define PX(x) (L + (int)lround(((x) - x0) / (x1 - x0) * (R - L)))
#define PY(y) (B - (int)lround(((y) - y0) / (y1 - y0) * (B - T)))

  /* Ticks and grid. */
  double unit = 1;
  const char *uname = "";
  if (p->ybytes) {
    static const char *const un[] = {"B", "KIB", "MIB", "GIB", "TIB"};
    int u = 0;
    while (u < 4 && y1 / unit >= 1024) {
      unit *= 1024;
      u++;
    }
    uname = un[u];
  }
  char buf[48];
  double ys = plot_nice_step((y1 - y0) / unit, 6) * unit;
  for (double y = ceil(y0 / ys) * ys; y <= y1 + 1e-9 * ys; y += ys) {
    int py = PY(y);
    canvas_line(&c, L, py, R, py, 0xe0e0e0, 1, NULL);
    plot_fmt_tick(p, y, unit, uname, buf, sizeof buf, 0);
    canvas_text(&c, L - 8 - text_width(buf, 2), py - 7, buf, 2, 0x303030);
  }
  double xs = p->xtime ? 1 : plot_nice_step(x1 - x0, 8);
  for (double x = ceil(x0 / xs) * xs; x <= x1 + 1e-9 * xs; x += xs) {
    int px = PX(x);
    canvas_line(&c, px, T, px, B, 0xe0e0e0, 1, NULL);
    plot_fmt_tick(p, x, 1, "", buf, sizeof buf, 1);
    canvas_text(&c, px - text_width(buf, 2) / 2, B + 10, buf, 2, 0x303030);
  }
  canvas_line(&c, L, B, R, B, 0x000000, 2, NULL);
  canvas_line(&c, L, T, L, B, 0x000000, 2, NULL);

  /* Reference lines; a label that would cover an earlier one moves left. */
  int placed[4][3], nplaced = 0; /* x0, x1, y of each label */
  for (int k = 0; k < 4; k++) {
    if (!(p->hline[k] > 0)) continue;
    uint32_t col = k ? bench_colors[k % 8] : 0x000000;
    int py = PY(p->hline[k]), dash = 0;
    canvas_line(&c, L, py, R, py, col, 1, &dash);
    if (!p->hlabel[k]) continue;
    int w = text_width(p->hlabel[k], 2), x = R - w - 4;
    for (int again = 1; again && x > L;) {
      again = 0;
      for (int j = 0; j < nplaced; j++)
        if (abs(placed[j][2] - py) < 18 && x < placed[j][1] && x + w > placed[j][0]) {
          x = placed[j][0] - w - 16;
          again = 1;
        }
    }
    canvas_text(&c, x, py - 18, p->hlabel[k], 2, col);
    placed[nplaced][0] = x;
    placed[nplaced][1] = x + w;
    placed[nplaced++][2] = py;
  }

  /* Series. */
  for (size_t i = 0; i < ns; i++) {
    int dash = 0, have = 0, lx = 0, ly = 0;
    for (size_t k = 0; k < s[i].n; k++) {
      double x = s[i].x ? s[i].x[k] : (double)k, y = s[i].y[k];
      if (!isfinite(x) || !isfinite(y)) continue;
      int px = PX(x), py = PY(y);
      if (have)
        canvas_line(&c, lx, ly, px, py, s[i].rgb, 2, s[i].dashed ? &dash : NULL);
      lx = px;
      ly = py;
      have = 1;
    }
  }

  /* Legend, in the right margin. */
  if (ns) {
    int lx = R + 20, ly = T + 10;
    for (size_t i = 0; i < ns; i++) {
      int dash = 0, yy = ly + (int)i * 22 + 7;
      canvas_line(&c, lx, yy, lx + 40, yy, s[i].rgb, 2, s[i].dashed ? &dash : NULL);
      if (s[i].label) canvas_text(&c, lx + 50, yy - 7, s[i].label, 2, 0x000000);
    }
  }

  /* Title and labels. */
  if (p->title) {
    int sc = text_width(p->title, 2) <= PLOT_W - 20 ? 2 : 1;
    canvas_text(&c, (PLOT_W - text_width(p->title, sc)) / 2, 16, p->title, sc,
                0x000000);
  }
  if (p->xlabel)
    canvas_text(&c, (L + R - text_width(p->xlabel, 2)) / 2, PLOT_H - 30,
                p->xlabel, 2, 0x000000);
  if (p->ylabel) canvas_text(&c, 10, T - 24, p->ylabel, 2, 0x000000);
#undef PX
#undef PY
  int rc = plot_png(path, &c);
  free(c.px);
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
