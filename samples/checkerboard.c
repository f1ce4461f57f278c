/* SPDX-License-Identifier: MIT */
/*
 * checkerboard.c: gpubuddy-sample-checkerboard, fragmentation stress.
 *
 * Each step is one round:
 *   1. fill: allocate --small blocks until the pool refuses (that ENOMEM
 *      is the expected end of the fill);
 *   2. punch: free every other block in address order (the even ones in
 *      odd rounds, the odd ones in even rounds). Each freed block's buddy
 *      stays live, so nothing merges: half the pool is free, yet the
 *      largest free block is one small block;
 *   3. probe: ask for 2x, 4x, 8x... the small block up to the largest
 *      root. Every request fails with ENOMEM despite all that free memory
 *      (expected, counted). Each outcome is checked against the stats:
 *      a request must fail exactly when no free block is large enough
 *      (with best fit, which can also use a run of free blocks: must not
 *      fail when one is);
 *   4. heal: free the rest; everything merges back, and a request for the
 *      largest free block must now succeed (an error if not).
 * The first round prints the full stats with the checkerboard in place.
 * With --pace-us each allocation and free sleeps, so a viewer shows the
 * board being laid.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t cb_small = 0; /* 0: chosen from the pool size */

static const gpbs_extra_t cb_extras[] = {
    {"--small", GPBS_ARG_SIZE, &cb_small,
     "size of the small blocks (0: pool/4096, at least --min-block)"},
};

/* More blocks than this would need too much bookkeeping for a demo. */
#define CB_MAX_BLOCKS (64ull << 20)

static size_t cb_pick_small(size_t pool, size_t min_block) {
  if (cb_small) return cb_small;
  size_t s = min_block;
  while (s * 2 <= pool / 4096) s *= 2;
  return s;
}

static const char *cb_validate(const gpbs_t *s) {
  size_t small = cb_pick_small(s->cfg.pool_size, s->cfg.min_block);
  size_t unit = small > s->cfg.min_block ? small : s->cfg.min_block;
  if (s->cfg.pool_size / unit > CB_MAX_BLOCKS)
    return "--small is too small for this pool: more than 64M blocks";
  return NULL;
}

static const gpbs_sample_t cb_sample = {
    .prog = "gpubuddy-sample-checkerboard",
    .summary = "Fragmentation stress: a checkerboard of small live blocks.",
    .details =
        "Each step (round) fills the pool with --small blocks, frees every\n"
        "other one so a checkerboard of small live blocks remains, then asks\n"
        "for larger blocks: they fail although half the pool is free. Then it\n"
        "frees the rest and shows a large request succeed. ENOMEM is expected\n"
        "at the end of the fill and for each large request (counted); a\n"
        "failure that the stats do not explain is an error.",
    .default_steps = 1,
    .extras = cb_extras,
    .nextras = sizeof cb_extras / sizeof cb_extras[0],
    .validate = cb_validate,
};

typedef struct cb_block {
  void *p;
  uint32_t value;
} cb_block_t;

static int cb_by_address(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)((const cb_block_t *)a)->p;
  uintptr_t y = (uintptr_t)((const cb_block_t *)b)->p;
  return x < y ? -1 : x > y;
}

static uint64_t cb_block_for(uint64_t size, uint64_t min_block) {
  uint64_t b = min_block;
  while (b < size) b *= 2;
  return b;
}

/* Asks for `size` and checks the answer against the stats taken just
 * before: ENOMEM exactly when no free block can hold it. Frees what it
 * gets. Returns 1 granted, 0 refused, -1 error. */
static int cb_probe(gpbs_t *s, uint64_t size, bool say) {
  gpb_stats_t st;
  char b1[32], b2[32];
  gpb_pool_stats(s->pool, &st);
  bool fits = st.largest_free >= cb_block_for(size, st.min_block);
  void *p = NULL;
  int rc = gpbs_alloc(s, size, 2, &p);
  if (rc && rc != GPB_ENOMEM) return -1; /* reported by gpbs_alloc */
  /* Best fit may also serve a request from a run of adjacent free
   * blocks, so there only a refusal with a large enough block is wrong. */
  bool exact = s->info.policy != GPB_POLICY_BESTFIT;
  if (exact ? (rc == 0) != fits : (rc != 0 && fits)) {
    gpbs_error(s, "request of %s %s, but the largest free block is %s",
               gpbs_fmt_size(size, b1), rc ? "failed" : "succeeded",
               gpbs_fmt_size(st.largest_free, b2));
    if (p) gpbs_free(s, p);
    return -1;
  }
  if (say)
    gpbs_say(s, "  request %10s: %s", gpbs_fmt_size(size, b1),
             rc ? "ENOMEM (expected: no free block that large)" : "granted");
  if (p) {
    uint32_t v = gpbs_touch(s, p, size);
    gpbs_verify(s, p, size, v);
    gpbs_free(s, p);
  }
  return rc == 0;
}

/* One round; -1 on an unexpected error. */
static int cb_round(gpbs_t *s, uint64_t round, size_t small, cb_block_t *blk,
                    uint64_t cap) {
  char b1[32], b2[32], b3[32];
  bool first = round == 0;
  uint64_t n = 0;
  int rc = 0;

  /* 1. Fill until the pool says no. */
  while (n < cap && gpbs_running(s)) {
    rc = gpbs_alloc(s, small, 1, &blk[n].p);
    if (rc) break;
    blk[n].value = gpbs_touch(s, blk[n].p, small);
    n++;
    gpbs_progress(s, round + 1, "round %llu: filling, %llu blocks",
                  (unsigned long long)round + 1, (unsigned long long)n);
    gpbs_pace(s);
  }
  if (rc && rc != GPB_ENOMEM && rc != GPB_ETOOBIG) goto out;
  gpbs_say(s, "round %llu: filled the pool with %llu blocks of %s (%s)",
           (unsigned long long)round + 1, (unsigned long long)n,
           gpbs_fmt_size(small, b1),
           rc ? "then ENOMEM, as expected" : "stopped early");
  rc = 0;

  /* 2. Free every other block in address order. */
  qsort(blk, n, sizeof *blk, cb_by_address);
  uint64_t keep = 0;
  for (uint64_t i = 0; i < n; i++) {
    if ((i & 1) == (round & 1)) {
      if (gpbs_running(s)) gpbs_verify(s, blk[i].p, small, blk[i].value);
      gpbs_free(s, blk[i].p);
      gpbs_pace(s);
    } else {
      blk[keep++] = blk[i];
    }
  }
  n = keep;

  gpb_stats_t st;
  gpb_pool_stats(s->pool, &st);
  gpbs_say(s, "round %llu: freed every other block: %s free (%.1f%% of the "
           "pool), %llu blocks live, largest free block %s",
           (unsigned long long)round + 1, gpbs_fmt_size(st.free_bytes, b1),
           st.managed_bytes ? 100.0 * (double)st.free_bytes /
                                  (double)st.managed_bytes
                            : 0.0,
           (unsigned long long)n, gpbs_fmt_size(st.largest_free, b2));
  if (first) gpbs_report(s, "with the checkerboard in place");

  /* 3. Larger requests, up to the largest root. */
  uint64_t top = 1;
  while (top * 2 <= st.managed_bytes) top *= 2;
  uint64_t refused = 0, asked = 0;
  for (uint64_t size = cb_block_for(small, st.min_block) * 2;
       size <= top && gpbs_running(s); size *= 2) {
    int r = cb_probe(s, size, first);
    if (r < 0) {
      rc = -1;
      goto out;
    }
    asked++;
    refused += r == 0;
    gpbs_pace(s);
  }
  gpbs_say(s, "round %llu: %llu of %llu larger requests refused with %s "
           "free; unusable free space index for the largest: %.3f",
           (unsigned long long)round + 1, (unsigned long long)refused,
           (unsigned long long)asked, gpbs_fmt_size(st.free_bytes, b3),
           st.num_orders ? st.unusable_index[st.num_orders - 1] : 0.0);

out:
  /* 4. Heal: free the rest; the largest block must be grantable again. */
  for (uint64_t i = 0; i < n; i++) {
    gpbs_verify(s, blk[i].p, small, blk[i].value);
    gpbs_free(s, blk[i].p);
  }
  if (rc) return -1;
  gpb_pool_stats(s->pool, &st);
  if (st.largest_free && gpbs_running(s)) {
    int r = cb_probe(s, st.largest_free, false);
    if (r < 0) return -1;
    if (r == 0) {
      gpbs_error(s, "the pool is empty but %s cannot be allocated",
                 gpbs_fmt_size(st.largest_free, b1));
      return -1;
    }
    gpbs_say(s, "round %llu: freed the rest: everything merged back, a "
             "request of %s is granted", (unsigned long long)round + 1,
             gpbs_fmt_size(st.largest_free, b1));
  }
  return 0;
}

int main(int argc, char **argv) {
  gpbs_t s;
  int status;
  if (!gpbs_start(&s, &cb_sample, argc, argv, &status)) return status;

  size_t small = cb_pick_small((size_t)s.info.managed_size,
                               (size_t)s.info.min_block);
  uint64_t unit = small > s.info.min_block ? small : s.info.min_block;
  uint64_t cap = s.info.managed_size / unit + 1;
  cb_block_t *blk = calloc(cap, sizeof *blk);
  if (!blk) {
    gpbs_error(&s, "no host memory for %llu block records",
               (unsigned long long)cap);
    return gpbs_finish(&s);
  }
  for (uint64_t r = 0; r < s.steps && gpbs_running(&s); r++)
    if (cb_round(&s, r, small, blk, cap) < 0) break;
  free(blk);
  gpbs_report(&s, "at the end");
  return gpbs_finish(&s);
}
