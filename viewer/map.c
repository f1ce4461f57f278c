/* SPDX-License-Identifier: MIT */
/*
 * map.c: the block map: layout of the pool's address space on a grid of
 * cells, and the per-cell sums the colors come from.
 *
 * Linear layout: cell i of the grid (row by row) covers bytes
 * [start + i*bpc, start + (i+1)*bpc), bpc a power of two (any size only at
 * the fit-all zoom), so every buddy block covers whole cells (bpc <= block)
 * or whole blocks share a cell (bpc > block). Each cell keeps sums over its
 * bytes: bytes in used blocks, bytes asked for (the request sits at the
 * front of its allocation; the tail is internal waste), order x bytes, block starts,
 * the last tag and call site, alloc time x bytes.
 *
 * Tree layout: one row per order; column c covers bytes
 * [start + c*bpc, +bpc); row k keeps the bytes of free and used blocks of
 * order k in that column. Bytes in smaller blocks show as "split".
 *
 * Events change the sums of only the cells their range touches, and those
 * cells are queued for recoloring, so the per-frame cost is the changed
 * cells, not the blocks in the pool. Block boundaries change only by SPLIT
 * and MERGE, which keeps the block-start counts exact. A view change
 * rebuilds the sums once from the model: O(blocks in view).
 */
#include "view.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAP_MAX_BPC (1ull << 31) /* used/req sums are 32-bit per cell */

static uint64_t map_min(uint64_t a, uint64_t b) { return a < b ? a : b; }
static uint64_t map_max(uint64_t a, uint64_t b) { return a > b ? a : b; }

static uint64_t map_pow2_ceil(uint64_t v) {
  if (v <= 1) return 1;
  return 1ull << (64 - __builtin_clzll(v - 1));
}

/* The largest aligned power-of-two block at unit u fitting in n units. */
static uint32_t map_canon(uint64_t u, uint64_t n) {
  uint32_t k = 63u - (uint32_t)__builtin_clzll(n);
  if (u) {
    uint32_t a = (uint32_t)__builtin_ctzll(u);
    if (a < k) k = a;
  }
  return k;
}

int vmap_init(vmap_t *m, uint64_t managed, uint64_t min_block) {
  memset(m, 0, sizeof *m);
  if (min_block < 16 || (min_block & (min_block - 1)) || managed < min_block)
    return GPB_EINVAL;
  m->managed = managed;
  m->min_block = min_block;
  m->min_shift = (uint32_t)__builtin_ctzll(min_block);
  uint64_t units = managed >> m->min_shift;
  m->norders = 64u - (uint32_t)__builtin_clzll(units);
  if (m->norders > GPB_MAX_ORDERS) m->norders = GPB_MAX_ORDERS;
  m->bpc = 1;
  return 0;
}

void vmap_free(vmap_t *m) {
  free(m->used);
  free(m->req);
  free(m->ordsum);
  free(m->nstart);
  free(m->tsum);
  free(m->tag);
  free(m->site);
  m->site = NULL;
  free(m->tfree);
  free(m->tused);
  free(m->rgb);
  free(m->dirty);
  free(m->dflag);
  free(m->stale);
  m->stale = NULL;
  m->used = m->req = m->nstart = m->rgb = m->dirty = NULL;
  m->ordsum = m->tfree = m->tused = NULL;
  m->tsum = NULL;
  m->tag = m->dflag = NULL;
  m->cap = 0;
}

static uint64_t map_span_cells(const vmap_t *m) {
  return m->layout == VLAYOUT_TREE ? (uint64_t)m->cols : (uint64_t)m->ncells;
}

/* Fit is the one zoom level whose cell size need not be a power of two,
 * so that the whole pool fills the map instead of half of it; zooming in
 * from it goes to powers of two, where blocks cover whole cells. */
static uint64_t map_fit_bpc(const vmap_t *m) {
  uint64_t cells = map_span_cells(m);
  if (!cells) return 1;
  uint64_t b = (m->managed + cells - 1) / cells;
  if (b < 1) b = 1;
  return b > MAP_MAX_BPC ? MAP_MAX_BPC : b;
}

static uint64_t map_pow2_floor(uint64_t v) {
  return v ? 1ull << (63 - __builtin_clzll(v)) : 1;
}

static uint64_t map_min_bpc(const vmap_t *m) {
  uint64_t b = m->min_block >> 4;
  return b ? b : 1;
}

/* Clamps zoom and position, recomputes `end` and asks for a rebuild. */
static void map_settle(vmap_t *m) {
  uint64_t fit = map_fit_bpc(m), lo = map_min_bpc(m);
  if (m->bpc > fit) m->bpc = fit;
  if (m->bpc < lo) m->bpc = lo > fit ? fit : lo;
  uint64_t span = map_span_cells(m) * m->bpc;
  uint64_t max_start = m->managed > span ? m->managed - span + m->bpc - 1 : 0;
  if (m->start > max_start) m->start = max_start;
  m->start -= m->start % m->bpc;
  m->end = map_min(m->managed, m->start + span);
  m->clip_lo = m->start;
  m->clip_hi = m->end;
  m->need_rebuild = 1;
}

int vmap_resize(vmap_t *m, int cols, int rows) {
  if (cols < 1) cols = 1;
  if (rows < 1) rows = 1;
  size_t n = (size_t)cols * (size_t)rows;
  size_t nt = (size_t)cols * m->norders;
  size_t need = n > nt ? n : nt;
  if (need > m->cap) {
    vmap_free(m);
    m->used = calloc(need, sizeof *m->used);
    m->req = calloc(need, sizeof *m->req);
    m->ordsum = calloc(need, sizeof *m->ordsum);
    m->nstart = calloc(need, sizeof *m->nstart);
    m->tsum = calloc(need, sizeof *m->tsum);
    m->tag = calloc(need, sizeof *m->tag);
    m->site = calloc(need, sizeof *m->site);
    m->tfree = calloc(need, sizeof *m->tfree);
    m->tused = calloc(need, sizeof *m->tused);
    m->rgb = calloc(need, sizeof *m->rgb);
    m->dirty = calloc(need, sizeof *m->dirty);
    m->dflag = calloc(need, sizeof *m->dflag);
    m->stale = calloc(need / VMAP_CHUNK + 1, 1);
    if (!m->stale || !m->used || !m->req || !m->ordsum || !m->nstart || !m->tsum ||
        !m->tag || !m->site || !m->tfree || !m->tused || !m->rgb || !m->dirty ||
        !m->dflag) {
      vmap_free(m);
      m->cols = m->rows = 0;
      m->ncells = 0;
      return GPB_EHOSTMEM;
    }
    m->cap = need;
  }
  m->cols = cols;
  m->rows = rows;
  m->ncells = n;
  /* Unzoomed, the view follows the window: it kept the old cell size,
   * so a smaller window showed only the start of the pool. */
  if (!m->zoomed) {
    m->bpc = map_fit_bpc(m);
    m->start = 0;
  }
  m->ndirty = 0;
  memset(m->dflag, 0, m->cap);
  map_settle(m);
  /* Grown past the zoom, the whole pool shows: fitted again. */
  if (m->zoomed && m->bpc >= map_fit_bpc(m)) m->zoomed = 0;
  return 0;
}

void vmap_set_layout(vmap_t *m, vlayout_t l) {
  m->layout = l;
  vmap_fit(m);
}

void vmap_set_color(vmap_t *m, vcolor_mode_t c) {
  m->color = c;
  m->all_dirty = 1;
  /* Age sums decay between rebuilds; start the mode exact. */
  if (c == VCOLOR_AGE) m->need_rebuild = 1;
}

void vmap_fit(vmap_t *m) {
  m->bpc = map_fit_bpc(m);
  m->start = 0;
  m->zoomed = 0;
  map_settle(m);
}

void vmap_zoom(vmap_t *m, int steps, uint64_t anchor, uint64_t anchor_cell) {
  uint64_t nb = m->bpc;
  for (; steps > 0 && nb > 1; steps--)
    nb = map_pow2_floor(nb) == nb ? nb >> 1 : map_pow2_floor(nb);
  for (; steps < 0 && nb < MAP_MAX_BPC; steps++) nb <<= 1;
  uint64_t fit = map_fit_bpc(m), lo = map_min_bpc(m);
  if (nb > fit) nb = fit;
  if (nb < lo) nb = lo;
  if (nb == m->bpc) return;
  m->bpc = nb;
  uint64_t back = anchor_cell * nb;
  m->start = anchor > back ? anchor - back : 0;
  map_settle(m);
  m->zoomed = m->bpc < map_fit_bpc(m);
}

void vmap_scroll(vmap_t *m, int64_t rows) {
  uint64_t step = m->layout == VLAYOUT_TREE
                      ? (uint64_t)(m->cols / 4 ? m->cols / 4 : 1) * m->bpc
                      : (uint64_t)m->cols * m->bpc;
  if (rows < 0) {
    uint64_t d = (uint64_t)(-rows) * step;
    m->start = m->start > d ? m->start - d : 0;
  } else {
    m->start += (uint64_t)rows * step;
  }
  map_settle(m);
}

void vmap_center(vmap_t *m, uint64_t off, uint64_t block_size) {
  uint64_t b = block_size / 8;
  m->bpc = b ? map_pow2_ceil(b) : 1;
  if (m->bpc > block_size && block_size) m->bpc = block_size;
  uint64_t fit = map_fit_bpc(m);
  if (m->bpc > fit) m->bpc = fit;
  uint64_t lead = m->layout == VLAYOUT_TREE
                      ? (uint64_t)(m->cols / 2)
                      : (uint64_t)(m->rows / 2) * (uint64_t)m->cols;
  uint64_t back = lead * m->bpc;
  m->start = off > back ? off - back : 0;
  map_settle(m);
  m->zoomed = m->bpc < map_fit_bpc(m);
}

uint64_t vmap_offset_at(const vmap_t *m, int cx, int cy) {
  if (cx < 0 || cx >= m->cols || cy < 0) return UINT64_MAX;
  uint64_t c;
  if (m->layout == VLAYOUT_TREE) {
    c = (uint64_t)cx;
  } else {
    if (cy >= m->rows) return UINT64_MAX;
    c = (uint64_t)cy * (uint64_t)m->cols + (uint64_t)cx;
  }
  uint64_t off = m->start + c * m->bpc;
  return off < m->end ? off : UINT64_MAX;
}

/* ----------------------------------------------------- incremental sums */

static void map_mark(vmap_t *m, uint64_t c) {
  if (!m->dflag[c]) {
    m->dflag[c] = 1;
    m->dirty[m->ndirty++] = (uint32_t)c;
  }
}

/* Cells [*c0, *c1] meet bytes [off, off+len) clipped to the view, which
 * is [*lo, *hi). 0 when nothing is visible. */
static int map_cells(const vmap_t *m, uint64_t off, uint64_t len, uint64_t *c0,
                     uint64_t *c1, uint64_t *lo, uint64_t *hi) {
  uint64_t a = map_max(off, m->clip_lo);
  uint64_t b = map_min(off + len, m->clip_hi);
  if (b <= a) return 0;
  *lo = a;
  *hi = b;
  *c0 = (a - m->start) / m->bpc;
  *c1 = (b - 1 - m->start) / m->bpc;
  return 1;
}

static uint64_t map_ov(const vmap_t *m, uint64_t c, uint64_t lo, uint64_t hi) {
  uint64_t cs = m->start + c * m->bpc;
  return map_min(hi, cs + m->bpc) - map_max(lo, cs);
}

/* Marks cells for recoloring; a huge range recolors everything instead. */
static void map_touch(vmap_t *m, uint64_t c0, uint64_t c1) {
  if (m->all_dirty) return;
  if (c1 - c0 >= m->ncells / 4) {
    m->all_dirty = 1;
    return;
  }
  for (uint64_t c = c0; c <= c1; c++) map_mark(m, c);
}

enum { MAP_USED, MAP_REQ, MAP_ORD };

static void map_add(vmap_t *m, int what, uint64_t off, uint64_t len,
                    int64_t sign) {
  uint64_t c0, c1, lo, hi;
  if (!len || !map_cells(m, off, len, &c0, &c1, &lo, &hi)) return;
  for (uint64_t c = c0; c <= c1; c++) {
    uint64_t ov = map_ov(m, c, lo, hi);
    switch (what) {
    case MAP_USED:
      m->used[c] += (uint32_t)(sign * (int64_t)ov);
      break;
    case MAP_REQ:
      m->req[c] += (uint32_t)(sign * (int64_t)ov);
      break;
    default:
      m->ordsum[c] += (uint64_t)(sign * (int64_t)ov);
    }
  }
  map_touch(m, c0, c1);
}

static float map_ms(const vmap_t *m, uint64_t t) {
  return t > m->t0_ns ? (float)((double)(t - m->t0_ns) / 1e6) : 0.0f;
}

/* A used range [off, off+len) appears (sign 1) or goes (sign -1). */
static void map_used(vmap_t *m, uint64_t off, uint64_t len, uint64_t t,
                     uint32_t tag, uint32_t site, int sign) {
  uint64_t c0, c1, lo, hi;
  if (!map_cells(m, off, len, &c0, &c1, &lo, &hi)) return;
  float ms = map_ms(m, t);
  for (uint64_t c = c0; c <= c1; c++) {
    uint64_t ov = map_ov(m, c, lo, hi);
    if (sign > 0) {
      m->used[c] += (uint32_t)ov;
      m->tsum[c] += ms * (float)ov;
      m->tag[c] = (uint8_t)tag;
      m->site[c] = (uint16_t)site;
    } else {
      /* The allocation's own time is gone with it; scale the cell's sum
       * as if it had the cell's average age (exact again at rebuild). */
      uint32_t u = m->used[c];
      m->tsum[c] = u > ov ? m->tsum[c] * (float)(u - ov) / (float)u : 0.0f;
      m->used[c] = u - (uint32_t)ov;
    }
  }
  map_touch(m, c0, c1);
}

static void map_tree_add(vmap_t *m, uint64_t *arr, uint32_t k, uint64_t off,
                         uint64_t len, int64_t sign) {
  uint64_t c0, c1, lo, hi;
  if (k >= m->norders || !map_cells(m, off, len, &c0, &c1, &lo, &hi)) return;
  uint64_t *row = arr + (size_t)k * (size_t)m->cols;
  for (uint64_t c = c0; c <= c1; c++)
    row[c] += (uint64_t)(sign * (int64_t)map_ov(m, c, lo, hi));
}

/* Moves the canonical blocks of a range between the free and used rows. */
static void map_tree_run(vmap_t *m, uint64_t off, uint64_t size, int to_used) {
  uint64_t u = off >> m->min_shift, n = size >> m->min_shift;
  while (n) {
    uint32_t k = map_canon(u, n);
    uint64_t o = u << m->min_shift, s = (1ull << k) << m->min_shift;
    map_tree_add(m, m->tfree, k, o, s, to_used ? -1 : 1);
    map_tree_add(m, m->tused, k, o, s, to_used ? 1 : -1);
    u += 1ull << k;
    n -= 1ull << k;
  }
}

/* A wide event: mark its chunks stale instead of touching its cells. */
static int map_wide(vmap_t *m, uint64_t off, uint64_t len) {
  uint64_t c0, c1, lo, hi;
  if (!map_cells(m, off, len, &c0, &c1, &lo, &hi)) return 1;
  if (c1 - c0 < VMAP_WIDE) return 0;
  /* Past a quarter of the chunks, vmap_refresh walks the whole view
   * anyway: say so once instead of marking more. */
  size_t n = m->layout == VLAYOUT_TREE ? (size_t)m->cols : m->ncells;
  if (m->nstale + (c1 - c0) / VMAP_CHUNK > n / VMAP_CHUNK / 4) {
    m->need_rebuild = 1;
    return 1;
  }
  for (uint64_t k = c0 / VMAP_CHUNK; k <= c1 / VMAP_CHUNK; k++)
    if (!m->stale[k]) {
      m->stale[k] = 1;
      m->nstale++;
    }
  return 1;
}

void vmap_event(vmap_t *m, const gpb_event_t *ev) {
  if (!m->t0_ns && ev->time_ns) m->t0_ns = ev->time_ns;
  if (ev->time_ns > m->now_ns) m->now_ns = ev->time_ns;
  if (m->need_rebuild || !m->ncells) return; /* the rebuild will see it */
  if (ev->type != GPB_EV_FAIL && map_wide(m, ev->offset, ev->size)) return;
  int tree = m->layout == VLAYOUT_TREE;
  uint64_t half = ev->size / 2;
  switch (ev->type) {
  case GPB_EV_ALLOC:
  case GPB_EV_FREE: {
    int sign = ev->type == GPB_EV_ALLOC ? 1 : -1;
    if (tree) {
      map_tree_run(m, ev->offset, ev->size, sign > 0);
      m->all_dirty = 1;
    } else {
      map_used(m, ev->offset, ev->size, ev->time_ns, ev->tag, ev->site, sign);
      map_add(m, MAP_REQ, ev->offset, map_min(ev->requested, ev->size), sign);
    }
    break;
  }
  case GPB_EV_SPLIT:
  case GPB_EV_MERGE: {
    int sign = ev->type == GPB_EV_SPLIT ? 1 : -1;
    if (ev->order == 0) break; /* not a valid split or merge */
    if (tree) {
      map_tree_add(m, m->tfree, ev->order, ev->offset, ev->size, -sign);
      map_tree_add(m, m->tfree, ev->order - 1u, ev->offset, ev->size, sign);
      m->all_dirty = 1;
    } else {
      map_add(m, MAP_ORD, ev->offset, ev->size, -sign);
      uint64_t mid = ev->offset + half;
      if (mid >= m->start && mid < m->end) {
        uint64_t c = (mid - m->start) / m->bpc;
        m->nstart[c] += (uint32_t)sign;
        if (!m->all_dirty) map_mark(m, c);
      }
    }
    break;
  }
  default:
    break;
  }
}

/* ---------------------------------------------------------------- rebuild */

static void map_block(vmap_t *m, const gpb_block_info_t *b) {
  if (m->layout == VLAYOUT_TREE) {
    map_tree_add(m, b->used ? m->tused : m->tfree, b->order, b->offset,
                 b->size, 1);
    return;
  }
  uint64_t c0, c1, lo, hi;
  if (!map_cells(m, b->offset, b->size, &c0, &c1, &lo, &hi)) return;
  if (b->offset >= m->clip_lo) m->nstart[c0]++;
  float ms = map_ms(m, b->time_ns);
  uint64_t r0 = b->alloc_offset, r1 = b->alloc_offset + b->requested;
  for (uint64_t c = c0; c <= c1; c++) {
    uint64_t ov = map_ov(m, c, lo, hi);
    m->ordsum[c] += (uint64_t)b->order * ov;
    if (!b->used) continue;
    m->used[c] += (uint32_t)ov;
    m->tsum[c] += ms * (float)ov;
    m->tag[c] = (uint8_t)b->tag;
    m->site[c] = (uint16_t)b->site;
    uint64_t cs = m->start + c * m->bpc;
    uint64_t a = map_max(map_max(lo, cs), r0);
    uint64_t z = map_min(map_min(hi, cs + m->bpc), r1);
    if (z > a) m->req[c] += (uint32_t)(z - a);
  }
}

static int map_visit_cb(const gpb_block_info_t *b, void *user) {
  vmap_t *m = user;
  if (b->offset >= m->end) return 1;
  if (b->offset + b->size > m->start) map_block(m, b);
  return 0;
}

/* Rebuilds chunk k (cells or columns [k*CH, (k+1)*CH)) from the model. */
static void map_rebuild_chunk(vmap_t *m, const gpb_model_t *model, size_t k) {
  size_t n = m->layout == VLAYOUT_TREE ? (size_t)m->cols : m->ncells;
  size_t c0 = k * VMAP_CHUNK, c1 = c0 + VMAP_CHUNK;
  if (c1 > n) c1 = n;
  if (c0 >= c1) return;
  if (m->layout == VLAYOUT_TREE) {
    for (uint32_t o = 0; o < m->norders; o++) {
      size_t r = (size_t)o * (size_t)m->cols;
      memset(m->tfree + r + c0, 0, (c1 - c0) * sizeof *m->tfree);
      memset(m->tused + r + c0, 0, (c1 - c0) * sizeof *m->tused);
    }
    m->all_dirty = 1;
  } else {
    memset(m->used + c0, 0, (c1 - c0) * sizeof *m->used);
    memset(m->req + c0, 0, (c1 - c0) * sizeof *m->req);
    memset(m->ordsum + c0, 0, (c1 - c0) * sizeof *m->ordsum);
    memset(m->nstart + c0, 0, (c1 - c0) * sizeof *m->nstart);
    memset(m->tsum + c0, 0, (c1 - c0) * sizeof *m->tsum);
    memset(m->tag + c0, 0, (c1 - c0) * sizeof *m->tag);
    memset(m->site + c0, 0, (c1 - c0) * sizeof *m->site);
    if (!m->all_dirty)
      for (size_t c = c0; c < c1; c++) map_mark(m, c);
  }
  m->clip_lo = m->start + c0 * m->bpc;
  m->clip_hi = map_min(m->start + c1 * m->bpc, m->end);
  gpb_block_info_t b;
  for (uint64_t off = m->clip_lo; off < m->clip_hi; off = b.offset + b.size) {
    if (gpb_model_lookup(model, off, &b) != 0 || b.size == 0) break;
    map_block(m, &b);
  }
  m->clip_lo = m->start;
  m->clip_hi = m->end;
}

void vmap_refresh(vmap_t *m, const gpb_model_t *model) {
  if (!m->nstale) return;
  size_t n = m->layout == VLAYOUT_TREE ? (size_t)m->cols : m->ncells;
  size_t nch = (n + VMAP_CHUNK - 1) / VMAP_CHUNK;
  /* Many stale chunks: one walk of the view is cheaper than lookups. */
  if (m->nstale > nch / 4) {
    vmap_rebuild(m, model);
    return;
  }
  for (size_t k = 0; k < nch && m->nstale; k++)
    if (m->stale[k]) {
      m->stale[k] = 0;
      m->nstale--;
      if (model) map_rebuild_chunk(m, model, k);
    }
}

void vmap_rebuild(vmap_t *m, const gpb_model_t *model) {
  m->need_rebuild = 0;
  m->all_dirty = 1;
  if (m->stale) memset(m->stale, 0, m->cap / VMAP_CHUNK + 1);
  m->nstale = 0;
  if (!m->ncells) return;
  size_t n = m->layout == VLAYOUT_TREE ? (size_t)m->cols * m->norders
                                       : m->ncells;
  if (m->layout == VLAYOUT_TREE) {
    memset(m->tfree, 0, n * sizeof *m->tfree);
    memset(m->tused, 0, n * sizeof *m->tused);
  } else {
    memset(m->used, 0, n * sizeof *m->used);
    memset(m->req, 0, n * sizeof *m->req);
    memset(m->ordsum, 0, n * sizeof *m->ordsum);
    memset(m->nstart, 0, n * sizeof *m->nstart);
    memset(m->tsum, 0, n * sizeof *m->tsum);
    memset(m->tag, 0, n * sizeof *m->tag);
    memset(m->site, 0, n * sizeof *m->site);
  }
  if (!model) return;
  if (m->end - m->start >= m->managed / 4) {
    gpb_model_visit(model, map_visit_cb, m);
    return;
  }
  /* Zoomed in: walk only the blocks in view. */
  gpb_block_info_t b;
  for (uint64_t off = m->start; off < m->end; off = b.offset + b.size) {
    if (gpb_model_lookup(model, off, &b) != 0 || b.size == 0) break;
    map_block(m, &b);
  }
}

/* ----------------------------------------------------------------- colors */

static uint32_t map_blend3(uint32_t a, uint64_t wa, uint32_t b, uint64_t wb,
                           uint32_t c, uint64_t wc) {
  double t = (double)wa + (double)wb + (double)wc;
  if (t <= 0) return c;
  uint32_t out = 0xFF000000u;
  for (int s = 0; s < 24; s += 8) {
    double v = (((a >> s) & 0xFF) * (double)wa + ((b >> s) & 0xFF) * (double)wb +
                ((c >> s) & 0xFF) * (double)wc) / t;
    out |= (uint32_t)(v + 0.5) << s;
  }
  return out;
}

static uint32_t map_cell_color(const vmap_t *m, uint64_t c) {
  uint64_t cs = m->start + c * m->bpc;
  if (cs >= m->end) return VC_BG;
  uint64_t bytes = map_min(m->bpc, m->end - cs);
  uint64_t u = map_min(m->used[c], bytes), r = map_min(m->req[c], u);
  double uf = (double)u / (double)bytes;
  uint32_t col;
  switch (m->color) {
  case VCOLOR_ORDER: {
    double avg = (double)m->ordsum[c] / (double)bytes;
    double t = m->norders > 1 ? avg / (double)(m->norders - 1) : 0;
    uint32_t oc = vc_ramp(t);
    col = vc_mix(vc_free_of(oc), oc, uf);
    break;
  }
  case VCOLOR_TAG:
    col = vc_mix(VC_FREE, vc_tag(m->tag[c]), uf);
    break;
  case VCOLOR_SITE:
    col = vc_mix(VC_FREE, vc_site(m->site[c]), uf);
    break;
  case VCOLOR_AGE: {
    double now = m->now_ns > m->t0_ns ? (double)(m->now_ns - m->t0_ns) / 1e6 : 0;
    double t = 1.0;
    if (u && now > 0) {
      double age = now - (double)m->tsum[c] / (double)u;
      if (age < 0) age = 0;
      t = 1.0 - log1p(age) / log1p(now);
    }
    col = vc_mix(VC_FREE, vc_ramp(t), uf);
    break;
  }
  default:
    /* Most cells are of one kind: skip the blend for them. */
    if (u == 0) col = VC_FREE;
    else if (u == bytes && r == u) col = VC_USED;
    else if (u == bytes && r == 0) col = VC_WASTE;
    else col = map_blend3(VC_USED, r, VC_WASTE, u - r, VC_FREE, bytes - u);
  }
  if (m->nstart[c] && m->bpc * 2 <= m->min_block) col = vc_scale(col, 0.55);
  if (bytes < m->bpc) col = vc_mix(VC_BG, col, (double)bytes / (double)m->bpc);
  return col;
}

/* Tree rows keep bytes per order, not per allocation, so only state and
 * order colors apply there; tag and age show as state. */
vcolor_mode_t vmap_tree_color(vcolor_mode_t c) {
  return c == VCOLOR_ORDER ? VCOLOR_ORDER : VCOLOR_STATE;
}

static void map_tree_colorize(vmap_t *m) {
  int by_order = vmap_tree_color(m->color) == VCOLOR_ORDER;
  for (int c = 0; c < m->cols; c++) {
    uint64_t cs = m->start + (uint64_t)c * m->bpc;
    uint64_t below = 0;
    for (uint32_t k = 0; k < m->norders; k++) {
      size_t i = (size_t)k * (size_t)m->cols + (size_t)c;
      if (cs >= m->end) {
        m->rgb[i] = VC_BG;
        continue;
      }
      uint64_t f = m->tfree[i], u = m->tused[i];
      uint64_t rest = f + u + below < m->bpc ? m->bpc - f - u - below : 0;
      uint32_t uc = VC_USED, fc = VC_FREE;
      if (by_order) {
        uc = vc_ramp(m->norders > 1 ? (double)k / (m->norders - 1) : 0);
        fc = vc_free_of(uc);
      }
      uint32_t col = map_blend3(uc, u, fc, f, VC_SPLIT, below);
      col = map_blend3(col, f + u + below, VC_BG, rest, VC_BG, 0);
      uint64_t bs = m->min_block << k;
      /* A block of this order starts inside this column. */
      if (f + u && bs >= 4 * m->bpc && (cs % bs == 0 || cs % bs + m->bpc > bs))
        col = vc_scale(col, 0.5);
      m->rgb[i] = col;
      below += f + u;
    }
  }
}

void vmap_colorize(vmap_t *m) {
  if (!m->ncells) return;
  if (m->layout == VLAYOUT_TREE) {
    map_tree_colorize(m);
  } else if (m->all_dirty) {
    for (size_t c = 0; c < m->ncells; c++) m->rgb[c] = map_cell_color(m, c);
  } else {
    for (size_t i = 0; i < m->ndirty; i++)
      m->rgb[m->dirty[i]] = map_cell_color(m, m->dirty[i]);
  }
  for (size_t i = 0; i < m->ndirty; i++) m->dflag[m->dirty[i]] = 0;
  m->ndirty = 0;
  m->all_dirty = 0;
}
