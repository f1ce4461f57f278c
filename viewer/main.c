/* SPDX-License-Identifier: MIT */
/*
 * main.c: gpubuddy-view: options, then one of four loops: the window
 * (window.c, built when SDL2 is found), headless (one PNG, or a PNG every
 * K ms), --list, or --bench; on one pool, or on a grid of them (grid.c:
 * --all, --connect A,B).
 *
 * Every mode drives the same vapp_t and draws with vframe_draw into a
 * gpbt_fb_t. Nothing here needs SDL2, so a GPU server without it still gets
 * headless PNGs and the benchmark.
 */
#include "config.h"
#include "view.h"
#include "opseq.h"
#include "opts.h"

#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

typedef struct opts {
  const char *name, *connect, *token, *trace, *pattern, *png, *frames_dir;
  const char *cmp_a, *cmp_b; /* --compare A B */
  int pool_size_given, json;
  const char *at, *find;
  uint64_t steps, seed;
  int w, h, scale, bench, headless, list, count, interval_ms, bench_frames;
  int all;
  int color, layout;
  uint64_t oom;      /* --oom N: explain the Nth failure; 0 none */
  int side_sites;    /* --sites */
  int bands;         /* --bands */
  double speed;
  gpb_config_t cfg;
} opts_t;

static void usage(FILE *f) {
  fprintf(f,
"Usage: gpubuddy-view NAME                 watch a live pool published as NAME\n"
"       gpubuddy-view --list               list pools that can be attached\n"
"       gpubuddy-view --all                every pool on this machine, as a grid\n"
"       gpubuddy-view --connect HOST:PORT[/NAME][,...] [--token T]\n"
"                                          watch through gpubuddy-relay; a list,\n"
"                                          or a relay serving several pools,\n"
"                                          shows a grid of them; a relay that\n"
"                                          does not answer is shown as not\n"
"                                          answering and asked again\n"
"       gpubuddy-view --trace FILE         replay a trace through a virtual pool\n"
"       gpubuddy-view --pattern churn|checker|fill [--steps N] [--seed S]\n"
"                                          replay a built-in synthetic workload\n"
"       gpubuddy-view --compare A B        two traces side by side, shared\n"
"                                          axes, each in its own pool\n"
"\n"
"replay options:\n"
"  --pool-size SIZE   pool to replay into (default: for --trace, the size\n"
"                     gpubuddy-replay picks: the next power of two >= 2x\n"
"                     the trace's peak live bytes; else 256M)\n"
"  --json             with --headless: the rendered frame's figures as one\n"
"                     JSON object on stdout (a grid: an array, one per pool):\n"
"                     ops, used, largest free, \"ooms\" (count, the first\n"
"                     failures explained), \"top_sites\" (live bytes)\n"
"  --oom N            open the explanation of the Nth failed allocation\n"
"                     (a replay seeks there, paused)\n"
"  --min-block SIZE   minimum block (default 256)\n"
"  --policy P         placement policy, as gpubuddy-replay (default buddy)\n"
"  --speed OPS        ops per second (default: whole trace in ~20 s; 0 = max)\n"
"view options:\n"
"  --color MODE       state, order, tag, age or site (default state)\n"
"  --tree             start in the buddy-tree layout (one row per order)\n"
"  --sites            side panel: live bytes by call site (key S)\n"
"  --bands            allocations over time, one band each, in the map's\n"
"                     place (key A)\n"
"  --find WHERE       select and zoom to an address or offset (0x.., 4096, 1M)\n"
"  --size WxH         window or image size (default 1280x800)\n"
"  --scale N          UI scale of text and map (default: text at 2 from\n"
"                     1200x700 up, twice that on HiDPI; map cells of a point)\n"
"headless (no display needed):\n"
"  --headless --png OUT.png [--at N|end]   render one frame after N ops\n"
"  --headless --frames DIR [--interval-ms K] [--count N]\n"
"                     write DIR/frame-NNN.png every K ms (default 500, 20)\n"
"  --bench [--steps N] measure frame times and replay events/s (default\n"
"                     1000000 live blocks; with --trace, that trace)\n"
"  --help, --version\n"
"\n%s\n", vinput_keys_help);
}

/* "WxH", digits only on both sides, each 64..16384 ("640x400x" and
 * "+640x400" are typos, not sizes). */
static int parse_wh(const char *v, int *w, int *h) {
  static const char digits[] = "0123456789";
  size_t nw = strspn(v, digits);
  if (!nw || nw > 5 || v[nw] != 'x') return GPB_EINVAL;
  const char *hs = v + nw + 1;
  size_t nh = strspn(hs, digits);
  if (!nh || nh > 5 || hs[nh]) return GPB_EINVAL;
  int a = atoi(v), b = atoi(hs);
  if (a < 64 || b < 64 || a > 16384 || b > 16384) return GPB_EINVAL;
  *w = a;
  *h = b;
  return 0;
}

/* ------------------------------------------------------------ options */

/* Each option's setter (opts.h): NULL, or what the option takes. */
static const char *opt_speed(void *ov, const char *v) {
  opts_t *o = ov;
  char *end;
  errno = 0;
  o->speed = strtod(v, &end);
  /* !(>= 0) also catches nan; 1e999 is inf (and ERANGE). */
  if (errno || end == v || *end || !(o->speed >= 0) || !isfinite(o->speed))
    return "a number of ops per second >= 0";
  return NULL;
}

static const char *opt_size(void *ov, const char *v) {
  opts_t *o = ov;
  return parse_wh(v, &o->w, &o->h) ? "WxH, each 64..16384" : NULL;
}

static const char *opt_pool_size(void *ov, const char *v) {
  opts_t *o = ov;
  if (gpb_size_parse(v, &o->cfg.pool_size) || !o->cfg.pool_size)
    return "a size > 0 (64M, 1.5GiB...)";
  o->pool_size_given = 1;
  return NULL;
}

static const char *opt_min_block(void *ov, const char *v) {
  opts_t *o = ov;
  size_t *mb = &o->cfg.min_block;
  return gpb_size_parse(v, mb) || *mb < 16 || (*mb & (*mb - 1))
             ? "a power of two >= 16" : NULL;
}

static const char *opt_policy(void *ov, const char *v) {
  opts_t *o = ov;
  return gpb_policy_parse(v, &o->cfg.policy) ? "buddy, trim or bestfit"
                                             : NULL;
}

static const char *opt_color(void *ov, const char *v) {
  opts_t *o = ov;
  static const char *const names[] = {"state", "order", "tag", "age", "site"};
  for (int j = 0; j < VCOLOR_COUNT; j++)
    if (!strcmp(v, names[j])) return o->color = j, NULL;
  return "state, order, tag, age or site";
}

#define BIG (1ull << 40)
static const gpbt_opt_t view_opts[] = {
    GPBT_FLAG("list", opts_t, list, 1),
    GPBT_FLAG("all", opts_t, all, 1),
    GPBT_FLAG("headless", opts_t, headless, 1),
    GPBT_FLAG("bench", opts_t, bench, 1),
    GPBT_FLAG("tree", opts_t, layout, VLAYOUT_TREE),
    GPBT_FLAG("json", opts_t, json, 1),
    GPBT_FLAG("sites", opts_t, side_sites, 1),
    GPBT_FLAG("bands", opts_t, bands, 1),
    GPBT_STR("connect", opts_t, connect),
    GPBT_STR("token", opts_t, token),
    GPBT_STR("trace", opts_t, trace),
    GPBT_STR("pattern", opts_t, pattern),
    GPBT_ALIAS("selftest-pattern", "pattern"),
    GPBT_STR("png", opts_t, png),
    GPBT_STR("frames", opts_t, frames_dir),
    GPBT_STR("at", opts_t, at),
    GPBT_STR("find", opts_t, find),
    GPBT_STR("compare", opts_t, cmp_a),
    GPBT_U64("steps", opts_t, steps, 0, BIG),
    GPBT_U64("seed", opts_t, seed, 0, BIG),
    GPBT_U64("oom", opts_t, oom, 0, BIG),
    GPBT_INT("count", opts_t, count, 0, 1000000),
    GPBT_INT("interval-ms", opts_t, interval_ms, 0, 1000000),
    GPBT_INT("bench-frames", opts_t, bench_frames, 0, 1000000),
    GPBT_INT("scale", opts_t, scale, 0, 1000000),
    GPBT_SET("speed", GPBT_ARG_REQUIRED, opt_speed),
    GPBT_SET("size", GPBT_ARG_REQUIRED, opt_size),
    GPBT_SET("pool-size", GPBT_ARG_REQUIRED, opt_pool_size),
    GPBT_SET("min-block", GPBT_ARG_REQUIRED, opt_min_block),
    GPBT_SET("policy", GPBT_ARG_REQUIRED, opt_policy),
    GPBT_SET("color", GPBT_ARG_REQUIRED, opt_color),
    GPBT_HELP,
    GPBT_VERSION,
};
#undef BIG

static void opts_defaults(opts_t *o) {
  memset(o, 0, sizeof *o);
  gpb_config_init(&o->cfg);
  o->cfg.backend = GPB_BACKEND_VIRTUAL;
  o->cfg.pool_size = 256u << 20;
  o->w = 1280;
  o->h = 800;
  o->count = 20;
  o->interval_ms = 500;
  o->speed = -1;
  o->seed = 1;
  o->bench_frames = 300;
}

/* The options together: one source, and values that fit each other. */
static int check_args(opts_t *o) {
  /* --compare A B: B is the word after A, taken as a pool name. */
  if (o->cmp_a) {
    if (!o->name) {
      fprintf(stderr, "gpubuddy-view: --compare wants two traces: --compare "
              "A B (try 'gpubuddy-view --help')\n");
      return -1;
    }
    o->cmp_b = o->name, o->name = NULL;
  }
  int sources = !!o->name + !!o->connect + !!o->trace + !!o->pattern + o->all +
                !!o->cmp_a;
  if (!o->list && sources != 1 && !(o->bench && sources == 0)) {
    fprintf(stderr, "gpubuddy-view: give one of NAME, --all, --connect, "
                    "--trace, --pattern, --compare (try 'gpubuddy-view "
                    "--help')\n");
    return -1;
  }
  if (o->connect) {
    /* "a,,b" or a trailing comma: a list with a hole is a typo. */
    const char *c = o->connect;
    size_t n = strlen(c);
    if (!n || c[0] == ',' || c[n - 1] == ',' || strstr(c, ",,")) {
      fprintf(stderr, "gpubuddy-view: --connect '%s': an empty address in "
              "the list (try 'gpubuddy-view --help')\n", c);
      return -1;
    }
  }
  if (o->find && (o->all || (o->connect && strchr(o->connect, ',')))) {
    fprintf(stderr, "gpubuddy-view: --find needs a single pool (try "
            "'gpubuddy-view --help')\n");
    return -1;
  }
  if (o->at && strcmp(o->at, "end") &&
      (strspn(o->at, "0123456789") != strlen(o->at) || !*o->at)) {
    fprintf(stderr, "gpubuddy-view: --at '%s': a number of ops (0 or more) or "
            "'end' (try 'gpubuddy-view --help')\n", o->at);
    return -1;
  }
  uint64_t where;
  if (o->find && vinput_parse_where(o->find, &where)) {
    fprintf(stderr, "gpubuddy-view: --find '%s': an address or offset like "
            "0x7f00a000, 4096 or 64K (try 'gpubuddy-view --help')\n", o->find);
    return -1;
  }
  if (o->pool_size_given && o->cfg.pool_size < o->cfg.min_block) {
    fprintf(stderr, "gpubuddy-view: --pool-size %zu is smaller than "
            "--min-block %zu (try 'gpubuddy-view --help')\n",
            o->cfg.pool_size, o->cfg.min_block);
    return -1;
  }
  if (o->count < 1) {
    fprintf(stderr, "gpubuddy-view: --count must be 1 or more (try "
            "'gpubuddy-view --help')\n");
    return -1;
  }
  if (o->headless && !o->png && !o->frames_dir) {
    gpbt_usage_error("gpubuddy-view", "--headless needs --png FILE or "
                     "--frames DIR");
    return -1;
  }
  return 0;
}

/* The command line into o: -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, opts_t *o) {
  static const gpbt_optspec_t spec = {
      "gpubuddy-view", view_opts, sizeof view_opts / sizeof view_opts[0],
      usage,
#ifdef GPB_HAVE_SDL2_WINDOW
      " (window: SDL2)"
#else
      " (headless only: built without SDL2)"
#endif
  };
  opts_defaults(o);
  int n, rc = gpbt_opts_parse(&spec, argc, argv, o, &n);
  if (rc >= 0) return rc;
  if (n > 1) return gpbt_usage_error("gpubuddy-view", "one pool name only");
  o->name = n ? argv[1] : NULL;
  return check_args(o) ? 2 : -1;
}

static void list_cb(const char *name, void *user) {
  (void)user;
  printf("%s\n", name);
}

/* The ops of --trace or --pattern. */
static int open_ops(const opts_t *o, vops_t **ops) {
  if (o->trace) return vops_open_trace(o->trace, ops);
  uint64_t steps = o->steps ? o->steps : 20000;
  int rc = vops_open_pattern(o->pattern, steps, o->cfg.pool_size,
                             o->cfg.min_block, o->seed, ops);
  if (rc)
    fprintf(stderr, "gpubuddy-view: --pattern: churn, checker or fill, "
                    "with --steps 1..2^32\n");
  return rc;
}

/* open_source: the relay at --connect HOST:PORT serves several pools. */
#define OPEN_SEVERAL 1

static int open_source(opts_t *o, vapp_t *app) {
  int rc;
  if (o->trace || o->pattern) {
    vops_t *ops;
    if ((rc = open_ops(o, &ops))) return rc;
    rc = vapp_open_replay(app, ops, &o->cfg);
    if (rc) return rc;
    vfmt_tail(o->trace ? o->trace : o->pattern, sizeof app->title - 1,
              app->title, sizeof app->title);
    if (o->speed >= 0) app->speed = o->speed;
  } else if (o->connect && !strchr(o->connect, '/')) {
    /* One relay, no pool named: its one pool as ever, or, when it
     * refuses for serving several (GPB_EINVAL), the grid of them. */
    gpb_attach_t *at;
    rc = gpb_attach_connect(o->connect, o->token, &at);
    if (rc == GPB_EINVAL) return OPEN_SEVERAL;
    if (rc) {
      vapp_attach_error(o->connect, rc);
      return rc;
    }
    char title[sizeof app->title];
    snprintf(title, sizeof title, "remote %s", o->connect);
    if ((rc = vapp_open_attach(app, at, title))) return rc;
    vapp_set_source(app, o->connect, 1, o->token);
  } else {
    rc = vapp_open_live(app, o->name, o->connect, o->token);
    if (rc) return rc;
  }
  app->map.color = (vcolor_mode_t)o->color;
  app->map.layout = (vlayout_t)o->layout;
  app->side_sites = o->side_sites;
  app->show_bands = o->bands;
  return 0;
}

/* Applies --find after the first layout, when the grid exists. */
static void apply_find(opts_t *o, vapp_t *app) {
  if (o->find) vinput_find(app, o->find);
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Lets a live reader catch up before a headless frame. */
static void catch_up(vapp_t *app) {
  for (int i = 0; i < 50; i++) {
    uint64_t before = app->events;
    vapp_update(app, 0);
    if (app->kind != VSRC_LIVE || app->disconnected || app->failed ||
        (i > 0 && app->events == before))
      break;
  }
}

/* Headless mode draws one pool (app) or a grid (grid; app NULL). */
static void headless_update(vapp_t *app, vgrid_t *grid, double dt) {
  if (!grid) {
    vapp_update(app, dt);
    return;
  }
  vgrid_update(grid, dt);
  for (int i = 0; i < grid->n; i++) catch_up(grid->cells[i].app);
}

static void headless_draw(vapp_t *app, vgrid_t *grid, gpbt_fb_t *fb) {
  if (grid) vgrid_draw(grid, fb);
  else vframe_draw(app, fb);
}

/* --json: the figures of the frame just rendered, for scripts. */
static void print_json(const vapp_t *app) {
  putchar('{');
  vapp_json_members(app, stdout);
  printf("}\n");
}

/* gpbt_png_write, saying on stderr why it failed. */
static int headless_png(const char *path, const gpbt_fb_t *fb) {
  int rc = gpbt_png_write(path, fb);
  if (rc)
    fprintf(stderr, "gpubuddy-view: cannot write %s: %s\n", path,
            strerror(errno));
  return rc;
}

/* --oom N: a replay runs on to its Nth failure (to the end when it has
 * not met it yet), goes there and opens its explanation. */
static int apply_oom(const opts_t *o, vapp_t *app) {
  if (app->kind != VSRC_REPLAY || !o->oom) return 0;
  if (app->series.noom < o->oom) vapp_seek(app, UINT64_MAX - 1);
  if (app->failed) return GPB_EFORMAT; /* a bad trace: said already */
  if (app->series.noom < o->oom) {
    /* Failures the trace recorded happened in the traced program's own
     * pool; a replay into another size need not meet them. */
    gpbt_seq_t q;
    char err[256], b1[32];
    uint64_t rec = 0;
    if (o->trace && gpbt_seq_load(o->trace, 1, &q, err, sizeof err) == 0) {
      rec = q.failed;
      gpbt_seq_free(&q);
    }
    fprintf(stderr, "gpubuddy-view: --oom %llu: the replay into %s has %llu "
            "failed allocation%s", (unsigned long long)o->oom,
            vfmt_bytes(app->info.pool_size, b1, sizeof b1),
            (unsigned long long)app->series.ooms,
            app->series.ooms == 1 ? "" : "s");
    if (rec)
      fprintf(stderr, "; the trace recorded %llu in its own pool: give that "
              "pool's size with --pool-size", (unsigned long long)rec);
    fputc('\n', stderr);
    return GPB_ENOTFOUND;
  }
  voom_pick(app, (size_t)(o->oom - 1));
  if (app->seek_to != UINT64_MAX) vapp_seek(app, app->seek_to);
  app->paused = 1;
  return 0;
}

static int run_headless(opts_t *o, vapp_t *app, vgrid_t *grid) {
  gpbt_fb_t fb;
  if (gpbt_fb_init(&fb, o->w, o->h)) return GPB_EHOSTMEM;
  /* As a window of that size would draw it: text doubled from 1200x700
   * up, a pixel per map cell. */
  int ui = o->scale ? o->scale : vframe_auto_scale(fb.w, fb.h, 1);
  int cells = o->scale ? 0 : 1;
  if (grid) {
    grid->scale = ui;
    grid->cell_scale = cells;
    vgrid_layout(grid, fb.w, fb.h);
  } else {
    app->scale = ui;
    app->cell_scale = cells;
    vframe_layout(app, fb.w, fb.h);
  }
  int rc = 0;
  if (app && app->kind == VSRC_REPLAY && (o->png || o->at)) {
    uint64_t at = UINT64_MAX - 1;
    if (o->at && strcmp(o->at, "end")) {
      char *end;
      at = strtoull(o->at, &end, 10);
      if (end == o->at || *end) {
        fprintf(stderr, "gpubuddy-view: --at wants a number of ops or 'end'\n");
        gpbt_fb_free(&fb);
        return GPB_EINVAL;
      }
    }
    vapp_seek(app, at);
    app->paused = 1;
  }
  if (app && (rc = apply_oom(o, app)) != 0) {
    gpbt_fb_free(&fb);
    return rc;
  }
  if (o->png) {
    if (grid) {
      headless_update(app, grid, 0);
    } else {
      catch_up(app);
      apply_find(o, app);
    }
    /* A bad trace or stream (said on stderr already) leaves OUT.png as
     * it was: a picture of the ops before the error would pass for the
     * whole run. */
    if (!grid && app->failed) {
      gpbt_fb_free(&fb);
      return GPB_EFORMAT;
    }
    headless_draw(app, grid, &fb);
    rc = headless_png(o->png, &fb);
    if (!rc) fprintf(stderr, "gpubuddy-view: wrote %s\n", o->png);
  } else {
    if (mkdir(o->frames_dir, 0755) && errno != EEXIST) {
      fprintf(stderr, "gpubuddy-view: cannot create %s: %s\n", o->frames_dir,
              strerror(errno));
      gpbt_fb_free(&fb);
      return GPB_EIO;
    }
    int found = 0, i;
    for (i = 0; i < o->count && !rc; i++) {
      if (i) sleep_ms(o->interval_ms);
      headless_update(app, grid, o->interval_ms / 1000.0);
      if (!grid) {
        catch_up(app);
        if (!found) apply_find(o, app), found = 1;
      }
      /* A bad trace or stream: the frames so far stand, none after it. */
      if (!grid && app->failed) break;
      /* A program tears its pool down as it exits: more frames would all
       * show that empty pool, DISCONNECTED. The last one written is the
       * last live state. */
      if (!grid && app->disconnected && i > 0) {
        fprintf(stderr, "\ngpubuddy-view: the pool's program exited: "
                        "stopped after %d frame%s, the last live state", i,
                i == 1 ? "" : "s");
        break;
      }
      headless_draw(app, grid, &fb);
      char path[4096];
      snprintf(path, sizeof path, "%s/frame-%03d.png", o->frames_dir, i);
      rc = headless_png(path, &fb);
      fprintf(stderr, "\rgpubuddy-view: frame %d/%d%s", i + 1, o->count,
              app && app->disconnected ? " (disconnected)" : "");
    }
    if (i > 0)
      fprintf(stderr, "\ngpubuddy-view: frames are in %s/\n", o->frames_dir);
  }
  gpbt_fb_free(&fb);
  if (!rc && app && app->failed) rc = GPB_EFORMAT;
  return rc;
}

/* The window on one pool or a grid; a build without SDL2 says how to
 * render instead. */
static int run_window(const opts_t *o, vapp_t *app, vgrid_t *grid) {
#ifdef GPB_HAVE_SDL2_WINDOW
  return vwindow_run(app, grid, o->w, o->h, o->scale, grid ? NULL : o->find);
#else
  (void)o, (void)app, (void)grid;
  fprintf(stderr, "gpubuddy-view: this build has no window (SDL2 was not "
                  "found when it was configured)\n"
                  "  render headless instead: --headless --png out.png, or "
                  "--headless --frames DIR\n");
  return 1;
#endif
}

/* --compare A B: headless, one picture at --at (default the end) and
 * --json; else the window. */
static int run_compare(opts_t *o) {
  vcmp_t c;
  if (vcmp_open(&c, o->cmp_a, o->cmp_b, &o->cfg, o->pool_size_given)) return 1;
  for (int i = 0; i < 2; i++) {
    c.app[i].map.color = (vcolor_mode_t)o->color;
    c.app[i].map.layout = (vlayout_t)o->layout;
    c.app[i].side_sites = o->side_sites;
    c.app[i].show_bands = o->bands;
    if (o->speed >= 0) c.app[i].speed = o->speed;
  }
  int rc = 0;
  if (o->headless) {
    gpbt_fb_t fb;
    if (!o->png) {
      fprintf(stderr, "gpubuddy-view: --compare --headless needs --png FILE\n");
      rc = 1;
    } else if (gpbt_fb_init(&fb, o->w, o->h)) {
      rc = 1;
    } else {
      c.scale = o->scale ? o->scale : vframe_auto_scale(fb.w, fb.h, 1);
      c.cell_scale = o->scale ? 0 : 1;
      vcmp_seek(&c, o->at && strcmp(o->at, "end") ? strtoull(o->at, NULL, 10)
                                                  : UINT64_MAX - 1);
      rc = c.app[0].failed || c.app[1].failed;
      if (!rc) {
        vcmp_draw(&c, &fb);
        rc = headless_png(o->png, &fb);
      }
      if (!rc) fprintf(stderr, "gpubuddy-view: wrote %s\n", o->png);
      if (!rc && o->json) vcmp_json(&c, stdout);
      gpbt_fb_free(&fb);
    }
  } else {
#ifdef GPB_HAVE_SDL2_WINDOW
    rc = vwindow_run_cmp(&c, o->w, o->h, o->scale);
#else
    rc = run_window(o, NULL, NULL);
#endif
  }
  vcmp_close(&c);
  return rc ? 1 : 0;
}

/* --all, --connect A,B, or one relay with several pools: the grid. */
static int run_grid(opts_t *o) {
  vgrid_t g;
  vgrid_init(&g, o->token, (vcolor_mode_t)o->color, (vlayout_t)o->layout);
  int rc = 0;
  if (o->all) {
    rc = vgrid_add_all(&g);
  } else {
    char *list = strdup(o->connect), *save = NULL;
    if (!list) rc = GPB_EHOSTMEM;
    for (char *a = list ? strtok_r(list, ",", &save) : NULL; a && !rc;
         a = strtok_r(NULL, ",", &save))
      rc = vgrid_add_connect(&g, a);
    free(list);
    if (!rc) vgrid_say_down(&g);
    /* No relay of the list answered: nothing to show, as one alone. */
    if (!rc && !vgrid_answering(&g)) rc = GPB_ENOTFOUND;
  }
  if (!rc && o->headless) {
    rc = run_headless(o, NULL, &g);
    if (o->json && !rc) vgrid_json(&g, stdout);
  } else if (!rc) {
    rc = run_window(o, NULL, &g);
  }
  vgrid_close(&g);
  return rc ? 1 : 0;
}

/* ------------------------------------------------------------------ bench */

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

typedef struct bench_rec {
  gpb_event_t *ev;
  size_t n, cap;
} bench_rec_t;

static void bench_record(const gpb_event_t *ev, void *user) {
  bench_rec_t *r = user;
  if (ev && r->n < r->cap) r->ev[r->n++] = *ev;
}

static double bench_ingest(vapp_t *app, uint64_t ops, const char *what) {
  uint64_t e0 = vreplay_events(app->rp), t0 = gpb_now_ns(), done = 0;
  while (done < ops && !vreplay_at_end(app->rp)) {
    int64_t n = vreplay_step(app->rp, ops - done < 50000 ? ops - done : 50000);
    if (n <= 0) break;
    done += (uint64_t)n;
  }
  double secs = (double)(gpb_now_ns() - t0) / 1e9;
  uint64_t ev = vreplay_events(app->rp) - e0;
  printf("replay %-34s %8" PRIu64 " ops %9" PRIu64 " events  %6.3f s  %6.2f M events/s\n",
         what, done, ev, secs, secs > 0 ? (double)ev / secs / 1e6 : 0);
  return secs;
}

/* Ops held in memory for the ingest measurement: 8M ops are 448 MB. */
#define BENCH_MAX_OPS (8u << 20)

/* Reads the whole source once, timed (trace parsing or the pattern's
 * generator), into an array for the replay measured without it. NULL
 * when the source is longer than BENCH_MAX_OPS or unreadable. */
static gpb_trace_op_t *bench_source(const opts_t *o, size_t *n, int *bad) {
  vops_t *v;
  *n = 0;
  if ((*bad = open_ops(o, &v) != 0)) return NULL;
  size_t cap = 1u << 16;
  gpb_trace_op_t *a = malloc(cap * sizeof *a);
  uint64_t t0 = gpb_now_ns();
  int rc = 1;
  while (a && *n <= BENCH_MAX_OPS && (rc = vops_next(v, &a[*n])) == 1)
    if (++*n == cap) {
      gpb_trace_op_t *b = realloc(a, (cap *= 2) * sizeof *a);
      if (!b) free(a);
      a = b;
    }
  double secs = (double)(gpb_now_ns() - t0) / 1e9;
  if (rc < 0) fprintf(stderr, "gpubuddy-view: %s\n", vops_error(v));
  printf("source %-34s %8zu ops                   %6.3f s  %6.2f M ops/s\n",
         o->trace ? "trace file, read and parsed" : "synthetic pattern", *n,
         secs, secs > 0 ? (double)*n / secs / 1e6 : 0);
  vops_close(v);
  if (!a || rc < 0 || *n > BENCH_MAX_OPS) {
    if (a && *n > BENCH_MAX_OPS)
      printf("(over %u ops: the ingest is measured from the file only)\n",
             BENCH_MAX_OPS);
    free(a);
    return NULL;
  }
  return a;
}

static void bench_frames(vapp_t *app, gpbt_fb_t *fb, int n,
                         uint64_t ops_per_frame) {
  double *ft = malloc((size_t)n * sizeof *ft);
  if (!ft) return;
  for (int i = 0; i < n; i++) {
    uint64_t f0 = gpb_now_ns();
    if (ops_per_frame) vreplay_step(app->rp, ops_per_frame);
    vapp_update(app, 0);
    vframe_draw(app, fb);
    ft[i] = (double)(gpb_now_ns() - f0) / 1e6;
  }
  qsort(ft, (size_t)n, sizeof *ft, cmp_double);
  int p99 = (n * 99) / 100 < n ? (n * 99) / 100 : n - 1;
  printf("frame %dx%d, %5" PRIu64 " ops/frame: median %6.2f ms  p99 %6.2f ms  "
         "(%d frames, %" PRIu64 " live allocations)\n",
         fb->w, fb->h, ops_per_frame, ft[n / 2], ft[p99], n,
         app->stats.live_allocs);
  free(ft);
}

/* The allocation bands (key a) over the whole run and zoomed to its
 * middle half: what a view change costs (the chart is kept between). */
static void bench_bands(vapp_t *app, gpbt_fb_t *fb) {
  app->show_bands = 1;
  uint64_t t0 = gpb_now_ns();
  vframe_draw(app, fb);
  uint64_t t1 = gpb_now_ns();
  vtl_zoom(app, app->tl_x + app->tl_w / 2, 1);
  vframe_draw(app, fb);
  uint64_t t2 = gpb_now_ns();
  vframe_draw(app, fb); /* kept: a hover's redraw */
  uint64_t t3 = gpb_now_ns();
  printf("bands  %dx%d map, %zu allocations: whole run %.1f ms, zoomed %.1f "
         "ms, redraw kept %.2f ms\n", app->map_w, app->map_h, app->bands.n,
         (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6,
         (double)(t3 - t2) / 1e6);
  app->tl_zlo = app->tl_zhi = 0;
  app->show_bands = 0;
}

/* Fill: `steps` min-block allocations, then churn at that many live
 * blocks (or --trace / --pattern). Reports the source's own rate (trace
 * parsing or the pattern's generator), replay ingest from ops in memory
 * (simulator + map + series: the viewer's own work), for a trace
 * the replay from the file as a user gets it, live ingest (following
 * model + map: what a live reader does with each event), and frame
 * times. */
static int run_bench(opts_t *o) {
  vapp_t app;
  uint64_t steps = o->steps ? o->steps : 1000000;
  int fill = !o->trace && !o->pattern;
  if (fill) {
    uint64_t mb = o->cfg.min_block, need = steps * mb * 2, p = mb;
    while (p < need) p *= 2;
    o->cfg.pool_size = p;
    o->pattern = "fill";
    o->steps = steps;
  }
  printf("gpubuddy-view --bench: %s, pool %zu bytes, min block %zu\n",
         o->trace ? o->trace : o->pattern, o->cfg.pool_size, o->cfg.min_block);
  size_t nops;
  int bad;
  gpb_trace_op_t *arr = bench_source(o, &nops, &bad);
  if (bad) return 1;
  vops_t *mem = NULL;
  if (arr && vops_take_array(arr, nops, &mem)) free(arr);
  if (mem) {
    if (vapp_open_replay(&app, mem, &o->cfg)) return 1;
    app.map.color = (vcolor_mode_t)o->color;
    app.map.layout = (vlayout_t)o->layout;
  } else if (open_source(o, &app)) {
    return 1;
  }
  gpbt_fb_t fb;
  if (gpbt_fb_init(&fb, o->w, o->h)) return 1;
  vframe_layout(&app, fb.w, fb.h);
  vapp_update(&app, 0);
  const char *from = mem ? "(ops in memory)" : "(from the file)";
  char what[64];
  if (!fill) {
    snprintf(what, sizeof what, "whole run %s", from);
    bench_ingest(&app, UINT64_MAX, what);
  } else {
    snprintf(what, sizeof what, "fill %s", from);
    bench_ingest(&app, steps, what);
    snprintf(what, sizeof what, "churn at full pool %s", from);
    bench_ingest(&app, steps / 2, what);
  }
  if (o->trace && mem) {
    /* As a user replays it: parsing and ingest on one thread. */
    vapp_t file;
    if (open_source(o, &file) == 0) {
      vframe_layout(&file, fb.w, fb.h);
      bench_ingest(&file, UINT64_MAX, "whole run (from the file)");
      vapp_close(&file);
    }
  }
  vapp_update(&app, 0);
  bench_frames(&app, &fb, o->bench_frames, 0);
  if (fill) bench_frames(&app, &fb, o->bench_frames, 2000);
  bench_bands(&app, &fb);

  /* Live path: the same events into a fresh model and map. */
  bench_rec_t rec = {0};
  rec.cap = 2000000;
  rec.ev = malloc(rec.cap * sizeof *rec.ev);
  if (rec.ev) {
    vreplay_restart(app.rp);
    vreplay_set_hook(app.rp, bench_record, &rec);
    while (rec.n < rec.cap && !vreplay_at_end(app.rp) && vreplay_step(app.rp, 10000) > 0) {
    }
    vmap_t m;
    gpb_model_t *model;
    if (rec.n && vmap_init(&m, app.info.managed_size, app.info.min_block) == 0 &&
        gpb_model_create(app.info.managed_size, app.info.min_block, &model) == 0) {
      vmap_resize(&m, app.map.cols, app.map.rows);
      vmap_rebuild(&m, model);
      uint64_t t0 = gpb_now_ns();
      size_t bad = 0;
      for (size_t i = 0; i < rec.n; i++) {
        if (gpb_model_apply(model, &rec.ev[i])) bad++;
        vmap_event(&m, &rec.ev[i]);
      }
      vmap_refresh(&m, model);
      vmap_colorize(&m);
      double secs = (double)(gpb_now_ns() - t0) / 1e9;
      printf("live   %-28s %8s     %9zu events  %6.3f s  %6.2f M events/s%s\n",
             "model + map", "", rec.n, secs, (double)rec.n / secs / 1e6,
             bad ? " (events refused!)" : "");
      gpb_model_destroy(model);
      vmap_free(&m);
    }
    free(rec.ev);
  }
  gpbt_fb_free(&fb);
  vapp_close(&app);
  return 0;
}

int main(int argc, char **argv) {
  opts_t o;
  int prc = parse_args(argc, argv, &o);
  if (prc >= 0) return prc;
  if (o.list) {
    int rc = gpb_list_pools(list_cb, NULL);
    if (rc) {
      fprintf(stderr, "gpubuddy-view: --list: %s\n", gpb_strerror(rc));
      return 1;
    }
    return 0;
  }
  if (o.bench) return run_bench(&o);
  if (o.cmp_a) return run_compare(&o);
  if (o.all || (o.connect && strchr(o.connect, ','))) return run_grid(&o);
  vapp_t app;
  if (o.trace && !o.pool_size_given && strcmp(o.trace, "-")) {
    /* Size the pool from the trace, as gpubuddy-replay does: a fixed 256
     * MiB failed most of a large trace's requests. */
    gpbt_seq_t q;
    char err[512];
    /* From the requests that succeeded when recorded, as gpubuddy-replay
     * does: a failed one counted in made the pool hold it, so --oom
     * found no failure to explain. */
    if (gpbt_seq_load(o.trace, 0, &q, err, sizeof err) == 0) {
      o.cfg.pool_size = (size_t)gpbt_pool_size_for(q.peak_live, q.max_request);
      gpbt_seq_free(&q);
    } /* else open_source reports the trace's error */
  }
  int rc = open_source(&o, &app);
  if (rc == OPEN_SEVERAL) return run_grid(&o);
  if (rc) return 1;
  if (o.headless) {
    rc = run_headless(&o, &app, NULL);
    if (o.json && !rc) print_json(&app);
  } else {
    rc = apply_oom(&o, &app);
    if (!rc) rc = run_window(&o, &app, NULL);
  }
  vapp_close(&app);
  return rc ? 1 : 0;
}
