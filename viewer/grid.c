/* SPDX-License-Identifier: MIT */
/*
 * grid.c: the viewer on many pools at once (--all, --connect A,B, or one
 * relay that serves several). Each pool is a live vapp_t of its own; the
 * grid draws each one's block map small, fitted to its cell, with the
 * headline figures under it, and lays the cells out to fill the window.
 * A click focuses one pool: then everything is the single-pool view of
 * frame.c and input.c, until G brings the grid back.
 *
 * Pools come and go. Once a second (VGRID_SCAN_NS) the grid lists this
 * machine's pools (--all) and each relay's, and attaches to new names. A
 * pool whose program ends stays, greyed and marked CLOSED, for 30 s
 * (VGRID_KEEP_NS) and then leaves, unless the user named it
 * (HOST:PORT/NAME) or is looking at it; one published again under its
 * name replaces it with a fresh reader. Every pool is polled every frame,
 * focused or not, so none falls behind its writer.
 *
 * A relay that does not answer (refused at the start, or killed later)
 * gets a cell of its own, dim with its address and NOT ANSWERING in red,
 * placed by its address among the pools' keys; when it answers again the
 * cell goes and its pools' cells, found by the same scan, take its place.
 */
#include "view.h"
#include "json.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define GRID_LINES 5 /* text lines under each map: the name, figures */

void vgrid_init(vgrid_t *g, const char *token, vcolor_mode_t color,
                vlayout_t layout) {
  memset(g, 0, sizeof *g);
  g->token = token;
  g->color = color;
  g->layout = layout;
  g->scale = 1;
}

static void grid_free_app(vapp_t *a) {
  vapp_close(a);
  free(a);
}

void vgrid_close(vgrid_t *g) {
  for (int i = 0; i < g->n; i++) grid_free_app(g->cells[i].app);
  free(g->cells);
  free(g->relays);
  g->cells = NULL;
  g->relays = NULL;
  g->n = g->cap = g->nrelays = 0;
  g->focus = NULL;
}

void vgrid_message(vgrid_t *g, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmessage_set(g->msg, sizeof g->msg, &g->msg_until_ns, fmt, ap);
  va_end(ap);
}

static int grid_find(const vgrid_t *g, const char *key) {
  for (int i = 0; i < g->n; i++)
    if (!strcmp(g->cells[i].key, key)) return i;
  return -1;
}

int vgrid_add_app(vgrid_t *g, vapp_t *app, const char *key) {
  if (g->n == VGRID_MAX) return GPB_EBUSY; /* full */
  if (g->n == g->cap) {
    int cap = g->cap ? g->cap * 2 : 16;
    vcell_t *c = realloc(g->cells, (size_t)cap * sizeof *c);
    if (!c) return GPB_EHOSTMEM;
    g->cells = c;
    g->cap = cap;
  }
  /* Sorted by key, so the order is the same on every run. */
  int at = g->n;
  while (at > 0 && strcmp(g->cells[at - 1].key, key) > 0) at--;
  memmove(g->cells + at + 1, g->cells + at, (size_t)(g->n - at) * sizeof *g->cells);
  vcell_t *c = &g->cells[at];
  memset(c, 0, sizeof *c);
  c->app = app;
  snprintf(c->key, sizeof c->key, "%s", key);
  const char *slash = strrchr(c->key, '/');
  c->name_at = slash ? (int)(slash + 1 - c->key) : 0;
  app->map.color = g->color;
  app->map.layout = g->layout;
  app->scale = g->scale;
  app->cell_scale = g->cell_scale;
  g->n++;
  return 0;
}

/* Attaches to `key` (a local name, or HOST:PORT/NAME when remote); 0, or
 * the error, said on stderr when `loud`, else in the status line. */
static int grid_open(vgrid_t *g, const char *key, int remote, int loud,
                     vapp_t **out) {
  gpb_attach_t *at;
  int rc = remote ? gpb_attach_connect(key, g->token, &at)
                  : gpb_attach_open(key, &at);
  if (rc) {
    if (loud) vapp_attach_error(key, rc);
    else vgrid_message(g, "cannot attach to %s: %s", key, gpb_strerror(rc));
    return rc;
  }
  vapp_t *a = malloc(sizeof *a);
  if (!a) {
    gpb_attach_close(at);
    return GPB_EHOSTMEM;
  }
  char title[sizeof a->title];
  snprintf(title, sizeof title, "%s%s", remote ? "remote " : "", key);
  if ((rc = vapp_open_attach(a, at, title)) != 0) {
    free(a);
    return rc;
  }
  vapp_set_source(a, key, remote, g->token);
  *out = a;
  return 0;
}

/* A pool seen by a scan: new ones join, closed ones get a fresh reader
 * (vapp_reopen, as a single-pool view whose program came back). */
static void grid_found(vgrid_t *g, const char *key, int remote) {
  int i = grid_find(g, key);
  if (i >= 0) {
    vcell_t *c = &g->cells[i];
    if (vapp_closed(c->app) && vapp_reopen(c->app) == 0) {
      c->closed_ns = 0;
      c->w = c->h = 0; /* sized again by the next layout */
    }
    return;
  }
  vapp_t *a;
  if (grid_open(g, key, remote, 0, &a)) return;
  if (vgrid_add_app(g, a, key)) {
    vgrid_message(g, "%d pools shown at most; %s is not", VGRID_MAX, key);
    grid_free_app(a);
  }
}

typedef struct grid_names {
  char (*v)[GPB_NAME_MAX];
  int n, cap;
} grid_names_t;

static void grid_note(const char *name, void *user) {
  grid_names_t *l = user;
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 16;
    void *v = realloc(l->v, (size_t)cap * sizeof *l->v);
    if (!v) return;
    l->v = v;
    l->cap = cap;
  }
  snprintf(l->v[l->n++], GPB_NAME_MAX, "%s", name);
}

/* Lists relay r's pools and opens the new ones; rc as the list's. */
static int grid_scan_relay(vgrid_t *g, vrelay_t *r, int loud) {
  grid_names_t l = {0};
  int rc = gpb_attach_list_remote(r->addr, g->token, grid_note, &l);
  uint64_t now = gpb_now_ns();
  r->down = rc < 0 ? rc : 0;
  if (rc < 0) {
    if (loud) vapp_attach_error(r->addr, rc);
    else vgrid_message(g, "relay at %s: %s", r->addr, gpb_strerror(rc));
    r->next_ns = now + VGRID_BACKOFF_NS;
  } else {
    for (int i = 0; i < l.n; i++) {
      char key[sizeof g->cells->key];
      snprintf(key, sizeof key, "%s/%s", r->addr, l.v[i]);
      grid_found(g, key, 1);
    }
    r->next_ns = now + VGRID_SCAN_NS;
  }
  free(l.v);
  return rc < 0 ? rc : 0;
}

static int grid_scan_local(vgrid_t *g, int loud) {
  grid_names_t l = {0};
  int rc = gpb_list_pools(grid_note, &l);
  if (rc) {
    if (loud)
      fprintf(stderr, "gpubuddy-view: --all: cannot list pools: %s\n",
              gpb_strerror(rc));
    else
      vgrid_message(g, "cannot list pools: %s", gpb_strerror(rc));
  }
  for (int i = 0; i < l.n; i++) grid_found(g, l.v[i], 0);
  free(l.v);
  return rc;
}

int vgrid_add_all(vgrid_t *g) {
  g->all = 1;
  snprintf(g->title, sizeof g->title, "all pools");
  g->next_scan_ns = gpb_now_ns() + VGRID_SCAN_NS;
  return grid_scan_local(g, 1);
}

int vgrid_add_connect(vgrid_t *g, const char *addr) {
  size_t tl = strlen(g->title);
  snprintf(g->title + tl, sizeof g->title - tl, "%sremote %s", tl ? ", " : "",
           addr);
  if (strchr(addr, '/')) {
    /* A pool the user named: attached once, and kept when it closes. */
    if (grid_find(g, addr) >= 0) return 0;
    vapp_t *a;
    int rc = grid_open(g, addr, 1, 1, &a);
    if (rc) return rc;
    if ((rc = vgrid_add_app(g, a, addr)) != 0) {
      grid_free_app(a);
      return rc;
    }
    g->cells[grid_find(g, addr)].named = 1;
    return 0;
  }
  vrelay_t *r = realloc(g->relays, (size_t)(g->nrelays + 1) * sizeof *r);
  if (!r) return GPB_EHOSTMEM;
  g->relays = r;
  r += g->nrelays++;
  memset(r, 0, sizeof *r);
  snprintf(r->addr, sizeof r->addr, "%s", addr);
  /* A relay that does not answer now is shown as such, as one that stops
   * answering later is, and asked again: the others' pools still show. */
  grid_scan_relay(g, r, 0);
  return 0;
}

void vgrid_say_down(const vgrid_t *g) {
  int up = vgrid_answering(g);
  for (int i = 0; i < g->nrelays; i++) {
    const vrelay_t *r = &g->relays[i];
    if (!r->down) continue;
    if (up)
      fprintf(stderr, "gpubuddy-view: relay at %s not answering (%s): shown "
              "so, asked again every %d s\n", r->addr, gpb_strerror(r->down),
              (int)(VGRID_BACKOFF_NS / 1000000000ull));
    else
      fprintf(stderr, "gpubuddy-view: relay at %s not answering (%s)\n",
              r->addr, gpb_strerror(r->down));
  }
}

int vgrid_answering(const vgrid_t *g) {
  int up = g->n > 0 || g->all;
  for (int i = 0; i < g->nrelays && !up; i++) up = !g->relays[i].down;
  return up;
}

void vgrid_update(vgrid_t *g, double dt) {
  uint64_t now = gpb_now_ns();
  if (g->all && now >= g->next_scan_ns) {
    grid_scan_local(g, 0);
    g->next_scan_ns = now + VGRID_SCAN_NS;
  }
  for (int i = 0; i < g->nrelays; i++)
    if (now >= g->relays[i].next_ns) grid_scan_relay(g, &g->relays[i], 0);
  for (int i = 0; i < g->n; i++) {
    vcell_t *c = &g->cells[i];
    vapp_update(c->app, dt);
    if (vapp_closed(c->app) && !c->closed_ns) c->closed_ns = now;
    /* A pool comes back by itself too (vapp_update looks for it). */
    if (!vapp_closed(c->app) && c->closed_ns) c->closed_ns = 0, c->w = c->h = 0;
  }
  for (int i = 0; i < g->n;) {
    vcell_t *c = &g->cells[i];
    if (c->closed_ns && !c->named && c->app != g->focus &&
        now - c->closed_ns > VGRID_KEEP_NS) {
      grid_free_app(c->app);
      memmove(c, c + 1, (size_t)(g->n - i - 1) * sizeof *c);
      g->n--;
    } else {
      i++;
    }
  }
}

uint64_t vgrid_signature(const vgrid_t *g, uint64_t now) {
  if (g->focus) return vapp_signature(g->focus, now) ^ 0x9e3779b97f4a7c15ull;
  uint64_t h = (uint64_t)g->n * 0x100000001b3ull;
  h ^= (uint64_t)(g->msg[0] && now < g->msg_until_ns) << 63;
  h ^= g->msg_until_ns;
  for (int i = 0; i < g->n; i++) {
    h = h * 31 + vapp_signature(g->cells[i].app, now);
    h = h * 31 + g->cells[i].closed_ns;
  }
  for (int i = 0; i < g->nrelays; i++) h = h * 31 + (uint64_t)g->relays[i].down;
  return h;
}

/* ----------------------------------------------------------------- layout */

static int grid_line_h(int s) { return (GPBT_FONT_H + 1) * s; }
static int grid_status_h(int s) { return (GPBT_FONT_H + 3) * s + 2 * s; }

/* The columns that give each map the most pixels. */
static int grid_best_cols(int n, int w, int h, int gap, int label) {
  int best = 1;
  int64_t best_area = -1;
  for (int c = 1; c <= n; c++) {
    int r = (n + c - 1) / c;
    int cw = (w - gap * (c + 1)) / c, mh = (h - gap * (r + 1)) / r - label;
    int64_t area = cw > 0 && mh > 0 ? (int64_t)cw * mh : 0;
    if (area > best_area) best_area = area, best = c;
  }
  return best;
}

static int grid_down(const vgrid_t *g) {
  int n = 0;
  for (int i = 0; i < g->nrelays; i++) n += g->relays[i].down != 0;
  return n;
}

/* The place of pool i's cell (relay < 0) or of relay `relay`'s: pools
 * and relays not answering, merged in key order (a relay first on equal
 * keys, and relays by their order in the list). */
static int grid_slot(const vgrid_t *g, int i, int relay) {
  const char *key = relay < 0 ? g->cells[i].key : g->relays[relay].addr;
  int slot = relay < 0 ? i : 0;
  if (relay >= 0)
    for (int k = 0; k < g->n; k++) slot += strcmp(g->cells[k].key, key) < 0;
  for (int k = 0; k < g->nrelays; k++) {
    int c = strcmp(g->relays[k].addr, key);
    slot += g->relays[k].down && (c < 0 || (!c && (relay < 0 || k < relay)));
  }
  return slot;
}

void vgrid_layout(vgrid_t *g, int w, int h) {
  int s = g->scale < 1 ? 1 : g->scale;
  int gap = 6 * s, label = GRID_LINES * grid_line_h(s) + 2 * s;
  int area_h = h - grid_status_h(s);
  int n = g->n + grid_down(g);
  if (n < 1) n = 1;
  g->cols = grid_best_cols(n, w, area_h, gap, label);
  g->rows = (n + g->cols - 1) / g->cols;
  int cw = (w - gap * (g->cols + 1)) / g->cols;
  int ch = (area_h - gap * (g->rows + 1)) / g->rows;
  if (cw < 1) cw = 1;
  if (ch < 1) ch = 1;
  for (int i = 0; i < g->nrelays; i++) {
    vrelay_t *r = &g->relays[i];
    int k = grid_slot(g, i, i);
    r->x = gap + (k % g->cols) * (cw + gap), r->y = gap + (k / g->cols) * (ch + gap);
    r->w = r->down ? cw : 0, r->h = r->down ? ch : 0;
  }
  for (int i = 0; i < g->n; i++) {
    vcell_t *c = &g->cells[i];
    vapp_t *a = c->app;
    int k = grid_slot(g, i, -1);
    int x = gap + (k % g->cols) * (cw + gap), y = gap + (k / g->cols) * (ch + gap);
    int resized = c->w != cw || c->h != ch;
    c->x = x, c->y = y, c->w = cw, c->h = ch;
    int cp = g->cell_scale > 0 ? g->cell_scale : s;
    a->scale = s;
    a->cell_scale = g->cell_scale;
    a->map_x = x;
    a->map_y = y;
    a->map_w = cw;
    a->map_h = ch > label + 1 ? ch - label : 1;
    a->cell_px = cp;
    int cols = a->map_w / cp, rows;
    if (a->map.layout == VLAYOUT_TREE) {
      rows = (int)a->map.norders;
      a->row_px = a->map_h / rows > 0 ? a->map_h / rows : 1;
    } else {
      rows = a->map_h / cp;
      a->row_px = cp;
    }
    /* The focused view resizes the map to the window and may zoom it:
     * back in its cell the pool is shown whole again. */
    if (resized || cols != a->map.cols || rows != a->map.rows) {
      if (vmap_resize(&a->map, cols, rows))
        vgrid_message(g, "out of memory for the block map of %s", c->key);
      vmap_fit(&a->map);
    }
  }
}

int vgrid_cell_at(const vgrid_t *g, int x, int y) {
  for (int i = 0; i < g->n; i++) {
    const vcell_t *c = &g->cells[i];
    if (x >= c->x && x < c->x + c->w && y >= c->y && y < c->y + c->h) return i;
  }
  return -1;
}

/* ------------------------------------------------------------------ draw */

/* Text cut to `room` pixels, so a long name stays inside its cell. */
static void grid_text(gpbt_fb_t *fb, int x, int y, int s, int room,
                      uint32_t color, const char *t) {
  char buf[160];
  size_t max = room > 0 ? (size_t)(room / (GPBT_FONT_W * s)) : 0;
  size_t len = strlen(t);
  if (max >= sizeof buf) max = sizeof buf - 1;
  if (len > max) len = max;
  memcpy(buf, t, len);
  buf[len] = '\0';
  gpbt_font_draw(fb, x, y, s, color, buf);
}

/* Whole figures flowed into `lines` lines of `room` pixels at text
 * scale s (never one cut in two: "LIVE 5" was 524 live): 1 when all of
 * them fit. Draws them when fb is not NULL. */
static int grid_flow(gpbt_fb_t *fb, int x, int y, int s, int room, int lines,
                     char (*items)[48], const uint32_t *col, int n) {
  int lh = grid_line_h(s), cx = x, line = 0, gap = 2 * GPBT_FONT_W * s;
  for (int i = 0; i < n; i++) {
    int w = gpbt_font_width(s, items[i]);
    if (cx > x && cx + w > x + room) cx = x, line++;
    if (line >= lines || w > room) return 0;
    if (fb) gpbt_font_draw(fb, cx, y + line * lh, s, col[i], items[i]);
    cx += w + gap;
  }
  return 1;
}

/* A closed pool's map stays readable (its last state), dimmed a little,
 * with CLOSED on a box of its own. */
static void grid_closed(const vapp_t *a, gpbt_fb_t *fb, int s) {
  for (int y = a->map_y; y < a->map_y + a->map_h && y < fb->h; y++)
    for (int x = a->map_x; x < a->map_x + a->map_w && x < fb->w; x++) {
      uint32_t *p = fb->px + (size_t)y * (size_t)fb->w + x;
      *p = vc_mix(*p, VC_PANEL, 0.4);
    }
  const char *t = "CLOSED - LAST STATE";
  int ts = a->map_h > 40 * s && gpbt_font_width(2 * s, t) < a->map_w ? 2 * s : s;
  if (gpbt_font_width(ts, t) + 8 * s > a->map_w) t = "CLOSED";
  int w = gpbt_font_width(ts, t) + 8 * s, h = GPBT_FONT_H * ts + 6 * s;
  int x = a->map_x + (a->map_w - w) / 2, y = a->map_y + (a->map_h - h) / 2;
  gpbt_fb_fill(fb, x, y, w, h, 0xFF0B0E13u);
  gpbt_fb_rect(fb, x, y, w, h, VC_ALERT);
  gpbt_font_draw(fb, x + 4 * s, y + 3 * s, ts, VC_ALERT, t);
}

static void grid_cell(const vcell_t *c, gpbt_fb_t *fb, int hover) {
  vapp_t *a = c->app;
  const gpb_stats_t *st = &a->stats;
  int s = a->scale, lh = grid_line_h(s), closed = vapp_closed(a);
  vapp_sync_map(a);
  vframe_map(a, fb);
  if (closed) grid_closed(a, fb, s);
  if (hover) gpbt_fb_rect(fb, c->x - s, c->y - s, c->w + 2 * s, c->h + 2 * s, VC_HILITE);
  char l[160], b1[32];
  int x = c->x, y = a->map_y + a->map_h + 2 * s;
  const char *name = c->key + c->name_at;
  if (c->name_at)
    snprintf(l, sizeof l, "%s  %.*s", name, c->name_at - 1, c->key);
  else
    snprintf(l, sizeof l, "%s", name);
  grid_text(fb, x, y, s, c->w, closed ? VC_DIM : VC_TEXT, l);
  y += lh;
  char it[6][48];
  uint32_t col[6];
  int n = 0;
  double pct = st->managed_bytes ? 100.0 * (double)st->block_bytes /
                                       (double)st->managed_bytes : 0;
  snprintf(it[n], 48, "USED %s (%.0f%%)", vfmt_bytes(st->block_bytes, b1, 32), pct);
  col[n++] = VC_DIM;
  snprintf(it[n], 48, "LIVE %" PRIu64, st->live_allocs);
  col[n++] = VC_DIM;
  snprintf(it[n], 48, "FAILED %" PRIu64, st->failures);
  col[n++] = st->failures ? VC_ALERT : VC_DIM;
  snprintf(it[n], 48, "LARGEST %s", vfmt_bytes(st->largest_free, b1, 32));
  col[n++] = VC_DIM;
  snprintf(it[n], 48, "EXT FRAG %.3f", st->external_frag);
  col[n++] = VC_DIM;
  snprintf(it[n], 48, "POOL %s", vfmt_bytes(a->info.pool_size, b1, 32));
  col[n++] = VC_DIM;
  /* At the cell's scale, else at 1 (twice the lines), else the first
   * figures that fit whole. */
  int lines = GRID_LINES - 1, ts = s;
  while (n > 0 && !grid_flow(NULL, x, y, ts, c->w, lines * s / ts, it, col, n)) {
    if (ts > 1) ts = 1;
    else n--;
  }
  grid_flow(fb, x, y, ts, c->w, lines * s / ts, it, col, n);
}

/* Text in lines of at most `room` pixels at scale s, each broken after a
 * '.', ':', '/', '-' or ' ' where one is, else where the room ends (so
 * that an address or NOT ANSWERING reads in a narrow cell); at most
 * `lines` lines. Returns the lines drawn. */
static int grid_wrap(gpbt_fb_t *fb, int x, int y, int s, int room, int lines,
                     uint32_t color, const char *t) {
  char buf[160];
  int max = room / (GPBT_FONT_W * s), n = 0;
  if (max >= (int)sizeof buf) max = (int)sizeof buf - 1;
  for (; max > 0 && *t && n < lines; n++) {
    int cut = (int)strlen(t);
    if (cut > max) {
      cut = max;
      for (int i = max; i > 1; i--)
        if (strchr(".:/- ", t[i - 1])) {
          cut = i;
          break;
        }
    }
    memcpy(buf, t, (size_t)cut);
    buf[cut] = '\0';
    gpbt_font_draw(fb, x, y + n * grid_line_h(s), s, color, buf);
    for (t += cut; *t == ' ';) t++;
  }
  return n;
}

/* A relay not answering: its cell dim where a map would be, with a red
 * edge and NOT ANSWERING on a box when it fits, and under it (where a
 * pool's name goes) the caption: its address and NOT ANSWERING in red,
 * then why and when it is asked again. The caption is at the cell's text
 * scale, else at 1 (more lines), wrapped when the cell is narrower still. */
static void grid_relay_cell(const vrelay_t *r, gpbt_fb_t *fb, int s) {
  static const char t[] = "NOT ANSWERING";
  int label = GRID_LINES * grid_line_h(s) + 2 * s;
  int mh = r->h > label + 1 ? r->h - label : 1;
  gpbt_fb_fill(fb, r->x, r->y, r->w, mh, VC_DOWN);
  gpbt_fb_rect(fb, r->x, r->y, r->w, mh, vc_mix(VC_ALERT, VC_PANEL, 0.5));
  int ts = mh > 40 * s && gpbt_font_width(2 * s, t) + 8 * s < r->w ? 2 * s : s;
  if (gpbt_font_width(ts, t) + 8 * s > r->w) ts = 1;
  int bw = gpbt_font_width(ts, t) + 8 * s, bh = GPBT_FONT_H * ts + 6 * s;
  if (bw <= r->w && bh <= mh) {
    int x = r->x + (r->w - bw) / 2, y = r->y + (mh - bh) / 2;
    gpbt_fb_fill(fb, x, y, bw, bh, 0xFF0B0E13u);
    gpbt_fb_rect(fb, x, y, bw, bh, VC_ALERT);
    gpbt_font_draw(fb, x + 4 * s, y + 3 * s, ts, VC_ALERT, t);
  }
  char why[96];
  snprintf(why, sizeof why, "%s, ASKED AGAIN EVERY %d S", gpb_strerror(r->down),
           (int)(VGRID_BACKOFF_NS / 1000000000ull));
  const char *l[3] = {r->addr, t, why};
  uint32_t col[3] = {VC_ALERT, VC_ALERT, VC_DIM};
  ts = s;
  if (gpbt_font_width(s, r->addr) > r->w || gpbt_font_width(s, t) > r->w) ts = 1;
  int y = r->y + mh + 2 * s, left = (label - 2 * s) / grid_line_h(ts);
  for (int i = 0; i < 3 && left > 0; i++) {
    int n = grid_wrap(fb, r->x, y, ts, r->w, left, col[i], l[i]);
    y += n * grid_line_h(ts);
    left -= n;
  }
}

/* What the maps' colours mean, at the right of the status line (the
 * grid had no legend): the state colours, or the mode's name. */
static void grid_legend(const vgrid_t *g, gpbt_fb_t *fb, int x0, int y, int s) {
  static const struct { uint32_t c; const char *t; } st[] = {
      {VC_FREE, "FREE"}, {VC_USED, "REQUESTED"}, {VC_WASTE, "WASTE"}};
  static const char *const modes[] = {"", "COLOUR: BUDDY ORDER",
                                      "COLOUR: TAG", "COLOUR: AGE",
                                      "COLOUR: CALL SITE"};
  int w = 0, sw = 8 * s;
  if (g->color == VCOLOR_STATE) {
    for (int i = 0; i < 3; i++) w += sw + gpbt_font_width(s, st[i].t) + 3 * GPBT_FONT_W * s;
  } else {
    w = gpbt_font_width(s, modes[g->color]);
  }
  int x = fb->w - 4 * s - w;
  if (x < x0) return;
  if (g->color != VCOLOR_STATE) {
    gpbt_font_draw(fb, x, y, s, VC_DIM, modes[g->color]);
    return;
  }
  for (int i = 0; i < 3; i++) {
    gpbt_fb_fill(fb, x, y + s, 6 * s, 6 * s, st[i].c);
    x = gpbt_font_draw(fb, x + sw, y, s, VC_DIM, st[i].t) + 3 * GPBT_FONT_W * s;
  }
}

/* The focused view says how to come back, at the right of its status
 * line, where frame.c writes nothing. */
static void grid_hint(gpbt_fb_t *fb, int s) {
  const char *t = "G: ALL POOLS";
  int w = gpbt_font_width(s, t) + 8 * s, y = fb->h - (GPBT_FONT_H + 2) * s;
  gpbt_fb_fill(fb, fb->w - w, y, w, GPBT_FONT_H * s, VC_PANEL);
  gpbt_font_draw(fb, fb->w - w + 4 * s, y, s, VC_WASTE, t);
}

void vgrid_draw(vgrid_t *g, gpbt_fb_t *fb) {
  int s = g->scale < 1 ? 1 : g->scale;
  if (g->focus) {
    g->focus->scale = s;
    g->focus->cell_scale = g->cell_scale;
    vframe_draw(g->focus, fb);
    if (!g->focus->searching) grid_hint(fb, s);
    return;
  }
  vgrid_layout(g, fb->w, fb->h);
  gpbt_fb_fill(fb, 0, 0, fb->w, fb->h, VC_PANEL);
  int hover = g->mouse_in ? vgrid_cell_at(g, g->mouse_x, g->mouse_y) : -1;
  int closed = 0;
  for (int i = 0; i < g->n; i++) {
    grid_cell(&g->cells[i], fb, i == hover);
    closed += g->cells[i].closed_ns != 0;
  }
  for (int i = 0; i < g->nrelays; i++)
    if (g->relays[i].down) grid_relay_cell(&g->relays[i], fb, s);
  /* A relay that does not answer is said so (it looked like a machine
   * with no pools: "0 POOLS"). */
  const vrelay_t *dead = NULL;
  for (int i = 0; i < g->nrelays && !dead; i++)
    if (g->relays[i].down) dead = &g->relays[i];
  char line[256];
  if (!g->n && !dead) { /* a relay not answering has its cell */
    const char *t = g->all || g->nrelays ? "NO POOLS YET - LOOKING ONCE A SECOND"
                                         : "NO POOLS";
    gpbt_font_draw(fb, (fb->w - gpbt_font_width(2 * s, t)) / 2, fb->h / 3,
                   2 * s, VC_DIM, t);
  }
  if (dead)
    snprintf(line, sizeof line, "RELAY %.120s NOT ANSWERING (%s): TRYING AGAIN "
             "EVERY %d S", dead->addr, gpb_strerror(dead->down),
             (int)(VGRID_BACKOFF_NS / 1000000000ull));
  else
    snprintf(line, sizeof line, "%d POOL%s%s  CLICK ONE TO OPEN IT  H: KEYS",
             g->n, g->n == 1 ? "" : "S", closed ? " (SOME CLOSED)" : "");
  int y = fb->h - (GPBT_FONT_H + 2) * s;
  uint32_t lc = dead ? VC_ALERT : VC_TEXT;
  if (g->msg[0] && gpb_now_ns() < g->msg_until_ns) {
    vframe_status_msg(fb, s, y, lc, line, g->msg);
  } else {
    int end = gpbt_font_draw(fb, 4 * s, y, s, lc, line);
    grid_legend(g, fb, end + 4 * GPBT_FONT_W * s, y, s);
  }
  if (g->show_help) vframe_help(fb, s);
}

/* ----------------------------------------------------------------- input */

int vgrid_key(vgrid_t *g, int key) {
  vapp_t *f = g->focus;
  if (f) {
    int idle = !f->searching && !f->show_help;
    if (idle && (key == 'g' || key == 'G' || (key == VKEY_ESC && !f->have_sel))) {
      g->focus = NULL;
      return 0;
    }
    return vinput_key(f, key);
  }
  if (g->show_help && key != 'h' && key != '?') {
    g->show_help = 0;
    if (key == VKEY_ESC) return 0;
  }
  switch (key) {
  case 'q':
    return 1;
  case 'h':
  case '?':
    g->show_help = !g->show_help;
    break;
  case 'p':
    g->want_shot = 1;
    break;
  default:
    break;
  }
  return 0;
}

void vgrid_text(vgrid_t *g, const char *utf8) {
  if (g->focus) vinput_text(g->focus, utf8);
}

void vgrid_wheel(vgrid_t *g, int x, int y, int dy) {
  if (g->focus) vinput_wheel(g->focus, x, y, dy);
}

void vgrid_button(vgrid_t *g, int x, int y, int down) {
  if (g->focus) {
    vinput_button(g->focus, x, y, down);
    return;
  }
  int i = down ? vgrid_cell_at(g, x, y) : -1;
  if (i < 0) return;
  vapp_t *a = g->cells[i].app;
  a->mouse_in = a->dragging = 0;
  g->focus = a;
}

void vgrid_motion(vgrid_t *g, int x, int y, int buttons) {
  g->mouse_x = x;
  g->mouse_y = y;
  g->mouse_in = 1;
  if (g->focus) vinput_motion(g->focus, x, y, buttons);
}

/* ------------------------------------------------------------------ json */

void vgrid_json(const vgrid_t *g, FILE *f) {
  fputs("[", f);
  for (int i = 0; i < g->n; i++) {
    const vcell_t *c = &g->cells[i];
    fputs(i ? ",\n{\"name\":" : "\n{\"name\":", f);
    gpbt_json_str(f, c->key + c->name_at);
    if (c->name_at) {
      char relay[sizeof c->key];
      snprintf(relay, sizeof relay, "%.*s", c->name_at - 1, c->key);
      fputs(",\"relay\":", f);
      gpbt_json_str(f, relay);
    }
    fprintf(f, ",\"closed\":%s,", vapp_closed(c->app) ? "true" : "false");
    vapp_json_members(c->app, f);
    fputc('}', f);
  }
  for (int i = 0, k = g->n; i < g->nrelays; i++) {
    if (!g->relays[i].down) continue;
    fputs(k++ ? ",\n{\"name\":null,\"relay\":" : "\n{\"name\":null,\"relay\":",
          f);
    gpbt_json_str(f, g->relays[i].addr);
    fputs(",\"state\":\"not answering\",\"error\":", f);
    gpbt_json_str(f, gpb_strerror(g->relays[i].down));
    fputc('}', f);
  }
  fputs("\n]\n", f);
}
