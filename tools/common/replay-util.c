/* SPDX-License-Identifier: MIT */
/*
 * replay-util.c: the id map and latency histogram of the programs that
 * replay traces (gpubuddy-replay, and the loader in opseq.c).
 *
 * The map is open addressing with linear probing and backward-shift
 * deletion (no tombstones, so a long replay with churn never degrades). It
 * doubles at a load of 1/2 and never shrinks: its size is set by the peak
 * number of live allocations. The histogram keeps REPLAY_HIST_SUB linear
 * buckets per power of two of nanoseconds, exact below REPLAY_HIST_SUB ns.
 */
#include "replay.h"

#include "base/base.h" /* gpb__hash64, inline: no link dependency */

#include <stdlib.h>
#include <string.h>

static size_t map_hash(uint64_t id, size_t mask) {
  return (size_t)gpb__hash64(id) & mask; /* ids are offsets, pointers */
}

int replay_map_init(replay_map_t *m) {
  m->cap = 1024;
  m->count = 0;
  m->slots = calloc(m->cap, sizeof *m->slots);
  return m->slots ? 0 : -1;
}

void replay_map_fini(replay_map_t *m) {
  free(m->slots);
  m->slots = NULL;
  m->cap = m->count = 0;
}

replay_slot_t *replay_map_find(const replay_map_t *m, uint64_t id) {
  size_t mask = m->cap - 1;
  for (size_t i = map_hash(id, mask);; i = (i + 1) & mask) {
    replay_slot_t *s = &m->slots[i];
    if (!s->used) return NULL;
    if (s->id == id) return s;
  }
}

static int map_grow(replay_map_t *m) {
  size_t ncap = m->cap * 2;
  replay_slot_t *ns = calloc(ncap, sizeof *ns);
  if (!ns) return -1;
  for (size_t j = 0; j < m->cap; j++) {
    if (!m->slots[j].used) continue;
    size_t i = map_hash(m->slots[j].id, ncap - 1);
    while (ns[i].used) i = (i + 1) & (ncap - 1);
    ns[i] = m->slots[j];
  }
  free(m->slots);
  m->slots = ns;
  m->cap = ncap;
  return 0;
}

replay_slot_t *replay_map_insert(replay_map_t *m, uint64_t id) {
  if ((m->count + 1) * 2 > m->cap && map_grow(m)) return NULL;
  size_t mask = m->cap - 1;
  size_t i = map_hash(id, mask);
  while (m->slots[i].used) i = (i + 1) & mask;
  replay_slot_t *s = &m->slots[i];
  memset(s, 0, sizeof *s);
  s->used = 1;
  s->id = id;
  m->count++;
  return s;
}

void replay_map_remove(replay_map_t *m, replay_slot_t *s) {
  size_t mask = m->cap - 1;
  size_t i = (size_t)(s - m->slots);
  /* Shift later members of the probe run back over the hole, so that
   * every entry stays reachable from its home slot. */
  size_t j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (!m->slots[j].used) break;
    size_t home = map_hash(m->slots[j].id, mask);
    /* Entry j may move to i if its home is not in (i, j] cyclically. */
    int stays = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
    if (stays) continue;
    m->slots[i] = m->slots[j];
    i = j;
  }
  m->slots[i].used = 0;
  m->count--;
}

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
