/* SPDX-License-Identifier: MIT */
/*
 * buddy.c: the buddy core. Offsets in, offsets out; no CUDA, no pointers.
 *
 * The managed range is nunits units of min_block bytes. A block of order k
 * is 2^k units and starts at a multiple of 2^k units, so every block is
 * aligned to its own size. A range that is not a power of two is covered
 * by roots: the binary digits of nunits, largest first. Node (k, i) covers
 * units [i*2^k, (i+1)*2^k) and exists iff i < nunits >> k.
 *
 * State is one hierarchical free bitset per order plus a hash of live
 * allocations; nothing else. Allocation takes the lowest-addressed free
 * block of the smallest sufficient order and splits it down: O(orders).
 * Free sets the block's bit and merges with its buddy while the buddy is
 * free: O(orders). Metadata is two bits per unit plus 40 bytes per live
 * allocation: 84 MB for an 80 GiB pool of 256 B units.
 *
 * Fragmentation bound: with GPB_POLICY_BUDDY a request of s bytes takes
 * the next power of two, so up to half of a block is lost to rounding.
 * GPB_POLICY_TRIM carves the request out of that block and returns the
 * unused tail as smaller free blocks at once, so less than one min_block
 * is lost per allocation. An allocation is then the canonical run of
 * blocks of its range: maximal aligned power-of-two blocks, left to right.
 * Freeing releases them from the smallest (last) up, so the whole run
 * coalesces back.
 *
 * GPB_POLICY_BESTFIT goes further: the request, rounded to whole units, is
 * placed at the start of a well-fitting maximal free run (extents.c) as
 * its canonical run. Waste is then below one min_block per allocation and
 * placement approaches best fit, while blocks, buddies, splits and merges
 * stay as in any buddy pool. Such a core keeps no per-order bitsets: its
 * blocks follow from its runs, and fit.c handles its calls. A bitset of
 * allocation starts lets any unit find its allocation.
 */
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline int node_valid(const gpb__buddy_t *b, uint32_t k, uint64_t i) {
  return k < b->norders && i < (b->nunits >> k);
}

static inline int is_free(const gpb__buddy_t *b, uint32_t k, uint64_t i) {
  return node_valid(b, k, i) && gpb__bits_test(&b->freeb[k], i);
}

/* (k, i) has a buddy it may merge with: its parent exists and is not
 * above the cap (an arena's superblocks are its roots). */
static inline int has_buddy(const gpb__buddy_t *b, uint32_t k, uint64_t i) {
  return k < b->cap && (i >> 1) < (b->nunits >> (k + 1));
}

/* Whether the pair under parent (k + 1, q) is still two free blocks. */
static inline int buddy_pair_free(const gpb__buddy_t *b, uint32_t k,
                                  uint64_t q) {
  return k < b->norders && has_buddy(b, k, 2 * q) &&
         gpb__bits_test(&b->freeb[k], 2 * q) &&
         gpb__bits_test(&b->freeb[k], 2 * q + 1);
}

static int buddy_u64_cmp(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, c = *(const uint64_t *)y;
  return a < c ? -1 : a > c;
}

/* Sorts keys[0..n) and drops repeats; returns the new n. */
static size_t buddy_sort_unique(uint64_t *keys, size_t n) {
  if (n < 2) return n;
  qsort(keys, n, sizeof *keys, buddy_u64_cmp);
  size_t m = 1;
  for (size_t x = 1; x < n; x++)
    if (keys[x] != keys[m - 1]) keys[m++] = keys[x];
  return m;
}

/* A model's list of its pairs (list_pairs): notes the pair under parent
 * (k + 1, q). A full list first drops the pairs broken since (a split
 * makes one that the next split or allocation breaks), and repeats when
 * that is not enough, then doubles: it holds at most twice the pairs. */
static void buddy_note_pair(gpb__buddy_t *b, uint32_t k, uint64_t q) {
  if (b->nplist == b->capplist) {
    uint32_t n = 0;
    for (uint32_t x = 0; x < b->nplist; x++) {
      uint64_t e = b->plist[x];
      if (buddy_pair_free(b, (uint32_t)(e & 63), e >> 6)) b->plist[n++] = e;
    }
    if (n > b->capplist / 2) n = (uint32_t)buddy_sort_unique(b->plist, n);
    b->nplist = n;
    if (n > b->capplist / 2 || !b->capplist) {
      uint32_t cap = b->capplist ? b->capplist * 2 : 64;
      uint64_t *p = cap > b->capplist ? realloc(b->plist, cap * sizeof *p) : NULL;
      if (p) {
        b->plist = p;
        b->capplist = cap;
      } else if (n == b->capplist) {
        b->plist_lost = 1; /* the figures then merge what is listed */
        return;
      }
    }
  }
  b->plist[b->nplist++] = q << 6 | k;
}

/* A free bit next to a free buddy makes (or a cleared one breaks) a pair. */
static inline void set_free(gpb__buddy_t *b, uint32_t k, uint64_t i) {
  if (has_buddy(b, k, i) && gpb__bits_test(&b->freeb[k], i ^ 1)) {
    b->npairs[k]++;
    if (b->list_pairs) buddy_note_pair(b, k, i >> 1);
  }
  gpb__bits_set(&b->freeb[k], i);
  b->nfree[k]++;
}

static inline void clear_free(gpb__buddy_t *b, uint32_t k, uint64_t i) {
  if (has_buddy(b, k, i) && gpb__bits_test(&b->freeb[k], i ^ 1)) {
    b->npairs[k]--;
  }
  gpb__bits_clear(&b->freeb[k], i);
  b->nfree[k]--;
}


/* Caller guarantees (k, i) is a free block and k >= 1. */
static void buddy_split(gpb__buddy_t *b, uint32_t k, uint64_t i, int emit) {
  gpb_assert(k >= 1 && is_free(b, k, i));
  clear_free(b, k, i);
  set_free(b, k - 1, 2 * i);
  set_free(b, k - 1, 2 * i + 1);
  if (emit) gpb__emit_sm(b, GPB_EV_SPLIT, k, i);
}

/* Sets (k, i) free and merges upward while its buddy is free. */
static void buddy_merge_up(gpb__buddy_t *b, uint32_t k, uint64_t i) {
  /* Only the buddies met on the way up and the final block change bits:
   * the intermediate blocks would be set and cleared again at once. */
  while (has_buddy(b, k, i) && gpb__bits_test(&b->freeb[k], i ^ 1)) {
    clear_free(b, k, i ^ 1);
    k++;
    i >>= 1;
    gpb__emit_sm(b, GPB_EV_MERGE, k, i);
  }
  /* set_free, less its pair test: the loop just found no free buddy. */
  gpb__bits_set(&b->freeb[k], i);
  b->nfree[k]++;
}

/* Frees (k, i). When its buddy is free and the order has room for one
 * more pair, the two stay unmerged; the pair is listed in dq. */
static void buddy_release_block(gpb__buddy_t *b, uint32_t k, uint64_t i) {
  if (!has_buddy(b, k, i) || !gpb__bits_test(&b->freeb[k], i ^ 1)) {
    gpb__bits_set(&b->freeb[k], i); /* no pair made, nothing to merge */
    b->nfree[k]++;
    return;
  }
  if (b->npairs[k] < b->defer_cap) {
    uint64_t parent = i >> 1;
    uint32_t n = 0, dup = 0;
    /* Drop entries whose pair an allocation has since broken. */
    for (uint32_t x = 0; x < b->ndq[k]; x++) {
      uint64_t q = b->dq[k][x];
      if (q == parent) dup = 1;
      if (q == parent || (gpb__bits_test(&b->freeb[k], 2 * q) &&
                          gpb__bits_test(&b->freeb[k], 2 * q + 1)))
        b->dq[k][n++] = q;
    }
    b->ndq[k] = n;
    if (dup || n < GPB__DEFER_MAX) {
      if (!dup) b->dq[k][b->ndq[k]++] = parent;
      set_free(b, k, i);
      return;
    }
  }
  buddy_merge_up(b, k, i);
}

/* Merges the pair under parent (k + 1, q) if both halves are still free,
 * then on upward like any free. */
static void buddy_merge_pair(gpb__buddy_t *b, uint32_t k, uint64_t q) {
  if (k >= b->cap || !gpb__bits_test(&b->freeb[k], 2 * q) ||
      !gpb__bits_test(&b->freeb[k], 2 * q + 1))
    return;
  clear_free(b, k, 2 * q);
  clear_free(b, k, 2 * q + 1);
  gpb__emit_sm(b, GPB_EV_MERGE, k + 1, q);
  buddy_merge_up(b, k + 1, q);
}

void gpb__buddy_coalesce(gpb__buddy_t *b) {
  for (uint32_t k = 0; k < b->norders; k++) {
    for (uint32_t x = 0; x < b->ndq[k]; x++) buddy_merge_pair(b, k, b->dq[k][x]);
    b->ndq[k] = 0;
  }
  /* Every pair a pool makes by deferring is listed, so this finds none;
   * it only keeps the result fully coalesced should that ever not hold. */
  for (uint32_t k = 0; k + 1 < b->norders; k++) {
    for (uint64_t q = 0; b->npairs[k] && q < (b->nunits >> (k + 1)); q++)
      buddy_merge_pair(b, k, q);
  }
}

/* Levels of the merged view that gpb__buddy_merged sorts on the stack. */
#define BUDDY_MERGED_STACK 128

size_t gpb__pow2_merged(const gpb__buddy_t *b, const uint64_t *xs, size_t nx,
                        int64_t *d, uint64_t *top, size_t ntop) {
  size_t n = nx, ntopped = 0;
  if (b->list_pairs) {
    n += b->nplist;
  } else {
    for (uint32_t k = 0; k < b->norders; k++) n += b->ndq[k];
  }
  if (n == 0) return 0;
  uint64_t stack[4 * BUDDY_MERGED_STACK], *buf = stack;
  if (n > BUDDY_MERGED_STACK && !(buf = malloc(4 * n * sizeof *buf)))
    return 0; /* no memory: the figures count the map as it is */
  /* pairs: GPB__NODE(k, parent) of the pairs of two free blocks of order
   * k; cur: nodes of order k free as a whole only once merged (or free
   * outside this core), sorted; next: the same one order up; ext: the
   * outside nodes, sorted, joining their order's level in turn. Each node
   * of cur or next comes from a pair or an outside node of its own, so n
   * entries each are enough. */
  uint64_t *pairs = buf, *cur = buf + n, *next = buf + 2 * n, *ext = buf + 3 * n;
  size_t np = 0, nc = 0, pi = 0, xi = 0;
  if (b->list_pairs) {
    for (uint32_t x = 0; x < b->nplist; x++) {
      uint64_t e = b->plist[x];
      if (buddy_pair_free(b, (uint32_t)(e & 63), e >> 6))
        pairs[np++] = GPB__NODE(e & 63, e >> 6);
    }
  } else {
    for (uint32_t k = 0; k < b->norders; k++)
      for (uint32_t x = 0; x < b->ndq[k]; x++)
        if (buddy_pair_free(b, k, b->dq[k][x]))
          pairs[np++] = GPB__NODE(k, b->dq[k][x]);
  }
  np = buddy_sort_unique(pairs, np);
  if (nx) memcpy(ext, xs, nx * sizeof *xs);
  nx = buddy_sort_unique(ext, nx);
  const uint64_t imask = (1ull << 58) - 1;
  for (uint32_t k = 0; k < b->norders && (pi < np || xi < nx || nc); k++) {
    while (xi < nx && (ext[xi] >> 58) == k) cur[nc++] = ext[xi++] & imask;
    qsort(cur, nc, sizeof *cur, buddy_u64_cmp);
    size_t nn = 0;
    /* Two free blocks: their parent is free as a whole. */
    for (; pi < np && (pairs[pi] >> 58) == k; pi++) {
      d[k] -= 2;
      d[k + 1]++;
      next[nn++] = pairs[pi] & imask;
    }
    /* A merged node and its buddy, a free block or merged itself. */
    for (size_t x = 0; x < nc; x++) {
      uint64_t v = cur[x];
      if (!has_buddy(b, k, v)) {
        if (top && k == b->cap && ntopped < ntop) top[ntopped++] = v;
        continue;
      }
      int both = gpb__bits_test(&b->freeb[k], v ^ 1);
      if (!both && x + 1 < nc && cur[x + 1] == (v ^ 1)) both = 1, x++;
      if (both) {
        d[k] -= 2;
        d[k + 1]++;
        next[nn++] = v >> 1;
      }
    }
    uint64_t *t = cur;
    cur = next;
    next = t;
    nc = nn;
  }
  if (buf != stack) free(buf);
  return ntopped;
}

int gpb__pow2_init(gpb__buddy_t *b) {
  for (uint32_t k = 0; k < b->norders; k++) {
    int rc = gpb__bits_init(&b->freeb[k], b->nunits >> k);
    if (rc) return gpb__fail(rc, "no host memory for the order-%u bitset", k);
  }
  return 0;
}

void gpb__pow2_init_arena(gpb__buddy_t *b) {
  /* Drop the roots init set: an arena owns only what it is lent. */
  uint64_t start = 0;
  for (int k = (int)b->norders - 1; k >= 0; k--) {
    if (b->nunits & (1ull << k)) {
      clear_free(b, (uint32_t)k, start >> k);
      start += 1ull << k;
    }
  }
}

void gpb__pow2_adopt(gpb__buddy_t *b, uint32_t k, uint64_t i) {
  gpb_assert(node_valid(b, k, i) && !gpb__bits_test(&b->freeb[k], i));
  set_free(b, k, i);
}

void gpb__pow2_disown(gpb__buddy_t *b, uint32_t k, uint64_t i) {
  gpb_assert(is_free(b, k, i));
  clear_free(b, k, i);
}

/* Marks the roots free. The bitsets must be all zero. */
void gpb__pow2_set_roots(gpb__buddy_t *b) {
  gpb_assert_expensive(gpb__bits_first(&b->freeb[0]) == UINT64_MAX);
  uint64_t start = 0;
  for (int k = (int)b->norders - 1; k >= 0; k--) {
    if (b->nunits & (1ull << k)) {
      set_free(b, (uint32_t)k, start >> k);
      start += 1ull << k;
    }
  }
}

void gpb__buddy_prefault(gpb__buddy_t *b) {
  for (uint32_t k = 0; k < b->norders; k++) gpb__bits_prefault(&b->freeb[k]);
  gpb__bits_prefault(&b->starts);
}

uint32_t gpb__buddy_num_roots(const gpb__buddy_t *b) {
  return (uint32_t)__builtin_popcountll(b->nunits);
}

/* Splits the free block containing node (k, i) down until (k, i) is a free
 * block, quietly (the model's primitive). -1 when no free block holds it. */
static int buddy_carve(gpb__buddy_t *b, uint32_t k, uint64_t i) {
  uint32_t j = k;
  while (j < b->norders && !is_free(b, j, i >> (j - k))) j++;
  if (j == b->norders) return -1;
  while (j > k) {
    buddy_split(b, j, i >> (j - k), 0);
    j--;
  }
  return 0;
}

/* Clears the free bits of the canonical blocks of [u, u+n). */
static void buddy_take_range(gpb__buddy_t *b, uint64_t u, uint64_t n) {
  gpb__bits_set(&b->starts, u);
  while (n) {
    uint32_t k = gpb__canon_order(u, n);
    clear_free(b, k, u >> k);
    u += 1ull << k;
    n -= 1ull << k;
  }
}

/* The smallest order >= k with a free block, or norders. Deferred pairs
 * (only below k: no block of order k or more is free) may hide the block:
 * then they are all merged and the search runs again. */
static inline uint32_t buddy_find(gpb__buddy_t *b, uint32_t k) {
  uint32_t j = k;
  while (j < b->norders && b->nfree[j] == 0) j++;
  if (j < b->norders) return j;
  uint32_t m = 0;
  while (m < k && b->npairs[m] == 0) m++;
  if (m == k) return j;
  gpb__buddy_coalesce(b);
  for (j = k; j < b->norders && b->nfree[j] == 0;) j++;
  return j;
}

/* Splits the free block (j, i) down its left edge to order k, leaving
 * (k, i << (j - k)) free. Only the right halves become free blocks on
 * the way: the left path's bits would be set and cleared at once. */
static inline void buddy_split_left(gpb__buddy_t *b, uint32_t j, uint64_t i,
                                    uint32_t k) {
  if (j == k) return;
  clear_free(b, j, i);
  while (j > k) {
    gpb__emit_sm(b, GPB_EV_SPLIT, j, i);
    j--;
    i <<= 1;
    set_free(b, j, i + 1);
  }
  set_free(b, j, i);
}

/* Splits the free block (j, i) down its left edge to order k and takes
 * the block (k, i << (j - k)): as buddy_split_left, then clearing that
 * block's free bit, without setting and clearing it. */
static inline void buddy_take_left(gpb__buddy_t *b, uint32_t j, uint64_t i,
                                   uint32_t k) {
  clear_free(b, j, i);
  while (j > k) {
    gpb__emit_sm(b, GPB_EV_SPLIT, j, i);
    j--;
    i <<= 1;
    set_free(b, j, i + 1);
  }
}

int gpb__pow2_lend(gpb__buddy_t *b, uint32_t k, uint64_t *unit) {
  uint32_t j = buddy_find(b, k);
  if (j == b->norders) return GPB_ENOMEM;
  uint64_t i = gpb__bits_first(&b->freeb[j]);
  uint64_t u0 = i << j;
  gpb__arec_t rec = {.units = 1ull << k, .tag = GPB__TAG_LENT};
  if (gpb__atab_insert(&b->atab, u0, &rec))
    return gpb__fail(GPB_EHOSTMEM, "allocation table cannot grow");
  buddy_split_left(b, j, i, k);
  clear_free(b, k, u0 >> k);
  gpb__bits_set(&b->starts, u0);
  *unit = u0;
  return 0;
}

void gpb__pow2_unlend(gpb__buddy_t *b, uint64_t u, const gpb__arec_t *r) {
  uint32_t k = (uint32_t)__builtin_ctzll(r->units);
  gpb__atab_remove(&b->atab, u);
  gpb__bits_clear(&b->starts, u);
  buddy_merge_up(b, k, u >> k);
}

int gpb__pow2_alloc(gpb__buddy_t *b, gpb__arec_t *rec, uint32_t align_order,
                    uint64_t stream, uint64_t *unit) {
  uint64_t units = rec->units, requested = rec->requested;
  uint32_t tag = rec->tag, site = rec->site;
  uint32_t k = units ? gpb__ceil_log2(units) : 0;
  if (align_order > k) k = align_order;
  if (units == 0 || k >= b->norders) {
    gpb__emit(b, GPB_EV_FAIL, 0, 0, k, requested, tag, site, stream);
    if (units == 0)
      return gpb__fail(GPB_ETOOBIG, "%llu bytes asked of a %llu-byte pool",
                       (unsigned long long)requested,
                       (unsigned long long)(b->nunits << b->min_shift));
    return gpb__fail(GPB_ENOMEM,
                     "%llu bytes need a block of order %u; the largest "
                     "order in this pool is %u",
                     (unsigned long long)requested, k, b->norders - 1);
  }
  uint32_t j = buddy_find(b, k);
  if (j == b->norders) {
    gpb__emit(b, GPB_EV_FAIL, 0, 0, k, requested, tag, site, stream);
    return gpb__fail(GPB_ENOMEM, "no free block of order %u or more for %llu "
                     "bytes", k, (unsigned long long)requested);
  }
  uint64_t i = gpb__bits_first(&b->freeb[j]);
  uint64_t u0 = i << j; /* splitting always keeps the left half */
  uint64_t n = b->policy == GPB_POLICY_TRIM ? units : 1ull << k;

  /* Record first: it is the only step that can fail, and nothing has
   * changed yet. */
  rec->units = n;
  if (gpb__atab_room(&b->atab)) {
    gpb__emit(b, GPB_EV_FAIL, 0, 0, k, requested, tag, site, stream);
    return gpb__fail(GPB_EHOSTMEM, "allocation table cannot grow");
  }
  gpb__atab_put(&b->atab, u0, rec);
  /* A pool filling fresh space places the next block where this one
   * ends: fetch that slot now, so its insert finds it in cache. */
  gpb__atab_prefetch(&b->atab, u0 + n);
  if (n == (1ull << k)) { /* one block: taken as it splits off */
    buddy_take_left(b, j, i, k);
    gpb__bits_set(&b->starts, u0);
    gpb__emit(b, GPB_EV_ALLOC, u0, n, k, requested, tag, site, stream);
    *unit = u0;
    return 0;
  }
  buddy_split_left(b, j, i, k);
  j = k;
  i = u0 >> k;
  /* Trim: split until the range [u0, u0+n) is a run of whole blocks. */
  uint64_t rem = n;
  while (rem != (1ull << j)) {
    buddy_split(b, j, i, 1);
    j--;
    if (rem <= (1ull << j)) {
      i = 2 * i;
    } else {
      rem -= 1ull << j;
      i = 2 * i + 1;
    }
  }
  buddy_take_range(b, u0, n);
  gpb__emit(b, GPB_EV_ALLOC, u0, n, gpb__canon_order(u0, n), requested, tag,
             site, stream);
  *unit = u0;
  return 0;
}

/* The free block containing unit u, or -1 when u lies in an allocation. */
static int buddy_free_containing(const gpb__buddy_t *b, uint64_t u,
                                 uint64_t *idx) {
  for (uint32_t k = 0; k < b->norders; k++) {
    if (is_free(b, k, u >> k)) {
      *idx = u >> k;
      return (int)k;
    }
  }
  return -1;
}

/* The allocation containing unit u: the nearest start at or below u. */
static gpb__arec_t *buddy_alloc_containing(const gpb__buddy_t *b, uint64_t u) {
  uint64_t s = gpb__bits_prev(&b->starts, u);
  if (s == UINT64_MAX) return NULL;
  gpb__arec_t *r = gpb__atab_find(&b->atab, s);
  return r && s + r->units > u ? r : NULL;
}

int gpb__pow2_misuse(const gpb__buddy_t *b, uint64_t off) {
  uint64_t u = off >> b->min_shift, idx;
  if (buddy_free_containing(b, u, &idx) >= 0)
    return gpb__fail(GPB_EDOUBLEFREE,
                     "offset %llu lies in a free block (freed twice?)",
                     (unsigned long long)off);
  gpb__arec_t *a = buddy_alloc_containing(b, u);
  return gpb__fail(GPB_EINTERIOR,
                   "offset %llu is inside the allocation at offset %llu",
                   (unsigned long long)off,
                   a ? (unsigned long long)((a->key - 1) << b->min_shift)
                     : 0ull);
}

int gpb__pow2_free(gpb__buddy_t *b, uint64_t u, gpb__arec_t *r,
                   uint64_t stream) {
  uint64_t n = r->units, requested = r->requested;
  uint32_t tag = r->tag, site = r->site;
  gpb__atab_remove_rec(&b->atab, r);
  gpb__bits_clear(&b->starts, u);
  gpb__emit(b, GPB_EV_FREE, u, n, gpb__canon_order(u, n), requested, tag,
             site, stream);
  /* Only a single-block allocation is worth deferring: asked for again,
   * it is taken back whole, while a run's pieces would need re-splitting. */
  if (!(n & (n - 1)) && !(u & (n - 1))) {
    uint32_t k = (uint32_t)__builtin_ctzll(n);
    buddy_release_block(b, k, u >> k);
    return 0;
  }
  /* Release the canonical blocks last to first: each smaller block meets
   * its free buddy in the tail first, so the whole run coalesces. */
  uint64_t starts[64];
  uint32_t orders[64];
  int cnt = 0;
  for (uint64_t p = u, m = n; m;) {
    uint32_t k = gpb__canon_order(p, m);
    starts[cnt] = p;
    orders[cnt++] = k;
    p += 1ull << k;
    m -= 1ull << k;
  }
  while (cnt--) buddy_merge_up(b, orders[cnt], starts[cnt] >> orders[cnt]);
  return 0;
}

/* The free block starting exactly at u, as its order, or -1. */
static int buddy_free_at(const gpb__buddy_t *b, uint64_t u) {
  uint32_t top = u ? (uint32_t)__builtin_ctzll(u) : b->norders - 1;
  if (top > b->norders - 1) top = b->norders - 1;
  for (int k = (int)top; k >= 0; k--)
    if (is_free(b, (uint32_t)k, u >> k)) return k;
  return -1;
}

int gpb__buddy_visit(const gpb__buddy_t *b, gpb_visit_fn fn, void *user) {
  return gpb__buddy_visit_range(b, 0, b->nunits, fn, user);
}

int gpb__buddy_visit_alloc(const gpb__buddy_t *b, const gpb__arec_t *r,
                           gpb_visit_fn fn, void *user) {
  gpb_block_info_t bi;
  for (uint64_t p = r->key - 1, m = r->units; m;) {
    uint32_t k = gpb__canon_order(p, m);
    gpb__fill_used(b, &bi, r, p, k);
    int rc = fn(&bi, user);
    if (rc) return rc;
    p += 1ull << k;
    m -= 1ull << k;
  }
  return 0;
}

int gpb__pow2_visit_range(const gpb__buddy_t *b, uint64_t u0, uint64_t u1,
                          gpb_visit_fn fn, void *user) {
  gpb_block_info_t bi;
  for (uint64_t u = u0; u < u1;) {
    const gpb__arec_t *r = gpb__atab_find(&b->atab, u);
    if (r) {
      int rc = gpb__buddy_visit_alloc(b, r, fn, user);
      if (rc) return rc;
      u += r->units;
      continue;
    }
    int k = buddy_free_at(b, u);
    if (k < 0)
      return gpb__fail(GPB_ECORRUPT, "unit %llu is in no block",
                       (unsigned long long)u);
    gpb__fill_free(b, &bi, u, (uint32_t)k);
    int rc = fn(&bi, user);
    if (rc) return rc;
    u += 1ull << k;
  }
  return 0;
}

int gpb__pow2_lookup(const gpb__buddy_t *b, uint64_t u, gpb_block_info_t *out) {
  uint64_t idx;
  int k = buddy_free_containing(b, u, &idx);
  if (k >= 0) {
    gpb__fill_free(b, out, idx << k, (uint32_t)k);
    return 0;
  }
  const gpb__arec_t *r = buddy_alloc_containing(b, u);
  if (!r) return gpb__fail(GPB_ECORRUPT, "unit %llu is in no block",
                           (unsigned long long)u);
  for (uint64_t p = r->key - 1, m = r->units; m;) {
    uint32_t kk = gpb__canon_order(p, m);
    if (u < p + (1ull << kk)) {
      gpb__fill_used(b, out, r, p, kk);
      return 0;
    }
    p += 1ull << kk;
    m -= 1ull << kk;
  }
  return GPB_ECORRUPT;
}

#define CORRUPT(...) gpb__fail(GPB_ECORRUPT, __VA_ARGS__)

/* Whether the pair under parent (k + 1, q) is in dq, or in plist for a
 * model (unless that list could not grow). */
static int buddy_pair_listed(const gpb__buddy_t *b, uint32_t k, uint64_t q) {
  if (b->list_pairs) {
    if (b->plist_lost) return 1;
    for (uint32_t x = 0; x < b->nplist; x++)
      if (b->plist[x] == (q << 6 | k)) return 1;
    return 0;
  }
  for (uint32_t x = 0; x < b->ndq[k]; x++)
    if (b->dq[k][x] == q) return 1;
  return 0;
}

/* What the walk over the units has seen so far. */
typedef struct buddy_seen {
  uint64_t free[GPB_MAX_ORDERS], pairs[GPB_MAX_ORDERS];
  uint64_t allocs;
} buddy_seen_t;

/* Walks units [u0, u1): every unit in exactly one block. */
static int buddy_check_walk(const gpb__buddy_t *b, uint64_t u0, uint64_t u1,
                            buddy_seen_t *w) {
  for (uint64_t u = u0; u < u1;) {
    const gpb__arec_t *r = gpb__atab_find(&b->atab, u);
    int k = buddy_free_at(b, u);
    if (r) {
      if (k >= 0)
        return CORRUPT("unit %llu is both allocated and free",
                       (unsigned long long)u);
      if (r->units == 0 || r->units > u1 - u)
        return CORRUPT("allocation at unit %llu runs past its range",
                       (unsigned long long)u);
      if (r->requested > (r->units << b->min_shift) ||
          (r->tag >= GPB_MAX_TAGS &&
           (r->tag != GPB__TAG_LENT || (r->units & (r->units - 1)))))
        return CORRUPT("allocation at unit %llu has a bad record",
                       (unsigned long long)u);
      /* No free block and no other allocation may start inside it. */
      for (uint32_t j = 0; j < b->norders; j++) {
        uint64_t lo = u >> j, hi = (u + r->units - 1) >> j;
        for (uint64_t x = lo; x <= hi; x++)
          if (is_free(b, j, x))
            return CORRUPT("free block (order %u, unit %llu) overlaps the "
                           "allocation at unit %llu",
                           j, (unsigned long long)(x << j),
                           (unsigned long long)u);
      }
      for (uint64_t p = u + 1; p < u + r->units; p++)
        if (gpb__atab_find(&b->atab, p))
          return CORRUPT("allocations at units %llu and %llu overlap",
                         (unsigned long long)u, (unsigned long long)p);
      if (!gpb__bits_test(&b->starts, u))
        return CORRUPT("allocation at unit %llu has no start bit",
                       (unsigned long long)u);
      w->allocs++;
      u += r->units;
      continue;
    }
    if (k < 0) return CORRUPT("unit %llu is in no block", (unsigned long long)u);
    if (u + (1ull << k) > u1)
      return CORRUPT("free block (order %d, unit %llu) runs past its range", k,
                     (unsigned long long)u);
    uint64_t i = u >> k;
    if (!(i & 1) && has_buddy(b, (uint32_t)k, i) && is_free(b, (uint32_t)k, i + 1)) {
      w->pairs[k]++;
      /* The coalesced figures find the pairs by their lists alone. */
      if (!buddy_pair_listed(b, (uint32_t)k, i >> 1))
        return CORRUPT("order %d: the free buddies at unit %llu are not "
                       "listed", k, (unsigned long long)u);
    }
    w->free[k]++;
    u += 1ull << k;
  }
  return 0;
}

int gpb__pow2_sb_free(const gpb__buddy_t *b, uint64_t sb) {
  return gpb__bits_test(&b->freeb[b->cap], sb);
}

int gpb__pow2_check(const gpb__buddy_t *b, const uint64_t *sb, uint64_t nsb) {
  buddy_seen_t w;
  memset(&w, 0, sizeof w);
  for (uint32_t k = 0; k < b->norders; k++) {
    if (gpb__bits_check(&b->freeb[k]))
      return CORRUPT("order %u: summary bits disagree with the bitset", k);
    if (gpb__bits_count(&b->freeb[k]) != b->nfree[k])
      return CORRUPT("order %u: %llu free bits but count says %llu", k,
                     (unsigned long long)gpb__bits_count(&b->freeb[k]),
                     (unsigned long long)b->nfree[k]);
  }
  if (gpb__bits_check(&b->starts))
    return CORRUPT("start bits: summary disagrees with the bitset");
  int rc = 0;
  if (!sb) {
    rc = buddy_check_walk(b, 0, b->nunits, &w);
  } else {
    for (uint64_t x = 0; rc == 0 && x < nsb; x++) {
      uint64_t u0 = sb[x] << b->cap;
      if (u0 >= b->nunits || (1ull << b->cap) > b->nunits - u0)
        return CORRUPT("superblock %llu is outside the pool",
                       (unsigned long long)sb[x]);
      rc = buddy_check_walk(b, u0, u0 + (1ull << b->cap), &w);
    }
  }
  if (rc) return rc;
  if (gpb__bits_count(&b->starts) != gpb__atab_count(&b->atab))
    return CORRUPT("%llu start bits for %llu allocations",
                   (unsigned long long)gpb__bits_count(&b->starts),
                   (unsigned long long)gpb__atab_count(&b->atab));
  for (uint32_t k = 0; k < b->norders; k++) {
    if (w.pairs[k] != b->npairs[k])
      return CORRUPT("order %u: %llu free buddy pairs, count says %llu", k,
                     (unsigned long long)w.pairs[k],
                     (unsigned long long)b->npairs[k]);
    if (b->npairs[k] > b->defer_cap)
      return CORRUPT("order %u: %llu free buddies left unmerged, at most %u "
                     "allowed", k, (unsigned long long)b->npairs[k],
                     b->defer_cap);
  }
  for (uint32_t k = 0; k < b->norders; k++)
    if (w.free[k] != b->nfree[k])
      return CORRUPT("order %u: %llu free blocks reachable, %llu marked "
                     "(overlapping free blocks, or outside its superblocks)",
                     k, (unsigned long long)w.free[k],
                     (unsigned long long)b->nfree[k]);
  if (w.allocs != gpb__atab_count(&b->atab))
    return CORRUPT("%llu allocations reachable, %llu recorded",
                   (unsigned long long)w.allocs,
                   (unsigned long long)gpb__atab_count(&b->atab));
  return 0;
}

/* ------------------------------------------------- validated primitives */

#define BADEV(...) gpb__fail(GPB_EFORMAT, __VA_ARGS__)

int gpb__buddy_carve_free(gpb__buddy_t *b, uint32_t k, uint64_t i) {
  if (!node_valid(b, k, i)) return BADEV("block (order %u, index %llu) is "
                                         "outside the pool", k,
                                         (unsigned long long)i);
  if (buddy_carve(b, k, i))
    return BADEV("no free block contains (order %u, index %llu)", k,
                 (unsigned long long)i);
  return 0;
}

int gpb__buddy_take(gpb__buddy_t *b, uint64_t u, uint64_t n,
                    const gpb__arec_t *rec) {
  if (n == 0 || u >= b->nunits || n > b->nunits - u)
    return BADEV("range of %llu units at unit %llu is outside the pool",
                 (unsigned long long)n, (unsigned long long)u);
  for (uint64_t p = u, m = n; m;) {
    uint32_t k = gpb__canon_order(p, m);
    if (!is_free(b, k, p >> k))
      return BADEV("block (order %u) at unit %llu is not free", k,
                   (unsigned long long)p);
    p += 1ull << k;
    m -= 1ull << k;
  }
  gpb__arec_t r = *rec;
  r.units = n;
  if (gpb__atab_insert(&b->atab, u, &r)) return GPB_EHOSTMEM;
  buddy_take_range(b, u, n);
  return 0;
}

int gpb__buddy_apply(gpb__buddy_t *b, const gpb_event_t *ev) {
  uint64_t mask = (1ull << b->min_shift) - 1;
  if (ev->offset & mask) return BADEV("offset %llu is not a multiple of the "
                                      "minimum block",
                                      (unsigned long long)ev->offset);
  uint64_t u = ev->offset >> b->min_shift;
  uint32_t k = ev->order;
  switch (ev->type) {
  case GPB_EV_SPLIT:
    if (k == 0 || k >= b->norders || (u & ((1ull << k) - 1)) ||
        !is_free(b, k, u >> k))
      return BADEV("split of order %u at offset %llu: no such free block", k,
                   (unsigned long long)ev->offset);
    buddy_split(b, k, u >> k, 0);
    return 0;
  case GPB_EV_MERGE: {
    if (k == 0 || k >= b->norders || (u & ((1ull << k) - 1)) ||
        !node_valid(b, k, u >> k))
      return BADEV("merge to order %u at offset %llu is not a block", k,
                   (unsigned long long)ev->offset);
    uint64_t c = (u >> k) * 2;
    if (!is_free(b, k - 1, c) || !is_free(b, k - 1, c + 1))
      return BADEV("merge to order %u at offset %llu: halves are not free",
                   k, (unsigned long long)ev->offset);
    clear_free(b, k - 1, c);
    clear_free(b, k - 1, c + 1);
    set_free(b, k, u >> k);
    return 0;
  }
  case GPB_EV_ALLOC: {
    if ((ev->size & mask) || ev->requested > ev->size || ev->tag >= GPB_MAX_TAGS)
      return BADEV("alloc at offset %llu has a bad size, request or tag",
                   (unsigned long long)ev->offset);
    gpb__arec_t rec = {.requested = ev->requested, .time_ns = ev->time_ns,
                       .tag = (uint16_t)ev->tag, .site = ev->site};
    return gpb__buddy_take(b, u, ev->size >> b->min_shift, &rec);
  }
  case GPB_EV_FREE: {
    gpb__arec_t *r = u < b->nunits ? gpb__atab_find(&b->atab, u) : NULL;
    if (!r || (r->units << b->min_shift) != ev->size ||
        r->requested != ev->requested || r->tag != ev->tag)
      return BADEV("free at offset %llu of %llu bytes: no such allocation",
                   (unsigned long long)ev->offset,
                   (unsigned long long)ev->size);
    uint64_t n = r->units;
    gpb__atab_remove(&b->atab, u);
    gpb__bits_clear(&b->starts, u);
    for (uint64_t p = u, m = n; m;) {
      uint32_t kk = gpb__canon_order(p, m);
      set_free(b, kk, p >> kk);
      p += 1ull << kk;
      m -= 1ull << kk;
    }
    return 0;
  }
  case GPB_EV_FAIL:
    return 0;
  default:
    return BADEV("unknown event type %d", ev->type);
  }
}
