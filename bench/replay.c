/* SPDX-License-Identifier: MIT */
/*
 * replay.c: trace replays. Each trace (native or RMM, through
 * gpb_trace_open) becomes one bench_seq_t of alloc/free ops on numbered
 * slots; then, for that trace:
 *
 *   1. the smallest pool gpubuddy needs, per policy, by the exact search
 *      that gpubuddy-replay --find-min-pool uses (tools/common/minpool.h),
 *      each candidate replayed on the virtual backend (address space only)
 *      until the first failed allocation;
 *   2. fragmentation over time at one pool size that every policy fits:
 *      requested bytes live, bytes in blocks, and the footprint (the end
 *      of the highest live block), after every op;
 *   3. per-op latency of every contender on the same ops: an untimed
 *      pass, then --trace-rounds timed passes, the contenders in turns.
 *
 * Traces are loaded by tools/common/opseq.c, the loader gpubuddy-replay
 * uses, so both count the same ops.
 */
#include "bench.h"
#include "minpool.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ----------------------------------------------------------- loading */

typedef struct replay_trace {
  char name[96];
  bench_seq_t q;
} replay_trace_t;

static void replay_name(const char *path, char *out, size_t n) {
  const char *b = strrchr(path, '/');
  b = b ? b + 1 : path;
  snprintf(out, n, "%s", b);
  static const char *const ext[] = {".gz", ".trace", ".txt", ".csv", ".gpbt"};
  for (int again = 1; again;) {
    again = 0;
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
      size_t l = strlen(out), e = strlen(ext[i]);
      if (l > e && !strcasecmp(out + l - e, ext[i])) {
        out[l - e] = 0;
        again = 1;
      }
    }
  }
  for (char *p = out; *p; p++)
    if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
      *p = '_';
}

/* Reads a trace file into t. 0, or nonzero with a message. */
static int replay_load(const char *path, replay_trace_t *t) {
  memset(t, 0, sizeof *t);
  replay_name(path, t->name, sizeof t->name);
  char err[512];
  int rc = gpbt_seq_load(path, 1, &t->q, err, sizeof err);
  if (rc) fprintf(stderr, "gpubuddy-bench: %s\n", err);
  return rc;
}

/* A generated workload shaped like inference with varying shapes:
 * persistent weights, then steps whose activations scale with a random
 * batch, freed mostly in reverse, with short-lived temporaries between. It
 * exercises the harness where no recorded trace is at hand. */
static int replay_synthetic(replay_trace_t *t, uint64_t seed, int steps) {
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "synthetic-dynamic");
  uint64_t rng = seed ^ 0x5eed;
  enum { NW = 48, NL = 64 };
  size_t layer[NL];
  uint32_t act[NL];
  for (int i = 0; i < NW; i++) {
    if (gpbt_seq_push(&t->q, 1, (uint32_t)t->q.nslots++,
                    bench_rand_logsize(&rng, 64 << 10, 48 << 20)))
      return -1;
    t->q.allocs++;
  }
  for (int i = 0; i < NL; i++) layer[i] = bench_rand_logsize(&rng, 8 << 10, 8 << 20);
  for (int s = 0; s < steps; s++) {
    double scale = 1 + (double)(bench_rand(&rng) % 16);
    for (int i = 0; i < NL; i++) {
      uint64_t sz = (uint64_t)((double)layer[i] * scale) + (bench_rand(&rng) % 512);
      act[i] = (uint32_t)t->q.nslots++;
      if (gpbt_seq_push(&t->q, 1, act[i], sz)) return -1;
      t->q.allocs++;
      uint32_t tmp = (uint32_t)t->q.nslots++;
      if (gpbt_seq_push(&t->q, 1, tmp, sz / 2 + 256) ||
          gpbt_seq_push(&t->q, 0, tmp, 0))
        return -1;
      t->q.allocs++;
      t->q.frees++;
      if (i >= 2 && bench_rand01(&rng) < 0.5) { /* an earlier one dies early */
        uint32_t k = (uint32_t)(bench_rand(&rng) % (uint64_t)(i - 1));
        if (act[k] != UINT32_MAX) {
          if (gpbt_seq_push(&t->q, 0, act[k], 0)) return -1;
          act[k] = UINT32_MAX;
          t->q.frees++;
        }
      }
    }
    for (int i = NL - 1; i >= 0; i--)
      if (act[i] != UINT32_MAX) {
        if (gpbt_seq_push(&t->q, 0, act[i], 0)) return -1;
        t->q.frees++;
      }
  }
  gpbt_seq_peak(&t->q);
  return 0;
}

/* PyTorch's smallest cap / peak live from shared/ANCHORS.md (H200, the
 * workloads of samples/torch/record_traces.py at ANCHORS' sizes), matched
 * by the trace's name: resnet, infer(ence), gpt (training). */
static double replay_anchor(const char *name) {
  char low[96];
  size_t i;
  for (i = 0; name[i] && i + 1 < sizeof low; i++)
    low[i] = (char)tolower((unsigned char)name[i]);
  low[i] = 0;
  if (strstr(low, "resnet")) return 1.03;
  if (strstr(low, "infer")) return 1.75; /* GPT-2 dynamic inference */
  if (strstr(low, "gpt")) return 1.10;   /* GPT-2 training */
  return 0;
}

/* ------------------------------------------------------ smallest pool */

typedef struct replay_sim {
  gpb_pool_t *pool;
  void **ptrs;
} replay_sim_t;

static int sim_open(replay_sim_t *s, size_t pool_size, size_t min_block,
                    gpb_policy_t policy) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = pool_size;
  cfg.min_block = min_block;
  cfg.policy = policy;
  cfg.flags = GPB_CFG_NO_ENV;
  int rc = gpb_pool_create(&cfg, &s->pool);
  if (rc)
    fprintf(stderr, "gpubuddy-bench: virtual pool of %zu bytes: %s: %s\n",
            pool_size, gpb_strerror(rc), gpb_last_error_detail());
  return rc;
}

static size_t replay_round(uint64_t v, size_t mb) {
  return (size_t)((v + mb - 1) / mb * mb);
}

/* ------------------------------------------------- fragmentation plot */

typedef struct frag_heap {
  uint64_t *end; /* (end << 24 | slot) would overflow; keep pairs */
  uint32_t *slot;
  size_t n, cap;
} frag_heap_t;

static int heap_push(frag_heap_t *h, uint64_t end, uint32_t slot) {
  if (h->n == h->cap) {
    size_t nc = h->cap ? h->cap * 2 : 1024;
    uint64_t *e = realloc(h->end, nc * sizeof *e);
    if (!e) return -1;
    h->end = e;
    uint32_t *s = realloc(h->slot, nc * sizeof *s);
    if (!s) return -1;
    h->slot = s;
    h->cap = nc;
  }
  size_t i = h->n++;
  while (i > 0 && h->end[(i - 1) / 2] < end) {
    h->end[i] = h->end[(i - 1) / 2];
    h->slot[i] = h->slot[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->end[i] = end;
  h->slot[i] = slot;
  return 0;
}

static void heap_pop(frag_heap_t *h) {
  uint64_t e = h->end[--h->n];
  uint32_t s = h->slot[h->n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && h->end[c + 1] > h->end[c]) c++;
    if (h->end[c] <= e) break;
    h->end[i] = h->end[c];
    h->slot[i] = h->slot[c];
    i = c;
  }
  if (h->n) {
    h->end[i] = e;
    h->slot[i] = s;
  }
}

/* Replays q at pool_size and fills, per op, the bytes in blocks and the
 * footprint; requested bytes live go to req when non-NULL. */
static int replay_frag(const bench_seq_t *q, void **ptrs, size_t pool_size,
                       size_t mb, gpb_policy_t policy, double *req,
                       double *blocks, double *foot) {
  replay_sim_t s;
  if (sim_open(&s, pool_size, mb, policy)) return -1;
  gpb_pool_info_t info;
  gpb_pool_info(s.pool, &info);
  uint64_t *end = calloc(q->nslots ? q->nslots : 1, sizeof *end);
  uint64_t *bsz = calloc(q->nslots ? q->nslots : 1, sizeof *bsz);
  uint64_t *rsz = calloc(q->nslots ? q->nslots : 1, sizeof *rsz);
  frag_heap_t h = {0};
  int rc = (end && bsz && rsz) ? 0 : -1;
  uint64_t live_req = 0, live_blk = 0;
  for (size_t i = 0; i < q->n && rc == 0; i++) {
    const bench_op_t *op = &q->ops[i];
    uint32_t sl = op->slot;
    if (op->alloc) {
      if (gpb_alloc(s.pool, (size_t)op->size, &ptrs[sl]) == 0) {
        size_t us = 0;
        gpb_usable_size(s.pool, ptrs[sl], &us);
        end[sl] = (uint64_t)((char *)ptrs[sl] - (char *)info.base) + us;
        bsz[sl] = us;
        rsz[sl] = op->size;
        live_req += op->size;
        live_blk += us;
        if (heap_push(&h, end[sl], sl)) rc = -1;
      }
    } else if (ptrs[sl]) {
      gpb_free(s.pool, ptrs[sl]);
      ptrs[sl] = NULL;
      live_req -= rsz[sl];
      live_blk -= bsz[sl];
      end[sl] = 0;
    }
    while (h.n && end[h.slot[0]] != h.end[0]) heap_pop(&h);
    if (req) req[i] = (double)live_req;
    blocks[i] = (double)live_blk;
    foot[i] = h.n ? (double)h.end[0] : 0;
  }
  memset(ptrs, 0, q->nslots * sizeof *ptrs);
  gpb_pool_destroy(s.pool);
  free(end);
  free(bsz);
  free(rsz);
  free(h.end);
  free(h.slot);
  return rc;
}

/* Keeps the largest value of each of `out` buckets so peaks survive. */
static size_t replay_downsample(const double *v, size_t n, double *x,
                                double *y, size_t out) {
  if (n <= out) {
    for (size_t i = 0; i < n; i++) {
      x[i] = (double)i;
      y[i] = v[i];
    }
    return n;
  }
  for (size_t b = 0; b < out; b++) {
    size_t s = b * n / out, e = (b + 1) * n / out;
    double m = v[s];
    for (size_t i = s; i < e; i++)
      if (v[i] > m) m = v[i];
    x[b] = (double)s;
    y[b] = m;
  }
  return out;
}

/* ---------------------------------------------------------------- run */

#define REPLAY_MAXPOL 8

/* A plan contender follows the plan from its first entry at every pass
 * (untimed: setting a plan binds a copy of it). */
static void replay_rewind(const bench_ctx_t *c, int i, bench_alloc_t *a,
                          const gpb_plan_t *plan) {
  if (!c->cont[i].plan || !plan) return;
  int rc = gpb_pool_set_plan((gpb_pool_t *)a->ctx, plan);
  if (rc)
    fprintf(stderr, "gpubuddy-bench: %s: %s: %s\n", c->cont[i].name,
            gpb_err_name(rc), gpb_last_error_detail());
}

/* One trace's run through the suite's three parts. */
typedef struct replay_job {
  bench_ctx_t *c;
  replay_trace_t *t;
  void **ptrs;                  /* one per slot, shared by every replay */
  gpb_policy_t pols[REPLAY_MAXPOL];
  size_t minp[REPLAY_MAXPOL];   /* each policy's smallest pool, 0: none */
  int npol;
  double anchor;
  gpb_plan_t *plan;             /* with a plan contender */
  /* per-op latency, per contender */
  bench_samples_t al[BENCH_MAXCONT], fr[BENCH_MAXCONT];
  bench_alloc_t a[BENCH_MAXCONT];
  int open[BENCH_MAXCONT];
  int rounds;
} replay_job_t;

/* A row of the smallest-pool table in the report. */
static bench_trace_row_t *replay_row(replay_job_t *j, const char *policy,
                                     uint64_t pool, int replays) {
  const bench_seq_t *q = &j->t->q;
  bench_trace_row_t *r = bench_report_trace(j->c->rep);
  snprintf(r->trace, sizeof r->trace, "%s", j->t->name);
  snprintf(r->policy, sizeof r->policy, "%s", policy);
  r->ops = q->n;
  r->peak_live = q->peak_live;
  r->min_pool = pool;
  r->ratio = pool ? (double)pool / (double)q->peak_live : 0;
  r->anchor = j->anchor;
  r->replays = replays;
  return r;
}

/* 1. The smallest pool of each policy. 0 or -1 after an error. */
static int replay_minpools(replay_job_t *j) {
  bench_ctx_t *c = j->c;
  const bench_seq_t *q = &j->t->q;
  size_t mb = c->o->trace_min_block;
  char b1[24], an[24] = "n/a";
  int err = 0;
  if (j->anchor > 0) snprintf(an, sizeof an, "%.2f", j->anchor);
  bench_out(c, "smallest pool (virtual backend, %zu B min block, every size "
            "from the peak up in steps of %s):\n", mb,
            bench_fmt_bytes(gpbt_minpool_step(q->peak_live, mb), b1,
                            sizeof b1));
  bench_out(c, "%-10s %14s %10s %8s %16s\n", "policy", "smallest pool",
            "x peak", "replays", "PyTorch cap x");
  for (int p = 0; j->npol < REPLAY_MAXPOL &&
                  strcmp(gpb_policy_name((gpb_policy_t)p), "?"); p++) {
    gpb_policy_t pol = (gpb_policy_t)p;
    const char *pn = gpb_policy_name(pol);
    bench_progress("trace %s: smallest pool, policy %s", j->t->name, pn);
    uint64_t t0 = bench_now();
    gpbt_minpool_t mp;
    int frc = gpbt_minpool_find(q, mb, pol, 0, NULL, NULL, &mp);
    size_t m = frc ? 0 : (size_t)mp.size;
    double secs = (double)(bench_now() - t0) / 1e9;
    if (frc && frc != GPB_ENOMEM) { /* not "none fits": no row to report */
      fprintf(stderr, "gpubuddy-bench: trace %s: smallest pool, policy %s: "
              "%s: %s\n", j->t->name, pn, gpb_err_name(frc),
              gpb_last_error_detail());
      bench_out(c, "%-10s %14s\n", pn, "error");
      err = -1;
      continue;
    }
    j->pols[j->npol] = pol;
    j->minp[j->npol++] = m;
    bench_trace_row_t *r = replay_row(j, pn, m, (int)mp.probes);
    if (m)
      bench_out(c, "%-10s %14s %9.3fx %8d %16s   (%.1f s)\n", pn,
                bench_fmt_bytes(m, b1, sizeof b1), r->ratio, r->replays, an,
                secs);
    else
      bench_out(c, "%-10s %14s %10s %8d %16s\n", pn, "> 64 TiB", "-",
                r->replays, an);
  }
  return err;
}

/* With a plan contender: the trace laid out offline, and the smallest
 * pool that follows it (a row of its own, after the policies'). */
static int replay_plan(replay_job_t *j) {
  bench_ctx_t *c = j->c;
  const bench_seq_t *q = &j->t->q;
  size_t mb = c->o->trace_min_block;
  for (int i = 0; i < c->ncont && !j->plan; i++) {
    if (!c->cont[i].plan) continue;
    gpbt_minpool_t mp;
    int prc = gpb_plan_make(q->ops, q->n, q->nslots, mb, NULL, NULL, &j->plan);
    if (!prc)
      prc = gpbt_minpool_find_plan(q, mb, GPB_POLICY_BESTFIT, j->plan, 0,
                                   NULL, NULL, &mp);
    if (prc) {
      fprintf(stderr, "gpubuddy-bench: trace %s: the plan: %s: %s\n",
              j->t->name, gpb_err_name(prc), gpb_last_error_detail());
      return -1;
    }
    char b[24];
    bench_trace_row_t *r = replay_row(j, "bestfit-plan", mp.size,
                                      (int)mp.probes);
    bench_out(c, "%-10s %14s %9.3fx %8d %16s   (following the trace's own "
              "plan, %zu entries)\n", "plan", bench_fmt_bytes(mp.size, b,
              sizeof b), r->ratio, r->replays, "", gpb_plan_count(j->plan));
  }
  return 0;
}

/* The fragmentation plot's title and lines: peak live, and up to three
 * policies' smallest pools. hl holds their labels. */
static void replay_frag_axes(const replay_job_t *j, size_t common,
                             bench_plot_t *pl, char *title, size_t tlen,
                             char hl[][48]) {
  char b[24];
  memset(pl, 0, sizeof *pl);
  snprintf(title, tlen, "%s: POOL %s", j->t->name,
           bench_fmt_bytes(common, b, sizeof b));
  for (char *s = title; *s; s++) *s = (char)toupper((unsigned char)*s);
  pl->title = title;
  pl->xlabel = "OPERATION";
  pl->ylabel = "BYTES";
  pl->ybytes = 1;
  pl->hline[0] = (double)j->t->q.peak_live;
  pl->hlabel[0] = "PEAK LIVE";
  for (int i = 0; i < j->npol && i < 3; i++) {
    if (!j->minp[i]) continue;
    snprintf(hl[i], 48, "SMALLEST POOL %s", gpb_policy_name(j->pols[i]));
    for (char *s = hl[i]; *s; s++) *s = (char)toupper((unsigned char)*s);
    pl->hline[i + 1] = (double)j->minp[i];
    pl->hlabel[i + 1] = hl[i];
  }
}

/* 2. Fragmentation over time, at a size every policy fits, as a plot
 * (only with --out). */
static void replay_frag_plot(replay_job_t *j) {
  bench_ctx_t *c = j->c;
  const bench_seq_t *q = &j->t->q;
  size_t mb = c->o->trace_min_block, common = 0, pts = 2000, nser = 0;
  char *path = bench_out_path(c, NULL);
  if (!path) return;
  free(path);
  for (int i = 0; i < j->npol; i++)
    if (j->minp[i] > common) common = j->minp[i];
  if (common == 0) common = replay_round(q->peak_live * 2, mb);
  double *req = malloc(q->n * sizeof *req), *blk = malloc(q->n * sizeof *blk);
  double *ft = malloc(q->n * sizeof *ft);
  double *xs = malloc((size_t)(2 * j->npol + 1) * pts * sizeof *xs);
  double *ys = malloc((size_t)(2 * j->npol + 1) * pts * sizeof *ys);
  bench_series_t ser[2 * REPLAY_MAXPOL + 1];
  char labels[2 * REPLAY_MAXPOL][48];
  int ok = req && blk && ft && xs && ys;
  for (int i = 0; ok && i < j->npol; i++) {
    bench_progress("trace %s: fragmentation, policy %s", j->t->name,
                   gpb_policy_name(j->pols[i]));
    if (replay_frag(q, j->ptrs, common, mb, j->pols[i], i == 0 ? req : NULL,
                    blk, ft)) {
      ok = 0;
      break;
    }
    const double *src[2] = {blk, ft};
    for (int k = 0; k < 2; k++) {
      double *x = xs + (nser * pts), *y = ys + (nser * pts);
      size_t n = replay_downsample(src[k], q->n, x, y, pts);
      snprintf(labels[2 * i + k], 48, "%s %s", k ? "FOOTPRINT" : "IN BLOCKS",
               gpb_policy_name(j->pols[i]));
      ser[nser++] = (bench_series_t){labels[2 * i + k], x, y, n,
                                     bench_colors[(i + 1) % 8], k};
    }
  }
  if (ok) { /* requested last, so it is drawn on top */
    double *x = xs + (nser * pts), *y = ys + (nser * pts);
    size_t n = replay_downsample(req, q->n, x, y, pts);
    ser[nser++] = (bench_series_t){"REQUESTED LIVE", x, y, n, 0x000000, 0};
    char file[160], title[160], hl[REPLAY_MAXPOL][48];
    bench_plot_t pl;
    replay_frag_axes(j, common, &pl, title, sizeof title, hl);
    snprintf(file, sizeof file, "frag-%s.png", j->t->name);
    path = bench_out_path(c, file);
    if (path && bench_plot_write(path, &pl, ser, nser) == 0)
      bench_progress("wrote %s", path);
    free(path);
  }
  free(req);
  free(blk);
  free(ft);
  free(xs);
  free(ys);
}

/* Every sample buffer first, then every pool (one untimed pass each).
 * On a GPU each pool gets at most an equal share of 80% of the memory
 * free before the first is made: shares taken from what each left would
 * shrink down the list and fail the last pools' requests. -1 without
 * memory for the samples. */
static int replay_lat_open(replay_job_t *j) {
  bench_ctx_t *c = j->c;
  const bench_seq_t *q = &j->t->q;
  size_t mb = c->o->trace_min_block, share = 0;
  for (int i = 0; i < c->ncont; i++)
    if (bench_samples_init(&j->al[i], q->n * (size_t)j->rounds) ||
        bench_samples_init(&j->fr[i], q->n * (size_t)j->rounds))
      return -1;
#ifdef GPB_HAVE_CUDA
  if (c->backend == GPB_BACKEND_DEVICE) {
    size_t npools = 0;
    for (int i = 0; i < c->ncont; i++) npools += c->cont[i].kind == BENCH_GPUBUDDY;
    share = bench_cuda_free_mem(c->o->device) / 10 * 8 / (npools ? npools : 1);
  }
#endif
  for (int i = 0; i < c->ncont; i++) {
    size_t pool = replay_round(q->peak_live * 2, mb);
    for (int p = 0; p < j->npol; p++)
      if (j->pols[p] == c->cont[i].policy && j->minp[p] + j->minp[p] / 4 > pool)
        pool = replay_round(j->minp[p] + j->minp[p] / 4, mb);
    if (share > mb && pool > share) pool = replay_round(share - mb, mb);
    if (c->cont[i].plan && !j->plan) continue;
    if (bench_open_contender(c, i, pool, mb, &j->a[i])) continue;
    j->open[i] = 1;
    replay_rewind(c, i, &j->a[i], j->plan);
    bench_seq_run(&j->a[i], q, j->ptrs, NULL, NULL);
  }
  return 0;
}

/* The latency rows of the report, per contender: alloc and free. */
static void replay_lat_rows(replay_job_t *j, const char *group) {
  bench_ctx_t *c = j->c;
  for (int i = 0; i < c->ncont; i++) {
    if (!j->open[i]) continue;
    bench_alloc_close(&j->a[i]);
    for (int k = 0; k < 2; k++) {
      bench_samples_t *sm = k ? &j->fr[i] : &j->al[i];
      bench_lat_row_t *r = bench_report_lat(c->rep);
      snprintf(r->group, sizeof r->group, "%s", group);
      snprintf(r->label, sizeof r->label, "replay");
      snprintf(r->alloc, sizeof r->alloc, "%s", c->cont[i].name);
      snprintf(r->op, sizeof r->op, "%s", k ? "free" : "alloc");
      double wb = bench_samples_worst_best(sm, j->rounds);
      r->s = bench_summarize(sm);
      r->s.worst_best = wb;
    }
  }
}

/* The latency CDF plot (only with --out). */
static void replay_lat_plot(replay_job_t *j) {
  bench_ctx_t *c = j->c;
  char *path = bench_out_path(c, NULL);
  if (!path) return;
  free(path);
  char file[160], title[160];
  snprintf(file, sizeof file, "latency-trace-%s.png", j->t->name);
  snprintf(title, sizeof title, "LATENCY CDF, TRACE %s", j->t->name);
  for (char *s = title; *s; s++) *s = (char)toupper((unsigned char)*s);
  path = bench_out_path(c, file);
  const char *names[BENCH_MAXCONT];
  bench_samples_t *pa[BENCH_MAXCONT], *pf[BENCH_MAXCONT];
  for (int i = 0; i < c->ncont; i++) {
    names[i] = c->cont[i].name;
    pa[i] = &j->al[i];
    pf[i] = &j->fr[i];
  }
  if (path && bench_plot_cdf(path, title, names, pa, pf, c->ncont) == 0)
    bench_progress("wrote %s", path);
  free(path);
}

/* 3. Per-op latency of every contender on the same ops: all open at
 * once, one untimed pass each, then timed passes taken in turns, so that
 * a slow spell of the host falls on every contender alike. */
static int replay_latency(replay_job_t *j) {
  bench_ctx_t *c = j->c;
  char group[128];
  snprintf(group, sizeof group, "trace:%s", j->t->name);
  j->rounds = c->o->trace_rounds > 0 ? c->o->trace_rounds : 1;
  int rc = replay_lat_open(j);
  for (int r = 0; !rc && r < j->rounds; r++) {
    bench_progress("trace %s: latency, round %d of %d", j->t->name, r + 1,
                   j->rounds);
    for (int i = 0; i < c->ncont; i++)
      if (j->open[i]) {
        replay_rewind(c, i, &j->a[i], j->plan);
        bench_seq_run(&j->a[i], &j->t->q, j->ptrs, &j->al[i], &j->fr[i]);
      }
  }
  if (!rc) {
    replay_lat_rows(j, group);
    bench_out(c, "per-op latency (one untimed pass, then %d timed passes per "
              "allocator in turns; gpubuddy pools at 2 x peak live or 1.25 x "
              "the smallest pool, whichever is larger):\n", j->rounds);
    bench_print_lat_group(c, group);
    replay_lat_plot(j);
  } else {
    for (int i = 0; i < c->ncont; i++)
      if (j->open[i]) bench_alloc_close(&j->a[i]);
  }
  for (int i = 0; i < c->ncont; i++) {
    bench_samples_free(&j->al[i]);
    bench_samples_free(&j->fr[i]);
  }
  return rc;
}

static int replay_one(bench_ctx_t *c, replay_trace_t *t) {
  bench_seq_t *q = &t->q;
  char b1[24];
  bench_out(c, "== Trace %s: %zu ops (%llu allocs, %llu frees, %llu frees of "
            "blocks from before the trace, %llu re-used ids), peak live %s ==\n",
            t->name, q->n, (unsigned long long)q->allocs,
            (unsigned long long)q->frees, (unsigned long long)q->unmatched,
            (unsigned long long)q->dup,
            bench_fmt_bytes(q->peak_live, b1, sizeof b1));
  if (q->n == 0 || q->peak_live == 0) {
    bench_out(c, "(nothing to replay)\n\n");
    return 0;
  }
  /* Every pool below is a multiple of the peak; past the search's bound
   * twice the peak could wrap to a pool of 0 bytes. */
  uint64_t need = q->peak_live > q->max_request ? q->peak_live : q->max_request;
  if (need > GPBT_MINPOOL_MAX) {
    fprintf(stderr, "gpubuddy-bench: trace %s: peak demand of %llu bytes is "
            "larger than any pool replayed into (at most 2^46 bytes)\n",
            t->name, (unsigned long long)need);
    return -1;
  }
  replay_job_t *j = calloc(1, sizeof *j); /* zeroed: freeable before init */
  if (!j || !(j->ptrs = calloc(q->nslots, sizeof *j->ptrs))) {
    free(j);
    return -1;
  }
  j->c = c;
  j->t = t;
  j->anchor = replay_anchor(t->name);
  int err = replay_minpools(j);
  if (replay_plan(j)) err = -1;
  replay_frag_plot(j);
  if (replay_latency(j)) err = -1;
  gpb_plan_destroy(j->plan);
  free(j->ptrs);
  free(j);
  return err;
}

int bench_save_synthetic(const char *path, uint64_t seed, int steps) {
  replay_trace_t t;
  if (replay_synthetic(&t, seed, steps)) {
    gpbt_seq_free(&t.q);
    fprintf(stderr, "gpubuddy-bench: out of memory\n");
    return -1;
  }
  /* Written under a temporary name beside path and renamed at the end,
   * so a failed write (a full disk) leaves no partial trace, nor harms one
   * already there. The name keeps a ".gz" ending: it selects compression. */
  char *tmp = NULL;
  if (strcmp(path, "-")) {
    size_t n = strlen(path);
    int gz = n > 3 && !strcmp(path + n - 3, ".gz");
    if (!(tmp = malloc(n + 16))) {
      gpbt_seq_free(&t.q);
      fprintf(stderr, "gpubuddy-bench: out of memory\n");
      return -1;
    }
    snprintf(tmp, n + 16, "%s.part%s", path, gz ? ".gz" : "");
  }
  gpb_trace_writer_t *w;
  int rc = gpb_trace_writer_open(tmp ? tmp : path, &w);
  if (rc) {
    fprintf(stderr, "gpubuddy-bench: %s: %s: %s\n", tmp ? tmp : path,
            gpb_strerror(rc), gpb_last_error_detail());
    gpbt_seq_free(&t.q);
    free(tmp);
    return rc;
  }
  for (size_t i = 0; i < t.q.n && rc == 0; i++) {
    gpb_trace_op_t op;
    memset(&op, 0, sizeof op);
    op.seq = i + 1;
    op.time_ns = (uint64_t)i * 1000;
    op.id = (uint64_t)t.q.ops[i].slot + 1;
    op.size = t.q.ops[i].alloc ? t.q.ops[i].size : 0;
    op.op = t.q.ops[i].alloc ? GPB_OP_ALLOC : GPB_OP_FREE;
    rc = gpb_trace_write(w, &op);
  }
  int rc2 = gpb_trace_writer_close(w);
  if (!rc) rc = rc2;
  if (rc)
    fprintf(stderr, "gpubuddy-bench: writing %s: %s: %s\n", path,
            gpb_strerror(rc), gpb_last_error_detail());
  if (tmp && !rc && rename(tmp, path)) {
    fprintf(stderr, "gpubuddy-bench: renaming %s to %s: %s\n", tmp, path,
            strerror(errno));
    rc = GPB_EIO;
  }
  if (tmp && rc) unlink(tmp);
  free(tmp);
  gpbt_seq_free(&t.q);
  return rc;
}

int bench_run_traces(bench_ctx_t *c) {
  const bench_opts_t *o = c->o;
  int err = 0;
  for (size_t i = 0; i < o->ntraces; i++) {
    replay_trace_t t;
    bench_progress("loading trace %s", o->traces[i]);
    if (replay_load(o->traces[i], &t)) {
      bench_out(c, "== Trace %s: could not be read (see stderr) ==\n\n",
                o->traces[i]);
      err = -1;
      continue;
    }
    if (replay_one(c, &t)) err = -1;
    gpbt_seq_free(&t.q);
  }
  if (o->synthetic) {
    replay_trace_t t;
    if (replay_synthetic(&t, o->seed, o->synth_steps ? o->synth_steps
                                                     : BENCH_SYNTH_STEPS(o->quick))) {
      gpbt_seq_free(&t.q);
      return -1;
    }
    if (replay_one(c, &t)) err = -1;
    gpbt_seq_free(&t.q);
  }
  return err;
}
