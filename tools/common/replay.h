/* SPDX-License-Identifier: MIT */
/*
 * replay.h: the latency histogram, duration formatter and count parser
 * (replay-util.c) of the programs that replay traces. The histogram is log-linear, fixed
 * size, about 3% resolution, so a replay of any length runs in bounded
 * memory. Their id map is idmap.h.
 */
#ifndef GPB_REPLAY_H
#define GPB_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#define REPLAY_HIST_SUB 32 /* buckets per power of two */
#define REPLAY_HIST_N (REPLAY_HIST_SUB * 62)

typedef struct replay_hist {
  uint64_t count, max, sum;
  uint64_t b[REPLAY_HIST_N];
} replay_hist_t;

void replay_hist_add(replay_hist_t *h, uint64_t ns);
/* The q-quantile (0..1) within a bucket's width; 0 when empty. */
uint64_t replay_hist_quantile(const replay_hist_t *h, double q);

/* A duration for people: "850 ns" below 10 us, "12.3 us" below 10 ms,
 * "4.5 ms" below 10 s, else "12.0 s". Like snprintf into buf. */
void gpbt_ns_format(char *buf, size_t cap, uint64_t ns);

/* A count given on the command line: decimal digits only (no sign, space
 * or suffix, which strtoull would let through), lo <= value <= hi. 0 with
 * *out set, or -1 with *out untouched. */
int gpbt_count_parse(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

#endif
