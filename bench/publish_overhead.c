/* SPDX-License-Identifier: MIT */
/*
 * publish_overhead.c: what live publishing costs the allocating thread.
 *
 * For each backend (host, virtual) it builds four pools: publishing off;
 * "hook", a pool with an empty hook, which pays what a hook makes the
 * pool pay (events built for every split and merge, stamped with the fine
 * clock) but publishes nothing; publishing on with no reader; and publishing on with
 * a reader thread polling every millisecond (a viewer at 1 kHz, far more
 * often than a display needs). All run the same churn: a live set of
 * blocks with log-uniform sizes, where each step frees one random block
 * and allocates a new one in its place. Steps are timed in batches of
 * BATCH with the monotonic clock, so the timer's own cost stays out of
 * the figures; a sample is a batch's time divided by BATCH. The modes take
 * turns in rounds with identical random sequences, so drift of the
 * machine hits them alike. It prints median, p99 and mean per step (one
 * free plus one alloc, with their splits and merges) and the overhead
 * against "off". A publisher alone stamps events with the kernel's tick
 * clock (lib/pool/pool.c), so "on" can cost less than "hook".
 */
#define _GNU_SOURCE /* pthread_setaffinity_np */
#include "gpubuddy.h"

#include <inttypes.h>
#include <sched.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { MODE_OFF, MODE_HOOK, MODE_ON, MODE_READER, NMODES };
static const char *const mode_name[NMODES] = {"off", "hook", "on",
                                              "on+reader"};

typedef struct bench_opts {
  long steps, live, rounds;
  int json, host, virt;
  int writer_cpu, reader_cpu; /* -1: wherever the scheduler puts them */
} bench_opts_t;

/* Pins the calling thread to one CPU (-1: leaves it alone). */
static void bench_pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
    fprintf(stderr, "publish_overhead: cannot pin to CPU %d\n", cpu);
}

typedef struct bench_run {
  gpb_pool_t *pool;
  void **live;
  uint64_t *samples;
  size_t nsamples;
} bench_run_t;

#define BATCH 16

static atomic_int reader_stop;

static void bench_nop_hook(const gpb_event_t *ev, void *user) {
  (void)ev, (void)user;
}

static uint64_t bench_rng(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1Dull;
}

static size_t bench_size(uint64_t *rng) {
  size_t s = (size_t)256 << (bench_rng(rng) % 9); /* 256 B .. 64 KiB */
  return s + (size_t)(bench_rng(rng) % s);
}

static int reader_cpu = -1;

static void *bench_reader(void *arg) {
  const char *name = arg;
  bench_pin(reader_cpu);
  gpb_attach_t *a;
  int rc = gpb_attach_open(name, &a);
  if (rc) {
    fprintf(stderr, "publish_overhead: reader: %s: %s\n", gpb_strerror(rc),
            gpb_last_error_detail());
    return NULL;
  }
  struct timespec ms = {0, 1000000};
  while (!atomic_load(&reader_stop)) {
    rc = gpb_attach_poll(a);
    if (rc < 0) {
      fprintf(stderr, "publish_overhead: reader: %s: %s\n", gpb_strerror(rc),
              gpb_last_error_detail());
      break;
    }
    nanosleep(&ms, NULL);
  }
  gpb_attach_close(a);
  return NULL;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void bench_steps(bench_run_t *r, long n, long live, uint64_t seed) {
  uint64_t rng = seed | 1;
  for (long i = 0; i + BATCH <= n; i += BATCH) {
    size_t k[BATCH], size[BATCH];
    for (int j = 0; j < BATCH; j++) {
      k[j] = (size_t)(bench_rng(&rng) % (uint64_t)live);
      size[j] = bench_size(&rng);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int j = 0; j < BATCH; j++) {
      gpb_free(r->pool, r->live[k[j]]);
      if (gpb_alloc(r->pool, size[j], &r->live[k[j]]) != 0) r->live[k[j]] = NULL;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r->samples[r->nsamples++] =
        ((uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000ull +
         (uint64_t)(t1.tv_nsec - t0.tv_nsec) + BATCH / 2) / BATCH;
  }
}

static int bench_backend(gpb_backend_t be, const bench_opts_t *o, int first) {
  bench_run_t run[NMODES];
  char name[64];
  snprintf(name, sizeof name, "bench-overhead-%d", (int)getpid());
  memset(run, 0, sizeof run);
  for (int m = 0; m < NMODES; m++) {
    gpb_config_t cfg;
    gpb_config_init(&cfg);
    cfg.backend = be;
    cfg.pool_size = be == GPB_BACKEND_VIRTUAL ? (size_t)4 << 30 : (size_t)256 << 20;
    cfg.min_block = 256;
    cfg.flags = GPB_CFG_NO_ENV;
    char nm[80];
    snprintf(nm, sizeof nm, "%s-%d", name, m);
    if (m == MODE_ON || m == MODE_READER) cfg.name = nm;
    int rc = gpb_pool_create(&cfg, &run[m].pool);
    if (rc == 0 && m == MODE_HOOK)
      rc = gpb_pool_set_hook(run[m].pool, bench_nop_hook, NULL);
    if (rc) {
      fprintf(stderr, "publish_overhead: %s pool: %s: %s\n",
              gpb_backend_name(be), gpb_strerror(rc), gpb_last_error_detail());
      return 1;
    }
    run[m].live = calloc((size_t)o->live, sizeof(void *));
    run[m].samples = malloc(((size_t)o->steps / BATCH + 1) * sizeof(uint64_t));
    if (!run[m].live || !run[m].samples) {
      fprintf(stderr, "publish_overhead: out of memory\n");
      return 1;
    }
    uint64_t rng = 42;
    for (long i = 0; i < o->live; i++)
      (void)gpb_alloc(run[m].pool, bench_size(&rng), &run[m].live[i]);
  }
  pthread_t rt;
  char rname[80];
  snprintf(rname, sizeof rname, "%s-%d", name, MODE_READER);
  atomic_store(&reader_stop, 0);
  if (pthread_create(&rt, NULL, bench_reader, rname) != 0) return 1;

  long per = o->steps / o->rounds;
  /* Warm-up: one round each, not recorded. */
  uint64_t seq0[NMODES];
  for (int m = 0; m < NMODES; m++) {
    bench_steps(&run[m], per < 10000 ? per : 10000, o->live, 7);
    run[m].nsamples = 0;
    gpb_stats_t st;
    gpb_pool_stats(run[m].pool, &st);
    seq0[m] = st.seq;
  }
  for (long rd = 0; rd < o->rounds; rd++) {
    for (int j = 0; j < NMODES; j++) {
      int m = (int)((rd + j) % NMODES); /* rotate who goes first */
      bench_steps(&run[m], per, o->live, 1000 + (uint64_t)rd);
    }
    if (!o->json && isatty(2))
      fprintf(stderr, "\r%s: round %ld/%ld", gpb_backend_name(be), rd + 1,
              o->rounds);
  }
  if (!o->json && isatty(2)) fprintf(stderr, "\n");
  atomic_store(&reader_stop, 1);
  pthread_join(rt, NULL);

  double med[NMODES], p99[NMODES], mean[NMODES], evs[NMODES];
  for (int m = 0; m < NMODES; m++) {
    bench_run_t *r = &run[m];
    gpb_stats_t st;
    gpb_pool_stats(r->pool, &st); /* every mode counts its events */
    evs[m] = r->nsamples ? (double)(st.seq - seq0[m]) / (double)(r->nsamples * BATCH) : 0;
    double sum = 0;
    for (size_t i = 0; i < r->nsamples; i++) sum += (double)r->samples[i];
    qsort(r->samples, r->nsamples, sizeof *r->samples, cmp_u64);
    med[m] = (double)r->samples[r->nsamples / 2];
    p99[m] = (double)r->samples[(size_t)((double)r->nsamples * 0.99)];
    mean[m] = sum / (double)r->nsamples;
  }
  for (int m = 0; m < NMODES; m++) {
    double om = 100.0 * (med[m] / med[0] - 1.0);
    double op = 100.0 * (p99[m] / p99[0] - 1.0);
    double oa = 100.0 * (mean[m] / mean[0] - 1.0);
    if (o->json)
      printf("%s{\"backend\":\"%s\",\"mode\":\"%s\",\"steps\":%zu,"
             "\"median_ns\":%.0f,\"p99_ns\":%.0f,\"mean_ns\":%.1f,"
             "\"overhead_median_pct\":%.1f,\"overhead_p99_pct\":%.1f,"
             "\"overhead_mean_pct\":%.1f,\"events_per_step\":%.2f}",
             first && m == 0 ? "" : ",\n", gpb_backend_name(be), mode_name[m],
             run[m].nsamples * BATCH, med[m], p99[m], mean[m], om, op, oa,
             evs[m]);
    else
      printf("%-8s %-10s %9zu %8.0f %8.0f %8.1f   %+6.1f%% %+6.1f%% %+6.1f%%  %5.2f\n",
             gpb_backend_name(be), mode_name[m], run[m].nsamples * BATCH, med[m],
             p99[m], mean[m], om, op, oa, evs[m]);
  }
  for (int m = 0; m < NMODES; m++) {
    gpb_pool_destroy(run[m].pool);
    free(run[m].live);
    free(run[m].samples);
  }
  return 0;
}

static void bench_usage(FILE *f) {
  fprintf(f,
          "usage: publish_overhead [--steps N] [--live N] [--rounds N]\n"
          "                        [--backend host|virtual|both] [--pin W,R] [--json]\n"
          "\n"
          "Times free+alloc steps on pools with live publishing off, with\n"
          "an empty hook (hook), on, and on with a reader polling\n"
          "every millisecond; prints median, p99 and mean ns per step (over\n"
          "batches of 16 steps) and the overhead against off.\n"
          "  --steps N    timed steps per mode (default 2000000)\n"
          "  --live N     blocks kept live (default 1024)\n"
          "  --rounds N   rounds the modes alternate in (default 50)\n"
          "  --backend B  host, virtual or both (default both)\n"
          "  --pin W,R    run the allocating thread on CPU W and the reader\n"
          "               on CPU R (see lscpu -e for which share a core)\n"
          "  --json       JSON array instead of a table\n");
}

int main(int argc, char **argv) {
  bench_opts_t o = {2000000, 1024, 50, 0, 1, 1, -1, -1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      bench_usage(stdout);
      return 0;
    } else if (!strcmp(a, "--json")) {
      o.json = 1;
    } else if (v && !strcmp(a, "--steps")) {
      o.steps = atol(v), i++;
    } else if (v && !strcmp(a, "--live")) {
      o.live = atol(v), i++;
    } else if (v && !strcmp(a, "--rounds")) {
      o.rounds = atol(v), i++;
    } else if (v && !strcmp(a, "--pin")) {
      if (sscanf(v, "%d,%d", &o.writer_cpu, &o.reader_cpu) != 2 ||
          o.writer_cpu < 0 || o.reader_cpu < 0) {
        fprintf(stderr, "publish_overhead: --pin %s: want W,R (two CPU "
                "numbers)\n", v);
        return 1;
      }
      i++;
    } else if (v && !strcmp(a, "--backend")) {
      o.host = !strcmp(v, "host") || !strcmp(v, "both");
      o.virt = !strcmp(v, "virtual") || !strcmp(v, "both");
      if (!o.host && !o.virt) {
        fprintf(stderr, "publish_overhead: --backend %s: want host, virtual "
                "or both\n", v);
        return 1;
      }
      i++;
    } else {
      fprintf(stderr, "publish_overhead: bad option %s (see --help)\n", a);
      return 1;
    }
  }
  if (o.steps < 1000 || o.live < 1 || o.rounds < 1 || o.steps / o.rounds < 100) {
    fprintf(stderr, "publish_overhead: want --steps >= 1000, --live >= 1, "
            "and at least 100 steps per round\n");
    return 1;
  }
  bench_pin(o.writer_cpu);
  reader_cpu = o.reader_cpu;
  if (o.json) printf("[");
  else
    printf("%-8s %-10s %9s %8s %8s %8s   %7s %7s %7s  %5s\n", "backend", "mode",
           "steps", "med ns", "p99 ns", "mean ns", "+med", "+p99", "+mean",
           "ev/st");
  int rc = 0;
  if (o.host) rc |= bench_backend(GPB_BACKEND_HOST, &o, 1);
  if (o.virt && !rc) rc |= bench_backend(GPB_BACKEND_VIRTUAL, &o, !o.host);
  if (o.json) printf("]\n");
  return rc;
}
