/* SPDX-License-Identifier: MIT */
/*
 * alloctab.c: the table of live allocations, keyed by first unit.
 *
 * free() gets a pointer and must find the allocation's length, requested
 * size and tag; the buddy bitsets hold only free blocks. A per-unit array
 * would cost bytes per 256 B of pool, so live allocations sit in an open-
 * addressing hash (linear probing, load <= 1/2, Fibonacci hashing).
 *
 * Growth is incremental: when the table is half full a table of twice the
 * size is allocated (calloc, so its pages arrive zeroed lazily) and each
 * later insert or remove moves a few old slots across. No call ever pays
 * for a whole rehash, which keeps allocation latency free of stalls.
 * Removal uses backward-shift deletion in the current table; in the old
 * table it leaves a tombstone, which is harmless because the old table
 * only drains.
 */
#include "core/core.h"

#include <stdlib.h>
#include <string.h>

#define ATAB_TOMB UINT64_MAX
#define ATAB_MOVE_PER_CALL 8

int gpb__atab_init(gpb__atab_t *t, uint64_t cap) {
  memset(t, 0, sizeof *t);
  uint32_t bits = 6;
  while ((1ull << bits) < cap) bits++;
  t->cur = calloc(1ull << bits, sizeof *t->cur);
  if (!t->cur) return GPB_EHOSTMEM;
  t->cap = 1ull << bits;
  t->bits = bits;
  return 0;
}

void gpb__atab_fini(gpb__atab_t *t) {
  free(t->cur);
  free(t->old);
  memset(t, 0, sizeof *t);
}

void gpb__atab_clear(gpb__atab_t *t) {
  memset(t->cur, 0, t->cap * sizeof *t->cur);
  free(t->old);
  t->old = NULL;
  t->old_cap = t->old_pos = t->old_live = 0;
  t->old_bits = 0;
  t->used = 0;
}

gpb__arec_t *gpb__atab_find_old(const gpb__atab_t *t, uint64_t key) {
  return gpb__atab_probe(t->old, t->old_bits, key);
}

static void atab_put(gpb__atab_t *t, const gpb__arec_t *rec) {
  uint64_t mask = t->cap - 1;
  uint64_t i = gpb__atab_home(rec->key, t->bits);
  while (t->cur[i].key != 0) i = (i + 1) & mask;
  t->cur[i] = *rec;
  t->used++;
}

/* Moves up to n slots of the old table into the current one. */
static void atab_migrate(gpb__atab_t *t, int n) {
  while (t->old && n-- > 0) {
    gpb__arec_t *r = &t->old[t->old_pos++];
    if (r->key != 0 && r->key != ATAB_TOMB) {
      atab_put(t, r);
      t->old_live--;
      r->key = ATAB_TOMB; /* moved: remove must not find this stale copy */
    }
    if (t->old_pos == t->old_cap) {
      free(t->old);
      t->old = NULL;
      t->old_cap = t->old_pos = t->old_live = 0;
      t->old_bits = 0;
    }
  }
}

int gpb__atab_grow(gpb__atab_t *t) {
  if (t->old) {
    /* Rare: growth outran migration. Finish it now (bounded by the old
     * table, which is half the current one). */
    atab_migrate(t, (int)(t->old_cap - t->old_pos));
  }
  gpb__arec_t *n = calloc(t->cap * 2, sizeof *n);
  if (!n) return GPB_EHOSTMEM;
  t->old = t->cur;
  t->old_cap = t->cap;
  t->old_bits = t->bits;
  t->old_pos = 0;
  t->old_live = t->used;
  t->cur = n;
  t->cap *= 2;
  t->bits++;
  t->used = 0;
  return 0;
}

int gpb__atab_insert(gpb__atab_t *t, uint64_t unit, const gpb__arec_t *rec) {
  int rc = gpb__atab_room(t);
  if (rc) return rc;
  gpb__atab_put(t, unit, rec);
  return 0;
}

void gpb__atab_migrate(gpb__atab_t *t) { atab_migrate(t, ATAB_MOVE_PER_CALL); }

/* Removes the record in the old table's slot r (a tombstone: the old
 * table only drains). */
static void atab_remove_old(gpb__atab_t *t, gpb__arec_t *r) {
  r->key = ATAB_TOMB;
  t->old_live--;
  atab_migrate(t, ATAB_MOVE_PER_CALL);
}

/* Removes the record in the current table's slot i. Backward-shift
 * deletion keeps probe chains unbroken without tombstones. */
static inline void atab_remove_cur(gpb__atab_t *t, uint64_t i) {
  uint64_t mask = t->cap - 1;
  uint64_t j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (t->cur[j].key == 0) break;
    uint64_t home = gpb__atab_home(t->cur[j].key, t->bits);
    /* Move j into the hole at i unless j's home lies cyclically in (i, j]. */
    if ((i <= j) ? (i < home && home <= j) : (i < home || home <= j)) continue;
    t->cur[i] = t->cur[j];
    i = j;
  }
  t->cur[i].key = 0;
  t->used--;
  if (GPB__UNLIKELY(t->old != NULL)) atab_migrate(t, ATAB_MOVE_PER_CALL);
}

void gpb__atab_remove(gpb__atab_t *t, uint64_t unit) {
  uint64_t key = unit + 1;
  if (t->old) {
    gpb__arec_t *r = gpb__atab_probe(t->old, t->old_bits, key);
    if (r) {
      atab_remove_old(t, r);
      return;
    }
  }
  uint64_t mask = t->cap - 1;
  uint64_t i = gpb__atab_home(key, t->bits);
  while (t->cur[i].key != key) {
    if (t->cur[i].key == 0) return;
    i = (i + 1) & mask;
  }
  atab_remove_cur(t, i);
}

void gpb__atab_remove_rec(gpb__atab_t *t, gpb__arec_t *r) {
  uintptr_t a = (uintptr_t)r, c = (uintptr_t)t->cur;
  if (a >= c && a < c + t->cap * sizeof *r)
    atab_remove_cur(t, (uint64_t)(r - t->cur));
  else
    atab_remove_old(t, r);
}

int gpb__atab_reserve(gpb__atab_t *t, uint64_t n) {
  uint32_t bits = t->bits;
  while ((1ull << bits) < 2 * n && bits < 40) bits++;
  if (bits == t->bits || t->used || t->old) return 0;
  gpb__arec_t *nt = calloc(1ull << bits, sizeof *nt);
  if (!nt) return GPB_EHOSTMEM;
  free(t->cur);
  t->cur = nt;
  t->cap = 1ull << bits;
  t->bits = bits;
  return 0;
}

uint64_t gpb__atab_count(const gpb__atab_t *t) { return t->used + t->old_live; }

size_t gpb__atab_bytes(const gpb__atab_t *t) {
  return (t->cap + t->old_cap) * sizeof(gpb__arec_t);
}
