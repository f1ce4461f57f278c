/* SPDX-License-Identifier: MIT */
/*
 * replay.h: the id map and latency histogram (replay-util.c) of the
 * programs that replay traces.
 *
 * An id map from trace ids to live allocations (it holds only live ones,
 * so its size follows the trace's peak live count, never its length) and a
 * log-linear latency histogram (fixed size, about 3% resolution), so a
 * replay of any length runs in bounded memory.
 */
#ifndef GPB_REPLAY_H
#define GPB_REPLAY_H

#include <stddef.h>
#include <stdint.h>

typedef struct replay_slot {
  uint64_t id;
  uint64_t size;
  void *ptr;
  uint64_t slot;   /* opseq.c: the allocation's slot */
  uint32_t used;   /* slot holds an entry */
  uint32_t failed; /* the allocation failed: its free is skipped */
} replay_slot_t;

typedef struct replay_map {
  replay_slot_t *slots;
  size_t cap; /* power of two */
  size_t count;
} replay_map_t;

/* 0 or -1 (no memory). */
int replay_map_init(replay_map_t *m);
void replay_map_fini(replay_map_t *m);
/* The entry for id, or NULL. */
replay_slot_t *replay_map_find(const replay_map_t *m, uint64_t id);
/* Inserts id (absent) and returns its slot, or NULL without memory. The
 * returned pointer is valid until the next insert or remove. */
replay_slot_t *replay_map_insert(replay_map_t *m, uint64_t id);
/* Removes the entry `s` points to (from replay_map_find). */
void replay_map_remove(replay_map_t *m, replay_slot_t *s);

#define REPLAY_HIST_SUB 32 /* buckets per power of two */
#define REPLAY_HIST_N (REPLAY_HIST_SUB * 62)

typedef struct replay_hist {
  uint64_t count, max, sum;
  uint64_t b[REPLAY_HIST_N];
} replay_hist_t;

void replay_hist_add(replay_hist_t *h, uint64_t ns);
/* The q-quantile (0..1) within a bucket's width; 0 when empty. */
uint64_t replay_hist_quantile(const replay_hist_t *h, double q);

#endif
