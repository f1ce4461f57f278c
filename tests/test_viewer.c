/* SPDX-License-Identifier: MIT */
/*
 * test_viewer.c: gpubuddy-view's drawing and replay, with no display.
 *
 *  - known layout: a few ops with known placement are replayed and the
 *    frame is read back pixel by pixel (free, used, waste, block starts),
 *    in the block map and in the buddy-tree layout;
 *  - incremental = rebuilt: after seeded random churn (both policies, at
 *    several zooms) the cell sums kept from events equal a rebuild from
 *    the model;
 *  - replay stats: replaying ops to the end through the viewer gives the
 *    gpb_stats_t of a direct replay through a pool, also after scrubbing
 *    backwards; through a trace file too when trace files are built;
 *  - PNG: the file decodes (zlib) back to the frame's pixels;
 *  - bad input: a garbled trace stops the replay with a message;
 *  - grid: several pools laid out side by side, each showing its own;
 *    a click focuses one, G comes back;
 *  - free blocks clear of the background and of used blocks in every
 *    coloring; a long title cut at its start; --speed 0 stepping bounded
 *    by its time budget per update;
 *  - why: a trace's call sites in the hover, the site colors, the side
 *    panel and the timeline; a failed allocation marked, explained (in
 *    a replay and live) and reached by a click on the timeline.
 */
#include "testutil.h"
#include "view.h"

#include <inttypes.h>
#include <unistd.h>
#include <zlib.h>

#define KIB 1024ull

static uint32_t px(const gpbt_fb_t *fb, int x, int y) {
  ASSERT(x >= 0 && x < fb->w && y >= 0 && y < fb->h);
  return fb->px[(size_t)y * (size_t)fb->w + (size_t)x];
}

/* A pixel of the map of view `a`, at (x, y) from the map's corner. */
#define ASSERT_MPX(fb, x, y, want) ASSERT_PX(fb, a.map_x + (x), a.map_y + (y), want)

#define ASSERT_PX(fb, x, y, want)                                            \
  do {                                                                       \
    uint32_t got_ = px(fb, x, y), want_ = (want);                            \
    if (got_ != want_)                                                       \
      FAILF("pixel (%d,%d) is %08x, expected %s = %08x", (int)(x), (int)(y), \
            got_, #want, want_);                                             \
  } while (0)

static gpb_trace_op_t op_alloc(uint64_t id, uint64_t size, uint32_t tag) {
  gpb_trace_op_t o = {0};
  o.op = GPB_OP_ALLOC;
  o.id = id;
  o.size = size;
  o.tag = tag;
  return o;
}

static gpb_trace_op_t op_free(uint64_t id) {
  gpb_trace_op_t o = {0};
  o.op = GPB_OP_FREE;
  o.id = id;
  return o;
}

static void cfg_for(gpb_config_t *c, uint64_t pool, uint64_t minb,
                    gpb_policy_t pol) {
  gpb_config_init(c);
  c->backend = GPB_BACKEND_VIRTUAL;
  c->pool_size = pool;
  c->min_block = minb;
  c->policy = pol;
  c->flags = GPB_CFG_NO_ENV;
}

/* A paused replay of ops[0..n) at op `at`, in a 1 MiB buddy pool of 4
 * KiB blocks: the set-up most tests here share. */
static void replay_at(vapp_t *a, const gpb_trace_op_t *ops, size_t n,
                      uint64_t at) {
  vops_t *o;
  ASSERT_OK(vops_open_array(ops, n, &o));
  gpb_config_t cfg;
  cfg_for(&cfg, 1024 * KIB, 4 * KIB, GPB_POLICY_BUDDY);
  ASSERT_OK(vapp_open_replay(a, o, &cfg));
  ASSERT_OK(vapp_seek(a, at));
  a->paused = 1;
}

/* 1 MiB pool of 4 KiB blocks on a 512x256 map: 8 bytes per cell, so each
 * row of the map is exactly one minimum block. */
static void test_known_layout(void) {
  gpb_trace_op_t ops[] = {
      op_alloc(0, 256 * KIB, 1), /* [0, 256K): order 6 */
      op_alloc(1, 3000, 2),      /* [256K, 260K): 3000 asked, 1096 waste */
      op_alloc(2, 64 * KIB, 3),  /* [320K, 384K) */
      op_free(0),                /* [0, 256K) free again (buddy is split) */
  };
  vapp_t a;
  replay_at(&a, ops, 4, 4);
  gpbt_fb_t fb;
  ASSERT_OK(gpbt_fb_init(&fb, 822, 280));
  vapp_update(&a, 0);
  vframe_draw(&a, &fb);
  /* Geometry: the map is 512x256 right of the ruler's 60-pixel margin
   * ("6 256 KiB" and a space), one pixel per cell. */
  ASSERT_EQ(a.map_x, 60);
  ASSERT_EQ(a.map_w, 512);
  ASSERT_EQ(a.map_h, 256);
  ASSERT_EQ(a.map.cols, 512);
  ASSERT_EQ(a.map.rows, 256);
  ASSERT_U64_EQ(a.map.bpc, 8);
  ASSERT_U64_EQ(a.map.start, 0);

  uint32_t used_start = vc_scale(VC_USED, 0.55), free_start = vc_scale(VC_FREE, 0.55);
  ASSERT_MPX(&fb, 100, 10, VC_FREE);   /* freed [0, 256K) */
  ASSERT_MPX(&fb, 0, 0, free_start);   /* ... which starts a block */
  ASSERT_MPX(&fb, 0, 1, VC_FREE);      /* no block starts at 4K */
  ASSERT_MPX(&fb, 100, 64, VC_USED);   /* the 3000 bytes asked for */
  ASSERT_MPX(&fb, 374, 64, VC_USED);   /* byte 2992..2999 */
  ASSERT_MPX(&fb, 375, 64, VC_WASTE);  /* byte 3000.. is waste */
  ASSERT_MPX(&fb, 511, 64, VC_WASTE);
  ASSERT_MPX(&fb, 0, 64, used_start);
  ASSERT_MPX(&fb, 0, 65, free_start);  /* 4K free buddy at 260K */
  ASSERT_MPX(&fb, 0, 66, free_start);  /* 8K free at 264K */
  ASSERT_MPX(&fb, 0, 67, VC_FREE);
  ASSERT_MPX(&fb, 0, 68, free_start);  /* 16K free at 272K */
  ASSERT_MPX(&fb, 300, 70, VC_FREE);
  ASSERT_MPX(&fb, 0, 80, used_start);  /* 64K used at 320K */
  ASSERT_MPX(&fb, 200, 80, VC_USED);
  ASSERT_MPX(&fb, 511, 95, VC_USED);
  ASSERT_MPX(&fb, 0, 96, free_start);  /* 128K free at 384K */
  ASSERT_MPX(&fb, 0, 128, free_start); /* 512K free at 512K */
  ASSERT_MPX(&fb, 400, 255, VC_FREE);

  /* Hovering the waste shows the box: its border is drawn in VC_DIM. */
  a.mouse_in = 1;
  a.mouse_x = a.map_x + 400;
  a.mouse_y = 64;
  vframe_draw(&a, &fb);
  ASSERT_MPX(&fb, 400 + 14, 64 + 14, VC_DIM);
  a.mouse_in = 0;

  /* The buddy tree: 9 orders, 512 columns of 2 KiB, one row per order
   * (order 8 on top). */
  vinput_key(&a, 't');
  vframe_draw(&a, &fb);
  ASSERT_EQ(a.map.layout, VLAYOUT_TREE);
  ASSERT_U64_EQ(a.map.bpc, 2 * KIB);
  int rp = a.row_px;
  ASSERT_EQ(rp, a.map_h / 9); /* a line of offsets under the rows */
  ASSERT_EQ(a.map_w, 512);
#define ROW_Y(k) ((8 - (k)) * rp + rp / 2)
  ASSERT_MPX(&fb, 10, ROW_Y(8), VC_SPLIT);  /* the root is split */
  ASSERT_MPX(&fb, 10, ROW_Y(6), VC_FREE);   /* [0, 256K) free, order 6 */
  ASSERT_MPX(&fb, 0, ROW_Y(6), vc_scale(VC_FREE, 0.5)); /* its start */
  ASSERT_MPX(&fb, 10, ROW_Y(5), VC_BG);     /* nothing of order 5 there */
  ASSERT_MPX(&fb, 128, ROW_Y(0), VC_USED);  /* 4K used at 256K */
  ASSERT_MPX(&fb, 130, ROW_Y(0), VC_FREE);  /* its free buddy */
  ASSERT_MPX(&fb, 128, ROW_Y(1), VC_SPLIT);
  ASSERT_MPX(&fb, 170, ROW_Y(4), VC_USED);  /* 64K used at 320K = col 160.. */
  ASSERT_MPX(&fb, 300, ROW_Y(8), VC_SPLIT);
  ASSERT_MPX(&fb, 300, ROW_Y(7), VC_FREE);  /* 512K free at 512K */
  /* By order, the tree colors each row by its order: used in the ramp's
   * color, free greyed (it drew state colors whatever the mode). */
  vinput_key(&a, '2');
  vframe_draw(&a, &fb);
  ASSERT_EQ(a.map.color, VCOLOR_ORDER);
  ASSERT_MPX(&fb, 10, ROW_Y(6), vc_free_of(vc_ramp(6 / 8.0)));
  ASSERT_MPX(&fb, 128, ROW_Y(0), vc_ramp(0));
  ASSERT_MPX(&fb, 130, ROW_Y(0), vc_free_of(vc_ramp(0)));
  ASSERT_MPX(&fb, 170, ROW_Y(4), vc_ramp(4 / 8.0));
  ASSERT_MPX(&fb, 300, ROW_Y(8), VC_SPLIT);
  ASSERT_MPX(&fb, 10, ROW_Y(5), VC_BG);
  /* Tag and age need allocations, which tree rows do not keep: state. */
  vinput_key(&a, '3');
  vframe_draw(&a, &fb);
  ASSERT_MPX(&fb, 128, ROW_Y(0), VC_USED);
  ASSERT_MPX(&fb, 130, ROW_Y(0), VC_FREE);
  vinput_key(&a, '1');
#undef ROW_Y

  /* Esc with nothing selected does not quit (only q does). */
  ASSERT_EQ(vinput_key(&a, VKEY_ESC), 0);
  /* Search by offset selects and zooms. The '/' that opens the prompt
   * also arrives as text, as SDL sends it: it is not part of the search. */
  vinput_key(&a, 't');
  vinput_key(&a, '/');
  vinput_text(&a, "/");
  vinput_text(&a, "0x51000");
  vinput_key(&a, VKEY_ENTER);
  ASSERT(a.have_sel);
  ASSERT_U64_EQ(a.sel_off, 0x51000);
  ASSERT(a.map.start <= 0x50000 && a.map.end > 0x51000);
  vframe_draw(&a, &fb);
  gpbt_fb_free(&fb);
  vapp_close(&a);
}

/* ------------------------------------------------------------- text */

/* Whether `text` is drawn in `color` at scale `sc` with its top left in
 * [x0, x1) x [y0, y1): its glyph pixels in that color, the rest of its
 * cells not. Lets a test read the panels without knowing their layout. */
static int fb_has_text(const gpbt_fb_t *fb, int x0, int y0, int x1, int y1,
                       int sc, uint32_t color, const char *text) {
  gpbt_fb_t m;
  int w = gpbt_font_width(sc, text), h = GPBT_FONT_H * sc;
  ASSERT_OK(gpbt_fb_init(&m, w, h));
  gpbt_fb_fill(&m, 0, 0, w, h, 0);
  gpbt_font_draw(&m, 0, 0, sc, 1, text);
  int found = 0;
  if (x0 < 0) x0 = 0;
  if (y0 < 0) y0 = 0;
  for (int y = y0; y < y1 && y + h <= fb->h && !found; y++)
    for (int x = x0; x < x1 && x + w <= fb->w && !found; x++) {
      int ok = 1;
      for (int j = 0; j < h && ok; j++)
        for (int i = 0; i < w && ok; i++) {
          uint32_t p = fb->px[(size_t)(y + j) * (size_t)fb->w + (size_t)(x + i)];
          ok = m.px[j * w + i] ? p == color : p != color;
        }
      found = ok;
    }
  gpbt_fb_free(&m);
  return found;
}

#define ASSERT_TEXT(fb, color, text)                                   \
  do {                                                                 \
    if (!fb_has_text(fb, 0, 0, (fb)->w, (fb)->h, 1, color, text))     \
      FAILF("\"%s\" is not drawn in %08x", text, (unsigned)(color));   \
  } while (0)

/* ------------------------------------------------------------ contrast */

/* Sum of absolute RGB differences: 0 same, 765 black against white. */
static int rgb_dist(uint32_t a, uint32_t b) {
  int d = 0;
  for (int s = 0; s < 24; s += 8) {
    int x = (int)((a >> s) & 0xFF) - (int)((b >> s) & 0xFF);
    d += x < 0 ? -x : x;
  }
  return d;
}

#define FREE_BG_MIN 150   /* free against the background */
#define FREE_USED_MIN 70  /* free against a used block of the same mode */

/* Free blocks, read back from drawn maps, stand clear of the background
 * and of used blocks in every color mode and both layouts (free was
 * 0xFF2A3A2C, 84 from the background; order mode darkened free small
 * blocks to 45 from it). */
static void test_free_contrast(void) {
  gpb_trace_op_t ops[] = {op_alloc(0, 64 * KIB, 5), op_alloc(1, 4 * KIB, 9)};
  vapp_t a;
  replay_at(&a, ops, 2, 2);
  gpbt_fb_t fb;
  ASSERT_OK(gpbt_fb_init(&fb, 822, 280));
  for (int mode = 0; mode < VCOLOR_COUNT; mode++) {
    vmap_set_color(&a.map, (vcolor_mode_t)mode);
    vframe_draw(&a, &fb);
    /* Row 32 (the 4K block at 64K) is used from x 0; row 200 is free. */
    uint32_t used = px(&fb, a.map_x + 300, 0), free_ = px(&fb, a.map_x + 300, 200);
    uint32_t used4k = px(&fb, a.map_x + 300, 16);
    int dbg = rgb_dist(free_, VC_BG), du = rgb_dist(free_, used);
    if (dbg < FREE_BG_MIN || du < FREE_USED_MIN ||
        rgb_dist(free_, used4k) < FREE_USED_MIN)
      FAILF("mode %d: free %08x is %d from the background, %d and %d from "
            "used %08x %08x", mode, free_, dbg, du, rgb_dist(free_, used4k),
            used, used4k);
  }
  /* Order mode at every order, as the tree and the ramp draw it. */
  for (int k = 0; k <= 16; k++) {
    uint32_t u = vc_ramp(k / 16.0), f = vc_free_of(u);
    if (rgb_dist(f, VC_BG) < FREE_BG_MIN || rgb_dist(f, u) < FREE_USED_MIN ||
        rgb_dist(f, VC_SPLIT) < FREE_USED_MIN)
      FAILF("order %d/16: free %08x against bg %d, used %08x %d, split %d",
            k, f, rgb_dist(f, VC_BG), u, rgb_dist(f, u), rgb_dist(f, VC_SPLIT));
  }
  ASSERT(rgb_dist(VC_FREE, VC_USED) >= FREE_USED_MIN);
  ASSERT(rgb_dist(VC_FREE, VC_WASTE) >= FREE_USED_MIN);
  for (uint32_t t = 0; t < 16; t++)
    if (rgb_dist(VC_FREE, vc_tag(t)) < FREE_USED_MIN)
      FAILF("tag %u: %08x is %d from free", t, vc_tag(t),
            rgb_dist(VC_FREE, vc_tag(t)));
  gpbt_fb_free(&fb);
  vapp_close(&a);
}

/* ---------------------------------------------------------- full speed */

/* --speed 0 steps for a time budget per update, not a fixed 1e6 ops
 * (which took the window to 3-5 fps): with a budget of 1 ns an update
 * runs one chunk, and with the default one (8 ms) ten updates do not
 * reach the end of 3M ops. */
static void test_full_speed(void) {
  vops_t *o;
  ASSERT_OK(vops_open_pattern("churn", 3000000, 256u << 20, 256, 1, &o));
  gpb_config_t cfg;
  cfg_for(&cfg, 256u << 20, 256, GPB_POLICY_BUDDY);
  vapp_t a;
  ASSERT_OK(vapp_open_replay(&a, o, &cfg));
  gpbt_fb_t fb;
  ASSERT_OK(gpbt_fb_init(&fb, 640, 400));
  vframe_layout(&a, fb.w, fb.h);
  a.speed = 0;
  a.step_budget_ns = 1;
  vapp_update(&a, 1.0 / 60);
  uint64_t pos = vapp_pos(&a);
  if (pos == 0 || pos > VAPP_STEP_CHUNK)
    FAILF("one update at a 1 ns budget ran %" PRIu64 " ops, not 1..%u", pos,
          VAPP_STEP_CHUNK);
  a.step_budget_ns = 0; /* the default, 8 ms */
  double worst = 0;
  for (int i = 0; i < 10; i++) {
    uint64_t t0 = gpb_now_ns();
    vapp_update(&a, 1.0 / 60);
    vframe_draw(&a, &fb);
    double ms = (double)(gpb_now_ns() - t0) / 1e6;
    if (ms > worst) worst = ms;
  }
  /* No bound on time here (a sanitizer build is 10x slower; speed is for
   * bench/): the budget must stop each update well before the end. */
  ASSERT(vapp_pos(&a) > pos && vapp_pos(&a) < a.total_ops);
  printf("full speed: %" PRIu64 " ops in 11 updates, slowest %.1f ms\n",
         vapp_pos(&a), worst);
  gpbt_fb_free(&fb);
  vapp_close(&a);
}

/* ----------------------------------------------------------- the title */

/* A trace path too long for the panel is cut at its start, so the file
 * name stays (it was cut at its end: "%.38s"). The title line is read
 * back and compared with the expected text drawn in its place. */
static void test_title_tail(void) {
  char buf[128];
  ASSERT(!strcmp(vfmt_tail("/a/b/run.trace", 40, buf, sizeof buf),
                 "/a/b/run.trace"));
  ASSERT(!strcmp(vfmt_tail("/very/long/dir/run.trace", 12, buf, sizeof buf),
                 "...run.trace"));
  ASSERT(!strcmp(vfmt_tail("abcdef", 2, buf, sizeof buf), ".."));
  ASSERT(!strcmp(vfmt_tail("abcdefgh", 100, buf, 6), "...gh"));

  gpb_trace_op_t ops[] = {op_alloc(0, 64 * KIB, 1)};
  vapp_t a;
  replay_at(&a, ops, 1, 1);
  snprintf(a.title, sizeof a.title, "%s",
           "/home/someone/experiments/2024-06-01/llm-serving/run-17/"
           "traces/kv-cache/my-run-42.trace.gz");
  gpbt_fb_t fb, want;
  ASSERT_OK(gpbt_fb_init(&fb, 762, 280));
  ASSERT_OK(gpbt_fb_init(&want, 762, 280));
  vframe_draw(&a, &fb);
  /* The panel's pen: x = the map's right + 8, width to 14 pixels from
   * the frame's edge; the title is its second line. */
  int right = a.map_x + a.map_w;
  int x = right + 8, y = 6 + (GPBT_FONT_H + 1), max = (fb.w - right - 14) / GPBT_FONT_W;
  char t[64];
  snprintf(t, sizeof t, "...%s", a.title + strlen(a.title) - (size_t)(max - 3));
  ASSERT(strstr(t, "my-run-42.trace.gz"));
  memcpy(want.px, fb.px, (size_t)fb.w * (size_t)fb.h * sizeof *fb.px);
  gpbt_fb_fill(&want, x, y, fb.w - x, GPBT_FONT_H, VC_PANEL);
  gpbt_font_draw(&want, x, y, 1, VC_DIM, t);
  for (int yy = y; yy < y + GPBT_FONT_H; yy++)
    for (int xx = x; xx < fb.w; xx++)
      if (px(&fb, xx, yy) != px(&want, xx, yy))
        FAILF("title pixel (%d,%d) is %08x, not %08x: not \"%s\"", xx, yy,
              px(&fb, xx, yy), px(&want, xx, yy), t);
  gpbt_fb_free(&fb);
  gpbt_fb_free(&want);
  vapp_close(&a);
}

/* ------------------------------------------------ incremental vs rebuild */

typedef struct snap {
  uint32_t *used, *req, *nstart;
  uint64_t *ordsum, *tfree, *tused;
} snap_t;

static void snap_take(const vmap_t *m, snap_t *s) {
  size_t n = m->ncells, nt = (size_t)m->cols * m->norders;
  s->used = malloc(n * 4);
  s->req = malloc(n * 4);
  s->nstart = malloc(n * 4);
  s->ordsum = malloc(n * 8);
  s->tfree = malloc(nt * 8);
  s->tused = malloc(nt * 8);
  ASSERT(s->used && s->req && s->nstart && s->ordsum && s->tfree && s->tused);
  memcpy(s->used, m->used, n * 4);
  memcpy(s->req, m->req, n * 4);
  memcpy(s->nstart, m->nstart, n * 4);
  memcpy(s->ordsum, m->ordsum, n * 8);
  memcpy(s->tfree, m->tfree, nt * 8);
  memcpy(s->tused, m->tused, nt * 8);
}

static void snap_free(snap_t *s) {
  free(s->used);
  free(s->req);
  free(s->nstart);
  free(s->ordsum);
  free(s->tfree);
  free(s->tused);
}

static void snap_compare(const vmap_t *m, const snap_t *s, const char *what) {
  if (m->layout == VLAYOUT_TREE) {
    size_t nt = (size_t)m->cols * m->norders;
    for (size_t i = 0; i < nt; i++)
      if (s->tfree[i] != m->tfree[i] || s->tused[i] != m->tused[i])
        FAILF("%s: tree cell %zu: incremental %llu/%llu, rebuilt %llu/%llu",
              what, i, (unsigned long long)s->tfree[i],
              (unsigned long long)s->tused[i], (unsigned long long)m->tfree[i],
              (unsigned long long)m->tused[i]);
    return;
  }
  for (size_t c = 0; c < m->ncells; c++)
    if (s->used[c] != m->used[c] || s->req[c] != m->req[c] ||
        s->nstart[c] != m->nstart[c] || s->ordsum[c] != m->ordsum[c])
      FAILF("%s: cell %zu (bpc %llu start %llu): incremental used %u req %u "
            "starts %u ord %llu; rebuilt %u %u %u %llu",
            what, c, (unsigned long long)m->bpc, (unsigned long long)m->start,
            s->used[c], s->req[c], s->nstart[c],
            (unsigned long long)s->ordsum[c], m->used[c], m->req[c],
            m->nstart[c], (unsigned long long)m->ordsum[c]);
}

static void test_incremental(gpb_policy_t pol, vlayout_t layout, int zoom,
                             uint64_t seed, uint64_t steps) {
  vops_t *o;
  ASSERT_OK(vops_open_pattern("churn", steps, 4096 * KIB, 256, seed, &o));
  gpb_config_t cfg;
  cfg_for(&cfg, 4096 * KIB, 256, pol);
  vapp_t a;
  ASSERT_OK(vapp_open_replay(&a, o, &cfg));
  a.map.layout = layout;
  vframe_layout(&a, 700, 300);
  if (zoom) {
    /* Zoom in around the middle of the pool, past one min block. */
    vmap_zoom(&a.map, zoom, 2048 * KIB + 1000, 77);
  }
  vmap_rebuild(&a.map, a.model);
  /* Small steps: events go through vmap_event. */
  uint64_t done = 0;
  while (done < steps) {
    int64_t n = vreplay_step(a.rp, 97);
    ASSERT(n >= 0);
    if (!n) break;
    done += (uint64_t)n;
    /* Wide events over much of the view ask for a rebuild, as a frame
     * would do it; what follows is incremental again. */
    if (a.map.need_rebuild) vmap_rebuild(&a.map, a.model);
  }
  ASSERT_OK(gpb_model_check(a.model));
  vmap_refresh(&a.map, a.model); /* wide events left chunks to rebuild */
  snap_t s;
  snap_take(&a.map, &s);
  vmap_rebuild(&a.map, a.model);
  char what[96];
  snprintf(what, sizeof what, "%s policy, %s, zoom %d",
           pol == GPB_POLICY_TRIM ? "trim" : "buddy",
           layout == VLAYOUT_TREE ? "tree" : "map", zoom);
  snap_compare(&a.map, &s, what);
  snap_free(&s);
  vapp_close(&a);
}

/* ---------------------------------------------------------- replay stats */

/* A direct replay of ops through a pool, as gpubuddy-replay does it. */
static void direct_replay(const gpb_trace_op_t *ops, size_t n,
                          const gpb_config_t *cfg, gpb_stats_t *out,
                          test_blocks_t *blocks) {
  gpb_pool_t *p;
  ASSERT_OK(gpb_pool_create(cfg, &p));
  void **ptr = calloc(n + 1, sizeof *ptr);
  ASSERT(ptr);
  for (size_t i = 0; i < n; i++) {
    const gpb_trace_op_t *o = &ops[i];
    ASSERT(o->id <= n);
    if (o->op == GPB_OP_ALLOC) {
      int rc = gpb_alloc_ex(p, o->size, 0, o->tag, NULL, &ptr[o->id]);
      ASSERT(rc == 0 || rc == GPB_ENOMEM || rc == GPB_ETOOBIG);
    } else if (ptr[o->id]) {
      ASSERT_OK(gpb_free(p, ptr[o->id]));
      ptr[o->id] = NULL;
    }
  }
  ASSERT_OK(gpb_pool_stats(p, out));
  ASSERT_OK(gpb_pool_visit(p, test_collect_blocks, blocks));
  free(ptr);
  gpb_pool_destroy(p);
}

/* Ops of a seeded churn, recorded so both sides replay the same list. */
static gpb_trace_op_t *make_ops(uint64_t seed, uint64_t steps, uint64_t pool,
                                size_t *n) {
  vops_t *o;
  ASSERT_OK(vops_open_pattern("churn", steps, pool, 256, seed, &o));
  gpb_trace_op_t *ops = malloc(steps * sizeof *ops);
  ASSERT(ops);
  size_t k = 0;
  while (k < steps && vops_next(o, &ops[k]) == 1) k++;
  vops_close(o);
  *n = k;
  return ops;
}

static void test_replay_stats(uint64_t seed, uint64_t steps) {
  size_t n;
  /* A small pool so that some allocations fail. */
  gpb_trace_op_t *ops = make_ops(seed, steps, 2048 * KIB, &n);
  for (int pol = 0; pol < GPB_NUM_POLICIES; pol++) {
    gpb_config_t cfg;
    cfg_for(&cfg, 2048 * KIB, 256, (gpb_policy_t)pol);
    if (pol == 0 && seed & 1) cfg.flags |= GPB_CFG_EAGER_MERGE;
    gpb_stats_t want, got, mid1, mid2;
    test_blocks_t pb = {0}, mb = {0};
    direct_replay(ops, n, &cfg, &want, &pb);
    vops_t *o;
    ASSERT_OK(vops_open_array(ops, n, &o));
    vapp_t a;
    ASSERT_OK(vapp_open_replay(&a, o, &cfg));
    ASSERT_U64_EQ(a.total_ops, n);
    vframe_layout(&a, 640, 400);
    ASSERT_OK(vapp_seek(&a, n / 3));
    ASSERT_OK(gpb_model_stats(a.model, &mid1));
    ASSERT_OK(vapp_seek(&a, UINT64_MAX - 1));
    ASSERT(vreplay_at_end(a.rp));
    ASSERT_OK(gpb_model_stats(a.model, &got));
    test_stats_same(&got, &want);
    /* The simulator's block map is the pool's, block by block. */
    ASSERT_OK(gpb_model_check(a.model));
    ASSERT_OK(gpb_model_visit(a.model, test_collect_blocks, &mb));
    test_blocks_same(&pb, &mb);
    free(pb.b);
    free(mb.b);
    /* Scrub back: replayed from the start, same state as before. */
    ASSERT_OK(vapp_seek(&a, n / 3));
    ASSERT_U64_EQ(vapp_pos(&a), n / 3);
    ASSERT_OK(gpb_model_stats(a.model, &mid2));
    test_stats_same(&mid1, &mid2);
    ASSERT(a.series.n > 0);
    vapp_close(&a);
  }
  /* Through a trace file, when the trace writer is built. */
  char path[] = "/tmp/test_viewer_XXXXXX";
  int fd = mkstemp(path);
  ASSERT(fd >= 0);
  close(fd);
  gpb_trace_writer_t *w = NULL;
  if (gpb_trace_writer_open(path, &w) == 0 && w) {
    for (size_t i = 0; i < n; i++) {
      gpb_trace_op_t op = ops[i];
      op.seq = i + 1;
      op.time_ns = i * 100;
      ASSERT_OK(gpb_trace_write(w, &op));
    }
    ASSERT_OK(gpb_trace_writer_close(w));
    gpb_config_t cfg;
    cfg_for(&cfg, 2048 * KIB, 256, GPB_POLICY_BUDDY);
    gpb_stats_t want, got;
    test_blocks_t pb = {0}, mb = {0};
    direct_replay(ops, n, &cfg, &want, &pb);
    vops_t *o;
    ASSERT_OK(vops_open_trace(path, &o));
    vapp_t a;
    ASSERT_OK(vapp_open_replay(&a, o, &cfg));
    ASSERT_U64_EQ(a.total_ops, n);
    ASSERT_OK(vapp_seek(&a, UINT64_MAX - 1));
    ASSERT_OK(gpb_model_stats(a.model, &got));
    test_stats_same(&got, &want);
    ASSERT_OK(gpb_model_visit(a.model, test_collect_blocks, &mb));
    test_blocks_same(&pb, &mb);
    /* Events carry the trace's times: the last allocation's age is
     * measured from its op, not from when the viewer replayed it. */
    ASSERT(a.map.now_ns <= (n - 1) * 100);
    free(pb.b);
    free(mb.b);
    vapp_close(&a);
    printf("trace file round trip: ok\n");
  } else {
    printf("trace files not built yet: trace-file replay not tested\n");
  }
  unlink(path);
  free(ops);
}

/* A garbled trace file: a clear error, no crash. */
static void test_garbled_trace(void) {
  char path[] = "/tmp/test_viewer_bad_XXXXXX";
  int fd = mkstemp(path);
  ASSERT(fd >= 0);
  const char junk[] = "\x1f\x8b garbage\nalloc x y z\n\xff\xfe\n";
  ASSERT(write(fd, junk, sizeof junk - 1) == (ssize_t)(sizeof junk - 1));
  close(fd);
  vops_t *o = NULL;
  int rc = vops_open_trace(path, &o);
  if (rc == 0) {
    gpb_config_t cfg;
    cfg_for(&cfg, 1024 * KIB, 256, GPB_POLICY_BUDDY);
    vapp_t a;
    ASSERT_OK(vapp_open_replay(&a, o, &cfg));
    vapp_seek(&a, UINT64_MAX - 1);
    /* Either the reader refused it, or it had no ops in it. */
    ASSERT(a.failed || vapp_pos(&a) == 0);
    if (a.failed) ASSERT(a.msg[0]);
    gpbt_fb_t fb;
    ASSERT_OK(gpbt_fb_init(&fb, 640, 400));
    vframe_draw(&a, &fb);
    gpbt_fb_free(&fb);
    vapp_close(&a);
  } else {
    ASSERT(rc < 0);
  }
  unlink(path);
}

/* The read-ahead thread: every op in order across many chunks, then the
 * parse error after the last good op, sticky; rewinding and closing while
 * the thread waits for room in a full ring. */
static void test_readahead(void) {
  char path[] = "/tmp/test_viewer_ra_XXXXXX";
  int fd = mkstemp(path);
  ASSERT(fd >= 0);
  FILE *f = fdopen(fd, "w");
  ASSERT(f);
  const uint64_t n = 20011; /* several chunks and a part */
  fprintf(f, "# gpubuddy-trace v1\n");
  for (uint64_t i = 1; i <= n; i++)
    fprintf(f, "%" PRIu64 " %" PRIu64 " %s %" PRIu64 " %" PRIu64 " 0 0\n", i,
            i * 10, i & 1 ? "alloc" : "free", (i + 1) / 2,
            (uint64_t)(i & 1 ? 4096 : 0));
  fprintf(f, "%" PRIu64 " 5 alloc 1 -3 0 0\n", n + 1);
  fclose(f);
  vops_t *o;
  ASSERT_OK(vops_open_trace(path, &o));
  gpb_trace_op_t op;
  for (int pass = 0; pass < 2; pass++) {
    uint64_t got = 0;
    int rc;
    while ((rc = vops_next(o, &op)) == 1) {
      got++;
      ASSERT_U64_EQ(op.seq, got);
      ASSERT_U64_EQ(op.time_ns, got * 10);
      ASSERT_U64_EQ(op.id, (got + 1) / 2);
    }
    ASSERT_U64_EQ(got, n);
    ASSERT_EQ(rc, GPB_EFORMAT);
    ASSERT(strstr(vops_error(o), "line 20013")); /* the header is line 1 */
    ASSERT_EQ(vops_next(o, &op), GPB_EFORMAT);   /* sticky */
    ASSERT_OK(vops_rewind(o));
  }
  /* A few ops in, the thread has filled the ring and waits: rewind and
   * close must stop it. */
  for (int i = 0; i < 3; i++) ASSERT_EQ(vops_next(o, &op), 1);
  ASSERT_OK(vops_rewind(o));
  ASSERT_EQ(vops_next(o, &op), 1);
  ASSERT_U64_EQ(op.seq, 1);
  vops_close(o);
  ASSERT_OK(vops_open_trace(path, &o));
  vops_close(o); /* at once, the thread still reading */
  unlink(path);
  printf("read-ahead: ok\n");
}

/* ------------------------------------------------------------------ PNG */

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void test_png(void) {
  gpbt_fb_t fb;
  ASSERT_OK(gpbt_fb_init(&fb, 37, 21));
  for (int i = 0; i < fb.w * fb.h; i++)
    fb.px[i] = 0xFF000000u | (uint32_t)(i * 2654435761u >> 8);
  gpbt_font_draw(&fb, 1, 1, 1, VC_TEXT, "Ab9%");
  char path[] = "/tmp/test_viewer_png_XXXXXX";
  int fd = mkstemp(path);
  ASSERT(fd >= 0);
  close(fd);
  ASSERT_OK(gpbt_png_write(path, &fb));
  FILE *f = fopen(path, "rb");
  ASSERT(f);
  static unsigned char buf[1 << 16];
  size_t len = fread(buf, 1, sizeof buf, f);
  fclose(f);
  unlink(path);
  ASSERT(len > 8 + 25 + 12 && !memcmp(buf, "\x89PNG\r\n\x1a\n", 8));
  ASSERT(!memcmp(buf + 12, "IHDR", 4));
  ASSERT_EQ(be32(buf + 16), 37);
  ASSERT_EQ(be32(buf + 20), 21);
  size_t p = 8 + 25;
  uint32_t idn = be32(buf + p);
  ASSERT(!memcmp(buf + p + 4, "IDAT", 4) && p + 12 + idn <= len);
  ASSERT_EQ(be32(buf + p + 8 + idn),
            (uint32_t)crc32(0, buf + p + 4, idn + 4));
  uLongf rawn = (uLongf)((37 * 3 + 1) * 21);
  unsigned char *raw = malloc(rawn);
  ASSERT(raw);
  ASSERT_EQ(uncompress(raw, &rawn, buf + p + 8, idn), Z_OK);
  ASSERT_EQ(rawn, (37 * 3 + 1) * 21);
  for (int y = 0; y < 21; y++)
    for (int x = 0; x < 37; x++) {
      const unsigned char *q = raw + y * (37 * 3 + 1) + 1 + 3 * x;
      uint32_t c = fb.px[y * 37 + x];
      ASSERT_EQ(q[0], (c >> 16) & 0xFF);
      ASSERT_EQ(q[1], (c >> 8) & 0xFF);
      ASSERT_EQ(q[2], c & 0xFF);
    }
  free(raw);
  gpbt_fb_free(&fb);
}

/* The font draws something for every printable character and nothing
 * outside the glyph cell (rows 1..7, and 8 for descenders); lowercase
 * letters are not capitals. */
static void test_font(void) {
  gpbt_fb_t fb;
  ASSERT_OK(gpbt_fb_init(&fb, GPBT_FONT_W * 2, GPBT_FONT_H * 2));
  for (int ch = 33; ch < 127; ch++) {
    gpbt_fb_fill(&fb, 0, 0, fb.w, fb.h, 0);
    char s[2] = {(char)ch, 0};
    ASSERT_EQ(gpbt_font_draw(&fb, 0, 0, 2, 0xFFFFFFFFu, s), GPBT_FONT_W * 2);
    int on = 0;
    for (int y = 0; y < fb.h; y++)
      for (int x = 0; x < fb.w; x++)
        if (fb.px[y * fb.w + x]) {
          on++;
          ASSERT(x < 10 && y >= 2 && y < 18);
          if (y >= 16 && !strchr("gjpqy", ch))
            FAILF("glyph '%c' reaches the descender row", ch);
        }
    if (!on) FAILF("glyph '%c' is empty", ch);
  }
  gpbt_fb_t up;
  ASSERT_OK(gpbt_fb_init(&up, fb.w, fb.h));
  for (int ch = 'a'; ch <= 'z'; ch++) {
    char s[2] = {(char)ch, 0}, u[2] = {(char)(ch - 32), 0};
    gpbt_fb_fill(&fb, 0, 0, fb.w, fb.h, 0);
    gpbt_fb_fill(&up, 0, 0, fb.w, fb.h, 0);
    gpbt_font_draw(&fb, 0, 0, 2, 0xFFFFFFFFu, s);
    gpbt_font_draw(&up, 0, 0, 2, 0xFFFFFFFFu, u);
    if (!memcmp(fb.px, up.px, (size_t)fb.w * (size_t)fb.h * sizeof *fb.px))
      FAILF("'%c' is drawn as '%c'", ch, ch - 32);
  }
  gpbt_fb_free(&up);
  gpbt_fb_free(&fb);
}

/* ------------------------------------------------------------------ grid */

/* A 1 MiB pool of 4 KiB blocks, `used` bytes of it allocated from the
 * start, as a replay view run to the end. */
static vapp_t *grid_pool(uint64_t used) {
  gpb_trace_op_t op = op_alloc(0, used, 1);
  vops_t *o;
  ASSERT_OK(vops_open_array(&op, 1, &o));
  gpb_config_t cfg;
  cfg_for(&cfg, 1024 * KIB, 4 * KIB, GPB_POLICY_BUDDY);
  vapp_t *a = malloc(sizeof *a);
  ASSERT(a);
  ASSERT_OK(vapp_open_replay(a, o, &cfg));
  ASSERT_OK(vapp_seek(a, 1));
  a->paused = 1;
  vapp_update(a, 0);
  return a;
}

/* The color of the map at byte `off` of cell i: the cell's first pixel
 * column, the row that holds that byte. */
static uint32_t grid_px_at(const gpbt_fb_t *fb, const vapp_t *a, uint64_t off) {
  uint64_t c = off / a->map.bpc;
  int cx = (int)(c % (uint64_t)a->map.cols), cy = (int)(c / (uint64_t)a->map.cols);
  return px(fb, a->map_x + cx * a->cell_px, a->map_y + cy * a->cell_px);
}

/* Three pools in a 900x500 grid: laid out without overlap, sorted by
 * name, each map fitted to its cell and showing its own pool; clicking
 * cell k shows pool k whole, as vframe_draw draws it; G and Esc come
 * back; --json lists all three. */
static void test_grid(void) {
  vgrid_t g;
  vgrid_init(&g, NULL, VCOLOR_STATE, VLAYOUT_LINEAR);
  /* Added out of order: the grid sorts by name. */
  static const uint64_t sizes[3] = {256 * KIB, 512 * KIB, 128 * KIB};
  ASSERT_OK(vgrid_add_app(&g, grid_pool(sizes[2]), "pool-c"));
  ASSERT_OK(vgrid_add_app(&g, grid_pool(sizes[0]), "pool-a"));
  ASSERT_OK(vgrid_add_app(&g, grid_pool(sizes[1]), "pool-b"));
  ASSERT_EQ(g.n, 3);
  ASSERT(!strcmp(g.cells[0].key, "pool-a") && !strcmp(g.cells[2].key, "pool-c"));
  gpbt_fb_t fb, one;
  ASSERT_OK(gpbt_fb_init(&fb, 900, 500));
  ASSERT_OK(gpbt_fb_init(&one, 900, 500));
  vgrid_update(&g, 0);
  vgrid_draw(&g, &fb);
  ASSERT(g.cols * g.rows >= 3 && g.cols * g.rows < 6);
  uint64_t fit[3];
  for (int i = 0; i < 3; i++) {
    const vcell_t *c = &g.cells[i];
    const vapp_t *a = c->app;
    ASSERT(c->x >= 0 && c->y >= 0 && c->x + c->w <= fb.w && c->y + c->h <= fb.h);
    for (int j = 0; j < i; j++) {
      const vcell_t *d = &g.cells[j];
      ASSERT(c->x >= d->x + d->w || d->x >= c->x + c->w || c->y >= d->y + d->h ||
             d->y >= c->y + c->h);
    }
    /* The whole pool fits the map, and the map sits above the text. */
    ASSERT(a->map.start == 0 && a->map.end == 1024 * KIB);
    ASSERT(a->map_h < c->h && a->map.cols * a->cell_px <= c->w);
    fit[i] = a->map.bpc;
    uint64_t used = sizes[i];
    ASSERT_EQ(grid_px_at(&fb, a, used - 2 * a->map.bpc * (uint64_t)a->map.cols), VC_USED);
    ASSERT_EQ(grid_px_at(&fb, a, used + 2 * a->map.bpc * (uint64_t)a->map.cols), VC_FREE);
    /* The name is written under the map. */
    int text = 0;
    for (int y = a->map_y + a->map_h; y < c->y + c->h && !text; y++)
      for (int x = c->x; x < c->x + c->w; x++)
        if (px(&fb, x, y) == VC_TEXT) text = 1;
    ASSERT(text);
  }
  /* A click between cells, or key presses other than q, stay in the grid. */
  vgrid_button(&g, 1, 1, 1);
  ASSERT(g.focus == NULL);
  ASSERT_EQ(vgrid_key(&g, 'x'), 0);
  for (int k = 0; k < 3; k++) {
    const vcell_t *c = &g.cells[k];
    vgrid_motion(&g, c->x + c->w / 2, c->y + c->h / 2, 0);
    vgrid_button(&g, c->x + c->w / 2, c->y + c->h / 2, 1);
    vgrid_button(&g, c->x + c->w / 2, c->y + c->h / 2, 0);
    ASSERT(g.focus == c->app);
    vgrid_draw(&g, &fb);
    /* The focused pool is the single-pool view: the same map pixels. */
    vframe_draw(c->app, &one);
    for (int y = 0; y < c->app->map_h; y += 7)
      for (int x = 0; x < c->app->map_w; x += 5)
        ASSERT_EQ(px(&fb, x, y), px(&one, x, y));
    ASSERT(c->app->map_w > c->w);
    if (k == 1) { /* Esc clears a selection first, then comes back */
      vinput_find(c->app, "0x1000");
      ASSERT(c->app->have_sel);
      ASSERT_EQ(vgrid_key(&g, VKEY_ESC), 0);
      ASSERT(g.focus == c->app && !c->app->have_sel);
      ASSERT_EQ(vgrid_key(&g, VKEY_ESC), 0);
    } else {
      ASSERT_EQ(vgrid_key(&g, 'g'), 0);
    }
    ASSERT(g.focus == NULL);
    vgrid_draw(&g, &fb);
    /* Back in its cell the pool is shown whole again. */
    ASSERT_U64_EQ(c->app->map.bpc, fit[k]);
    ASSERT_EQ(c->app->map_w, c->w);
  }
  ASSERT_EQ(vgrid_key(&g, 'q'), 1);

  FILE *f = tmpfile();
  ASSERT(f);
  vgrid_json(&g, f);
  rewind(f);
  char buf[8192];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  ASSERT(buf[0] == '[' && strstr(buf, "\n]\n"));
  ASSERT(strstr(buf, "{\"name\":\"pool-a\",\"closed\":false,\"ops\":1,"));
  ASSERT(strstr(buf, "\"name\":\"pool-c\""));
  ASSERT(strstr(buf, "\"pool_size\":1048576"));
  gpbt_fb_free(&fb);
  gpbt_fb_free(&one);
  vgrid_close(&g);
}

/* A pool of 524 live 64 KiB blocks in 512 MiB: its largest free block is
 * 256 MiB. */
static vapp_t *grid_pool_524(void) {
  gpb_trace_op_t *ops = calloc(524, sizeof *ops);
  ASSERT(ops);
  for (int i = 0; i < 524; i++) ops[i] = op_alloc((uint64_t)i, 64 * KIB, 1);
  vops_t *o;
  ASSERT_OK(vops_take_array(ops, 524, &o));
  gpb_config_t cfg;
  cfg_for(&cfg, 512 * 1024 * KIB, 64 * KIB, GPB_POLICY_BUDDY);
  vapp_t *a = malloc(sizeof *a);
  ASSERT(a);
  ASSERT_OK(vapp_open_replay(a, o, &cfg));
  ASSERT_OK(vapp_seek(a, 524));
  a->paused = 1;
  vapp_update(a, 0);
  return a;
}

/* The grid's captions are whole figures ("LIVE 5" was 524 live,
 * "LARGEST 256.0 Mi"), at the cell's text scale or at 1; the status line
 * has a colour legend; a closed pool's map stays readable. */
static void test_grid_captions(void) {
  static const int sizes[][2] = {{1600, 1000}, {900, 600}};
  for (int t = 0; t < 2; t++) {
    vgrid_t g;
    vgrid_init(&g, NULL, VCOLOR_STATE, VLAYOUT_LINEAR);
    for (int i = 0; i < 6; i++) {
      char key[24]; /* "pool-" and any int: no cut */
      snprintf(key, sizeof key, "pool-%d", i);
      ASSERT_OK(vgrid_add_app(&g, grid_pool_524(), key));
    }
    gpbt_fb_t fb;
    int w = sizes[t][0], h = sizes[t][1];
    ASSERT_OK(gpbt_fb_init(&fb, w, h));
    g.scale = vframe_auto_scale(w, h, 1);
    vgrid_update(&g, 0);
    vgrid_draw(&g, &fb);
    const vcell_t *c = &g.cells[5];
    const vapp_t *a = c->app;
    ASSERT_U64_EQ(a->stats.live_allocs, 524);
    int y0 = a->map_y + a->map_h, y1 = c->y + c->h;
    static const char *const want[] = {"LIVE 524", "LARGEST 256.0 MiB",
                                       "FAILED 0", "EXT FRAG"};
    for (int k = 0; k < 4; k++) {
      int ok = 0;
      for (int sc = g.scale; sc >= 1 && !ok; sc--)
        ok = fb_has_text(&fb, c->x, y0, c->x + c->w, y1, sc, VC_DIM, want[k]);
      if (!ok) FAILF("%dx%d: the caption has no whole \"%s\"", w, h, want[k]);
    }
    ASSERT(fb_has_text(&fb, w / 2, h - 30, w, h, g.scale, VC_DIM, "REQUESTED"));
    /* Closed: the map's used blue is still far from the panel (the
     * brightest of its first row: block starts are drawn darker). */
    c->app->kind = VSRC_LIVE;
    c->app->disconnected = 1;
    vgrid_draw(&g, &fb);
    int best = 0;
    for (int x = 0; x < 40; x++) {
      int d = rgb_dist(px(&fb, a->map_x + x, a->map_y), VC_PANEL);
      if (d > best) best = d;
    }
    if (best <= 150) FAILF("a closed map is too dim: %d from the panel", best);
    c->app->kind = VSRC_REPLAY;
    c->app->disconnected = 0;
    gpbt_fb_free(&fb);
    vgrid_close(&g);
  }
  printf("grid captions: ok\n");
}

/* ------------------------------------------------------------- unusable */

/* UNUSABLE is for the largest request seen: two free 256 KiB blocks serve
 * the 256 KiB requests made so far (0.000; it said 1.000, for a request
 * of all 512 KiB free), and after a 512 KiB request failed, none serves
 * it (1.000, in red). Free buddies count merged in LARGEST. */
static void test_unusable(void) {
  gpb_trace_op_t ops[] = {
      op_alloc(0, 256 * KIB, 0), op_alloc(1, 256 * KIB, 0),
      op_alloc(2, 256 * KIB, 0), op_free(1),
      op_alloc(3, 512 * KIB, 0), /* fails: no 512 KiB block */
  };
  vops_t *o;
  ASSERT_OK(vops_open_array(ops, 5, &o));
  gpb_config_t cfg;
  cfg_for(&cfg, 1024 * KIB, 4 * KIB, GPB_POLICY_BUDDY);
  vapp_t a;
  ASSERT_OK(vapp_open_replay(&a, o, &cfg));
  gpbt_fb_t fb;
  ASSERT_OK(gpbt_fb_init(&fb, 822, 280));
  uint64_t for_bytes;
  vapp_update(&a, 0);
  ASSERT(vapp_unusable(&a, &for_bytes) < 0); /* no request yet */
  ASSERT_OK(vapp_seek(&a, 4));
  a.paused = 1;
  vapp_update(&a, 0);
  vframe_draw(&a, &fb);
  ASSERT(vapp_unusable(&a, &for_bytes) == 0.0);
  ASSERT_U64_EQ(for_bytes, 256 * KIB);
  ASSERT_TEXT(&fb, VC_TEXT, "UNUSABLE  0.000 FOR 256.0 KiB");
  ASSERT_OK(vapp_seek(&a, 5));
  vapp_update(&a, 0);
  vframe_draw(&a, &fb);
  ASSERT_U64_EQ(a.stats.failures, 1);
  ASSERT(vapp_unusable(&a, &for_bytes) == 1.0);
  ASSERT_U64_EQ(for_bytes, 512 * KIB);
  ASSERT_TEXT(&fb, VC_ALERT, "UNUSABLE  1.000 FOR 512.0 KiB");
  /* Back to the start, the requests are forgotten with the rest. */
  ASSERT_OK(vapp_seek(&a, 0));
  vapp_update(&a, 0);
  ASSERT(vapp_unusable(&a, NULL) < 0);
  gpbt_fb_free(&fb);
  vapp_close(&a);
}

/* ----------------------------------------------------------------- refit */

/* A map that fits the window fits it again when the window shrinks (it
 * kept its cell size and showed the start of the pool) or grows; one the
 * user zoomed keeps its zoom. */
static void test_refit(void) {
  gpb_trace_op_t op = op_alloc(0, 64 * KIB, 1);
  vops_t *o;
  ASSERT_OK(vops_open_array(&op, 1, &o));
  gpb_config_t cfg;
  cfg_for(&cfg, 64 * 1024 * KIB, 4 * KIB, GPB_POLICY_BUDDY);
  vapp_t a;
  ASSERT_OK(vapp_open_replay(&a, o, &cfg));
  ASSERT_OK(vapp_seek(&a, 1));
  static const int sizes[][2] = {{822, 280}, {500, 200}, {420, 150},
                                 {1000, 600}, {822, 280}};
  for (int lay = 0; lay < 2; lay++) {
    if (lay) vinput_key(&a, 't');
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
      vframe_layout(&a, sizes[i][0], sizes[i][1]);
      vapp_sync_map(&a);
      if (a.map.start != 0 || a.map.end != 64 * 1024 * KIB)
        FAILF("layout %d, %dx%d: the map shows [%" PRIu64 ", %" PRIu64 ")",
              lay, sizes[i][0], sizes[i][1], a.map.start, a.map.end);
    }
  }
  vinput_key(&a, 't');
  vframe_layout(&a, 822, 280);
  uint64_t fit = a.map.bpc; /* about 512: 64 MiB on 512x256 cells */
  vinput_key(&a, 'z');
  uint64_t zoom = a.map.bpc;
  ASSERT(a.map.zoomed && zoom < fit && zoom >= 256);
  vframe_layout(&a, 900, 300); /* zoomed: kept */
  ASSERT_U64_EQ(a.map.bpc, zoom);
  vframe_layout(&a, 700, 250);
  ASSERT_U64_EQ(a.map.bpc, zoom);
  /* Grown until the whole pool shows at that zoom: fitted from then on. */
  vframe_layout(&a, 1200, 700);
  ASSERT(!a.map.zoomed);
  vframe_layout(&a, 700, 250);
  ASSERT(a.map.start == 0 && a.map.end == 64 * 1024 * KIB);
  vinput_key(&a, 'z');
  vinput_key(&a, 'f');
  vframe_layout(&a, 822, 280);
  ASSERT(!a.map.zoomed && a.map.bpc == fit && a.map.end == 64 * 1024 * KIB);
  vapp_close(&a);
}

/* -------------------------------------------------------- trace addresses */

/* In a replay, / finds the traced program's addresses (PyTorch's ids)
 * as well as offsets, inside an allocation too, and the hover shows the
 * trace id of the block's allocation. */
static void test_trace_addr(void) {
  const uint64_t A = 0x7fb400000000ull, B = 0x7fb400100000ull;
  gpb_trace_op_t ops[] = {op_alloc(A, 64 * KIB, 1), op_alloc(B, 100 * KIB, 2),
                          op_alloc(7, 4 * KIB, 3)};
  vapp_t a;
  replay_at(&a, ops, 3, 3);
  vapp_update(&a, 0);
  gpb_block_info_t b;
  /* B's 100 KiB took a 128 KiB block after A's 64 KiB one. */
  ASSERT_OK(gpb_model_lookup(a.model, 128 * KIB, &b));
  ASSERT(b.used && b.requested == 100 * KIB);
  char where[32];
  snprintf(where, sizeof where, "0x%" PRIx64, B);
  vinput_find(&a, where);
  ASSERT(a.have_sel && a.sel_off == 128 * KIB);
  snprintf(where, sizeof where, "0x%" PRIx64, (uint64_t)(B + 0x5010));
  vinput_find(&a, where);
  ASSERT(a.have_sel && a.sel_off == 128 * KIB + 0x5010);
  snprintf(where, sizeof where, "0x%" PRIx64, (uint64_t)(B + 100 * KIB)); /* past it */
  a.have_sel = 0;
  vinput_find(&a, where);
  ASSERT(!a.have_sel);
  vinput_find(&a, "0x10000"); /* an offset as ever: A's block */
  ASSERT(a.have_sel && a.sel_off == 0x10000);
  vinput_key(&a, VKEY_ESC);
  vinput_key(&a, 'f');
  /* Hover a byte 4 KiB into B: its allocation's id, and where in it. */
  gpbt_fb_t fb;
  ASSERT_OK(gpbt_fb_init(&fb, 822, 280));
  vframe_draw(&a, &fb);
  char want[64];
  static const uint64_t into[2] = {4 * KIB, 0};
  for (int i = 0; i < 2; i++) {
    uint64_t c = (128 * KIB + into[i]) / a.map.bpc;
    int cx = a.map_x + (int)(c % (uint64_t)a.map.cols) * a.cell_px;
    int cy = a.map_y + (int)(c / (uint64_t)a.map.cols) * a.cell_px;
    uint64_t at = vframe_offset_at(&a, cx, cy, NULL);
    ASSERT(at >= 128 * KIB && at <= 128 * KIB + into[i]);
    vinput_motion(&a, cx, cy, 0);
    vframe_draw(&a, &fb);
    if (at > 128 * KIB)
      snprintf(want, sizeof want, "TRACE  ID 0x%" PRIx64 " +0x%" PRIx64, B,
               (uint64_t)(at - 128 * KIB));
    else
      snprintf(want, sizeof want, "TRACE  ID 0x%" PRIx64, B);
    ASSERT_TEXT(&fb, VC_TEXT, want);
  }
  vinput_motion(&a, a.map_x, a.map_y, 0); /* A's first byte */
  vframe_draw(&a, &fb);
  snprintf(want, sizeof want, "TRACE  ID 0x%" PRIx64, A);
  ASSERT_TEXT(&fb, VC_TEXT, want);
  /* The table kept along: a seek back and forth still knows B. */
  ASSERT_OK(vapp_seek(&a, 1));
  uint64_t id;
  ASSERT_ERR(vreplay_trace_id(a.rp, 128 * KIB, &id), GPB_ENOTFOUND);
  ASSERT_OK(vapp_seek(&a, 3));
  ASSERT_OK(vreplay_trace_id(a.rp, 128 * KIB, &id));
  ASSERT_U64_EQ(id, B);
  gpbt_fb_free(&fb);
  vapp_close(&a);
}

/* ------------------------------------------------------------ legibility */

/* The map has an address ruler (round offsets at their rows; the tree's
 * rows labelled with order and block size, offsets across), each coloring
 * a legend, the status line the file name, and text is drawn larger from
 * 1200x700 on. */
static void test_legible(void) {
  ASSERT_EQ(vframe_auto_scale(1280, 800, 1), 2);
  ASSERT_EQ(vframe_auto_scale(1000, 600, 1), 1);
  ASSERT_EQ(vframe_auto_scale(1280, 800, 2), 2);
  ASSERT_EQ(vframe_auto_scale(2560, 1600, 2), 4);
  gpb_trace_op_t ops[] = {op_alloc(0, 256 * KIB, 1), op_alloc(1, 3000, 2)};
  vapp_t a;
  replay_at(&a, ops, 2, 2);
  snprintf(a.title, sizeof a.title, "%s", "/runs/17/kv-Run.trace.gz");
  gpbt_fb_t fb;
  ASSERT_OK(gpbt_fb_init(&fb, 822, 280));
  vapp_update(&a, 0);
  vframe_draw(&a, &fb);
  /* 4 KiB a row: labels two lines (20 rows) apart at least, so at each
   * 128 KiB, 32 rows apart, on their row. */
  int gx = a.map_x;
  ASSERT(fb_has_text(&fb, 0, 0, gx, 1, 1, VC_DIM, "0x0"));
  ASSERT(fb_has_text(&fb, 0, 32 - 1, gx, 32, 1, VC_DIM, "0x20000"));
  ASSERT(fb_has_text(&fb, 0, 224 - 1, gx, 224, 1, VC_DIM, "0xe0000"));
  ASSERT(!fb_has_text(&fb, 0, 0, gx, a.map_h, 1, VC_DIM, "0x10000"));
  ASSERT_TEXT(&fb, VC_DIM, "REQUESTED");
  ASSERT_TEXT(&fb, VC_DIM, "WASTE");
  ASSERT(fb_has_text(&fb, 0, a.map_h, fb.w, fb.h, 1, VC_TEXT, "kv-Run.trace.gz"));
  vinput_key(&a, '2');
  vframe_draw(&a, &fb);
  ASSERT_TEXT(&fb, VC_DIM, "COLOR: BLOCK SIZE (ORDER), BYTE-WEIGHTED");
  ASSERT_TEXT(&fb, VC_DIM, "1.0 MiB");
  vinput_key(&a, '3');
  vframe_draw(&a, &fb);
  ASSERT_TEXT(&fb, VC_DIM, "COLOR: TAG OF THE ALLOCATION");
  ASSERT_TEXT(&fb, VC_DIM, "2"); /* tags 1 and 2 are live */
  vinput_key(&a, '4');
  vframe_draw(&a, &fb);
  ASSERT_TEXT(&fb, VC_DIM, "NEW");
  vinput_key(&a, '1');
  vinput_key(&a, 't');
  vframe_draw(&a, &fb);
  for (uint32_t k = 0; k < 9; k++) {
    char l[64], sz[32];
    gpb_size_format((4 * KIB) << k, sz, sizeof sz);
    *strstr(sz, ".0") = 0;
    snprintf(l, sizeof l, "%u %s%s", k, sz, k >= 8 ? " MiB" : " KiB");
    int y = a.map_y + (int)(8 - k) * a.row_px;
    if (!fb_has_text(&fb, 0, y - 2, gx, y + a.row_px, 1, VC_DIM, l))
      FAILF("tree row %u is not labelled \"%s\"", k, l);
  }
  ASSERT_TEXT(&fb, VC_DIM, "SPLIT");
  ASSERT(fb_has_text(&fb, gx, a.map_y + a.map_h, fb.w, fb.h, 1, VC_DIM, "0x80000"));
  gpbt_fb_free(&fb);
  vapp_close(&a);
}

/* --------------------------------------------------------------- reattach */

static gpb_pool_t *named_pool(const char *name, uint64_t size) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_HOST;
  cfg.pool_size = size;
  cfg.min_block = 4 * KIB;
  cfg.name = name;
  cfg.flags = GPB_CFG_NO_ENV;
  gpb_pool_t *p;
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  return p;
}

/* Updates until the view has seen `events` events or is closed. */
static void live_catch_up(vapp_t *a, uint64_t seq) {
  for (int i = 0; i < 200 && !vapp_closed(a) && gpb_model_seq(a->model) < seq; i++) {
    vapp_update(a, 0);
    if (gpb_model_seq(a->model) < seq) usleep(1000);
  }
}

/* A program that restarts publishes its pool again under the same name:
 * the single-pool view and a grid's cell leave DISCONNECTED (CLOSED) for
 * the new pool, of another size, with its blocks; they stayed on the old
 * one's last state. */
static void test_reattach(void) {
  char name[64];
  snprintf(name, sizeof name, "t-view-re-%d", (int)getpid());
  gpb_pool_t *p1 = named_pool(name, 1024 * KIB);
  void *x;
  ASSERT_OK(gpb_alloc(p1, 64 * KIB, &x));
  vapp_t a, *b = malloc(sizeof *b);
  ASSERT(b);
  ASSERT_OK(vapp_open_live(&a, name, NULL, NULL));
  ASSERT_OK(vapp_open_live(b, name, NULL, NULL));
  vgrid_t g;
  vgrid_init(&g, NULL, VCOLOR_ORDER, VLAYOUT_LINEAR);
  ASSERT_OK(vgrid_add_app(&g, b, name));
  gpb_stats_t st;
  ASSERT_OK(gpb_pool_stats(p1, &st));
  live_catch_up(&a, st.seq);
  ASSERT(!a.disconnected && a.stats.live_allocs == 1);
  gpb_pool_destroy(p1);
  for (int i = 0; i < 200 && !a.disconnected; i++) vapp_update(&a, 0);
  for (int i = 0; i < 200 && !vapp_closed(b); i++) vgrid_update(&g, 0);
  ASSERT(a.disconnected && vapp_closed(b) && g.cells[0].closed_ns);
  gpbt_fb_t fb;
  ASSERT_OK(gpbt_fb_init(&fb, 640, 300));
  vframe_draw(&a, &fb);
  vinput_key(&a, '2'); /* a view setting the new reader keeps */

  gpb_pool_t *p2 = named_pool(name, 2048 * KIB);
  void *y[3];
  for (int i = 0; i < 3; i++) ASSERT_OK(gpb_alloc(p2, 100 * KIB, &y[i]));
  ASSERT_OK(gpb_pool_stats(p2, &st));
  /* Once a second it looks again: due now. */
  a.retry_ns = b->retry_ns = 0;
  for (int i = 0; i < 200 && a.disconnected; i++) vapp_update(&a, 0);
  ASSERT(!a.disconnected && !a.failed);
  live_catch_up(&a, st.seq);
  ASSERT_U64_EQ(a.info.managed_size, 2048 * KIB);
  ASSERT_U64_EQ(a.stats.live_allocs, 3);
  ASSERT_EQ(a.map.color, VCOLOR_ORDER);
  /* Its requests came before the reader: UNUSABLE learns them from the
   * live blocks (100 KiB, in 128 KiB blocks). */
  uint64_t for_bytes;
  ASSERT(vapp_unusable(&a, &for_bytes) >= 0);
  ASSERT_U64_EQ(for_bytes, 128 * KIB);
  vframe_draw(&a, &fb);
  ASSERT(a.map.end == 2048 * KIB && a.map.start == 0);
  /* The grid's cell comes back by itself, no longer CLOSED. */
  for (int i = 0; i < 200 && vapp_closed(b); i++) vgrid_update(&g, 0);
  ASSERT(!vapp_closed(b) && !g.cells[0].closed_ns);
  live_catch_up(b, st.seq);
  ASSERT_U64_EQ(b->stats.live_allocs, 3);
  vgrid_draw(&g, &fb);
  gpbt_fb_free(&fb);
  vgrid_close(&g);
  vapp_close(&a);
  for (int i = 0; i < 3; i++) ASSERT_OK(gpb_free(p2, y[i]));
  gpb_pool_destroy(p2);
}

/* ------------------------------------------------- sites, timeline, OOM */

/* tests/data/sites_oom.trace: two call sites and a failure (its header
 * says where the blocks go). */
static void sites_open(vapp_t *a) {
  vops_t *o;
  ASSERT_OK(vops_open_trace(GPB_TEST_DATA "/sites_oom.trace", &o));
  gpb_config_t cfg;
  cfg_for(&cfg, 1024 * KIB, 4 * KIB, GPB_POLICY_BUDDY);
  ASSERT_OK(vapp_open_replay(a, o, &cfg));
  ASSERT_U64_EQ(a->total_ops, 8);
}

/* The --json members of a into buf. */
static void sites_json(const vapp_t *a, char *buf, size_t n) {
  memset(buf, 0, n);
  FILE *f = fmemopen(buf, n - 1, "w");
  ASSERT(f);
  vapp_json_members(a, f);
  fclose(f);
}

static void test_sites(void) {
  vapp_t a;
  sites_open(&a);
  ASSERT_OK(vapp_seek(&a, 8));
  a.paused = 1;
  vapp_update(&a, 0);
  gpbt_fb_t fb;
  ASSERT_OK(gpbt_fb_init(&fb, 900, 500));
  vframe_draw(&a, &fb);
  ASSERT(a.tl_h > 20); /* a frame this tall has the timeline */
  /* ... stacked by site (the state colors name no sites): its legend. */
  ASSERT_TEXT(&fb, VC_DIM, "LIVE BYTES BY SITE");
  ASSERT_TEXT(&fb, VC_DIM, "#2 model.py:12 forward");

  /* The hover over site 1's block names it and its frames, innermost
   * first. */
  a.mouse_in = 1;
  a.mouse_x = a.map_x + 10;
  a.mouse_y = a.map_y + 2;
  ASSERT(vframe_offset_at(&a, a.mouse_x, a.mouse_y, NULL) < 256 * KIB);
  vframe_draw(&a, &fb);
  ASSERT_TEXT(&fb, VC_TEXT, "SITE   1");
  ASSERT_TEXT(&fb, VC_TEXT, "/srv/app+0x1a2f3 load_weights");
  ASSERT_TEXT(&fb, VC_TEXT, "/srv/app+0x2b10 main");
  char l[8][80];
  ASSERT_EQ(vsite_hover(&a, 2, l, 8, 79, 0), 3);
  ASSERT(strstr(l[1], "model.py:12 forward") && strstr(l[2], "train.py:40 step"));
  a.mouse_in = 0;

  /* --color site: each site's blocks in its own color. */
  ASSERT(vc_site(1) != vc_site(2));
  vmap_set_color(&a.map, VCOLOR_SITE);
  vframe_draw(&a, &fb);
  uint64_t row = (uint64_t)a.map.cols * a.map.bpc;
  int y1 = (int)(16 * KIB / row), y2 = (int)(800 * KIB / row);
  ASSERT_MPX(&fb, 5, y1, vc_site(1));
  ASSERT_MPX(&fb, 5, y2, vc_site(2));
  ASSERT_TEXT(&fb, VC_DIM, "#1 load_weights");

  /* The side panel by site: site 1 (512 KiB) over site 2 (192 KiB). */
  a.side_sites = 1;
  vframe_draw(&a, &fb);
  ASSERT_TEXT(&fb, VC_TEXT, "LIVE BYTES BY CALL SITE");
  gpbt_site_row_t r[4];
  ASSERT_EQ((int)vsite_top(&a, r, 4), 2);
  ASSERT(r[0].site == 1 && r[0].bytes == 512 * KIB);
  ASSERT(r[1].site == 2 && r[1].bytes == 192 * KIB);

  /* The timeline stacks site 1 at the bottom (the most bytes), marks the
   * failure at op 6 in red along its top. */
  int bx = a.tl_x + a.tl_w * 7 / 8 - 4 * a.scale;
  ASSERT_PX(&fb, bx, a.tl_y + a.tl_h - 1, vc_site(1));
  int ox = a.tl_x + (int)((double)a.tl_w * 6 / 8);
  ASSERT_PX(&fb, ox, a.tl_y + 1, VC_ALERT);

  /* The failure: recorded, explained in the hook, in --json. */
  ASSERT_U64_EQ(a.series.ooms, 1);
  ASSERT_U64_EQ(a.series.oom[0].x, 6);
  ASSERT_U64_EQ(a.series.oom[0].requested, 512 * KIB);
  const gpbt_oom_t *w = &a.oom.ex[0].why;
  ASSERT_U64_EQ(w->free_bytes, 384 * KIB);
  ASSERT_U64_EQ(w->largest_free, 256 * KIB);
  ASSERT_U64_EQ(w->win.live_bytes, 256 * KIB);
  static char js[16384];
  sites_json(&a, js, sizeof js);
  ASSERT(strstr(js, "\"ooms\":{\"count\":1,\"explained\":[{\"op\": 6,"
                    "\"requested\": 524288,\"free\": 393216,"
                    "\"largest\": 262144"));
  const char *t1 = strstr(js, "\"top_sites\":[{\"id\": 1,\"bytes\": 524288");
  ASSERT(t1 && strstr(t1, "load_weights") && strstr(t1, "{\"id\": 2,"));

  /* A click on the timeline seeks there; on the red mark, it goes to
   * the failure and explains it. */
  int cx = a.tl_x + a.tl_w * 2 / 8 + 1;
  uint64_t want = vtl_x_at(&a, cx);
  ASSERT_U64_EQ(want, 2);
  vinput_button(&a, cx, a.tl_y + a.tl_h / 2, 1);
  vinput_button(&a, cx, a.tl_y + a.tl_h / 2, 0);
  ASSERT_U64_EQ(a.seek_to, 2);
  vapp_update(&a, 0);
  ASSERT_U64_EQ(vapp_pos(&a), 2);
  ASSERT_EQ(a.oom.sel, -1);
  vframe_draw(&a, &fb);
  vinput_button(&a, ox + 1, a.tl_y + 2, 1);
  vinput_button(&a, ox + 1, a.tl_y + 2, 0);
  vapp_update(&a, 0);
  ASSERT_U64_EQ(vapp_pos(&a), 6);
  ASSERT(a.oom.sel >= 0);
  ASSERT_U64_EQ(a.oom.ex[a.oom.sel].rec.x, 6);
  vframe_draw(&a, &fb);
  ASSERT_TEXT(&fb, VC_ALERT, "OUT OF MEMORY AT OP 6 (FAILURE 1 OF 1)");
  ASSERT_TEXT(&fb, VC_TEXT, "FREE 384.0 KiB  LARGEST FREE BLOCK 256.0 KiB");
  /* Esc closes the panel, and so does a step off the failure; O opens
   * it again; seeking back and forth counts the failure once. */
  vinput_key(&a, VKEY_ESC);
  ASSERT_EQ(a.oom.sel, -1);
  vinput_key(&a, 'o');
  ASSERT(a.oom.sel >= 0);
  vinput_key(&a, '.');
  vapp_update(&a, 0);
  ASSERT_U64_EQ(vapp_pos(&a), 7);
  ASSERT_EQ(a.oom.sel, -1);
  ASSERT_OK(vapp_seek(&a, 0));
  ASSERT_OK(vapp_seek(&a, 8));
  ASSERT_U64_EQ(a.series.ooms, 1);
  vinput_key(&a, 'o');
  vapp_update(&a, 0);
  ASSERT(a.oom.sel >= 0);
  ASSERT_U64_EQ(vapp_pos(&a), 6);
  vapp_close(&a);
  gpbt_fb_free(&fb);
  printf("sites, timeline, OOM: ok\n");
}

/* A live pool's failure: marked and explained from the live state, its
 * allocations' site ids summed; the timeline cannot seek, but its tick
 * opens the explanation. */
static void test_live_oom(void) {
  char name[64];
  snprintf(name, sizeof name, "t-view-oom-%d", (int)getpid());
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_HOST;
  cfg.pool_size = 1024 * KIB;
  cfg.min_block = 4 * KIB;
  cfg.name = name;
  cfg.flags = GPB_CFG_NO_ENV | GPB_CFG_CALLSITES;
  gpb_pool_t *p;
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  vapp_t a;
  ASSERT_OK(vapp_open_live(&a, name, NULL, NULL));
  void *x, *y, *z = NULL;
  ASSERT_OK(gpb_alloc(p, 512 * KIB, &x));
  ASSERT_OK(gpb_alloc(p, 256 * KIB, &y));
  ASSERT(gpb_alloc(p, 512 * KIB, &z) == GPB_ENOMEM);
  gpb_stats_t st;
  ASSERT_OK(gpb_pool_stats(p, &st));
  live_catch_up(&a, st.seq);
  ASSERT_U64_EQ(a.series.ooms, 1);
  ASSERT_U64_EQ(a.series.oom[0].requested, 512 * KIB);
  const gpbt_oom_t *w = &a.oom.ex[0].why;
  ASSERT_U64_EQ(w->free_bytes, 256 * KIB);
  ASSERT_U64_EQ(w->largest_free, 256 * KIB);
  gpbt_site_row_t r[2];
  /* The live stream carries sites: x's and y's, two calls of this
   * test's. */
  ASSERT_EQ((int)vsite_top(&a, r, 2), 2);
  ASSERT_U64_EQ(r[0].bytes, 512 * KIB);
  ASSERT_U64_EQ(r[1].bytes, 256 * KIB);
  char l[4][80];
  ASSERT_EQ(vsite_hover(&a, 7000, l, 4, 79, 0), 1); /* an id never sent */
  ASSERT(strstr(l[0], "NO FRAMES"));
  /* A site's frames come with the stream: the hover shows the pool's own
   * text, innermost frame first. */
  char want[4096];
  ASSERT(gpb_pool_site_text(p, r[0].site, want, sizeof want) > 0);
  ASSERT(vsite_hover(&a, r[0].site, l, 4, 79, 0) >= 2);
  ASSERT(!strstr(l[0], "NO FRAMES"));
  /* The innermost frame is there whole: its rows, each after a 5-column
   * lead, joined. It comes first, or after the user's frames when its
   * path looks like the framework's (distcheck builds in a directory
   * named gpubuddy-VERSION). */
  size_t n1 = strcspn(want, ";");
  want[n1] = 0;
  char rows[64][80], whole[4096] = "";
  int nr = vsite_hover(&a, r[0].site, rows, 64, 79, 0), found = 0;
  for (int i = 1; i <= nr; i++) {
    if (i == nr || strncmp(rows[i], "     ", 5)) { /* a frame ends */
      found |= !strcmp(whole, want);
      whole[0] = 0;
    }
    if (i < nr && strlen(whole) + strlen(rows[i]) < sizeof whole)
      strcat(whole, rows[i] + 5);
  }
  ASSERT(found);

  gpbt_fb_t fb;
  ASSERT_OK(gpbt_fb_init(&fb, 900, 500));
  vframe_draw(&a, &fb);
  ASSERT(a.tl_h > 20);
  vinput_button(&a, a.tl_x + 2, a.tl_y + a.tl_h - 2, 1);
  vinput_button(&a, a.tl_x + 2, a.tl_y + a.tl_h - 2, 0);
  ASSERT(a.seek_to == UINT64_MAX && strstr(a.msg, "cannot go back"));
  ASSERT_EQ(a.oom.sel, -1);
  vinput_key(&a, 'o');
  ASSERT_EQ(a.oom.sel, 0);
  vframe_draw(&a, &fb);
  ASSERT_TEXT(&fb, VC_TEXT, "FREE 256.0 KiB  LARGEST FREE BLOCK 256.0 KiB");
  gpbt_fb_free(&fb);
  vapp_close(&a);
  gpb_free(p, x);
  gpb_free(p, y);
  gpb_pool_destroy(p);
  printf("live OOM: ok\n");
}

/* The timeline reads like a chart: a 7 MiB run in a 512 MiB pool fills
 * the chart's height (it was scaled to the pool: a flat line), the
 * byte axis names the scale, the op axis its start, the legend sits on a
 * strip of its own above the data, the hover names the op, the bytes
 * and the tag under the mouse, and the wheel zooms it in time. */
static void test_timeline_chart(void) {
  gpb_trace_op_t ops[16];
  size_t n = 0;
  for (int i = 0; i < 6; i++) ops[n++] = op_alloc((uint64_t)i, 1024 * KIB, 7);
  ops[n++] = op_alloc(6, 614 * KIB, 9);
  for (int i = 0; i < 7; i++) ops[n++] = op_free((uint64_t)i);
  vops_t *o;
  ASSERT_OK(vops_open_array(ops, n, &o));
  gpb_config_t cfg;
  cfg_for(&cfg, 512 * 1024 * KIB, 64 * KIB, GPB_POLICY_BUDDY);
  vapp_t a;
  ASSERT_OK(vapp_open_replay(&a, o, &cfg));
  ASSERT_OK(vapp_seek(&a, n));
  a.paused = 1;
  vapp_update(&a, 0);
  gpbt_fb_t fb;
  ASSERT_OK(gpbt_fb_init(&fb, 900, 500));
  vframe_draw(&a, &fb);
  ASSERT(a.tl_h > 20 && a.tl_y > a.tlb_y && a.tl_x > a.tlb_x);
  /* Each op's point is its end state (it was its first event's: the
   * state before an alloc that split blocks first). */
  ASSERT_EQ(a.series.n, (int)n);
  for (int i = 0; i < 7; i++)
    ASSERT(a.series.used[i] == (double)(i + 1) * 1024 * KIB);
  /* The 7 MiB peak (op 7) rounds up to 8 MiB and reaches past 3/4. */
  ASSERT(vtl_ymax(&a) == 8.0 * 1024 * KIB);
  int pk = a.tl_x + (int)((double)a.tl_w * 7.5 / (double)n);
  uint32_t top = px(&fb, pk, a.tl_y + a.tl_h / 5);
  ASSERT(top != VC_GRID && top != VC_PANEL);
  ASSERT(fb_has_text(&fb, a.tlb_x, a.tl_y - 8, a.tl_x, a.tl_y + 8, 1,
                     VC_DIM, "8.0 MiB"));
  ASSERT(fb_has_text(&fb, a.tlb_x, a.tl_y + a.tl_h, a.tl_x + 40,
                     a.tlb_y + a.tlb_h, 1, VC_DIM, "OP 0"));
  /* The legend: above the chart, none of it over the data. */
  ASSERT(fb_has_text(&fb, a.tlb_x, a.tlb_y, a.tlb_x + a.tlb_w, a.tl_y - 8,
                     1, VC_DIM, "LIVE BYTES BY TAG"));
  ASSERT(!fb_has_text(&fb, a.tl_x, a.tl_y, a.tl_x + a.tl_w, a.tl_y + a.tl_h,
                      1, VC_DIM, "LIVE BYTES BY TAG"));
  /* The hover at the peak: op 7, 7 MiB used; near the bottom tag 7's
   * 6 MiB, near the top tag 9's 1 MiB block. */
  char l[4][96];
  int hy = a.tl_y + a.tl_h - 3;
  ASSERT_EQ(vtl_hover(&a, pk, hy, l, 4), 2);
  ASSERT(strstr(l[0], "OP 7") && strstr(l[0], "USED 7.0 MiB"));
  ASSERT(strstr(l[1], "TAG 7") && strstr(l[1], "6.0 MiB"));
  int ty = a.tl_y + a.tl_h - (int)(6.5 / 8 * a.tl_h);
  ASSERT_EQ(vtl_hover(&a, pk, ty, l, 4), 2);
  ASSERT(strstr(l[1], "TAG 9") && strstr(l[1], "1.0 MiB"));
  ASSERT_EQ(vtl_hover(&a, pk, a.tlb_y, l, 4), 0); /* the legend strip */
  a.tl_mouse = 1, a.mouse_x = pk, a.mouse_y = hy;
  vframe_draw(&a, &fb);
  ASSERT_TEXT(&fb, VC_TEXT, "TAG 7  6.0 MiB");
  a.tl_mouse = 0;
  /* Zoom in time at the chart's middle: its ends move in; < and > pan;
   * all the way out is the whole run again. */
  int mid = a.tl_x + a.tl_w / 2;
  vtl_zoom(&a, mid, 1);
  uint64_t l0 = vtl_x_at(&a, a.tl_x), h0 = vtl_x_at(&a, a.tl_x + a.tl_w);
  ASSERT(l0 > 0 && h0 < n && h0 - l0 <= n / 2 + 1);
  vinput_key(&a, '>');
  ASSERT(vtl_x_at(&a, a.tl_x) > l0);
  vinput_key(&a, '<');
  vinput_key(&a, '<');
  ASSERT(vtl_x_at(&a, a.tl_x) < l0);
  vinput_wheel(&a, mid, a.tl_y + 2, -1);
  vinput_wheel(&a, mid, a.tl_y + 2, -1);
  ASSERT_U64_EQ(vtl_x_at(&a, a.tl_x), 0);
  ASSERT_U64_EQ(vtl_x_at(&a, a.tl_x + a.tl_w), n);
  gpbt_fb_free(&fb);
  vapp_close(&a);
  printf("timeline chart: ok\n");
}

/* Free blocks per order, readable: at 1600x1000 (10 orders with free
 * blocks), the default 1280x800 (they were 3-pixel slivers, then not
 * drawn at all under the taller timeline) and 900x600 (their labels
 * collided), every order's size and count are drawn whole (at the
 * panel's text scale or at 1). */
static void test_buddyinfo_legible(void) {
  gpb_trace_op_t ops[] = {op_alloc(0, 4 * KIB, 1)};
  vops_t *o;
  ASSERT_OK(vops_open_array(ops, 1, &o));
  gpb_config_t cfg;
  cfg_for(&cfg, 4096 * KIB, 4 * KIB, GPB_POLICY_BUDDY);
  vapp_t a;
  ASSERT_OK(vapp_open_replay(&a, o, &cfg));
  ASSERT_OK(vapp_seek(&a, 1));
  a.paused = 1;
  vapp_update(&a, 0);
  static const int sizes[][2] = {{1600, 1000}, {1280, 800}, {900, 600}};
  for (int i = 0; i < 3; i++) {
    gpbt_fb_t fb;
    int w = sizes[i][0], h = sizes[i][1];
    ASSERT_OK(gpbt_fb_init(&fb, w, h));
    a.scale = vframe_auto_scale(w, h, 1);
    vframe_draw(&a, &fb);
    ASSERT_EQ((int)a.stats.num_orders, 11);
    int px0 = a.map_x + a.map_w;
    for (uint32_t k = 0; k < 10; k++) {
      char b1[32], num[8];
      vfmt_bytes((4 * KIB) << k, b1, sizeof b1);
      snprintf(num, sizeof num, "%" PRIu64, a.stats.free_blocks[k]);
      ASSERT_U64_EQ(a.stats.free_blocks[k], 1);
      int ok = 0;
      for (int sc = a.scale; sc >= 1 && !ok; sc--)
        ok = fb_has_text(&fb, px0, 0, w, a.map_h, sc, VC_DIM, b1) &&
             fb_has_text(&fb, px0 + 40, 0, w, a.map_h, sc, VC_DIM, num);
      if (!ok) FAILF("%dx%d: order %u (%s, %s free) is not drawn whole", w, h,
                     k, b1, num);
    }
    gpbt_fb_free(&fb);
  }
  vapp_close(&a);
  printf("free blocks per order, legible: ok\n");
}

/* 64 tags, 64 colours apart from each other and from free blocks and
 * the background (they shared 16: tag 16 looked like tag 0). */
static void test_tag_colors(void) {
  for (uint32_t i = 0; i < GPB_MAX_TAGS; i++) {
    ASSERT(rgb_dist(vc_tag(i), VC_FREE) >= 150);
    ASSERT(rgb_dist(vc_tag(i), VC_BG) >= 150);
    for (uint32_t j = 0; j < i; j++)
      if (rgb_dist(vc_tag(i), vc_tag(j)) < 40)
        FAILF("tags %u and %u: %08x and %08x are too close", i, j,
              vc_tag(i), vc_tag(j));
  }
  printf("tag colours: ok\n");
}

/* Status messages at 1600 px (text at scale 2) are not cut at the right
 * edge: a long one goes alone, on two lines if it must. */
static void test_status_msg(void) {
  gpb_trace_op_t ops[] = {op_alloc(0, 64 * KIB, 1)};
  vapp_t a;
  replay_at(&a, ops, 1, 1);
  gpbt_fb_t fb;
  ASSERT_OK(gpbt_fb_init(&fb, 1600, 1000));
  a.scale = vframe_auto_scale(1600, 1000, 1);
  ASSERT_EQ(a.scale, 2);
  vapp_message(&a, "disconnected: the pool's program is gone; watching for "
               "it to come back (the relay at 127.0.0.1:7461 end)");
  vframe_draw(&a, &fb);
  ASSERT(fb_has_text(&fb, 0, fb.h - 60, fb.w, fb.h, 2, VC_WASTE,
                     "(the relay at 127.0.0.1:7461 end)"));
  /* Longer than the window: both halves drawn. */
  char m[256];
  memset(m, 0, sizeof m);
  for (int i = 0; i < 17; i++) strcat(m, "word1234 ");
  strcat(m, "LASTWORD");
  vapp_message(&a, "%s", m);
  vframe_draw(&a, &fb);
  ASSERT(fb_has_text(&fb, 0, fb.h - 60, fb.w, fb.h, 2, VC_WASTE, "LASTWORD"));
  ASSERT(fb_has_text(&fb, 0, fb.h - 60, fb.w, fb.h, 2, VC_WASTE,
                     "word1234 word1234"));
  gpbt_fb_free(&fb);
  vapp_close(&a);
  printf("status messages: ok\n");
}

/* A live pool failing fast (2000 failures at once, as ~150 a second
 * for many seconds): o shows the latest failure explained, [ and ] walk
 * the explained ones, a tick of one not explained shows the nearest that
 * is. o said "was not explained" and [ did not move; past 1024 failures
 * the series kept only the first ones. */
static void test_live_oom_burst(void) {
  char name[64];
  snprintf(name, sizeof name, "t-view-oomb-%d", (int)getpid());
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_HOST;
  cfg.pool_size = 1024 * KIB;
  cfg.min_block = 4 * KIB;
  cfg.name = name;
  cfg.flags = GPB_CFG_NO_ENV;
  gpb_pool_t *p;
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  vapp_t a;
  ASSERT_OK(vapp_open_live(&a, name, NULL, NULL));
  void *x, *y, *z = NULL;
  ASSERT_OK(gpb_alloc(p, 512 * KIB, &x));
  ASSERT_OK(gpb_alloc(p, 256 * KIB, &y));
  for (int i = 0; i < 2000; i++) {
    ASSERT(gpb_alloc(p, 512 * KIB, &z) == GPB_ENOMEM);
    /* Poll now and then, as a window does, so the ring is read. */
    if (i % 100 == 99) vapp_update(&a, 0);
  }
  gpb_stats_t st;
  ASSERT_OK(gpb_pool_stats(p, &st));
  live_catch_up(&a, st.seq);
  ASSERT_U64_EQ(a.series.ooms, 2000);
  const vseries_t *se = &a.series;
  uint64_t last = se->oom[se->noom - 1].x;
  ASSERT_U64_EQ(last, gpb_model_seq(a.model)); /* the latest is kept */
  vinput_key(&a, 'o');
  ASSERT(a.oom.sel >= 0);
  ASSERT_U64_EQ(a.oom.ex[a.oom.sel].rec.x, last);
  gpbt_fb_t fb;
  ASSERT_OK(gpbt_fb_init(&fb, 900, 500));
  vframe_draw(&a, &fb);
  ASSERT_TEXT(&fb, VC_TEXT, "FREE 256.0 KiB  LARGEST FREE BLOCK 256.0 KiB");
  /* More failures while the panel is open: the ring holds still, so [
   * goes to the one before the failure shown (it went to the 4th, the
   * ring all newer than the one shown). */
  for (int i = 0; i < 100; i++)
    ASSERT(gpb_alloc(p, 512 * KIB, &z) == GPB_ENOMEM);
  ASSERT_OK(gpb_pool_stats(p, &st));
  live_catch_up(&a, st.seq);
  ASSERT_U64_EQ(a.series.ooms, 2100);
  vinput_key(&a, '[');
  ASSERT(a.oom.sel >= 0);
  ASSERT(a.oom.ex[a.oom.sel].rec.x < last &&
         a.oom.ex[a.oom.sel].rec.x > se->oom[se->noom - 200].x);
  vinput_key(&a, ']');
  ASSERT_U64_EQ(a.oom.ex[a.oom.sel].rec.x, last);
  /* [ walks back through the explained ones, one by one. */
  uint64_t prev = last;
  for (int i = 0; i < VOOM_LIVE - 1; i++) {
    vinput_key(&a, '[');
    ASSERT(a.oom.sel >= 0);
    uint64_t cur = a.oom.ex[a.oom.sel].rec.x;
    if (cur >= prev) FAILF("[ went from event %" PRIu64 " to %" PRIu64, prev, cur);
    prev = cur;
  }
  vinput_key(&a, ']');
  ASSERT(a.oom.ex[a.oom.sel].rec.x > prev);
  /* Closed and opened again: the latest failure, explained now. */
  vinput_key(&a, 'o');
  ASSERT(gpb_alloc(p, 512 * KIB, &z) == GPB_ENOMEM);
  ASSERT_OK(gpb_pool_stats(p, &st));
  live_catch_up(&a, st.seq);
  vinput_key(&a, 'o');
  ASSERT_U64_EQ(a.oom.ex[a.oom.sel].rec.x, gpb_model_seq(a.model));
  /* A tick in the middle of the timeline, a failure not explained: the
   * nearest explained one is shown, and the message says so. */
  vinput_key(&a, VKEY_ESC);
  ASSERT_EQ(a.oom.sel, -1);
  vframe_draw(&a, &fb);
  voom_pick(&a, se->noom / 2);
  ASSERT(a.oom.sel >= 0);
  ASSERT(strstr(a.msg, "nearest explained"));
  gpbt_fb_free(&fb);
  vapp_close(&a);
  gpb_free(p, x);
  gpb_free(p, y);
  gpb_pool_destroy(p);
  printf("live OOM burst: ok\n");
}

/* The failure's panel does not cover the window it explains (the
 * window of op 6 is the map's top half: the panel goes to the bottom),
 * and in a narrow window its lines end inside the map. */
static void test_oom_panel_place(void) {
  vapp_t a;
  sites_open(&a);
  gpbt_fb_t fb;
  ASSERT_OK(gpbt_fb_init(&fb, 900, 500));
  vframe_draw(&a, &fb);
  voom_pick(&a, 0); /* not seen yet: no failure, no panel */
  ASSERT_OK(vapp_seek(&a, 8));
  a.paused = 1;
  vinput_key(&a, 'o');
  vapp_update(&a, 0);
  ASSERT(a.oom.sel >= 0);
  const gpbt_oom_t *w = &a.oom.ex[a.oom.sel].why;
  ASSERT_U64_EQ(w->win.offset, 0);
  ASSERT_U64_EQ(w->win.size, 512 * KIB);
  vframe_draw(&a, &fb);
  uint64_t row = (uint64_t)a.map.cols * a.map.bpc;
  int wy1 = a.map_y + (int)((512 * KIB + row - 1) / row) * a.cell_px;
  if (a.oom.panel_y < wy1)
    FAILF("the panel (y %d..%d) covers the window (y %d..%d)", a.oom.panel_y,
          a.oom.panel_y + a.oom.panel_h, a.map_y, wy1);
  /* Narrow: no red border pixel right of the map (the box is inside). */
  gpbt_fb_t nb;
  ASSERT_OK(gpbt_fb_init(&nb, 640, 400));
  vframe_draw(&a, &nb);
  ASSERT(a.map_x + a.map_w < 640);
  for (int x = a.map_x + a.map_w; x < nb.w; x++)
    ASSERT(px(&nb, x, a.oom.panel_y) != VC_ALERT);
  gpbt_fb_free(&nb);
  gpbt_fb_free(&fb);
  vapp_close(&a);
  printf("OOM panel placement: ok\n");
}

/* PyTorch-like stacks: 15 frames of the caching allocator, c10 and
 * torch's Python before the user's code, the same innermost frame for
 * every site. The site is named by its first frame outside the framework
 * (legend, hover), the hover shows the user's frames first and whole
 * (wrapped, not cut at the start), and j k scroll the rest of the stack;
 * it showed about 15 C++ frames cut at their start and could not reach
 * the user's. */
static void test_deep_stacks(void) {
  char path[] = "/tmp/test_viewer_deep_XXXXXX";
  int fd = mkstemp(path);
  ASSERT(fd >= 0);
  FILE *f = fdopen(fd, "w");
  ASSERT(f);
  fputs("# gpubuddy-trace v2\n", f);
  for (int site = 1; site <= 2; site++) {
    fprintf(f, "# site %d ", site);
    for (int i = 0; i < 15; i++)
      fprintf(f, "/opt/pytorch/c10/cuda/CUDACachingAllocator.cpp:%d "
                 "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator"
                 "::malloc_%d;", 1200 + i, i);
    fprintf(f, "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py:1518 "
               "_call_impl;/home/user/src/transformers/models/llama/"
               "modeling_llama.py:%d forward;/home/user/train.py:40 step\n",
            site == 1 ? 216 : 301);
  }
  fputs("1 1000 alloc 0x10 262144 1 0x0 1\n2 2000 alloc 0x20 131072 2 0x0 2\n",
        f);
  fclose(f);
  vops_t *o;
  ASSERT_OK(vops_open_trace(path, &o));
  gpb_config_t cfg;
  cfg_for(&cfg, 1024 * KIB, 4 * KIB, GPB_POLICY_BUDDY);
  vapp_t a;
  ASSERT_OK(vapp_open_replay(&a, o, &cfg));
  ASSERT_OK(vapp_seek(&a, 2));
  a.paused = 1;
  vapp_update(&a, 0);
  /* The framework's frames; a library installed beside torch is not. */
  static const char *const fw[] = {
      "/opt/pytorch/c10/cuda/CUDACachingAllocator.cpp:1200 malloc",
      "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py:1518 x",
      "/usr/lib/python3.11/threading.py:1016 run", "<frozen runpy>:88 _run_code",
      "??:0 c10::cuda::alloc", "/usr/lib/libgpubuddy.so.0+0x41d8 gpb_alloc"};
  for (size_t i = 0; i < sizeof fw / sizeof *fw; i++)
    ASSERT(vsite_is_framework(fw[i], strlen(fw[i])));
  static const char *const user[] = {
      "/venv/lib/python3.11/site-packages/transformers/models/llama/"
      "modeling_llama.py:216 forward",
      "/home/user/train.py:40 step", "/srv/app+0x1a2f3 load_weights"};
  for (size_t i = 0; i < sizeof user / sizeof *user; i++)
    ASSERT(!vsite_is_framework(user[i], strlen(user[i])));
  char sh[64];
  ASSERT(!strcmp(vsite_short(vapp_site_text(&a, 1), sh, sizeof sh),
                 "modeling_llama.py:216 forward"));
  ASSERT(!strcmp(vsite_short(vapp_site_text(&a, 2), sh, sizeof sh),
                 "modeling_llama.py:301 forward"));
  gpbt_fb_t fb;
  ASSERT_OK(gpbt_fb_init(&fb, 1600, 1000));
  vframe_draw(&a, &fb);
  ASSERT_TEXT(&fb, VC_DIM, "#1 modeling_llama.py:216 forward");
  ASSERT_TEXT(&fb, VC_DIM, "#2 modeling_llama.py:301 forward");
  /* The side panel by site names them too. */
  a.side_sites = 1;
  vframe_draw(&a, &fb);
  ASSERT(fb_has_text(&fb, a.map_x + a.map_w, 0, fb.w, fb.h, a.scale, VC_DIM,
                     "modeling_llama.py:216 forward"));
  a.side_sites = 0;
  /* The hover: the user's frames first, whole (their directories too). */
  char l[12][80];
  int n = vsite_hover(&a, 1, l, 12, 60, 0);
  ASSERT_EQ(n, 12);
  ASSERT(strstr(l[0], "18 FRAMES, 2 YOURS FIRST"));
  ASSERT(!strcmp(l[1], "  >  /home/user/src/transformers/models/llama/modeling_llama"));
  ASSERT(!strcmp(l[2], "     .py:216 forward"));
  ASSERT(!strcmp(l[3], "  >  /home/user/train.py:40 step"));
  ASSERT(!strncmp(l[4], "  .  /opt/pytorch/c10/cuda/CUDACachingAllocator.cpp:1200", 56));
  ASSERT(strstr(l[11], "MORE (J K SCROLL)"));
  /* j scrolls down a row at a time; the last rows can be reached. */
  int skip = 0;
  while (skip < 100 && !strstr(l[n - 1], "step") &&
         !strstr(l[n - 1], "_call_impl")) {
    n = vsite_hover(&a, 1, l, 12, 60, ++skip);
  }
  ASSERT(skip < 100 && strstr(l[n - 1], "_call_impl"));
  /* In the window: hovering site 1's block draws its user frame, and j
   * scrolls the box. */
  a.mouse_in = 1;
  a.mouse_x = a.map_x + 10;
  a.mouse_y = a.map_y + 2;
  vframe_draw(&a, &fb);
  ASSERT(fb_has_text(&fb, 0, 0, fb.w, fb.h, a.scale, VC_TEXT,
                     "  >  /home/user/train.py:40 step"));
  vinput_key(&a, 'j');
  ASSERT_EQ(a.hover_skip, 1);
  vinput_key(&a, 'k');
  vinput_key(&a, 'k');
  ASSERT_EQ(a.hover_skip, 0);
  gpbt_fb_free(&fb);
  vapp_close(&a);
  unlink(path);
  printf("deep stacks: ok\n");
}

/* A relay that does not answer is said so, not drawn as a machine with
 * no pools ("0 POOLS"), and kept to be asked again, not refused (issue
 * 37). Port 1 on loopback: nobody listens there. */
static void test_grid_dead_relay(void) {
  vgrid_t g;
  vgrid_init(&g, NULL, VCOLOR_STATE, VLAYOUT_LINEAR);
  ASSERT_OK(vgrid_add_connect(&g, "127.0.0.1:1"));
  ASSERT_EQ(g.nrelays, 1);
  ASSERT(g.relays[0].down < 0);
  ASSERT(!vgrid_answering(&g));
  gpbt_fb_t fb;
  ASSERT_OK(gpbt_fb_init(&fb, 900, 500));
  vgrid_draw(&g, &fb);
  ASSERT(fb_has_text(&fb, 0, fb.h - 20, fb.w, fb.h, 1, VC_ALERT,
                     "RELAY 127.0.0.1:1 NOT ANSWERING"));
  ASSERT(!fb_has_text(&fb, 0, fb.h - 20, fb.w, fb.h, 1, VC_TEXT, "0 POOLS"));
  gpbt_fb_free(&fb);
  vgrid_close(&g);
  printf("dead relay: ok\n");
}

/* Whether relay r's cell has its caption: the address and NOT ANSWERING
 * in red, at text scale s or 1. */
static int relay_cell_drawn(const gpbt_fb_t *fb, const vrelay_t *r, int s) {
  int addr = 0, what = 0;
  for (int sc = s; sc >= 1 && !(addr && what); sc--) {
    addr = addr || fb_has_text(fb, r->x, r->y, r->x + r->w, r->y + r->h, sc,
                               VC_ALERT, r->addr);
    what = what || fb_has_text(fb, r->x, r->y, r->x + r->w, r->y + r->h, sc,
                               VC_ALERT, "NOT ANSWERING");
  }
  return addr && what;
}

/* Whether every pixel of colour c in the grid's cell area (above the
 * status line) lies in relay r's cell. */
static int red_inside(const gpbt_fb_t *fb, const vrelay_t *r, uint32_t c) {
  for (int y = 0; y < fb->h - 40; y++)
    for (int x = 0; x < fb->w; x++)
      if (px(fb, x, y) == c && (x < r->x || x >= r->x + r->w || y < r->y ||
                                y >= r->y + r->h))
        return 0;
  return 1;
}

/* A relay that does not answer has a cell of its own in the grid (it was
 * only in the status line): its address and NOT ANSWERING in red, on a
 * dim cell, at the default 1280x800 with one pool (text scale 2) and 12
 * (a cell 85 pixels wide: scale 1), placed before its pools' cells, which
 * take its place once it answers again. With 40 (51 pixels) the caption
 * is wrapped, and stays in its cell. */
static void test_grid_relay_cell(void) {
  static const int npools[] = {1, 12, 40};
  for (int t = 0; t < 3; t++) {
    vgrid_t g;
    vgrid_init(&g, NULL, VCOLOR_STATE, VLAYOUT_LINEAR);
    ASSERT_OK(vgrid_add_connect(&g, "127.0.0.1:1"));
    ASSERT(g.relays[0].down < 0);
    for (int i = 0; i < npools[t]; i++) {
      char key[48];
      snprintf(key, sizeof key, "%s/pool-%02d", i % 2 ? "127.0.0.9:7" : "127.0.0.1:1", i);
      ASSERT_OK(vgrid_add_app(&g, grid_pool_524(), key));
    }
    gpbt_fb_t fb;
    ASSERT_OK(gpbt_fb_init(&fb, 1280, 800));
    g.scale = vframe_auto_scale(fb.w, fb.h, 1);
    vgrid_draw(&g, &fb);
    const vrelay_t *r = &g.relays[0];
    ASSERT(r->w > 0 && r->h > 0);
    if (t < 2 && !relay_cell_drawn(&fb, r, g.scale))
      FAILF("%d pools: relay cell %dx%d at %d,%d has no red caption", npools[t],
            r->w, r->h, r->x, r->y);
    /* Dim, not the panel: a cell, not a hole. */
    ASSERT_EQ(px(&fb, r->x + 2, r->y + 2), VC_DOWN);
    /* First: "127.0.0.1:1" sorts before its pools, which come after it. */
    ASSERT(r->x < g.cells[0].x || r->y < g.cells[0].y);
    for (int i = 0; i < g.n; i++) {
      const vcell_t *c = &g.cells[i];
      ASSERT(c->x >= r->x + r->w || c->y >= r->y + r->h || c->x + c->w <= r->x ||
             c->y + c->h <= r->y);
    }
    if (t == 1) ASSERT(r->w < gpbt_font_width(g.scale, "NOT ANSWERING"));
    if (t == 2) {
      ASSERT(r->w < gpbt_font_width(1, "NOT ANSWERING"));
      ASSERT(fb_has_text(&fb, r->x, r->y, r->x + r->w, r->y + r->h, 1,
                         VC_ALERT, "127.0.0."));
      ASSERT(fb_has_text(&fb, r->x, r->y, r->x + r->w, r->y + r->h, 1,
                         VC_ALERT, "NOT"));
    }
    ASSERT(red_inside(&fb, r, VC_ALERT));
    /* Answering again: its cell goes and its first pool takes the place. */
    int x0 = r->x, y0 = r->y;
    g.relays[0].down = 0;
    vgrid_draw(&g, &fb);
    ASSERT_EQ(r->w, 0);
    ASSERT(!fb_has_text(&fb, 0, 0, fb.w, fb.h - 40, g.scale, VC_ALERT,
                        "NOT ANSWERING"));
    ASSERT(!fb_has_text(&fb, 0, 0, fb.w, fb.h - 40, 1, VC_ALERT,
                        "NOT ANSWERING"));
    ASSERT(g.cells[0].x == x0 && g.cells[0].y == y0);
    gpbt_fb_free(&fb);
    vgrid_close(&g);
  }
  printf("dead relay's cell: ok\n");
}

/* A program that exits gracefully frees everything, then closes its
 * pool: the view shows the pool as it was before that teardown (it
 * showed the emptied pool as "last state"), and a program that comes
 * back under the name replaces it. */
static void test_last_state(void) {
  char name[64];
  snprintf(name, sizeof name, "t-view-last-%d", (int)getpid());
  gpb_pool_t *p = named_pool(name, 1024 * KIB);
  vapp_t a;
  ASSERT_OK(vapp_open_live(&a, name, NULL, NULL));
  void *x, *y, *z, *w;
  ASSERT_OK(gpb_alloc(p, 64 * KIB, &x));
  ASSERT_OK(gpb_alloc(p, 128 * KIB, &y));
  ASSERT_OK(gpb_alloc(p, 16 * KIB, &z));
  gpb_free(p, x); /* churn: not the teardown */
  ASSERT_OK(gpb_alloc(p, 256 * KIB, &w));
  gpb_stats_t st;
  ASSERT_OK(gpb_pool_stats(p, &st));
  live_catch_up(&a, st.seq);
  ASSERT_U64_EQ(a.stats.live_allocs, 3);
  uint64_t used = a.stats.block_bytes;
  /* Teardown: all freed, then the pool closed. */
  gpb_free(p, y);
  gpb_free(p, z);
  gpb_free(p, w);
  gpb_pool_destroy(p);
  for (int i = 0; i < 200 && !a.disconnected; i++) {
    vapp_update(&a, 0);
    usleep(1000);
  }
  ASSERT(a.disconnected);
  ASSERT(a.held != NULL);
  ASSERT_U64_EQ(a.stats.live_allocs, 3);
  ASSERT_U64_EQ(a.stats.block_bytes, used);
  ASSERT(strstr(a.msg, "before its teardown"));
  gpbt_fb_t fb;
  ASSERT_OK(gpbt_fb_init(&fb, 900, 500));
  vframe_draw(&a, &fb);
  ASSERT(fb_has_text(&fb, 0, 0, fb.w, fb.h, 2, VC_ALERT,
                     "DISCONNECTED - LAST STATE BEFORE TEARDOWN"));
  /* The program back under the name: its pool, not the held state. */
  p = named_pool(name, 1024 * KIB);
  ASSERT_OK(vapp_reopen(&a));
  ASSERT(a.held == NULL && !a.disconnected);
  vapp_update(&a, 0);
  ASSERT_U64_EQ(a.stats.live_allocs, 0);
  gpbt_fb_free(&fb);
  vapp_close(&a);
  gpb_pool_destroy(p);
  printf("last state before teardown: ok\n");
}

/* Two runs compared: each in its own pool, the axes shared (the higher
 * peak, the longer run), a key steps both, a seek on one timeline moves
 * both, a time zoom on one zooms both; --json says B - A. */
static void test_compare(void) {
  vcmp_t c;
  gpb_config_t cfg;
  cfg_for(&cfg, 1024 * KIB, 4 * KIB, GPB_POLICY_BUDDY);
  ASSERT_OK(vcmp_open(&c, GPB_TEST_DATA "/sites_oom.trace",
                      GPB_TEST_DATA "/churn_small.trace.gz", &cfg, 0));
  vcmp_seek(&c, UINT64_MAX - 1);
  gpbt_fb_t fb;
  ASSERT_OK(gpbt_fb_init(&fb, 1600, 1000));
  c.scale = 2;
  vcmp_draw(&c, &fb);
  vapp_t *a = &c.app[0], *b = &c.app[1];
  ASSERT(a->total_ops == 8 && b->total_ops > 8);
  ASSERT(a->info.pool_size != b->info.pool_size || vtl_peak(a) != vtl_peak(b));
  /* Shared axes: the same byte scale and op span in both halves. */
  ASSERT(vtl_ymax(a) == vtl_ymax(b) && vtl_ymax(a) > 0);
  ASSERT_U64_EQ(vtl_x_at(a, a->tl_x + a->tl_w), b->total_ops);
  ASSERT_U64_EQ(vtl_x_at(b, b->tl_x + b->tl_w), b->total_ops);
  ASSERT(fb_has_text(&fb, 0, 0, fb.w, c.top_h, 2, VC_WASTE, "B - A: PEAK"));
  /* Each half's status line fits its half: the position whole. */
  char pos[32];
  snprintf(pos, sizeof pos, "OP %" PRIu64 "/%" PRIu64, vapp_pos(b), b->total_ops);
  ASSERT(fb_has_text(&fb, c.half_w, fb.h - 30, fb.w, fb.h, 2, VC_TEXT, pos));
  /* ... and ends before its edge (it ran into it, cut mid-word). */
  for (int y = fb.h - 24; y < fb.h; y++)
    for (int x = c.half_w - 10; x < c.half_w; x++)
      ASSERT(px(&fb, x, y) != VC_TEXT);
  /* Home then a step: both at op 1. */
  vcmp_key(&c, VKEY_HOME);
  vcmp_update(&c, 0);
  vcmp_key(&c, '.');
  vcmp_update(&c, 0);
  ASSERT_U64_EQ(vapp_pos(a), 1);
  ASSERT_U64_EQ(vapp_pos(b), 1);
  /* A click on A's timeline seeks B to the same op. */
  vcmp_draw(&c, &fb);
  int cx = a->tl_x + a->tl_w / 2, cy = c.top_h + a->tl_y + a->tl_h / 2;
  vcmp_button(&c, cx, cy, 1);
  vcmp_button(&c, cx, cy, 0);
  ASSERT(b->seek_to != UINT64_MAX && b->seek_to == a->seek_to);
  /* A time zoom on B's timeline zooms A's too. */
  int bx = c.half_w + 2 * c.scale + b->tl_x + b->tl_w / 2;
  vcmp_wheel(&c, bx, c.top_h + b->tl_y + 2, 1);
  ASSERT(b->tl_zhi > 0 && a->tl_zlo == b->tl_zlo && a->tl_zhi == b->tl_zhi);
  static char js[1 << 16];
  memset(js, 0, sizeof js);
  FILE *f = fmemopen(js, sizeof js - 1, "w");
  ASSERT(f);
  vcmp_json(&c, f);
  fclose(f);
  char want[96];
  snprintf(want, sizeof want, "\"diff\":{\"peak\":%" PRId64 ",",
           (int64_t)vtl_peak(b) - (int64_t)vtl_peak(a));
  ASSERT(strstr(js, "{\"a\":{\"name\": ") && strstr(js, want));
  gpbt_fb_free(&fb);
  vcmp_close(&c);
  printf("compare: ok\n");
}

/* One band per allocation (memory_viz's active memory timeline): each
 * allocation recorded once (a replay run again adds none), stacked on
 * those made before it, falling when one below is freed; the hover names
 * it. */
static void test_bands(void) {
  gpb_trace_op_t ops[] = {
      op_alloc(0, 64 * KIB, 1), op_alloc(1, 128 * KIB, 2),
      op_alloc(2, 64 * KIB, 3), op_free(0), op_free(2), op_free(1)};
  vapp_t a;
  replay_at(&a, ops, 6, 6);
  ASSERT_OK(vapp_seek(&a, 0));
  ASSERT_OK(vapp_seek(&a, 6));
  vapp_update(&a, 0);
  ASSERT_EQ((int)a.bands.n, 3);
  ASSERT_U64_EQ(a.bands.peak, 256 * KIB);
  ASSERT_U64_EQ(a.bands.v[0].t0, 1);
  ASSERT_U64_EQ(a.bands.v[0].t1, 4);
  ASSERT_U64_EQ(a.bands.v[1].t1, 6);
  vinput_key(&a, 'a');
  ASSERT(a.show_bands);
  gpbt_fb_t fb;
  ASSERT_OK(gpbt_fb_init(&fb, 900, 500));
  vframe_draw(&a, &fb);
  /* The chart's column at op 3.5 (A, B, C live), and at op 4.5 (A freed:
   * B at the bottom, C above it). */
  int c3 = (int)((double)a.map_w * 3.5 / 6), c4 = (int)((double)a.map_w * 4.5 / 6);
  int bottom = a.map_h - 1;
  const vband_t *r = vbands_at(&a.bands, c3, bottom);
  ASSERT(r && r == &a.bands.v[0]);
  r = vbands_at(&a.bands, c4, bottom);
  ASSERT(r && r == &a.bands.v[1]);
  r = vbands_at(&a.bands, c4, a.map_h - 1 - (int)(a.map_h * 0.6));
  ASSERT(r && r == &a.bands.v[2]); /* C at 128..192 KiB of 256 */
  ASSERT(!vbands_at(&a.bands, c4, 2)); /* above the stack */
  ASSERT_EQ(px(&fb, a.map_x + c4, a.map_y + 2 + 20), VC_BG);
  a.mouse_in = 1;
  a.mouse_x = a.map_x + c4;
  a.mouse_y = a.map_y + bottom;
  vframe_draw(&a, &fb);
  ASSERT_TEXT(&fb, VC_TEXT, "ALLOCATION 2 OF 3");
  ASSERT_TEXT(&fb, VC_TEXT, "OPS 2 TO 6");
  /* Kept: a redraw with nothing changed renders no new chart. */
  uint64_t n = a.bands.renders;
  vframe_draw(&a, &fb);
  ASSERT_U64_EQ(a.bands.renders, n);
  gpbt_fb_free(&fb);
  vapp_close(&a);
  printf("allocation bands: ok\n");
}

int main(void) {
  uint64_t seed = test_seed();
  double sc = test_scale();
  uint64_t steps = (uint64_t)(20000 * sc);
  if (steps < 500) steps = 500;
  test_font();
  test_png();
  test_known_layout();
  test_free_contrast();
  test_title_tail();
  test_full_speed();
  test_grid();
  test_reattach();
  test_unusable();
  test_refit();
  test_trace_addr();
  test_legible();
  test_sites();
  test_live_oom();
  test_timeline_chart();
  test_status_msg();
  test_tag_colors();
  test_buddyinfo_legible();
  test_grid_captions();
  test_live_oom_burst();
  test_oom_panel_place();
  test_deep_stacks();
  test_grid_dead_relay();
  test_grid_relay_cell();
  test_last_state();
  test_compare();
  test_bands();
  for (int pol = 0; pol < 2; pol++)
    for (int lay = 0; lay < 2; lay++)
      for (int zoom = 0; zoom <= 8; zoom += 4)
        test_incremental(pol ? GPB_POLICY_TRIM : GPB_POLICY_BUDDY,
                         lay ? VLAYOUT_TREE : VLAYOUT_LINEAR, zoom,
                         seed + (uint64_t)zoom, steps / 4);
  test_replay_stats(seed, steps);
  test_garbled_trace();
  test_readahead();
  printf("test_viewer: ok\n");
  return 0;
}
