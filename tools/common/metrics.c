/* SPDX-License-Identifier: MIT */
/*
 * metrics.c: pool figures as Prometheus metrics. Names follow Prometheus's
 * rules: a gpubuddy_ prefix, base units (bytes, ratios), _total on
 * counters. Labels are few and bounded, as its cardinality rules ask:
 * every pool's series carry host (this machine's name), pool, device and,
 * for a pool made under torchrun, rank; the pid, which changes at every
 * restart and would start new series each time, is only on the
 * gpubuddy_pool_info series (value 1), with the policy and backend, for
 * joins. A family's HELP and TYPE come once, with all its series after
 * them, as the format requires. Pools whose state is not known yet (an
 * idle writer) get only gpubuddy_pool_up 0 and their info.
 */
#include "metrics.h"

#include <inttypes.h>
#include <unistd.h>

/* A label value: backslash, double quote and newline escaped. */
static void metrics_label(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '\\' || *s == '"') fprintf(f, "\\%c", *s);
    else if (*s == '\n') fputs("\\n", f);
    else fputc(*s, f);
  }
}

/* {host=..,pool=..,device=..[,rank=..] with no closing brace: callers add
 * their own labels, then "}". */
static void metrics_labels(FILE *f, const char *host,
                           const gpbt_pool_snap_t *p) {
  fputs("{host=\"", f);
  metrics_label(f, host);
  fputs("\",pool=\"", f);
  metrics_label(f, p->name);
  fprintf(f, "\",device=\"%d\"", p->info.device);
  if (p->info.rank >= 0) fprintf(f, ",rank=\"%d\"", (int)p->info.rank);
}

static void metrics_head(FILE *f, const char *name, const char *type,
                         const char *help) {
  fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One series per pool with state: the value from `get`. */
typedef double (*metrics_get_fn)(const gpbt_pool_snap_t *p);
static void metrics_family(FILE *f, const char *host,
                           const gpbt_pool_snap_t *v, size_t n,
                           const char *name, const char *type,
                           const char *help, metrics_get_fn get) {
  metrics_head(f, name, type, help);
  for (size_t i = 0; i < n; i++) {
    if (v[i].state <= 0) continue;
    fputs(name, f);
    metrics_labels(f, host, &v[i]);
    fprintf(f, "} %.17g\n", get(&v[i]));
  }
}

static double m_size(const gpbt_pool_snap_t *p) { return (double)p->info.pool_size; }
static double m_largest(const gpbt_pool_snap_t *p) { return (double)p->stats.largest_free; }
static double m_extfrag(const gpbt_pool_snap_t *p) { return p->stats.external_frag; }
static double m_fails(const gpbt_pool_snap_t *p) { return (double)p->stats.failures; }
static double m_allocs(const gpbt_pool_snap_t *p) { return (double)p->stats.allocs; }
static double m_frees(const gpbt_pool_snap_t *p) { return (double)p->stats.frees; }
static double m_live(const gpbt_pool_snap_t *p) { return (double)p->stats.live_allocs; }
static double m_peak(const gpbt_pool_snap_t *p) { return (double)p->stats.block_peak; }
static double m_lastfail(const gpbt_pool_snap_t *p) {
  return (double)p->stats.last_failed_request;
}

int gpbt_metrics_write(FILE *f, const gpbt_pool_snap_t *v, size_t n) {
  char host[256] = "unknown"; /* one machine, one name: the host label */
  if (gethostname(host, sizeof host - 1)) snprintf(host, sizeof host, "unknown");
  host[sizeof host - 1] = '\0';
  metrics_head(f, "gpubuddy_pools", "gauge", "Pools published on this machine.");
  fprintf(f, "gpubuddy_pools{host=\"");
  metrics_label(f, host);
  fprintf(f, "\"} %zu\n", n);
  metrics_head(f, "gpubuddy_pool_info", "gauge",
               "1 for each pool, with its writer's pid, policy and backend.");
  for (size_t i = 0; i < n; i++) {
    fputs("gpubuddy_pool_info", f);
    metrics_labels(f, host, &v[i]);
    fprintf(f, ",pid=\"%d\"", (int)v[i].info.pid);
    if (v[i].state > 0)
      fprintf(f, ",policy=\"%s\",backend=\"%s\"", gpb_policy_name(v[i].info.policy),
              gpb_backend_name(v[i].info.backend));
    fputs("} 1\n", f);
  }
  metrics_head(f, "gpubuddy_pool_up", "gauge",
               "1 when the pool's state was read, 0 while its writer is idle "
               "or unreadable.");
  for (size_t i = 0; i < n; i++) {
    fputs("gpubuddy_pool_up", f);
    metrics_labels(f, host, &v[i]);
    fprintf(f, "} %d\n", v[i].state > 0);
  }
  metrics_family(f, host, v, n, "gpubuddy_pool_size_bytes", "gauge",
                 "Bytes the pool reserved.", m_size);
  metrics_head(f, "gpubuddy_pool_bytes", "gauge",
               "Bytes of the pool by state: used (in blocks), free, requested "
               "(asked for by live allocations), waste (used but not "
               "requested).");
  for (size_t i = 0; i < n; i++) {
    if (v[i].state <= 0) continue;
    const gpb_stats_t *s = &v[i].stats;
    static const char *const st[] = {"used", "free", "requested", "waste"};
    uint64_t val[] = {s->block_bytes, s->free_bytes, s->requested_bytes,
                      s->internal_frag_bytes};
    for (int k = 0; k < 4; k++) {
      fputs("gpubuddy_pool_bytes", f);
      metrics_labels(f, host, &v[i]);
      fprintf(f, ",state=\"%s\"} %" PRIu64 "\n", st[k], val[k]);
    }
  }
  metrics_family(f, host, v, n, "gpubuddy_pool_used_peak_bytes", "gauge",
                 "Most bytes in used blocks at once.", m_peak);
  metrics_family(f, host, v, n, "gpubuddy_largest_free_block_bytes", "gauge",
                 "The largest free block: a request that size succeeds "
                 "now.", m_largest);
  metrics_family(f, host, v, n, "gpubuddy_last_failed_request_bytes", "gauge",
                 "Bytes the latest failed allocation asked for (0: none "
                 "failed); against the largest free block, why it failed.",
                 m_lastfail);
  metrics_family(f, host, v, n, "gpubuddy_external_fragmentation_ratio", "gauge",
                 "1 - sqrt(sum f^2)/sum f over free blocks f: 0 when the "
                 "free bytes are one block.", m_extfrag);
  metrics_family(f, host, v, n, "gpubuddy_alloc_failures_total", "counter",
                 "Allocations that failed (out of memory, or too large).",
                 m_fails);
  metrics_family(f, host, v, n, "gpubuddy_allocs_total", "counter",
                 "Successful allocations.", m_allocs);
  metrics_family(f, host, v, n, "gpubuddy_frees_total", "counter", "Frees.", m_frees);
  metrics_family(f, host, v, n, "gpubuddy_live_allocations", "gauge",
                 "Allocations live now.", m_live);
  metrics_head(f, "gpubuddy_free_blocks", "gauge",
               "Free blocks per order (a block of order k is min_block << k "
               "bytes), as /proc/buddyinfo counts them.");
  for (size_t i = 0; i < n; i++) {
    if (v[i].state <= 0) continue;
    for (uint32_t k = 0; k < v[i].stats.num_orders && k < GPB_MAX_ORDERS; k++) {
      fputs("gpubuddy_free_blocks", f);
      metrics_labels(f, host, &v[i]);
      fprintf(f, ",order=\"%u\"} %" PRIu64 "\n", k, v[i].stats.free_blocks[k]);
    }
  }
  return ferror(f) ? -1 : 0;
}
