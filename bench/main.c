/* SPDX-License-Identifier: MIT */
/*
 * main.c: gpubuddy-bench, the side-by-side benchmark of gpubuddy against
 * the allocators users would otherwise pick.
 *
 * --host compares gpubuddy's host backend with glibc malloc; --gpu
 * compares its device backend with cudaMalloc and cudaMallocAsync in the
 * same run. Suites: fixed-size latency, churn latency, threads, trace
 * replays (latency and smallest pool per policy), metadata. Results go to
 * stdout, and with --out DIR also to DIR/results.txt, DIR/results.json,
 * DIR/summary.md (markdown tables for docs/PERFORMANCE.md) and PNG plots.
 * Each target of issue 6 is printed with pass or miss next to it; nothing
 * here fails a run for a missed target (CI runs --quick for the harness).
 */
#include "bench.h"
#include "minpool.h"
#include "opts.h"
#include "replay.h"

#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#ifndef BENCH_SAMPLES_DIR
#define BENCH_SAMPLES_DIR "samples/traces"
#endif

static const char *out_dir_g;

/* Freed at exit, so every early return of main leaves nothing behind. */
static const char **traces_g;
static glob_t glob_g;
static int have_glob_g;

static void main_cleanup(void) {
  free(traces_g);
  if (have_glob_g) globfree(&glob_g);
}

/* --------------------------------------------------------------- output */

void bench_out(bench_ctx_t *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stdout, fmt, ap);
  va_end(ap);
  if (c->txt) {
    va_start(ap, fmt);
    vfprintf(c->txt, fmt, ap);
    va_end(ap);
  }
  fflush(stdout);
}

void bench_progress(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "[bench] ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

char *bench_out_path(const bench_ctx_t *c, const char *name) {
  (void)c;
  if (!out_dir_g) return NULL;
  size_t n = strlen(out_dir_g) + (name ? strlen(name) : 0) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", out_dir_g, name ? name : "");
  return p;
}

static void usage(FILE *f) {
  fprintf(f,
"Usage: gpubuddy-bench [--host | --gpu] [options]\n"
"\n"
"Measures gpubuddy side by side with the allocators it replaces, and with\n"
"empty-call, which returns at once: the timer's floor, whose tail is the\n"
"host's own (latency suites only):\n"
"  --host        host backend vs glibc malloc/free (default)\n"
"  --gpu         device backend vs cudaMalloc and cudaMallocAsync (pool\n"
"                with release threshold UINT64_MAX); needs a CUDA build\n"
"Suites: per-call latency at 256 B..256 MiB and on a churn mix, threads\n"
"(1..16), trace replays (latency, smallest pool per policy) and metadata\n"
"size / creation time of 1, 16 and 80 GiB pools. gpubuddy-bestfit-plan,\n"
"best fit following a plan made from the trace (gpubuddy-replay\n"
"--plan-out), runs in trace replays only.\n"
"\n"
"options:\n"
"  --quick             small counts (checks the harness; for CI)\n"
"  --out DIR           write results.txt, results.json, summary.md, *.png\n"
"  --json FILE         write the results as JSON\n"
"  --trace FILE        replay this trace (repeatable); default: every\n"
"                      samples/traces/*.gz found, else a synthetic trace\n"
"  --synthetic         also replay a generated trace\n"
"  --save-synthetic FILE  write that generated trace to FILE (native format,\n"
"                      .gz compresses) and exit\n"
"  --synthetic-steps N steps of the generated trace (default 60, quick 20)\n"
"  --only LIST         run only these suites: fixed,churn,threads,traces,meta\n"
"  --skip LIST         skip these suites\n"
"  --pairs N           alloc/free pairs per size (default 2000)\n"
"  --churn-ops N       churn operations (default 8000)\n"
"  --churn-live N      most live blocks in the churn mix (default 1024)\n"
"  --threads N         largest thread count (default 16)\n"
"  --thread-seconds S  seconds per thread-count run (default 0.5); each\n"
"                      count runs in 3 rounds, the counts in turns\n"
"  --min-block SIZE    min block for trace replays (default 512)\n"
"  --meta-reps N       creates per pool size (default 7)\n"
"  --trace-rounds N    timed passes over each trace per allocator, taken in\n"
"                      turns (default 20, quick 2); a replay row's \"worst\n"
"                      op\" is the slowest op's fastest pass: its own cost,\n"
"                      with the host's pauses left out\n"
"  --contenders LIST   only these allocators, by the names the results use\n"
"                      (gpubuddy,gpubuddy-bestfit,...): fewer pools at once\n"
"                      leave each a larger share of the GPU\n"
"  --seed N            seed of the churn mix (default 42)\n"
"  --device N          CUDA device (default 0)\n"
"  -h, --help          this text\n"
"  --version           the version\n"
"\n"
"Progress goes to stderr, results to stdout. Exit status: 0, 1 when a\n"
"suite could not run, 2 on bad usage. Targets are reported, never\n"
"enforced.\n");
}

/* Sets skip flags from a comma list; `only` inverts the meaning. A list
 * that names no suite is refused: --only "" would run nothing and pass.
 * 0, or -1 (the caller says why). */
static int parse_suites(bench_opts_t *o, const char *list, int only) {
  int *flag[5] = {&o->skip_fixed, &o->skip_churn, &o->skip_threads,
                  &o->skip_traces, &o->skip_meta};
  static const char *const names[5] = {"fixed", "churn", "threads", "traces",
                                       "meta"};
  if (only)
    for (int i = 0; i < 5; i++) *flag[i] = 1;
  char *dup = strdup(list), *save = NULL;
  if (!dup) return -1;
  int n = 0;
  for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int i;
    n++;
    for (i = 0; i < 5 && strcmp(t, names[i]); i++) {}
    if (i == 5) {
      free(dup);
      return -1;
    }
    *flag[i] = !only;
  }
  free(dup);
  return n ? 0 : -1;
}

/* Keeps the contenders LIST names (comma-separated), in their order. */
static int keep_contenders(bench_ctx_t *c, const char *list) {
  int keep[BENCH_MAXCONT] = {0}, n = 0;
  char *dup = strdup(list), *save = NULL;
  if (!dup) return -1;
  for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int i;
    for (i = 0; i < c->ncont && strcmp(t, c->cont[i].name); i++) {}
    if (i == c->ncont) {
      fprintf(stderr, "gpubuddy-bench: unknown contender '%s' (", t);
      for (i = 0; i < c->ncont; i++)
        fprintf(stderr, "%s%s", i ? ", " : "", c->cont[i].name);
      fprintf(stderr, ")\n");
      free(dup);
      return -1;
    }
    keep[i] = 1;
  }
  free(dup);
  for (int i = 0; i < c->ncont; i++)
    if (keep[i]) c->cont[n++] = c->cont[i];
  if (n == 0) {
    fprintf(stderr, "gpubuddy-bench: --contenders names none\n");
    return -1;
  }
  c->ncont = n;
  return 0;
}

/* ------------------------------------------------------------- targets */

static void tgt(bench_report_t *r, int pass, const char *target,
                const char *measured, const char *what, ...)
    __attribute__((format(printf, 5, 6)));

static void tgt(bench_report_t *r, int pass, const char *target,
                const char *measured, const char *what, ...) {
  if (r->ntgt >= sizeof r->tgt / sizeof r->tgt[0]) return;
  bench_target_row_t *t = &r->tgt[r->ntgt++];
  va_list ap;
  va_start(ap, what);
  vsnprintf(t->what, sizeof t->what, what, ap);
  va_end(ap);
  snprintf(t->measured, sizeof t->measured, "%s", measured);
  snprintf(t->target, sizeof t->target, "%s", target);
  t->pass = pass;
}

/* Worst value over the fixed sizes of one field. */
typedef double (*field_fn)(const bench_summary_t *s);
static double f_median(const bench_summary_t *s) { return s->median; }
static double f_p999(const bench_summary_t *s) { return s->p999; }
static double f_max(const bench_summary_t *s) { return s->max; }

static int worst_fixed(const bench_report_t *r, const char *alloc,
                       const char *op, field_fn f, double *out, char *at,
                       size_t atn) {
  int found = 0;
  *out = 0;
  for (size_t i = 0; i < r->nlat; i++) {
    const bench_lat_row_t *x = &r->lat[i];
    if (strcmp(x->group, "fixed") || strcmp(x->alloc, alloc) ||
        strcmp(x->op, op) || x->s.n == 0)
      continue;
    if (!found || f(&x->s) > *out) {
      *out = f(&x->s);
      snprintf(at, atn, "%s", x->label);
    }
    found = 1;
  }
  return found;
}

/* Smallest ratio other/gpubuddy of medians over the fixed sizes. */
static int min_ratio_fixed(const bench_report_t *r, const char *g,
                           const char *other, const char *op, double *out,
                           char *at, size_t atn) {
  int found = 0;
  for (size_t i = 0; i < r->nlat; i++) {
    const bench_lat_row_t *x = &r->lat[i];
    if (strcmp(x->group, "fixed") || strcmp(x->alloc, other) ||
        strcmp(x->op, op) || x->s.n == 0)
      continue;
    const bench_lat_row_t *y = bench_report_find(r, "fixed", x->label, g, op);
    if (!y || y->s.median <= 0) continue;
    double q = x->s.median / y->s.median;
    if (!found || q < *out) {
      *out = q;
      snprintf(at, atn, "%s", x->label);
    }
    found = 1;
  }
  return found;
}

static void targets(bench_ctx_t *c) {
  bench_report_t *r = c->rep;
  char m[128], b1[24], at[48];
  static const char *const ops[2] = {"alloc", "free"};
  for (int ci = 0; ci < c->ncont; ci++) {
    if (c->cont[ci].kind != BENCH_GPUBUDDY) continue;
    const char *g = c->cont[ci].name;
    for (int k = 0; k < 2; k++) {
      double v;
      if (worst_fixed(r, g, ops[k], f_median, &v, at, sizeof at)) {
        snprintf(m, sizeof m, "%s (worst size: %s)", bench_fmt_ns(v, b1, 24), at);
        tgt(r, v <= 100, "<= 100 ns", m, "%s %s median, fixed sizes", g, ops[k]);
      }
      if (worst_fixed(r, g, ops[k], f_p999, &v, at, sizeof at)) {
        snprintf(m, sizeof m, "%s (worst size: %s)", bench_fmt_ns(v, b1, 24), at);
        tgt(r, v <= 1000, "<= 1 us", m, "%s %s p99.9, fixed sizes", g, ops[k]);
      }
    }
    static const char *const others[2] = {"cudaMalloc", "cudaMallocAsync"};
    static const double need[2] = {250, 3};
    for (int o = 0; o < 2; o++)
      for (int k = 0; k < 2; k++) {
        double q = 0;
        if (!min_ratio_fixed(r, g, others[o], ops[k], &q, at, sizeof at))
          continue;
        snprintf(m, sizeof m, "%.3gx (smallest, at %s)", q, at);
        char t[32];
        snprintf(t, sizeof t, ">= %gx", need[o]);
        tgt(r, q >= need[o], t, m, "%s %s median vs %s", g, ops[k],
            others[o]);
      }
    /* Churn tail against cudaMallocAsync's. */
    for (int k = 0; k < 2; k++) {
      const bench_lat_row_t *x = bench_report_find(r, "churn", "mix", g, ops[k]);
      const bench_lat_row_t *y =
          bench_report_find(r, "churn", "mix", "cudaMallocAsync", ops[k]);
      if (!x || !y || x->s.n == 0 || y->s.n == 0) continue;
      field_fn fs[2] = {f_p999, f_max};
      static const char *const fn[2] = {"p99.9", "max"};
      for (int j = 0; j < 2; j++) {
        double a = fs[j](&x->s), b = fs[j](&y->s);
        double q = a > 0 ? b / a : 0;
        snprintf(m, sizeof m, "%.3gx (%s vs %s)", q, bench_fmt_ns(a, b1, 24),
                 bench_fmt_ns(b, at, sizeof at));
        tgt(r, q >= 100, ">= 100x", m, "%s churn %s %s vs cudaMallocAsync", g,
            ops[k], fn[j]);
      }
    }
    /* Threads. */
    const bench_thr_row_t *one = NULL, *top = NULL;
    for (size_t i = 0; i < r->nthr; i++) {
      if (strcmp(r->thr[i].alloc, g) || r->thr[i].versus[0]) continue;
      if (r->thr[i].threads == 1) one = &r->thr[i];
      if (!top || r->thr[i].threads > top->threads) top = &r->thr[i];
    }
    if (one && top && top->threads > 1) {
      snprintf(m, sizeof m, "%.2fx (%d threads)", top->ratio, top->threads);
      tgt(r, top->threads >= 16 ? top->ratio >= 4 : -1, ">= 4x at 16 threads",
          m, "%s aggregate throughput vs 1 thread", g);
    }
  }
  for (size_t i = 0; i < r->ntr; i++) {
    const bench_trace_row_t *x = &r->tr[i];
    if (x->anchor <= 0) continue;
    char t[32];
    snprintf(t, sizeof t, "<= %.2fx peak (PyTorch)", x->anchor);
    if (x->min_pool) snprintf(m, sizeof m, "%.3fx peak live", x->ratio);
    else snprintf(m, sizeof m, "not found (> 64 TiB)");
    tgt(r, x->min_pool && x->ratio <= x->anchor, t, m, "smallest pool, %s, %s",
        x->trace, x->policy);
  }
  for (size_t i = 0; i < r->nmeta; i++) {
    const bench_meta_row_t *x = &r->meta[i];
    if (x->pool_size != (80ull << 30)) continue;
    snprintf(m, sizeof m, "%.3f%%", x->pct);
    tgt(r, x->pct <= 0.2, "<= 0.2%", m, "metadata of an 80 GiB pool, 256 B blocks");
    snprintf(m, sizeof m, "%.2f ms", x->create_ms);
    tgt(r, x->create_ms <= 10, "<= 10 ms", m, "creating an 80 GiB pool (median)");
  }
  if (r->ntgt == 0) return;
  bench_out(c, "== Targets (issue 6; reported, never enforced) ==\n");
  for (size_t i = 0; i < r->ntgt; i++) {
    const bench_target_row_t *t = &r->tgt[i];
    bench_out(c, "%-4s  %-58s %-30s target %s\n",
              t->pass > 0 ? "PASS" : t->pass == 0 ? "MISS" : "n/a", t->what,
              t->measured, t->target);
  }
  bench_out(c, "\n");
}

/* ------------------------------------------------------------- markdown */

static void md_lat(FILE *f, const bench_report_t *r, const char *group,
                   const char *first) {
  char b[8][24];
  fprintf(f, "| %s | allocator | alloc median | p99 | p99.9 | max | free median "
          "| p99 | p99.9 | max |\n|---|---|---|---|---|---|---|---|---|---|\n",
          first);
  for (size_t i = 0; i < r->nlat; i++) {
    const bench_lat_row_t *a = &r->lat[i];
    if (strcmp(a->group, group) || strcmp(a->op, "alloc")) continue;
    const bench_lat_row_t *z = bench_report_find(r, group, a->label, a->alloc, "free");
    bench_summary_t fz;
    memset(&fz, 0, sizeof fz);
    if (z) fz = z->s;
    fprintf(f, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
            !strcmp(group, "churn") || !strncmp(group, "trace:", 6)
                ? (strncmp(group, "trace:", 6) ? "mix" : group + 6)
                : a->label,
            a->alloc, bench_fmt_ns(a->s.median, b[0], 24),
            bench_fmt_ns(a->s.p99, b[1], 24), bench_fmt_ns(a->s.p999, b[2], 24),
            bench_fmt_ns(a->s.max, b[3], 24), bench_fmt_ns(fz.median, b[4], 24),
            bench_fmt_ns(fz.p99, b[5], 24), bench_fmt_ns(fz.p999, b[6], 24),
            bench_fmt_ns(fz.max, b[7], 24));
  }
  /* Ratios against gpubuddy. */
  int hdr = 0;
  for (size_t i = 0; i < r->nlat; i++) {
    const bench_lat_row_t *a = &r->lat[i];
    if (strcmp(a->group, group) || strcmp(a->op, "alloc") ||
        !strcmp(a->alloc, "gpubuddy"))
      continue;
    const bench_lat_row_t *ga = bench_report_find(r, group, a->label, "gpubuddy", "alloc");
    const bench_lat_row_t *gf = bench_report_find(r, group, a->label, "gpubuddy", "free");
    const bench_lat_row_t *z = bench_report_find(r, group, a->label, a->alloc, "free");
    if (!ga || !gf || !z || ga->s.median <= 0 || gf->s.median <= 0 ||
        ga->s.p999 <= 0 || gf->s.p999 <= 0)
      continue;
    if (!hdr) {
      fprintf(f, "\nRatio X / gpubuddy (higher: gpubuddy faster)\n\n| %s | X | "
              "alloc median | alloc p99.9 | free median | free p99.9 |\n"
              "|---|---|---|---|---|---|\n", first);
      hdr = 1;
    }
    char q[4][24];
    fprintf(f, "| %s | %s | %s | %s | %s | %s |\n",
            strncmp(group, "trace:", 6) ? a->label : group + 6, a->alloc,
            bench_fmt_ratio(a->s.median / ga->s.median, q[0], 24),
            bench_fmt_ratio(a->s.p999 / ga->s.p999, q[1], 24),
            bench_fmt_ratio(z->s.median / gf->s.median, q[2], 24),
            bench_fmt_ratio(z->s.p999 / gf->s.p999, q[3], 24));
  }
  fprintf(f, "\n");
}

/* summary.md's throughput tables. */
static void md_threads(FILE *f, const bench_report_t *r) {
  if (!r->nthr) return;
  fprintf(f, "#### Throughput (alloc/free pairs, 256 B to 64 KiB, one shared "
          "allocator)\n\n| allocator | threads | ops/s | x 1 thread |\n"
          "|---|---|---|---|\n");
  for (size_t i = 0; i < r->nthr; i++)
    if (!r->thr[i].versus[0])
      fprintf(f, "| %s | %d | %.4g | %.2fx |\n", r->thr[i].alloc,
              r->thr[i].threads, r->thr[i].ops_per_s, r->thr[i].ratio);
  fprintf(f, "\nOne thread, runs alternating with the same policy "
          "without arenas (median of the paired ratios):\n\n"
          "| allocator | ops/s | versus | ratio |\n|---|---|---|---|\n");
  for (size_t i = 0; i < r->nthr; i++)
    if (r->thr[i].versus[0])
      fprintf(f, "| %s | %.4g | %s | %.3fx |\n", r->thr[i].alloc,
              r->thr[i].ops_per_s, r->thr[i].versus, r->thr[i].ratio);
  fprintf(f, "\n");
}

/* summary.md's trace tables: smallest pools, then latency per trace. */
static void md_traces(FILE *f, const bench_ctx_t *c) {
  const bench_report_t *r = c->rep;
  char b1[24], b2[24];
  if (!r->ntr) return;
  fprintf(f, "#### Trace replays: smallest pool (virtual backend, %zu B min "
          "block)\n\n| trace | ops | peak live | policy | smallest pool | x peak "
          "live | PyTorch smallest cap x |\n|---|---|---|---|---|---|---|\n",
          c->o->trace_min_block);
  for (size_t i = 0; i < r->ntr; i++) {
    const bench_trace_row_t *x = &r->tr[i];
    char an[16] = "-", rt[16] = "-";
    if (x->anchor > 0) snprintf(an, sizeof an, "%.2f", x->anchor);
    if (x->min_pool) snprintf(rt, sizeof rt, "%.3f", x->ratio);
    fprintf(f, "| %s | %llu | %s | %s | %s | %s | %s |\n", x->trace,
            (unsigned long long)x->ops, bench_fmt_bytes(x->peak_live, b1, 24),
            x->policy,
            x->min_pool ? bench_fmt_bytes(x->min_pool, b2, 24) : "> 64 TiB",
            rt, an);
  }
  fprintf(f, "\n#### Trace replays: per-op latency\n\n");
  for (size_t i = 0; i < r->nlat; i++) {
    const bench_lat_row_t *x = &r->lat[i];
    if (strncmp(x->group, "trace:", 6)) continue;
    int first = 1;
    for (size_t j = 0; j < i; j++) first &= strcmp(r->lat[j].group, x->group) != 0;
    if (first) md_lat(f, r, x->group, "trace");
  }
}

/* summary.md's metadata and target tables, and the plots. */
static void md_rest(FILE *f, const bench_report_t *r) {
  char b1[24], b2[24];
  if (r->nmeta) {
    fprintf(f, "#### Metadata and pool creation (virtual backend, 256 B min "
            "block)\n\n| pool | metadata | %% of pool | create (median) | "
            "destroy |\n|---|---|---|---|---|\n");
    for (size_t i = 0; i < r->nmeta; i++)
      fprintf(f, "| %s | %s | %.3f%% | %.3f ms | %.3f ms |\n",
              bench_fmt_bytes(r->meta[i].pool_size, b1, 24),
              bench_fmt_bytes(r->meta[i].meta_bytes, b2, 24),
              r->meta[i].pct, r->meta[i].create_ms, r->meta[i].destroy_ms);
    fprintf(f, "\n");
  }
  if (r->ntgt) {
    fprintf(f, "#### Targets\n\n| target | measured | goal | result |\n"
            "|---|---|---|---|\n");
    for (size_t i = 0; i < r->ntgt; i++)
      fprintf(f, "| %s | %s | %s | %s |\n", r->tgt[i].what, r->tgt[i].measured,
              r->tgt[i].target,
              r->tgt[i].pass > 0 ? "pass" : r->tgt[i].pass == 0 ? "**miss**"
                                                                 : "n/a");
    fprintf(f, "\n");
  }
  glob_t g;
  char pat[4096];
  snprintf(pat, sizeof pat, "%s/*.png", out_dir_g ? out_dir_g : ".");
  if (out_dir_g && glob(pat, 0, NULL, &g) == 0) {
    fprintf(f, "#### Plots\n\n");
    for (size_t i = 0; i < g.gl_pathc; i++) {
      const char *base = strrchr(g.gl_pathv[i], '/');
      base = base ? base + 1 : g.gl_pathv[i];
      fprintf(f, "![%s](%s)\n", base, base);
    }
    fprintf(f, "\n");
    globfree(&g);
  }
}

/* Whether the report has latency rows of group g. */
static int has_group(const bench_report_t *r, const char *g) {
  for (size_t i = 0; i < r->nlat; i++)
    if (!strcmp(r->lat[i].group, g)) return 1;
  return 0;
}

static int write_summary(const bench_ctx_t *c, const char *path) {
  const bench_report_t *r = c->rep;
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return -1;
  }
  char b1[24];
  fprintf(f, "<!-- generated by gpubuddy-bench; paste into docs/PERFORMANCE.md -->\n");
  fprintf(f, "Device: %s. Host: %s. Date: %s. Timer overhead (two "
          "clock_gettime calls): %.0f ns, included in every figure. Host "
          "stalls over %d us: %.0f a second, at most %s.\n\n"
          "Command: `%s`\n\n", r->device, r->host, r->date, r->timer_ns,
          BENCH_STALL_NS / 1000, r->stalls_per_s,
          bench_fmt_ns(r->stall_max_ns, b1, sizeof b1), r->command);
  if (has_group(r, "fixed")) {
    fprintf(f, "#### Latency per call, fixed sizes (%zu pairs)\n\n", c->o->pairs);
    md_lat(f, r, "fixed", "size");
  }
  if (has_group(r, "churn")) {
    fprintf(f, "#### Churn mix (%zu ops, up to %zu live, 256 B to 128 MiB)\n\n",
            c->o->churn_ops, c->o->churn_live);
    md_lat(f, r, "churn", "case");
  }
  md_threads(f, r);
  md_traces(f, c);
  md_rest(f, r);
  int bad = ferror(f);
  if (fclose(f) || bad) return -1;
  return 0;
}

/* ------------------------------------------------------------- env info */

static void describe_host(char *buf, size_t n) {
  char model[128] = "unknown CPU";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[256];
    while (fgets(line, sizeof line, f))
      if (!strncmp(line, "model name", 10)) {
        char *p = strchr(line, ':');
        if (p) {
          p++;
          while (*p == ' ') p++;
          p[strcspn(p, "\n")] = 0;
          snprintf(model, sizeof model, "%s", p);
        }
        break;
      }
    fclose(f);
  }
  struct utsname u;
  if (uname(&u)) memset(&u, 0, sizeof u);
  snprintf(buf, n, "%s, %ld cores online, %s %s", model,
           sysconf(_SC_NPROCESSORS_ONLN), u.sysname, u.release);
}

static double timer_overhead(void) {
  enum { N = 20001 };
  bench_samples_t s;
  if (bench_samples_init(&s, N)) return 0;
  for (int i = 0; i < N; i++) {
    uint64_t a = bench_now(), b = bench_now();
    bench_samples_add(&s, b - a);
  }
  bench_summary_t r = bench_summarize(&s);
  bench_samples_free(&s);
  return r.median;
}

/* The host's own stalls: `secs` of reading the clock back to back, and
 * every gap above BENCH_STALL_NS between two reads. A timed call of d ns meets
 * one with odds of about rate x d, whatever it runs, so a tail this
 * rare belongs to the host (a 1 kHz timer tick on these VMs). */
static void host_stalls(double secs, double *per_s, double *longest_ns) {
  uint64_t t0 = bench_now(), end = t0 + (uint64_t)(secs * 1e9), prev = t0;
  uint64_t n = 0, worst = 0;
  for (uint64_t t = t0; t < end; prev = t) {
    t = bench_now();
    if (t - prev > BENCH_STALL_NS) {
      n++;
      if (t - prev > worst) worst = t - prev;
    }
  }
  *per_s = (double)n / ((double)(prev - t0) / 1e9);
  *longest_ns = (double)worst;
}

static int mkdir_p(const char *dir) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", dir);
  for (char *p = tmp + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      if (mkdir(tmp, 0777) && errno != EEXIST) return -1;
      *p = '/';
    }
  if (mkdir(tmp, 0777) && errno != EEXIST) return -1;
  return 0;
}

/* Whether path can be written, checked before the suites run rather than
 * after: an existing file must be writable, else its directory. Opening
 * it here would leave an empty file behind a run that fails. */
static int path_writable(const char *path) {
  struct stat st;
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      errno = EISDIR;
      return 0;
    }
    return access(path, W_OK) == 0;
  }
  if (errno != ENOENT) return 0;
  char dir[4096];
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == path) snprintf(dir, sizeof dir, "/");
  else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
  if (stat(dir, &st)) return 0;
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return 0;
  }
  return access(dir, W_OK | X_OK) == 0;
}

/* ----------------------------------------------------------------- main */

/* What the options say beyond bench_opts_t: counts given explicitly (0:
 * the mode's default), and the options that end the program early. */
typedef struct main_args {
  uint64_t pairs, churn_ops, churn_live, meta_reps, trace_rounds;
  uint64_t threads, seed, device, synth_steps;
  double thr_secs;
  const char *save_path, *contenders;
  const char **traces;
} main_args_t;

/* The options' fields: bench_opts_t's and main_args_t's, parsed at once. */
typedef struct main_cli {
  bench_opts_t o;
  main_args_t a;
} main_cli_t;

#define MAIN_SUITES "a comma list of fixed, churn, threads, traces, meta"

/* Each option's setter (opts.h): NULL, or what the option takes. */
static const char *main_set_trace(void *cv, const char *arg) {
  main_cli_t *c = cv;
  c->a.traces[c->o.ntraces++] = arg;
  return NULL;
}

static const char *main_set_only(void *cv, const char *arg) {
  return parse_suites(&((main_cli_t *)cv)->o, arg, 1) ? MAIN_SUITES : NULL;
}

static const char *main_set_skip(void *cv, const char *arg) {
  return parse_suites(&((main_cli_t *)cv)->o, arg, 0) ? MAIN_SUITES : NULL;
}

static const char *main_set_tsecs(void *cv, const char *arg) {
  main_cli_t *c = cv;
  char *end;
  c->a.thr_secs = strtod(arg, &end);
  return *end || !(c->a.thr_secs > 0 && c->a.thr_secs <= 60) ? "0 < S <= 60"
                                                               : NULL;
}

static const char *main_set_minb(void *cv, const char *arg) {
  main_cli_t *c = cv;
  size_t mb;
  if (gpb_size_parse(arg, &mb) || mb < 16 || (mb & (mb - 1)) ||
      mb > GPBT_MINPOOL_MAX)
    return "a power of two from 16 to 64 TiB";
  c->o.trace_min_block = mb;
  return NULL;
}

static const gpbt_opt_t main_opts[] = {
    GPBT_FLAG("host", main_cli_t, o.host, 1),
    GPBT_FLAG("gpu", main_cli_t, o.gpu, 1),
    GPBT_FLAG("quick", main_cli_t, o.quick, 1),
    GPBT_STR("out", main_cli_t, o.out_dir),
    GPBT_STR("json", main_cli_t, o.json_path),
    GPBT_SET("trace", GPBT_ARG_REQUIRED, main_set_trace),
    GPBT_FLAG("synthetic", main_cli_t, o.synthetic, 1),
    GPBT_STR("save-synthetic", main_cli_t, a.save_path),
    GPBT_U64("synthetic-steps", main_cli_t, a.synth_steps, 1, 100000),
    GPBT_SET("only", GPBT_ARG_REQUIRED, main_set_only),
    GPBT_SET("skip", GPBT_ARG_REQUIRED, main_set_skip),
    GPBT_U64("pairs", main_cli_t, a.pairs, 1, 100000000),
    GPBT_U64("churn-ops", main_cli_t, a.churn_ops, 1, 100000000),
    GPBT_U64("churn-live", main_cli_t, a.churn_live, 1, 1000000),
    GPBT_U64("threads", main_cli_t, a.threads, 1, 64),
    GPBT_SET("thread-seconds", GPBT_ARG_REQUIRED, main_set_tsecs),
    GPBT_SET("min-block", GPBT_ARG_REQUIRED, main_set_minb),
    GPBT_U64("meta-reps", main_cli_t, a.meta_reps, 1, 64),
    GPBT_U64("trace-rounds", main_cli_t, a.trace_rounds, 1, 1000),
    GPBT_STR("contenders", main_cli_t, a.contenders),
    GPBT_U64("seed", main_cli_t, a.seed, 0, UINT64_MAX),
    GPBT_U64("device", main_cli_t, a.device, 0, 1024),
    GPBT_HELP,
    GPBT_VERSION,
};

/* --help: the usage, and what this build can run. */
static void main_help(FILE *f) {
  usage(f);
#ifdef GPB_HAVE_CUDA
  fprintf(f, "\nthis build: CUDA (--gpu available), plots PNG\n");
#else
  fprintf(f, "\nthis build: no CUDA (--host only), plots PNG\n");
#endif
}

/* Parses the command line: 0 to run, else *code is the exit code. */
static int main_parse(int argc, char **argv, bench_opts_t *o, main_args_t *a,
                      int *code) {
  static const gpbt_optspec_t spec = {
      "gpubuddy-bench", main_opts, sizeof main_opts / sizeof main_opts[0],
      main_help, NULL};
  main_cli_t c = {*o, *a};
  int n, rc = gpbt_opts_parse(&spec, argc, argv, &c, &n);
  *o = c.o;
  *a = c.a;
  if (rc >= 0) return *code = rc, 1;
  if (n) {
    *code = gpbt_usage_error(spec.prog, "unexpected argument '%s'", argv[1]);
    return 1;
  }
  return 0;
}

/* Checks the options together and fills the defaults: 0 to run, else
 * the exit code. */
static int main_settle(bench_opts_t *o, const main_args_t *a) {
  if (o->host && o->gpu) {
    return gpbt_usage_error("gpubuddy-bench", "choose --host or --gpu, not "
                            "both");
  }
  if (o->skip_fixed && o->skip_churn && o->skip_threads && o->skip_traces &&
      o->skip_meta) {
    return gpbt_usage_error("gpubuddy-bench", "--only and --skip leave no "
                            "suite to run");
  }
  if (o->json_path && !path_writable(o->json_path)) {
    fprintf(stderr, "gpubuddy-bench: cannot write --json %s: %s\n",
            o->json_path, strerror(errno));
    return 1;
  }
  if (!o->gpu) o->host = 1;
#ifndef GPB_HAVE_CUDA
  if (o->gpu) {
    fprintf(stderr, "gpubuddy-bench: --gpu needs a build with CUDA "
            "(configure --with-cuda)\n");
    return 2;
  }
#endif
  o->pairs = a->pairs ? a->pairs : o->quick ? 200 : 2000;
  o->churn_ops = a->churn_ops ? a->churn_ops : o->quick ? 1000 : 8000;
  o->churn_live = a->churn_live ? a->churn_live : o->quick ? 128 : 1024;
  o->thr_seconds = a->thr_secs > 0 ? a->thr_secs : o->quick ? 0.04 : 0.5;
  o->meta_reps = a->meta_reps ? (int)a->meta_reps : o->quick ? 1 : 7;
  o->trace_rounds = a->trace_rounds ? (int)a->trace_rounds
                                    : o->quick ? 2 : 20;
  if (o->out_dir) {
    if (mkdir_p(o->out_dir)) {
      fprintf(stderr, "gpubuddy-bench: cannot create %s: %s\n", o->out_dir,
              strerror(errno));
      return 1;
    }
    out_dir_g = o->out_dir;
  }
  return 0;
}

/* Default traces: every .gz in samples/traces; none means a synthetic
 * one. 0, or 2 without memory. */
static int main_default_traces(bench_opts_t *o, main_args_t *a) {
  if (o->ntraces == 0 && !o->skip_traces) {
    const char *dir = getenv("GPB_SAMPLES_DIR");
    char pat[4096];
    snprintf(pat, sizeof pat, "%s/*.gz", dir && *dir ? dir : BENCH_SAMPLES_DIR);
    if (glob(pat, 0, NULL, &glob_g) == 0) {
      have_glob_g = 1;
      for (size_t i = 0; i < glob_g.gl_pathc; i++) {
        const char **t = realloc(a->traces, (o->ntraces + 2) * sizeof *t);
        if (!t) return 2;
        a->traces = traces_g = t;
        a->traces[o->ntraces++] = glob_g.gl_pathv[i];
      }
    }
    if (o->ntraces == 0) o->synthetic = 1;
  }
  o->traces = a->traces;
  return 0;
}

/* The report's header: mode, host, date and the command line. */
static void main_report_init(bench_report_t *rep, const bench_opts_t *o,
                             int argc, char **argv) {
  snprintf(rep->mode, sizeof rep->mode, "%s", o->gpu ? "gpu" : "host");
  rep->quick = o->quick;
  rep->seed = o->seed;
  describe_host(rep->host, sizeof rep->host);
  time_t now = time(NULL);
  struct tm tmv;
  gmtime_r(&now, &tmv);
  strftime(rep->date, sizeof rep->date, "%Y-%m-%d %H:%M UTC", &tmv);
  size_t pos = 0;
  for (int i = 0; i < argc && pos + 2 < sizeof rep->command; i++) {
    const char *arg = i == 0 ? "gpubuddy-bench" : argv[i];
    int w = snprintf(rep->command + pos, sizeof rep->command - pos, "%s%s",
                     i ? " " : "", arg);
    if (w < 0) break;
    pos += (size_t)w;
  }
}

/* Contenders: gpubuddy with every policy the header defines, then the
 * allocators it replaces, then the floor. */
static void main_contenders(bench_ctx_t *c) {
  const bench_opts_t *o = c->o;
  for (int p = 0; p < GPB_NUM_POLICIES; p++) {
    bench_contender_t *k = &c->cont[c->ncont++];
    k->kind = BENCH_GPUBUDDY;
    k->policy = (gpb_policy_t)p;
    if (p == GPB_POLICY_BUDDY) snprintf(k->name, sizeof k->name, "gpubuddy");
    else snprintf(k->name, sizeof k->name, "gpubuddy-%s", gpb_policy_name(k->policy));
  }
  /* The buddy and bestfit policies with one arena per thread of the
   * throughput suite: what a multi-threaded program would configure. */
  for (int p = 0; p < 2; p++) {
    bench_contender_t *k = &c->cont[c->ncont++];
    k->kind = BENCH_GPUBUDDY;
    k->policy = p ? GPB_POLICY_BESTFIT : GPB_POLICY_BUDDY;
    k->arenas = (uint32_t)(o->max_threads < 2 ? 2 : o->max_threads);
    snprintf(k->name, sizeof k->name, "gpubuddy%s-arenas",
             p ? "-bestfit" : "");
  }
  /* Best fit following a plan made from the trace: trace replays only,
   * for what following a plan costs per call. */
  bench_contender_t *k = &c->cont[c->ncont++];
  k->kind = BENCH_GPUBUDDY;
  k->policy = GPB_POLICY_BESTFIT;
  k->plan = 1;
  snprintf(k->name, sizeof k->name, "gpubuddy-bestfit-plan");
  bench_kind_t others[2] = {BENCH_MALLOC, BENCH_MALLOC};
  int nothers = 1;
  if (o->gpu) {
    others[0] = BENCH_CUDAMALLOC;
    others[1] = BENCH_CUDAASYNC;
    nothers = 2;
  }
  for (int i = 0; i < nothers; i++) {
    k = &c->cont[c->ncont++];
    k->kind = others[i];
    snprintf(k->name, sizeof k->name, "%s", bench_kind_name(others[i]));
  }
  /* Last, the floor: a tail it shares is the host's, not an allocator's. */
  c->cont[c->ncont].kind = BENCH_EMPTY;
  snprintf(c->cont[c->ncont].name, sizeof c->cont[c->ncont].name, "%s",
           bench_kind_name(BENCH_EMPTY));
  c->ncont++;
}

/* The device line, results.txt, and the timer and stall figures every
 * table depends on. 0, or 1 without a usable device. */
static int main_preamble(bench_ctx_t *c) {
  const bench_opts_t *o = c->o;
  bench_report_t *rep = c->rep;
#ifdef GPB_HAVE_CUDA
  if (o->gpu) {
    if (bench_cuda_free_mem(o->device) == 0) {
      fprintf(stderr, "gpubuddy-bench: no usable CUDA device %d\n", o->device);
      return 1;
    }
    bench_cuda_describe(o->device, rep->device, sizeof rep->device);
  }
#endif
  if (!o->gpu)
    snprintf(rep->device, sizeof rep->device, "host memory (gpubuddy host "
             "backend vs glibc malloc)");
  if (o->out_dir) {
    char *p = bench_out_path(c, "results.txt");
    c->txt = p ? fopen(p, "w") : NULL;
    if (!c->txt) fprintf(stderr, "gpubuddy-bench: cannot write %s\n", p ? p : "");
    free(p);
  }
  rep->timer_ns = timer_overhead();
  host_stalls(o->quick ? 0.05 : 0.5, &rep->stalls_per_s, &rep->stall_max_ns);
  bench_out(c, "gpubuddy-bench %s (gpubuddy %s), %s mode%s\n", PACKAGE_VERSION,
            gpb_version(), rep->mode, o->quick ? ", QUICK (small counts: checks the harness, "
            "not the figures)" : "");
  bench_out(c, "device: %s\nhost:   %s\ndate:   %s\ncommand: %s\n", rep->device,
            rep->host, rep->date, rep->command);
  bench_out(c, "timer: two clock_gettime calls cost %.0f ns (median); it is "
            "included in every per-call figure, not subtracted\n", rep->timer_ns);
  char sb[24];
  bench_out(c, "stalls: the host paused a loop reading the clock for over %d us "
            "%.0f times a second, at most %s: a call of 100 ns meets such a "
            "pause about once in %.0f calls\n\n", BENCH_STALL_NS / 1000,
            rep->stalls_per_s, bench_fmt_ns(rep->stall_max_ns, sb, sizeof sb),
            rep->stalls_per_s > 0 ? 1e7 / rep->stalls_per_s : 0.0);
  return 0;
}

/* The suites, the targets, and the files: 0, or 1 when some could not
 * run or be written. */
static int main_run(bench_ctx_t *c) {
  const bench_opts_t *o = c->o;
  int fails = 0;
  if (!o->skip_fixed) fails |= bench_run_fixed(c) != 0;
  if (!o->skip_churn) fails |= bench_run_churn(c) != 0;
  if (!o->skip_threads) fails |= bench_run_threads(c) != 0;
  if (!o->skip_traces) fails |= bench_run_traces(c) != 0;
  if (!o->skip_meta) fails |= bench_run_meta(c) != 0;
  targets(c);
  if (o->json_path && bench_report_json(c->rep, o->json_path)) fails = 1;
  if (o->out_dir) {
    char *p = bench_out_path(c, "results.json");
    if (!p || bench_report_json(c->rep, p)) fails = 1;
    free(p);
    p = bench_out_path(c, "summary.md");
    if (!p || write_summary(c, p)) fails = 1;
    else bench_progress("wrote %s", p);
    free(p);
  }
  if (fails) fprintf(stderr, "gpubuddy-bench: some suites could not run (see above)\n");
  return fails;
}

int main(int argc, char **argv) {
  bench_opts_t o;
  main_args_t a;
  memset(&o, 0, sizeof o);
  memset(&a, 0, sizeof a);
  o.trace_min_block = 512;
  a.seed = 42;
  a.threads = 16;
  a.traces = calloc((size_t)argc + 1, sizeof *a.traces);
  if (!a.traces) return 2;
  traces_g = a.traces;
  atexit(main_cleanup);
  int code = 0;
  if (main_parse(argc, argv, &o, &a, &code)) return code;
  o.seed = a.seed;
  o.device = (int)a.device;
  o.max_threads = (int)a.threads;
  o.synth_steps = (int)a.synth_steps;
  if (a.save_path)
    return bench_save_synthetic(a.save_path, o.seed,
                                o.synth_steps ? o.synth_steps
                                              : BENCH_SYNTH_STEPS(o.quick))
               ? 1 : 0;
  if ((code = main_settle(&o, &a)) || (code = main_default_traces(&o, &a)))
    return code;
  bench_report_t rep;
  memset(&rep, 0, sizeof rep);
  bench_ctx_t c;
  memset(&c, 0, sizeof c);
  c.o = &o;
  c.rep = &rep;
  main_report_init(&rep, &o, argc, argv);
  c.backend = o.gpu ? GPB_BACKEND_DEVICE : GPB_BACKEND_HOST;
  main_contenders(&c);
  if (a.contenders && keep_contenders(&c, a.contenders)) return 2;
  if (main_preamble(&c)) return 1;
  int fails = main_run(&c);
  if (c.txt) fclose(c.txt);
  bench_report_free(&rep);
  return fails ? 1 : 0;
}
