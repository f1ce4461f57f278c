/* SPDX-License-Identifier: MIT */
/*
 * test_arenas.c: randomized test of pools with per-thread arenas.
 *
 * Placement depends on which arena a thread lands in, so the reference
 * here does not choose places: it follows the pool's choices and checks
 * each one, under all three policies. A unit map records what is allocated; every allocation must
 * cover free units only, be aligned to its order and hold the size asked
 * for; every GPB_ENOMEM must mean that no aligned free block of the order
 * asked for exists anywhere in the map (arenas must not strand memory a
 * request could have had); under best fit, of the order of the request
 * plus its alignment's slack, which is what best fit promises. Operations run in short-lived threads, one
 * batch each, so the arenas take turns and superblocks move between them.
 *
 * After every step gpb_pool_check() verifies every invariant (arenas,
 * lent superblocks, owner map, counters), and the counters must equal the
 * reference's. Every 16 steps the free blocks per order must equal a walk
 * of gpb_pool_visit. Some rounds attach a hook, on and off mid-round,
 * feeding a block-map model that must agree with the pool: the events of
 * arenas form one exact stream. Misuse (double free, interior pointer) is
 * refused and leaves the pool intact. At the end, freed and coalesced,
 * the pool must be its roots again.
 */
#include "testutil.h"

#include <pthread.h>

#define MAXU 16384
#define MAXLIVE 2048

typedef struct live {
  void *p;
  uint64_t unit, len, req;
} live_t;

typedef struct round {
  gpb_pool_t *pool;
  gpb_pool_info_t info;
  uint64_t rng, nunits, min_block, step;
  int trim, fit; /* policy trim or bestfit: allocations are `units` long */
  uint8_t used[MAXU];
  live_t live[MAXLIVE];
  int nlive;
  uint64_t req_bytes, used_units, allocs, frees, fails;
  gpb_model_t *model; /* non-NULL while the hook is on */
  gpb_pool_t *twin;   /* lazy rounds: the same pool without arenas */
  char *twin_base;
  int batch;
} round_t;

static uint32_t clog2(uint64_t x) {
  return x <= 1 ? 0 : 64u - (uint32_t)__builtin_clzll(x - 1);
}

/* An aligned free block of order k exists in the map. */
static int ref_has_block(const round_t *r, uint32_t k) {
  uint64_t n = 1ull << k;
  for (uint64_t i = 0; i < (r->nunits >> k); i++) {
    uint64_t x = i * n;
    while (x < (i + 1) * n && !r->used[x]) x++;
    if (x == (i + 1) * n) return 1;
  }
  return 0;
}

static void hook_to_model(const gpb_event_t *ev, void *user) {
  if (gpb_model_apply(user, ev))
    FAILF("model refused event %" PRIu64 " (%s): %s", ev->seq,
          gpb_event_type_name(ev->type), gpb_last_error_detail());
}

static void check_counters(round_t *r) {
  gpb_stats_t s;
  ASSERT_OK(gpb_pool_stats(r->pool, &s));
  ASSERT_U64_EQ(s.requested_bytes, r->req_bytes);
  ASSERT_U64_EQ(s.block_bytes, r->used_units * r->min_block);
  ASSERT_U64_EQ(s.free_bytes, (r->nunits - r->used_units) * r->min_block);
  ASSERT_U64_EQ(s.live_allocs, (uint64_t)r->nlive);
  ASSERT_U64_EQ(s.allocs, r->allocs);
  ASSERT_U64_EQ(s.frees, r->frees);
  ASSERT_U64_EQ(s.failures, r->fails);
  ASSERT(s.requested_peak >= s.requested_bytes);
  if (r->step % 16 == 0) {
    test_blocks_t x = {0};
    ASSERT_OK(gpb_pool_visit(r->pool, test_collect_blocks, &x));
    uint64_t nfree[GPB_MAX_ORDERS] = {0}, at = 0;
    for (size_t i = 0; i < x.n; i++) {
      if (x.b[i].offset != at) FAILF("visit: gap at offset %" PRIu64, at);
      at += x.b[i].size;
      if (!x.b[i].used) nfree[x.b[i].order]++;
    }
    ASSERT_U64_EQ(at, r->nunits * r->min_block);
    for (uint32_t k = 0; k < GPB_MAX_ORDERS; k++)
      if (nfree[k] != s.free_blocks[k])
        FAILF("order %u: %" PRIu64 " free blocks in the map, stats say %" PRIu64,
              k, nfree[k], s.free_blocks[k]);
    if (r->model) {
      test_blocks_t y = {0};
      ASSERT_OK(gpb_model_visit(r->model, test_collect_blocks, &y));
      test_blocks_same(&x, &y);
      gpb_stats_t ms;
      ASSERT_OK(gpb_model_stats(r->model, &ms));
      ASSERT_U64_EQ(ms.seq, s.seq);
      ASSERT_U64_EQ(ms.requested_bytes, s.requested_bytes);
      free(y.b);
    }
    free(x.b);
  }
}

static void step_alloc(round_t *r) {
  uint64_t mb = r->min_block;
  uint64_t size = 1 + rng_below(&r->rng, mb << rng_below(&r->rng, 9));
  size_t align = rng_below(&r->rng, 8) == 0 ? (size_t)mb << rng_below(&r->rng, 6) : 0;
  uint32_t align_order = align > mb ? clog2(align / mb) : 0;
  uint64_t units = (size + mb - 1) / mb;
  uint32_t k = clog2(units);
  if (align_order > k) k = align_order;
  void *p;
  uint32_t tag = (uint32_t)rng_below(&r->rng, 4);
  int rc = gpb_alloc_ex(r->pool, size, align, tag, NULL, &p);
  if (r->twin) { /* a lazy pool that never met two threads is a plain one */
    void *q;
    int trc = gpb_alloc_ex(r->twin, size, align, tag, NULL, &q);
    if (trc != rc || (rc == 0 && (char *)q - r->twin_base !=
                                     (char *)p - (char *)r->info.base))
      FAILF("step %" PRIu64 ": lazy arenas placed %" PRIu64 " bytes apart "
            "from a plain pool", r->step, size);
  }
  if (rc == GPB_ENOMEM) {
    /* Best fit promises an aligned request only a run long enough for
     * any start: units + 2^align_order - 1. */
    uint32_t kk = r->fit ? clog2(units + (1ull << align_order) - 1) : k;
    if (ref_has_block(r, kk))
      FAILF("step %" PRIu64 ": %" PRIu64 " bytes (order %u, aligned to order "
            "%u) refused, but the map has a free block of order %u", r->step,
            size, k, align_order, kk);
    r->fails++;
    return;
  }
  if (rc) FAILF("alloc %" PRIu64 ": %s: %s", size, gpb_strerror(rc),
                gpb_last_error_detail());
  size_t usable;
  ASSERT_OK(gpb_usable_size(r->pool, p, &usable));
  uint64_t unit = (uint64_t)((char *)p - (char *)r->info.base) / mb;
  uint64_t len = usable / mb;
  if (usable < size || usable % mb) FAILF("usable %zu for %" PRIu64, usable, size);
  if (len != (r->trim || r->fit ? units : 1ull << k))
    FAILF("allocation of %" PRIu64 " units took %" PRIu64, units, len);
  /* Best fit aligns a run only as asked; the others align the block. */
  uint32_t a = r->fit ? align_order : k;
  if (unit % (1ull << a)) FAILF("unit %" PRIu64 " not aligned to order %u", unit, a);
  if (unit + len > r->nunits) FAILF("allocation runs past the pool");
  for (uint64_t x = unit; x < unit + len; x++) {
    if (r->used[x]) FAILF("unit %" PRIu64 " handed out twice", x);
    r->used[x] = 1;
  }
  live_t *l = &r->live[r->nlive++];
  l->p = p;
  l->unit = unit;
  l->len = len;
  l->req = size;
  r->req_bytes += size;
  r->used_units += len;
  r->allocs++;
}

static void step_free(round_t *r) {
  int j = (int)rng_below(&r->rng, (uint64_t)r->nlive);
  live_t l = r->live[j];
  r->live[j] = r->live[--r->nlive];
  if (l.len > 1 && rng_below(&r->rng, 16) == 0)
    ASSERT_ERR(gpb_free(r->pool, (char *)l.p + r->min_block), GPB_EINTERIOR);
  ASSERT_OK(gpb_free(r->pool, l.p));
  if (r->twin)
    ASSERT_OK(gpb_free(r->twin, r->twin_base + ((char *)l.p - (char *)r->info.base)));
  for (uint64_t x = l.unit; x < l.unit + l.len; x++) r->used[x] = 0;
  r->req_bytes -= l.req;
  r->used_units -= l.len;
  r->frees++;
  if (rng_below(&r->rng, 16) == 0)
    ASSERT_ERR(gpb_free(r->pool, l.p), GPB_EDOUBLEFREE);
}

static void *batch(void *arg) {
  round_t *r = arg;
  for (int i = 0; i < r->batch; i++, r->step++) {
    if (r->nlive < MAXLIVE && (r->nlive == 0 || rng_below(&r->rng, 100) < 60))
      step_alloc(r);
    else
      step_free(r);
    int rc = gpb_pool_check(r->pool);
    if (rc) FAILF("step %" PRIu64 ": %s", r->step, gpb_last_error_detail());
    check_counters(r);
  }
  return NULL;
}

static uint64_t total_fails, hooked_rounds, lazy_rounds;

static void run_round(uint64_t *rng, long steps) {
  static round_t r;
  memset(&r, 0, sizeof r);
  r.rng = rng_next(rng);
  uint32_t narenas = 2 + (uint32_t)rng_below(rng, 7);
  r.min_block = 256ull << rng_below(rng, 3);
  r.nunits = 1024ull * narenas * (1 + rng_below(rng, 2)) + rng_below(rng, 300);
  if (r.nunits > MAXU) r.nunits = MAXU;
  int policy = (int)rng_below(rng, 3);
  r.trim = policy == 1;
  r.fit = policy == 2;
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.flags = GPB_CFG_NO_ENV | (rng_below(rng, 4) == 0 ? GPB_CFG_EAGER_MERGE : 0);
  /* The batches' threads take turns, so a lazy pool never meets a second
   * thread on its lock and stays one core: most rounds start the arenas
   * at once, the others check that a lazy pool is a plain one. */
  int eager = rng_below(rng, 4) != 0;
  if (eager) cfg.flags |= GPB_CFG_ARENAS_EAGER;
  lazy_rounds += (uint64_t)!eager;
  cfg.backend = rng_below(rng, 4) == 0 ? GPB_BACKEND_HOST : GPB_BACKEND_VIRTUAL;
  cfg.min_block = r.min_block;
  cfg.pool_size = r.nunits * r.min_block + rng_below(rng, r.min_block);
  cfg.policy = r.trim ? GPB_POLICY_TRIM
                      : r.fit ? GPB_POLICY_BESTFIT : GPB_POLICY_BUDDY;
  cfg.arenas = narenas;
  if (cfg.backend == GPB_BACKEND_HOST) cfg.debug = 1;
  ASSERT_OK(gpb_pool_create(&cfg, &r.pool));
  ASSERT_OK(gpb_pool_info(r.pool, &r.info));
  ASSERT_EQ(r.info.num_arenas, narenas);
  if (!eager) {
    cfg.arenas = 1;
    ASSERT_OK(gpb_pool_create(&cfg, &r.twin));
    gpb_pool_info_t ti;
    ASSERT_OK(gpb_pool_info(r.twin, &ti));
    r.twin_base = ti.base;
  }
  int hooked = rng_below(rng, 2) == 0;
  hooked_rounds += (uint64_t)hooked;
  for (long done = 0; done < steps;) {
    /* Attaching a hook folds the arenas' counters into the pool's and
     * serializes their events; a model started now begins from a copy. */
    if (hooked && rng_below(rng, 8) == 0) {
      if (r.model) {
        ASSERT_OK(gpb_pool_set_hook(r.pool, NULL, NULL));
        gpb_model_destroy(r.model);
        r.model = NULL;
      } else {
        ASSERT_OK(gpb_model_create(r.info.managed_size, r.min_block, &r.model));
        test_blocks_t x = {0};
        ASSERT_OK(gpb_pool_set_hook(r.pool, hook_to_model, r.model));
        gpb_stats_t s;
        ASSERT_OK(gpb_pool_stats(r.pool, &s));
        ASSERT_OK(gpb_pool_visit(r.pool, test_collect_blocks, &x));
        ASSERT_OK(gpb_model_load(r.model, x.b, x.n, s.seq));
        free(x.b);
      }
    }
    r.batch = 1 + (int)rng_below(rng, 40);
    pthread_t t;
    if (pthread_create(&t, NULL, batch, &r)) FAILF("pthread_create");
    pthread_join(t, NULL);
    done += r.batch;
  }
  while (r.nlive) {
    r.nlive--;
    ASSERT_OK(gpb_free(r.pool, r.live[r.nlive].p));
  }
  ASSERT_OK(gpb_pool_coalesce(r.pool));
  ASSERT_OK(gpb_pool_check(r.pool));
  test_blocks_t x = {0};
  ASSERT_OK(gpb_pool_visit(r.pool, test_collect_blocks, &x));
  ASSERT_EQ(x.n, (size_t)__builtin_popcountll(r.nunits));
  gpb_stats_t s;
  ASSERT_OK(gpb_pool_stats(r.pool, &s));
  ASSERT_U64_EQ(s.free_bytes, r.nunits * r.min_block);
  free(x.b);
  if (r.model) {
    ASSERT_OK(gpb_pool_set_hook(r.pool, NULL, NULL));
    gpb_model_destroy(r.model);
  }
  total_fails += r.fails;
  gpb_pool_destroy(r.pool);
  gpb_pool_destroy(r.twin);
}

/* Many superblocks of one arena free as a whole only once their deferred
 * pairs merge: 8 pairs wait per order, so 4 superblocks of 8 KiB blocks
 * (two pairs each at order 5) and 8 of 4 KiB blocks (one pair each at
 * order 4, the rest merged) make 12. The coalesced figures must merge
 * every one with its buddy; the checker's walk of the map says what they
 * should be (it once counted at most 8 per arena). */
static void arena_merged_superblocks(void) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.flags = GPB_CFG_NO_ENV | GPB_CFG_ARENAS_EAGER;
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = (size_t)2 << 20; /* 256 B blocks, 32 KiB superblocks */
  cfg.min_block = 256;
  cfg.arenas = 4;
  gpb_pool_t *p;
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  void *big[4][4], *small[8][8];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) ASSERT_OK(gpb_alloc(p, 8 << 10, &big[i][j]));
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 8; j++) ASSERT_OK(gpb_alloc(p, 4 << 10, &small[i][j]));
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) ASSERT_OK(gpb_free(p, big[i][j]));
  for (int i = 0; i < 8; i++) /* one deferred pair in each */
    for (int j = 0; j < 2; j++) ASSERT_OK(gpb_free(p, small[i][j]));
  for (int i = 0; i < 8; i++)
    for (int j = 2; j < 8; j++) ASSERT_OK(gpb_free(p, small[i][j]));
  ASSERT_OK(gpb_pool_check(p));
  gpb_pool_destroy(p);
}

static void count_event(const gpb_event_t *ev, void *user) {
  (void)ev;
  (*(uint64_t *)user)++;
}

/* Best fit counts in place and leaves part of its free block counts
 * pending in each core until they are read. Rewiring the sink (a hook on
 * or off) with counts pending must lose none of them: nothing reads the
 * counters between the frees and the hook here, in a pool of one core
 * and in one with arenas. */
/* Best fit counts in place, either from its runs when the stats are read
 * (few runs) or call by call (more than 512 runs in a core), switching
 * as the runs come and go; n allocations of up to `most` bytes, every
 * other one freed, make about n / 2 runs. */
static void fit_pending_rewired(int n, uint64_t most) {
  for (uint32_t narenas = 1; narenas <= 4; narenas += 3) {
    gpb_config_t cfg;
    gpb_config_init(&cfg);
    cfg.flags = GPB_CFG_NO_ENV | GPB_CFG_ARENAS_EAGER;
    cfg.backend = GPB_BACKEND_VIRTUAL;
    cfg.policy = GPB_POLICY_BESTFIT;
    cfg.pool_size = (size_t)64 << 20;
    cfg.arenas = narenas;
    gpb_pool_t *p;
    ASSERT_OK(gpb_pool_create(&cfg, &p));
    void **v = malloc((size_t)n * sizeof *v);
    ASSERT(v);
    uint64_t rng = 5, nev = 0;
    for (int round = 0; round < 4; round++) {
      for (int i = 0; i < n; i++)
        ASSERT_OK(gpb_alloc(p, 256 + rng_below(&rng, most), &v[i]));
      for (int i = 0; i < n; i += 2) ASSERT_OK(gpb_free(p, v[i]));
      /* The hook goes on at even rounds, off at odd ones. */
      ASSERT_OK(gpb_pool_set_hook(p, round % 2 ? NULL : count_event, &nev));
      ASSERT_OK(gpb_pool_check(p));
      for (int i = 1; i < n; i += 2) {
        ASSERT_OK(gpb_free(p, v[i]));
        if (i % 1001 == 0) ASSERT_OK(gpb_pool_check(p));
      }
      ASSERT_OK(gpb_pool_check(p));
    }
    ASSERT(nev > 0);
    free(v);
    gpb_pool_destroy(p);
  }
}

int main(void) {
  uint64_t seed = test_seed(), rng = seed;
  long rounds = (long)(24 * test_scale()), steps = 600;
  if (rounds < 2) rounds = 2;
  for (long i = 0; i < rounds; i++) run_round(&rng, steps);
  arena_merged_superblocks();
  fit_pending_rewired(64, 100000);
  fit_pending_rewired(3000, 2048);
  /* GPB_ARENAS sets the count when the config leaves the default (1). */
  gpb_config_t cfg;
  gpb_pool_t *p;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = (size_t)64 << 20;
  setenv("GPB_ARENAS", "3", 1);
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  gpb_pool_info_t info;
  ASSERT_OK(gpb_pool_info(p, &info));
  ASSERT_EQ(info.num_arenas, 3);
  gpb_pool_destroy(p);
  cfg.policy = GPB_POLICY_BESTFIT; /* bestfit has arenas too */
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  ASSERT_OK(gpb_pool_info(p, &info));
  ASSERT_EQ(info.num_arenas, 3);
  gpb_pool_destroy(p);
  cfg.policy = GPB_POLICY_BUDDY;
  setenv("GPB_ARENAS", "65", 1);
  ASSERT_ERR(gpb_pool_create(&cfg, &p), GPB_EINVAL);
  setenv("GPB_ARENAS", "x", 1);
  ASSERT_ERR(gpb_pool_create(&cfg, &p), GPB_EINVAL);
  unsetenv("GPB_ARENAS");
  cfg.arenas = 65;
  ASSERT_ERR(gpb_pool_create(&cfg, &p), GPB_EINVAL);
  /* Too small for superblocks: one lock, said so. */
  cfg.arenas = 8;
  cfg.pool_size = (size_t)1 << 20;
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  ASSERT_OK(gpb_pool_info(p, &info));
  ASSERT_EQ(info.num_arenas, 1);
  gpb_pool_destroy(p);
  printf("%ld rounds of %ld steps with arenas (%" PRIu64 " with a hook, %"
         PRIu64 " lazy), %" PRIu64 " refused allocations: every placement, "
         "failure and counter as the reference says\n", rounds, steps,
         hooked_rounds, lazy_rounds, total_fails);
  return 0;
}
