/* SPDX-License-Identifier: MIT */
/*
 * gpubuddy-stat: prints a live pool's state in the terminal.
 *
 * It attaches to a pool published under a name (gpb_config_t.name or
 * GPB_PUBLISH), rebuilds the block map from the shared-memory segment and
 * prints the headline stats and one /proc/buddyinfo-style line of free
 * blocks per order. --watch keeps the reader attached and redraws; it
 * polls much more often than it redraws, so it keeps up with the ring
 * instead of asking the writer for a keyframe every time.
 */
#include "gpubuddy.h"
#include "json.h"
#include "opts.h"
#include "snapshot.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Exit status (docs/DESIGN.md, "Programs"): 0 ok, 1 error (no such pool
 * included), 2 usage; 3 the writer is gone, which only stat tells. */
enum { EXIT_GONE = 3, EXIT_NOTFOUND = 1 };

typedef struct stat_opts {
  const char *name;
  int json, list, watch, all, remove_stale;
  double interval;
} stat_opts_t;

static void stat_usage(FILE *f) {
  fprintf(f,
          "Usage: gpubuddy-stat [--json] [--watch [SECONDS]] NAME\n"
          "       gpubuddy-stat --list [--json]\n"
          "       gpubuddy-stat --all [--json]\n"
          "\n"
          "Prints the state of the live pool published as NAME (a pool made\n"
          "with gpb_config_t.name, or run with GPB_PUBLISH=NAME): used, free\n"
          "and requested bytes, internal waste, largest free block, external\n"
          "fragmentation, counts of allocations, frees and failures, and the\n"
          "free blocks per order in the style of /proc/buddyinfo.\n"
          "\n"
          "  --watch [SECONDS]  redraw every SECONDS (default 1) until the\n"
          "                     writer goes away or Ctrl-C\n"
          "  --json             one JSON object per report (with --watch, one\n"
          "                     per line); with --list, a JSON array\n"
          "  --list             list the pools that can be attached now (and,\n"
          "                     on stderr, stale segments of killed writers)\n"
          "  --remove-stale     remove the stale segments of this user's\n"
          "  --all              every pool published on this machine, one\n"
          "                     line each: name, pid, device, pool size, used,\n"
          "                     requested, largest free, waste, external\n"
          "                     fragmentation, failed allocations\n"
          "  --help             this text\n"
          "  --version          the version\n"
          "\n"
          "Exit status: 0 ok, 1 error (no such pool included), 2 usage, 3 the\n"
          "writer is gone"
          " (the last state it published is still printed when known).\n");
}

static void stat_sleep(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

/* gpb_size_format, as an expression for printf's arguments. */
static const char *stat_bytes(uint64_t v, char *buf, size_t n) {
  gpb_size_format(v, buf, n);
  return buf;
}

/* Block sizes as short labels for the buddyinfo header: 256, 4K, 2M... */
static const char *stat_short(uint64_t v, char *buf, size_t n) {
  static const char sfx[] = "KMGTPE";
  int u = -1;
  while (v >= 1024 && (v & 1023) == 0 && u < 5) {
    v >>= 10;
    u++;
  }
  if (u < 0) snprintf(buf, n, "%" PRIu64, v);
  else snprintf(buf, n, "%" PRIu64 "%c", v, sfx[u]);
  return buf;
}

static double stat_pct(uint64_t a, uint64_t b) {
  return b ? 100.0 * (double)a / (double)b : 0.0;
}

static void stat_print_text(const gpb_pool_info_t *in, const gpb_stats_t *s,
                            int gone) {
  char b1[32], b2[32], b3[32];
  printf("pool '%s'   %s backend, %s policy   event %" PRIu64 "%s\n", in->name,
         gpb_backend_name(in->backend), gpb_policy_name(in->policy), s->seq,
         gone ? "   (writer gone: last state)" : "");
  printf("  managed    %12s   min block %s   %u orders\n",
         stat_bytes(s->managed_bytes, b1, sizeof b1),
         stat_bytes(s->min_block, b2, sizeof b2), s->num_orders);
  printf("  used       %12s  (%5.1f%%)   %" PRIu64 " live allocations\n",
         stat_bytes(s->block_bytes, b1, sizeof b1),
         stat_pct(s->block_bytes, s->managed_bytes), s->live_allocs);
  printf("  free       %12s  (%5.1f%%)\n", stat_bytes(s->free_bytes, b1, sizeof b1),
         stat_pct(s->free_bytes, s->managed_bytes));
  printf("  requested  %12s   internal waste %s (%.1f%% of used)\n",
         stat_bytes(s->requested_bytes, b1, sizeof b1),
         stat_bytes(s->internal_frag_bytes, b2, sizeof b2),
         stat_pct(s->internal_frag_bytes, s->block_bytes));
  printf("  largest free block %s   external fragmentation %.4f\n",
         stat_bytes(s->largest_free, b3, sizeof b3), s->external_frag);
  printf("  allocs %" PRIu64 "   frees %" PRIu64 "   failures %" PRIu64
         "   splits %" PRIu64 "   merges %" PRIu64 "\n",
         s->allocs, s->frees, s->failures, s->splits, s->merges);
  printf("free blocks per order (block size above, count below):\n");
  printf("%-14s", "  size");
  for (uint32_t k = 0; k < s->num_orders; k++)
    printf(" %6s", stat_short(s->min_block << k, b1, sizeof b1));
  printf("\n");
  printf("%-14s", "  free");
  for (uint32_t k = 0; k < s->num_orders; k++)
    printf(" %6" PRIu64, s->free_blocks[k]);
  printf("\n");
}

static void stat_print_json(const gpb_pool_info_t *in, const gpb_stats_t *s,
                            int gone) {
  printf("{\"name\":");
  gpbt_json_str(stdout, in->name);
  printf(",\"backend\":\"%s\",\"policy\":\"%s\",\"writer_gone\":%s,"
         "\"seq\":%" PRIu64 ",\"managed_bytes\":%" PRIu64
         ",\"min_block\":%" PRIu64 ",\"used_bytes\":%" PRIu64
         ",\"free_bytes\":%" PRIu64 ",\"requested_bytes\":%" PRIu64
         ",\"internal_waste_bytes\":%" PRIu64 ",\"largest_free\":%" PRIu64
         ",\"external_frag\":%.6f,\"allocs\":%" PRIu64 ",\"frees\":%" PRIu64
         ",\"failures\":%" PRIu64 ",\"splits\":%" PRIu64 ",\"merges\":%" PRIu64
         ",\"live_allocs\":%" PRIu64 ",\"free_blocks\":[",
         gpb_backend_name(in->backend), gpb_policy_name(in->policy),
         gone ? "true" : "false", s->seq, s->managed_bytes, s->min_block,
         s->block_bytes, s->free_bytes, s->requested_bytes,
         s->internal_frag_bytes, s->largest_free, s->external_frag, s->allocs,
         s->frees, s->failures, s->splits, s->merges, s->live_allocs);
  for (uint32_t k = 0; k < s->num_orders; k++)
    printf("%s%" PRIu64, k ? "," : "", s->free_blocks[k]);
  printf("]}\n");
}

typedef struct stat_list {
  int json, n;
} stat_list_t;

static void stat_list_one(const char *name, void *user) {
  stat_list_t *l = user;
  if (l->json) {
    printf("%s", l->n ? "," : "[");
    gpbt_json_str(stdout, name);
  } else {
    printf("%s\n", name);
  }
  l->n++;
}

static void stat_stale_one(const char *name, void *user) {
  stat_list_t *l = user;
  fprintf(stderr, "stale: %s\n", name);
  l->n++;
}

static int stat_list(int json) {
  stat_list_t l = {json, 0};
  int rc = gpb_list_pools(stat_list_one, &l);
  if (rc) {
    fprintf(stderr, "gpubuddy-stat: cannot list pools: %s: %s\n",
            gpb_strerror(rc), gpb_last_error_detail());
    return 1;
  }
  if (json) printf("%s\n", l.n ? "]" : "[]");
  else if (l.n == 0) fprintf(stderr, "gpubuddy-stat: no live pools\n");
  /* Left behind by writers that were killed: offered, not listed. */
  stat_list_t st = {0, 0};
  gpb_list_stale_pools(stat_stale_one, &st);
  if (st.n)
    fprintf(stderr, "gpubuddy-stat: %d stale segment%s (writer gone) above; "
            "remove with gpubuddy-stat --remove-stale\n", st.n,
            st.n == 1 ? "" : "s");
  return 0;
}

static void stat_remove_one(const char *name, void *user) {
  int *n = user;
  if (gpb_remove_stale_pool(name) == 0) {
    printf("removed stale segment %s\n", name);
    ++*n;
  } else {
    fprintf(stderr, "gpubuddy-stat: %s: %s\n", name, gpb_last_error_detail());
  }
}

/* --remove-stale: every stale segment of this user's, checked again. */
static int stat_remove_stale(void) {
  int n = 0;
  int rc = gpb_list_stale_pools(stat_remove_one, &n);
  if (rc) {
    fprintf(stderr, "gpubuddy-stat: %s\n", gpb_last_error_detail());
    return 1;
  }
  if (!n) fprintf(stderr, "gpubuddy-stat: no stale segments\n");
  return 0;
}

/* --watch [SECONDS]: the optional SECONDS (opts.h's GPBT_ARG_NUMBER). */
static const char *stat_set_watch(void *ov, const char *a) {
  stat_opts_t *o = ov;
  char *end;
  o->watch = 1;
  if (!a) return NULL;
  double v = strtod(a, &end);
  if (end == a || *end || !(v >= 0.05 && v <= 86400))
    return "0.05 to 86400 seconds";
  o->interval = v;
  return NULL;
}

static const gpbt_opt_t stat_opt_defs[] = {
    GPBT_FLAG("json", stat_opts_t, json, 1),
    GPBT_FLAG("list", stat_opts_t, list, 1),
    GPBT_FLAG("all", stat_opts_t, all, 1),
    GPBT_FLAG("remove-stale", stat_opts_t, remove_stale, 1),
    GPBT_SET("watch", GPBT_ARG_NUMBER, stat_set_watch),
    GPBT_SHORT('w', "watch"),
    GPBT_HELP,
    GPBT_VERSION,
};

/* The command line into o: -1 to go on, else the exit status. */
static int stat_parse(int argc, char **argv, stat_opts_t *o) {
  static const gpbt_optspec_t spec = {
      "gpubuddy-stat", stat_opt_defs,
      sizeof stat_opt_defs / sizeof stat_opt_defs[0], stat_usage, NULL};
  memset(o, 0, sizeof *o);
  o->interval = 1.0;
  int n, rc = gpbt_opts_parse(&spec, argc, argv, o, &n);
  if (rc >= 0) return rc;
  const char *p = "gpubuddy-stat";
  if (n > 1)
    return gpbt_usage_error(p, "one pool name at a time (%s, %s)", argv[1],
                            argv[2]);
  o->name = n ? argv[1] : NULL;
  int modes = o->list + o->all + o->remove_stale + !!o->name;
  if (!modes) return gpbt_usage_error(p, "which pool? give NAME or --list");
  /* One report at a time: "--list NAME" or "--all --watch" ran the first
   * and dropped the rest without a word. */
  if (modes > 1)
    return gpbt_usage_error(p, "give one of NAME, --list, --all, "
                            "--remove-stale");
  if (o->remove_stale && o->json)
    return gpbt_usage_error(p, "--remove-stale reports in text only; --json "
                            "is for NAME, --list and --all");
  if (o->watch && !o->name)
    return gpbt_usage_error(p, "--watch needs a pool NAME, not %s",
                            o->list  ? "--list"
                            : o->all ? "--all"
                                     : "--remove-stale");
  return -1;
}

/* --all: one line (or JSON object) per pool published now. An idle
 * writer whose state has not come in half a second is listed as such. */
static int stat_all(int json) {
  gpbt_pool_snap_t *v;
  size_t n;
  int rc = gpbt_snapshot_all(0.5, &v, &n);
  if (rc) {
    fprintf(stderr, "gpubuddy-stat: %s: %s\n", gpb_strerror(rc),
            gpb_last_error_detail());
    return 1;
  }
  if (json) printf("[");
  else
    printf("%-24s %8s %4s %10s %10s %10s %10s %10s %6s %7s\n", "name", "pid",
           "dev", "pool", "used", "requested", "largest", "waste", "extfrag",
           "failed");
  for (size_t i = 0; i < n; i++) {
    const gpbt_pool_snap_t *p = &v[i];
    const gpb_stats_t *s = &p->stats;
    if (json) {
      printf("%s\n {\"name\":", i ? "," : "");
      gpbt_json_str(stdout, p->name);
      printf(",\"pid\":%d,\"device\":%d,\"pool_size\":%" PRIu64,
             (int)p->info.pid, p->info.device, p->info.pool_size);
      char buf[2048];
      int len = p->state > 0 ? gpb_stats_json(s, buf, sizeof buf) : 0;
      if (len > 2 && (size_t)len < sizeof buf) /* its keys join ours */
        printf(",%.*s}", len - 2, buf + 1);
      else
        printf(",\"error\":\"%s\"}", p->state < 0 ? gpb_err_name(p->state)
                                                   : "no state yet");
      continue;
    }
    char b[5][32];
    if (p->state > 0)
      printf("%-24s %8d %4d %10s %10s %10s %10s %10s %6.3f %7" PRIu64 "\n",
             p->name, (int)p->info.pid, p->info.device,
             stat_bytes(p->info.pool_size, b[0], 32),
             stat_bytes(s->block_bytes, b[1], 32),
             stat_bytes(s->requested_bytes, b[2], 32),
             stat_bytes(s->largest_free, b[3], 32),
             stat_bytes(s->internal_frag_bytes, b[4], 32), s->external_frag,
             s->failures);
    else
      printf("%-24s %8d %4d %10s  (%s)\n", p->name, (int)p->info.pid,
             p->info.device, stat_bytes(p->info.pool_size, b[0], 32),
             p->state < 0 ? gpb_strerror(p->state)
                          : "no state yet: the writer is idle");
  }
  if (json) printf("%s]\n", n ? "\n" : "");
  free(v);
  return 0;
}

/* One pool being read: its reader and what the polls told so far. */
typedef struct stat_run {
  const stat_opts_t *o;
  gpb_attach_t *a;
  int synced, gone;
  char gone_msg[512];
} stat_run_t;

/* One poll: 0, or -1 after a line on stderr (the reader is closed). */
static int stat_poll(stat_run_t *st) {
  int rc = gpb_attach_poll(st->a);
  if (rc > 0) st->synced = 1;
  if (rc == GPB_ECLOSED) {
    st->gone = 1;
    snprintf(st->gone_msg, sizeof st->gone_msg, "%s", gpb_last_error_detail());
  } else if (rc < 0) {
    fprintf(stderr, "gpubuddy-stat: '%s': %s: %s\n", st->o->name,
            gpb_strerror(rc), gpb_last_error_detail());
    gpb_attach_close(st->a);
    return -1;
  }
  return 0;
}

/* The first poll that applies something means the model holds the
 * pool's state (from the ring or a keyframe). A writer idle since long
 * ago serves the keyframe only at its next allocation. 0, or -1 after a
 * line on stderr (the reader is closed). */
static int stat_sync(stat_run_t *st) {
  int warned = 0;
  uint64_t start = gpb_now_ns();
  while (!st->synced && !st->gone) {
    if (stat_poll(st)) return -1;
    if (st->synced || st->gone) break;
    double waited = (double)(gpb_now_ns() - start) / 1e9;
    if (!warned && waited > 0.5) {
      fprintf(stderr, "gpubuddy-stat: waiting for a keyframe from '%s' "
              "(the writer sends one at its next allocation)...\n",
              st->o->name);
      warned = 1;
    }
    if (!st->o->watch && waited > 3.0) {
      fprintf(stderr, "gpubuddy-stat: '%s' sent no keyframe in 3 s: the "
              "writer is idle; try again while it allocates, or use "
              "--watch\n", st->o->name);
      gpb_attach_close(st->a);
      return -1;
    }
    stat_sleep(0.01);
  }
  /* One more poll: it takes what came meanwhile and tells whether the
   * writer is still there. */
  if (st->synced && !st->gone && gpb_attach_poll(st->a) == GPB_ECLOSED) {
    st->gone = 1;
    snprintf(st->gone_msg, sizeof st->gone_msg, "%s", gpb_last_error_detail());
  }
  return 0;
}

/* Prints the report, and with --watch again every interval until the
 * pool is gone. 0, or -1 after a line on stderr (the reader is closed). */
static int stat_report(stat_run_t *st, const gpb_pool_info_t *info) {
  const stat_opts_t *o = st->o;
  for (;;) {
    gpb_stats_t s;
    if (st->synced) {
      gpb_model_stats(gpb_attach_model(st->a), &s);
      /* Clear the screen only for a person: a file or pipe gets reports
       * one after another, with no escape codes in them. */
      if (o->watch && !o->json && isatty(1)) printf("\033[H\033[2J");
      if (o->json) stat_print_json(info, &s, st->gone);
      else stat_print_text(info, &s, st->gone);
      fflush(stdout);
    }
    if (st->gone || !o->watch) return 0;
    /* Poll often between redraws so the reader keeps up with the ring. */
    uint64_t until = gpb_now_ns() + (uint64_t)(o->interval * 1e9);
    while (!st->gone && gpb_now_ns() < until) {
      if (stat_poll(st)) return -1;
      if (!st->gone) stat_sleep(0.02);
    }
  }
}

int main(int argc, char **argv) {
  stat_opts_t o;
  int prc = stat_parse(argc, argv, &o);
  if (prc >= 0) return prc; /* --help, --version, or usage */
  if (o.list) return stat_list(o.json);
  if (o.all) return stat_all(o.json);
  if (o.remove_stale) return stat_remove_stale();

  stat_run_t st = {.o = &o};
  int rc = gpb_attach_open(o.name, &st.a);
  if (rc == GPB_ENOTFOUND) {
    fprintf(stderr, "gpubuddy-stat: no pool is published as '%s' (see "
            "gpubuddy-stat --list)\n", o.name);
    return EXIT_NOTFOUND;
  }
  if (rc) {
    fprintf(stderr, "gpubuddy-stat: cannot attach to '%s': %s: %s\n", o.name,
            gpb_strerror(rc), gpb_last_error_detail());
    return 1;
  }
  gpb_pool_info_t info;
  gpb_attach_info(st.a, &info);
  if (stat_sync(&st) || stat_report(&st, &info)) return 1;
  gpb_attach_close(st.a);
  if (st.gone) {
    fprintf(stderr, "gpubuddy-stat: %s\n", st.gone_msg);
    if (!st.synced)
      fprintf(stderr, "gpubuddy-stat: no state of '%s' could be recovered\n",
              o.name);
    return EXIT_GONE;
  }
  return 0;
}
