/* SPDX-License-Identifier: MIT */
/*
 * testutil.h: assertions and helpers shared by the test programs.
 *
 * Each ASSERT prints file, line and both values, then exits 1. A test that
 * needs something absent (a GPU) calls SKIP(), which exits 77 so automake
 * reports SKIP. Seeded tests use a fixed seed and print it; GPB_TEST_SEED
 * sets another, GPB_TEST_SOAK=1 draws one from the clock (soak runs), and
 * GPB_TEST_SCALE scales the amount of work (sanitizer builds use < 1).
 */
#ifndef GPB_TESTUTIL_H
#define GPB_TESTUTIL_H

#include "gpubuddy.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAILF(...)                                          \
  do {                                                      \
    fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);   \
    fprintf(stderr, __VA_ARGS__);                           \
    fprintf(stderr, "\n");                                  \
    exit(1);                                                \
  } while (0)

#define ASSERT(c) \
  do { if (!(c)) FAILF("assertion failed: %s", #c); } while (0)

#define ASSERT_EQ(a, b)                                                     \
  do {                                                                      \
    long long a_ = (long long)(a), b_ = (long long)(b);                     \
    if (a_ != b_) FAILF("%s == %s: %lld != %lld", #a, #b, a_, b_);          \
  } while (0)

#define ASSERT_U64_EQ(a, b)                                                 \
  do {                                                                      \
    uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                        \
    if (a_ != b_)                                                           \
      FAILF("%s == %s: %" PRIu64 " != %" PRIu64, #a, #b, a_, b_);           \
  } while (0)

/* A library call that must succeed. */
#define ASSERT_OK(call)                                                     \
  do {                                                                      \
    int rc_ = (call);                                                       \
    if (rc_ != 0)                                                           \
      FAILF("%s returned %s (%s): %s", #call, gpb_err_name(rc_),            \
            gpb_strerror(rc_), gpb_last_error_detail());                    \
  } while (0)

/* A library call that must fail with `code`. */
#define ASSERT_ERR(call, code)                                              \
  do {                                                                      \
    int rc_ = (call);                                                       \
    if (rc_ != (code))                                                      \
      FAILF("%s returned %s, expected %s", #call, gpb_err_name(rc_),        \
            gpb_err_name(code));                                            \
  } while (0)

#define SKIP(...)                                 \
  do {                                            \
    fprintf(stderr, "SKIP: ");                    \
    fprintf(stderr, __VA_ARGS__);                 \
    fprintf(stderr, "\n");                        \
    exit(77);                                     \
  } while (0)

/* The seed every seeded test uses unless told otherwise, so that a run
 * is the same run on every machine and every time. */
#define TEST_DEFAULT_SEED 0x6770627564647931ull /* "gpbuddy1" */

/* The test's seed: GPB_TEST_SEED when set (a number; anything else is a
 * usage error), else a fresh one from the clock under GPB_TEST_SOAK=1
 * (scripts/soak.sh), else TEST_DEFAULT_SEED. Printed either way, so a
 * failure can be replayed. Never 0: xorshift would stay at 0. */
static inline uint64_t test_seed(void) {
  const char *s = getenv("GPB_TEST_SEED");
  const char *soak = getenv("GPB_TEST_SOAK");
  uint64_t seed = TEST_DEFAULT_SEED;
  if (s && *s) {
    char *end;
    seed = strtoull(s, &end, 0);
    if (*end || seed == 0) {
      fprintf(stderr, "GPB_TEST_SEED '%s': expected a non-zero number\n", s);
      exit(99); /* automake's hard error */
    }
  } else if (soak && *soak && strcmp(soak, "0") != 0) {
    seed = gpb_now_ns() * 0x9E3779B97F4A7C15ull | 1;
  }
  printf("seed %" PRIu64 " (replay with GPB_TEST_SEED=%" PRIu64 ")\n", seed, seed);
  fflush(stdout);
  return seed;
}

/* The hang guard: how long a test waits for something that must happen
 * (a reader catching up, a dead writer noticed) before it calls the wait
 * a hang. It guards against waiting forever and is never a check of
 * speed, so it is generous: 300 s, or GPB_TEST_HANG_S seconds. */
static inline uint64_t test_hang_ns(void) {
  const char *s = getenv("GPB_TEST_HANG_S");
  double v = s ? atof(s) : 0;
  return (uint64_t)((v > 0 ? v : 300.0) * 1e9);
}

/* Inside a wait that began at t0 (gpb_now_ns): fails as a hang once the
 * guard is past, naming what never came. */
#define TEST_HANG_GUARD(t0, ...)                                          \
  do {                                                                    \
    if (gpb_now_ns() - (t0) > test_hang_ns()) {                           \
      fprintf(stderr, "%s:%d: FAIL: hung (the hang guard, %.0f s, not a " \
              "timing check): ", __FILE__, __LINE__,                      \
              (double)test_hang_ns() / 1e9);                              \
      fprintf(stderr, __VA_ARGS__);                                       \
      fprintf(stderr, "\n");                                              \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

static inline double test_scale(void) {
  const char *s = getenv("GPB_TEST_SCALE");
  double v = s ? atof(s) : 1.0;
  return v > 0 ? v : 1.0;
}

/* xorshift64*: small, seedable, good enough for test workloads. */
static inline uint64_t rng_next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1Dull;
}

static inline uint64_t rng_below(uint64_t *s, uint64_t n) {
  return n ? rng_next(s) % n : 0;
}

/* A growable list of blocks, filled by gpb_pool_visit / gpb_model_visit
 * with test_collect_blocks as the visitor. Free `b` when done. */
typedef struct test_blocks {
  gpb_block_info_t *b;
  size_t n, cap;
} test_blocks_t;

static inline int test_collect_blocks(const gpb_block_info_t *b, void *user) {
  test_blocks_t *v = user;
  if (v->n == v->cap) {
    v->cap = v->cap ? v->cap * 2 : 1024;
    v->b = realloc(v->b, v->cap * sizeof *v->b);
    if (!v->b) FAILF("out of memory collecting blocks");
  }
  v->b[v->n++] = *b;
  return 0;
}

/* Two block lists must describe the same map: layout and allocation
 * records, but not the times (a pool and a reader stamp them apart). */
static inline void test_blocks_same(const test_blocks_t *x,
                                    const test_blocks_t *y) {
  if (x->n != y->n) FAILF("%zu blocks against %zu", x->n, y->n);
  for (size_t i = 0; i < x->n; i++) {
    const gpb_block_info_t *a = &x->b[i], *b = &y->b[i];
    if (a->offset != b->offset || a->size != b->size || a->order != b->order ||
        a->used != b->used || a->alloc_offset != b->alloc_offset ||
        a->alloc_size != b->alloc_size || a->requested != b->requested ||
        a->tag != b->tag)
      FAILF("block %zu differs: offset %" PRIu64 "/%" PRIu64 ", size %" PRIu64
            "/%" PRIu64 ", used %u/%u, requested %" PRIu64 "/%" PRIu64, i,
            a->offset, b->offset, a->size, b->size, a->used, b->used,
            a->requested, b->requested);
  }
}

/* Two stats must be the same: every counter, byte count, peak, per-order
 * and per-tag figure, and the derived fragmentation. */
static inline void test_stats_same(const gpb_stats_t *x, const gpb_stats_t *y) {
  ASSERT_U64_EQ(x->seq, y->seq);
  ASSERT_U64_EQ(x->requested_bytes, y->requested_bytes);
  ASSERT_U64_EQ(x->block_bytes, y->block_bytes);
  ASSERT_U64_EQ(x->free_bytes, y->free_bytes);
  ASSERT_U64_EQ(x->requested_peak, y->requested_peak);
  ASSERT_U64_EQ(x->block_peak, y->block_peak);
  ASSERT_U64_EQ(x->free_peak, y->free_peak);
  ASSERT_U64_EQ(x->allocs, y->allocs);
  ASSERT_U64_EQ(x->frees, y->frees);
  ASSERT_U64_EQ(x->failures, y->failures);
  ASSERT_U64_EQ(x->splits, y->splits);
  ASSERT_U64_EQ(x->merges, y->merges);
  ASSERT_U64_EQ(x->live_allocs, y->live_allocs);
  ASSERT_U64_EQ(x->largest_free, y->largest_free);
  ASSERT_U64_EQ(x->internal_frag_bytes, y->internal_frag_bytes);
  for (uint32_t k = 0; k < GPB_MAX_ORDERS; k++)
    ASSERT_U64_EQ(x->free_blocks[k], y->free_blocks[k]);
  for (uint32_t t = 0; t < GPB_MAX_TAGS; t++)
    ASSERT_U64_EQ(x->tag_bytes[t], y->tag_bytes[t]);
  ASSERT(x->external_frag == y->external_frag);
}

/* A pool and a model of it (following its events, or simulating it) end
 * the same: stats, and every block. */
static inline void test_pool_model_same(gpb_pool_t *p, const gpb_model_t *m) {
  gpb_stats_t ps, ms;
  ASSERT_OK(gpb_pool_stats(p, &ps));
  ASSERT_OK(gpb_model_stats(m, &ms));
  test_stats_same(&ms, &ps);
  test_blocks_t pb = {0}, mb = {0};
  ASSERT_OK(gpb_pool_visit(p, test_collect_blocks, &pb));
  ASSERT_OK(gpb_model_visit(m, test_collect_blocks, &mb));
  test_blocks_same(&pb, &mb);
  free(pb.b);
  free(mb.b);
}

/* Allocates n bytes with tag from call site k (0 to TEST_NSITES-1) into
 * *out, for tests of call sites: each case is a call of its own (the asm
 * after it differs, so the compiler cannot share one call among them). */
#define TEST_NSITES 96
#define TEST_SITE(k)                                     \
  case k:                                                \
    rc = gpb_alloc_ex(p, n, 0, tag, NULL, out);          \
    __asm__ volatile("# site %0" ::"i"(k) : "memory");   \
    break;
#define TEST_SITE8(k) TEST_SITE(k) TEST_SITE(k + 1) TEST_SITE(k + 2)     \
  TEST_SITE(k + 3) TEST_SITE(k + 4) TEST_SITE(k + 5) TEST_SITE(k + 6)    \
  TEST_SITE(k + 7)
__attribute__((noinline, unused)) static int test_alloc_at(gpb_pool_t *p,
                                                           int k, size_t n,
                                                           uint32_t tag,
                                                           void **out) {
  int rc = GPB_EINVAL;
  switch (k) {
    TEST_SITE8(0) TEST_SITE8(8) TEST_SITE8(16) TEST_SITE8(24) TEST_SITE8(32)
    TEST_SITE8(40) TEST_SITE8(48) TEST_SITE8(56) TEST_SITE8(64) TEST_SITE8(72)
    TEST_SITE8(80) TEST_SITE8(88)
  }
  __asm__ volatile("" ::: "memory");
  return rc;
}

/* A reader's text for call site `site` (got) is the pool's. */
static inline void test_site_text_is(gpb_pool_t *p, uint32_t site,
                                     const char *got) {
  char want[8192];
  if (site == 0) FAILF("call site 0 has no text");
  if (gpb_pool_site_text(p, site, want, sizeof want) <= 0)
    FAILF("the pool has no call site %u", site);
  if (!got || strcmp(got, want))
    FAILF("call site %u: reader has '%s', pool '%s'", site,
          got ? got : "(null)", want);
}

/* A gpb_model_visit callback over a reader's model: each allocation's
 * call site has in reader `a` the frames it has in `pool`. Counts the
 * allocations in `used`. */
typedef struct test_site_check {
  gpb_pool_t *pool;
  gpb_attach_t *a;
  int used;
} test_site_check_t;

static inline int test_check_site(const gpb_block_info_t *b, void *user) {
  test_site_check_t *c = user;
  if (!b->used || b->alloc_offset != b->offset) return 0;
  c->used++;
  test_site_text_is(c->pool, b->site, gpb_attach_site(c->a, b->site));
  return 0;
}

#endif
