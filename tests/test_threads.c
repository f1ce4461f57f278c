/* SPDX-License-Identifier: MIT */
/*
 * test_threads.c: many threads allocate from one host pool at once, write
 * a per-thread pattern into every byte of their blocks, verify it and free.
 * A block handed to two threads at once shows up as a broken pattern. Run
 * under TSan in CI.
 */
#include "testutil.h"

#include <pthread.h>

#define NTHREADS 8

typedef struct worker {
  gpb_pool_t *pool;
  uint64_t seed;
  int id;
  long ops;
  long ooms;
} worker_t;

static void *work(void *arg) {
  worker_t *w = arg;
  uint64_t rng = w->seed;
  struct { unsigned char *p; size_t n; } held[32];
  int nheld = 0;
  unsigned char pat = (unsigned char)(0x11 * (w->id + 1));
  for (long i = 0; i < w->ops; i++) {
    if (nheld < 32 && (nheld == 0 || rng_below(&rng, 2))) {
      size_t n = 1 + rng_below(&rng, 1u << (1 + rng_below(&rng, 16)));
      void *p;
      int rc = gpb_alloc_tagged(w->pool, n, (uint32_t)w->id, &p);
      if (rc == GPB_ENOMEM) {
        w->ooms++;
        continue;
      }
      if (rc) FAILF("thread %d: alloc: %s", w->id, gpb_strerror(rc));
      memset(p, pat, n);
      held[nheld].p = p;
      held[nheld++].n = n;
    } else {
      int j = (int)rng_below(&rng, (uint64_t)nheld);
      for (size_t b = 0; b < held[j].n; b++)
        if (held[j].p[b] != pat)
          FAILF("thread %d: byte %zu of a block was overwritten", w->id, b);
      ASSERT_OK(gpb_free(w->pool, held[j].p));
      held[j] = held[--nheld];
    }
  }
  while (nheld) ASSERT_OK(gpb_free(w->pool, held[--nheld].p));
  return NULL;
}

static void count_hook(const gpb_event_t *ev, void *user) {
  (void)ev;
  ++*(uint64_t *)user; /* called under the pool's lock: no race */
}

/* arenas: 1 is one lock; more gives each thread an arena, at once with
 * `flags` GPB_CFG_ARENAS_EAGER, else from the first time two workers
 * meet on the pool's lock, mid-run. With `toggle`
 * the main thread attaches and detaches a hook, and reads stats and
 * checks the pool, while the workers run: arenas switch between counting
 * on their own and feeding the pool's ordered stream under them. A small
 * pool runs out, so superblocks move and get reclaimed between arenas. */
static void run(uint64_t seed, size_t pool_size, uint32_t arenas,
                unsigned flags, int toggle) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.flags = GPB_CFG_NO_ENV | flags;
  cfg.backend = GPB_BACKEND_HOST;
  cfg.pool_size = pool_size;
  cfg.arenas = arenas;
  gpb_pool_t *pool;
  ASSERT_OK(gpb_pool_create(&cfg, &pool));
  pthread_t th[NTHREADS];
  worker_t w[NTHREADS];
  long ops = (long)(20000 * test_scale());
  for (int i = 0; i < NTHREADS; i++) {
    w[i] = (worker_t){pool, seed + (uint64_t)i * 7919u, i, ops, 0};
    ASSERT_EQ(pthread_create(&th[i], NULL, work, &w[i]), 0);
  }
  uint64_t hooked = 0;
  for (int i = 0; toggle && i < 50; i++) {
    ASSERT_OK(gpb_pool_set_hook(pool, i % 2 ? NULL : count_hook, &hooked));
    gpb_stats_t s;
    ASSERT_OK(gpb_pool_stats(pool, &s));
    ASSERT_U64_EQ(s.free_bytes + s.block_bytes, cfg.pool_size);
    ASSERT_OK(gpb_pool_check(pool));
  }
  ASSERT_OK(gpb_pool_set_hook(pool, NULL, NULL));
  long ooms = 0;
  for (int i = 0; i < NTHREADS; i++) {
    pthread_join(th[i], NULL);
    ooms += w[i].ooms;
  }
  ASSERT_OK(gpb_pool_check(pool));
  ASSERT_OK(gpb_pool_coalesce(pool));
  ASSERT_OK(gpb_pool_check(pool));
  gpb_stats_t s;
  ASSERT_OK(gpb_pool_stats(pool, &s));
  ASSERT_U64_EQ(s.live_allocs, 0);
  ASSERT_U64_EQ(s.free_bytes, cfg.pool_size);
  ASSERT_U64_EQ(s.allocs, s.frees);
  gpb_pool_info_t info;
  ASSERT_OK(gpb_pool_info(pool, &info));
  printf("%d threads, %u arena(s)%s: %" PRIu64 " allocations, %ld out-of-"
         "memory, %" PRIu64 " events seen by the hook, pool intact\n",
         NTHREADS, info.num_arenas, toggle ? ", hook toggled" : "", s.allocs,
         ooms, hooked);
  gpb_pool_destroy(pool);
}

int main(void) {
  uint64_t seed = test_seed();
  run(seed, 32 << 20, 1, 0, 0);
  run(seed, 32 << 20, 4, 0, 0);
  run(seed, 32 << 20, 8, GPB_CFG_ARENAS_EAGER, 1);
  run(seed, 32 << 20, 8, 0, 1);
  /* Short of memory: arenas borrow, give back and reclaim under pressure. */
  run(seed, 1 << 20, 4, GPB_CFG_ARENAS_EAGER, 1);
  run(seed, 1 << 20, 4, 0, 1);
  return 0;
}
