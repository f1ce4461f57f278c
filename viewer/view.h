/* SPDX-License-Identifier: MIT */
/*
 * view.h: declarations shared by the files of gpubuddy-view.
 *
 * The viewer is split so that everything but the window is plain C with no
 * SDL: a source (trace replay through a virtual pool, or a live reader)
 * keeps a gpb_model_t current and calls back for every event; the block map
 * (map.c) keeps per-cell sums updated from those events; the frame
 * (frame.c) is drawn into our own 32-bit pixel buffer (gpbt_fb_t, shared
 * with the bench's plots in tools/common/raster.h), which the window
 * (main.c) uploads to a streaming texture and headless mode writes as PNG.
 * Tests link the same files and check the buffer pixel by pixel.
 *
 * Files: map.c (layout, block map rasterizer), frame.c (panels and the
 * whole frame), draw.c (palette), series.c (time series), replay.c (trace
 * and pattern source), live.c (attach source), input.c (keys and mouse),
 * app.c (the viewer object, event plumbing), grid.c (many pools at once),
 * main.c (options, headless, bench), window.c (the SDL2 window),
 * timeline.c (memory over time), oomview.c (failed allocations
 * explained), sites.c (call sites: text, hover, JSON). Text, PNG, the
 * explainer and the per-site sums come from tools/common.
 */
#ifndef GPB_VIEW_H
#define GPB_VIEW_H

#include "gpubuddy.h"
#include "raster.h" /* the pixel buffer, font and PNG writer (tools/common) */
#include "oom.h"      /* the failed-allocation explainer (tools/common) */
#include "topsites.h" /* bytes by call site (tools/common) */
#include "idmap.h"    /* the tools' hash table (tools/common) */

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---------------------------------------------------------------- colors */

/* Pixels are 0xAARRGGBB with alpha always 0xFF (SDL_PIXELFORMAT_ARGB8888). */
#define VC_BG 0xFF101418u     /* outside the pool, panel background */
/* Free must stand out from VC_BG (empty tree rows, outside the pool) and
 * from every used color: tests/test_viewer.c checks the distances. */
#define VC_FREE 0xFF33774Au   /* free block */
#define VC_USED 0xFF3B82F6u   /* used block, requested bytes */
#define VC_WASTE 0xFFF59E0Bu  /* used block, bytes past the request */
#define VC_SPLIT 0xFF303846u  /* buddy tree: node split into smaller blocks */
#define VC_TEXT 0xFFE6E6E6u
#define VC_DIM 0xFF8A8F98u
#define VC_ALERT 0xFFEF4444u
#define VC_PANEL 0xFF181C24u
#define VC_GRID 0xFF2C323Cu
#define VC_HILITE 0xFFFFFFFFu
#define VC_DOWN 0xFF13171Du   /* grid: a relay not answering, its cell */

uint32_t vc_mix(uint32_t a, uint32_t b, double t); /* t=0: a, t=1: b */
uint32_t vc_scale(uint32_t c, double f);
uint32_t vc_ramp(double t);   /* 0..1 onto a blue-green-yellow ramp */
uint32_t vc_tag(uint32_t tag); /* a distinct color per tag */
/* A distinct color per call site; site 0 (unknown) is slate grey. */
uint32_t vc_site(uint32_t site);
/* A free block in a mode that colors blocks by c (order): c greyed, so
 * free and used of one color differ and neither sinks into VC_BG. */
uint32_t vc_free_of(uint32_t c);

/* -------------------------------------------------------------- the map */

typedef enum vcolor_mode {
  VCOLOR_STATE = 0, /* free / used / internal waste */
  VCOLOR_ORDER,     /* buddy order of the blocks */
  VCOLOR_TAG,       /* the allocation's tag */
  VCOLOR_AGE,       /* time since allocation */
  VCOLOR_SITE,      /* the allocation's call site */
  VCOLOR_COUNT
} vcolor_mode_t;

typedef enum vlayout {
  VLAYOUT_LINEAR = 0, /* address space row by row */
  VLAYOUT_TREE        /* one row per order, address across */
} vlayout_t;

/* The block map keeps, for each visible cell, sums over the bytes the cell
 * covers: bytes in used blocks, bytes asked for, order x bytes, block
 * starts, last tag, alloc time x bytes. Events update only the cells they
 * touch, and only touched cells are recolored, so a frame costs the cells
 * on screen, not the blocks in the pool. A view change (zoom, pan, resize)
 * rebuilds the sums from the model once: O(blocks in view). */
typedef struct vmap {
  uint64_t managed, min_block;
  uint32_t min_shift, norders;
  vlayout_t layout;
  vcolor_mode_t color;
  int cols, rows;    /* linear: cells; tree: columns and norders */
  uint64_t bpc;      /* bytes per cell or column: 2^k, or any size at fit */
  uint64_t start;    /* byte offset of cell 0, a multiple of bpc */
  uint64_t end;      /* start + covered bytes, clipped to managed */
  size_t ncells, cap;
  uint32_t *used, *req; /* bytes in used blocks; bytes requested */
  uint64_t *ordsum;     /* order x bytes over all blocks */
  uint32_t *nstart;     /* blocks starting in the cell */
  float *tsum;          /* alloc time (ms after t0) x used bytes */
  uint8_t *tag;         /* tag of the last allocation to touch the cell */
  uint16_t *site;       /* call site of the last allocation to touch it */
  uint64_t *tfree, *tused; /* tree: [order * cols + col] bytes */
  uint32_t *rgb;        /* per cell (linear) or [order * cols + col] */
  uint32_t *dirty;      /* cells to recolor */
  uint8_t *dflag;
  size_t ndirty;
  int all_dirty, need_rebuild;
  int zoomed;        /* the user zoomed in: a resize keeps the zoom */
  /* Events wider than VMAP_WIDE cells do not update cells one by one:
   * they mark chunks of VMAP_CHUNK cells stale, and vmap_refresh rebuilds
   * those from the model once per frame, so an event costs O(1) cells
   * however large it is. */
  uint8_t *stale;       /* per chunk */
  size_t nchunks, nstale;
  uint64_t clip_lo, clip_hi; /* byte window map_cells clips to */
  uint64_t t0_ns, now_ns; /* first and latest event time (age colors) */
} vmap_t;

int vmap_init(vmap_t *m, uint64_t managed, uint64_t min_block);
void vmap_free(vmap_t *m);
/* Sets the grid and marks a rebuild. A fitted view is fitted to the new
 * grid (a smaller window showed only part of the pool); a zoomed one
 * keeps its zoom and start when it can. */
int vmap_resize(vmap_t *m, int cols, int rows);
void vmap_set_layout(vmap_t *m, vlayout_t l);
void vmap_set_color(vmap_t *m, vcolor_mode_t c);
/* Zoom by 2^steps (positive = in) keeping byte `anchor` under cell
 * `anchor_cell`; bpc stays within [min_block/16, fit]. */
void vmap_zoom(vmap_t *m, int steps, uint64_t anchor, uint64_t anchor_cell);
void vmap_fit(vmap_t *m);
/* Scroll by `rows` rows (linear) or columns/4 (tree). */
void vmap_scroll(vmap_t *m, int64_t rows);
/* Centers the view on `off` at a zoom where its block spans cells. */
void vmap_center(vmap_t *m, uint64_t off, uint64_t block_size);
/* Applies one event's effect on the cell sums. */
void vmap_event(vmap_t *m, const gpb_event_t *ev);
/* Rebuilds all sums from the model (after a view change or resync). */
void vmap_rebuild(vmap_t *m, const gpb_model_t *model);
#define VMAP_CHUNK 64
#define VMAP_WIDE 64
/* Rebuilds stale chunks from the model; call before vmap_colorize. */
void vmap_refresh(vmap_t *m, const gpb_model_t *model);
/* The mode the tree layout draws for mode c (state for tag and age). */
vcolor_mode_t vmap_tree_color(vcolor_mode_t c);
/* Recomputes colors of changed cells (all after a rebuild). */
void vmap_colorize(vmap_t *m);
/* Byte offset shown at cell (cx, cy) of the grid; UINT64_MAX if none. */
uint64_t vmap_offset_at(const vmap_t *m, int cx, int cy);

/* ---------------------------------------------------------- time series */

#define VSERIES_CAP 512
#define VSERIES_K 8        /* groups a point keeps: its largest sites, tags */
#define VSERIES_OOMS 1024  /* failures kept one by one (the rest: counted) */
/* One failed allocation: where (x), what it asked, whose. */
typedef struct vseries_oom {
  uint64_t x, requested;
  uint32_t site, tag;
} vseries_oom_t;
/* The largest groups (call sites or tags) of one point, largest first. */
typedef struct vseries_grp {
  uint16_t n;
  uint16_t id[VSERIES_K];
  uint64_t bytes[VSERIES_K];
} vseries_grp_t;
/* Bounded: when full, every other point is dropped and the sampling stride
 * doubles, so any run length fits in VSERIES_CAP points. A replay that
 * goes back keeps its points: those up to the last x are not taken again,
 * so the timeline covers all of the trace that was ever replayed. */
typedef struct vseries {
  uint64_t x[VSERIES_CAP];   /* ops (replay) or events (live) */
  double used[VSERIES_CAP];  /* bytes in used blocks */
  double largest[VSERIES_CAP];
  double frag[VSERIES_CAP];  /* external fragmentation 0..1 */
  vseries_grp_t site[VSERIES_CAP], tag[VSERIES_CAP]; /* used, by group */
  int n;
  uint64_t stride, count;
  vseries_oom_t oom[VSERIES_OOMS]; /* in x order */
  size_t noom;
  int oom_latest;            /* live: when full, drop the oldest quarter */
  uint64_t ooms;             /* all failures seen (noom of them kept) */
  uint64_t oom_x;            /* the x of the last one */
} vseries_t;
void vseries_reset(vseries_t *s);
/* Counts one step; samples the stats every `stride` steps; sites (may be
 * NULL) gives the live bytes per call site. Steps at or before the last
 * point (a replay run again) are skipped. */
void vseries_tick(vseries_t *s, uint64_t x, const gpb_model_t *model,
                  const gpbt_sites_t *sites);
void vseries_add(vseries_t *s, uint64_t x, const gpb_stats_t *st,
                 const gpbt_sites_t *sites);
/* A FAIL event at x, once: failures at or before the last one recorded
 * (a replay run again) are skipped. Returns 1 when it was new. */
int vseries_fail(vseries_t *s, uint64_t x, const gpb_event_t *ev);

/* --------------------------------------------------------------- sources */

/* An op source yields trace ops: a trace file, or a built-in pattern. */
typedef struct vops vops_t;
/* A trace file read and parsed ahead on a thread of its own
 * (readahead.c): vra_next is gpb_trace_next, overlapped with the caller. */
typedef struct vra vra_t;
/* Call site texts as a trace defines them ("FRAME;FRAME;..."), kept by
 * an op source across rewinds: the read-ahead thread adds them as ops
 * name them, so a lookup (under the table's lock) finds every site of the
 * ops read so far. Texts live until vsitetab_free. */
typedef struct vsitetab vsitetab_t;
vsitetab_t *vsitetab_new(void); /* NULL without memory */
void vsitetab_free(vsitetab_t *t);
const char *vsitetab_get(vsitetab_t *t, uint32_t site); /* NULL: none */
/* Prints why it cannot. sites (may be NULL) takes the texts of the sites
 * the ops name. */
int vra_open(const char *path, vsitetab_t *sites, vra_t **out);
int vra_next(vra_t *r, gpb_trace_op_t *op);   /* 1, 0 at the end, <0 */
const char *vra_error(const vra_t *r);
/* Once vra_next has returned 0: gpb_trace_warning's note ("" none). */
const char *vra_warning(const vra_t *r);
void vra_close(vra_t *r);

/* Opens `path` through vra_open. */
int vops_open_trace(const char *path, vops_t **out);
/* A deterministic synthetic workload: "churn", "checker" or "fill"
 * (fill: `steps` min-block allocations, then `steps` ops of churn). */
int vops_open_pattern(const char *name, uint64_t steps, uint64_t pool_size,
                      uint64_t min_block, uint64_t seed, vops_t **out);
/* Replays a copy of ops[0..n) (tests). */
int vops_open_array(const gpb_trace_op_t *ops, size_t n, vops_t **out);
/* As vops_open_array, taking ownership of a malloc'd ops (no copy). */
int vops_take_array(gpb_trace_op_t *ops, size_t n, vops_t **out);
/* 1 with *op, 0 at the end, <0 with vops_error(). */
int vops_next(vops_t *o, gpb_trace_op_t *op);
int vops_rewind(vops_t *o);
const char *vops_error(const vops_t *o);
/* A trace's gpb_trace_warning (a cut file, replayed up to the cut), "" for
 * none: known once the end was read (vreplay_count reads it at the open)
 * and printed on stderr then, once per source, as gpubuddy-replay does. */
const char *vops_warning(const vops_t *o);
/* The frames of call site `site` as the trace defines them; NULL when it
 * defines none (patterns and arrays never do). */
const char *vops_site(vops_t *o, uint32_t site);
void vops_close(vops_t *o);

typedef void (*vevent_fn)(const gpb_event_t *ev, void *user);

/* Replay: ops through a GPB_BACKEND_VIRTUAL pool whose hook feeds a model,
 * then `fn`. Scrubbing backwards replays again from the start: the pool
 * cannot load a keyframe, and re-running costs only ingest time, so
 * memory stays bounded however long the trace is. */
typedef struct vreplay vreplay_t;
int vreplay_open(vops_t *ops, const gpb_config_t *cfg, vreplay_t **out);
void vreplay_close(vreplay_t *r);
void vreplay_set_hook(vreplay_t *r, vevent_fn fn, void *user);
/* Runs up to `n` ops. Returns ops run (0 at the end) or <0 on a bad trace
 * (message in vreplay_error). */
int64_t vreplay_step(vreplay_t *r, uint64_t n);
/* Back to op 0 with an empty pool and model. */
int vreplay_restart(vreplay_t *r);
uint64_t vreplay_pos(const vreplay_t *r);
uint64_t vreplay_events(const vreplay_t *r);
int vreplay_at_end(const vreplay_t *r);
/* Counts the ops (one pass) so the timeline has an end; 0 if unknown. */
uint64_t vreplay_count(vreplay_t *r);
const gpb_model_t *vreplay_model(const vreplay_t *r);
const gpb_pool_info_t *vreplay_info(const vreplay_t *r);
const char *vreplay_error(const vreplay_t *r);
const char *vreplay_warning(const vreplay_t *r); /* vops_warning's */
uint64_t vreplay_failures(const vreplay_t *r);
/* The trace id of the allocation at offset off (its address in the
 * traced program, for PyTorch and RMM traces): 0, or GPB_ENOTFOUND. The
 * first call builds an offset -> id table in one pass over the live ids;
 * the replay keeps it from then on. */
int vreplay_trace_id(vreplay_t *r, uint64_t off, uint64_t *id);
/* A trace address: a live allocation's id, or inside its request. The
 * pool offset it is at in *off and the allocation's id in *id; 0, or
 * GPB_ENOTFOUND. Not exact ids cost a pass over the live ids. */
int vreplay_find_trace(vreplay_t *r, uint64_t addr, uint64_t *off,
                       uint64_t *id);
/* vops_site of the replay's ops. */
const char *vreplay_site(const vreplay_t *r, uint32_t site);

/* -------------------------------------------------- failures explained */

/* oomview.c: a failed allocation explained by tools/common/oom.c (the
 * explainer of gpubuddy-replay --explain-oom), in a panel over the map
 * (on the half away from the window it marks). The first VOOM_FIRST
 * failures are explained as they happen (the model is at the failure
 * then), so --json names them. A live view also explains later ones as
 * they happen into a ring of the last VOOM_LIVE, within a budget of
 * block visits refilled by event time (VOOM_VISITS_PER_S, at most
 * VOOM_VISITS_MAX saved up): a walk of the blocks each, so 150 failures
 * a second of a small pool are all explained and a pool of a million
 * blocks costs a few explanations a second. o, [ ] and the red ticks go
 * through the failures explained. A replay explains any failure by
 * seeking to it. */
#define VOOM_FIRST 4
#define VOOM_LIVE 32
#define VOOM_KEEP (VOOM_FIRST + VOOM_LIVE)
#define VOOM_VISITS_PER_S 2000000.0
#define VOOM_VISITS_MAX 4000000.0

typedef struct voom_ex {
  vseries_oom_t rec;
  gpbt_oom_t why;
} voom_ex_t;

typedef struct voom {
  gpbt_oom_map_t map;   /* kept between explanations */
  voom_ex_t ex[VOOM_KEEP];
  int nex;              /* slots filled (the first VOOM_FIRST: the first) */
  int next_live;        /* the live slot to fill next */
  double visits;        /* live: block visits the budget has left */
  uint64_t visits_ns;   /* live: event time the budget was refilled to */
  int sel;              /* the slot shown; -1: no panel */
  int want;             /* replay: seeking to `rec` to explain it */
  vseries_oom_t rec;
  int panel_y, panel_h; /* where the last frame drew the panel */
} voom_t;

/* ---------------------------------------------------- allocation bands */

/* bands.c: one band per allocation over time (memory_viz's active memory
 * timeline), in the map's place (key a). */
#define VBANDS_MAX (4u << 20) /* allocations recorded at most (128 MiB) */
typedef struct vband {
  uint64_t t0, t1;      /* op (live: event) allocated, freed; UINT64_MAX */
  uint64_t size;        /* block bytes */
  uint32_t site, tag;
} vband_t;
typedef struct vbands {
  vband_t *v;           /* in the order they were made */
  size_t n, cap, nfreed;
  int over;             /* VBANDS_MAX reached: no more recorded */
  gpbt_idmap_t live;    /* offset -> index of its live allocation */
  uint64_t last_x, live_bytes, peak;
  double ymax;
  /* the chart drawn last, and each pixel's allocation + 1 */
  uint32_t *img, *who, *by_free;
  size_t nsorted, sorted_nfreed, in;
  int iw, ih;
  uint64_t ilo, ihi, render_ns;
  double iymax;
  uint64_t renders;     /* charts drawn (tests) */
} vbands_t;
void vbands_init(vbands_t *b);
void vbands_fini(vbands_t *b);
/* An ALLOC or FREE at x (others are ignored); events at an x before the
 * last one recorded (a replay run again) add nothing. */
void vbands_event(vbands_t *b, const gpb_event_t *ev, uint64_t x);
/* A live view's keyframe: the allocations recorded live end at x (the
 * keyframe's own are not events). */
void vbands_resync(vbands_t *b, uint64_t x);
/* The chart of ops [lo, hi) into fb's w x h rectangle at (x, y), bytes
 * up to the peak; drawn again when the view changed, or new data came
 * and half a second passed. 0 or GPB_EHOSTMEM. */
int vbands_draw(vbands_t *b, gpbt_fb_t *fb, int x, int y, int w, int h,
                uint64_t lo, uint64_t hi, uint64_t now_ns);
/* The allocation under pixel (px, py) of the last chart, or NULL. */
const vband_t *vbands_at(const vbands_t *b, int px, int py);

/* -------------------------------------------------------------- the app */

typedef enum vsrc_kind { VSRC_REPLAY = 1, VSRC_LIVE } vsrc_kind_t;

/* Live: the FREE and MERGE events since the last split or alloc. A
 * program's graceful exit frees everything before it closes the pool,
 * so at the close these are its teardown, and undoing them (in reverse,
 * as ALLOC and SPLIT) gives its last state before it. */
#define VDRAIN_MAX (1u << 20) /* events kept at most (48 MiB) */
typedef struct vdrain {
  gpb_event_t *ev;
  size_t n, cap;
  int over;             /* more than VDRAIN_MAX: not undone */
} vdrain_t;

/* Playing steps this many ops between looks at the clock. */
#define VAPP_STEP_CHUNK 4096u

typedef struct vapp {
  vsrc_kind_t kind;
  vreplay_t *rp;          /* replay */
  gpb_attach_t *at;       /* live */
  const gpb_model_t *model;
  gpb_pool_info_t info;
  char title[128];
  vmap_t map;
  vseries_t series;
  gpbt_sites_t sites;     /* live bytes by call site (sites.c) */
  voom_t oom;             /* failures explained (oomview.c) */
  vbands_t bands;         /* one band per allocation (bands.c) */
  int show_bands;         /* the bands in the map's place (a) */
  gpb_stats_t stats;      /* refreshed once per frame */
  uint64_t events;        /* events seen by the map */
  uint64_t changes;       /* events and resyncs: the frame may differ */
  vdrain_t drain;         /* live: frees since the last alloc */
  gpb_model_t *held;      /* live, closed: the state before teardown,
                             shown instead of the emptied pool; owned */
  /* state shown in the status line */
  int paused, disconnected, failed;
  char msg[256];
  uint64_t msg_until_ns;
  double speed;           /* replay: ops per second; 0 = as fast as possible */
  double carry;           /* fractional ops owed */
  uint64_t step_budget_ns; /* replay: stepping time per update; 0 = 8 ms */
  uint64_t total_ops;     /* 0 = unknown */
  uint64_t seek_to;       /* replay: UINT64_MAX = none */
  uint64_t last_age_rebuild_ns;
  /* UNUSABLE is for the largest request seen (vapp_unusable); a live
   * view that resynchronized looks at the live blocks for it again. */
  uint64_t max_req;
  int req_rescan;
  uint64_t req_rescan_ns;
  /* live: what to attach to again when the program comes back (the
   * single-pool view retries once a second; the grid when it finds the
   * name again); src "" when unknown */
  char src[GPB_NAME_MAX + 320];
  int src_remote;
  const char *token;
  uint64_t retry_ns;
  /* interaction */
  int scale;              /* UI scale: text and panels (vframe_auto_scale) */
  int cell_scale;         /* map pixels per cell: the HiDPI factor; 0: scale */
  int mouse_x, mouse_y, mouse_in;
  int hover_skip;         /* rows of the hover's stack scrolled (j k) */
  uint32_t hover_site;    /* the site the hover showed last */
  int have_sel;
  uint64_t sel_off;       /* selected (searched) offset */
  int searching;
  char search[64];
  int show_help;
  int side_sites;         /* the side panel lists call sites (S) */
  int dragging, drag_y;
  /* geometry of the last frame */
  int map_x, map_y, map_w, map_h, cell_px, row_px;
  int tl_x, tl_y, tl_w, tl_h; /* timeline: its chart (the data) */
  int tlb_x, tlb_y, tlb_w, tlb_h; /* the timeline's band: legend, axes */
  uint64_t tl_zlo, tl_zhi; /* the timeline zoomed to [lo, hi); hi 0: all */
  double tl_ymax_fix;     /* compared runs: the byte axis at least this */
  uint64_t tl_hi_fix;     /* compared runs: the op axis at least this */
  int tl_mouse;           /* the mouse is over the timeline's chart */
  int want_shot;
  char shot_dir[256];
} vapp_t;

/* app.c */
int vapp_open_replay(vapp_t *a, vops_t *ops, const gpb_config_t *cfg);
/* Attaches to pool `name`, or through a relay at `connect`; says why not
 * on stderr. */
int vapp_open_live(vapp_t *a, const char *name, const char *connect,
                   const char *token);
/* A live view of an attached reader; takes `at` (closed on failure). */
int vapp_open_attach(vapp_t *a, gpb_attach_t *at, const char *title);
/* Where a live view attached (a local name; HOST:PORT[/NAME] when
 * remote), so vapp_reopen can attach there again. token is kept, not
 * copied. */
void vapp_set_source(vapp_t *a, const char *key, int remote,
                     const char *token);
/* "gpubuddy-view: cannot attach to WHERE: why" on stderr, one line. */
void vapp_attach_error(const char *where, int rc);
void vapp_close(vapp_t *a);
/* Brings the source forward by dt seconds of wall time; seeks; polls.
 * Playing steps for at most step_budget_ns (at --speed 0, that long). */
void vapp_update(vapp_t *a, double dt);
/* Replays up to op `n` at full speed (backwards restarts). */
int vapp_seek(vapp_t *a, uint64_t n);
/* Runs the next n ops of a replay now; a bad trace stops it (failed). */
void vapp_run(vapp_t *a, uint64_t n);
void vapp_message(vapp_t *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The status-line message of an app or a grid: text, and until when. */
void vmessage_set(char *msg, size_t n, uint64_t *until_ns, const char *fmt,
                  va_list ap) __attribute__((format(printf, 4, 0)));
uint64_t vapp_pos(const vapp_t *a);
/* Brings the map's sums and colors up to the model (before drawing it). */
void vapp_sync_map(vapp_t *a);
/* A hash of what a frame shows that changes without input (events, the
 * position, a message shown or timed out, age colours): the window draws
 * again only when it or the input changed. */
uint64_t vapp_signature(const vapp_t *a, uint64_t now);
/* A live source whose pool is gone or whose stream broke. */
int vapp_closed(const vapp_t *a);
/* How often a disconnected view looks for its pool again: a relay that
 * does not answer can hold a dial for 10 s, so remote ones less often. */
#define VAPP_RETRY_NS 1000000000ull
#define VAPP_RETRY_REMOTE_NS 10000000000ull
/* Attaches a closed live view to its source again (a restarted program
 * publishing under the same name, or the relay serving it again): a
 * fresh reader, the view's settings kept. 0; or an error, the view left
 * as it was, when there is nothing there or only the old program's
 * segment. The grid and the single-pool view both come back this way. */
int vapp_reopen(vapp_t *a);
/* UNUSABLE: the share of free bytes in blocks too small for the largest
 * request seen so far (its block size in *for_bytes): 0 when every free
 * block could take it, 1 when none can and that request would fail now.
 * -1 before any request or with nothing free. */
double vapp_unusable(vapp_t *a, uint64_t *for_bytes);
/* The --json figures as object members, no braces: "ops":..,"stats":{..}. */
void vapp_json_members(const vapp_t *a, FILE *f);

/* timeline.c: memory over time under the map: live bytes stacked by
 * call site (by tag in tag colours, or when no site is known), on byte
 * and op axes scaled to the data, its legend above the chart; failures
 * marked, the position drawn; a click on a mark explains that failure,
 * elsewhere a replay seeks there. The wheel zooms it in time, < > pan. */
#define VTL_GROUPS 8 /* stacked groups, then "other" */
/* Where the band's parts go in a band of w x h at (x, y): the chart's
 * rectangle (tl_*), leaving room for the legend, the byte axis on the
 * left and the op axis under it; a short band is all chart. */
void vtl_layout(vapp_t *a, int x, int y, int w, int h);
void vtl_draw(vapp_t *a, gpbt_fb_t *fb);
/* The byte value of the chart's top: the peak of the series (and now)
 * rounded up to 2^k or 1.5 x 2^k, so the quarter lines fall on round
 * sizes; 0 with no data. */
double vtl_ymax(const vapp_t *a);
/* The most bytes used at any point of the series (or now). */
double vtl_peak(const vapp_t *a);
/* The hover over the chart at (x, y): the op and the bytes used there,
 * the group (site or tag) under the mouse and its bytes. Lines of at
 * most 95 characters into l; returns how many (0: not over the chart). */
int vtl_hover(const vapp_t *a, int x, int y, char (*l)[96], int max);
/* Zooms the time axis by 2^steps (positive: in) keeping the op under
 * pixel x in place; all the way out shows the whole run again. */
void vtl_zoom(vapp_t *a, int x, int steps);
/* Pans a zoomed time axis by quarters of its width (negative: back). */
void vtl_pan(vapp_t *a, int quarters);
/* The x (op or event) under pixel px of the timeline. */
uint64_t vtl_x_at(const vapp_t *a, int px);
/* The ops (events) the timeline spans now: [*lo, *hi], zoomed or not. */
void vtl_span(const vapp_t *a, uint64_t *lo, uint64_t *hi);
/* A press at (x, y): 1 when it was on the timeline (and acted on). */
int vtl_click(vapp_t *a, int x, int y);
/* Whether it stacks by tag: the colour mode is TAG, or no site is known. */
int vtl_by_tag(const vapp_t *a);

/* oomview.c */
void voom_init(voom_t *o);
void voom_fini(voom_t *o);
/* A FAIL event, the model as it failed (the hook calls it). */
void voom_event(vapp_t *a, const gpb_event_t *ev, uint64_t x);
/* Shows failure i of the series (a replay seeks there to explain it). */
void voom_pick(vapp_t *a, size_t i);
/* O and [ ]: the failure at or before the position (live: the latest
 * explained), the previous, the next one; Esc closes the panel. */
void voom_key(vapp_t *a, int key);
/* Per update: a replay that reached the failure wanted explains it; one
 * that left the failure shown closes the panel. */
void voom_update(vapp_t *a);
/* The panel and the window marked on the map. */
void voom_draw(vapp_t *a, gpbt_fb_t *fb);
/* --json: ,"ooms":{"count":N,"explained":[...]} */
void voom_json(const vapp_t *a, FILE *f);

/* sites.c: call sites in the viewer. */
/* The frames of a site ("FRAME;FRAME;..." innermost first), or NULL: a
 * replay's from its trace; a live pool's are not in the stream yet. */
const char *vapp_site_text(const vapp_t *a, uint32_t site);
/* A site's name, cut to n - 1: its first frame outside the framework
 * (else its innermost), "FILE:LINE NAME" without FILE's directory, or
 * a pool frame's symbol. "CUDACachingAllocator.c" named 13 sites. */
const char *vsite_short(const char *frames, char *buf, size_t n);
/* Whether one frame (len bytes) is the framework's: PyTorch, CPython,
 * CUDA, gpubuddy, or a GPB_SITE_FRAMEWORK pattern. */
int vsite_is_framework(const char *f, size_t len);
/* Hover lines for a used block's site: "SITE n" and its whole stack,
 * the user's frames first (marked >), then the framework's (.), each
 * innermost first and wrapped at `width` characters, never cut; the
 * first `skip` rows scrolled past, and a last line saying how many
 * more. At most max rows of 80. Returns the rows. */
int vsite_hover(const vapp_t *a, uint32_t site, char (*l)[80], int max,
                int width, int skip);
/* Sites by live bytes now, the largest first (gpbt_sites_top). */
size_t vsite_top(const vapp_t *a, gpbt_site_row_t *rows, size_t max);
/* A model's live blocks into the per-site sums again (a keyframe). */
void vsite_resync(vapp_t *a);
/* --json: ,"top_sites":[{"id":..,"bytes":..,"allocs":..,"frames":..}] */
void vsite_json(const vapp_t *a, FILE *f);

/* frame.c: lays out and draws one whole frame into fb. */
void vframe_draw(vapp_t *a, gpbt_fb_t *fb);
/* Draws the block map into the rectangle map_x, map_y, map_w, map_h. */
void vframe_map(const vapp_t *a, gpbt_fb_t *fb);
/* Mixes color c into the map's cells of [off, off + len) (the tree: at
 * the row of the largest block that fits in len). */
void vframe_mark(const vapp_t *a, gpbt_fb_t *fb, uint64_t off, uint64_t len,
                 uint32_t c);
/* The status line `line` at y and a message after it, or the message
 * alone (on two lines when longer than the window): nothing cut. */
void vframe_status_msg(gpbt_fb_t *fb, int s, int y, uint32_t col,
                      const char *line, const char *msg);
/* The keys help box, centered. */
void vframe_help(gpbt_fb_t *fb, int scale);
/* Sets the geometry for a frame of w x h and sizes the map grid. The
 * map's left margin holds the address ruler (tree: the row labels). A
 * map that was fitted to the window is fitted again when the window
 * changes; a zoomed one keeps its zoom. */
void vframe_layout(vapp_t *a, int w, int h);
/* The UI scale for a window of w x h output pixels at dpr output pixels
 * per point (2 on HiDPI): the 5x7 font doubled from 1200x700 points up,
 * where it was too small to read at 1. */
int vframe_auto_scale(int w, int h, int dpr);
/* Byte offset under pixel (x, y) of the map, its cell index in *cell;
 * UINT64_MAX when (x, y) is not over the pool. */
uint64_t vframe_offset_at(const vapp_t *a, int x, int y, uint64_t *cell);
/* s in at most max characters (and n - 1) into buf, cut at its start
 * with a leading "..." so a path keeps its file name; returns buf. */
const char *vfmt_tail(const char *s, size_t max, char *buf, size_t n);
/* gpb_size_format ("1.5 MiB") into buf; returns buf. */
const char *vfmt_bytes(uint64_t v, char *buf, size_t n);

/* input.c: keys and mouse, SDL-free (main.c translates SDL events). */
enum {
  VKEY_NONE = 0, VKEY_SPACE = ' ', VKEY_ENTER = '\n', VKEY_ESC = 27,
  VKEY_BACKSPACE = 8, VKEY_LEFT = 0x100, VKEY_RIGHT, VKEY_UP, VKEY_DOWN,
  VKEY_PGUP, VKEY_PGDN, VKEY_HOME, VKEY_END
};
/* Returns 1 when the app should quit. */
int vinput_key(vapp_t *a, int key);
void vinput_text(vapp_t *a, const char *utf8);
void vinput_wheel(vapp_t *a, int x, int y, int dy);
void vinput_button(vapp_t *a, int x, int y, int down);
void vinput_motion(vapp_t *a, int x, int y, int buttons);
/* Selects and zooms to an address or offset, as typing it after '/'. */
void vinput_find(vapp_t *a, const char *where);
/* "0x1f00", "4096", "64K", "1.5MiB": 0 with *out, or GPB_EINVAL. */
int vinput_parse_where(const char *s, uint64_t *out);
extern const char *const vinput_keys_help;

/* ------------------------------------------------------------- the grid */

/* grid.c: many live pools at once (--all, --connect A,B), each a vapp_t of
 * its own drawn as a small block map with its headline figures; a click
 * focuses one (the whole single-pool view), G goes back. Pools are found
 * again once a second, so new ones join; a closed one stays greyed. */
#define VGRID_MAX 256                 /* pools shown at most */
#define VGRID_SCAN_NS 1000000000ull   /* look for pools this often */
#define VGRID_KEEP_NS 30000000000ull  /* a found pool stays this long closed */
#define VGRID_BACKOFF_NS 10000000000ull /* after a relay did not answer */

typedef struct vcell {
  vapp_t *app;          /* owned */
  char key[GPB_NAME_MAX + 320]; /* local pool name, or HOST:PORT/NAME */
  int name_at;          /* the pool's name: key + name_at */
  int named;            /* the user named it (HOST:PORT/NAME): kept closed */
  uint64_t closed_ns;   /* first seen closed; 0 while open */
  int x, y, w, h;       /* the cell in the last grid frame */
} vcell_t;

typedef struct vrelay {
  char addr[300];       /* HOST:PORT whose pool list is read */
  uint64_t next_ns;     /* when to read it again */
  int down;             /* the last list failed: its error; 0 when not */
  int x, y, w, h;       /* its cell in the last grid frame, while down */
} vrelay_t;

typedef struct vgrid {
  vcell_t *cells;       /* sorted by key */
  int n, cap;
  vapp_t *focus;        /* the pool shown whole; NULL: the grid */
  int all;              /* --all: this machine's pools */
  vrelay_t *relays;
  int nrelays;
  const char *token;
  vcolor_mode_t color;
  vlayout_t layout;
  uint64_t next_scan_ns;
  char title[128];
  char msg[256];
  uint64_t msg_until_ns;
  int scale;
  int cell_scale;       /* as vapp_t's */
  int mouse_x, mouse_y, mouse_in;
  int show_help, want_shot;
  int cols, rows;       /* the last layout */
} vgrid_t;

void vgrid_init(vgrid_t *g, const char *token, vcolor_mode_t color,
                vlayout_t layout);
void vgrid_close(vgrid_t *g);
/* Every pool published on this machine, now and later. Says why not on
 * stderr. */
int vgrid_add_all(vgrid_t *g);
/* HOST:PORT/NAME: that pool (an error said on stderr, one line, when it
 * cannot be read); HOST:PORT: every pool its relay serves, now and later.
 * A relay that does not answer is kept, shown not answering and asked
 * again (vgrid_say_down tells), and 0 returned. */
int vgrid_add_connect(vgrid_t *g, const char *addr);
/* Whether the grid has anything to show: a pool, --all, or a relay that
 * answered. */
int vgrid_answering(const vgrid_t *g);
/* One line on stderr per relay not answering. */
void vgrid_say_down(const vgrid_t *g);
/* Adds an opened view under `key` and takes it (malloc'd; tests). */
int vgrid_add_app(vgrid_t *g, vapp_t *app, const char *key);
void vgrid_message(vgrid_t *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Looks for pools when due; brings every pool forward; drops pools found
 * by a scan that have been closed for VGRID_KEEP_NS. */
void vgrid_update(vgrid_t *g, double dt);
/* Sets each cell's rectangle and sizes its map for a frame of w x h: a
 * cell per pool, and one per relay not answering, in key order (a
 * relay's "HOST:PORT" before its pools' "HOST:PORT/NAME", so they take
 * its place when it answers again). */
void vgrid_layout(vgrid_t *g, int w, int h);
/* The grid, or the focused pool's whole view. */
void vgrid_draw(vgrid_t *g, gpbt_fb_t *fb);
/* The cell under (x, y) in the last layout, or -1. */
int vgrid_cell_at(const vgrid_t *g, int x, int y);
/* Input as input.c's: in the grid a click focuses a pool; focused, all
 * goes to that pool but G (and Esc with nothing to clear), which come
 * back. vgrid_key returns 1 when the app should quit. */
int vgrid_key(vgrid_t *g, int key);
void vgrid_text(vgrid_t *g, const char *utf8);
void vgrid_wheel(vgrid_t *g, int x, int y, int dy);
void vgrid_button(vgrid_t *g, int x, int y, int down);
void vgrid_motion(vgrid_t *g, int x, int y, int buttons);
/* As vapp_signature, over the pools shown (or the focused one). */
uint64_t vgrid_signature(const vgrid_t *g, uint64_t now);
/* --json: one array, an object per pool: name, relay (remote ones),
 * closed, then the single-pool figures; then one per relay not
 * answering: name null, relay, "state": "not answering", error. */
void vgrid_json(const vgrid_t *g, FILE *f);

/* ------------------------------------------------------- two runs compared */

/* compare.c: two traces side by side (--compare A B), each replayed in
 * its own pool and drawn as the single-pool view in half the window,
 * with shared axes: both timelines span the longer run and the higher
 * peak, so their charts read against each other. Keys act on both
 * (play, step, seek: they stay at the same op); the mouse on the half
 * under it, a seek or a time zoom on the timeline on both. A strip on
 * top names each run with its peak, failures and fragmentation, and the
 * differences B - A. */
typedef struct vcmp {
  vapp_t app[2];
  char name[2][64];
  int half_w;           /* the last layout: each half's width */
  int top_h;            /* the strip naming the runs */
  int hover;            /* the half the mouse is in; -1 none */
  int scale, cell_scale;
  int show_help, want_shot;
  char title[160];
  gpbt_fb_t sub[2];     /* each half drawn on its own, then copied */
} vcmp_t;
/* Opens both traces with cfg (each its own pool size unless pool_given,
 * as --trace picks); says why not on stderr. */
int vcmp_open(vcmp_t *c, const char *a, const char *b, const gpb_config_t *cfg,
              int pool_given);
void vcmp_close(vcmp_t *c);
void vcmp_update(vcmp_t *c, double dt);
/* Replays both to op n (UINT64_MAX - 1: their ends), paused. */
void vcmp_seek(vcmp_t *c, uint64_t n);
void vcmp_draw(vcmp_t *c, gpbt_fb_t *fb);
int vcmp_key(vcmp_t *c, int key); /* 1: quit */
void vcmp_text(vcmp_t *c, const char *utf8);
void vcmp_wheel(vcmp_t *c, int x, int y, int dy);
void vcmp_button(vcmp_t *c, int x, int y, int down);
void vcmp_motion(vcmp_t *c, int x, int y, int buttons);
uint64_t vcmp_signature(const vcmp_t *c, uint64_t now);
/* --json: {"a":{..},"b":{..},"diff":{peak, failures, external_frag}} */
void vcmp_json(const vcmp_t *c, FILE *f);

/* window.c (SDL2 builds only): runs the window until the user quits, on
 * one pool (app) or a grid (grid; app NULL); scale 0 picks 2 on HiDPI
 * outputs, else 1. find: as --find, or NULL. */
int vwindow_run(vapp_t *app, vgrid_t *grid, int w, int h, int scale,
                const char *find);
/* The same, on two runs compared. */
int vwindow_run_cmp(vcmp_t *cmp, int w, int h, int scale);

#endif /* GPB_VIEW_H */
