/* SPDX-License-Identifier: MIT */
/*
 * gpubuddy-replay: runs a recorded allocation trace through a pool and
 * reports what the allocator made of it.
 *
 * The trace (native gpubuddy trace, gzipped or not, or a RAPIDS RMM log)
 * is streamed op by op: an ALLOC calls gpb_alloc_ex with the recorded size,
 * tag and stream; a FREE frees whatever that id got. An id map holds only
 * live allocations, latencies go into a fixed-size histogram, so memory
 * stays bounded however long the trace is.
 *
 * When the pool size is not given, a first pass over the trace measures
 * its peak live bytes and the pool is the next power of two at or above
 * twice that (and above its largest request). --find-min-pool loads the
 * trace once and tries every pool size from the peak upward on a grid
 * (tools/common/minpool.h says why it does not bisect), stopping each
 * probe at its first failure.
 *
 * --explain-oom says why each failed allocation failed (the first N of
 * them): the replay's live records then also carry trace ids and times,
 * found by block offset, and at a failure the pool's blocks are walked
 * into tools/common/oom.c's search for the cheapest window the request
 * could have used.
 * --top-sites ranks the trace's call sites (topsites.h): the bytes each
 * held when live bytes peaked, and the allocations that failed, each
 * with the frames the trace defined for it.
 */
#define _POSIX_C_SOURCE 200809L
#include "gpubuddy.h"
#include "compare.h"
#include "json.h"
#include "minpool.h"
#include "idmap.h"
#include "oom.h"
#include "opts.h"
#include "pages.h"
#include "replay.h"
#include "sitename.h"
#include "topsites.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FAIL_ID (1ull << 63) /* ids of requests that failed when recorded */
#define SLOT_FAILED (1ull << 63) /* in an id map slot's size: the alloc failed */

typedef struct opts {
  const char *path;
  gpb_backend_t backend;
  size_t pool_size; /* 0: derive from the trace */
  size_t min_block;
  int policy; /* gpb_policy_t, or -1 for all */
  int json, find_min, quiet;
  uint64_t resolution; /* find-min-pool grid; 0: 1/1024 of the peak */
  const char *publish;
  int hold;      /* --hold: keep the published pool up after the replay */
  double hold_s; /* for this long; 0: until SIGINT or SIGTERM */
  double speed; /* 0: as fast as possible */
  uint64_t explain; /* --explain-oom: failures to explain per run (UINT64_MAX:
                       all); 0: none */
  uint32_t top_sites; /* --top-sites: rows per ranking, 0 off */
  int policy_given;
  const char *plan_path; /* --plan: follow it */
  const char *plan_out;  /* --plan-out: make a plan, write it, replay none */
  gpb_plan_t *plan;      /* loaded from plan_path */
  const char *compare;   /* --compare A: A beside TRACE (B) */
  const char *png;       /* --png FILE: --compare's picture */
} opts_t;

#define EXPLAIN_DEFAULT 10

/* What a first pass learns about a trace. */
typedef struct scan {
  uint64_t ops, allocs, frees, recorded_fails;
  uint64_t peak_live, max_request; /* requests that succeeded when recorded */
  uint64_t peak_all, max_all;       /* failed ones too (held for no time) */
  uint64_t first_ns, last_ns;
} scan_t;

typedef struct result {
  gpb_policy_t policy;
  size_t pool_size;
  uint64_t ops, allocs, frees, oom, recorded_fails;
  uint64_t unknown_frees, dup_allocs, skipped_frees;
  uint64_t peak_live;
  /* Requests that had failed when recorded but this pool served, and the
   * peak of the others alone (the recording's own, when none failed). */
  uint64_t served_fails, served_fail_max, peak_ok;
  gpb_stats_t at_peak, at_end;
  replay_hist_t lat_alloc, lat_free;
  double total_s;
  int stopped; /* stopped at the first failure (probe) */
  gpbt_oom_t *why; /* --explain-oom: the first failures, explained */
  size_t nwhy;
  uint64_t vmm_peak; /* bytes a GPB_CFG_VMM pool would map at most */
  /* --top-sites: the rankings, each row's frames (NULL: none defined) */
  gpbt_site_row_t *top_peak, *top_fail;
  char **text_peak, **text_fail;
  size_t ntop_peak, ntop_fail, sites_peak, sites_fail;
  int any_site; /* the trace named a call site */
  gpb_plan_info_t plan; /* how far the pool followed --plan */
} result_t;

static const char *prog = "gpubuddy-replay";

static void usage(FILE *f) {
  fprintf(f,
"Usage: %s [options] TRACE\n"
"       %s --compare A [options] B\n"
"\n"
"Replays an allocation trace through a gpubuddy pool and reports events,\n"
"peak live bytes, peak bytes in blocks, peak 2 MiB pages under live blocks\n"
"(what a GPB_CFG_VMM pool would hold), internal and external fragmentation\n"
"(at the peak and at the end), failed allocations (OOM), per-op latency\n"
"(median, p99, max) and total time.\n"
"\n"
"TRACE is a gpubuddy trace (docs/TRACE_FORMAT.md; .gz read directly), a\n"
"RAPIDS RMM logging_resource_adaptor CSV, or - for standard input (which\n"
"needs --pool-size and allows neither --find-min-pool nor --policy all).\n"
"\n"
"options:\n"
"  --backend B       virtual (default: address space only), host, device,\n"
"                    pinned or auto\n"
"  --pool-size N     pool bytes (64M, 1.5GiB...). Default: the next power of\n"
"                    two >= 2 x the trace's peak live bytes (and >= its\n"
"                    largest request)\n"
"  --min-block N     smallest block, a power of two >= 16 (default 256)\n"
"  --policy P        buddy (default), trim, bestfit, or all (run each, compare)\n"
"  --find-min-pool   find the smallest pool in which the trace replays with\n"
"                    no failed allocation: every size from the peak upward\n"
"                    is tried on a grid (fitting is not monotone in the\n"
"                    size, so bisection could miss it); report it, its ratio\n"
"                    to peak live, and the replay at that size. Pools up to\n"
"                    64 TiB are tried; SIGINT stops the search\n"
"  --resolution N    the grid of --find-min-pool, 1 byte to 64 TiB, rounded\n"
"                    up to min_block (default 1/1024 of the peak)\n"
"  --plan FILE       follow a placement plan (implies --policy bestfit): each\n"
"                    request goes where the plan puts the next of its size,\n"
"                    when that range is free, else by best fit; the report\n"
"                    says how many went where planned\n"
"  --plan-out FILE   lay the trace out offline, knowing every lifetime (at\n"
"                    --min-block), and write the plan to FILE for a later\n"
"                    run of the same program (GPB_PLAN, GPB_TORCH_PLAN) or\n"
"                    --plan; prints its extent and replays nothing\n"
"  --publish NAME    publish the replay's pool live under NAME (for the viewer)\n"
"  --hold [SECONDS]  with --publish: keep the pool published after the\n"
"                    replay, as it ended, for SECONDS or until SIGINT or\n"
"                    SIGTERM, so gpubuddy-stat and gpubuddy-view can attach\n"
"                    (each run's pool in turn with --policy all); the\n"
"                    report follows\n"
"  --speed X         pace ops by the trace's timestamps, X times real time\n"
"                    (default: as fast as possible)\n"
"  --explain-oom[=N] explain the first N failed allocations of each run\n"
"                    (default 10; all for every one): op and trace id,\n"
"                    bytes requested and the block it needed, bytes free and\n"
"                    the largest free block, and the cheapest window of the\n"
"                    needed size (of the aligned ones; bestfit: any run):\n"
"                    the one holding the fewest live bytes, with its live\n"
"                    blocks (offset, size, requested, age, tag, trace id,\n"
"                    call site when the trace names one),\n"
"                    which freed or moved would have let it succeed\n"
"  --top-sites[=N]   the N call sites (default 10) holding the most bytes\n"
"                    when live bytes peaked, and the sites of failed\n"
"                    allocations (traces recorded with GPB_CALLSITES=DEPTH\n"
"                    or imported from PyTorch carry call sites), each named\n"
"                    by its first frame outside the framework (PyTorch,\n"
"                    c10, CPython, gpubuddy; add patterns with\n"
"                    GPB_SITE_FRAMEWORK=pat,pat), with its caller where\n"
"                    names repeat, then its frames, the user's first; a\n"
"                    pool's MODULE+0xOFFSET frames are symbolized by\n"
"                    addr2line where debug information exists\n"
"  --compare A       compare run A with TRACE (B): peak live bytes, the\n"
"                    bytes each call site held at the peak with the\n"
"                    changes (largest first; --top-sites=N rows, default\n"
"                    10; sites matched by their frames), fragmentation at\n"
"                    the peak and the smallest pool per policy (each\n"
"                    --policy, default all), side by side\n"
"  --png FILE        with --compare: also draw the comparison as a PNG\n"
"  --json            machine-readable output (one key per line)\n"
"  --quiet           no progress or warnings on stderr\n"
"  --help            this text\n"
"  --version         the version\n"
"\n"
"A free of an id the trace never allocated is counted and warned about once.\n"
"Requests that failed when the trace was recorded are replayed (and freed\n"
"at once if they succeed). Latencies come from a histogram (about 3%%\n"
"resolution); max is exact. Exit status: 0 done, 1 error, 2 usage.\n",
          prog, prog);
}

/* ------------------------------------------------------------ output */

static double ratio(uint64_t a, uint64_t b) { return b ? (double)a / (double)b : 0; }

/* Share of free bytes that is not in the largest free block: what a single
 * large request cannot use. Simpler to read than the library's index. */
static double ext_largest(const gpb_stats_t *s) {
  return s->free_bytes ? 1.0 - ratio(s->largest_free, s->free_bytes) : 0;
}

static void print_frag_line(const char *label, const gpb_stats_t *s) {
  char a[32], b[32], c[32];
  gpb_size_format(s->internal_frag_bytes, a, sizeof a);
  gpb_size_format(s->free_bytes, b, sizeof b);
  gpb_size_format(s->largest_free, c, sizeof c);
  printf("  %-8s internal %s (%.1f%% of block bytes), external index %.3f,"
         " free %s, largest free %s (%.1f%% of free unusable by one request)\n",
         label, a, 100 * ratio(s->internal_frag_bytes, s->block_bytes),
         s->external_frag, b, c, 100 * ext_largest(s));
}

static void print_lat(const char *label, const replay_hist_t *h) {
  char a[32], b[32], c[32];
  gpbt_ns_format(a, sizeof a, replay_hist_quantile(h, 0.5));
  gpbt_ns_format(b, sizeof b, replay_hist_quantile(h, 0.99));
  gpbt_ns_format(c, sizeof c, h->max);
  printf("  %-6s median %s, p99 %s, max %s (%" PRIu64 " ops)\n", label, a, b,
         c, h->count);
}

/* Whether the pool's peak includes requests that had failed when recorded
 * (a larger pool than the recording's served them). */
static int replay_beyond(const result_t *r) {
  return r->served_fails && r->at_end.requested_peak > r->peak_ok;
}

static void print_text(const opts_t *o, const result_t *r) {
  char a[32], b[32];
  gpb_size_format(r->pool_size, a, sizeof a);
  printf("policy %s, pool %s (%zu bytes), min_block %zu, backend %s\n",
         gpb_policy_name(r->policy), a, r->pool_size, o->min_block,
         gpb_backend_name(o->backend));
  if (o->plan)
    printf("plan: %s, %" PRIu64 " entries; %" PRIu64 " requests placed as "
           "planned, %" PRIu64 " by best fit (%" PRIu64 " found their range "
           "taken, %" PRIu64 " no entry of their size)\n", o->plan_path,
           r->plan.entries, r->plan.placed, r->plan.busy + r->plan.unmatched,
           r->plan.busy, r->plan.unmatched);
  if (o->plan && r->plan.stopped_at) {
    if (r->plan.next >= r->plan.entries &&
        r->plan.repeat_from >= r->plan.entries)
      printf("plan given up at request %" PRIu64 ": the run went past its "
             "end; best fit from there\n", r->plan.stopped_at);
    else
      printf("plan given up at request %" PRIu64 ": the run departed from "
             "it (more than %d of 64 requests); best fit from there\n",
             r->plan.stopped_at, GPB_PLAN_DEPART_MAX);
  }
  printf("events: %" PRIu64 " ops (%" PRIu64 " allocs, %" PRIu64
         " frees); the pool emitted %" PRIu64 " events (%" PRIu64
         " splits, %" PRIu64 " merges)\n", r->ops, r->allocs, r->frees,
         r->at_end.seq, r->at_end.splits, r->at_end.merges);
  gpb_size_format(r->at_end.block_peak, b, sizeof b);
  if (replay_beyond(r)) {
    /* Requests that failed when recorded held nothing there: the peak to
     * report is the recording's, and what this pool took on top apart. */
    gpb_size_format(r->peak_ok, a, sizeof a);
    printf("peak live bytes served:  %s (%" PRIu64 "; requests that had "
           "succeeded when recorded, at once)\n", a, r->peak_ok);
    gpb_size_format(r->at_end.requested_peak, a, sizeof a);
    char c[32];
    gpb_size_format(r->served_fail_max, c, sizeof c);
    printf("  beyond it: this pool also served %" PRIu64 " request%s that "
           "had failed in the recording (the largest %s), holding %s at "
           "once with them\n", r->served_fails,
           r->served_fails == 1 ? "" : "s", c, a);
  } else {
    gpb_size_format(r->at_end.requested_peak, a, sizeof a);
    printf("peak live bytes served:  %s (%" PRIu64 "; requests this replay "
           "served, at once)\n", a, r->at_end.requested_peak);
  }
  printf("peak bytes in blocks:    %s (%" PRIu64 ", %.3fx served)\n",
         b, r->at_end.block_peak,
         ratio(r->at_end.block_peak, r->at_end.requested_peak));
  gpb_size_format(r->vmm_peak, a, sizeof a);
  printf("peak 2 MiB pages in use: %s (%" PRIu64 ", %.3fx served; the "
         "memory a GPB_CFG_VMM pool needs with this placement)\n", a,
         r->vmm_peak, ratio(r->vmm_peak, r->at_end.requested_peak));
  printf("fragmentation:\n");
  print_frag_line("at peak", &r->at_peak);
  print_frag_line("at end", &r->at_end);
  printf("failed allocations (OOM): %" PRIu64, r->oom);
  if (r->recorded_fails)
    printf(" (%" PRIu64 " requests had failed in the recording)",
           r->recorded_fails);
  printf("\n");
  if (o->explain && r->nwhy) {
    if (r->nwhy < r->oom)
      printf("why (the first %zu of %" PRIu64 "; --explain-oom=all explains "
             "every one):\n", r->nwhy, r->oom);
    else
      printf("why:\n");
    for (size_t i = 0; i < r->nwhy; i++) gpbt_oom_print(stdout, &r->why[i], "  ");
  }
  if (r->unknown_frees || r->dup_allocs)
    printf("trace anomalies: %" PRIu64 " frees of unknown ids, %" PRIu64
           " allocs of ids already live (skipped)\n",
           r->unknown_frees, r->dup_allocs);
  printf("latency:\n");
  print_lat("alloc", &r->lat_alloc);
  print_lat("free", &r->lat_free);
  printf("total time: %.3f s (%.0f ops/s)\n", r->total_s,
         r->total_s > 0 ? (double)r->ops / r->total_s : 0);
}

/* The rows' sites split and named (gpbt_sitename), symbolized; NULL
 * without memory. An undefined site gets no frames. */
static gpbt_sitename_t *sites_split(char *const *text, size_t n) {
  gpbt_sitename_t *v = calloc(n ? n : 1, sizeof *v);
  for (size_t i = 0; v && i < n; i++)
    if (gpbt_sitename(text[i] ? text[i] : "", NULL, GPBT_SITENAME_SYMBOLIZE,
                      &v[i])) {
      while (i--) gpbt_sitename_free(&v[i]);
      free(v);
      return NULL;
    }
  return v;
}

static void sites_split_free(gpbt_sitename_t *v, size_t n) {
  for (size_t i = 0; v && i < n; i++) gpbt_sitename_free(&v[i]);
  free(v);
}

/* One site's frames, the user's first, then the framework's. */
static void print_site_frames(const gpbt_sitename_t *s) {
  for (size_t k = 0; k < s->nframes; k++) {
    if (k == s->nuser)
      printf("        -- framework (%zu frame%s):\n", s->nframes - k,
             s->nframes - k == 1 ? "" : "s");
    printf("        %s\n", s->frames[k]);
  }
}

/* One ranking of --top-sites: each site's figures and name (its first
 * frame outside the framework, with a caller where names repeat), then
 * its frames. */
static void print_sites(const char *head, const gpbt_site_row_t *rows,
                        char *const *text, size_t n, size_t total,
                        uint64_t all_bytes, int failed) {
  printf("%s (top %zu of %zu site%s):\n", head, n, total,
         total == 1 ? "" : "s");
  gpbt_sitename_t *v = sites_split(text, n);
  for (size_t i = 0; i < n; i++) {
    const gpbt_site_row_t *w = &rows[i];
    char a[32], who[1100], label[1024];
    gpb_size_format(w->bytes, a, sizeof a);
    if (!w->site)
      snprintf(who, sizeof who, "no call site");
    else if (!text[i] || !v)
      snprintf(who, sizeof who, "site %u", w->site);
    else {
      gpbt_sitename_label(v, n, i, label, sizeof label);
      snprintf(who, sizeof who, "site %u: %s", w->site, label);
    }
    if (failed)
      printf("  %2zu. %" PRIu64 " failure%s, %s asked; %s\n", i + 1, w->n,
             w->n == 1 ? "" : "s", a, who);
    else
      printf("  %2zu. %s (%.1f%%) in %" PRIu64 " allocation%s; %s\n", i + 1,
             a, 100 * ratio(w->bytes, all_bytes), w->n, w->n == 1 ? "" : "s",
             who);
    if (w->site && !text[i])
      printf("        (not defined in the trace)\n");
    else if (w->site && v)
      print_site_frames(&v[i]);
  }
  sites_split_free(v, n);
}

static void print_top_sites(const result_t *r) {
  if (!r->any_site) {
    printf("call sites: the trace names none (record it with "
           "GPB_CALLSITES=DEPTH or GPB_CFG_CALLSITES)\n");
    return;
  }
  char a[32];
  gpb_size_format(r->peak_live, a, sizeof a);
  char head[96];
  snprintf(head, sizeof head, "call sites at peak live bytes, %s", a);
  print_sites(head, r->top_peak, r->text_peak, r->ntop_peak, r->sites_peak,
              r->peak_live, 0);
  if (r->oom)
    print_sites("call sites of failed allocations", r->top_fail,
                r->text_fail, r->ntop_fail, r->sites_fail, 0, 1);
  printf("  (a site is named by its first frame outside the framework: "
         "PyTorch, c10, CPython, gpubuddy, and GPB_SITE_FRAMEWORK=pat,...; "
         "frames innermost first, the user's before the framework's)\n");
}

static void json_sites(const char *key, const gpbt_site_row_t *rows,
                       char *const *text, size_t n, int failed) {
  printf("      \"%s\": [", key);
  gpbt_sitename_t *v = sites_split(text, n);
  for (size_t i = 0; i < n; i++) {
    gpbt_json_t j = {stdout, ", ", 0};
    printf("%s\n        {", i ? "," : "");
    gpbt_json_put_u64(&j, "site", rows[i].site);
    gpbt_json_put_u64(&j, failed ? "failures" : "allocs", rows[i].n);
    gpbt_json_put_u64(&j, "bytes", rows[i].bytes);
    if (text[i] && v) {
      gpbt_json_put_str(&j, "frames", text[i]);
      gpbt_json_put_str(&j, "name", v[i].name);
      gpbt_json_put_u64(&j, "user_frames", v[i].nuser);
      gpbt_json_key(&j, "frames_user_first");
      printf("[");
      for (size_t k = 0; k < v[i].nframes; k++) {
        printf("%s", k ? ", " : "");
        gpbt_json_str(stdout, v[i].frames[k]);
      }
      printf("]");
    } else {
      gpbt_json_key(&j, "frames");
      printf("null");
    }
    printf("}");
  }
  sites_split_free(v, n);
  printf("%s],\n", n ? "\n      " : "");
}

static void json_stats(const char *key, const gpb_stats_t *s) {
  printf("      \"%s\": {\n", key);
  printf("        \"requested_bytes\": %" PRIu64 ",\n", s->requested_bytes);
  printf("        \"block_bytes\": %" PRIu64 ",\n", s->block_bytes);
  printf("        \"free_bytes\": %" PRIu64 ",\n", s->free_bytes);
  printf("        \"largest_free\": %" PRIu64 ",\n", s->largest_free);
  printf("        \"internal_frag_bytes\": %" PRIu64 ",\n", s->internal_frag_bytes);
  printf("        \"internal_frag\": %.6f,\n", ratio(s->internal_frag_bytes, s->block_bytes));
  printf("        \"external_frag\": %.6f,\n", s->external_frag);
  printf("        \"external_frag_largest\": %.6f,\n", ext_largest(s));
  printf("        \"live_allocs\": %" PRIu64 "\n", s->live_allocs);
  printf("      }");
}

static void json_lat(const char *key, const replay_hist_t *h, int last) {
  printf("      \"%s\": {\"count\": %" PRIu64 ", \"median_ns\": %" PRIu64
         ", \"p99_ns\": %" PRIu64 ", \"max_ns\": %" PRIu64 "}%s\n", key,
         h->count, replay_hist_quantile(h, 0.5), replay_hist_quantile(h, 0.99),
         h->max, last ? "" : ",");
}

static void json_run(const opts_t *o, const result_t *r, const scan_t *sc,
                     const gpbt_minpool_t *mp, int last) {
  uint64_t min_pool = mp->size;
  const gpb_stats_t *e = &r->at_end;
  printf("    {\n");
  printf("      \"policy\": \"%s\",\n", gpb_policy_name(r->policy));
  printf("      \"backend\": \"%s\",\n", gpb_backend_name(o->backend));
  printf("      \"pool_size\": %zu,\n", r->pool_size);
  printf("      \"min_block\": %zu,\n", o->min_block);
  if (o->plan) {
    printf("      \"plan\": ");
    gpbt_json_str(stdout, o->plan_path);
    printf(",\n      \"plan_entries\": %" PRIu64 ",\n", r->plan.entries);
    printf("      \"plan_placed\": %" PRIu64 ",\n", r->plan.placed);
    printf("      \"plan_busy\": %" PRIu64 ",\n", r->plan.busy);
    printf("      \"plan_unmatched\": %" PRIu64 ",\n", r->plan.unmatched);
    printf("      \"plan_repeat_from\": %" PRIu64 ",\n", r->plan.repeat_from);
    printf("      \"plan_stopped_at\": %" PRIu64 ",\n", r->plan.stopped_at);
  }
  if (o->find_min) {
    printf("      \"min_pool_size\": %" PRIu64 ",\n", min_pool);
    printf("      \"min_pool_resolution\": %" PRIu64 ",\n", mp->step);
    printf("      \"min_pool_replays\": %" PRIu64 ",\n", mp->probes);
    printf("      \"min_pool_ratio\": %.6f,\n",
           ratio(min_pool, sc ? sc->peak_all : 0));
    printf("      \"peak_demand_bytes\": %" PRIu64 ",\n", sc ? sc->peak_all : 0);
  }
  printf("      \"ops\": %" PRIu64 ",\n", r->ops);
  printf("      \"allocs\": %" PRIu64 ",\n", r->allocs);
  printf("      \"frees\": %" PRIu64 ",\n", r->frees);
  printf("      \"pool_events\": %" PRIu64 ",\n", e->seq);
  printf("      \"pool_allocs\": %" PRIu64 ",\n", e->allocs);
  printf("      \"pool_frees\": %" PRIu64 ",\n", e->frees);
  printf("      \"splits\": %" PRIu64 ",\n", e->splits);
  printf("      \"merges\": %" PRIu64 ",\n", e->merges);
  printf("      \"peak_live_bytes\": %" PRIu64 ",\n",
         replay_beyond(r) ? r->peak_ok : e->requested_peak);
  printf("      \"served_peak_live_bytes\": %" PRIu64 ",\n", e->requested_peak);
  printf("      \"served_recorded_failures\": %" PRIu64 ",\n", r->served_fails);
  printf("      \"peak_block_bytes\": %" PRIu64 ",\n", e->block_peak);
  printf("      \"peak_page_bytes\": %" PRIu64 ",\n", r->vmm_peak);
  printf("      \"failed_allocs\": %" PRIu64 ",\n", r->oom);
  printf("      \"recorded_failures\": %" PRIu64 ",\n", r->recorded_fails);
  printf("      \"unknown_frees\": %" PRIu64 ",\n", r->unknown_frees);
  printf("      \"duplicate_allocs\": %" PRIu64 ",\n", r->dup_allocs);
  json_stats("at_peak", &r->at_peak);
  printf(",\n");
  json_stats("at_end", &r->at_end);
  printf(",\n");
  json_lat("alloc_latency", &r->lat_alloc, 0);
  json_lat("free_latency", &r->lat_free, 0);
  if (o->explain) {
    printf("      \"oom_explained\": [");
    for (size_t i = 0; i < r->nwhy; i++) {
      printf("%s\n        ", i ? "," : "");
      gpbt_oom_json(stdout, &r->why[i], "        ");
    }
    printf("%s],\n", r->nwhy ? "\n      " : "");
  }
  if (o->top_sites) {
    printf("      \"sites_named\": %s,\n", r->any_site ? "true" : "false");
    json_sites("top_sites_at_peak", r->top_peak, r->text_peak, r->ntop_peak,
               0);
    json_sites("top_sites_failed", r->top_fail, r->text_fail, r->ntop_fail,
               1);
  }
  printf("      \"total_s\": %.6f\n", r->total_s);
  printf("    }%s\n", last ? "" : ",");
}

/* ------------------------------------------------------------ progress */

typedef struct progress {
  int on, tty;
  uint64_t total; /* ops expected, 0 when unknown */
  uint64_t last_ns;
  int shown;
  const char *what;
} progress_t;

static void progress_tick(progress_t *p, uint64_t done) {
  if (!p->on) return;
  uint64_t now = gpb_now_ns();
  uint64_t every = p->tty ? 500000000ull : 5000000000ull;
  if (now - p->last_ns < every) return;
  p->last_ns = now;
  if (p->total)
    fprintf(stderr, "%s%s: %" PRIu64 "/%" PRIu64 " ops (%.0f%%)%s",
            p->tty ? "\r" : "", p->what, done, p->total,
            100.0 * (double)done / (double)p->total, p->tty ? "" : "\n");
  else
    fprintf(stderr, "%s%s: %" PRIu64 " ops%s", p->tty ? "\r" : "", p->what,
            done, p->tty ? "" : "\n");
  p->shown = 1;
}

static void progress_end(progress_t *p) {
  if (p->on && p->shown && p->tty) fprintf(stderr, "\n");
  p->shown = 0;
}

/* ------------------------------------------------------------ passes */

static int trace_err(gpb_trace_reader_t *tr, const char *path, int rc) {
  fprintf(stderr, "%s: %s: %s: %s\n", prog, path, gpb_err_name(rc),
          tr ? gpb_trace_error(tr) : gpb_last_error_detail());
  return -1;
}

/* First pass: peak live bytes and the largest request, with an id map of
 * live sizes. */
static int scan_trace(const opts_t *o, scan_t *sc) {
  memset(sc, 0, sizeof *sc);
  gpb_trace_reader_t *tr;
  int rc = gpb_trace_open(o->path, &tr);
  if (rc) return trace_err(NULL, o->path, rc);
  gpbt_idmap_t m = {0}; /* id -> size, | SLOT_FAILED */
  progress_t pg = {!o->quiet, isatty(2), 0, gpb_now_ns(), 0, "scanning"};
  uint64_t live = 0, live_all = 0;
  gpb_trace_op_t op;
  int ret = 0;
  while ((rc = gpb_trace_next(tr, &op)) == 1) {
    if (sc->ops == 0) sc->first_ns = op.time_ns;
    sc->last_ns = op.time_ns;
    sc->ops++;
    if ((sc->ops & 0xffff) == 0) progress_tick(&pg, sc->ops);
    if (op.op == GPB_OP_ALLOC) {
      sc->allocs++;
      int failed = (op.id & FAIL_ID) != 0;
      if (failed) sc->recorded_fails++;
      if (op.size > sc->max_all) sc->max_all = op.size;
      if (!failed && op.size > sc->max_request) sc->max_request = op.size;
      int err;
      gpbt_idslot_t *s = gpbt_idmap_claim(&m, op.id, &err);
      if (!s && !err) continue; /* duplicate: replay skips */
      if (!s) {
        fprintf(stderr, "%s: out of memory\n", prog);
        ret = -1;
        break;
      }
      gpbt_idmap_commit(&m, s, op.id, op.size | (failed ? SLOT_FAILED : 0));
      live_all += op.size;
      if (live_all > sc->peak_all) sc->peak_all = live_all;
      if (!failed) {
        live += op.size;
        if (live > sc->peak_live) sc->peak_live = live;
      }
    } else {
      sc->frees++;
      gpbt_idslot_t *s = gpbt_idmap_find(&m, op.id);
      if (s) {
        live_all -= s->val & ~SLOT_FAILED;
        if (!(s->val & SLOT_FAILED)) live -= s->val;
        gpbt_idmap_remove(&m, s);
      }
    }
  }
  progress_end(&pg);
  if (rc < 0) ret = trace_err(tr, o->path, rc);
  if (!o->quiet && *gpb_trace_warning(tr))
    fprintf(stderr, "%s: warning: %s: %s\n", prog, o->path, gpb_trace_warning(tr));
  gpbt_idmap_fini(&m);
  gpb_trace_close(tr);
  return ret;
}

/* SIGINT or SIGTERM: stop replaying and destroy the pool, so a published
 * one leaves no segment behind in /dev/shm. */
static volatile sig_atomic_t replay_stop;
static void replay_on_signal(int sig) { replay_stop = sig; }

static void sleep_ns(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
  while (nanosleep(&ts, &ts) && errno == EINTR && !replay_stop) {}
}

/* What a replay keeps per live id, in a dense array the id map indexes
 * (its own slots stay 16 bytes); freed entries are chained for reuse.
 * With --explain-oom (names set) each entry also gets a trace id and time
 * in a second array beside the first, and a map from block offsets to
 * entries, so that a failure can name the blocks in its way. */
typedef struct live_rec {
  void *ptr;
  uint64_t size; /* | SLOT_FAILED */
  uint32_t site; /* the allocation's call site (--top-sites) */
} live_rec_t;

typedef struct live_who {
  uint64_t id; /* trace id, without FAIL_ID */
  uint64_t time_ns;
} live_who_t;

typedef struct live {
  live_rec_t *v;
  uint64_t n, cap, free_head; /* free_head: index + 1, 0 = none */
  int names;                  /* keep who and offs */
  live_who_t *who;            /* beside v */
  gpbt_idmap_t offs;          /* offset from base -> index in v */
  const char *base;           /* the pool's */
} live_t;

/* The index of a new entry, or UINT64_MAX without memory. */
static uint64_t live_put(live_t *l, void *ptr, uint64_t size,
                         const gpb_trace_op_t *op) {
  uint64_t x;
  if (l->free_head) {
    x = l->free_head - 1;
    l->free_head = l->v[x].size;
  } else {
    if (l->n == l->cap) {
      uint64_t cap = l->cap ? l->cap * 2 : 1024;
      live_rec_t *v = realloc(l->v, cap * sizeof *v);
      if (!v) return UINT64_MAX;
      l->v = v;
      if (l->names) {
        live_who_t *w = realloc(l->who, cap * sizeof *w);
        if (!w) return UINT64_MAX;
        l->who = w;
      }
      l->cap = cap;
    }
    x = l->n++;
  }
  if (l->names && ptr) {
    int err;
    gpbt_idslot_t *s =
        gpbt_idmap_claim(&l->offs, (uint64_t)((char *)ptr - l->base), &err);
    if (!s) return UINT64_MAX; /* no memory (offsets of live blocks differ) */
    gpbt_idmap_commit(&l->offs, s, (uint64_t)((char *)ptr - l->base), x);
    l->who[x] = (live_who_t){op->id & ~FAIL_ID, op->time_ns};
  }
  l->v[x] = (live_rec_t){ptr, size, op->site};
  return x;
}

static live_rec_t live_take(live_t *l, uint64_t x) {
  live_rec_t e = l->v[x];
  if (l->names && e.ptr) {
    gpbt_idslot_t *s =
        gpbt_idmap_find(&l->offs, (uint64_t)((char *)e.ptr - l->base));
    if (s) gpbt_idmap_remove(&l->offs, s);
  }
  l->v[x].size = l->free_head; /* the free chain runs through size */
  l->free_head = x + 1;
  return e;
}

static void live_fini(live_t *l) {
  free(l->v);
  free(l->who);
  gpbt_idmap_fini(&l->offs);
}

/* --explain-oom's namer: the trace id, trace time and call site of the
 * allocation at a block offset (user: the live_t). */
static void replay_oom_name(void *user, gpbt_oom_alloc_t *a) {
  const live_t *l = user;
  const gpbt_idslot_t *s = gpbt_idmap_find(&l->offs, a->offset);
  a->time_ns = s ? l->who[s->val].time_ns : 0;
  a->id = s ? l->who[s->val].id : 0;
  a->has_id = s != NULL;
  a->site = s ? l->v[s->val].site : 0;
}

/* Names the sites of w's listed allocations by their first frame outside
 * the framework, shortened ("model.py:9 forward"), from the trace's
 * frames; a site the trace does not define stays a number. */
static void replay_oom_sites(gpb_trace_reader_t *tr, gpbt_oom_t *w) {
  if (!w->nlist || !(w->site_names = calloc(w->nlist, sizeof(char *))))
    return;
  for (size_t i = 0; i < w->nlist; i++) {
    const char *t = w->list[i].site ? gpb_trace_site(tr, w->list[i].site) : NULL;
    gpbt_sitename_t sn;
    if (!t || gpbt_sitename(t, NULL, 0, &sn)) continue;
    char buf[160];
    gpbt_sitename_short(sn.name, buf, sizeof buf);
    w->site_names[i] = strdup(buf);
    gpbt_sitename_free(&sn);
  }
}

/* Explains the failed alloc `op` (the pool unchanged since) into r->why.
 * 0, or -1 after printing an error. */
static int replay_explain(const gpb_pool_t *pool, live_t *lv,
                          gpbt_oom_map_t *om, const gpb_trace_op_t *op,
                          gpb_trace_reader_t *tr, result_t *r) {
  gpbt_oom_t *w = realloc(r->why, (r->nwhy + 1) * sizeof *w);
  if (!w) {
    fprintf(stderr, "%s: out of memory for --explain-oom\n", prog);
    return -1;
  }
  r->why = w;
  w = &r->why[r->nwhy];
  memset(w, 0, sizeof *w);
  int rc = gpbt_oom_map_pool(om, pool, replay_oom_name, lv);
  if (!rc) rc = gpbt_oom_explain(om, r->policy, op->size, w);
  if (rc) {
    gpbt_oom_free(w);
    fprintf(stderr, "%s: op %" PRIu64 ": --explain-oom: %s: %s\n", prog,
            op->seq, gpb_err_name(rc), gpb_last_error_detail());
    return -1;
  }
  replay_oom_sites(tr, w);
  w->op = op->seq;
  w->id = op->id & ~FAIL_ID;
  w->time_ns = op->time_ns;
  w->tag = op->tag;
  r->nwhy++;
  return 0;
}

/* The rankings of --top-sites into r, with copies of the frames the
 * reader holds (they die with it). 0, or -1 without memory. */
static int top_sites_take(const opts_t *o, const gpbt_sites_t *st,
                          gpb_trace_reader_t *tr, result_t *r) {
  size_t n = o->top_sites;
  r->any_site = st->max_site != 0;
  r->top_peak = calloc(n, sizeof *r->top_peak);
  r->top_fail = calloc(n, sizeof *r->top_fail);
  r->text_peak = calloc(n, sizeof *r->text_peak);
  r->text_fail = calloc(n, sizeof *r->text_fail);
  if (!r->top_peak || !r->top_fail || !r->text_peak || !r->text_fail)
    return -1;
  r->ntop_peak = gpbt_sites_top(st, 0, r->top_peak, n, &r->sites_peak);
  r->ntop_fail = gpbt_sites_top(st, 1, r->top_fail, n, &r->sites_fail);
  for (int f = 0; f < 2; f++) {
    const gpbt_site_row_t *rows = f ? r->top_fail : r->top_peak;
    char **text = f ? r->text_fail : r->text_peak;
    for (size_t i = 0; i < (f ? r->ntop_fail : r->ntop_peak); i++) {
      const char *t = rows[i].site ? gpb_trace_site(tr, rows[i].site) : NULL;
      if (t && !(text[i] = strdup(t))) return -1;
    }
  }
  return 0;
}

static void result_free(result_t *r) {
  for (size_t i = 0; i < r->nwhy; i++) gpbt_oom_free(&r->why[i]);
  free(r->why);
  r->why = NULL;
  r->nwhy = 0;
  for (size_t i = 0; r->text_peak && i < r->ntop_peak; i++)
    free(r->text_peak[i]);
  for (size_t i = 0; r->text_fail && i < r->ntop_fail; i++)
    free(r->text_fail[i]);
  free(r->text_peak);
  free(r->text_fail);
  free(r->top_peak);
  free(r->top_fail);
}

static void results_free(result_t *res, int n) {
  for (int i = 0; i < n; i++) result_free(&res[i]);
  free(res);
}

/* One replay's working state: what the steps of replay_run share. */
typedef struct run {
  const opts_t *o;
  result_t *r;
  int stop_on_fail;
  gpb_pool_t *pool;
  gpb_pool_info_t info;
  int pass_stream; /* hand recorded streams to the pool */
  gpb_trace_reader_t *tr;
  gpbt_idmap_t m; /* id -> index in lv */
  live_t lv;
  gpbt_oom_map_t om;
  gpbt_pages_t pages;
  gpbt_sites_t st;
  progress_t pg;
  int warned_unknown, warned_dup;
  uint64_t live, live_ok, t_first, start; /* live_ok: without requests
                                             that failed when recorded */
} run_t;

/* Frees what run_open made; each part may be missing. */
static void run_close(run_t *u) {
  gpbt_pages_fini(&u->pages);
  gpbt_sites_fini(&u->st);
  gpbt_idmap_fini(&u->m);
  live_fini(&u->lv);
  gpbt_oom_map_fini(&u->om);
  gpb_trace_close(u->tr);
  gpb_pool_destroy(u->pool);
}

/* A fresh pool of pool_size with the trace open: 0, or -1 after printing
 * an error (u closed). */
static int run_open(run_t *u, size_t pool_size) {
  const opts_t *o = u->o;
  gpbt_oom_map_init(&u->om);
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = o->backend;
  cfg.pool_size = pool_size;
  cfg.min_block = o->min_block;
  cfg.policy = u->r->policy;
  cfg.name = o->publish;
  cfg.flags = GPB_CFG_NO_ENV; /* a replay must not record or publish itself
                                 because the environment says so */
  int rc = gpb_pool_create(&cfg, &u->pool);
  if (rc) {
    fprintf(stderr, "%s: cannot create a %zu-byte %s pool: %s: %s\n", prog,
            pool_size, gpb_backend_name(o->backend), gpb_err_name(rc),
            gpb_last_error_detail());
    return -1;
  }
  if (o->plan && (rc = gpb_pool_set_plan(u->pool, o->plan))) {
    fprintf(stderr, "%s: %s: %s: %s\n", prog, o->plan_path, gpb_err_name(rc),
            gpb_last_error_detail());
    run_close(u);
    return -1;
  }
  if (o->plan && !o->quiet && gpb_plan_extent(o->plan) > pool_size)
    fprintf(stderr, "%s: warning: %s reaches %" PRIu64 " bytes, past the "
            "%zu-byte pool: requests planned beyond it go by best fit\n",
            prog, o->plan_path, gpb_plan_extent(o->plan), pool_size);
  gpb_pool_info(u->pool, &u->info);
  /* Recorded streams are handles of another process: only the backends
   * that never hand them to CUDA may see them. */
  u->pass_stream = u->info.backend == GPB_BACKEND_VIRTUAL ||
                   u->info.backend == GPB_BACKEND_HOST;
  if ((rc = gpb_trace_open(o->path, &u->tr))) {
    run_close(u);
    return trace_err(NULL, o->path, rc);
  }
  u->lv.names = o->explain > 0;
  u->lv.base = u->info.base;
  const char *what = NULL;
  if (gpbt_pages_init(&u->pages, u->info.managed_size))
    what = "the page counts";
  else if (o->top_sites && gpbt_sites_init(&u->st))
    what = "--top-sites";
  if (what) {
    fprintf(stderr, "%s: out of memory for %s\n", prog, what);
    run_close(u);
    return -1;
  }
  return 0;
}

/* --speed: waits until op is due. */
static void run_pace(run_t *u, const gpb_trace_op_t *op) {
  if (!(u->o->speed > 0) || op->time_ns <= u->t_first) return;
  /* Clamped: a tiny speed or a huge jump between timestamps would not fit
   * in 64 bits (UBSan: float-cast-overflow). A day is the longest wait,
   * and more than anyone means. */
  double d = (double)(op->time_ns - u->t_first) / u->o->speed;
  uint64_t due = d < 8.64e13 ? (uint64_t)d : 86400000000000ull;
  uint64_t now = gpb_now_ns() - u->start;
  if (due > now) sleep_ns(due - now);
}

/* A failed allocation: counted, explained, ranked. 1 to stop the replay
 * (a probe), 0 to go on, -1 after printing an error. */
static int run_failed(run_t *u, const gpb_trace_op_t *op) {
  result_t *r = u->r;
  r->oom++;
  if (r->nwhy < u->o->explain && replay_explain(u->pool, &u->lv, &u->om, op, u->tr, r))
    return -1;
  if (u->st.v) gpbt_sites_fail(&u->st, op->site, op->size);
  if (u->stop_on_fail) {
    r->stopped = 1;
    return 1;
  }
  return 0;
}

/* Replays an ALLOC: 0 to go on, 1 to stop, -1 after printing an error. */
static int run_alloc(run_t *u, const gpb_trace_op_t *op) {
  const opts_t *o = u->o;
  result_t *r = u->r;
  r->allocs++;
  if (op->id & FAIL_ID) r->recorded_fails++;
  if (gpbt_idmap_find(&u->m, op->id)) {
    r->dup_allocs++;
    if (!u->warned_dup++ && !o->quiet)
      fprintf(stderr, "%s: warning: op %" PRIu64 " allocates id 0x%" PRIx64
              " which is already live; skipped (further ones are only "
              "counted)\n", prog, op->seq, op->id);
    return 0;
  }
  void *p = NULL;
  uint64_t t0 = gpb_now_ns();
  int rc = gpb_alloc_ex(u->pool, (size_t)op->size, 0, op->tag,
                        u->pass_stream ? (void *)(uintptr_t)op->stream : NULL,
                        &p);
  replay_hist_add(&r->lat_alloc, gpb_now_ns() - t0);
  if (rc && rc != GPB_ENOMEM && rc != GPB_ETOOBIG) {
    fprintf(stderr, "%s: op %" PRIu64 ": alloc of %" PRIu64 " bytes: %s: %s\n",
            prog, op->seq, op->size, gpb_err_name(rc), gpb_last_error_detail());
    return -1;
  }
  int err;
  gpbt_idslot_t *s = gpbt_idmap_claim(&u->m, op->id, &err);
  uint64_t x =
      s ? live_put(&u->lv, p, op->size | (rc ? SLOT_FAILED : 0), op) : 0;
  if (!s || x == UINT64_MAX) {
    fprintf(stderr, "%s: out of memory for the id map\n", prog);
    return -1;
  }
  gpbt_idmap_commit(&u->m, s, op->id, x);
  if (rc) return run_failed(u, op);
  size_t usable;
  if (p && gpb_usable_size(u->pool, p, &usable) == 0)
    gpbt_pages_use(&u->pages, (uint64_t)((char *)p - (char *)u->info.base),
                   usable);
  u->live += op->size;
  if (op->id & FAIL_ID) {
    r->served_fails++;
    if (op->size > r->served_fail_max) r->served_fail_max = op->size;
  } else if ((u->live_ok += op->size) > r->peak_ok) {
    r->peak_ok = u->live_ok;
  }
  if (u->st.v) gpbt_sites_alloc(&u->st, op->site, op->size);
  if (u->live > r->peak_live) {
    r->peak_live = u->live;
    gpb_pool_stats(u->pool, &r->at_peak);
    if (u->st.v) gpbt_sites_peak(&u->st);
  }
  return 0;
}

/* Replays a FREE: 0, or -1 after printing an error. */
static int run_free(run_t *u, const gpb_trace_op_t *op) {
  result_t *r = u->r;
  r->frees++;
  gpbt_idslot_t *s = gpbt_idmap_find(&u->m, op->id);
  if (!s) {
    r->unknown_frees++;
    if (!u->warned_unknown++ && !u->o->quiet)
      fprintf(stderr, "%s: warning: op %" PRIu64 " frees id 0x%" PRIx64
              " that was never allocated (allocated before the trace "
              "began?); further ones are only counted\n", prog, op->seq,
              op->id);
    return 0;
  }
  live_rec_t e = live_take(&u->lv, s->val);
  gpbt_idmap_remove(&u->m, s);
  if (e.size & SLOT_FAILED) {
    r->skipped_frees++;
    return 0;
  }
  void *p = e.ptr;
  u->live -= e.size;
  if (!(op->id & FAIL_ID)) u->live_ok -= e.size;
  size_t usable = 0;
  if (p && gpb_usable_size(u->pool, p, &usable)) usable = 0;
  if (u->st.v) gpbt_sites_free(&u->st, e.site, e.size);
  uint64_t t0 = gpb_now_ns();
  int rc = gpb_free(u->pool, p);
  replay_hist_add(&r->lat_free, gpb_now_ns() - t0);
  if (rc) {
    fprintf(stderr, "%s: op %" PRIu64 ": free: %s: %s\n", prog, op->seq,
            gpb_err_name(rc), gpb_last_error_detail());
    return -1;
  }
  if (usable)
    gpbt_pages_unuse(&u->pages, (uint64_t)((char *)p - (char *)u->info.base),
                     usable);
  return 0;
}

/* After the last op: the end state, the check, the rankings. ret: the
 * loop's; returns the run's (0 or -1). */
static int run_finish(run_t *u, int rd, int ret) {
  const opts_t *o = u->o;
  result_t *r = u->r;
  r->total_s = (double)(gpb_now_ns() - u->start) / 1e9;
  progress_end(&u->pg);
  if (rd < 0) ret = trace_err(u->tr, o->path, rd);
  gpb_pool_stats(u->pool, &r->at_end);
  if (!ret && gpb_pool_check(u->pool)) {
    fprintf(stderr, "%s: pool check failed after the replay: %s\n", prog,
            gpb_last_error_detail());
    ret = -1;
  }
  r->vmm_peak = gpbt_pages_peak(&u->pages);
  gpb_pool_plan_info(u->pool, &r->plan);
  if (!ret && u->st.v && top_sites_take(o, &u->st, u->tr, r)) {
    fprintf(stderr, "%s: out of memory for --top-sites\n", prog);
    ret = -1;
  }
  return ret;
}

/* --hold: the published pool stays up, as the replay left it, until the
 * seconds run out or a signal comes; a signal ends the hold, not the
 * program (replay_stop is cleared), so the report still follows. */
static void replay_hold(const opts_t *o) {
  if (!o->quiet) {
    if (o->hold_s > 0)
      fprintf(stderr, "%s: replayed; pool '%s' stays published for %g s "
              "(Ctrl-C ends it sooner)\n", prog, o->publish, o->hold_s);
    else
      fprintf(stderr, "%s: replayed; pool '%s' stays published until "
              "Ctrl-C (SIGINT) or SIGTERM\n", prog, o->publish);
  }
  uint64_t start = gpb_now_ns();
  uint64_t until = o->hold_s > 0 ? start + (uint64_t)(o->hold_s * 1e9)
                                 : UINT64_MAX;
  while (!replay_stop) {
    uint64_t now = gpb_now_ns();
    if (now >= until) break;
    sleep_ns(until - now < 50000000ull ? until - now : 50000000ull);
  }
  replay_stop = 0;
}

/* One replay through a fresh pool. stop_on_fail: stop at the first failed
 * allocation (find-min-pool probes). 0, or -1 after printing an error. */
static int replay_run(const opts_t *o, size_t pool_size, gpb_policy_t policy,
                      int stop_on_fail, uint64_t total_ops, result_t *r) {
  memset(r, 0, sizeof *r);
  r->policy = policy;
  r->pool_size = pool_size;
  run_t u;
  memset(&u, 0, sizeof u);
  u.o = o;
  u.r = r;
  u.stop_on_fail = stop_on_fail;
  if (run_open(&u, pool_size)) return -1;
  u.pg = (progress_t){!o->quiet && !stop_on_fail, isatty(2), total_ops,
                      gpb_now_ns(), 0, "replaying"};
  u.start = gpb_now_ns();
  gpb_pool_stats(u.pool, &r->at_peak);
  gpb_trace_op_t op;
  int rd = 0, ret = 0;
  while (!replay_stop && (rd = gpb_trace_next(u.tr, &op)) == 1) {
    if (r->ops == 0) u.t_first = op.time_ns;
    r->ops++;
    if ((r->ops & 0x3fff) == 0) progress_tick(&u.pg, r->ops);
    run_pace(&u, &op);
    int s = op.op == GPB_OP_ALLOC ? run_alloc(&u, &op) : run_free(&u, &op);
    if (s < 0) ret = -1;
    if (s) break;
  }
  ret = run_finish(&u, rd, ret);
  if (o->hold && !stop_on_fail && !replay_stop && !ret) replay_hold(o);
  run_close(&u);
  return ret;
}

/* What the probe function of the smallest-pool search needs. */
typedef struct min_probe_ctx {
  const char *pol;
  int quiet;
  const gpbt_minpool_t *st; /* the search's state, filled as it goes */
  uint64_t t0;
  uint64_t shown_ns; /* when a line was last printed */
} min_probe_ctx_t;

/* "probe N of at most T, about S s left" once the scan's range is known
 * (probes that stop at their first failure are quicker than ones that
 * fit, so the estimate is an upper one); before, the doubling. */
static void min_probe_where(const min_probe_ctx_t *mc, uint64_t n, char *buf,
                            size_t len) {
  const gpbt_minpool_t *st = mc->st;
  if (!st->upper || !st->step) {
    snprintf(buf, len, "probe %" PRIu64 " (looking for a size that fits)", n);
    return;
  }
  uint64_t total = st->scan_from + (st->upper - st->lower) / st->step + 1;
  double per = (double)(gpb_now_ns() - mc->t0) / 1e9 / (double)n;
  double left = total > n ? per * (double)(total - n) : 0;
  snprintf(buf, len, "probe %" PRIu64 " of at most %" PRIu64 ", at most "
           "about %.0f s left", n, total, left);
}

/* Prints each probe of the smallest-pool search (not with --quiet), and
 * stops the search after a SIGINT or SIGTERM: each probe is a whole
 * replay, so that is as soon as it can stop. */
static int min_probe(void *user, uint64_t size, int fits, uint64_t n) {
  min_probe_ctx_t *mc = user;
  const char *pol = mc->pol;
  if (replay_stop) return 1;
  if (fits < 0 || mc->quiet) return 0;
  /* Every fit, and a failure at most every 0.2 s on a terminal, 2 s in a
   * log (probes that stop at once come by the million). */
  int tty = isatty(2);
  uint64_t now = gpb_now_ns(), every = tty ? 200000000ull : 2000000000ull;
  if (!fits && n > 1 && now - mc->shown_ns < every) return 0;
  mc->shown_ns = now;
  char where[96];
  min_probe_where(mc, n, where, sizeof where);
  fprintf(stderr, "%sfind-min-pool (%s): %s: %" PRIu64 " bytes: %s%s",
          tty ? "\r" : "", pol, where, size, fits ? "fits" : "fails",
          tty && !fits ? "   " : "\n");
  return 0;
}

/* After a signal: what the search had learned, on standard output. */
static void min_interrupted(const char *pol, const gpbt_minpool_t *st) {
  fprintf(stderr, "%s: interrupted by signal %d during --find-min-pool (%s) "
          "after %" PRIu64 " probes\n", prog, (int)replay_stop, pol,
          st->probes);
  if (!st->fits_at) {
    printf("min pool size (%s): interrupted before any size fitted\n", pol);
    return;
  }
  char a[32];
  gpb_size_format(st->fits_at, a, sizeof a);
  printf("min pool size (%s), interrupted: at most %s (%" PRIu64 " bytes "
         "fit)", pol, a, st->fits_at);
  if (st->failed_to)
    printf("; every size from %" PRIu64 " to %" PRIu64 " failed, so the "
           "answer lies above %" PRIu64, st->lower, st->failed_to,
           st->failed_to);
  printf("\n");
  fflush(stdout);
}

/* The smallest pool on a grid of o->resolution (default 1/1024 of the
 * peak, a multiple of min_block) in which the trace replays with no
 * failed allocation, requests that failed in the recording included:
 * every size from the peak upward is tried (tools/common/minpool.h). The
 * trace is loaded once (q) for every policy. 0, or -1 after an error or
 * a signal. */
static int find_min_pool(const opts_t *o, gpb_policy_t policy,
                         const gpbt_seq_t *q, gpbt_minpool_t *out) {
  min_probe_ctx_t mc = {gpb_policy_name(policy), o->quiet, out, gpb_now_ns(),
                        0};
  int rc = gpbt_minpool_find_plan(q, o->min_block, policy, o->plan,
                                  o->resolution, min_probe, &mc, out);
  if (rc > 0) {
    min_interrupted(gpb_policy_name(policy), out);
    return -1;
  }
  if (rc == GPB_ETOOBIG) {
    uint64_t need = q->peak_live > q->max_request ? q->peak_live : q->max_request;
    fprintf(stderr, "%s: find-min-pool: the trace's peak demand of %" PRIu64
            " bytes is larger than any pool it tries (at most 2^46 bytes)\n",
            prog, need);
    return -1;
  }
  if (rc == GPB_ENOMEM) {
    fprintf(stderr, "%s: no pool up to 2^46 bytes replays the trace without "
            "failures (%s)\n", prog, gpb_policy_name(policy));
    return -1;
  }
  if (rc) {
    fprintf(stderr, "%s: find-min-pool: %s: %s\n", prog, gpb_err_name(rc),
            gpb_last_error_detail());
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------ plans */

/* The --plan in use; a global, so that it stays reachable on every way
 * out of main. */
static gpb_plan_t *loaded_plan;

static int plan_progress(void *user, uint64_t done, uint64_t total) {
  const opts_t *o = user;
  if (replay_stop) return 1;
  if (o->quiet) return 0;
  if (isatty(2))
    fprintf(stderr, "\rplanning: %" PRIu64 " of %" PRIu64 " allocations   ",
            done, total);
  else if (done % 65536 == 0)
    fprintf(stderr, "planning: %" PRIu64 " of %" PRIu64 " allocations\n",
            done, total);
  return 0;
}

/* Bytes the trace leaves allocated at its end. */
static uint64_t open_at_end(const gpbt_seq_t *q) {
  /* Frees carry no size in the op list: each slot's last alloc's. */
  uint64_t *sz = calloc(q->nslots ? q->nslots : 1, sizeof *sz), live = 0;
  if (!sz) return 0;
  for (size_t i = 0; i < q->n; i++) {
    const gpbt_op_t *op = &q->ops[i];
    if (op->alloc) {
      sz[op->slot] = op->size;
      live += op->size;
    } else {
      live -= sz[op->slot];
      sz[op->slot] = 0;
    }
  }
  free(sz);
  return live;
}

/* --plan-out: lays the trace out offline and writes the plan. 0, or 1
 * after printing an error. */
static int plan_out(const opts_t *o) {
  gpbt_seq_t q;
  char err[512];
  memset(&q, 0, sizeof q);
  int rc = gpbt_seq_load(o->path, 1, &q, err, sizeof err);
  if (rc) {
    fprintf(stderr, "%s: %s\n", prog, err);
    return 1;
  }
  gpb_plan_t *plan = NULL;
  rc = gpb_plan_make(q.ops, q.n, q.nslots, o->min_block, plan_progress,
                     (void *)o, &plan);
  if (!o->quiet && isatty(2)) fprintf(stderr, "\r%60s\r", "");
  if (rc > 0) {
    fprintf(stderr, "%s: interrupted by signal %d while planning\n", prog,
            (int)replay_stop);
  } else if (rc) {
    fprintf(stderr, "%s: cannot plan %s: %s\n", prog, o->path,
            gpb_err_name(rc));
  } else if ((rc = gpb_plan_save(plan, o->plan_out))) {
    fprintf(stderr, "%s: cannot write the plan: %s\n", prog,
            gpb_last_error_detail());
  }
  if (rc) {
    gpb_plan_destroy(plan);
    gpbt_seq_free(&q);
    return 1;
  }
  uint64_t ext = gpb_plan_extent(plan), peak = q.peak_live;
  uint64_t open = gpb_plan_repeat_from(plan) < gpb_plan_count(plan)
                      ? 0 : open_at_end(&q);
  if (open && !o->quiet)
    fprintf(stderr, "%s: warning: no period found and %" PRIu64 " bytes "
            "still live at the end: a longer run than this one will place "
            "by best fit around the plan's layout and may need more memory "
            "than best fit alone (record two or more whole steps after "
            "set-up)\n", prog, open);
  if (o->json) {
    printf("{\n  \"trace\": ");
    gpbt_json_str(stdout, o->path);
    printf(",\n  \"plan\": ");
    gpbt_json_str(stdout, o->plan_out);
    printf(",\n  \"min_block\": %zu,\n", o->min_block);
    printf("  \"entries\": %zu,\n", gpb_plan_count(plan));
    printf("  \"repeat_from\": %zu,\n", gpb_plan_repeat_from(plan));
    printf("  \"extent\": %" PRIu64 ",\n", ext);
    printf("  \"peak_demand_bytes\": %" PRIu64 ",\n", peak);
    printf("  \"extent_ratio\": %.6f\n}\n", ratio(ext, peak));
  } else {
    char a[32], b[32];
    gpb_size_format(ext, a, sizeof a);
    gpb_size_format(peak, b, sizeof b);
    printf("trace: %s\n", o->path);
    size_t rf = gpb_plan_repeat_from(plan), pn = gpb_plan_count(plan);
    printf("plan: %zu entries for %" PRIu64 " allocations, laid out offline, "
           "min_block %zu\n", pn, q.allocs + q.failed, o->min_block);
    if (rf < pn)
      printf("periodic: entries %zu to %zu repeat (counted from 0, as the "
             "file's \"repeat %zu\"; a period of %zu allocations), so a "
             "longer run of the same program follows it too\n", rf, pn - 1,
             rf, pn - rf);
    else
      printf("periodic: no (the run ends in no repeating step); a longer "
             "run follows the plan to its end, then best fit\n");
    printf("extent: %s (%" PRIu64 " bytes, %.3fx the peak demand of %s): "
           "the pool the plan needs\n", a, ext, ratio(ext, peak), b);
    printf("written to %s: follow it with gpubuddy-replay --plan, or in the "
           "next run with GPB_PLAN or GPB_TORCH_PLAN\n", o->plan_out);
  }
  gpb_plan_destroy(plan);
  gpbt_seq_free(&q);
  return 0;
}

/* The smallest pool that follows the trace's own plan: 0, or -1 after
 * printing an error. */
static int own_plan_min(const opts_t *o, const gpbt_seq_t *q,
                        gpbt_minpool_t *out) {
  gpb_plan_t *plan = NULL;
  int rc = gpb_plan_make(q->ops, q->n, q->nslots, o->min_block,
                         plan_progress, (void *)o, &plan);
  if (!rc) {
    min_probe_ctx_t mc = {"bestfit, own plan", o->quiet, out, gpb_now_ns(),
                          0};
    rc = gpbt_minpool_find_plan(q, o->min_block, GPB_POLICY_BESTFIT, plan,
                                o->resolution, min_probe, &mc, out);
  }
  gpb_plan_destroy(plan);
  if (rc > 0 && out->probes)
    min_interrupted("bestfit, own plan", out);
  else if (rc > 0)
    fprintf(stderr, "%s: interrupted by signal %d\n", prog, (int)replay_stop);
  else if (rc)
    fprintf(stderr, "%s: the trace's own plan: %s: %s\n", prog,
            gpb_err_name(rc), gpb_last_error_detail());
  return rc ? -1 : 0;
}

/* ------------------------------------------------------------ main */

/* Each option's setter (opts.h): NULL, or what the option takes. */
static const char *set_backend(void *ov, const char *a) {
  opts_t *o = ov;
  return gpb_backend_parse(a, &o->backend)
             ? "virtual, host, device, pinned or auto" : NULL;
}

static const char *set_pool_size(void *ov, const char *a) {
  opts_t *o = ov;
  return gpb_size_parse(a, &o->pool_size) || !o->pool_size
             ? "a size > 0 (64M, 1.5GiB...)" : NULL;
}

static const char *set_min_block(void *ov, const char *a) {
  opts_t *o = ov;
  if (!gpb_size_parse(a, &o->min_block) && o->min_block >= 16 &&
      !(o->min_block & (o->min_block - 1)))
    return NULL;
  return "a power of two >= 16";
}

static const char *set_policy(void *ov, const char *a) {
  opts_t *o = ov;
  gpb_policy_t p;
  o->policy_given = 1;
  if (!strcmp(a, "all")) {
    o->policy = -1;
    return NULL;
  }
  if (gpb_policy_parse(a, &p)) return "buddy, trim, bestfit or all";
  o->policy = (int)p;
  return NULL;
}

static const char *set_resolution(void *ov, const char *a) {
  opts_t *o = ov;
  size_t r;
  if (gpb_size_parse(a, &r) || r == 0 || r > GPBT_MINPOOL_MAX)
    return "1 byte to 64 TiB";
  o->resolution = r;
  return NULL;
}

static const char *set_publish(void *ov, const char *a) {
  opts_t *o = ov;
  if (!*a || strlen(a) >= GPB_NAME_MAX) return "a name of 1 to 63 characters";
  o->publish = a;
  return NULL;
}

static const char *set_hold(void *ov, const char *a) {
  opts_t *o = ov;
  char *end;
  o->hold = 1;
  if (!a) return NULL;
  errno = 0;
  o->hold_s = strtod(a, &end);
  if (!errno && end != a && !*end && o->hold_s > 0 && o->hold_s <= 1e9)
    return NULL;
  return "seconds > 0";
}

static const char *set_speed(void *ov, const char *a) {
  opts_t *o = ov;
  char *end;
  errno = 0;
  o->speed = strtod(a, &end);
  if (!errno && !*end && o->speed > 0 && !isinf(o->speed)) return NULL;
  return "a number > 0";
}

static const char *set_explain(void *ov, const char *a) {
  opts_t *o = ov;
  if (!a) o->explain = EXPLAIN_DEFAULT;
  else if (!strcmp(a, "all")) o->explain = UINT64_MAX;
  else if (gpbt_count_parse(a, 1, UINT64_MAX, &o->explain))
    return "a count >= 1 or all";
  return NULL;
}

static const char *set_top_sites(void *ov, const char *a) {
  opts_t *o = ov;
  uint64_t n = 10;
  if (a && gpbt_count_parse(a, 1, GPB_MAX_SITES + 1, &n))
    return "a count of 1 to 65536";
  o->top_sites = (uint32_t)n;
  return NULL;
}

/* The options (opts.h). */
static const gpbt_opt_t opt_defs[] = {
    GPBT_SET("backend", GPBT_ARG_REQUIRED, set_backend),
    GPBT_SET("pool-size", GPBT_ARG_REQUIRED, set_pool_size),
    GPBT_SET("min-block", GPBT_ARG_REQUIRED, set_min_block),
    GPBT_SET("policy", GPBT_ARG_REQUIRED, set_policy),
    GPBT_FLAG("find-min-pool", opts_t, find_min, 1),
    GPBT_FILE("plan", opts_t, plan_path),
    GPBT_FILE("plan-out", opts_t, plan_out),
    GPBT_SET("resolution", GPBT_ARG_REQUIRED, set_resolution),
    GPBT_SET("publish", GPBT_ARG_REQUIRED, set_publish),
    GPBT_SET("hold", GPBT_ARG_NUMBER, set_hold),
    GPBT_SET("speed", GPBT_ARG_REQUIRED, set_speed),
    GPBT_SET("explain-oom", GPBT_ARG_OPTIONAL, set_explain),
    GPBT_SET("top-sites", GPBT_ARG_OPTIONAL, set_top_sites),
    GPBT_FILE("compare", opts_t, compare),
    GPBT_FILE("png", opts_t, png),
    GPBT_FLAG("json", opts_t, json, 1),
    GPBT_FLAG("quiet", opts_t, quiet, 1),
    GPBT_SHORT('q', "quiet"),
    GPBT_HELP,
    GPBT_VERSION,
};

/* What --compare does not take, or NULL. */
static const char *check_compare(const opts_t *o) {
  if (!o->compare)
    return o->png ? "--png draws a comparison: give --compare A too" : NULL;
  if (!strcmp(o->path, "-") || !strcmp(o->compare, "-"))
    return "--compare reads each trace several times: give files, not "
           "standard input";
  if (o->plan_path || o->plan_out || o->publish || o->speed > 0 ||
      o->explain || o->find_min || o->pool_size)
    return "--compare finds each run's smallest pool itself and takes only "
           "--policy, --min-block, --resolution, --backend, --top-sites=N, "
           "--png, --json and --quiet";
  return NULL;
}

/* Options that do not go together, and standard input's limits: 0, or 2
 * after printing why. */
static int check_args(opts_t *o) {
  const char *err = NULL;
  int stdin_trace = !strcmp(o->path, "-");
  if (o->find_min && o->min_block > GPBT_MINPOOL_MAX)
    err = "--find-min-pool needs a --min-block of at most 64 TiB, the "
          "largest pool it tries";
  else if (o->hold && !o->publish)
    err = "--hold keeps a published pool up: give --publish NAME too";
  else if (o->plan_path && o->plan_out)
    err = "--plan follows a plan and --plan-out makes one: give one of them";
  else if (o->plan_path && o->policy_given && o->policy != GPB_POLICY_BESTFIT)
    err = "--plan needs --policy bestfit: only best fit places a request at "
          "a given offset";
  else if (o->plan_out && (o->find_min || o->pool_size || o->policy_given ||
                           o->publish || o->speed > 0 || o->explain ||
                           o->top_sites))
    err = "--plan-out replays nothing: it takes only --min-block, --json "
          "and --quiet";
  else if (stdin_trace && o->plan_out)
    err = "--plan-out needs a trace file, not standard input";
  else if (stdin_trace && (!o->pool_size || o->find_min || o->policy < 0))
    err = "a trace on standard input is read once: give --pool-size, and "
          "no --find-min-pool or --policy all";
  if (!err) err = check_compare(o);
  if (err) return gpbt_usage_error(prog, "%s", err);
  if (o->plan_path) o->policy = GPB_POLICY_BESTFIT;
  return 0;
}

/* The command line into o: -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, opts_t *o) {
  static const gpbt_optspec_t spec = {
      "gpubuddy-replay", opt_defs, sizeof opt_defs / sizeof opt_defs[0],
      usage, NULL};
  memset(o, 0, sizeof *o);
  o->backend = GPB_BACKEND_VIRTUAL;
  o->min_block = 256;
  o->policy = GPB_POLICY_BUDDY;
  int n, rc = gpbt_opts_parse(&spec, argc, argv, o, &n);
  if (rc >= 0) return rc;
  if (n != 1) return gpbt_usage_error(prog, "expected one TRACE argument");
  o->path = argv[1];
  return check_args(o) ? 2 : -1;
}

/* Everything one trace's replays found: what main prints. */
typedef struct job {
  scan_t sc;
  int scanned;      /* sc is filled (not with standard input) */
  size_t pool_size; /* given or derived */
  gpb_policy_t pols[GPB_NUM_POLICIES];
  int npol;
  result_t *res; /* one per policy */
  gpbt_minpool_t mp[GPB_NUM_POLICIES]; /* --find-min-pool's */
  gpbt_minpool_t own; /* bestfit following the trace's own plan */
} job_t;

static void job_free(job_t *j) {
  if (j->res) results_free(j->res, j->npol);
  j->res = NULL;
}

/* Replays each policy of j (after the smallest-pool search, if asked), then
 * the trace's own plan when comparing policies for memory. 0, or -1 after
 * printing an error. */
static int job_replays(const opts_t *o, job_t *j, gpbt_seq_t *q) {
  for (int i = 0; i < j->npol; i++) {
    size_t size = j->pool_size;
    if (o->find_min) {
      if (find_min_pool(o, j->pols[i], q, &j->mp[i])) return -1;
      size = (size_t)j->mp[i].size;
    }
    if (replay_run(o, size, j->pols[i], 0, j->scanned ? j->sc.ops : 0,
                   &j->res[i]))
      return -1;
    if (replay_stop) {
      fprintf(stderr, "%s: interrupted by signal %d after %" PRIu64 " ops\n",
              prog, (int)replay_stop, j->res[i].ops);
      return -1;
    }
  }
  /* Comparing policies for memory: what a job that runs again could have
   * too, following a plan made from this trace (its own layout). */
  if (o->find_min && j->npol > 1 && !o->plan && own_plan_min(o, q, &j->own))
    return -1;
  return 0;
}

/* Scans and replays o->path into j. 0, or -1 after printing an error. */
static int job_run(const opts_t *o, job_t *j) {
  memset(j, 0, sizeof *j);
  if (strcmp(o->path, "-") != 0) {
    /* Needed for a derived pool size and for find-min-pool; otherwise it
     * gives progress its total. Standard input can only be read once. */
    if (scan_trace(o, &j->sc)) return -1;
    j->scanned = 1;
  }
  size_t derived = 0;
  if (j->scanned)
    derived = (size_t)gpbt_pool_size_for(j->sc.peak_live, j->sc.max_request);
  j->pool_size = o->pool_size ? o->pool_size : derived;
  if (o->policy < 0)
    for (int i = 0; i < GPB_NUM_POLICIES; i++)
      j->pols[j->npol++] = (gpb_policy_t)i;
  else
    j->pols[j->npol++] = (gpb_policy_t)o->policy;
  j->res = calloc((size_t)j->npol, sizeof *j->res);
  if (!j->res) {
    fprintf(stderr, "%s: out of memory\n", prog);
    return -1;
  }
  gpbt_seq_t q;
  memset(&q, 0, sizeof q);
  if (o->find_min) {
    char err[512];
    if (gpbt_seq_load(o->path, 1, &q, err, sizeof err)) {
      fprintf(stderr, "%s: %s\n", prog, err);
      return -1;
    }
  }
  int rc = job_replays(o, j, &q);
  gpbt_seq_free(&q);
  return rc;
}

static void print_job_json(const opts_t *o, const job_t *j) {
  printf("{\n  \"trace\": ");
  gpbt_json_str(stdout, o->path);
  printf(",\n  \"pool_size_rule\": \"%s\",\n",
         o->find_min ? "find-min-pool" : o->pool_size ? "given"
         : "next power of two >= 2 x peak live");
  printf("  \"runs\": [\n");
  for (int i = 0; i < j->npol; i++)
    json_run(o, &j->res[i], j->scanned ? &j->sc : NULL, &j->mp[i],
             i == j->npol - 1);
  printf("  ]");
  if (j->own.size)
    printf(",\n  \"own_plan_min_pool_size\": %" PRIu64 ",\n"
           "  \"own_plan_min_pool_ratio\": %.6f", j->own.size,
           ratio(j->own.size, j->sc.peak_all));
  printf("\n}\n");
}

/* --policy all: the policies side by side, and which to use. */
static void print_policies(const opts_t *o, const job_t *j) {
  printf("\ncomparison:\n");
  printf("  %-6s %14s %14s %10s %9s %8s %11s %11s\n", "policy", "pool",
         "peak blocks", "int frag", "ext idx", "OOM", "alloc p50",
         "alloc p99");
  for (int i = 0; i < j->npol; i++) {
    const result_t *r = &j->res[i];
    printf("  %-6s %14zu %14" PRIu64 " %9.1f%% %9.3f %8" PRIu64
           " %8" PRIu64 " ns %8" PRIu64 " ns\n", gpb_policy_name(r->policy),
           r->pool_size, r->at_end.block_peak,
           100 * ratio(r->at_peak.internal_frag_bytes, r->at_peak.block_bytes),
           r->at_peak.external_frag, r->oom,
           replay_hist_quantile(&r->lat_alloc, 0.5),
           replay_hist_quantile(&r->lat_alloc, 0.99));
  }
  /* The recommendation: the policy whose pool can be smallest, when that
   * was measured; else the memory-best one by design. */
  int best = -1;
  for (int i = 0; o->find_min && i < j->npol; i++)
    if (best < 0 || j->mp[i].size < j->mp[best].size) best = i;
  if (best >= 0)
    printf("recommended for the least memory: %s (a pool of %" PRIu64
           " bytes fits; buddy is the fastest)\n",
           gpb_policy_name(j->pols[best]), j->mp[best].size);
  else
    printf("recommended for the least memory: bestfit (--find-min-pool "
           "measures each policy's smallest pool; buddy is the fastest)\n");
  if (j->own.size)
    printf("for a job that runs again: bestfit following a plan made from "
           "this trace (--plan-out) fits in %" PRIu64 " bytes (%.3fx peak "
           "demand), if the next run repeats this one (PyTorch: "
           "gpubuddy.torch.enable(plan_cache=PATH) records, plans and "
           "follows by itself)\n", j->own.size,
           ratio(j->own.size, j->sc.peak_all));
}

static void print_job_text(const opts_t *o, const job_t *j) {
  char a[32];
  printf("trace: %s\n", o->path);
  if (!o->pool_size && !o->find_min) {
    gpb_size_format(j->sc.peak_live, a, sizeof a);
    printf("pool size: derived from the trace (peak live %s): next power of "
           "two >= 2x\n", a);
  }
  if (o->find_min) {
    gpb_size_format(j->sc.peak_all, a, sizeof a);
    printf("peak demand: %s (%" PRIu64 " bytes: the most the trace asked to "
           "hold at once, requests that failed in the recording included)\n",
           a, j->sc.peak_all);
  }
  for (int i = 0; i < j->npol; i++) {
    const gpbt_minpool_t *mp = &j->mp[i];
    if (i) printf("\n");
    if (o->find_min) {
      gpb_size_format(mp->size, a, sizeof a);
      printf("min pool size (%s): %s (%" PRIu64 " bytes, %.3fx peak demand)"
             "\n  exact at a resolution of %" PRIu64 " bytes: every size from "
             "%" PRIu64 " up was tried (%" PRIu64 " replays)\n",
             gpb_policy_name(j->pols[i]), a, mp->size,
             ratio(mp->size, j->sc.peak_all), mp->step, mp->lower,
             mp->probes);
    }
    print_text(o, &j->res[i]);
    if (o->top_sites) print_top_sites(&j->res[i]);
  }
  if (j->npol > 1) print_policies(o, j);
}

/* --compare: what compare.c needs of one run (c->site_bytes allocated:
 * free it). 0, or -1 without memory. */
static int compare_fill(const job_t *j, const char *path,
                        gpbt_cmp_run_t *c) {
  const result_t *r0 = &j->res[0];
  memset(c, 0, sizeof *c);
  c->path = path;
  c->ops = j->sc.ops;
  c->peak_live = j->sc.peak_live;
  c->npol = j->npol;
  for (int p = 0; p < j->npol && p < GPBT_CMP_POLICIES; p++) {
    const result_t *r = &j->res[p];
    c->pol[p] = (gpbt_cmp_pol_t){
        gpb_policy_name(r->policy), j->mp[p].size, r->at_end.block_peak,
        ratio(r->at_peak.internal_frag_bytes, r->at_peak.block_bytes),
        r->at_peak.external_frag, r->oom};
  }
  uint64_t *bytes = calloc(r0->ntop_peak ? r0->ntop_peak : 1, sizeof *bytes);
  if (!bytes) return -1;
  for (size_t i = 0; i < r0->ntop_peak; i++) bytes[i] = r0->top_peak[i].bytes;
  c->nsites = r0->ntop_peak;
  c->site_text = (const char *const *)r0->text_peak;
  c->site_bytes = bytes;
  return 0;
}

/* Writes the comparison of two jobs. 0, or -1 after printing an error. */
static int compare_print(const opts_t *o, const job_t *j) {
  gpbt_cmp_run_t c[2];
  gpbt_cmp_t cmp = {0};
  const char *path[2] = {o->compare, o->path};
  int ret = -1, filled = 0;
  while (filled < 2 && !compare_fill(&j[filled], path[filled], &c[filled]))
    filled++;
  if (filled == 2 && !gpbt_cmp_sites(&c[0], &c[1], &cmp)) {
    size_t rows = o->top_sites <= GPB_MAX_SITES ? o->top_sites : 10;
    if (o->json) gpbt_cmp_json(stdout, &c[0], &c[1], &cmp);
    else gpbt_cmp_text(stdout, &c[0], &c[1], &cmp, rows);
    ret = 0;
    if (o->png && gpbt_cmp_png(o->png, &c[0], &c[1], &cmp, rows)) {
      fprintf(stderr, "%s: cannot write %s: %s\n", prog, o->png,
              strerror(errno));
      ret = -1;
    }
  } else {
    fprintf(stderr, "%s: out of memory for --compare\n", prog);
  }
  gpbt_cmp_free(&cmp);
  while (filled--) free((void *)c[filled].site_bytes);
  return ret;
}

/* --compare A B: each run's smallest pool per policy, replayed there with
 * every site ranked, then the two side by side. Exit status. */
static int run_compare(const opts_t *o) {
  opts_t oo = *o;
  oo.find_min = 1;
  if (!o->policy_given) oo.policy = -1;
  oo.top_sites = GPB_MAX_SITES + 1; /* every site, for matching */
  oo.json = 0;
  job_t j[2];
  memset(j, 0, sizeof j);
  int rc = 0;
  for (int k = 0; k < 2 && !rc; k++) {
    oo.path = k ? o->path : o->compare;
    rc = job_run(&oo, &j[k]);
  }
  if (!rc) {
    opts_t show = oo;
    show.top_sites = o->top_sites ? o->top_sites : 10;
    show.json = o->json;
    rc = compare_print(&show, j);
  }
  job_free(&j[0]);
  job_free(&j[1]);
  return rc ? 1 : 0;
}

int main(int argc, char **argv) {
  opts_t o;
  int rc = parse_args(argc, argv, &o);
  if (rc >= 0) return rc;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = replay_on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  if (o.plan_out) return plan_out(&o);
  if (o.compare) return run_compare(&o);
  if (o.plan_path) {
    if ((rc = gpb_plan_load(o.plan_path, &loaded_plan))) {
      fprintf(stderr, "%s: %s: %s\n", prog, gpb_err_name(rc),
              gpb_last_error_detail());
      return 1;
    }
    o.plan = loaded_plan;
  }
  job_t j;
  rc = job_run(&o, &j);
  if (!rc && o.json) print_job_json(&o, &j);
  else if (!rc) print_job_text(&o, &j);
  job_free(&j);
  gpb_plan_destroy(loaded_plan);
  return rc ? 1 : 0;
}
