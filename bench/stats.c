/* SPDX-License-Identifier: MIT */
/*
 * stats.c: latency samples, percentiles, number formatting, the result
 * store and its JSON rendering.
 *
 * Percentiles are nearest-rank on the sorted samples (p99.9 of 2,000
 * samples is the 1,998th), so each figure is a time that was measured,
 * never an interpolation between two.
 */
#include "bench.h"
#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int bench_samples_init(bench_samples_t *s, size_t cap) {
  memset(s, 0, sizeof *s);
  s->ns = malloc((cap ? cap : 1) * sizeof *s->ns);
  if (!s->ns) {
    fprintf(stderr, "gpubuddy-bench: out of memory for %zu samples\n", cap);
    return -1;
  }
  s->cap = cap;
  return 0;
}

void bench_samples_free(bench_samples_t *s) {
  free(s->ns);
  memset(s, 0, sizeof *s);
}

double bench_samples_worst_best(const bench_samples_t *s, int passes) {
  if (passes < 2 || s->n == 0 || s->n % (size_t)passes) return 0;
  size_t k = s->n / (size_t)passes;
  uint64_t worst = 0;
  for (size_t j = 0; j < k; j++) {
    uint64_t best = UINT64_MAX;
    for (size_t r = 0; r < (size_t)passes; r++)
      if (s->ns[r * k + j] < best) best = s->ns[r * k + j];
    if (best > worst) worst = best;
  }
  return (double)worst;
}

static int stats_cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Nearest rank: the smallest sample with at least q of them at or below. */
static double stats_rank(const uint64_t *v, size_t n, double q) {
  if (n == 0) return 0;
  size_t k = (size_t)ceil(q * (double)n);
  if (k < 1) k = 1;
  if (k > n) k = n;
  return (double)v[k - 1];
}

bench_summary_t bench_summarize(bench_samples_t *s) {
  bench_summary_t r;
  memset(&r, 0, sizeof r);
  r.n = s->n;
  r.fails = s->fails;
  if (s->n == 0) return r;
  qsort(s->ns, s->n, sizeof *s->ns, stats_cmp);
  double sum = 0;
  for (size_t i = 0; i < s->n; i++) sum += (double)s->ns[i];
  r.mean = sum / (double)s->n;
  r.median = stats_rank(s->ns, s->n, 0.5);
  r.p99 = stats_rank(s->ns, s->n, 0.99);
  r.p999 = stats_rank(s->ns, s->n, 0.999);
  r.max = (double)s->ns[s->n - 1];
  return r;
}

const char *bench_fmt_ns(double ns, char *buf, size_t n) {
  if (ns < 1000) snprintf(buf, n, "%.0f ns", ns);
  else if (ns < 1e6) snprintf(buf, n, "%.3g us", ns / 1e3);
  else if (ns < 1e9) snprintf(buf, n, "%.3g ms", ns / 1e6);
  else snprintf(buf, n, "%.3g s", ns / 1e9);
  return buf;
}

const char *bench_fmt_ratio(double r, char *buf, size_t n) {
  if (!isfinite(r)) snprintf(buf, n, "-");
  else if (r >= 100) snprintf(buf, n, "%.0fx", r);
  else if (r >= 10) snprintf(buf, n, "%.1fx", r);
  else if (r >= 0.01) snprintf(buf, n, "%.2fx", r);
  else snprintf(buf, n, "%.2gx", r);
  return buf;
}

const char *bench_fmt_bytes(uint64_t bytes, char *buf, size_t n) {
  gpb_size_format(bytes, buf, n);
  return buf;
}

size_t bench_rand_logsize(uint64_t *s, size_t lo, size_t hi) {
  double l = log((double)lo), h = log((double)hi);
  double v = exp(l + (h - l) * bench_rand01(s));
  size_t r = (size_t)v;
  if (r < lo) r = lo;
  if (r > hi) r = hi;
  return r;
}

/* ------------------------------------------------------------- results */

/* Grows an array of rows by one zeroed row; NULL when out of memory. */
static void *stats_grow(void **arr, size_t *n, size_t *cap, size_t size) {
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 32;
    void *p = realloc(*arr, nc * size);
    if (!p) {
      fprintf(stderr, "gpubuddy-bench: out of memory for results\n");
      exit(2);
    }
    *arr = p;
    *cap = nc;
  }
  void *row = (char *)*arr + (*n)++ * size;
  memset(row, 0, size);
  return row;
}

bench_lat_row_t *bench_report_lat(bench_report_t *r) {
  return stats_grow((void **)&r->lat, &r->nlat, &r->caplat, sizeof *r->lat);
}

bench_thr_row_t *bench_report_thr(bench_report_t *r) {
  return stats_grow((void **)&r->thr, &r->nthr, &r->capthr, sizeof *r->thr);
}

bench_trace_row_t *bench_report_trace(bench_report_t *r) {
  return stats_grow((void **)&r->tr, &r->ntr, &r->captr, sizeof *r->tr);
}

void bench_report_free(bench_report_t *r) {
  free(r->lat);
  free(r->thr);
  free(r->tr);
  r->lat = NULL;
  r->thr = NULL;
  r->tr = NULL;
}

const bench_lat_row_t *bench_report_find(const bench_report_t *r,
                                         const char *group, const char *label,
                                         const char *alloc, const char *op) {
  for (size_t i = 0; i < r->nlat; i++) {
    const bench_lat_row_t *x = &r->lat[i];
    if (!strcmp(x->group, group) && !strcmp(x->label, label) &&
        !strcmp(x->alloc, alloc) && !strcmp(x->op, op))
      return x;
  }
  return NULL;
}

/* ---------------------------------------------------------------- JSON */

/* Opens row i of an array: a row per line, its members on that line. */
static gpbt_json_t stats_json_row(FILE *f, size_t i) {
  fprintf(f, "%s\n    {", i ? "," : "");
  return (gpbt_json_t){f, ", ", 0};
}

/* The "latency" and "threads" arrays. */
static void stats_json_lat_thr(FILE *f, gpbt_json_t *top,
                               const bench_report_t *r) {
  gpbt_json_key(top, "latency");
  fputc('[', f);
  for (size_t i = 0; i < r->nlat; i++) {
    const bench_lat_row_t *x = &r->lat[i];
    gpbt_json_t o = stats_json_row(f, i);
    gpbt_json_put_str(&o, "group", x->group);
    gpbt_json_put_str(&o, "label", x->label);
    gpbt_json_put_str(&o, "allocator", x->alloc);
    gpbt_json_put_str(&o, "op", x->op);
    gpbt_json_put_u64(&o, "n", x->s.n);
    gpbt_json_put_u64(&o, "fails", x->s.fails);
    gpbt_json_put_num(&o, "median_ns", x->s.median);
    gpbt_json_put_num(&o, "p99_ns", x->s.p99);
    gpbt_json_put_num(&o, "p999_ns", x->s.p999);
    gpbt_json_put_num(&o, "max_ns", x->s.max);
    gpbt_json_put_num(&o, "mean_ns", x->s.mean);
    if (x->s.worst_best > 0)
      gpbt_json_put_num(&o, "worst_op_best_ns", x->s.worst_best);
    fputc('}', f);
  }
  fputs("\n  ]", f);
  gpbt_json_key(top, "threads");
  fputc('[', f);
  for (size_t i = 0; i < r->nthr; i++) {
    const bench_thr_row_t *x = &r->thr[i];
    gpbt_json_t o = stats_json_row(f, i);
    gpbt_json_put_str(&o, "allocator", x->alloc);
    gpbt_json_put_int(&o, "threads", x->threads);
    gpbt_json_put_num(&o, "ops_per_s", x->ops_per_s);
    if (x->versus[0]) {
      gpbt_json_put_str(&o, "versus", x->versus);
      gpbt_json_put_num(&o, "ratio_paired", x->ratio);
    } else {
      gpbt_json_put_num(&o, "ratio_to_1", x->ratio);
    }
    gpbt_json_put_u64(&o, "fails", x->fails);
    fputc('}', f);
  }
  fputs("\n  ]", f);
}

/* The "traces", "metadata" and "targets" arrays. */
static void stats_json_rest(FILE *f, gpbt_json_t *top,
                            const bench_report_t *r) {
  gpbt_json_key(top, "traces");
  fputc('[', f);
  for (size_t i = 0; i < r->ntr; i++) {
    const bench_trace_row_t *x = &r->tr[i];
    gpbt_json_t o = stats_json_row(f, i);
    gpbt_json_put_str(&o, "trace", x->trace);
    gpbt_json_put_str(&o, "policy", x->policy);
    gpbt_json_put_u64(&o, "ops", x->ops);
    gpbt_json_put_u64(&o, "peak_live", x->peak_live);
    gpbt_json_put_u64(&o, "min_pool", x->min_pool);
    gpbt_json_put_int(&o, "replays", x->replays);
    gpbt_json_put_num(&o, "ratio", x->min_pool ? x->ratio : NAN);
    gpbt_json_put_num(&o, "pytorch_cap_ratio", x->anchor > 0 ? x->anchor : NAN);
    fputc('}', f);
  }
  fputs("\n  ]", f);
  gpbt_json_key(top, "metadata");
  fputc('[', f);
  for (size_t i = 0; i < r->nmeta; i++) {
    const bench_meta_row_t *x = &r->meta[i];
    gpbt_json_t o = stats_json_row(f, i);
    gpbt_json_put_u64(&o, "pool_size", x->pool_size);
    gpbt_json_put_u64(&o, "min_block", x->min_block);
    gpbt_json_put_u64(&o, "meta_bytes", x->meta_bytes);
    gpbt_json_put_num(&o, "pct", x->pct);
    gpbt_json_put_num(&o, "create_ms", x->create_ms);
    gpbt_json_put_num(&o, "destroy_ms", x->destroy_ms);
    fputc('}', f);
  }
  fputs("\n  ]", f);
  gpbt_json_key(top, "targets");
  fputc('[', f);
  for (size_t i = 0; i < r->ntgt; i++) {
    const bench_target_row_t *x = &r->tgt[i];
    gpbt_json_t o = stats_json_row(f, i);
    gpbt_json_put_str(&o, "what", x->what);
    gpbt_json_put_str(&o, "measured", x->measured);
    gpbt_json_put_str(&o, "target", x->target);
    gpbt_json_put_str(&o, "result",
                      x->pass > 0 ? "pass" : x->pass == 0 ? "miss" : "n/a");
    fputc('}', f);
  }
  fputs("\n  ]\n}\n", f);
}

int bench_report_json(const bench_report_t *r, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return -1;
  }
  gpbt_json_t top = {f, ",\n  ", 0};
  fputs("{\n  ", f);
  gpbt_json_put_int(&top, "version", 1);
  gpbt_json_put_str(&top, "mode", r->mode);
  gpbt_json_put_str(&top, "device", r->device);
  gpbt_json_put_str(&top, "host", r->host);
  gpbt_json_put_str(&top, "date", r->date);
  gpbt_json_put_str(&top, "command", r->command);
  gpbt_json_put_bool(&top, "quick", r->quick);
  gpbt_json_put_u64(&top, "seed", r->seed);
  gpbt_json_put_num(&top, "timer_ns", r->timer_ns);
  gpbt_json_put_num(&top, "host_stalls_per_s", r->stalls_per_s);
  gpbt_json_put_num(&top, "host_stall_max_ns", r->stall_max_ns);
  stats_json_lat_thr(f, &top, r);
  stats_json_rest(f, &top, r);
  int bad = ferror(f);
  if (fclose(f) || bad) {
    fprintf(stderr, "gpubuddy-bench: error writing %s\n", path);
    return -1;
  }
  return 0;
}
