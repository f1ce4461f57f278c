/* SPDX-License-Identifier: MIT */
/*
 * replay-util.c: the latency histogram, duration formatter and count
 * parser of the programs that replay traces. The histogram keeps
 * REPLAY_HIST_SUB linear buckets per power of two of nanoseconds, exact
 * below REPLAY_HIST_SUB ns.
 */
#include "replay.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t hist_index(uint64_t v) {
  if (v < REPLAY_HIST_SUB) return (size_t)v;
  unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= 5 */
  size_t sub = (size_t)(v >> (e - 5)) & (REPLAY_HIST_SUB - 1);
  size_t idx = REPLAY_HIST_SUB + (size_t)(e - 5) * REPLAY_HIST_SUB + sub;
  return idx < REPLAY_HIST_N ? idx : REPLAY_HIST_N - 1;
}

/* Middle of bucket idx. */
static uint64_t hist_value(size_t idx) {
  if (idx < REPLAY_HIST_SUB) return idx;
  size_t e = (idx - REPLAY_HIST_SUB) / REPLAY_HIST_SUB + 5;
  size_t sub = (idx - REPLAY_HIST_SUB) % REPLAY_HIST_SUB;
  uint64_t lo = ((uint64_t)(REPLAY_HIST_SUB + sub)) << (e - 5);
  uint64_t width = 1ull << (e - 5);
  return lo + width / 2;
}

void replay_hist_add(replay_hist_t *h, uint64_t ns) {
  h->b[hist_index(ns)]++;
  h->count++;
  h->sum += ns;
  if (ns > h->max) h->max = ns;
}

uint64_t replay_hist_quantile(const replay_hist_t *h, double q) {
  if (!h->count) return 0;
  uint64_t rank = (uint64_t)(q * (double)(h->count - 1)) + 1;
  uint64_t seen = 0;
  for (size_t i = 0; i < REPLAY_HIST_N; i++) {
    seen += h->b[i];
    if (seen >= rank) {
      uint64_t v = hist_value(i);
      return v > h->max ? h->max : v;
    }
  }
  return h->max;
}

void gpbt_ns_format(char *buf, size_t cap, uint64_t ns) {
  if (ns < 10000) snprintf(buf, cap, "%" PRIu64 " ns", ns);
  else if (ns < 10000000) snprintf(buf, cap, "%.1f us", (double)ns / 1e3);
  else if (ns < 10000000000ull) snprintf(buf, cap, "%.1f ms", (double)ns / 1e6);
  else snprintf(buf, cap, "%.1f s", (double)ns / 1e9);
}

int gpbt_count_parse(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
  uint64_t v = 0;
  if (!s || !*s) return -1;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return -1;
    unsigned d = (unsigned)(*s - '0');
    if (v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  if (v < lo || v > hi) return -1;
  *out = v;
  return 0;
}
