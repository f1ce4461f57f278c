/* SPDX-License-Identifier: MIT */
/*
 * bitset.c: hierarchical bitsets for the buddy core's free lists.
 *
 * Level 0 holds one bit per block. Each higher level holds one bit per
 * word of the level below, set iff that word is nonzero, until a level
 * fits in one word. Finding the lowest free block of an order is then one
 * count-trailing-zeros per level (5 levels cover 2^30 blocks), and set or
 * clear touches a higher level only when a word turns zero or nonzero.
 * Lowest-address-first placement falls out for free.
 */
#include "core/core.h"

#include <stdlib.h>
#include <string.h>

int gpb__bits_init(gpb__bits_t *b, uint64_t nbits) {
  memset(b, 0, sizeof *b);
  b->nbits = nbits;
  uint64_t n = nbits ? nbits : 1;
  for (int l = 0; l < GPB__BITS_MAXLEV; l++) {
    uint64_t words = (n + 63) / 64;
    b->nwords[l] = words;
    /* calloc: large tables come from fresh zero pages, so creating even an
     * 80 GiB pool's metadata costs almost nothing up front. */
    b->w[l] = calloc(words, sizeof(uint64_t));
    if (!b->w[l]) {
      gpb__bits_fini(b);
      return GPB_EHOSTMEM;
    }
    b->nlev = l + 1;
    if (words == 1) return 0;
    n = words;
  }
  gpb__bits_fini(b);
  return GPB_EINVAL; /* more than 2^48 bits: not a pool we can describe */
}

void gpb__bits_fini(gpb__bits_t *b) {
  for (int l = 0; l < b->nlev; l++) free(b->w[l]);
  memset(b, 0, sizeof *b);
}

void gpb__bits_zero(gpb__bits_t *b) {
  for (int l = 0; l < b->nlev; l++)
    memset(b->w[l], 0, b->nwords[l] * sizeof(uint64_t));
}

void gpb__bits_prefault(gpb__bits_t *b) {
  for (int l = 0; l < b->nlev; l++) {
    volatile uint64_t *w = b->w[l];
    /* One write per page maps it; it keeps what the word holds. */
    for (uint64_t x = 0; x < b->nwords[l]; x += 4096 / sizeof(uint64_t))
      w[x] = w[x];
  }
}

uint64_t gpb__bits_first(const gpb__bits_t *b) {
  uint64_t i = 0;
  for (int l = b->nlev - 1; l >= 0; l--) {
    uint64_t w = b->w[l][i];
    if (!w) return UINT64_MAX;
    i = (i << 6) | (uint64_t)__builtin_ctzll(w);
  }
  return i;
}

int gpb__bits_check(const gpb__bits_t *b) {
  if (b->nbits % 64) {
    uint64_t tail = b->w[0][b->nwords[0] - 1] >> (b->nbits % 64);
    if (tail) return GPB_ECORRUPT; /* bits past the end */
  }
  for (int l = 0; l + 1 < b->nlev; l++) {
    for (uint64_t j = 0; j < b->nwords[l]; j++) {
      int want = b->w[l][j] != 0;
      int have = (int)((b->w[l + 1][j >> 6] >> (j & 63)) & 1u);
      if (want != have) return GPB_ECORRUPT;
    }
  }
  return 0;
}

uint64_t gpb__bits_count(const gpb__bits_t *b) {
  uint64_t n = 0;
  for (uint64_t j = 0; j < b->nwords[0]; j++)
    n += (uint64_t)__builtin_popcountll(b->w[0][j]);
  return n;
}

size_t gpb__bits_bytes(const gpb__bits_t *b) {
  size_t n = 0;
  for (int l = 0; l < b->nlev; l++) n += b->nwords[l] * sizeof(uint64_t);
  return n;
}

uint64_t gpb__bits_prev(const gpb__bits_t *b, uint64_t i) {
  if (b->nbits == 0) return UINT64_MAX;
  if (i >= b->nbits) i = b->nbits - 1;
  /* Climb until a word holds a set bit at or below the position, then
   * descend taking the highest set bit at each level. */
  int l = 0;
  uint64_t pos = i;
  for (;;) {
    uint64_t w = b->w[l][pos >> 6];
    uint64_t bit = pos & 63;
    uint64_t mask = bit == 63 ? ~0ull : ((2ull << bit) - 1);
    w &= mask;
    if (w) {
      pos = (pos & ~63ull) | (uint64_t)(63 - __builtin_clzll(w));
      break;
    }
    if (l + 1 >= b->nlev || (pos >> 6) == 0) return UINT64_MAX;
    pos = (pos >> 6) - 1; /* words strictly before this one */
    l++;
  }
  while (l > 0) {
    l--;
    uint64_t w = b->w[l][pos];
    pos = (pos << 6) | (uint64_t)(63 - __builtin_clzll(w));
  }
  return pos;
}

uint64_t gpb__bits_next(const gpb__bits_t *b, uint64_t i) {
  if (i >= b->nbits) return UINT64_MAX;
  /* Climb until a word holds a set bit at or after the position, then
   * descend taking the lowest set bit at each level. */
  int l = 0;
  uint64_t pos = i;
  for (;;) {
    uint64_t w = b->w[l][pos >> 6] & (~0ull << (pos & 63));
    if (w) {
      pos = (pos & ~63ull) | (uint64_t)__builtin_ctzll(w);
      break;
    }
    pos = (pos >> 6) + 1; /* words strictly after this one */
    if (l + 1 >= b->nlev || pos >= b->nwords[l]) return UINT64_MAX;
    l++;
  }
  while (l > 0) {
    l--;
    uint64_t w = b->w[l][pos];
    pos = (pos << 6) | (uint64_t)__builtin_ctzll(w);
  }
  return pos;
}
