/* SPDX-License-Identifier: MIT */
/*
 * gpubuddy-export-torch: writes a gpubuddy trace, or a live pool, as a
 * PyTorch CUDA memory snapshot (the pickle torch.cuda.memory.
 * _dump_snapshot writes), so that memory_viz (pytorch.org/memory_viz,
 * torch.cuda._memory_viz) opens it.
 *
 * A trace is replayed through a gpubuddy pool (virtual backend: address
 * space only), so the snapshot shows gpubuddy's own layout: its one
 * segment is the pool, its blocks the pool's blocks at the end, each
 * with the bytes it was asked for (memory_viz shows the rest as internal
 * fragmentation). device_traces has, per op: "alloc" at the replay's
 * address, "free_requested" and "free_completed" for a free, and "oom"
 * for a request that failed when recorded (with the pool's free bytes as
 * device_free), after a "segment_alloc" of the pool at time 0. Sizes
 * are the bytes requested, times are time_us (the
 * trace's ns / 1000), and each op's call site becomes its "frames" (a
 * pool's MODULE+0xOFFSET frames symbolized with addr2line where debug
 * information exists), written once per site and shared by reference.
 *
 * A live pool (--live NAME) is attached as the viewer does: its blocks
 * now become the segment, and with --seconds S its events over S
 * seconds become device_traces.
 *
 * The pickle is streamed (tools/common/pickle.c): memory does not grow
 * with the trace, except the live ids and the site table.
 */
#define _POSIX_C_SOURCE 200809L
#include "gpubuddy.h"
#include "idmap.h"
#include "opseq.h"
#include "opts.h"
#include "pickle.h"
#include "replay.h"
#include "sitename.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FAIL_ID (1ull << 63)

static const char *prog = "gpubuddy-export-torch";

typedef struct opts {
  const char *path;  /* the trace, or NULL with --live */
  const char *live;  /* --live NAME */
  const char *out;   /* -o */
  size_t pool_size;  /* 0: derived */
  size_t min_block;
  gpb_policy_t policy;
  int device;
  double seconds;    /* --live: record events this long */
  int quiet;
} opts_t;

static void usage(FILE *f) {
  fprintf(f,
"Usage: %s [options] TRACE -o OUT.pickle\n"
"       %s --live NAME [--seconds S] -o OUT.pickle\n"
"\n"
"Writes a gpubuddy trace (docs/TRACE_FORMAT.md, .gz or RMM CSV too), or a\n"
"live pool, as a PyTorch CUDA memory snapshot pickle: \"segments\" (the\n"
"pool, its blocks with the bytes each was asked for and their frames) and\n"
"\"device_traces\" (alloc, free_requested, free_completed and oom entries\n"
"with time_us and frames), which memory_viz (pytorch.org/memory_viz or\n"
"torch.cuda._memory_viz) opens and gpubuddy-import-torch reads back.\n"
"\n"
"A trace is replayed through a gpubuddy pool (address space only), so the\n"
"snapshot shows gpubuddy's layout at the trace's end; requests that\n"
"failed when recorded become oom entries.\n"
"\n"
"options:\n"
"  -o, --output OUT  the pickle to write (- for standard output)\n"
"  --pool-size N     the replay's pool (default: the next power of two\n"
"                    >= 2 x the trace's peak live bytes)\n"
"  --min-block N     smallest block, a power of two >= 16 (default 256)\n"
"  --policy P        buddy (default), trim or bestfit\n"
"  --device N        the CUDA device index to file it under (default 0)\n"
"  --live NAME       a published pool instead of a trace\n"
"  --seconds S       with --live: record its events for S seconds\n"
"                    (default 0: its blocks now, no history)\n"
"  --quiet           no warnings on stderr\n"
"  --help            this text\n"
"  --version         the version\n"
"\n"
"Exit status: 0 written, 1 error (nothing left at OUT), 2 usage.\n",
          prog, prog);
}

/* ------------------------------------------------------------ frames */

/* Writes the frames of site text t as PyTorch's list of {"filename",
 * "line", "name"} dicts, innermost first; a site seen before is a memo
 * reference (memo[site]: index + 1, 0 not yet). */
typedef struct frames_memo {
  uint32_t idx[GPB_MAX_SITES + 1];
} frames_memo_t;

static void put_frame(gpbt_pk_t *p, const char *f) {
  const char *place, *fn;
  size_t np;
  unsigned long line;
  gpbt_sitename_parts(f, &place, &np, &line, &fn);
  gpbt_pk_dict(p);
  gpbt_pk_key(p, "filename");
  gpbt_pk_strn(p, place, np);
  gpbt_pk_setitem(p);
  gpbt_pk_kv_uint(p, "line", line);
  gpbt_pk_kv_str(p, "name", fn);
  gpbt_pk_append(p);
}

static void put_frames(gpbt_pk_t *p, frames_memo_t *m, uint32_t site,
                       const char *text) {
  if (site && site <= GPB_MAX_SITES && m->idx[site]) {
    gpbt_pk_get(p, m->idx[site] - 1);
    return;
  }
  gpbt_pk_list(p);
  gpbt_sitename_t s;
  if (site && text &&
      !gpbt_sitename(text, NULL,
                     GPBT_SITENAME_SYMBOLIZE | GPBT_SITENAME_IN_ORDER, &s)) {
    for (size_t k = 0; k < s.nframes; k++) put_frame(p, s.frames[k]);
    gpbt_sitename_free(&s);
  }
  if (site && site <= GPB_MAX_SITES) m->idx[site] = gpbt_pk_put(p) + 1;
}

/* ----------------------------------------------------------- entries */

/* What an entry says; frames come from site through the reader. */
typedef struct entry {
  const char *action;
  uint64_t addr, size, stream, time_ns, device_free;
  uint32_t site;
  int has_addr, has_free;
} entry_t;

typedef const char *(*site_text_fn)(const void *src, uint32_t site);

static void put_entry(gpbt_pk_t *p, frames_memo_t *m, const entry_t *e,
                      site_text_fn text, const void *src) {
  gpbt_pk_dict(p);
  gpbt_pk_kv_str(p, "action", e->action);
  if (e->has_addr) gpbt_pk_kv_uint(p, "addr", e->addr);
  gpbt_pk_kv_uint(p, "size", e->size);
  gpbt_pk_kv_uint(p, "stream", e->stream);
  gpbt_pk_kv_uint(p, "time_us", e->time_ns / 1000);
  if (e->has_free) gpbt_pk_kv_uint(p, "device_free", e->device_free);
  gpbt_pk_key(p, "frames");
  put_frames(p, m, e->site, e->site ? text(src, e->site) : NULL);
  gpbt_pk_setitem(p);
  gpbt_pk_append(p);
}

/* ---------------------------------------------------------- segments */

typedef struct seg_walk {
  gpbt_pk_t *p;
  frames_memo_t *m;
  site_text_fn text;
  const void *src;
  uint64_t base;
  uint64_t free_at, free_len; /* a run of free blocks not yet written */
  uint64_t allocated, requested;
} seg_walk_t;

static void seg_block(seg_walk_t *w, uint64_t off, uint64_t size,
                      uint64_t requested, const char *state, uint32_t site) {
  gpbt_pk_t *p = w->p;
  gpbt_pk_dict(p);
  gpbt_pk_kv_uint(p, "address", w->base + off);
  gpbt_pk_kv_uint(p, "size", size);
  gpbt_pk_kv_uint(p, "requested_size", requested);
  gpbt_pk_kv_str(p, "state", state);
  gpbt_pk_key(p, "frames");
  put_frames(p, w->m, site, site ? w->text(w->src, site) : NULL);
  gpbt_pk_setitem(p);
  gpbt_pk_append(p);
}

static void seg_flush_free(seg_walk_t *w) {
  if (w->free_len) seg_block(w, w->free_at, w->free_len, 0, "inactive", 0);
  w->free_len = 0;
}

/* One block of the pool: an allocation is written once (at its first
 * block, with its whole range), free neighbours as one inactive block. */
static int seg_visit(const gpb_block_info_t *b, void *user) {
  seg_walk_t *w = user;
  if (!b->used) {
    if (!w->free_len) w->free_at = b->offset;
    w->free_len += b->size;
    return 0;
  }
  if (b->offset != b->alloc_offset) return 0;
  seg_flush_free(w);
  seg_block(w, b->offset, b->alloc_size, b->requested, "active_allocated",
            b->site);
  w->allocated += b->alloc_size;
  w->requested += b->requested;
  return 0;
}

typedef int (*visit_fn)(const void *src, gpb_visit_fn fn, void *user);

/* "segments": one, the pool (base, size), its blocks from visit. */
static void put_segments(gpbt_pk_t *p, frames_memo_t *m, int device,
                         uint64_t base, uint64_t size, visit_fn visit,
                         site_text_fn text, const void *src) {
  gpbt_pk_key(p, "segments");
  gpbt_pk_list(p);
  gpbt_pk_dict(p);
  gpbt_pk_kv_uint(p, "device", (uint64_t)device);
  gpbt_pk_kv_uint(p, "address", base);
  gpbt_pk_kv_uint(p, "total_size", size);
  gpbt_pk_kv_uint(p, "stream", 0);
  gpbt_pk_kv_str(p, "segment_type", "large");
  gpbt_pk_key(p, "segment_pool_id");
  gpbt_pk_int(p, 0);
  gpbt_pk_int(p, 0);
  gpbt_pk_tuple2(p);
  gpbt_pk_setitem(p);
  gpbt_pk_key(p, "is_expandable");
  gpbt_pk_bool(p, 0);
  gpbt_pk_setitem(p);
  gpbt_pk_key(p, "frames");
  gpbt_pk_list(p);
  gpbt_pk_setitem(p);
  seg_walk_t w = {p, m, text, src, base, 0, 0, 0, 0};
  gpbt_pk_key(p, "blocks");
  gpbt_pk_list(p);
  visit(src, seg_visit, &w);
  seg_flush_free(&w);
  gpbt_pk_setitem(p);
  gpbt_pk_kv_uint(p, "allocated_size", w.allocated);
  gpbt_pk_kv_uint(p, "active_size", w.allocated);
  gpbt_pk_kv_uint(p, "requested_size", w.requested);
  gpbt_pk_append(p);
  gpbt_pk_setitem(p);
}

/* "device_traces" opens: a list, empty lists for the devices before
 * ours, then ours (left open for entries). */
static void open_traces(gpbt_pk_t *p, int device) {
  gpbt_pk_key(p, "device_traces");
  gpbt_pk_list(p);
  for (int d = 0; d < device; d++) {
    gpbt_pk_list(p);
    gpbt_pk_append(p);
  }
  gpbt_pk_list(p);
}

static void close_traces(gpbt_pk_t *p) {
  gpbt_pk_append(p); /* ours into device_traces */
  gpbt_pk_setitem(p);
}


/* ------------------------------------------------------------- trace */

typedef struct texp {
  const opts_t *o;
  gpbt_pk_t *p;
  frames_memo_t *m;
  gpb_trace_reader_t *tr;
  gpb_pool_t *pool;
  gpbt_idmap_t ptr, size; /* live trace id -> address, -> bytes asked */
  gpbt_idmap_t site;      /* live block offset -> the trace's call site */
  uint64_t base;          /* the pool's */
  int warned;
} texp_t;

static const char *texp_text(const void *src, uint32_t site) {
  return gpb_trace_site(((const texp_t *)src)->tr, site);
}

/* The pool's blocks, each used one with the trace's call site (the
 * replay's pool records none of its own). */
typedef struct texp_walk {
  const texp_t *x;
  gpb_visit_fn fn;
  void *user;
} texp_walk_t;

static int texp_block(const gpb_block_info_t *b, void *user) {
  texp_walk_t *w = user;
  gpb_block_info_t c = *b;
  const gpbt_idslot_t *s =
      b->used ? gpbt_idmap_find(&w->x->site, b->alloc_offset) : NULL;
  c.site = s ? (uint32_t)s->val : 0;
  return w->fn(&c, w->user);
}

static int texp_visit(const void *src, gpb_visit_fn fn, void *user) {
  texp_walk_t w = {src, fn, user};
  return gpb_pool_visit(w.x->pool, texp_block, &w);
}

static int trace_err(gpb_trace_reader_t *tr, const char *path, int rc) {
  fprintf(stderr, "%s: %s: %s: %s\n", prog, path, gpb_err_name(rc),
          tr ? gpb_trace_error(tr) : gpb_last_error_detail());
  return -1;
}

/* First pass: the pool a replay needs (as gpubuddy-replay derives it). */
static int trace_pool_size(const char *path, uint64_t *out) {
  gpb_trace_reader_t *tr;
  int rc = gpb_trace_open(path, &tr);
  if (rc) return trace_err(NULL, path, rc);
  gpbt_idmap_t m = {0};
  uint64_t live = 0, peak = 0, maxreq = 0;
  gpb_trace_op_t op;
  while ((rc = gpb_trace_next(tr, &op)) == 1) {
    if (op.id & FAIL_ID) continue;
    int err;
    gpbt_idslot_t *s;
    if (op.op == GPB_OP_ALLOC && (s = gpbt_idmap_claim(&m, op.id, &err))) {
      gpbt_idmap_commit(&m, s, op.id, op.size);
      live += op.size;
      if (live > peak) peak = live;
      if (op.size > maxreq) maxreq = op.size;
    } else if (op.op != GPB_OP_ALLOC && (s = gpbt_idmap_find(&m, op.id))) {
      live -= s->val;
      gpbt_idmap_remove(&m, s);
    }
  }
  if (rc < 0) rc = trace_err(tr, path, rc);
  gpbt_idmap_fini(&m);
  gpb_trace_close(tr);
  *out = gpbt_pool_size_for(peak, maxreq);
  return rc;
}

static int texp_alloc(texp_t *x, const gpb_trace_op_t *op) {
  entry_t e = {"alloc", 0, op->size, op->stream, op->time_ns, 0, op->site,
               1, 0};
  if (op->id & FAIL_ID) { /* failed when recorded: an oom entry */
    gpb_stats_t st;
    gpb_pool_stats(x->pool, &st);
    e.action = "oom";
    e.has_addr = 0;
    e.has_free = 1;
    e.device_free = st.free_bytes;
    put_entry(x->p, x->m, &e, texp_text, x);
    return 0;
  }
  if (gpbt_idmap_find(&x->ptr, op->id)) return 0; /* replay skips these */
  void *ptr = NULL;
  int rc = gpb_alloc_ex(x->pool, (size_t)op->size, 0, op->tag, NULL, &ptr);
  if (rc) {
    fprintf(stderr, "%s: op %" PRIu64 ": %" PRIu64 " bytes do not fit the "
            "replay's pool (%s: %s): give a larger --pool-size\n", prog,
            op->seq, op->size, gpb_err_name(rc), gpb_last_error_detail());
    return -1;
  }
  int err;
  gpbt_idslot_t *a = gpbt_idmap_claim(&x->ptr, op->id, &err);
  if (a) gpbt_idmap_commit(&x->ptr, a, op->id, (uint64_t)(uintptr_t)ptr);
  gpbt_idslot_t *b = a ? gpbt_idmap_claim(&x->size, op->id, &err) : NULL;
  if (b) gpbt_idmap_commit(&x->size, b, op->id, op->size);
  uint64_t off = (uint64_t)(uintptr_t)ptr - x->base;
  gpbt_idslot_t *c = b ? gpbt_idmap_claim(&x->site, off, &err) : NULL;
  if (!c) {
    fprintf(stderr, "%s: out of memory\n", prog);
    return -1;
  }
  gpbt_idmap_commit(&x->site, c, off, op->site);
  e.addr = (uint64_t)(uintptr_t)ptr;
  put_entry(x->p, x->m, &e, texp_text, x);
  return 0;
}

static int texp_free(texp_t *x, const gpb_trace_op_t *op) {
  if (op->id & FAIL_ID) return 0; /* its oom entry said it all */
  gpbt_idslot_t *a = gpbt_idmap_find(&x->ptr, op->id);
  gpbt_idslot_t *b = gpbt_idmap_find(&x->size, op->id);
  if (!a || !b) {
    if (!x->warned++ && !x->o->quiet)
      fprintf(stderr, "%s: warning: op %" PRIu64 " frees an id never "
              "allocated; left out (further ones silently)\n", prog, op->seq);
    return 0;
  }
  entry_t e = {"free_requested", a->val, b->val, op->stream, op->time_ns, 0,
               op->site, 1, 0};
  put_entry(x->p, x->m, &e, texp_text, x);
  e.action = "free_completed";
  put_entry(x->p, x->m, &e, texp_text, x);
  gpbt_idslot_t *c = gpbt_idmap_find(&x->site, a->val - x->base);
  if (c) gpbt_idmap_remove(&x->site, c);
  int rc = gpb_free(x->pool, (void *)(uintptr_t)a->val);
  gpbt_idmap_remove(&x->ptr, a);
  gpbt_idmap_remove(&x->size, b);
  if (rc) {
    fprintf(stderr, "%s: op %" PRIu64 ": free: %s\n", prog, op->seq,
            gpb_err_name(rc));
    return -1;
  }
  return 0;
}

static int texp_pool(const opts_t *o, gpb_pool_t **pool) {
  uint64_t size = o->pool_size;
  if (!size && trace_pool_size(o->path, &size)) return -1;
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = (size_t)size;
  cfg.min_block = o->min_block;
  cfg.policy = o->policy;
  cfg.flags = GPB_CFG_NO_ENV;
  int rc = gpb_pool_create(&cfg, pool);
  if (rc)
    fprintf(stderr, "%s: cannot create a %" PRIu64 "-byte pool: %s: %s\n",
            prog, size, gpb_err_name(rc), gpb_last_error_detail());
  return rc ? -1 : 0;
}

/* The trace as a snapshot onto p. 0, or -1 after printing an error. */
static int export_trace(const opts_t *o, gpbt_pk_t *p, frames_memo_t *m) {
  texp_t x;
  memset(&x, 0, sizeof x);
  x.o = o;
  x.p = p;
  x.m = m;
  if (texp_pool(o, &x.pool)) return -1;
  int rc = gpb_trace_open(o->path, &x.tr);
  if (rc) {
    gpb_pool_destroy(x.pool);
    return trace_err(NULL, o->path, rc);
  }
  gpbt_pk_dict(p);
  open_traces(p, o->device);
  /* The pool's reservation, at the trace's time 0: the cached-memory
   * timeline shows it, and times stay the trace's when read back. */
  gpb_pool_info_t info;
  gpb_pool_info(x.pool, &info);
  x.base = (uint64_t)(uintptr_t)info.base;
  entry_t seg = {"segment_alloc", (uint64_t)(uintptr_t)info.base,
                 info.managed_size, 0, 0, 0, 0, 1, 0};
  put_entry(p, m, &seg, texp_text, &x);
  gpb_trace_op_t op;
  int ret = 0;
  while (!ret && (rc = gpb_trace_next(x.tr, &op)) == 1)
    ret = op.op == GPB_OP_ALLOC ? texp_alloc(&x, &op) : texp_free(&x, &op);
  if (!ret && rc < 0) ret = trace_err(x.tr, o->path, rc);
  close_traces(p);
  if (!ret)
    put_segments(p, m, o->device, (uint64_t)(uintptr_t)info.base,
                 info.managed_size, texp_visit, texp_text, &x);
  gpbt_idmap_fini(&x.ptr);
  gpbt_idmap_fini(&x.size);
  gpbt_idmap_fini(&x.site);
  gpb_trace_close(x.tr);
  gpb_pool_destroy(x.pool);
  return ret;
}

/* -------------------------------------------------------------- live */

typedef struct lexp {
  gpbt_pk_t *p;
  frames_memo_t *m;
  gpb_attach_t *a;
  uint64_t base;
  uint64_t n; /* entries written */
} lexp_t;

static const char *lexp_text(const void *src, uint32_t site) {
  return gpb_attach_site(((const lexp_t *)src)->a, site);
}

static int lexp_visit(const void *src, gpb_visit_fn fn, void *user) {
  return gpb_model_visit(gpb_attach_model(((const lexp_t *)src)->a), fn,
                         user);
}

/* Each event the reader applies: an entry (allocs, frees, failures). */
static void lexp_hook(const gpb_event_t *ev, void *user) {
  lexp_t *x = user;
  if (!ev) return; /* a resync: the model is whole again, history is not */
  entry_t e = {NULL, x->base + ev->offset, ev->requested, ev->stream,
               ev->time_ns, 0, ev->site, 1, 0};
  if (ev->type == GPB_EV_ALLOC) {
    e.action = "alloc";
  } else if (ev->type == GPB_EV_FREE) {
    e.action = "free_requested";
    put_entry(x->p, x->m, &e, lexp_text, x);
    x->n++;
    e.action = "free_completed";
  } else if (ev->type == GPB_EV_FAIL) {
    gpb_stats_t st;
    e.action = "oom";
    e.has_addr = 0;
    e.has_free = !gpb_model_stats(gpb_attach_model(x->a), &st);
    e.device_free = e.has_free ? st.free_bytes : 0;
  } else {
    return;
  }
  put_entry(x->p, x->m, &e, lexp_text, x);
  x->n++;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int export_live(const opts_t *o, gpbt_pk_t *p, frames_memo_t *m) {
  lexp_t x = {p, m, NULL, 0, 0};
  int rc = gpb_attach_open(o->live, &x.a);
  if (rc) {
    fprintf(stderr, "%s: cannot attach to pool '%s': %s: %s\n", prog,
            o->live, gpb_err_name(rc), gpb_last_error_detail());
    return -1;
  }
  gpb_pool_info_t info;
  gpb_attach_info(x.a, &info);
  x.base = (uint64_t)(uintptr_t)info.base;
  gpbt_pk_dict(p);
  open_traces(p, o->device);
  rc = gpb_attach_poll(x.a); /* the state now, without history */
  gpb_attach_set_hook(x.a, lexp_hook, &x);
  uint64_t end = gpb_now_ns() + (uint64_t)(o->seconds * 1e9);
  while (rc >= 0 && o->seconds > 0 && gpb_now_ns() < end) {
    sleep_ms(10);
    rc = gpb_attach_poll(x.a);
  }
  close_traces(p);
  if (rc < 0 && rc != GPB_ECLOSED) {
    fprintf(stderr, "%s: pool '%s': %s: %s\n", prog, o->live,
            gpb_err_name(rc), gpb_last_error_detail());
    gpb_attach_close(x.a);
    return -1;
  }
  put_segments(p, m, o->device, x.base, info.managed_size, lexp_visit,
               lexp_text, &x);
  gpb_attach_close(x.a);
  return 0;
}

/* -------------------------------------------------------------- main */

/* Each option's setter (opts.h): NULL, or what the option takes. */
static const char *set_pool_size(void *ov, const char *a) {
  opts_t *o = ov;
  return gpb_size_parse(a, &o->pool_size) || !o->pool_size ? "a size > 0"
                                                           : NULL;
}

static const char *set_min_block(void *ov, const char *a) {
  opts_t *o = ov;
  size_t *m = &o->min_block;
  return gpb_size_parse(a, m) || *m < 16 || (*m & (*m - 1))
             ? "a power of two >= 16" : NULL;
}

static const char *set_policy(void *ov, const char *a) {
  opts_t *o = ov;
  return gpb_policy_parse(a, &o->policy) ? "buddy, trim or bestfit" : NULL;
}

static const char *set_live(void *ov, const char *a) {
  opts_t *o = ov;
  if (!*a || strlen(a) >= GPB_NAME_MAX)
    return "a pool name of 1 to 63 characters";
  o->live = a;
  return NULL;
}

static const char *set_seconds(void *ov, const char *a) {
  opts_t *o = ov;
  char *end;
  errno = 0;
  o->seconds = strtod(a, &end);
  return !errno && !*end && o->seconds >= 0 && o->seconds <= 86400
             ? NULL : "0 to 86400";
}

static const gpbt_opt_t opt_defs[] = {
    GPBT_FILE("output", opts_t, out),
    GPBT_SHORT('o', "output"),
    GPBT_SET("pool-size", GPBT_ARG_REQUIRED, set_pool_size),
    GPBT_SET("min-block", GPBT_ARG_REQUIRED, set_min_block),
    GPBT_SET("policy", GPBT_ARG_REQUIRED, set_policy),
    GPBT_INT("device", opts_t, device, 0, 1023),
    GPBT_SET("live", GPBT_ARG_REQUIRED, set_live),
    GPBT_SET("seconds", GPBT_ARG_REQUIRED, set_seconds),
    GPBT_FLAG("quiet", opts_t, quiet, 1),
    GPBT_SHORT('q', "quiet"),
    GPBT_HELP,
    GPBT_VERSION,
};

/* The command line into o: -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, opts_t *o) {
  static const gpbt_optspec_t spec = {
      "gpubuddy-export-torch", opt_defs, sizeof opt_defs / sizeof opt_defs[0],
      usage, NULL};
  memset(o, 0, sizeof *o);
  o->min_block = 256;
  o->policy = GPB_POLICY_BUDDY;
  int n, rc = gpbt_opts_parse(&spec, argc, argv, o, &n);
  if (rc >= 0) return rc;
  const char *err = NULL;
  if (n > 1 || (n == 1) == (o->live != NULL))
    err = "give one TRACE, or --live NAME";
  else if (!o->out)
    err = "give the pickle to write: -o OUT.pickle";
  else if (!o->live && o->seconds > 0)
    err = "--seconds goes with --live";
  if (err) return gpbt_usage_error(prog, "%s", err);
  if (!o->live) o->path = argv[1];
  return -1;
}

int main(int argc, char **argv) {
  opts_t o;
  int rc = parse_args(argc, argv, &o);
  if (rc >= 0) return rc;
  int to_stdout = !strcmp(o.out, "-");
  FILE *f = to_stdout ? stdout : fopen(o.out, "wb");
  if (!f) {
    fprintf(stderr, "%s: cannot write %s: %s\n", prog, o.out, strerror(errno));
    return 1;
  }
  frames_memo_t *m = calloc(1, sizeof *m);
  gpbt_pk_t p;
  gpbt_pk_begin(&p, f);
  rc = !m ? -1 : o.live ? export_live(&o, &p, m) : export_trace(&o, &p, m);
  if (!m) fprintf(stderr, "%s: out of memory\n", prog);
  if (!rc && gpbt_pk_end(&p)) {
    fprintf(stderr, "%s: cannot write %s: %s\n", prog, o.out,
            strerror(errno));
    rc = -1;
  }
  free(m);
  if (!to_stdout && fclose(f) && !rc) {
    fprintf(stderr, "%s: cannot write %s: %s\n", prog, o.out,
            strerror(errno));
    rc = -1;
  }
  if (rc && !to_stdout) remove(o.out);
  return rc ? 1 : 0;
}
