/* SPDX-License-Identifier: MIT */
/*
 * test_sim.c: the simulator (gpb_sim_t) against a real
 * pool. Both get the same random requests; every placement, every error
 * code, every event (type, offset, size, order, requested, tag) and the
 * final block lists must agree, with both invariant checkers run after
 * every step. Then misuse: each wrong call fails with the pool's code and
 * leaves the simulator as it was. Last, call sites: the one an allocation
 * is given shows in its events and its block info.
 */
#include "testutil.h"

#define KIB 1024ull
#define MIB (1024ull * KIB)
#define MAXLIVE 512

typedef struct evlog {
  gpb_event_t ev[256];
  int n;
} evlog_t;

static void log_event(const gpb_event_t *ev, void *user) {
  evlog_t *l = user;
  if (l->n < 256) l->ev[l->n++] = *ev;
}

static void events_same(const evlog_t *p, const evlog_t *m, uint64_t step) {
  if (p->n != m->n) FAILF("step %" PRIu64 ": pool %d events, model %d", step, p->n, m->n);
  for (int i = 0; i < p->n; i++) {
    const gpb_event_t *a = &p->ev[i], *b = &m->ev[i];
    if (a->seq != b->seq || a->type != b->type || a->offset != b->offset ||
        a->size != b->size || a->order != b->order ||
        a->requested != b->requested || a->tag != b->tag)
      FAILF("step %" PRIu64 " event %d: pool type %u off %" PRIu64 " size %" PRIu64
            ", model type %u off %" PRIu64 " size %" PRIu64, step, i, a->type,
            a->offset, a->size, b->type, b->offset, b->size);
  }
}

/* One seeded run: a pool of `cfg` and its simulation side by side. */
static void diff_run(const gpb_config_t *cfg, uint64_t seed, uint64_t steps,
                     int hooked) {
  gpb_pool_t *p;
  gpb_sim_t *s;
  ASSERT_OK(gpb_pool_create(cfg, &p));
  ASSERT_OK(gpb_sim_create(cfg, &s));
  const gpb_model_t *m = gpb_sim_model(s);
  if (seed & 2) ASSERT_OK(gpb_sim_reserve(s, MAXLIVE)); /* placements unchanged */
  gpb_pool_info_t info;
  gpb_pool_info(p, &info);
  evlog_t pl = {0}, ml = {0};
  if (hooked) {
    ASSERT_OK(gpb_pool_set_hook(p, log_event, &pl));
    ASSERT_OK(gpb_sim_set_hook(s, log_event, &ml));
  }
  char *ptr[MAXLIVE];
  uint64_t off[MAXLIVE];
  int nlive = 0;
  uint64_t rng = seed | 1, fails = 0;
  for (uint64_t step = 0; step < steps; step++) {
    pl.n = ml.n = 0;
    uint64_t r = rng_next(&rng);
    if (nlive == MAXLIVE || (nlive && r % 100 < 45)) {
      int i = (int)(rng_next(&rng) % (uint64_t)nlive);
      /* A hint only: a prefetch of this free's record, of another live
       * one and of any offset at all changes no placement or event. */
      gpb_sim_prefetch(s, off[i]);
      gpb_sim_prefetch(s, off[(i + 1) % nlive]);
      gpb_sim_prefetch(s, rng_next(&rng));
      ASSERT_OK(gpb_free(p, ptr[i]));
      if (off[i] != GPB_NO_OFFSET) ASSERT_OK(gpb_sim_free(s, off[i], step));
      else ASSERT(ptr[i] == NULL);
      ptr[i] = ptr[--nlive];
      off[i] = off[nlive];
    } else {
      /* Log-uniform sizes from 1 byte to twice the pool (so some fail),
       * a few zero-size requests, some aligned ones. */
      uint64_t size = r % 50 == 0 ? 0 : 1ull << (rng_next(&rng) % 26);
      size += size ? rng_next(&rng) % size : 0;
      size_t align = r % 7 == 0 ? (size_t)1 << (rng_next(&rng) % 16) : 0;
      uint32_t tag = (uint32_t)(rng_next(&rng) % GPB_MAX_TAGS);
      void *q = NULL;
      uint64_t o = 0;
      int rp = gpb_alloc_ex(p, size, align, tag, NULL, &q);
      int rm = gpb_sim_alloc(s, size, align, tag, step, &o);
      if (rp != rm)
        FAILF("step %" PRIu64 ": size %" PRIu64 " align %zu: pool %s, model %s",
              step, size, align, gpb_err_name(rp), gpb_err_name(rm));
      if (rp == 0) {
        if (q == NULL) ASSERT_U64_EQ(o, GPB_NO_OFFSET);
        else ASSERT_U64_EQ(o, (uint64_t)((char *)q - (char *)info.base));
        ptr[nlive] = q;
        off[nlive] = o;
        nlive++;
      } else {
        ASSERT_U64_EQ(o, GPB_NO_OFFSET);
        fails++;
      }
    }
    if (hooked) events_same(&pl, &ml, step);
    ASSERT_OK(gpb_pool_check(p));
    ASSERT_OK(gpb_model_check(m));
  }
  test_pool_model_same(p, m);
  /* A simulated allocation carries the time it was given. */
  test_blocks_t mb = {0};
  ASSERT_OK(gpb_model_visit(m, test_collect_blocks, &mb));
  for (size_t i = 0; i < mb.n; i++)
    if (mb.b[i].used) ASSERT(mb.b[i].time_ns < steps);
  ASSERT(fails > 0); /* the run reached the pool's limits */
  free(mb.b);
  gpb_sim_destroy(s);
  gpb_pool_destroy(p);
}

static void test_differential(uint64_t seed) {
  uint64_t steps = (uint64_t)(4000 * test_scale());
  static const size_t sizes[] = {32 * MIB, 24 * MIB + 4096};
  for (int pol = 0; pol < GPB_NUM_POLICIES; pol++)
    for (int eager = 0; eager < 2; eager++)
      for (int z = 0; z < 2; z++) {
        gpb_config_t c;
        gpb_config_init(&c);
        c.backend = GPB_BACKEND_VIRTUAL;
        c.flags = GPB_CFG_NO_ENV | (eager ? GPB_CFG_EAGER_MERGE : 0);
        c.policy = (gpb_policy_t)pol;
        c.pool_size = sizes[z];
        c.min_block = z ? 4096 : 256;
        diff_run(&c, seed + (uint64_t)(pol * 4 + eager * 2 + z), steps, (z + pol) & 1);
      }
  printf("differential, 3 policies x eager/deferred merge x 2 shapes: ok\n");
}

static void test_misuse(void) {
  gpb_config_t c;
  gpb_config_init(&c);
  c.pool_size = 1 * MIB;
  gpb_sim_t *s;
  gpb_model_t *f;
  ASSERT_ERR(gpb_sim_create(&c, NULL), GPB_EINVAL);
  c.min_block = 100;
  ASSERT_ERR(gpb_sim_create(&c, &s), GPB_EINVAL);
  c.min_block = 256;
  c.policy = (gpb_policy_t)99;
  ASSERT_ERR(gpb_sim_create(&c, &s), GPB_EINVAL);
  c.policy = GPB_POLICY_BUDDY;
  c.pool_size = 100;
  ASSERT_ERR(gpb_sim_create(&c, &s), GPB_EINVAL);
  c.pool_size = 1 * MIB;
  ASSERT_OK(gpb_sim_create(&c, &s));
  const gpb_model_t *m = gpb_sim_model(s);
  ASSERT(m != NULL && gpb_sim_model(NULL) == NULL);
  ASSERT_OK(gpb_model_create(1 * MIB, 256, &f));

  uint64_t a, b, o;
  ASSERT_OK(gpb_sim_alloc(s, 1000, 0, 3, 10, &a));
  ASSERT_OK(gpb_sim_alloc(s, 256, 0, 0, 11, &b));
  gpb_stats_t before, after;
  ASSERT_OK(gpb_model_stats(m, &before));
  /* Size 0: success, nothing, no event. */
  ASSERT_OK(gpb_sim_alloc(s, 0, 0, 0, 12, &o));
  ASSERT_U64_EQ(o, GPB_NO_OFFSET);
  ASSERT_ERR(gpb_sim_alloc(s, 2 * MIB, 0, 0, 12, &o), GPB_ETOOBIG);
  ASSERT_U64_EQ(o, GPB_NO_OFFSET);
  ASSERT_ERR(gpb_sim_alloc(s, 64, 3000, 0, 12, &o), GPB_EALIGN);
  ASSERT_ERR(gpb_sim_alloc(s, 64, 2 * MIB, 0, 12, &o), GPB_EALIGN);
  ASSERT_ERR(gpb_sim_alloc(s, 64, 0, GPB_MAX_TAGS, 12, &o), GPB_EINVAL);
  ASSERT_ERR(gpb_sim_alloc(s, 64, 0, 0, 12, NULL), GPB_EINVAL);
  ASSERT_ERR(gpb_sim_free(s, a + 256, 12), GPB_EINTERIOR);
  ASSERT_ERR(gpb_sim_free(s, 1 * MIB, 12), GPB_EFOREIGN);
  ASSERT_ERR(gpb_sim_free(s, UINT64_MAX, 12), GPB_EFOREIGN);
  ASSERT_OK(gpb_model_stats(m, &after));
  ASSERT_U64_EQ(after.seq, before.seq + 1); /* the ETOOBIG request's FAIL */
  ASSERT_U64_EQ(after.failures, before.failures + 1);
  ASSERT_U64_EQ(after.block_bytes, before.block_bytes);
  ASSERT_OK(gpb_sim_free(s, b, 13));
  ASSERT_ERR(gpb_sim_free(s, b, 14), GPB_EDOUBLEFREE);
  ASSERT_OK(gpb_model_check(m));

  ASSERT_ERR(gpb_sim_alloc(NULL, 64, 0, 0, 0, &o), GPB_EINVAL);
  ASSERT_ERR(gpb_sim_free(NULL, 0, 0), GPB_EINVAL);
  ASSERT_ERR(gpb_sim_set_hook(NULL, log_event, NULL), GPB_EINVAL);
  /* The following model is another object: keyframes load into it. */
  gpb_block_info_t whole = {.offset = 0, .size = 1 * MIB, .order = 12};
  ASSERT_OK(gpb_model_load(f, &whole, 1, 1));
  ASSERT_OK(gpb_model_check(m));

  gpb_sim_prefetch(NULL, 0); /* a hint: NULL is ignored */
  /* Reserving: a hint for an empty simulator, nothing for one in use. */
  ASSERT_ERR(gpb_sim_reserve(NULL, 10), GPB_EINVAL);
  ASSERT_OK(gpb_sim_reserve(s, 1000)); /* in use: left as it is */
  ASSERT_OK(gpb_model_check(m));
  /* Reset: back to an empty pool, still simulating. */
  gpb_sim_reset(s);
  gpb_sim_reset(NULL);
  ASSERT_OK(gpb_sim_reserve(s, UINT64_MAX)); /* capped at one per block */
  ASSERT_OK(gpb_sim_reserve(s, 3000));
  ASSERT_U64_EQ(gpb_model_seq(m), 0);
  ASSERT_OK(gpb_sim_alloc(s, 1000, 0, 3, 10, &o));
  ASSERT_U64_EQ(o, a);
  ASSERT_OK(gpb_model_check(m));
  gpb_sim_destroy(s);
  gpb_sim_destroy(NULL);
  gpb_model_destroy(f);
  printf("misuse: ok\n");
}

/* gpb_sim_alloc_site: the site on the ALLOC, FREE and FAIL events and on
 * the block infos (the viewer colors and groups a replay's blocks by it);
 * gpb_sim_alloc is site 0. */
static void test_sites(void) {
  gpb_config_t c;
  gpb_config_init(&c);
  c.flags = GPB_CFG_NO_ENV;
  c.pool_size = 1 * MIB;
  c.min_block = 256;
  gpb_sim_t *s;
  ASSERT_OK(gpb_sim_create(&c, &s));
  evlog_t l = {0};
  ASSERT_OK(gpb_sim_set_hook(s, log_event, &l));
  uint64_t a, b, o;
  ASSERT_OK(gpb_sim_alloc_site(s, 1000, 0, 1, 7, 10, &a));
  ASSERT_EQ(l.ev[l.n - 1].type, GPB_EV_ALLOC);
  ASSERT_EQ(l.ev[l.n - 1].site, 7);
  ASSERT_OK(gpb_sim_alloc(s, 300, 0, 0, 11, &b));
  ASSERT_EQ(l.ev[l.n - 1].site, 0);
  ASSERT_ERR(gpb_sim_alloc_site(s, 2 * MIB, 0, 0, GPB_MAX_SITES, 12, &o),
             GPB_ETOOBIG);
  ASSERT_EQ(l.ev[l.n - 1].type, GPB_EV_FAIL);
  ASSERT_EQ(l.ev[l.n - 1].site, GPB_MAX_SITES);
  ASSERT_ERR(gpb_sim_alloc_site(s, 64, 0, 0, GPB_MAX_SITES + 1, 12, &o),
             GPB_EINVAL);
  gpb_block_info_t bi;
  ASSERT_OK(gpb_model_lookup(gpb_sim_model(s), a, &bi));
  ASSERT(bi.used && bi.site == 7);
  ASSERT_OK(gpb_model_lookup(gpb_sim_model(s), b, &bi));
  ASSERT(bi.used && bi.site == 0);
  l.n = 0;
  ASSERT_OK(gpb_sim_free(s, a, 13));
  ASSERT(l.n >= 1 && l.ev[0].type == GPB_EV_FREE && l.ev[0].site == 7);
  ASSERT_OK(gpb_model_check(gpb_sim_model(s)));
  gpb_sim_destroy(s);
  printf("sites: ok\n");
}

/* Best fit counts in place and leaves part of its free block counts
 * pending in the core until they are read: from its runs while they are
 * few, call by call past 512 runs. A hook set with counts pending must
 * lose none of them: nothing reads the counters in between here. n
 * allocations of up to `most` bytes, every other one freed, make about
 * n / 2 runs. */
static void test_pending_hook(int n, uint64_t most) {
  gpb_config_t c;
  gpb_config_init(&c);
  c.flags = GPB_CFG_NO_ENV;
  c.pool_size = 32 * MIB;
  c.min_block = 256;
  c.policy = GPB_POLICY_BESTFIT;
  gpb_sim_t *s;
  ASSERT_OK(gpb_sim_create(&c, &s));
  evlog_t l = {0};
  uint64_t *off = malloc((size_t)n * sizeof *off), rng = 3;
  ASSERT(off);
  for (int round = 0; round < 4; round++) {
    for (int i = 0; i < n; i++)
      ASSERT_OK(gpb_sim_alloc(s, 256 + rng_below(&rng, most), 0, 0,
                              (uint64_t)i, &off[i]));
    for (int i = 0; i < n; i += 2) ASSERT_OK(gpb_sim_free(s, off[i], 40));
    l.n = 0; /* the hook goes on at even rounds, off at odd ones */
    ASSERT_OK(gpb_sim_set_hook(s, round % 2 ? NULL : log_event, &l));
    ASSERT_OK(gpb_model_check(gpb_sim_model(s)));
    for (int i = 1; i < n; i += 2) ASSERT_OK(gpb_sim_free(s, off[i], 50));
    ASSERT_OK(gpb_model_check(gpb_sim_model(s)));
  }
  free(off);
  gpb_sim_destroy(s);
  printf("counts pending across a hook, %d allocations: ok\n", n);
}

int main(void) {
  uint64_t seed = test_seed();
  test_differential(seed);
  test_misuse();
  test_sites();
  test_pending_hook(32, 60000);
  test_pending_hook(3000, 2048);
  printf("test_sim: ok\n");
  return 0;
}
