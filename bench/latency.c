/* SPDX-License-Identifier: MIT */
/*
 * latency.c: the synthetic suites. Per-call latency at fixed sizes and on
 * a churn mix, aggregate throughput with 1..16 threads, and the metadata
 * size and creation time of large pools.
 *
 * Every call is timed on its own with clock_gettime (CLOCK_MONOTONIC,
 * through the vDSO) around it, after an untimed warm-up that runs the same
 * loop, so one-time costs (the first page faults of a malloc arena, the
 * growth of cudaMallocAsync's pool) are paid before the clock runs. The
 * cost of the two clock reads is measured once and printed, not
 * subtracted: every figure is a time that was observed.
 */
#define _GNU_SOURCE /* pthread_setaffinity_np, sched_getcpu */
#include "bench.h"
#include "pool/pool.h" /* gpb__pool_meta_bytes */

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const size_t latency_sizes[] = {256, 4096, 65536, 1 << 20, 16 << 20,
                                       256 << 20};
#define LATENCY_NSIZES (sizeof latency_sizes / sizeof latency_sizes[0])

int bench_open_contender(const bench_ctx_t *c, int i, size_t pool_size,
                         size_t min_block, bench_alloc_t *out) {
  bench_pool_opts_t po;
  memset(&po, 0, sizeof po);
  po.backend = c->backend;
  po.policy = c->cont[i].policy;
  po.pool_size = pool_size;
  po.min_block = min_block;
  po.device = c->o->device;
  po.arenas = c->cont[i].arenas;
  int rc = bench_alloc_open(c->cont[i].kind, &po, out);
  if (rc == 0) snprintf(out->name, sizeof out->name, "%s", c->cont[i].name);
  return rc;
}

/* ----------------------------------------------------------- sequences */

uint64_t bench_seq_run(bench_alloc_t *a, const bench_seq_t *q, void **ptrs,
                       bench_samples_t *al, bench_samples_t *fr) {
  uint64_t fails = 0;
  for (size_t i = 0; i < q->n; i++) {
    const bench_op_t *op = &q->ops[i];
    if (op->alloc) {
      void *p = NULL;
      uint64_t t0 = bench_now();
      int rc = a->alloc(a->ctx, (size_t)op->size, &p);
      uint64_t t1 = bench_now();
      if (rc || !p) {
        fails++;
        ptrs[op->slot] = NULL;
        continue;
      }
      ptrs[op->slot] = p;
      if (al) bench_samples_add(al, t1 - t0);
    } else {
      void *p = ptrs[op->slot];
      if (!p) continue;
      uint64_t t0 = bench_now();
      int rc = a->free(a->ctx, p);
      uint64_t t1 = bench_now();
      ptrs[op->slot] = NULL;
      if (rc) {
        if (fr) fr->fails++;
        continue;
      }
      if (fr) bench_samples_add(fr, t1 - t0);
    }
  }
  for (size_t s = 0; s < q->nslots; s++)
    if (ptrs[s]) {
      a->free(a->ctx, ptrs[s]);
      ptrs[s] = NULL;
    }
  if (al) al->fails += fails;
  if (a->sync) a->sync(a->ctx);
  return fails;
}


/* -------------------------------------------------------------- tables */

static void latency_add_row(bench_ctx_t *c, const char *group,
                            const char *label, const char *alloc,
                            const char *op, bench_samples_t *s) {
  bench_lat_row_t *r = bench_report_lat(c->rep);
  snprintf(r->group, sizeof r->group, "%s", group);
  snprintf(r->label, sizeof r->label, "%s", label);
  snprintf(r->alloc, sizeof r->alloc, "%s", alloc);
  snprintf(r->op, sizeof r->op, "%s", op);
  r->s = bench_summarize(s);
}

void bench_print_lat_group(bench_ctx_t *c, const char *group) {
  const bench_report_t *r = c->rep;
  char b[5][24];
  int wb = 0; /* a "worst op" column, where the rows have one */
  for (size_t i = 0; i < r->nlat; i++)
    wb |= !strcmp(r->lat[i].group, group) && r->lat[i].s.worst_best > 0;
  bench_out(c, "%-12s %-23s %-5s %10s %10s %10s %10s %6s%s\n", "case",
            "allocator", "op", "median", "p99", "p99.9", "max", "fails",
            wb ? "   worst op" : "");
  for (size_t i = 0; i < r->nlat; i++) {
    const bench_lat_row_t *x = &r->lat[i];
    if (strcmp(x->group, group)) continue;
    bench_out(c, "%-12s %-23s %-5s %10s %10s %10s %10s %6llu", x->label,
              x->alloc, x->op, bench_fmt_ns(x->s.median, b[0], 24),
              bench_fmt_ns(x->s.p99, b[1], 24),
              bench_fmt_ns(x->s.p999, b[2], 24),
              bench_fmt_ns(x->s.max, b[3], 24),
              (unsigned long long)x->s.fails);
    if (wb)
      bench_out(c, " %10s", x->s.worst_best > 0
                                ? bench_fmt_ns(x->s.worst_best, b[4], 24)
                                : "-");
    bench_out(c, "\n");
  }
  if (wb)
    bench_out(c, "worst op: the slowest op's fastest pass, what the op itself "
              "costs (a pause of the host counts only if it hits that op in "
              "every pass)\n");
  /* Ratios: every other allocator against gpubuddy, same case and op. */
  int header = 0;
  for (size_t i = 0; i < r->nlat; i++) {
    const bench_lat_row_t *x = &r->lat[i];
    if (strcmp(x->group, group) || !strcmp(x->alloc, "gpubuddy")) continue;
    const bench_lat_row_t *g =
        bench_report_find(r, group, x->label, "gpubuddy", x->op);
    if (!g || g->s.median <= 0 || g->s.p999 <= 0 || g->s.max <= 0) continue;
    if (!header) {
      bench_out(c, "ratio X / gpubuddy (higher: gpubuddy faster)\n");
      bench_out(c, "%-12s %-23s %-5s %10s %10s %10s %10s\n", "case", "X", "op",
                "median", "p99", "p99.9", "max");
      header = 1;
    }
    bench_out(c, "%-12s %-23s %-5s %10s %10s %10s %10s\n", x->label,
              x->alloc, x->op,
              bench_fmt_ratio(x->s.median / g->s.median, b[0], 24),
              bench_fmt_ratio(x->s.p99 / (g->s.p99 > 0 ? g->s.p99 : 1), b[1], 24),
              bench_fmt_ratio(x->s.p999 / g->s.p999, b[2], 24),
              bench_fmt_ratio(x->s.max / g->s.max, b[3], 24));
  }
  bench_out(c, "\n");
}

/* Plots one case: alloc and free CDFs of every contender. */
static void latency_plot(bench_ctx_t *c, const char *file, const char *title,
                         bench_samples_t *al, bench_samples_t *fr) {
  char *path = bench_out_path(c, file);
  if (!path) {
    free(path);
    return;
  }
  const char *names[BENCH_MAXCONT];
  bench_samples_t *pa[BENCH_MAXCONT], *pf[BENCH_MAXCONT];
  for (int i = 0; i < c->ncont; i++) {
    names[i] = c->cont[i].name;
    pa[i] = &al[i];
    pf[i] = &fr[i];
  }
  if (bench_plot_cdf(path, title, names, pa, pf, c->ncont) == 0)
    bench_progress("wrote %s", path);
  free(path);
}

/* ---------------------------------------------------------- fixed sizes */

/* Timed passes per size, the contenders in turns: a noisy spell of the
 * host then lands on every contender's samples, not on one's whole pass
 * (one-pass-each runs gave a contender 1.5x another's median in one run
 * and 1.1x in the next, on the same host). Each turn starts with a few
 * untimed pairs, so that the caches the other contenders used are not
 * timed into the tails. */
#define FIXED_TURNS 10
#define FIXED_REWARM 16

/* n alloc/free pairs of `size`; timed into al and fr when they are given. */
static void fixed_pairs(bench_alloc_t *a, size_t size, size_t n,
                        bench_samples_t *al, bench_samples_t *fr) {
  for (size_t k = 0; k < n; k++) {
    void *p = NULL;
    uint64_t t0 = bench_now();
    int rc = a->alloc(a->ctx, size, &p);
    uint64_t t1 = bench_now();
    if (rc || !p) {
      if (al) al->fails++;
      continue;
    }
    rc = a->free(a->ctx, p);
    uint64_t t2 = bench_now();
    if (!al) continue;
    bench_samples_add(al, t1 - t0);
    if (rc) fr->fails++;
    else bench_samples_add(fr, t2 - t1);
  }
}

int bench_run_fixed(bench_ctx_t *c) {
  const bench_opts_t *o = c->o;
  size_t pairs = o->pairs, warm = pairs / 10 < 10 ? 10 : pairs / 10;
  bench_out(c, "== Latency per call, fixed sizes (%zu alloc/free pairs in %d "
            "turns per allocator, %zu warm-up pairs) ==\n", pairs, FIXED_TURNS,
            warm);
  int err = 0;
  for (size_t si = 0; si < LATENCY_NSIZES; si++) {
    size_t size = latency_sizes[si];
    char label[24];
    bench_fmt_bytes(size, label, sizeof label);
    bench_progress("fixed size %s", label);
    /* zeroed: freeable before init */
    bench_samples_t al[BENCH_MAXCONT] = {{0}}, fr[BENCH_MAXCONT] = {{0}};
    bench_alloc_t a[BENCH_MAXCONT];
    int open[BENCH_MAXCONT] = {0};
    for (int i = 0; i < c->ncont; i++) { /* every buffer before any pool */
      if (bench_samples_init(&al[i], pairs) ||
          bench_samples_init(&fr[i], pairs)) {
        for (int j = 0; j <= i; j++) {
          bench_samples_free(&al[j]);
          bench_samples_free(&fr[j]);
        }
        return -1;
      }
    }
    for (int i = 0; i < c->ncont; i++) {
      if (c->cont[i].plan) continue; /* a plan is a trace's */
      if (bench_open_contender(c, i, (size_t)512 << 20, 256, &a[i])) {
        err = -1;
        continue;
      }
      open[i] = 1;
      fixed_pairs(&a[i], size, warm, NULL, NULL);
    }
    for (int t = 0; t < FIXED_TURNS; t++) {
      size_t n = pairs / FIXED_TURNS + (t < (int)(pairs % FIXED_TURNS));
      for (int i = 0; i < c->ncont; i++)
        if (open[i]) {
          fixed_pairs(&a[i], size, FIXED_REWARM, NULL, NULL);
          fixed_pairs(&a[i], size, n, &al[i], &fr[i]);
        }
    }
    for (int i = 0; i < c->ncont; i++) {
      if (!open[i]) continue;
      bench_alloc_close(&a[i]);
      latency_add_row(c, "fixed", label, c->cont[i].name, "alloc", &al[i]);
      latency_add_row(c, "fixed", label, c->cont[i].name, "free", &fr[i]);
    }
    char file[64], title[96];
    snprintf(file, sizeof file, "latency-fixed-%zu.png", size);
    snprintf(title, sizeof title, "LATENCY CDF, %s ALLOC (SOLID) AND FREE (DASHED)",
             label);
    latency_plot(c, file, title, al, fr);
    for (int i = 0; i < c->ncont; i++) {
      bench_samples_free(&al[i]);
      bench_samples_free(&fr[i]);
    }
  }
  bench_print_lat_group(c, "fixed");
  return err;
}

/* ---------------------------------------------------------------- churn */

/* Up to `cap` live blocks, log-uniform sizes 256 B to 128 MiB. Below the
 * cap an op allocates with probability 0.6, so the live count climbs to
 * the cap within the first few thousand ops and then hovers near it. */
static int churn_make(bench_seq_t *q, size_t nops, size_t cap, uint64_t seed) {
  memset(q, 0, sizeof *q);
  q->ops = calloc(nops ? nops : 1, sizeof *q->ops);
  uint32_t *live = calloc(cap ? cap : 1, sizeof *live);
  if (!q->ops || !live) {
    free(live);
    gpbt_seq_free(q);
    return -1;
  }
  uint64_t rng = seed;
  size_t nlive = 0;
  for (size_t i = 0; i < nops; i++) {
    bench_op_t *op = &q->ops[i];
    if (nlive == 0 || (nlive < cap && bench_rand01(&rng) < 0.6)) {
      op->alloc = 1;
      op->size = bench_rand_logsize(&rng, 256, (size_t)128 << 20);
      op->slot = (uint32_t)q->nslots++;
      live[nlive++] = op->slot;
    } else {
      size_t k = (size_t)(bench_rand(&rng) % nlive);
      op->alloc = 0;
      op->slot = live[k];
      live[k] = live[--nlive];
    }
  }
  q->n = nops;
  free(live);
  gpbt_seq_peak(q);
  return 0;
}

/* A pool for sequences: room for buddy rounding and fragmentation, but no
 * more than the device can give. */
static size_t latency_seq_pool(const bench_ctx_t *c, uint64_t peak) {
  size_t want = (size_t)(peak * 3 > ((uint64_t)1 << 30) ? peak * 3 : 1ull << 30);
#ifdef GPB_HAVE_CUDA
  if (c->backend == GPB_BACKEND_DEVICE) {
    size_t fr = bench_cuda_free_mem(c->o->device);
    size_t cap = fr / 10 * 7;
    if (fr && want > cap) want = cap;
  }
#else
  (void)c;
#endif
  return want;
}

int bench_run_churn(bench_ctx_t *c) {
  const bench_opts_t *o = c->o;
  bench_seq_t q;
  if (churn_make(&q, o->churn_ops, o->churn_live, o->seed)) return -1;
  void **ptrs = calloc(q.nslots ? q.nslots : 1, sizeof *ptrs);
  if (!ptrs) {
    gpbt_seq_free(&q);
    return -1;
  }
  char pb[24], lb[24];
  size_t pool = latency_seq_pool(c, q.peak_live);
  bench_out(c, "== Latency per call, churn mix (%zu ops, up to %zu live, "
            "sizes 256 B to 128 MiB log-uniform, seed %llu, peak live %s; "
            "gpubuddy pool %s; one untimed pass first) ==\n",
            q.n, o->churn_live, (unsigned long long)o->seed,
            bench_fmt_bytes(q.peak_live, lb, sizeof lb),
            bench_fmt_bytes(pool, pb, sizeof pb));
  bench_samples_t al[BENCH_MAXCONT], fr[BENCH_MAXCONT];
  int err = 0;
  for (int i = 0; i < c->ncont; i++) {
    if (bench_samples_init(&al[i], q.n) || bench_samples_init(&fr[i], q.n))
      return -1;
    if (c->cont[i].plan) continue; /* a plan is a trace's */
    bench_progress("churn: %s", c->cont[i].name);
    bench_alloc_t a;
    if (bench_open_contender(c, i, pool, 256, &a)) {
      err = -1;
      continue;
    }
    bench_seq_run(&a, &q, ptrs, NULL, NULL);
    bench_seq_run(&a, &q, ptrs, &al[i], &fr[i]);
    bench_alloc_close(&a);
    latency_add_row(c, "churn", "mix", c->cont[i].name, "alloc", &al[i]);
    latency_add_row(c, "churn", "mix", c->cont[i].name, "free", &fr[i]);
  }
  latency_plot(c, "latency-churn.png",
               "LATENCY CDF, CHURN MIX, ALLOC (SOLID) AND FREE (DASHED)", al, fr);
  for (int i = 0; i < c->ncont; i++) {
    bench_samples_free(&al[i]);
    bench_samples_free(&fr[i]);
  }
  free(ptrs);
  gpbt_seq_free(&q);
  bench_print_lat_group(c, "churn");
  return err;
}

static int dbl_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* -------------------------------------------------------------- threads */

typedef struct thr_arg {
  bench_alloc_t *a;
  pthread_barrier_t *bar;
  atomic_int *stop;
  uint64_t seed;
  uint64_t ops, fails;
} thr_arg_t;

#define THR_NSIZES 256

#define THR_WINDOW 16

/* Alloc/free pairs of mixed small sizes (256 B to 64 KiB, log-uniform)
 * until told to stop; the stop flag is read once per 64 pairs. Each thread
 * keeps its last THR_WINDOW blocks live (each pair allocates one and frees
 * the oldest), so one thread alone does not turn every pair into a split
 * from the root and a merge back up: the ratio to one thread then measures
 * scaling, not the depth of the split. */
static void *thr_main(void *arg) {
  thr_arg_t *t = arg;
  size_t sizes[THR_NSIZES];
  void *win[THR_WINDOW] = {0};
  uint64_t rng = t->seed;
  for (int i = 0; i < THR_NSIZES; i++)
    sizes[i] = bench_rand_logsize(&rng, 256, 65536);
  pthread_barrier_wait(t->bar);
  uint64_t ops = 0, fails = 0;
  unsigned k = 0;
  while (!atomic_load_explicit(t->stop, memory_order_relaxed)) {
    for (int j = 0; j < 64; j++, k++) {
      void *p = NULL;
      if (t->a->alloc(t->a->ctx, sizes[k % THR_NSIZES], &p) || !p) {
        fails++;
        p = NULL;
      } else {
        ops++;
      }
      void **slot = &win[k % THR_WINDOW];
      if (*slot) {
        t->a->free(t->a->ctx, *slot);
        ops++;
      }
      *slot = p;
    }
  }
  for (int i = 0; i < THR_WINDOW; i++)
    if (win[i]) t->a->free(t->a->ctx, win[i]);
  t->ops = ops;
  t->fails = fails;
  return NULL;
}

/* One run: n threads for `secs` seconds; aggregate ops/s. cpu >= 0 pins
 * the threads to that CPU (one thread: no migration between runs). */
static double thr_run(bench_alloc_t *a, int n, double secs, uint64_t seed,
                      int cpu, uint64_t *fails) {
  pthread_t th[64];
  thr_arg_t args[64];
  pthread_barrier_t bar;
  atomic_int stop;
  atomic_init(&stop, 0);
  pthread_barrier_init(&bar, NULL, (unsigned)n + 1);
  int started = 0;
  for (int i = 0; i < n; i++) {
    args[i] = (thr_arg_t){a, &bar, &stop, seed + (uint64_t)i * 7919, 0, 0};
    if (pthread_create(&th[i], NULL, thr_main, &args[i])) break;
    started++;
    if (cpu >= 0) { /* before the barrier lets it run; a hint if refused */
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      (void)pthread_setaffinity_np(th[i], sizeof set, &set);
    }
  }
  if (started < n) {
    /* Release the ones waiting on a barrier that can no longer fill. */
    fprintf(stderr, "gpubuddy-bench: could not start %d threads\n", n);
    exit(2);
  }
  pthread_barrier_wait(&bar);
  uint64_t t0 = bench_now();
  struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
  nanosleep(&ts, NULL);
  atomic_store(&stop, 1);
  uint64_t ops = 0;
  *fails = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(th[i], NULL);
    ops += args[i].ops;
    *fails += args[i].fails;
  }
  uint64_t t1 = bench_now();
  pthread_barrier_destroy(&bar);
  if (a->sync) a->sync(a->ctx);
  return (double)ops / ((double)(t1 - t0) / 1e9);
}

#define THR_PAIRED_ROUNDS 15

/* One thread, the same policy without arenas, with arenas (they start
 * when two threads first meet on the pool's lock, so never here) and
 * with arenas from the first call (GPB_CFG_ARENAS_EAGER: what the arena
 * layer itself costs). One thread's throughput moves by a third between
 * runs on a busy host, so the three take turns, THR_PAIRED_ROUNDS
 * rounds, on one CPU, and each ratio is the median of one round's
 * ratios. */
static int thr_paired(bench_ctx_t *c, gpb_policy_t policy) {
  const bench_opts_t *o = c->o;
  static const char *const how[3] = {"", "", " (at once)"};
  bench_alloc_t a[3];
  double ops[3][THR_PAIRED_ROUNDS], q[3][THR_PAIRED_ROUNDS];
  int n = 0;
  for (; n < 3; n++) {
    bench_pool_opts_t po;
    memset(&po, 0, sizeof po);
    po.backend = c->backend;
    po.policy = policy;
    po.pool_size = (size_t)1 << 30;
    po.min_block = 256;
    po.device = o->device;
    po.arenas = n ? (uint32_t)(o->max_threads < 2 ? 2 : o->max_threads) : 1;
    po.flags = n == 2 ? GPB_CFG_ARENAS_EAGER : 0;
    if (bench_alloc_open(BENCH_GPUBUDDY, &po, &a[n])) break;
  }
  int err = n < 3 ? -1 : 0, cpu = sched_getcpu();
  for (int r = 0; !err && r < THR_PAIRED_ROUNDS; r++) {
    bench_progress("threads: %s, one thread, paired round %d", a[1].name, r + 1);
    for (int k = 0; k < 3; k++) {
      int i = (k + r) % 3; /* each goes first in turn */
      uint64_t fails;
      thr_run(&a[i], 1, o->thr_seconds / 8, o->seed, cpu, &fails);
      ops[i][r] = thr_run(&a[i], 1, o->thr_seconds / 2, o->seed, cpu, &fails);
    }
    for (int i = 1; i < 3; i++) q[i][r] = ops[i][r] / ops[0][r];
  }
  for (int i = 1; !err && i < 3; i++) {
    qsort(ops[i], THR_PAIRED_ROUNDS, sizeof ops[i][0], dbl_cmp);
    qsort(q[i], THR_PAIRED_ROUNDS, sizeof q[i][0], dbl_cmp);
    bench_thr_row_t *row = bench_report_thr(c->rep);
    snprintf(row->alloc, sizeof row->alloc, "%s%s", a[i].name, how[i]);
    snprintf(row->versus, sizeof row->versus, "%s", a[0].name);
    row->threads = 1;
    row->ops_per_s = ops[i][THR_PAIRED_ROUNDS / 2];
    row->ratio = q[i][THR_PAIRED_ROUNDS / 2];
    bench_out(c, "%-34s %10.4g  %.3fx %s (ratios %.3f to %.3f)\n", row->alloc,
              row->ops_per_s, row->ratio, a[0].name, q[i][0],
              q[i][THR_PAIRED_ROUNDS - 1]);
  }
  while (n-- > 0) bench_alloc_close(&a[n]);
  return err;
}

#define THR_ROUNDS 3
#define THR_MAXCOUNTS 7 /* 1, 2, 4 ... 64 threads */

int bench_run_threads(bench_ctx_t *c) {
  const bench_opts_t *o = c->o;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  bench_out(c, "== Throughput: alloc/free pairs of 256 B to 64 KiB on one "
            "shared allocator, %d live per thread, %.2f s per run, %d rounds "
            "of every count in turns, %ld cores online ==\n", THR_WINDOW,
            o->thr_seconds, THR_ROUNDS, cores);
  bench_out(c, "%-23s %8s %14s %10s %8s  %s\n", "allocator", "threads",
            "ops/s", "x 1 thread", "fails", "rounds' ratios");
  int err = 0;
  for (int i = 0; i < c->ncont; i++) {
    if (c->cont[i].kind == BENCH_EMPTY) continue; /* no work to share */
    if (c->cont[i].plan) continue;                /* a plan is a trace's */
    bench_alloc_t a;
    if (bench_open_contender(c, i, (size_t)1 << 30, 256, &a)) {
      err = -1;
      continue;
    }
    /* A host's busy spell moves one run by a third or more (the ratio at
     * 16 threads went from 7.8x to 13.7x on one machine): each round runs
     * every count once, and each count reports the median of its rounds'
     * ratios to the same round's one thread. */
    double ops[THR_MAXCOUNTS][THR_ROUNDS], q[THR_MAXCOUNTS][THR_ROUNDS];
    uint64_t fails[THR_MAXCOUNTS] = {0};
    int nc = 0;
    for (int n = 1; n <= o->max_threads && nc < THR_MAXCOUNTS; n *= 2) nc++;
    for (int r = 0; r < THR_ROUNDS; r++)
      for (int k = 0; k < nc; k++) {
        bench_progress("threads: %s x %d, round %d of %d", c->cont[i].name,
                       1 << k, r + 1, THR_ROUNDS);
        uint64_t f;
        thr_run(&a, 1 << k, o->thr_seconds / 4, o->seed, -1, &f); /* warm-up */
        ops[k][r] = thr_run(&a, 1 << k, o->thr_seconds, o->seed, -1, &f);
        fails[k] += f;
        q[k][r] = ops[0][r] > 0 ? ops[k][r] / ops[0][r] : 0;
      }
    bench_alloc_close(&a);
    for (int k = 0; k < nc; k++) {
      qsort(ops[k], THR_ROUNDS, sizeof ops[k][0], dbl_cmp);
      qsort(q[k], THR_ROUNDS, sizeof q[k][0], dbl_cmp);
      bench_thr_row_t *row = bench_report_thr(c->rep);
      snprintf(row->alloc, sizeof row->alloc, "%s", c->cont[i].name);
      row->threads = 1 << k;
      row->ops_per_s = ops[k][THR_ROUNDS / 2];
      row->ratio = q[k][THR_ROUNDS / 2];
      row->fails = fails[k];
      char range[32] = "-"; /* one thread is every round's 1.00 */
      if (k) snprintf(range, sizeof range, "%.2f to %.2f", q[k][0],
                      q[k][THR_ROUNDS - 1]);
      bench_out(c, "%-23s %8d %14.4g %9.2fx %8llu  %s\n", row->alloc,
                row->threads, row->ops_per_s, row->ratio,
                (unsigned long long)row->fails, range);
    }
  }
  bench_out(c, "\nOne thread, %d rounds alternating with the same policy "
            "without arenas: median ops/s, median ratio\n", THR_PAIRED_ROUNDS);
  if (c->backend != GPB_BACKEND_VIRTUAL) {
    err |= thr_paired(c, GPB_POLICY_BUDDY);
    err |= thr_paired(c, GPB_POLICY_BESTFIT);
  }
  bench_out(c, "\n");
  return err;
}

/* ------------------------------------------------------------- metadata */

int bench_run_meta(bench_ctx_t *c) {
  static const uint64_t sizes[] = {1ull << 30, 16ull << 30, 80ull << 30};
  int reps = c->o->meta_reps < 1 ? 1 : c->o->meta_reps;
  if (reps > 64) reps = 64;
  bench_out(c, "== Metadata and pool creation (virtual backend, 256 B min "
            "block, median of %d creates) ==\n", reps);
  bench_out(c, "%-10s %14s %10s %12s %12s\n", "pool", "metadata", "% of pool",
            "create", "destroy");
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    double ct[64], dt[64];
    size_t meta = 0;
    bench_progress("metadata: pool of %llu GiB", (unsigned long long)(sizes[si] >> 30));
    for (int r = 0; r < reps; r++) {
      gpb_config_t cfg;
      gpb_config_init(&cfg);
      cfg.backend = GPB_BACKEND_VIRTUAL;
      cfg.pool_size = (size_t)sizes[si];
      cfg.min_block = 256;
      cfg.flags = GPB_CFG_NO_ENV;
      gpb_pool_t *pool;
      uint64_t t0 = bench_now();
      int rc = gpb_pool_create(&cfg, &pool);
      uint64_t t1 = bench_now();
      if (rc) {
        fprintf(stderr, "gpubuddy-bench: virtual pool of %llu bytes: %s: %s\n",
                (unsigned long long)sizes[si], gpb_strerror(rc),
                gpb_last_error_detail());
        return -1;
      }
      meta = gpb__pool_meta_bytes(pool);
      uint64_t t2 = bench_now();
      gpb_pool_destroy(pool);
      uint64_t t3 = bench_now();
      ct[r] = (double)(t1 - t0) / 1e6;
      dt[r] = (double)(t3 - t2) / 1e6;
    }
    qsort(ct, (size_t)reps, sizeof ct[0], dbl_cmp);
    qsort(dt, (size_t)reps, sizeof dt[0], dbl_cmp);
    bench_meta_row_t *m = &c->rep->meta[c->rep->nmeta++];
    m->pool_size = sizes[si];
    m->min_block = 256;
    m->meta_bytes = meta;
    m->pct = 100.0 * (double)meta / (double)sizes[si];
    m->create_ms = ct[reps / 2];
    m->destroy_ms = dt[reps / 2];
    char pb[24], mb[24];
    bench_out(c, "%-10s %14s %9.3f%% %9.3f ms %9.3f ms\n",
              bench_fmt_bytes(sizes[si], pb, sizeof pb),
              bench_fmt_bytes(meta, mb, sizeof mb), m->pct,
              m->create_ms, m->destroy_ms);
  }
  bench_out(c, "\n");
  return 0;
}
