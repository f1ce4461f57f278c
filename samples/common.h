/* SPDX-License-Identifier: MIT */
/*
 * common.h: what the sample programs share.
 *
 * A sample describes itself (name, help text, its own extra options) in a
 * gpbs_sample_t, hands it to gpbs_start() with argv, and gets back a
 * gpbs_t holding the parsed options and a ready pool. It then drives the
 * pool through gpbs_alloc()/gpbs_free(), which classify every error: a
 * failed allocation (GPB_ENOMEM, GPB_ETOOBIG) is part of the workload and is
 * counted, anything else is an unexpected error that makes the exit status
 * non-zero. gpbs_touch()/gpbs_verify() put the memory to use in the way the
 * backend allows (a kernel on the device, memset on host memory, nothing on
 * virtual address space). gpbs_report() prints the headline stats and the
 * free blocks per order; gpbs_finish() checks that the pool ended empty and
 * consistent, destroys it and returns the exit status.
 */
#ifndef GPBS_COMMON_H
#define GPBS_COMMON_H

#include "gpubuddy.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit statuses. */
#define GPBS_EXIT_OK 0
#define GPBS_EXIT_ERROR 1 /* an unexpected error during the run */
#define GPBS_EXIT_USAGE 2 /* bad command line */

typedef enum gpbs_argkind {
  GPBS_ARG_SIZE,  /* size_t, parsed by gpb_size_parse ("64K", "1.5GiB") */
  GPBS_ARG_UINT,  /* uint64_t, decimal */
  GPBS_ARG_DOUBLE /* double */
} gpbs_argkind_t;

struct gpbs;

/* One option of a sample's own; dst holds the default on entry. */
typedef struct gpbs_extra {
  const char *name; /* with the dashes: "--max-size" */
  gpbs_argkind_t kind;
  void *dst;        /* size_t *, uint64_t * or double *, by kind */
  const char *help;
} gpbs_extra_t;

typedef struct gpbs_sample {
  const char *prog;    /* "gpubuddy-sample-churn" */
  const char *summary; /* one line */
  const char *details; /* what it does, what a step is, what ENOMEM means */
  uint64_t default_steps;
  const gpbs_extra_t *extras; /* may be NULL */
  size_t nextras;
  /* NULL, or checks the parsed options before the pool is made: returns
   * NULL when they are fine, else a message (a usage error). */
  const char *(*validate)(const struct gpbs *s);
} gpbs_sample_t;

typedef struct gpbs {
  const gpbs_sample_t *sample;
  gpb_config_t cfg;
  uint64_t steps, pace_us, seed;
  bool quiet;
  gpb_pool_t *pool;
  gpb_pool_info_t info;
  uint64_t rng;         /* splitmix64 state */
  uint64_t fill_serial; /* makes each touch pattern different */
  uint64_t failed;      /* allocations refused (ENOMEM/ETOOBIG), tolerated */
  uint64_t errors;      /* unexpected errors: the exit status */
  uint64_t verified;    /* checksums compared */
  uint64_t t0_ns, last_progress_ns;
  bool warned_untouched;
} gpbs_t;

/* Parses argv, creates the pool and prints a one-line header. Returns true
 * when the sample should run; false with *status set when it should exit at
 * once (--help: 0, bad usage: GPBS_EXIT_USAGE, no pool: GPBS_EXIT_ERROR). */
bool gpbs_start(gpbs_t *s, const gpbs_sample_t *sample, int argc, char **argv,
                int *status);

/* ---------------------------------------------------------------- random */

uint64_t gpbs_rand(gpbs_t *s);
/* Uniform in [0, n); n > 0. */
uint64_t gpbs_below(gpbs_t *s, uint64_t n);
/* Uniform in [0, 1). */
double gpbs_uniform(gpbs_t *s);
/* Log-uniform in [lo, hi]: every power of two in between is equally likely. */
size_t gpbs_log_uniform(gpbs_t *s, size_t lo, size_t hi);

/* ------------------------------------------------------------ pool calls */

/* gpb_alloc_tagged. 0 on success. GPB_ENOMEM and GPB_ETOOBIG are returned
 * and counted in s->failed (the workload decides what they mean); any other
 * error is printed and counted in s->errors. */
int gpbs_alloc(gpbs_t *s, size_t size, uint32_t tag, void **out);
/* gpb_free; any error is printed and counted in s->errors. */
void gpbs_free(gpbs_t *s, void *p);

/* Writes a pattern derived from the returned value into [p, p + bytes):
 * a kernel on the device backend, memset on host and pinned memory,
 * nothing on the virtual backend. Keep the value to verify later. */
uint32_t gpbs_touch(gpbs_t *s, void *p, size_t bytes);
/* Reads back what gpbs_touch(p, bytes) wrote (a checksum kernel on the
 * device, sampled bytes on host memory); a mismatch is an unexpected
 * error. Returns 0 or -1. */
int gpbs_verify(gpbs_t *s, const void *p, size_t bytes, uint32_t value);

/* --------------------------------------------------------------- running */

/* False once SIGINT/SIGTERM arrived: the sample should wind down, so that
 * the pool is destroyed and a published segment removed. */
bool gpbs_running(const gpbs_t *s);
/* Sleeps --pace-us. */
void gpbs_pace(const gpbs_t *s);
/* At most once a second (and never with --quiet): "NAME: step i/N (p%), "
 * followed by the sample's own words and the pool's bytes in blocks. */
void gpbs_progress(gpbs_t *s, uint64_t step, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A line of narration on stdout unless --quiet. */
void gpbs_say(const gpbs_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints an unexpected error on stderr and counts it. */
void gpbs_error(gpbs_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* gpb_size_format ("1.5 MiB") into buf (GPB_SIZE_FORMAT_MAX bytes at
 * least); returns buf. */
const char *gpbs_fmt_size(uint64_t bytes, char *buf);

/* Prints the headline stats and free blocks per order on stdout. `what`
 * names the moment ("at the end", "checkerboard"). */
void gpbs_report(gpbs_t *s, const char *what);
/* Call with every allocation freed: waits for the kernels, checks that
 * the pool is consistent and empty and that its failure count matches the
 * sample's, destroys the pool, prints the result line and returns the exit
 * status. */
int gpbs_finish(gpbs_t *s);

#endif /* GPBS_COMMON_H */
