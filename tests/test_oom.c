/* SPDX-License-Identifier: MIT */
/*
 * test_oom.c: the failed-allocation explainer (tools/common/oom.c) finds
 * the cheapest window.
 *
 * Hand-built block maps, each loaded into a model first so that it is a
 * state a pool can be in, have known answers: free buddies left unmerged
 * count as free, the cheapest window can be the pool's last (a pool that
 * is not a power of two), ties go to fewer allocations, then the older
 * window, then the lower address, a window inside one large allocation
 * counts it once, a trimmed allocation counts only its bytes inside, and
 * bestfit's runs start anywhere. Seeded random maps are then checked
 * against a brute force over every window, aligned and not, and over
 * every figure of an explanation (free bytes, the largest free block and
 * run, the block needed, the allocations listed). Last, real pools of
 * each policy are run to a failed allocation; the window must be the
 * brute force's, and freeing its allocations must let the same request
 * succeed.
 */
#include "testutil.h"
#include "oom.h"

#define MB 256u

/* ------------------------------------------------------------ hand maps */

static gpb_block_info_t blk[256];
static size_t nblk;
static uint64_t at; /* next unit */

static void map_reset(void) {
  nblk = 0;
  at = 0;
}

static gpb_block_info_t *map_push(uint32_t order) {
  ASSERT(nblk < 256);
  gpb_block_info_t *b = &blk[nblk++];
  memset(b, 0, sizeof *b);
  b->offset = at * MB;
  b->order = order;
  b->size = (uint64_t)MB << order;
  at += 1ull << order;
  return b;
}

/* A free block of `order`. */
static void fb(uint32_t order) { map_push(order); }

/* An allocation of `units` at the next unit, as its canonical blocks
 * (one block when units is a power of two aligned there). */
static void ua(uint64_t units, uint64_t time_ns, uint32_t tag) {
  uint64_t start = at, left = units;
  while (left) {
    uint32_t k = 0;
    while ((at & ((2ull << k) - 1)) == 0 && (2ull << k) <= left) k++;
    gpb_block_info_t *b = map_push(k);
    b->used = 1;
    b->alloc_offset = start * MB;
    b->alloc_size = units * MB;
    b->requested = units * MB - 10;
    b->time_ns = time_ns;
    b->tag = tag;
    left -= 1ull << k;
  }
}

/* The hand map into m, through a model: it must load (a valid pool
 * state), and the map made from the model's walk must equal the one made
 * from the blocks directly. */
static void map_load(gpbt_oom_map_t *m) {
  gpb_model_t *model;
  ASSERT_OK(gpb_model_create(at * MB, MB, &model));
  ASSERT_OK(gpb_model_load(model, blk, nblk, 1));
  ASSERT_OK(gpb_model_check(model));
  ASSERT_OK(gpbt_oom_map_model(m, model, NULL, NULL));
  gpbt_oom_map_t d;
  gpbt_oom_map_init(&d);
  for (size_t i = 0; i < nblk; i++) ASSERT_EQ(gpbt_oom_map_block(&blk[i], &d), 0);
  ASSERT_U64_EQ(d.managed, m->managed);
  ASSERT_U64_EQ(d.min_block, MB);
  ASSERT_EQ(d.n, m->n);
  for (size_t i = 0; i < d.n; i++) {
    ASSERT_U64_EQ(d.a[i].offset, m->a[i].offset);
    ASSERT_U64_EQ(d.a[i].size, m->a[i].size);
    ASSERT_U64_EQ(d.a[i].time_ns, m->a[i].time_ns);
  }
  gpbt_oom_map_fini(&d);
  gpb_model_destroy(model);
}

/* Explains `requested` bytes on m and checks the window found. */
static void want(const gpbt_oom_map_t *m, gpb_policy_t pol, uint64_t requested,
                 uint64_t need, uint64_t win_unit, uint64_t live_bytes,
                 uint64_t live_allocs, gpbt_oom_t *o) {
  memset(o, 0, sizeof *o);
  ASSERT_OK(gpbt_oom_explain(m, pol, requested, o));
  ASSERT_U64_EQ(o->need, need);
  ASSERT_U64_EQ(o->win.size, need);
  ASSERT_U64_EQ(o->win.offset, win_unit * MB);
  ASSERT_U64_EQ(o->win.live_bytes, live_bytes);
  ASSERT_U64_EQ(o->win.live_allocs, live_allocs);
  uint64_t sum = 0;
  for (size_t i = 0; i < o->nlist; i++) sum += o->list[i].in_window;
  if (live_allocs <= GPBT_OOM_LIST) {
    ASSERT_U64_EQ(o->nlist, live_allocs);
    ASSERT_U64_EQ(sum, live_bytes);
  }
}

static void test_deferred_buddies(void) {
  gpbt_oom_map_t m;
  gpbt_oom_t o;
  gpbt_oom_map_init(&m);
  /* 8 units: used 0, free 1, free buddies 2 and 3 unmerged, used 4-7. */
  map_reset();
  ua(1, 10, 1);
  fb(0);
  fb(0);
  fb(0);
  ua(4, 5, 2);
  map_load(&m);
  ASSERT_EQ(m.n, 2);
  /* 2 units: [2,4) is free once its buddies merge. */
  want(&m, GPB_POLICY_BUDDY, 400, 2 * MB, 2, 0, 0, &o);
  ASSERT_U64_EQ(o.free_bytes, 3 * MB);
  ASSERT_U64_EQ(o.largest_free, 2 * MB); /* the pair, merged */
  ASSERT_U64_EQ(o.largest_run, 3 * MB);
  ASSERT_EQ(o.nlist, 0);
  gpbt_oom_free(&o);
  /* 4 units: [0,4) holds one unit live, [4,8) four. */
  want(&m, GPB_POLICY_BUDDY, 1000, 4 * MB, 0, MB, 1, &o);
  ASSERT_U64_EQ(o.list[0].offset, 0);
  ASSERT_U64_EQ(o.list[0].tag, 1);
  gpbt_oom_free(&o);
  gpbt_oom_map_fini(&m);
}

static void test_pool_end(void) {
  gpbt_oom_map_t m;
  gpbt_oom_t o;
  gpbt_oom_map_init(&m);
  /* 12 units, roots of 8 and 4: the last window [8,12) is the cheapest
   * of 4 units. */
  map_reset();
  ua(1, 1, 0); fb(0); ua(1, 2, 0); fb(0); /* [0,4): 2 units live */
  ua(4, 3, 0);                            /* [4,8): 4 */
  fb(0); ua(1, 4, 5); fb(1);              /* [8,12): 1 */
  map_load(&m);
  want(&m, GPB_POLICY_BUDDY, 700, 4 * MB, 8, MB, 1, &o);
  ASSERT_U64_EQ(o.list[0].offset, 9 * MB);
  ASSERT_U64_EQ(o.list[0].tag, 5);
  ASSERT(o.largest_free < o.need);
  gpbt_oom_free(&o);
  /* Trim needs the same block. */
  want(&m, GPB_POLICY_TRIM, 700, 4 * MB, 8, MB, 1, &o);
  gpbt_oom_free(&o);
  /* 10 units need a block of 16: the pool has none (its largest is 8). */
  memset(&o, 0, sizeof o);
  ASSERT_OK(gpbt_oom_explain(&m, GPB_POLICY_BUDDY, 10 * MB, &o));
  ASSERT_U64_EQ(o.need, 16 * MB);
  ASSERT_U64_EQ(o.win.size, 0);
  gpbt_oom_free(&o);
  /* More than the pool: nothing is needed of it. */
  ASSERT_OK(gpbt_oom_explain(&m, GPB_POLICY_BUDDY, 12 * MB + 1, &o));
  ASSERT_U64_EQ(o.need, 0);
  ASSERT_U64_EQ(o.win.size, 0);
  ASSERT_U64_EQ(o.free_bytes, 5 * MB);
  gpbt_oom_free(&o);
  gpbt_oom_map_fini(&m);
}

static void test_ties(void) {
  gpbt_oom_map_t m;
  gpbt_oom_t o;
  gpbt_oom_map_init(&m);
  /* Equal bytes: fewer allocations win. */
  map_reset();
  ua(1, 1, 0); ua(1, 1, 0); fb(1); /* 2 units in 2 */
  ua(2, 9, 0); fb(1);              /* 2 units in 1 */
  map_load(&m);
  want(&m, GPB_POLICY_BUDDY, 4 * MB, 4 * MB, 4, 2 * MB, 1, &o);
  gpbt_oom_free(&o);
  /* Equal bytes and count: the older wins, judged by the newest
   * allocation in each (90 against 70). */
  map_reset();
  ua(1, 10, 0); ua(1, 90, 0); fb(1);
  ua(1, 60, 0); ua(1, 70, 0); fb(1);
  map_load(&m);
  want(&m, GPB_POLICY_BUDDY, 4 * MB, 4 * MB, 4, 2 * MB, 2, &o);
  gpbt_oom_free(&o);
  /* One unit live in each window, at times t0 and t1. All equal: the
   * lower address; only the time differs: the later window is older. */
  static const uint64_t one[][3] = {{50, 50, 0}, {100, 50, 4}}; /* t0 t1 win */
  for (int k = 0; k < 2; k++) {
    map_reset();
    ua(1, one[k][0], 0); fb(0); fb(1);
    ua(1, one[k][1], 0); fb(0); fb(1);
    map_load(&m);
    want(&m, GPB_POLICY_BUDDY, 4 * MB, 4 * MB, one[k][2], MB, 1, &o);
    gpbt_oom_free(&o);
  }
  gpbt_oom_map_fini(&m);
}

static void test_large_and_trimmed(void) {
  gpbt_oom_map_t m;
  gpbt_oom_t o;
  gpbt_oom_map_init(&m);
  /* 16 units, windows of 2: [0,8) one allocation (4 windows inside it,
   * time 5), [8,10) two, [10,12) one of time 7, [12,16) one of time 1:
   * its first window is the oldest of the one-allocation windows. */
  map_reset();
  ua(8, 5, 0);
  ua(1, 2, 0); ua(1, 2, 0);
  ua(2, 7, 0);
  ua(4, 1, 3);
  map_load(&m);
  want(&m, GPB_POLICY_BUDDY, 300, 2 * MB, 12, 2 * MB, 1, &o);
  ASSERT_U64_EQ(o.list[0].offset, 12 * MB);
  ASSERT_U64_EQ(o.list[0].size, 4 * MB);
  ASSERT_U64_EQ(o.list[0].in_window, 2 * MB);
  ASSERT_U64_EQ(o.largest_free, 0);
  ASSERT_U64_EQ(o.free_bytes, 0);
  gpbt_oom_free(&o);
  /* Trim: an allocation of 3 units at 0 (blocks of 2 and 1): the window
   * [2,4) holds one unit of it. */
  map_reset();
  ua(3, 1, 0); fb(0);
  ua(4, 2, 0);
  map_load(&m);
  want(&m, GPB_POLICY_TRIM, 2 * MB, 2 * MB, 2, MB, 1, &o);
  ASSERT_U64_EQ(o.list[0].offset, 0);
  ASSERT_U64_EQ(o.list[0].size, 3 * MB);
  ASSERT_U64_EQ(o.list[0].in_window, MB);
  gpbt_oom_free(&o);
  gpbt_oom_map_fini(&m);
}

static void test_runs(void) {
  gpbt_oom_map_t m;
  gpbt_oom_t o;
  gpbt_oom_map_init(&m);
  /* 16 units: live [0,3) t1, [5,6) t9, [9,10) t5, [13,16) t7. Runs of 4
   * with one unit live: [3,7) .. [5,9) hold the t9 one, [6,10) .. [9,13)
   * the t5 one, [10,14) one unit of the t7 one. The oldest is t5, first
   * at unit 6. */
  map_reset();
  ua(3, 1, 0); fb(0); fb(0);
  ua(1, 9, 0); fb(1); fb(0);
  ua(1, 5, 0); fb(1); fb(0);
  ua(3, 7, 0);
  map_load(&m);
  want(&m, GPB_POLICY_BESTFIT, 4 * MB - 100, 4 * MB, 6, MB, 1, &o);
  ASSERT_U64_EQ(o.list[0].offset, 9 * MB);
  ASSERT_U64_EQ(o.largest_run, 3 * MB);
  ASSERT_U64_EQ(o.largest_free, 2 * MB);
  gpbt_oom_free(&o);
  /* A run of 3 fits: the cheapest is free, at the first gap of 3. */
  want(&m, GPB_POLICY_BESTFIT, 3 * MB, 3 * MB, 6, 0, 0, &o);
  gpbt_oom_free(&o);
  /* A run of 15: [0,15) cuts a unit off the t7 one, [1,16) off the t1
   * one; equal in every way, so the lower. */
  want(&m, GPB_POLICY_BESTFIT, 15 * MB, 15 * MB, 0, 7 * MB, 4, &o);
  gpbt_oom_free(&o);
  gpbt_oom_map_fini(&m);
}

/* ------------------------------------------------------------ random */

static uint64_t clip(uint64_t off, uint64_t size, uint64_t lo, uint64_t hi) {
  uint64_t a = off > lo ? off : lo, b = off + size < hi ? off + size : hi;
  return b > a ? b - a : 0;
}

/* Every window, scored the slow way. */
static void brute(const gpbt_oom_map_t *m, uint64_t size, int aligned,
                  gpbt_oom_window_t *best) {
  memset(best, 0, sizeof *best);
  uint64_t step = aligned ? size : MB;
  for (uint64_t s = 0; s + size <= m->managed; s += step) {
    gpbt_oom_window_t c = {s, size, 0, 0, 0, 0};
    int first = 1;
    for (size_t i = 0; i < m->n; i++) {
      uint64_t in = clip(m->a[i].offset, m->a[i].size, s, s + size);
      if (!in) continue;
      if (first) c.first = i;
      first = 0;
      c.live_bytes += in;
      c.live_allocs++;
      if (m->a[i].time_ns > c.newest_ns) c.newest_ns = m->a[i].time_ns;
    }
    if (!best->size || c.live_bytes < best->live_bytes ||
        (c.live_bytes == best->live_bytes &&
         (c.live_allocs < best->live_allocs ||
          (c.live_allocs == best->live_allocs && c.newest_ns < best->newest_ns))))
      *best = c;
  }
}

/* A unit is live when an allocation covers it. */
static int unit_live(const gpbt_oom_map_t *m, uint64_t u) {
  for (size_t i = 0; i < m->n; i++)
    if (clip(m->a[i].offset, m->a[i].size, u * MB, (u + 1) * MB)) return 1;
  return 0;
}

/* The whole explanation of `requested` bytes, the slow way: free bytes,
 * the largest wholly free aligned block (a node of the pool's tree) and
 * run, the block or run needed, its cheapest window, and the allocations
 * listed: the GPBT_OOM_LIST with the most bytes in the window (ties: the
 * lower address), in address order. */
static void brute_explain(const gpbt_oom_map_t *m, int aligned,
                          uint64_t requested) {
  uint64_t units = m->managed / MB, free_units = 0, run = 0, best_run = 0;
  for (uint64_t u = 0; u < units; u++) {
    if (unit_live(m, u)) {
      run = 0;
      continue;
    }
    free_units++;
    if (++run > best_run) best_run = run;
  }
  uint64_t largest = 0;
  for (uint64_t b = 1; b <= units; b <<= 1)
    for (uint64_t w = 0; (w + 1) * b <= units; w++) {
      uint64_t u = w * b;
      while (u < (w + 1) * b && !unit_live(m, u)) u++;
      if (u == (w + 1) * b) largest = b * MB;
    }
  uint64_t need = 0;
  if (requested <= m->managed) {
    need = (requested + MB - 1) / MB;
    if (!need) need = 1;
    if (aligned) {
      uint64_t b = 1;
      while (b < need) b <<= 1;
      need = b;
    }
    need *= MB;
  }
  gpbt_oom_t o;
  memset(&o, 0, sizeof o);
  ASSERT_OK(gpbt_oom_explain(m, aligned ? GPB_POLICY_BUDDY : GPB_POLICY_BESTFIT,
                             requested, &o));
  ASSERT_EQ(o.aligned, aligned);
  ASSERT_U64_EQ(o.free_bytes, free_units * MB);
  ASSERT_U64_EQ(o.largest_free, largest);
  ASSERT_U64_EQ(o.largest_run, best_run * MB);
  ASSERT_U64_EQ(o.need, need);
  gpbt_oom_window_t exp;
  memset(&exp, 0, sizeof exp);
  if (need) brute(m, need, aligned, &exp);
  ASSERT_U64_EQ(o.win.size, exp.size);
  ASSERT_U64_EQ(o.win.offset, exp.offset);
  ASSERT_U64_EQ(o.win.live_bytes, exp.live_bytes);
  ASSERT_U64_EQ(o.win.live_allocs, exp.live_allocs);
  /* The list: pick the most bytes in the window, lowest address first,
   * one at a time. */
  size_t want_n = exp.live_allocs < GPBT_OOM_LIST ? (size_t)exp.live_allocs
                                                  : GPBT_OOM_LIST;
  ASSERT_EQ(o.nlist, want_n);
  int taken[GPBT_OOM_LIST];
  uint64_t pick[GPBT_OOM_LIST];
  for (size_t k = 0; k < want_n; k++) {
    int bi = -1;
    uint64_t bin = 0;
    for (size_t i = 0; i < m->n; i++) {
      uint64_t in = clip(m->a[i].offset, m->a[i].size, exp.offset,
                         exp.offset + exp.size);
      int used = 0;
      for (size_t j = 0; j < k; j++) used |= taken[j] == (int)i;
      if (in && !used && (bi < 0 || in > bin)) {
        bi = (int)i;
        bin = in;
      }
    }
    ASSERT(bi >= 0);
    taken[k] = bi;
    pick[k] = m->a[bi].offset;
  }
  for (size_t i = 1; i < want_n; i++) /* address order */
    for (size_t k = i; k > 0 && pick[k - 1] > pick[k]; k--) {
      uint64_t t = pick[k];
      pick[k] = pick[k - 1];
      pick[k - 1] = t;
    }
  for (size_t k = 0; k < want_n; k++) {
    ASSERT_U64_EQ(o.list[k].offset, pick[k]);
    ASSERT_U64_EQ(o.list[k].in_window,
                  clip(o.list[k].offset, o.list[k].size, exp.offset,
                       exp.offset + exp.size));
  }
  gpbt_oom_free(&o);
}

static void test_random(uint64_t *rng) {
  gpbt_oom_map_t m;
  gpbt_oom_map_init(&m);
  int n = (int)(3000 * test_scale());
  for (int it = 0; it < n; it++) {
    /* Allocations at random on a pool of 1 to 64 units: gaps of 0 to 3
     * units, sizes of 1 to 9 (short gaps and short allocations half the
     * time, so that windows hold more than GPBT_OOM_LIST), times from a
     * small range (ties). */
    uint64_t gap = rng_below(rng, 2) ? 4 : 2, len_max = rng_below(rng, 2) ? 9 : 2;
    gpbt_oom_map_clear(&m);
    uint64_t units = 1 + rng_below(rng, 64);
    m.managed = units * MB;
    m.min_block = MB;
    for (uint64_t u = rng_below(rng, gap); u < units;) {
      uint64_t len = 1 + rng_below(rng, len_max);
      if (u + len > units) len = units - u;
      gpb_block_info_t b = {0};
      b.offset = b.alloc_offset = u * MB;
      b.size = MB;
      b.alloc_size = len * MB;
      b.used = 1;
      b.time_ns = rng_below(rng, 6);
      uint64_t managed = m.managed;
      ASSERT_EQ(gpbt_oom_map_block(&b, &m), 0);
      m.managed = managed; /* one block stands for the allocation */
      u += len + rng_below(rng, gap);
    }
    for (int aligned = 0; aligned < 2; aligned++) {
      uint64_t size = aligned ? (uint64_t)MB << rng_below(rng, 7)
                              : MB * (1 + rng_below(rng, units + 1));
      gpbt_oom_window_t got, exp;
      ASSERT_OK(gpbt_oom_cheapest(&m, size, aligned, &got));
      brute(&m, size, aligned, &exp);
      if (got.size != exp.size || got.offset != exp.offset ||
          got.live_bytes != exp.live_bytes ||
          got.live_allocs != exp.live_allocs || got.newest_ns != exp.newest_ns ||
          (exp.live_allocs && got.first != exp.first))
        FAILF("iteration %d, %s windows of %" PRIu64 " in %" PRIu64
              " units: got offset %" PRIu64 " (%" PRIu64 " live, %" PRIu64
              " allocs, newest %" PRIu64 "), expected %" PRIu64 " (%" PRIu64
              ", %" PRIu64 ", %" PRIu64 ")", it, aligned ? "aligned" : "run",
              size, units, got.offset, got.live_bytes, got.live_allocs,
              got.newest_ns, exp.offset, exp.live_bytes, exp.live_allocs,
              exp.newest_ns);
      /* And the whole explanation, of a request of any size. */
      brute_explain(&m, aligned, 1 + rng_below(rng, m.managed + MB));
    }
  }
  gpbt_oom_map_fini(&m);
  printf("random maps: %d agree with the brute force (windows and whole "
         "explanations)\n", n);
}

/* ------------------------------------------------------------ pools */

/* Random allocations and frees in a pool of the policy until one fails;
 * the explanation's figures must match the pool's, and freeing the
 * window's allocations must let the request succeed. */
static void test_pool(gpb_policy_t pol, uint64_t *rng) {
  int rounds = (int)(200 * test_scale()), failures = 0;
  for (int round = 0; round < rounds; round++) {
    gpb_config_t cfg;
    gpb_config_init(&cfg);
    cfg.backend = GPB_BACKEND_VIRTUAL;
    cfg.pool_size = MB * (64 + rng_below(rng, 192)); /* roots too */
    cfg.min_block = MB;
    cfg.policy = pol;
    cfg.flags = GPB_CFG_NO_ENV;
    gpb_pool_t *pool;
    ASSERT_OK(gpb_pool_create(&cfg, &pool));
    gpb_pool_info_t info;
    ASSERT_OK(gpb_pool_info(pool, &info));
    char *base = info.base;
    void *live[512];
    int nlive = 0;
    uint64_t want_bytes = 0;
    for (int step = 0; step < 4000; step++) {
      if (nlive && (nlive == 512 || rng_below(rng, 10) < 4)) {
        int k = (int)rng_below(rng, (uint64_t)nlive);
        ASSERT_OK(gpb_free(pool, live[k]));
        live[k] = live[--nlive];
        continue;
      }
      want_bytes = 1 + rng_below(rng, MB * (1 + rng_below(rng, 24)));
      void *p;
      int rc = gpb_alloc_ex(pool, want_bytes, 0, 0, NULL, &p);
      if (rc == GPB_ENOMEM) break;
      ASSERT_OK(rc);
      live[nlive++] = p;
      want_bytes = 0;
    }
    if (!want_bytes) {
      gpb_pool_destroy(pool);
      continue;
    }
    failures++;
    gpbt_oom_map_t m;
    gpbt_oom_t o;
    gpbt_oom_map_init(&m);
    memset(&o, 0, sizeof o);
    ASSERT_OK(gpbt_oom_map_pool(&m, pool, NULL, NULL));
    ASSERT_OK(gpbt_oom_explain(&m, pol, want_bytes, &o));
    gpb_stats_t st;
    ASSERT_OK(gpb_pool_stats(pool, &st));
    ASSERT_U64_EQ(o.free_bytes, st.free_bytes);
    ASSERT_U64_EQ(o.managed, info.managed_size);
    ASSERT(o.need > 0);
    if (o.aligned) ASSERT(o.largest_free < o.need);
    else ASSERT(o.largest_run < o.need);
    ASSERT_U64_EQ(o.win.size, o.need);
    ASSERT(o.win.live_allocs > 0);
    gpbt_oom_window_t exp;
    brute(&m, o.need, o.aligned, &exp);
    ASSERT_U64_EQ(o.win.offset, exp.offset);
    ASSERT_U64_EQ(o.win.live_bytes, exp.live_bytes);
    ASSERT_U64_EQ(o.win.live_allocs, exp.live_allocs);
    ASSERT_U64_EQ(o.win.newest_ns, exp.newest_ns);
    ASSERT_U64_EQ(o.win.first, exp.first);
    /* Merged, the pool's largest free block is the one figured. */
    ASSERT_OK(gpb_pool_coalesce(pool));
    ASSERT_OK(gpb_pool_stats(pool, &st));
    ASSERT_U64_EQ(o.largest_free, st.largest_free);
    /* Free what the window holds: the request now fits. */
    for (uint64_t i = 0; i < o.win.live_allocs; i++)
      ASSERT_OK(gpb_free(pool, base + m.a[o.win.first + i].offset));
    void *p;
    ASSERT_OK(gpb_alloc_ex(pool, want_bytes, 0, 0, NULL, &p));
    ASSERT_OK(gpb_pool_check(pool));
    gpbt_oom_free(&o);
    gpbt_oom_map_fini(&m);
    gpb_pool_destroy(pool);
  }
  ASSERT(failures > rounds / 2);
  printf("%s: %d failed allocations explained; freeing each window made "
         "room\n", gpb_policy_name(pol), failures);
}

int main(void) {
  uint64_t seed = test_seed(), rng = seed | 1;
  test_deferred_buddies();
  test_pool_end();
  test_ties();
  test_large_and_trimmed();
  test_runs();
  test_random(&rng);
  for (int p = 0; p < GPB_NUM_POLICIES; p++) test_pool((gpb_policy_t)p, &rng);
  printf("ok\n");
  return 0;
}
