/* SPDX-License-Identifier: MIT */
/*
 * bench.h: declarations shared by the files of gpubuddy-bench.
 *
 * The harness measures every allocator through one small function table
 * (bench_alloc_t), so gpubuddy, glibc malloc, cudaMalloc and
 * cudaMallocAsync run exactly the same loops on exactly the same sizes.
 * Results go into one bench_report_t; main.c renders it as text, JSON and
 * a markdown summary, and plot.c draws the PNG figures.
 *
 * Files: main.c (options, order of the suites, targets, output),
 * stats.c (samples, percentiles, JSON writer), alloc.c (gpubuddy and
 * malloc behind the table), cuda.c (cudaMalloc and cudaMallocAsync),
 * latency.c (fixed sizes, churn, threads, metadata), replay.c (traces),
 * plot.c (PNG plots with a built-in font).
 */
#ifndef GPB_BENCH_H
#define GPB_BENCH_H

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include "gpubuddy.h"
#include "opseq.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* ------------------------------------------------------------- timing */

static inline uint64_t bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------- allocators */

typedef enum bench_kind {
  BENCH_GPUBUDDY = 0, /* a gpubuddy pool (host, device or virtual backend) */
  BENCH_MALLOC,       /* glibc malloc/free */
  BENCH_CUDAMALLOC,   /* cudaMalloc/cudaFree */
  BENCH_CUDAASYNC,    /* cudaMallocAsync/cudaFreeAsync, warmed pool */
  BENCH_EMPTY         /* calls that return at once: the timer's floor */
} bench_kind_t;

/* Contenders at most: every policy, 2 with arenas, 2 CUDA, the empty call. */
#define BENCH_MAXCONT 9
_Static_assert(GPB_NUM_POLICIES + 6 <= BENCH_MAXCONT,
               "a new policy needs a larger BENCH_MAXCONT");

/* One allocator behind a function table. alloc returns 0 or nonzero on
 * failure (the pointer is then NULL); free returns 0 or nonzero. */
typedef struct bench_alloc {
  char name[48]; /* "gpubuddy", "gpubuddy-trim", "malloc", ... */
  bench_kind_t kind;
  void *ctx;
  int (*alloc)(void *ctx, size_t size, void **out);
  int (*free)(void *ctx, void *ptr);
  void (*sync)(void *ctx); /* waits for queued work; NULL when none */
  void (*close)(void *ctx);
} bench_alloc_t;

typedef struct bench_pool_opts {
  gpb_backend_t backend; /* for BENCH_GPUBUDDY */
  gpb_policy_t policy;
  size_t pool_size;
  size_t min_block;
  int device;
  uint32_t arenas; /* gpb_config_t.arenas; 0 here means 1 */
  unsigned flags;  /* GPB_CFG_* added to GPB_CFG_NO_ENV */
} bench_pool_opts_t;

/* Opens one allocator. 0, or nonzero with a message on stderr. */
int bench_alloc_open(bench_kind_t kind, const bench_pool_opts_t *o,
                     bench_alloc_t *out);
void bench_alloc_close(bench_alloc_t *a);
const char *bench_kind_name(bench_kind_t kind);

#ifdef GPB_HAVE_CUDA
int bench_cuda_open(bench_kind_t kind, int device, bench_alloc_t *out);
/* Free device memory in bytes, 0 when unknown. */
size_t bench_cuda_free_mem(int device);
/* "NVIDIA H100 80GB HBM3, driver 580.x, runtime 13.0" */
void bench_cuda_describe(int device, char *buf, size_t n);
#endif

/* ------------------------------------------------------------- samples */

typedef struct bench_samples {
  uint64_t *ns;
  size_t n, cap;
  uint64_t fails;
} bench_samples_t;

typedef struct bench_summary {
  uint64_t n, fails;
  double median, p99, p999, max, mean; /* nanoseconds */
  double worst_best; /* trace replays: bench_samples_worst_best, else 0 */
} bench_summary_t;

int bench_samples_init(bench_samples_t *s, size_t cap);
void bench_samples_free(bench_samples_t *s);
static inline void bench_samples_add(bench_samples_t *s, uint64_t ns) {
  if (s->n < s->cap) s->ns[s->n++] = ns;
}
/* The slowest op's fastest pass: s holds `passes` passes over the same ops
 * in order, one sample per op each. The best of an op's passes is what the
 * op itself costs: a pause of the host counts only if it hits that op in
 * every pass. 0 unless the passes line up (as many samples each). Call it
 * before bench_summarize, which sorts. */
double bench_samples_worst_best(const bench_samples_t *s, int passes);
/* Sorts the samples in place and summarizes them. */
bench_summary_t bench_summarize(bench_samples_t *s);
/* "93 ns", "1.25 us", "7.9 ms" into buf. */
const char *bench_fmt_ns(double ns, char *buf, size_t n);
/* "312x", "12.5x", "0.75x", "0.0041x" into buf. */
const char *bench_fmt_ratio(double r, char *buf, size_t n);
/* gpb_size_format ("256 B", "4.0 KiB", "1.5 GiB") into buf; returns buf. */
const char *bench_fmt_bytes(uint64_t bytes, char *buf, size_t n);

/* splitmix64: one seed gives the same sequence everywhere. */
static inline uint64_t bench_rand(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static inline double bench_rand01(uint64_t *s) {
  return (double)(bench_rand(s) >> 11) * (1.0 / 9007199254740992.0);
}
/* Log-uniform integer size in [lo, hi]. */
size_t bench_rand_logsize(uint64_t *s, size_t lo, size_t hi);

/* ------------------------------------------------------------- results */

typedef struct bench_lat_row {
  char group[128]; /* "fixed", "churn", "trace:NAME" */
  char label[48];  /* "4 KiB", "mix", trace name */
  char alloc[48];  /* allocator name */
  char op[8];      /* "alloc" or "free" */
  bench_summary_t s;
} bench_lat_row_t;

typedef struct bench_thr_row {
  char alloc[48];
  int threads;
  double ops_per_s, ratio; /* ratio to this allocator's 1-thread figure,
                              or with `versus`, the median ratio to that
                              allocator in runs that alternate with it */
  uint64_t fails;
  char versus[48];
} bench_thr_row_t;

typedef struct bench_trace_row {
  char trace[96];
  char policy[24];
  uint64_t ops, peak_live;
  uint64_t min_pool;    /* 0 when not found */
  double ratio;         /* min_pool / peak_live */
  double anchor;        /* PyTorch's smallest cap / peak live, 0 unknown */
  int replays;          /* pools tried in the search */
} bench_trace_row_t;

typedef struct bench_meta_row {
  uint64_t pool_size, min_block, meta_bytes;
  double pct, create_ms, destroy_ms;
} bench_meta_row_t;

typedef struct bench_target_row {
  char what[160];
  char measured[128];
  char target[48];
  int pass; /* 1 pass, 0 miss, -1 not measured */
} bench_target_row_t;

/* A gap above this between two reads of the clock is the host's stall. */
#define BENCH_STALL_NS 5000

typedef struct bench_report {
  char mode[8]; /* "host" or "gpu" */
  char device[160];
  char host[320];
  char date[40];
  char command[512];
  int quick;
  uint64_t seed;
  double timer_ns; /* median cost of one clock_gettime pair */
  double stalls_per_s, stall_max_ns; /* the host's pauses (BENCH_STALL_NS) */
  bench_lat_row_t *lat;
  size_t nlat, caplat;
  bench_thr_row_t *thr;
  size_t nthr, capthr;
  bench_trace_row_t *tr;
  size_t ntr, captr;
  bench_meta_row_t meta[8];
  size_t nmeta;
  bench_target_row_t tgt[64];
  size_t ntgt;
} bench_report_t;

bench_lat_row_t *bench_report_lat(bench_report_t *r);
bench_thr_row_t *bench_report_thr(bench_report_t *r);
bench_trace_row_t *bench_report_trace(bench_report_t *r);
void bench_report_free(bench_report_t *r);
/* Finds a latency row; NULL when absent. */
const bench_lat_row_t *bench_report_find(const bench_report_t *r,
                                         const char *group, const char *label,
                                         const char *alloc, const char *op);
int bench_report_json(const bench_report_t *r, const char *path);

/* ------------------------------------------------------------- options */

typedef struct bench_opts {
  int host, gpu, quick, verbose;
  int device;
  uint64_t seed;
  const char *json_path;
  const char *out_dir;
  const char **traces;
  size_t ntraces;
  int synthetic;           /* also replay a generated trace */
  int synth_steps;         /* its steps; 0 = default */
  size_t pairs;            /* fixed-size pairs per allocator and size */
  size_t churn_ops, churn_live;
  double thr_seconds;      /* per thread-count run */
  int max_threads;
  size_t trace_min_block;
  int meta_reps;
  int trace_rounds; /* timed passes per trace and contender, in turns */
  int skip_fixed, skip_churn, skip_threads, skip_traces, skip_meta;
} bench_opts_t;

/* One contender: an allocator kind and, for gpubuddy, its policy. */
typedef struct bench_contender {
  bench_kind_t kind;
  gpb_policy_t policy;
  uint32_t arenas; /* gpb_config_t.arenas; 0 here means 1 */
  int plan; /* trace replays only: follows the trace's own plan
               (gpb_plan_make), rewound before every pass */
  char name[48];
} bench_contender_t;

/* A suite run: the allocators to compare, in table order. */
typedef struct bench_ctx {
  const bench_opts_t *o;
  bench_report_t *rep;
  bench_contender_t cont[BENCH_MAXCONT];
  int ncont;
  gpb_backend_t backend; /* gpubuddy's backend for timing */
  FILE *txt;             /* text results besides stdout; may be NULL */
} bench_ctx_t;

/* Opens contender i with a pool of pool_size bytes (gpubuddy only). */
int bench_open_contender(const bench_ctx_t *c, int i, size_t pool_size,
                         size_t min_block, bench_alloc_t *out);

/* A sequence of alloc/free operations on numbered slots: the churn mix
 * and trace replays. Every allocator replays the same sequence. The type
 * and its loader are the tools' (tools/common/opseq.h). */
typedef gpbt_op_t bench_op_t;
typedef gpbt_seq_t bench_seq_t;

/* Replays q once; times each call into al/fr when non-NULL. ptrs has
 * q->nslots entries, all NULL on entry and on return (what is still live
 * at the end is freed untimed). Returns the number of failed allocations;
 * a free whose allocation failed is skipped. */
uint64_t bench_seq_run(bench_alloc_t *a, const bench_seq_t *q, void **ptrs,
                       bench_samples_t *al, bench_samples_t *fr);

/* Prints to stdout and to ctx->txt. */
void bench_out(bench_ctx_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Progress on stderr. */
void bench_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* ctx->o->out_dir/name, or NULL when no out dir (caller frees). */
char *bench_out_path(const bench_ctx_t *c, const char *name);

int bench_run_fixed(bench_ctx_t *c);
int bench_run_churn(bench_ctx_t *c);
int bench_run_threads(bench_ctx_t *c);
int bench_run_meta(bench_ctx_t *c);
int bench_run_traces(bench_ctx_t *c);
/* Writes the synthetic trace (what --synthetic replays) as a native trace
 * file, so the reader's path can be checked end to end. */
int bench_save_synthetic(const char *path, uint64_t seed, int steps);
#define BENCH_SYNTH_STEPS(quick) ((quick) ? 20 : 60)

/* Prints a latency table for the rows of one group. */
void bench_print_lat_group(bench_ctx_t *c, const char *group);

/* ---------------------------------------------------------------- plots */

typedef struct bench_series {
  const char *label;
  const double *x, *y; /* n points; x NULL means 0..n-1 */
  size_t n;
  uint32_t rgb;
  int dashed;
} bench_series_t;

typedef struct bench_plot {
  const char *title, *xlabel, *ylabel;
  int logx;       /* x values are log10 of the quantity shown */
  int xtime;      /* tick labels as times (x in log10 ns) */
  int ybytes;     /* tick labels as bytes */
  double hline[4]; /* horizontal reference lines (y), 0 = none */
  const char *hlabel[4];
} bench_plot_t;

/* Writes a PNG; 0, or nonzero (out of memory, I/O error) with a message. */
int bench_plot_write(const char *path, const bench_plot_t *p,
                     const bench_series_t *s, size_t ns);
/* Draws latency CDFs: one pair of series (alloc solid, free dashed) per
 * allocator, from sorted samples. */
int bench_plot_cdf(const char *path, const char *title,
                   const char *const *names, bench_samples_t *const *allocs,
                   bench_samples_t *const *frees, int n);

extern const uint32_t bench_colors[8];

#endif /* GPB_BENCH_H */
