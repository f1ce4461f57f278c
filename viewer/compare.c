/* SPDX-License-Identifier: MIT */
/*
 * compare.c: two runs side by side (gpubuddy-view --compare A B), the
 * viewer's side of comparing runs (gpubuddy-replay --compare prints the
 * figures).
 *
 * Each trace replays through a pool of its own into a vapp_t, drawn by
 * vframe_draw into a buffer half the window wide and copied into place,
 * so each half is the whole single-pool view. The axes are shared: both
 * timelines span the longer run (tl_hi_fix) and reach the higher peak
 * (tl_ymax_fix), so a chart that stands higher used more. Keys act on
 * both, so play, steps and seeks keep them at the same op; the mouse acts
 * on the half under it, and a seek or a time zoom on a timeline is done
 * on the other half too. A strip on top names the runs with their peaks,
 * failures and fragmentation, and B - A.
 */
#include "config.h"
#include "view.h"

#include "json.h"
#include "opseq.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The pool --trace would pick: twice the peak, a power of two. */
static void cmp_pool_for(const char *path, gpb_config_t *cfg) {
  gpbt_seq_t q;
  char err[512];
  if (gpbt_seq_load(path, 1, &q, err, sizeof err) == 0) {
    cfg->pool_size = (size_t)gpbt_pool_size_for(q.peak_live, q.max_request);
    gpbt_seq_free(&q);
  }
}

int vcmp_open(vcmp_t *c, const char *a, const char *b, const gpb_config_t *cfg,
              int pool_given) {
  memset(c, 0, sizeof *c);
  c->hover = -1;
  const char *path[2] = {a, b};
  for (int i = 0; i < 2; i++) {
    gpb_config_t k = *cfg;
    if (!pool_given) cmp_pool_for(path[i], &k);
    vops_t *ops;
    int rc = vops_open_trace(path[i], &ops);
    if (!rc) rc = vapp_open_replay(&c->app[i], ops, &k);
    if (rc) {
      if (i) vapp_close(&c->app[0]);
      return rc;
    }
    vfmt_tail(path[i], sizeof c->name[i] - 1, c->name[i], sizeof c->name[i]);
    /* Copied, not snprintf'd: GCC cannot tell the two fields apart. */
    size_t len = strlen(c->name[i]);
    if (len >= sizeof c->app[i].title) len = sizeof c->app[i].title - 1;
    memcpy(c->app[i].title, c->name[i], len);
    c->app[i].title[len] = 0;
  }
  snprintf(c->title, sizeof c->title, "%s vs %s", c->name[0], c->name[1]);
  return 0;
}

void vcmp_close(vcmp_t *c) {
  for (int i = 0; i < 2; i++) {
    vapp_close(&c->app[i]);
    gpbt_fb_free(&c->sub[i]);
  }
}

/* Shared axes: the longer run and the higher peak for both. */
static void cmp_axes(vcmp_t *c) {
  double peak = 0;
  uint64_t ops = 0;
  for (int i = 0; i < 2; i++) {
    double p = vtl_peak(&c->app[i]);
    if (p > peak) peak = p;
    if (c->app[i].total_ops > ops) ops = c->app[i].total_ops;
  }
  for (int i = 0; i < 2; i++) {
    c->app[i].tl_ymax_fix = peak;
    c->app[i].tl_hi_fix = ops;
  }
}

void vcmp_update(vcmp_t *c, double dt) {
  for (int i = 0; i < 2; i++) vapp_update(&c->app[i], dt);
  cmp_axes(c);
}

void vcmp_seek(vcmp_t *c, uint64_t n) {
  for (int i = 0; i < 2; i++) {
    vapp_seek(&c->app[i], n);
    c->app[i].paused = 1;
    vapp_update(&c->app[i], 0); /* its stats and map, at the op */
  }
  cmp_axes(c);
}

/* Peak bytes over the run so far. */
static uint64_t cmp_peak(const vapp_t *a) { return (uint64_t)vtl_peak(a); }

/* "+1.5 MiB", "-256.0 KiB", "0 B". */
static const char *cmp_delta(uint64_t a, uint64_t b, char *buf, size_t n) {
  char t[32];
  vfmt_bytes(b > a ? b - a : a - b, t, sizeof t);
  snprintf(buf, n, "%s%s", b > a ? "+" : b < a ? "-" : "", t);
  return buf;
}

/* The strip on top: each run's headline figures over its half, and
 * B - A at the right end of B's. */
static void cmp_strip(vcmp_t *c, gpbt_fb_t *fb) {
  int s = c->scale < 1 ? 1 : c->scale, lh = (GPBT_FONT_H + 1) * s;
  gpbt_fb_fill(fb, 0, 0, fb->w, c->top_h, VC_PANEL);
  for (int i = 0; i < 2; i++) {
    const vapp_t *a = &c->app[i];
    char l[160], b1[32];
    int x = i * (c->half_w + 2 * s) + 4 * s;
    snprintf(l, sizeof l, "%c: %s", 'A' + i, c->name[i]);
    gpbt_font_draw(fb, x, s, s, VC_TEXT, l);
    snprintf(l, sizeof l, "PEAK %s  FAILED %" PRIu64 "  EXT FRAG %.3f",
             vfmt_bytes(cmp_peak(a), b1, 32), a->stats.failures,
             a->stats.external_frag);
    gpbt_font_draw(fb, x, s + lh, s, VC_DIM, l);
  }
  const vapp_t *a = &c->app[0], *b = &c->app[1];
  char l[160], d1[40];
  int64_t df = (int64_t)b->stats.failures - (int64_t)a->stats.failures;
  snprintf(l, sizeof l, "B - A: PEAK %s  FAILED %+" PRId64 "  EXT FRAG %+.3f",
           cmp_delta(cmp_peak(a), cmp_peak(b), d1, sizeof d1), df,
           b->stats.external_frag - a->stats.external_frag);
  int w = gpbt_font_width(s, l);
  gpbt_font_draw(fb, fb->w - w - 4 * s, s + 2 * lh, s, VC_WASTE, l);
}

void vcmp_draw(vcmp_t *c, gpbt_fb_t *fb) {
  int s = c->scale < 1 ? 1 : c->scale;
  c->top_h = 3 * (GPBT_FONT_H + 1) * s + 2 * s;
  c->half_w = (fb->w - 2 * s) / 2;
  int h = fb->h - c->top_h;
  if (h < 16 || c->half_w < 16) return;
  cmp_axes(c);
  for (int i = 0; i < 2; i++) {
    gpbt_fb_t *sub = &c->sub[i];
    if (sub->w != c->half_w || sub->h != h) {
      gpbt_fb_free(sub);
      if (gpbt_fb_init(sub, c->half_w, h)) return;
    }
    vapp_t *a = &c->app[i];
    a->scale = s;
    a->cell_scale = c->cell_scale;
    vframe_draw(a, sub);
    int x0 = i * (c->half_w + 2 * s);
    for (int y = 0; y < h; y++)
      memcpy(fb->px + (size_t)(y + c->top_h) * (size_t)fb->w + x0,
             sub->px + (size_t)y * (size_t)sub->w, (size_t)sub->w * sizeof *fb->px);
  }
  gpbt_fb_fill(fb, c->half_w, c->top_h, 2 * s, h, VC_DIM);
  cmp_strip(c, fb);
  if (c->show_help) vframe_help(fb, s);
}

/* The half under (x, y) and the point in its own coordinates. */
static int cmp_half(const vcmp_t *c, int x, int y, int *hx, int *hy) {
  int s = c->scale < 1 ? 1 : c->scale;
  if (y < c->top_h || c->half_w <= 0) return -1;
  int i = x < c->half_w ? 0 : x >= c->half_w + 2 * s ? 1 : -1;
  if (i < 0) return -1;
  *hx = x - i * (c->half_w + 2 * s);
  *hy = y - c->top_h;
  return i;
}

int vcmp_key(vcmp_t *c, int key) {
  if (key == 'h' || key == '?') {
    c->show_help = !c->show_help;
    return 0;
  }
  if (c->show_help) c->show_help = 0;
  if (key == 'p') {
    c->want_shot = 1;
    return 0;
  }
  int quit = 0;
  for (int i = 0; i < 2; i++) quit |= vinput_key(&c->app[i], key);
  cmp_axes(c);
  return quit;
}

void vcmp_text(vcmp_t *c, const char *utf8) {
  for (int i = 0; i < 2; i++) vinput_text(&c->app[i], utf8);
}

/* After input on half i: the other half seeks and zooms in time with it. */
static void cmp_follow(vcmp_t *c, int i) {
  vapp_t *a = &c->app[i], *b = &c->app[1 - i];
  if (a->seek_to != UINT64_MAX) b->seek_to = a->seek_to, b->paused = a->paused;
  b->tl_zlo = a->tl_zlo;
  b->tl_zhi = a->tl_zhi;
}

void vcmp_wheel(vcmp_t *c, int x, int y, int dy) {
  int hx, hy, i = cmp_half(c, x, y, &hx, &hy);
  if (i < 0) return;
  uint64_t zlo = c->app[i].tl_zlo, zhi = c->app[i].tl_zhi;
  vinput_wheel(&c->app[i], hx, hy, dy);
  if (zlo != c->app[i].tl_zlo || zhi != c->app[i].tl_zhi) cmp_follow(c, i);
}

void vcmp_button(vcmp_t *c, int x, int y, int down) {
  int hx, hy, i = cmp_half(c, x, y, &hx, &hy);
  if (i < 0) {
    for (int k = 0; k < 2; k++) c->app[k].dragging = 0;
    return;
  }
  vinput_button(&c->app[i], hx, hy, down);
  cmp_follow(c, i);
}

void vcmp_motion(vcmp_t *c, int x, int y, int buttons) {
  int hx, hy, i = cmp_half(c, x, y, &hx, &hy);
  c->hover = i;
  for (int k = 0; k < 2; k++)
    if (k != i) c->app[k].mouse_in = c->app[k].tl_mouse = 0;
  if (i < 0) return;
  vinput_motion(&c->app[i], hx, hy, buttons);
  if (buttons) cmp_follow(c, i);
}

uint64_t vcmp_signature(const vcmp_t *c, uint64_t now) {
  return vapp_signature(&c->app[0], now) * 31 + vapp_signature(&c->app[1], now);
}

void vcmp_json(const vcmp_t *c, FILE *f) {
  const vapp_t *a = &c->app[0], *b = &c->app[1];
  for (int i = 0; i < 2; i++) {
    fprintf(f, "%s\"%c\":{", i ? "," : "{", 'a' + i);
    gpbt_json_t j = {f, ",", 0};
    gpbt_json_put_str(&j, "name", c->name[i]);
    gpbt_json_put_u64(&j, "peak", cmp_peak(&c->app[i]));
    fputc(',', f);
    vapp_json_members(&c->app[i], f);
    fputc('}', f);
  }
  fprintf(f, ",\"diff\":{\"peak\":%" PRId64 ",\"failures\":%" PRId64
          ",\"external_frag\":%.6f}}\n",
          (int64_t)cmp_peak(b) - (int64_t)cmp_peak(a),
          (int64_t)b->stats.failures - (int64_t)a->stats.failures,
          b->stats.external_frag - a->stats.external_frag);
}
