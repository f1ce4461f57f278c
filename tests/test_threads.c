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

int main(void) {
  uint64_t seed = test_seed();
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.flags = GPB_CFG_NO_ENV;
  cfg.backend = GPB_BACKEND_HOST;
  cfg.pool_size = 32 << 20;
  gpb_pool_t *pool;
  ASSERT_OK(gpb_pool_create(&cfg, &pool));
  pthread_t th[NTHREADS];
  worker_t w[NTHREADS];
  long ops = (long)(20000 * test_scale());
  for (int i = 0; i < NTHREADS; i++) {
    w[i] = (worker_t){pool, seed + (uint64_t)i * 7919u, i, ops, 0};
    ASSERT_EQ(pthread_create(&th[i], NULL, work, &w[i]), 0);
  }
  long ooms = 0;
  for (int i = 0; i < NTHREADS; i++) {
    pthread_join(th[i], NULL);
    ooms += w[i].ooms;
  }
  ASSERT_OK(gpb_pool_check(pool));
  gpb_stats_t s;
  ASSERT_OK(gpb_pool_stats(pool, &s));
  ASSERT_U64_EQ(s.live_allocs, 0);
  ASSERT_U64_EQ(s.free_bytes, cfg.pool_size);
  ASSERT_U64_EQ(s.allocs, s.frees);
  printf("%d threads, %" PRIu64 " allocations, %ld out-of-memory, pool intact\n",
         NTHREADS, s.allocs, ooms);
  gpb_pool_destroy(pool);
  return 0;
}
