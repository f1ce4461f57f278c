/* SPDX-License-Identifier: MIT */
/*
 * compare.c: two runs side by side (compare.h says what is shown).
 *
 * Sites are matched by their frames' text with a sort of both runs'
 * rows; each gets a label from gpbt_sitename_label over the union, so
 * two sites that share a model line are told apart by their callers.
 * The picture is drawn with the tools' one raster, font and PNG writer:
 * a bar pair (A above B) per figure, each group scaled to its largest
 * value, the numbers and the change written beside.
 */
#define _POSIX_C_SOURCE 200809L
#include "compare.h"

#include "gpubuddy.h"
#include "json.h"
#include "raster.h"
#include "sitename.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- match */

#define CMP_SYMBOLIZE_MAX 256 /* sites; more are labelled as recorded */

static int cmp_text(const char *x, const char *y) {
  if (!x || !y) return x ? 1 : y ? -1 : 0;
  return strcmp(x, y);
}

static int cmp_by_text(const void *p, const void *q) {
  return cmp_text(((const gpbt_cmp_row_t *)p)->text,
                  ((const gpbt_cmp_row_t *)q)->text);
}

static uint64_t cmp_delta(const gpbt_cmp_row_t *r) {
  return r->a > r->b ? r->a - r->b : r->b - r->a;
}

static int cmp_by_change(const void *p, const void *q) {
  const gpbt_cmp_row_t *x = p, *y = q;
  uint64_t dx = cmp_delta(x), dy = cmp_delta(y);
  if (dx != dy) return dx > dy ? -1 : 1;
  uint64_t mx = x->a > x->b ? x->a : x->b, my = y->a > y->b ? y->a : y->b;
  if (mx != my) return mx > my ? -1 : 1;
  return strcmp(x->label, y->label);
}

/* Labels over the union of sites, from their names and callers. */
static int cmp_label(gpbt_cmp_t *c) {
  gpbt_sitename_t *v = calloc(c->n ? c->n : 1, sizeof *v);
  int rc = v ? 0 : GPB_EHOSTMEM;
  /* Symbolizing runs addr2line once per distinct frame: fine for the
   * sites of a model, too slow for thousands of a pool's. */
  unsigned flags = c->n <= CMP_SYMBOLIZE_MAX ? GPBT_SITENAME_SYMBOLIZE : 0;
  for (size_t i = 0; !rc && i < c->n; i++)
    rc = gpbt_sitename(c->rows[i].text ? c->rows[i].text : "", NULL, flags,
                       &v[i]);
  for (size_t i = 0; !rc && i < c->n; i++) {
    char b[600];
    if (!c->rows[i].text)
      snprintf(b, sizeof b, "(no call site)");
    else if (!gpbt_sitename_label(v, c->n, i, b, sizeof b)) {
      size_t k = strlen(b); /* the same user frames: the innermost else */
      snprintf(b + k, sizeof b - k, " [%s]",
               v[i].nframes > v[i].nuser ? v[i].frames[v[i].nuser] : "?");
    }
    if (!(c->rows[i].label = strdup(b))) rc = GPB_EHOSTMEM;
  }
  for (size_t i = 0; v && i < c->n; i++) gpbt_sitename_free(&v[i]);
  free(v);
  return rc;
}

int gpbt_cmp_sites(const gpbt_cmp_run_t *a, const gpbt_cmp_run_t *b,
                   gpbt_cmp_t *out) {
  memset(out, 0, sizeof *out);
  size_t n = a->nsites + b->nsites;
  gpbt_cmp_row_t *v = calloc(n ? n : 1, sizeof *v);
  if (!v) return GPB_EHOSTMEM;
  for (size_t i = 0; i < a->nsites; i++)
    v[i] = (gpbt_cmp_row_t){a->site_text[i], NULL, a->site_bytes[i], 0};
  for (size_t i = 0; i < b->nsites; i++)
    v[a->nsites + i] =
        (gpbt_cmp_row_t){b->site_text[i], NULL, 0, b->site_bytes[i]};
  qsort(v, n, sizeof *v, cmp_by_text);
  size_t m = 0; /* merge equal texts (site 0 rows too) */
  for (size_t i = 0; i < n; i++) {
    if (m && !cmp_text(v[m - 1].text, v[i].text)) {
      v[m - 1].a += v[i].a;
      v[m - 1].b += v[i].b;
    } else {
      v[m++] = v[i];
    }
  }
  out->rows = v;
  out->n = m;
  int rc = cmp_label(out);
  if (rc) {
    gpbt_cmp_free(out);
    return rc;
  }
  qsort(v, m, sizeof *v, cmp_by_change);
  return 0;
}

void gpbt_cmp_free(gpbt_cmp_t *c) {
  for (size_t i = 0; c->rows && i < c->n; i++) free(c->rows[i].label);
  free(c->rows);
  memset(c, 0, sizeof *c);
}

/* -------------------------------------------------------------- text */

/* "+1.5 MiB", "-512 B" or "0": b - a. */
static void cmp_diff(uint64_t a, uint64_t b, char *buf, size_t cap) {
  char s[32];
  if (a == b) {
    snprintf(buf, cap, "0");
    return;
  }
  gpb_size_format(a > b ? a - b : b - a, s, sizeof s);
  snprintf(buf, cap, "%c%s", a > b ? '-' : '+', s);
}

static void cmp_line(FILE *f, const char *what, uint64_t a, uint64_t b) {
  char x[32], y[32], d[40];
  gpb_size_format(a, x, sizeof x);
  gpb_size_format(b, y, sizeof y);
  cmp_diff(a, b, d, sizeof d);
  fprintf(f, "  %-26s %12s %12s %12s", what, x, y, d);
  if (a) fprintf(f, " (%+.1f%%)", 100.0 * ((double)b - (double)a) / (double)a);
  fprintf(f, "\n");
}

void gpbt_cmp_text(FILE *f, const gpbt_cmp_run_t *a, const gpbt_cmp_run_t *b,
                   const gpbt_cmp_t *c, size_t rows) {
  fprintf(f, "A: %s (%" PRIu64 " ops)\nB: %s (%" PRIu64 " ops)\n\n",
          a->path, a->ops, b->path, b->ops);
  fprintf(f, "  %-26s %12s %12s %12s\n", "", "A", "B", "B - A");
  cmp_line(f, "peak live bytes", a->peak_live, b->peak_live);
  for (int p = 0; p < a->npol && p < b->npol; p++) {
    char what[64];
    snprintf(what, sizeof what, "smallest pool, %s", a->pol[p].policy);
    cmp_line(f, what, a->pol[p].min_pool, b->pol[p].min_pool);
  }
  fprintf(f, "\nfragmentation at the peak (internal: share of block bytes;"
          " external: the library's index):\n");
  for (int p = 0; p < a->npol && p < b->npol; p++)
    fprintf(f, "  %-8s internal %5.1f%% -> %5.1f%%, external %.3f -> %.3f,"
            " failed allocations %" PRIu64 " -> %" PRIu64 "\n",
            a->pol[p].policy, 100 * a->pol[p].int_frag,
            100 * b->pol[p].int_frag, a->pol[p].ext_frag, b->pol[p].ext_frag,
            a->pol[p].oom, b->pol[p].oom);
  size_t n = rows && rows < c->n ? rows : c->n;
  fprintf(f, "\nlive bytes at the peak by call site (largest change first;"
          " %zu of %zu site%s):\n", n, c->n, c->n == 1 ? "" : "s");
  fprintf(f, "  %12s %12s %12s  %s\n", "A", "B", "B - A", "site");
  for (size_t i = 0; i < n; i++) {
    const gpbt_cmp_row_t *r = &c->rows[i];
    char x[32], y[32], d[40];
    gpb_size_format(r->a, x, sizeof x);
    gpb_size_format(r->b, y, sizeof y);
    cmp_diff(r->a, r->b, d, sizeof d);
    fprintf(f, "  %12s %12s %12s  %s\n", x, y, d, r->label);
  }
}

/* -------------------------------------------------------------- JSON */

static void cmp_json_run(FILE *f, const char *key, const gpbt_cmp_run_t *r) {
  fprintf(f, "  \"%s\": {\"trace\": ", key);
  gpbt_json_str(f, r->path);
  fprintf(f, ", \"ops\": %" PRIu64 ", \"peak_live_bytes\": %" PRIu64
          ", \"policies\": [", r->ops, r->peak_live);
  for (int p = 0; p < r->npol; p++) {
    gpbt_json_t j = {f, ", ", 0};
    fprintf(f, "%s\n    {", p ? "," : "");
    gpbt_json_put_str(&j, "policy", r->pol[p].policy);
    gpbt_json_put_u64(&j, "min_pool_size", r->pol[p].min_pool);
    gpbt_json_put_u64(&j, "peak_block_bytes", r->pol[p].peak_blocks);
    gpbt_json_put_num(&j, "internal_frag", r->pol[p].int_frag);
    gpbt_json_put_num(&j, "external_frag", r->pol[p].ext_frag);
    gpbt_json_put_u64(&j, "failed_allocs", r->pol[p].oom);
    fprintf(f, "}");
  }
  fprintf(f, "]},\n");
}

void gpbt_cmp_json(FILE *f, const gpbt_cmp_run_t *a, const gpbt_cmp_run_t *b,
                   const gpbt_cmp_t *c) {
  fprintf(f, "{\n");
  cmp_json_run(f, "a", a);
  cmp_json_run(f, "b", b);
  fprintf(f, "  \"peak_live_diff\": %lld,\n",
          (long long)b->peak_live - (long long)a->peak_live);
  fprintf(f, "  \"sites\": [");
  for (size_t i = 0; i < c->n; i++) {
    const gpbt_cmp_row_t *r = &c->rows[i];
    gpbt_json_t j = {f, ", ", 0};
    fprintf(f, "%s\n    {", i ? "," : "");
    gpbt_json_put_str(&j, "label", r->label);
    gpbt_json_put_u64(&j, "a_bytes", r->a);
    gpbt_json_put_u64(&j, "b_bytes", r->b);
    gpbt_json_put_int(&j, "diff_bytes", (long long)r->b - (long long)r->a);
    gpbt_json_key(&j, "frames");
    if (r->text) gpbt_json_str(f, r->text);
    else fprintf(f, "null");
    fprintf(f, "}");
  }
  fprintf(f, "%s]\n}\n", c->n ? "\n  " : "");
}

/* ----------------------------------------------------------- picture */

#define CMP_W 1600
#define CMP_S 2                        /* font scale */
#define CMP_LH (GPBT_FONT_H * CMP_S)   /* a text line */
#define CMP_LABEL_X 12
#define CMP_BAR_X 740                  /* bars start here */
#define CMP_BAR_W 560                  /* the longest bar */
#define CMP_PAIR (2 * CMP_LH + 10)     /* A's bar, B's bar, a gap */
#define CMP_HEAD (CMP_LH + 16)
#define CMP_INK 0xFF202020u
#define CMP_A 0xFF1F77B4u
#define CMP_B 0xFFFF7F0Eu

typedef struct cmp_pic {
  gpbt_fb_t fb;
  int y;
} cmp_pic_t;

/* Text cut to what fits `px` pixels, ".." marking the cut. */
static void cmp_fit(const char *s, int px, char *out, size_t cap) {
  size_t max = (size_t)(px / (GPBT_FONT_W * CMP_S));
  snprintf(out, cap, "%s", s);
  if (strlen(out) > max && max > 2) {
    out[max - 2] = 0;
    strcat(out, "..");
  }
}

static void cmp_heading(cmp_pic_t *p, const char *text) {
  p->y += 8;
  gpbt_font_draw(&p->fb, CMP_LABEL_X, p->y, CMP_S, CMP_INK, text);
  p->y += CMP_HEAD - 8;
}

/* One figure of A and B: a label, two bars scaled to max, their values
 * (text_a, text_b) and the change (diff) beside. */
static void cmp_pair(cmp_pic_t *p, const char *label, double a, double b,
                     double max, const char *ta, const char *tb,
                     const char *diff) {
  char fit[160];
  cmp_fit(label, CMP_BAR_X - CMP_LABEL_X - 12, fit, sizeof fit);
  gpbt_font_draw(&p->fb, CMP_LABEL_X, p->y + CMP_LH / 2, CMP_S, CMP_INK, fit);
  const double v[2] = {a, b};
  const char *t[2] = {ta, tb};
  for (int k = 0; k < 2; k++) {
    int w = max > 0 ? (int)(CMP_BAR_W * v[k] / max + 0.5) : 0;
    int y = p->y + k * CMP_LH;
    gpbt_fb_fill(&p->fb, CMP_BAR_X, y + 1, w ? w : 1, CMP_LH - 2,
                 k ? CMP_B : CMP_A);
    gpbt_font_draw(&p->fb, CMP_BAR_X + w + 8, y + 1, CMP_S, CMP_INK, t[k]);
  }
  gpbt_font_draw(&p->fb, CMP_BAR_X + CMP_BAR_W + 140, p->y + CMP_LH / 2,
                 CMP_S, CMP_INK, diff);
  p->y += CMP_PAIR;
}

static void cmp_bytes_pair(cmp_pic_t *p, const char *label, uint64_t a,
                           uint64_t b, uint64_t max) {
  char x[32], y[32], d[40];
  gpb_size_format(a, x, sizeof x);
  gpb_size_format(b, y, sizeof y);
  cmp_diff(a, b, d, sizeof d);
  cmp_pair(p, label, (double)a, (double)b, (double)max, x, y, d);
}

static void cmp_legend(cmp_pic_t *p, const gpbt_cmp_run_t *a,
                       const gpbt_cmp_run_t *b) {
  const gpbt_cmp_run_t *r[2] = {a, b};
  for (int k = 0; k < 2; k++) {
    char t[200], fit[200];
    snprintf(t, sizeof t, "%c: %s", k ? 'B' : 'A', r[k]->path);
    cmp_fit(t, CMP_W - 60, fit, sizeof fit);
    gpbt_fb_fill(&p->fb, CMP_LABEL_X, p->y + 2, CMP_LH - 4, CMP_LH - 4,
                 k ? CMP_B : CMP_A);
    gpbt_font_draw(&p->fb, CMP_LABEL_X + CMP_LH + 4, p->y, CMP_S, CMP_INK, fit);
    p->y += CMP_LH + 4;
  }
}

static void cmp_draw(cmp_pic_t *p, const gpbt_cmp_run_t *a,
                     const gpbt_cmp_run_t *b, const gpbt_cmp_t *c, size_t n) {
  int np = a->npol < b->npol ? a->npol : b->npol;
  p->y = 10;
  cmp_legend(p, a, b);
  uint64_t m = a->peak_live > b->peak_live ? a->peak_live : b->peak_live;
  cmp_heading(p, "Peak live bytes");
  cmp_bytes_pair(p, "peak", a->peak_live, b->peak_live, m);
  cmp_heading(p, "Smallest pool per policy");
  m = 0;
  for (int k = 0; k < np; k++) {
    if (a->pol[k].min_pool > m) m = a->pol[k].min_pool;
    if (b->pol[k].min_pool > m) m = b->pol[k].min_pool;
  }
  for (int k = 0; k < np; k++)
    cmp_bytes_pair(p, a->pol[k].policy, a->pol[k].min_pool,
                   b->pol[k].min_pool, m);
  cmp_heading(p, "Internal fragmentation at the peak");
  for (int k = 0; k < np; k++) {
    char x[32], y[32], d[32];
    double fa = 100 * a->pol[k].int_frag, fb = 100 * b->pol[k].int_frag;
    snprintf(x, sizeof x, "%.1f%%", fa);
    snprintf(y, sizeof y, "%.1f%%", fb);
    snprintf(d, sizeof d, "%+.1f pts", fb - fa);
    cmp_pair(p, a->pol[k].policy, fa, fb, 100, x, y, d);
  }
  cmp_heading(p, "Live bytes at the peak by call site, largest change first");
  m = 0;
  for (size_t i = 0; i < n; i++) {
    if (c->rows[i].a > m) m = c->rows[i].a;
    if (c->rows[i].b > m) m = c->rows[i].b;
  }
  for (size_t i = 0; i < n; i++)
    cmp_bytes_pair(p, c->rows[i].label, c->rows[i].a, c->rows[i].b, m);
}

int gpbt_cmp_png(const char *path, const gpbt_cmp_run_t *a,
                 const gpbt_cmp_run_t *b, const gpbt_cmp_t *c, size_t rows) {
  size_t n = rows && rows < c->n ? rows : c->n;
  int np = a->npol < b->npol ? a->npol : b->npol;
  int h = 10 + 2 * (CMP_LH + 4) + 4 * CMP_HEAD +
          (int)(1 + 2 * np + n) * CMP_PAIR + 10;
  cmp_pic_t p;
  int rc = gpbt_fb_init(&p.fb, CMP_W, h);
  if (rc) {
    errno = ENOMEM;
    return rc;
  }
  gpbt_fb_fill(&p.fb, 0, 0, CMP_W, h, 0xFFFFFFFFu);
  cmp_draw(&p, a, b, c, n);
  rc = gpbt_png_write(path, &p.fb);
  gpbt_fb_free(&p.fb);
  return rc;
}
