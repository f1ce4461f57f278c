/* SPDX-License-Identifier: MIT */
/*
 * idmap.h: the tools' one hash table, from trace ids to one 64-bit value
 * per live allocation, whose meaning is the caller's (an offset, a size,
 * a slot number).
 *
 * Open addressing, linear probing, the project's one hash (gpb__hash64:
 * ids are addresses, which a weak mix clusters), backward-shift deletion
 * (no tombstones over a long trace), growth at a load of 3/4. It holds
 * live ids only, so it follows the trace's peak live count, never its
 * length. Slots are 16 bytes and the probes inline: at a million live ids
 * the table is far bigger than the caches, and the viewer's replay is
 * bound by it (24-byte slots and calls cost its churn 30%). Hence also
 * claim/commit and prefetch. The library's own table (lib/core/
 * alloctab.c) is internal to it.
 */
#ifndef GPB_TOOLS_IDMAP_H
#define GPB_TOOLS_IDMAP_H

#include "base/base.h" /* gpb__hash64, inline: no link dependency */

#include <stdint.h>
#include <string.h>

typedef struct gpbt_idslot {
  uint64_t key; /* id + 1; 0: empty */
  uint64_t val;
} gpbt_idslot_t;

typedef struct gpbt_idmap {
  gpbt_idslot_t *s;
  uint64_t cap, n; /* cap: 0 or a power of two */
} gpbt_idmap_t;

/* A zeroed map is empty and ready; the first claim allocates. */
void gpbt_idmap_fini(gpbt_idmap_t *m);
void gpbt_idmap_clear(gpbt_idmap_t *m);
/* Sizes an empty map for n live ids at once, so a replay that reaches
 * them never rehashes; a hint (more ids still grow it). */
void gpbt_idmap_reserve(gpbt_idmap_t *m, uint64_t n);
/* Doubles the map: 0 or GPB_EHOSTMEM. */
int gpbt_idmap_grow(gpbt_idmap_t *m);

static inline uint64_t gpbt_idmap_home(uint64_t key, uint64_t cap) {
  return gpb__hash64(key) & (cap - 1);
}

static inline gpbt_idslot_t *gpbt_idmap_find(const gpbt_idmap_t *m,
                                             uint64_t id) {
  if (!m->cap) return NULL;
  uint64_t key = id + 1;
  for (uint64_t j = gpbt_idmap_home(key, m->cap);; j = (j + 1) & (m->cap - 1)) {
    if (m->s[j].key == key) return &m->s[j];
    if (!m->s[j].key) return NULL;
  }
}

/* The empty slot id goes into, found in one probe run; NULL when id is
 * live already (*err 0) or the map cannot grow (*err GPB_EHOSTMEM).
 * Commit it once the allocation succeeded, or just leave it. Valid until
 * the next claim or remove. */
static inline gpbt_idslot_t *gpbt_idmap_claim(gpbt_idmap_t *m, uint64_t id,
                                              int *err) {
  *err = 0;
  if ((m->n + 1) * 4 > m->cap * 3 && (*err = gpbt_idmap_grow(m)) != 0)
    return NULL;
  uint64_t key = id + 1;
  uint64_t j = gpbt_idmap_home(key, m->cap);
  for (; m->s[j].key; j = (j + 1) & (m->cap - 1))
    if (m->s[j].key == key) return NULL;
  return &m->s[j];
}

static inline void gpbt_idmap_commit(gpbt_idmap_t *m, gpbt_idslot_t *s,
                                     uint64_t id, uint64_t val) {
  s->key = id + 1;
  s->val = val;
  m->n++;
}

/* Removes a slot and shifts back later entries of its probe run. */
static inline void gpbt_idmap_remove(gpbt_idmap_t *m, gpbt_idslot_t *s) {
  uint64_t mask = m->cap - 1, i = (uint64_t)(s - m->s);
  for (uint64_t j = (i + 1) & mask; m->s[j].key; j = (j + 1) & mask) {
    uint64_t h = gpbt_idmap_home(m->s[j].key, m->cap);
    /* Move j into the hole at i if its home is not in (i, j]. */
    if (((j - h) & mask) >= ((j - i) & mask)) {
      m->s[i] = m->s[j];
      i = j;
    }
  }
  m->s[i].key = m->s[i].val = 0;
  m->n--;
}

/* Starts fetching the home slot of id, for a replay that reads ahead. */
static inline void gpbt_idmap_prefetch(const gpbt_idmap_t *m, uint64_t id) {
  if (m->cap) __builtin_prefetch(&m->s[gpbt_idmap_home(id + 1, m->cap)]);
}

#endif /* GPB_TOOLS_IDMAP_H */
