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

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

static void json_num(FILE *f, double v) {
  if (isfinite(v)) fprintf(f, "%.6g", v);
  else fputs("null", f);
}

int bench_report_json(const bench_report_t *r, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return -1;
  }
  fprintf(f, "{\n  \"version\": 1,\n  \"mode\": ");
  json_str(f, r->mode);
  fprintf(f, ",\n  \"device\": ");
  json_str(f, r->device);
  fprintf(f, ",\n  \"host\": ");
  json_str(f, r->host);
  fprintf(f, ",\n  \"date\": ");
  json_str(f, r->date);
  fprintf(f, ",\n  \"command\": ");
  json_str(f, r->command);
  fprintf(f, ",\n  \"quick\": %s,\n  \"seed\": %llu,\n  \"timer_ns\": ",
          r->quick ? "true" : "false", (unsigned long long)r->seed);
  json_num(f, r->timer_ns);

  fprintf(f, ",\n  \"latency\": [");
  for (size_t i = 0; i < r->nlat; i++) {
    const bench_lat_row_t *x = &r->lat[i];
    fprintf(f, "%s\n    {\"group\": ", i ? "," : "");
    json_str(f, x->group);
    fprintf(f, ", \"label\": ");
    json_str(f, x->label);
    fprintf(f, ", \"allocator\": ");
    json_str(f, x->alloc);
    fprintf(f, ", \"op\": ");
    json_str(f, x->op);
    fprintf(f, ", \"n\": %llu, \"fails\": %llu, \"median_ns\": ",
            (unsigned long long)x->s.n, (unsigned long long)x->s.fails);
    json_num(f, x->s.median);
    fprintf(f, ", \"p99_ns\": ");
    json_num(f, x->s.p99);
    fprintf(f, ", \"p999_ns\": ");
    json_num(f, x->s.p999);
    fprintf(f, ", \"max_ns\": ");
    json_num(f, x->s.max);
    fprintf(f, ", \"mean_ns\": ");
    json_num(f, x->s.mean);
    fputc('}', f);
  }
  fprintf(f, "\n  ],\n  \"threads\": [");
  for (size_t i = 0; i < r->nthr; i++) {
    const bench_thr_row_t *x = &r->thr[i];
    fprintf(f, "%s\n    {\"allocator\": ", i ? "," : "");
    json_str(f, x->alloc);
    fprintf(f, ", \"threads\": %d, \"ops_per_s\": ", x->threads);
    json_num(f, x->ops_per_s);
    fprintf(f, ", \"ratio_to_1\": ");
    json_num(f, x->ratio);
    fprintf(f, ", \"fails\": %llu}", (unsigned long long)x->fails);
  }
  fprintf(f, "\n  ],\n  \"traces\": [");
  for (size_t i = 0; i < r->ntr; i++) {
    const bench_trace_row_t *x = &r->tr[i];
    fprintf(f, "%s\n    {\"trace\": ", i ? "," : "");
    json_str(f, x->trace);
    fprintf(f, ", \"policy\": ");
    json_str(f, x->policy);
    fprintf(f, ", \"ops\": %llu, \"peak_live\": %llu, \"min_pool\": %llu, "
            "\"replays\": %d, \"ratio\": ",
            (unsigned long long)x->ops, (unsigned long long)x->peak_live,
            (unsigned long long)x->min_pool, x->replays);
    json_num(f, x->min_pool ? x->ratio : NAN);
    fprintf(f, ", \"pytorch_cap_ratio\": ");
    json_num(f, x->anchor > 0 ? x->anchor : NAN);
    fputc('}', f);
  }
  fprintf(f, "\n  ],\n  \"metadata\": [");
  for (size_t i = 0; i < r->nmeta; i++) {
    const bench_meta_row_t *x = &r->meta[i];
    fprintf(f, "%s\n    {\"pool_size\": %llu, \"min_block\": %llu, "
            "\"meta_bytes\": %llu, \"pct\": ", i ? "," : "",
            (unsigned long long)x->pool_size, (unsigned long long)x->min_block,
            (unsigned long long)x->meta_bytes);
    json_num(f, x->pct);
    fprintf(f, ", \"create_ms\": ");
    json_num(f, x->create_ms);
    fprintf(f, ", \"destroy_ms\": ");
    json_num(f, x->destroy_ms);
    fputc('}', f);
  }
  fprintf(f, "\n  ],\n  \"targets\": [");
  for (size_t i = 0; i < r->ntgt; i++) {
    const bench_target_row_t *x = &r->tgt[i];
    fprintf(f, "%s\n    {\"what\": ", i ? "," : "");
    json_str(f, x->what);
    fprintf(f, ", \"measured\": ");
    json_str(f, x->measured);
    fprintf(f, ", \"target\": ");
    json_str(f, x->target);
    fprintf(f, ", \"result\": ");
    json_str(f, x->pass > 0 ? "pass" : x->pass == 0 ? "miss" : "n/a");
    fputc('}', f);
  }
  fprintf(f, "\n  ]\n}\n");
  int bad = ferror(f);
  if (fclose(f) || bad) {
    fprintf(stderr, "gpubuddy-bench: error writing %s\n", path);
    return -1;
  }
  return 0;
}
