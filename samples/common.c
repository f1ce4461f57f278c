/* SPDX-License-Identifier: MIT */
/*
 * common.c: option parsing, error accounting, memory touching and stats
 * printing for the sample programs (see common.h).
 *
 * The workload's random numbers come from one splitmix64 stream seeded by
 * --seed, and nothing else draws from it: the touch patterns come from a
 * separate counter. So one seed gives the same sequence of requests on
 * every backend, and a trace recorded on the host replays the device run.
 *
 * Touching: on the device backend a kernel (kernels.cu) writes value ^ i
 * into word i, and a second kernel XORs the block back; the expected XOR has
 * a closed form. Builds without nvcc (GPBS_HAVE_KERNELS undefined) leave
 * device memory alone and say so once. Host and pinned memory get memset,
 * so the pages are really faulted in, and are verified by sampling bytes.
 * Virtual pools have no memory behind them and are never touched.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include "common.h"
#ifdef GPBS_HAVE_KERNELS
#include "kernels.h"
#endif

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t common_stop;

static void common_on_signal(int sig) {
  (void)sig;
  common_stop = 1;
}

/* ----------------------------------------------------------------- sizes */

const char *gpbs_fmt_size(uint64_t bytes, char *buf) {
  gpb_size_format(bytes, buf, GPB_SIZE_FORMAT_MAX);
  return buf;
}

/* Short form for the buddyinfo header: "256", "4K", "16M". */
static const char *common_fmt_short(uint64_t bytes, char *buf) {
  static const char sfx[] = "KMGTPE";
  int u = -1;
  while (bytes >= 1024 && bytes % 1024 == 0 && u < 5) {
    bytes /= 1024;
    u++;
  }
  if (u < 0)
    snprintf(buf, 32, "%" PRIu64, bytes);
  else
    snprintf(buf, 32, "%" PRIu64 "%c", bytes, sfx[u]);
  return buf;
}

/* ---------------------------------------------------------------- random */

static uint64_t common_mix(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t gpbs_rand(gpbs_t *s) { return common_mix(&s->rng); }

uint64_t gpbs_below(gpbs_t *s, uint64_t n) {
  /* Rejection keeps it exactly uniform; the loop almost never repeats. */
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t r;
  do r = gpbs_rand(s);
  while (r >= limit);
  return r % n;
}

double gpbs_uniform(gpbs_t *s) {
  return (double)(gpbs_rand(s) >> 11) * (1.0 / 9007199254740992.0);
}

size_t gpbs_log_uniform(gpbs_t *s, size_t lo, size_t hi) {
  if (lo < 1) lo = 1;
  if (hi <= lo) return lo;
  double l = log((double)lo), h = log((double)hi + 1);
  double v = exp(l + (h - l) * gpbs_uniform(s));
  size_t r = (size_t)v;
  if (r < lo) r = lo;
  if (r > hi) r = hi;
  return r;
}

/* --------------------------------------------------------------- options */

enum {
  OPT_BACKEND,
  OPT_POOL_SIZE,
  OPT_MIN_BLOCK,
  OPT_POLICY,
  OPT_PUBLISH,
  OPT_TRACE,
  OPT_STEPS,
  OPT_PACE_US,
  OPT_SEED,
  OPT_QUIET,
  OPT_HELP,
  OPT_COUNT
};

static const struct {
  const char *name, *arg, *help;
} common_opts[OPT_COUNT] = {
    [OPT_BACKEND] = {"--backend", "B",
                     "auto|device|pinned|host|virtual (default auto: device "
                     "if a GPU is usable, else host)"},
    [OPT_POOL_SIZE] = {"--pool-size", "SIZE",
                       "bytes to reserve, e.g. 64M, 1.5GiB (default %s)"},
    [OPT_MIN_BLOCK] = {"--min-block", "SIZE",
                       "smallest block, a power of two >= 16 (default %s)"},
    [OPT_POLICY] = {"--policy", "P",
                    "buddy|trim|bestfit (default buddy; trim gives the "
                    "unused tail of a block back)"},
    [OPT_PUBLISH] = {"--publish", "NAME",
                     "publish the pool live under NAME (the viewer and "
                     "gpubuddy-stat attach to it)"},
    [OPT_TRACE] = {"--trace", "FILE",
                   "record the pool's trace to FILE (.gz: compressed)"},
    [OPT_STEPS] = {"--steps", "N", "workload steps (default %s)"},
    [OPT_PACE_US] = {"--pace-us", "N",
                     "sleep N microseconds between steps, to watch live "
                     "(default 0)"},
    [OPT_SEED] = {"--seed", "N", "random seed (default 1)"},
    [OPT_QUIET] = {"--quiet", NULL,
                   "no progress or narration; the summary is still printed"},
    [OPT_HELP] = {"--help", NULL, "show this help and exit"},
};

static void common_usage(const gpbs_t *s) {
  const gpbs_sample_t *sm = s->sample;
  char b1[32], b2[32], steps[32];
  printf("Usage: %s [OPTIONS]\n%s\n\n%s\n\nOptions:\n", sm->prog, sm->summary,
         sm->details);
  snprintf(steps, sizeof steps, "%" PRIu64, sm->default_steps);
  for (int i = 0; i < OPT_COUNT; i++) {
    char head[40];
    snprintf(head, sizeof head, "%s%s%s", common_opts[i].name,
             common_opts[i].arg ? " " : "",
             common_opts[i].arg ? common_opts[i].arg : "");
    printf("  %-22s ", head);
    const char *arg = i == OPT_POOL_SIZE   ? gpbs_fmt_size(s->cfg.pool_size, b1)
                      : i == OPT_MIN_BLOCK ? gpbs_fmt_size(s->cfg.min_block, b2)
                                           : steps;
    /* The help strings above are this file's own literals. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    printf(common_opts[i].help, arg);
#pragma GCC diagnostic pop
    printf("\n");
  }
  if (sm->nextras) printf("\nOptions of this sample:\n");
  for (size_t i = 0; i < sm->nextras; i++) {
    const gpbs_extra_t *x = &sm->extras[i];
    char head[40], def[40];
    const char *meta = x->kind == GPBS_ARG_SIZE   ? "SIZE"
                       : x->kind == GPBS_ARG_UINT ? "N"
                                                  : "X";
    snprintf(head, sizeof head, "%s %s", x->name, meta);
    if (x->kind == GPBS_ARG_SIZE)
      gpbs_fmt_size(*(size_t *)x->dst, def);
    else if (x->kind == GPBS_ARG_UINT)
      snprintf(def, sizeof def, "%" PRIu64, *(uint64_t *)x->dst);
    else
      snprintf(def, sizeof def, "%g", *(double *)x->dst);
    printf("  %-22s %s (default %s)\n", head, x->help, def);
  }
  printf("  %-22s %s\n", "--version", "print the version and exit");
  printf("\nSIZE takes K, M, G suffixes (powers of 1024). Output: progress "
         "on stderr,\nthe summary on stdout. Exit status: 0 ok, 1 an "
         "unexpected error, 2 bad usage.\n");
}

static int common_parse_uint(const char *v, uint64_t *out) {
  if (!v || !*v || *v == '-' || *v == '+') return -1;
  errno = 0;
  char *end;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || *end) return -1;
  *out = x;
  return 0;
}

static int common_parse_value(gpbs_argkind_t kind, const char *v, void *dst) {
  switch (kind) {
  case GPBS_ARG_SIZE:
    return gpb_size_parse(v, (size_t *)dst) ? -1 : 0;
  case GPBS_ARG_UINT:
    return common_parse_uint(v, (uint64_t *)dst);
  case GPBS_ARG_DOUBLE: {
    if (!v || !*v) return -1;
    errno = 0;
    char *end;
    double d = strtod(v, &end);
    if (errno || *end || !isfinite(d)) return -1;
    *(double *)dst = d;
    return 0;
  }
  }
  return -1;
}

static int common_bad(const gpbs_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int common_bad(const gpbs_t *s, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s: ", s->sample->prog);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " (try '%s --help')\n", s->sample->prog);
  return GPBS_EXIT_USAGE;
}

/* Returns -1 to go on, else the exit status. */
static int common_parse(gpbs_t *s, int argc, char **argv) {
  const gpbs_sample_t *sm = s->sample;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h")) a = "--help";
    if (!strcmp(a, "--version")) {
      printf("%s %s\n", sm->prog, gpb_version());
      return GPBS_EXIT_OK;
    }
    if (strncmp(a, "--", 2) != 0)
      return common_bad(s, "unexpected argument '%s'", a);
    const char *eq = strchr(a, '=');
    size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
    int opt = -1;
    const gpbs_extra_t *x = NULL;
    for (int k = 0; k < OPT_COUNT && opt < 0; k++)
      if (strlen(common_opts[k].name) == nlen &&
          !strncmp(common_opts[k].name, a, nlen))
        opt = k;
    for (size_t k = 0; k < sm->nextras && opt < 0 && !x; k++)
      if (strlen(sm->extras[k].name) == nlen &&
          !strncmp(sm->extras[k].name, a, nlen))
        x = &sm->extras[k];
    if (opt < 0 && !x) return common_bad(s, "unknown option '%.*s'", (int)nlen, a);

    bool flag = opt == OPT_QUIET || opt == OPT_HELP;
    const char *v = NULL;
    if (flag) {
      if (eq) return common_bad(s, "option '%.*s' takes no value", (int)nlen, a);
    } else if (eq) {
      v = eq + 1;
    } else if (i + 1 < argc) {
      v = argv[++i];
    } else {
      return common_bad(s, "option '%s' needs a value", a);
    }
    const char *oname = opt >= 0 ? common_opts[opt].name : x->name;

    if (x) {
      if (common_parse_value(x->kind, v, x->dst))
        return common_bad(s, "bad value '%s' for %s", v, oname);
      continue;
    }
    int rc = 0;
    switch (opt) {
    case OPT_HELP:
      common_usage(s);
      return GPBS_EXIT_OK;
    case OPT_QUIET: s->quiet = true; break;
    case OPT_BACKEND: rc = gpb_backend_parse(v, &s->cfg.backend); break;
    case OPT_POLICY: rc = gpb_policy_parse(v, &s->cfg.policy); break;
    case OPT_POOL_SIZE: rc = gpb_size_parse(v, &s->cfg.pool_size); break;
    case OPT_MIN_BLOCK: rc = gpb_size_parse(v, &s->cfg.min_block); break;
    case OPT_PUBLISH:
      if (!*v || strlen(v) >= GPB_NAME_MAX)
        return common_bad(s, "--publish NAME must be 1 to %d characters",
                          GPB_NAME_MAX - 1);
      s->cfg.name = v;
      break;
    case OPT_TRACE:
      if (!*v) return common_bad(s, "--trace needs a file name");
      s->cfg.trace_path = v;
      break;
    case OPT_STEPS: rc = common_parse_uint(v, &s->steps); break;
    case OPT_PACE_US: rc = common_parse_uint(v, &s->pace_us); break;
    case OPT_SEED: rc = common_parse_uint(v, &s->seed); break;
    default: break;
    }
    if (rc) return common_bad(s, "bad value '%s' for %s", v, oname);
  }
  if (s->pace_us > 60000000ull)
    return common_bad(s, "--pace-us is at most 60000000 (a minute)");
  const char *why = sm->validate ? sm->validate(s) : NULL;
  if (why) return common_bad(s, "%s", why);
  return -1;
}

/* ----------------------------------------------------------------- start */

bool gpbs_start(gpbs_t *s, const gpbs_sample_t *sample, int argc, char **argv,
                int *status) {
  memset(s, 0, sizeof *s);
  s->sample = sample;
  gpb_config_init(&s->cfg);
  s->steps = sample->default_steps;
  s->seed = 1;
  int rc = common_parse(s, argc, argv);
  if (rc >= 0) {
    *status = rc;
    return false;
  }
  s->rng = s->seed;

  rc = gpb_pool_create(&s->cfg, &s->pool);
  if (rc) {
    const char *d = gpb_last_error_detail();
    /* The detail says what happened; the code's name is for searching. */
    fprintf(stderr, "%s: cannot create the pool: %s [%s]\n", sample->prog,
            *d ? d : gpb_strerror(rc), gpb_err_name(rc));
    *status = GPBS_EXIT_ERROR;
    return false;
  }
  gpb_pool_info(s->pool, &s->info);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = common_on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  char b1[32], b2[32];
  printf("%s: %s pool on %s (%s policy, min block %s), seed %" PRIu64
         ", %" PRIu64 " steps%s%s%s%s\n",
         sample->prog, gpbs_fmt_size(s->info.managed_size, b1),
         gpb_backend_name(s->info.backend), gpb_policy_name(s->info.policy),
         gpbs_fmt_size(s->info.min_block, b2), s->seed, s->steps,
         s->info.name[0] ? ", published as " : "", s->info.name,
         s->cfg.trace_path ? ", trace to " : "",
         s->cfg.trace_path ? s->cfg.trace_path : "");
  fflush(stdout);
  s->t0_ns = s->last_progress_ns = gpb_now_ns();
  return true;
}

/* ------------------------------------------------------------ pool calls */

int gpbs_alloc(gpbs_t *s, size_t size, uint32_t tag, void **out) {
  int rc = gpb_alloc_tagged(s->pool, size, tag, out);
  if (rc == GPB_ENOMEM || rc == GPB_ETOOBIG) {
    s->failed++;
  } else if (rc) {
    gpbs_error(s, "gpb_alloc(%zu) failed: %s: %s", size, gpb_err_name(rc),
               gpb_last_error_detail());
  }
  return rc;
}

void gpbs_free(gpbs_t *s, void *p) {
  int rc = gpb_free(s->pool, p);
  if (rc)
    gpbs_error(s, "gpb_free(%p) failed: %s: %s", p, gpb_err_name(rc),
               gpb_last_error_detail());
}

/* XOR of 0, 1, ..., m. */
static uint64_t common_xor_upto(uint64_t m) {
  switch (m & 3) {
  case 0: return m;
  case 1: return 1;
  case 2: return m + 1;
  default: return 0;
  }
}

uint32_t gpbs_touch(gpbs_t *s, void *p, size_t bytes) {
  uint32_t v = (uint32_t)common_mix(&s->fill_serial) | 1u;
  if (!p || !bytes) return v;
  switch (s->info.backend) {
  case GPB_BACKEND_HOST:
  case GPB_BACKEND_PINNED:
    memset(p, (int)(v & 0xff), bytes);
    break;
  case GPB_BACKEND_DEVICE: {
#ifdef GPBS_HAVE_KERNELS
    int e = gpbs_kern_fill(p, bytes, v);
    if (e) gpbs_error(s, "fill kernel on %zu bytes: %s", bytes, gpbs_kern_error(e));
#else
    if (!s->warned_untouched && !s->quiet)
      fprintf(stderr, "%s: built without nvcc: device memory is not touched\n",
              s->sample->prog);
    s->warned_untouched = true;
#endif
    break;
  }
  default: break; /* virtual: there is no memory */
  }
  return v;
}

int gpbs_verify(gpbs_t *s, const void *p, size_t bytes, uint32_t value) {
  if (!p || !bytes) return 0;
  switch (s->info.backend) {
  case GPB_BACKEND_HOST:
  case GPB_BACKEND_PINNED: {
    /* Every byte of small blocks, 4096 spread over large ones. */
    const unsigned char *c = p;
    unsigned char want = (unsigned char)(value & 0xff);
    size_t stride = bytes <= 65536 ? 1 : bytes / 4096;
    s->verified++;
    for (size_t i = 0; i < bytes; i += stride)
      if (c[i] != want) {
        gpbs_error(s, "block %p (%zu bytes): byte %zu is 0x%02x, wrote 0x%02x",
                   p, bytes, i, c[i], want);
        return -1;
      }
    if (c[bytes - 1] != want) {
      gpbs_error(s, "block %p (%zu bytes): last byte is 0x%02x, wrote 0x%02x",
                 p, bytes, c[bytes - 1], want);
      return -1;
    }
    return 0;
  }
  case GPB_BACKEND_DEVICE: {
#ifdef GPBS_HAVE_KERNELS
    uint64_t n = bytes / 4;
    if (n == 0) return 0;
    uint32_t got, want = (uint32_t)common_xor_upto(n - 1) ^ ((n & 1) ? value : 0);
    int e = gpbs_kern_xor(p, bytes, &got);
    s->verified++;
    if (e) {
      gpbs_error(s, "checksum kernel on %zu bytes: %s", bytes, gpbs_kern_error(e));
      return -1;
    }
    if (got != want) {
      gpbs_error(s, "block %p (%zu bytes): checksum 0x%08x, expected 0x%08x",
                 p, bytes, got, want);
      return -1;
    }
#else
    (void)common_xor_upto;
#endif
    return 0;
  }
  default: return 0;
  }
}

/* --------------------------------------------------------------- running */

bool gpbs_running(const gpbs_t *s) {
  (void)s;
  return !common_stop;
}

void gpbs_pace(const gpbs_t *s) {
  if (!s->pace_us || common_stop) return;
  struct timespec ts = {(time_t)(s->pace_us / 1000000),
                        (long)(s->pace_us % 1000000) * 1000};
  nanosleep(&ts, NULL); /* a signal cuts it short, which is what we want */
}

void gpbs_progress(gpbs_t *s, uint64_t step, const char *fmt, ...) {
  if (s->quiet) return;
  uint64_t now = gpb_now_ns();
  if (now - s->last_progress_ns < 1000000000ull) return;
  s->last_progress_ns = now;
  gpb_stats_t st;
  char b[32];
  gpb_pool_stats(s->pool, &st);
  fprintf(stderr, "%s: step %" PRIu64 "/%" PRIu64 " (%.0f%%), ",
          s->sample->prog, step, s->steps,
          s->steps ? 100.0 * (double)step / (double)s->steps : 100.0);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, ", %s in blocks, %" PRIu64 " failed allocs\n",
          gpbs_fmt_size(st.block_bytes, b), s->failed);
}

void gpbs_say(const gpbs_t *s, const char *fmt, ...) {
  if (s->quiet) return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  putchar('\n');
  fflush(stdout);
}

void gpbs_error(gpbs_t *s, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s: error: ", s->sample->prog);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  s->errors++;
}

/* ---------------------------------------------------------------- report */

static double common_pct(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* Free blocks per order, in rows of at most 12 orders, like
 * /proc/buddyinfo with a header naming each order's block size. */
static void common_buddyinfo(const gpbs_t *s, const gpb_stats_t *st) {
  char b[32];
  printf("free blocks per order (buddyinfo):\n");
  for (uint32_t base = 0; base < st->num_orders; base += 12) {
    uint32_t end = base + 12 < st->num_orders ? base + 12 : st->num_orders;
    printf("  order %*s", 2, "");
    for (uint32_t o = base; o < end; o++) printf(" %6u", o);
    printf("\n  size  %*s", 2, "");
    for (uint32_t o = base; o < end; o++)
      printf(" %6s", common_fmt_short(st->min_block << o, b));
    printf("\n  free  %*s", 2, "");
    for (uint32_t o = base; o < end; o++)
      printf(" %6" PRIu64, st->free_blocks[o]);
    printf("\n");
  }
  (void)s;
}

void gpbs_report(gpbs_t *s, const char *what) {
  gpb_stats_t st;
  int rc = gpb_pool_stats(s->pool, &st);
  if (rc) {
    gpbs_error(s, "gpb_pool_stats: %s", gpb_err_name(rc));
    return;
  }
  char b1[32], b2[32], b3[32], b4[32];
  double secs = (double)(gpb_now_ns() - s->t0_ns) / 1e9;
  printf("--- %s: stats %s (%.2f s) ---\n", s->sample->prog, what, secs);
  printf("pool            %s managed on %s, %s policy, min block %s, "
         "%u orders\n",
         gpbs_fmt_size(st.managed_bytes, b1), gpb_backend_name(s->info.backend),
         gpb_policy_name(s->info.policy), gpbs_fmt_size(st.min_block, b2),
         st.num_orders);
  printf("operations      %" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64
         " splits, %" PRIu64 " merges, %" PRIu64 " live\n",
         st.allocs, st.frees, st.splits, st.merges, st.live_allocs);
  printf("requested       live %s, peak %s\n",
         gpbs_fmt_size(st.requested_bytes, b1),
         gpbs_fmt_size(st.requested_peak, b2));
  printf("in blocks       live %s, peak %s (%.1f%% of the pool)\n",
         gpbs_fmt_size(st.block_bytes, b1), gpbs_fmt_size(st.block_peak, b2),
         common_pct(st.block_peak, st.managed_bytes));
  printf("internal frag   %s (%.1f%% of bytes in blocks)\n",
         gpbs_fmt_size(st.internal_frag_bytes, b1),
         common_pct(st.internal_frag_bytes, st.block_bytes));
  printf("external frag   %.3f (largest free block %s of %s free, %.1f%%)\n",
         st.external_frag, gpbs_fmt_size(st.largest_free, b3),
         gpbs_fmt_size(st.free_bytes, b4),
         common_pct(st.largest_free, st.free_bytes));
  printf("failures        %" PRIu64 " failed allocations (ENOMEM/ETOOBIG: "
         "counted, not fatal)\n",
         st.failures);
  common_buddyinfo(s, &st);
  fflush(stdout);
}

int gpbs_finish(gpbs_t *s) {
#ifdef GPBS_HAVE_KERNELS
  if (s->info.backend == GPB_BACKEND_DEVICE) {
    int e = gpbs_kern_sync();
    if (e) gpbs_error(s, "a kernel failed: %s", gpbs_kern_error(e));
  }
#endif
  int rc = gpb_pool_check(s->pool);
  if (rc)
    gpbs_error(s, "pool check: %s: %s", gpb_err_name(rc),
               gpb_last_error_detail());
  gpb_stats_t st;
  rc = gpb_pool_stats(s->pool, &st);
  if (rc) {
    gpbs_error(s, "gpb_pool_stats: %s", gpb_err_name(rc));
  } else {
    if (st.live_allocs || st.requested_bytes || st.block_bytes)
      gpbs_error(s, "the pool is not empty after the sample freed everything: "
                 "%" PRIu64 " allocations, %" PRIu64 " bytes in blocks",
                 st.live_allocs, st.block_bytes);
    if (st.failures != s->failed)
      gpbs_error(s, "the pool counted %" PRIu64 " failed allocations, the "
                 "sample %" PRIu64, st.failures, s->failed);
    if (st.allocs != st.frees)
      gpbs_error(s, "%" PRIu64 " allocs but %" PRIu64 " frees", st.allocs,
                 st.frees);
  }
#ifdef GPBS_HAVE_KERNELS
  if (s->info.backend == GPB_BACKEND_DEVICE) gpbs_kern_fini();
#endif
  gpb_pool_destroy(s->pool);
  s->pool = NULL;

  if (common_stop) printf("%s: interrupted; stopped early\n", s->sample->prog);
  if (s->errors) {
    printf("%s: FAILED: %" PRIu64 " unexpected errors (see stderr)\n",
           s->sample->prog, s->errors);
    return GPBS_EXIT_ERROR;
  }
  printf("%s: ok: %" PRIu64 " failed allocations (expected, counted), %" PRIu64
         " blocks verified\n",
         s->sample->prog, s->failed, s->verified);
  return GPBS_EXIT_OK;
}
