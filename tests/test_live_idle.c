/* SPDX-License-Identifier: MIT */
/*
 * test_live_idle.c: a reader that attaches to a writer which has gone idle
 * (long after its ring wrapped) still gets the full current state, from
 * the keyframe the writer leaves every half ring plus the events after it,
 * without the writer doing anything more.
 */
#include "testutil.h"

#include <unistd.h>

int main(void) {
  uint64_t seed = test_seed(), rng = seed;
  char name[64];
  snprintf(name, sizeof name, "gpb-test-idle-%d", (int)getpid());
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.flags = GPB_CFG_NO_ENV;
  cfg.backend = GPB_BACKEND_HOST;
  cfg.pool_size = 8 << 20;
  cfg.name = name;
  gpb_pool_t *pool;
  ASSERT_OK(gpb_pool_create(&cfg, &pool));
  void *live[256] = {0};
  for (int i = 0; i < 40000; i++) { /* the default ring (16384) wraps */
    int j = (int)rng_below(&rng, 256);
    if (live[j]) {
      ASSERT_OK(gpb_free(pool, live[j]));
      live[j] = NULL;
    } else if (gpb_alloc(pool, 1 + rng_below(&rng, 20000), &live[j]) != 0) {
      live[j] = NULL;
    }
  }
  /* The writer is idle from here on: no more calls into the pool. */
  gpb_attach_t *a;
  ASSERT_OK(gpb_attach_open(name, &a));
  int rc = 0;
  for (uint64_t t0 = gpb_now_ns();; usleep(10000)) {
    TEST_HANG_GUARD(t0, "the late reader never reached the pool's seq");
    rc = gpb_attach_poll(a);
    if (rc < 0 && rc != GPB_EAGAIN) FAILF("poll: %s: %s", gpb_err_name(rc), gpb_last_error_detail());
    gpb_stats_t ps;
    gpb_pool_stats(pool, &ps);
    if (gpb_model_seq(gpb_attach_model(a)) == ps.seq) break;
  }
  gpb_stats_t ps, ms;
  ASSERT_OK(gpb_pool_stats(pool, &ps));
  ASSERT_OK(gpb_model_stats(gpb_attach_model(a), &ms));
  ASSERT_U64_EQ(ms.seq, ps.seq);
  test_blocks_t x = {0}, y = {0};
  ASSERT_OK(gpb_pool_visit(pool, test_collect_blocks, &x));
  ASSERT_OK(gpb_model_visit(gpb_attach_model(a), test_collect_blocks, &y));
  test_blocks_same(&x, &y); /* layout and records; times are the pool's */
  ASSERT_U64_EQ(ms.free_bytes, ps.free_bytes);
  printf("idle writer: late reader got all %zu blocks at seq %" PRIu64 "\n", x.n, ps.seq);
  gpb_attach_close(a);
  free(x.b);
  free(y.b);
  gpb_pool_destroy(pool);
  return 0;
}
