/* SPDX-License-Identifier: MIT */
/*
 * bands.c: memory over time with one band per allocation, as PyTorch's
 * memory_viz draws its active memory timeline: time (ops, or a live
 * view's events) across, bytes up, each live allocation a band stacked
 * on those allocated before it, so a free lets the bands above it fall.
 *
 * The app's hook records each allocation once (op allocated, op freed,
 * block bytes, site, tag); a replay run again adds nothing. Drawing
 * sweeps the records in time once, a column per pixel: a Fenwick tree
 * over the allocations in the order they were made holds the live bytes,
 * so the band at a pixel row is a prefix-sum search, O(log n), and a
 * chart costs O(events log n + pixels log n) whatever the stack's depth.
 * The picture and each pixel's allocation are kept until the view or the
 * data change (the data at most twice a second), so a hover costs
 * nothing.
 */
#include "view.h"
#include "idmap.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void vbands_init(vbands_t *b) { memset(b, 0, sizeof *b); }

void vbands_fini(vbands_t *b) {
  free(b->v);
  free(b->by_free);
  free(b->img);
  free(b->who);
  gpbt_idmap_fini(&b->live);
  memset(b, 0, sizeof *b);
}

void vbands_resync(vbands_t *b, uint64_t x) {
  for (uint64_t i = 0; i < b->live.cap; i++)
    if (b->live.s[i].key) {
      b->v[b->live.s[i].val].t1 = x;
      b->nfreed++;
    }
  gpbt_idmap_clear(&b->live);
  b->live_bytes = 0;
}

void vbands_event(vbands_t *b, const gpb_event_t *ev, uint64_t x) {
  if (x < b->last_x || b->over) return; /* a replay run again */
  b->last_x = x;
  if (ev->type == GPB_EV_ALLOC) {
    if (b->n == b->cap) {
      size_t cap = b->cap ? b->cap * 2 : 4096;
      void *v = cap <= VBANDS_MAX ? realloc(b->v, cap * sizeof *b->v) : NULL;
      if (!v) {
        b->over = 1;
        return;
      }
      b->v = v, b->cap = cap;
    }
    int err;
    gpbt_idslot_t *s = gpbt_idmap_claim(&b->live, ev->offset, &err);
    if (!s) return;
    gpbt_idmap_commit(&b->live, s, ev->offset, b->n);
    vband_t *r = &b->v[b->n++];
    r->t0 = x, r->t1 = UINT64_MAX, r->size = ev->size;
    r->site = ev->site, r->tag = ev->tag;
    b->live_bytes += ev->size;
    if (b->live_bytes > b->peak) b->peak = b->live_bytes;
  } else if (ev->type == GPB_EV_FREE) {
    gpbt_idslot_t *s = gpbt_idmap_find(&b->live, ev->offset);
    if (!s) return;
    vband_t *r = &b->v[s->val];
    r->t1 = x;
    b->live_bytes -= r->size;
    gpbt_idmap_remove(&b->live, s);
    b->nfreed++;
  }
}

/* ------------------------------------------------------------- drawing */

static const vband_t *bands_sort_v;
static int bands_by_t1(const void *x, const void *y) {
  uint64_t a = bands_sort_v[*(const uint32_t *)x].t1;
  uint64_t b = bands_sort_v[*(const uint32_t *)y].t1;
  return a < b ? -1 : a > b;
}

/* The freed allocations by the op they were freed at (sorted again only
 * when allocations were freed since). */
static int bands_sort_frees(vbands_t *b) {
  if (b->by_free && b->sorted_nfreed == b->nfreed) return 0;
  uint32_t *f = realloc(b->by_free, (b->nfreed ? b->nfreed : 1) * sizeof *f);
  if (!f) return GPB_EHOSTMEM;
  b->by_free = f;
  size_t k = 0;
  for (size_t i = 0; i < b->n && k < b->nfreed; i++)
    if (b->v[i].t1 != UINT64_MAX) f[k++] = (uint32_t)i;
  b->nsorted = k;
  bands_sort_v = b->v;
  qsort(f, k, sizeof *f, bands_by_t1);
  b->sorted_nfreed = b->nfreed;
  return 0;
}

static void fen_add(uint64_t *t, size_t n, size_t i, int64_t d) {
  for (i++; i <= n; i += i & (0 - i)) t[i - 1] += (uint64_t)d;
}

/* The sum of t[0..i]. */
static uint64_t fen_sum(const uint64_t *t, size_t i) {
  uint64_t v = 0;
  for (i++; i; i -= i & (0 - i)) v += t[i - 1];
  return v;
}

/* The first index whose prefix sum exceeds `want`, or n. */
static size_t fen_find(const uint64_t *t, size_t n, uint64_t want) {
  size_t pos = 0, step = 1;
  while (step * 2 <= n) step *= 2;
  for (; step; step /= 2)
    if (pos + step <= n && t[pos + step - 1] <= want) {
      pos += step;
      want -= t[pos - 1];
    }
  return pos;
}

/* The colour of allocation i: hues a golden ratio apart, so neighbours
 * in the stack differ. */
static uint32_t bands_color(uint32_t i) { return vc_site(i * 7u + 1u); }

/* Renders the chart of [lo, hi) into img (w x h) and each pixel's
 * allocation (+1; 0 none) into who. */
static int bands_render(vbands_t *b, int w, int h, uint64_t lo, uint64_t hi) {
  size_t px = (size_t)w * (size_t)h;
  uint32_t *img = realloc(b->img, px * sizeof *img);
  if (!img) return GPB_EHOSTMEM;
  b->img = img;
  uint32_t *who = realloc(b->who, px * sizeof *who);
  if (!who) return GPB_EHOSTMEM;
  b->who = who;
  if (bands_sort_frees(b)) return GPB_EHOSTMEM;
  uint64_t *fen = calloc(b->n ? b->n : 1, sizeof *fen);
  if (!fen) return GPB_EHOSTMEM;
  double ymax = b->ymax > 0 ? b->ymax : 1;
  size_t ia = 0, jf = 0;
  uint64_t total = 0;
  for (int c = 0; c < w; c++) {
    /* The state at the end of the column's ops. */
    uint64_t x = lo + (uint64_t)((double)(hi - lo) * (c + 1) / w);
    for (; ia < b->n && b->v[ia].t0 <= x; ia++) {
      fen_add(fen, b->n, ia, (int64_t)b->v[ia].size);
      total += b->v[ia].size;
    }
    for (; jf < b->nsorted && b->v[b->by_free[jf]].t1 <= x; jf++) {
      uint32_t k = b->by_free[jf]; /* t0 <= t1 <= x: inserted above */
      fen_add(fen, b->n, k, -(int64_t)b->v[k].size);
      total -= b->v[k].size;
    }
    /* Row by row up the column; a band's rows in one search and one
     * sum (its top). */
    size_t k = 0;
    double top = -1;
    for (int r = 0; r < h; r++) {
      size_t at = (size_t)(h - 1 - r) * (size_t)w + (size_t)c;
      double want = (r + 0.5) * ymax / h;
      if (want >= (double)total) {
        img[at] = VC_BG, who[at] = 0;
        continue;
      }
      if (want >= top) {
        k = fen_find(fen, b->n, (uint64_t)want);
        top = (double)fen_sum(fen, k);
      }
      img[at] = bands_color((uint32_t)k), who[at] = (uint32_t)k + 1;
    }
  }
  free(fen);
  b->iw = w, b->ih = h, b->ilo = lo, b->ihi = hi, b->in = b->n;
  b->iymax = ymax;
  b->renders++;
  return 0;
}

int vbands_draw(vbands_t *b, gpbt_fb_t *fb, int x, int y, int w, int h,
                uint64_t lo, uint64_t hi, uint64_t now_ns) {
  if (w < 1 || h < 1) return 0;
  b->ymax = (double)b->peak;
  int stale = b->iw != w || b->ih != h || b->ilo != lo || b->ihi != hi ||
              b->iymax != (b->ymax > 0 ? b->ymax : 1);
  /* New data alone: drawn again at most twice a second. */
  if (!stale && b->in != b->n && now_ns - b->render_ns >= 500000000ull)
    stale = 1;
  if (stale || !b->img) {
    int rc = bands_render(b, w, h, lo, hi);
    if (rc) return rc;
    b->render_ns = now_ns;
  }
  for (int r = 0; r < h && y + r < fb->h; r++)
    memcpy(fb->px + (size_t)(y + r) * (size_t)fb->w + x,
           b->img + (size_t)r * (size_t)w, (size_t)w * sizeof *fb->px);
  return 0;
}

const vband_t *vbands_at(const vbands_t *b, int px, int py) {
  if (!b->who || px < 0 || py < 0 || px >= b->iw || py >= b->ih) return NULL;
  uint32_t k = b->who[(size_t)py * (size_t)b->iw + (size_t)px];
  return k ? &b->v[k - 1] : NULL;
}
