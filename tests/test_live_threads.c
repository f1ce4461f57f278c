/* SPDX-License-Identifier: MIT */
/*
 * test_live_threads.c: readers and a writer in one process, for TSan.
 *
 * Writer threads churn a named pool while a reader thread attaches,
 * polls, detaches and attaches again, with a small ring (so it falls
 * behind and resyncs) half of the time. When the writers have stopped, the
 * last reader catches up (the main thread makes one failing allocation if
 * a keyframe is needed) and its map must equal gpb_pool_visit's.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#define NWRITERS 2

static char g_name[64];
static gpb_pool_t *g_pool;
static atomic_int g_stop;
static uint64_t g_seed;
static int g_ops;

static void nap_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static void *writer(void *arg) {
  uint64_t rng = g_seed ^ (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ull;
  rng |= 1;
  void *live[128] = {0};
  for (int i = 0; i < g_ops && !atomic_load(&g_stop); i++) {
    int k = (int)rng_below(&rng, 128);
    if (live[k]) {
      ASSERT_OK(gpb_free(g_pool, live[k]));
      live[k] = NULL;
    } else {
      (void)gpb_alloc_tagged(g_pool, 1 + rng_below(&rng, 32768),
                             (uint32_t)rng_below(&rng, 4), &live[k]);
    }
  }
  /* Half the blocks stay allocated, so the final map is not trivial. */
  for (int k = 0; k < 128; k += 2)
    if (live[k]) ASSERT_OK(gpb_free(g_pool, live[k]));
  return NULL;
}

typedef struct rstate {
  uint64_t events, resyncs;
  int attaches;
} rstate_t;

static void hook(const gpb_event_t *ev, void *user) {
  rstate_t *s = user;
  if (ev) s->events++;
  else s->resyncs++;
}

static void *reader(void *arg) {
  rstate_t *s = arg;
  while (!atomic_load(&g_stop)) {
    gpb_attach_t *a;
    ASSERT_OK(gpb_attach_open(g_name, &a));
    ASSERT_OK(gpb_attach_set_hook(a, hook, s));
    s->attaches++;
    for (int i = 0; i < 10 && !atomic_load(&g_stop); i++) {
      int rc = gpb_attach_poll(a);
      if (rc < 0) FAILF("poll: %s: %s", gpb_err_name(rc), gpb_last_error_detail());
      nap_us(100);
    }
    gpb_attach_close(a);
  }
  return NULL;
}

typedef struct cmp {
  const gpb_model_t *m;
  uint64_t n, bad;
} cmp_t;

static int cmp_block(const gpb_block_info_t *b, void *user) {
  cmp_t *c = user;
  gpb_block_info_t mb;
  if (gpb_model_lookup(c->m, b->offset, &mb) != 0 || mb.offset != b->offset ||
      mb.order != b->order || mb.used != b->used || mb.tag != b->tag ||
      mb.alloc_offset != b->alloc_offset || mb.requested != b->requested ||
      mb.time_ns != b->time_ns)
    c->bad++;
  c->n++;
  return 0;
}

static void run(int small_ring) {
  if (small_ring) setenv("GPB_PUBLISH_RING", "128", 1);
  else unsetenv("GPB_PUBLISH_RING");
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_HOST;
  cfg.pool_size = (size_t)8 << 20;
  cfg.name = g_name;
  cfg.flags = GPB_CFG_NO_ENV;
  ASSERT_OK(gpb_pool_create(&cfg, &g_pool));
  atomic_store(&g_stop, 0);
  pthread_t w[NWRITERS], r;
  rstate_t rs = {0, 0, 0};
  ASSERT(pthread_create(&r, NULL, reader, &rs) == 0);
  for (int i = 0; i < NWRITERS; i++)
    ASSERT(pthread_create(&w[i], NULL, writer, (void *)(uintptr_t)(i + 1)) == 0);
  for (int i = 0; i < NWRITERS; i++) pthread_join(w[i], NULL);
  atomic_store(&g_stop, 1);
  pthread_join(r, NULL);

  /* Quiescent: a fresh reader must reach the pool's exact state. */
  gpb_attach_t *a;
  ASSERT_OK(gpb_attach_open(g_name, &a));
  gpb_stats_t ps, ms;
  for (uint64_t t0 = gpb_now_ns();;) {
    while (gpb_attach_poll(a) > 0) {
    }
    ASSERT_OK(gpb_pool_stats(g_pool, &ps));
    if (gpb_model_seq(gpb_attach_model(a)) == ps.seq) break;
    TEST_HANG_GUARD(t0, "a fresh reader never reached the pool's seq");
    void *p; /* a FAIL event: the writer serves the requested keyframe */
    ASSERT_ERR(gpb_alloc(g_pool, cfg.pool_size * 2, &p), GPB_ETOOBIG);
    nap_us(2000);
  }
  ASSERT_OK(gpb_model_check(gpb_attach_model(a)));
  cmp_t c = {gpb_attach_model(a), 0, 0};
  ASSERT_OK(gpb_pool_visit(g_pool, cmp_block, &c));
  ASSERT_U64_EQ(c.bad, 0);
  ASSERT_OK(gpb_model_stats(gpb_attach_model(a), &ms));
  ASSERT_U64_EQ(ms.block_bytes, ps.block_bytes);
  ASSERT_U64_EQ(ms.requested_bytes, ps.requested_bytes);
  ASSERT_U64_EQ(ms.allocs, ps.allocs);
  ASSERT_U64_EQ(ms.frees, ps.frees);
  ASSERT_U64_EQ(ms.failures, ps.failures);
  ASSERT_U64_EQ(ms.live_allocs, ps.live_allocs);
  printf("ring %s: %d attaches, %" PRIu64 " events, %" PRIu64
         " resyncs; final map of %" PRIu64 " blocks matches at event %" PRIu64
         "\n", small_ring ? "128" : "default", rs.attaches, rs.events,
         rs.resyncs, c.n, ps.seq);
  gpb_attach_close(a);
  gpb_pool_destroy(g_pool);
}

int main(void) {
  g_seed = test_seed();
  g_ops = (int)(20000 * test_scale()) + 1000;
  snprintf(g_name, sizeof g_name, "t-thr-%d", (int)getpid());
  run(0);
  run(1);
  printf("ok\n");
  return 0;
}
