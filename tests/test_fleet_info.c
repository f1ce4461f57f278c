/* SPDX-License-Identifier: MIT */
/*
 * test_fleet_info.c: what the fleet's metrics label and plot, from the
 * pool to a live reader: the rank (the RANK environment variable at the
 * pool's creation, as torchrun sets it; -1 when unset or not a rank) and
 * the latest failed request's size (gpb_stats_t.last_failed_request),
 * which a reader gets from a keyframe (attached after the failure) and
 * from the event stream (a failure while attached).
 */
#include "testutil.h"

#include <stdlib.h>
#include <unistd.h>

static gpb_pool_t *make(const char *name) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_HOST;
  cfg.pool_size = 1 << 20;
  cfg.min_block = 256;
  cfg.name = name;
  cfg.flags = GPB_CFG_NO_ENV;
  gpb_pool_t *p;
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  return p;
}

static int32_t rank_with(const char *value) {
  if (value) setenv("RANK", value, 1);
  else unsetenv("RANK");
  gpb_pool_t *p = make(NULL);
  gpb_pool_info_t in;
  ASSERT_OK(gpb_pool_info(p, &in));
  gpb_pool_destroy(p);
  return in.rank;
}

/* Polls until the reader's model has seen the writer's event seq. */
static void sync_to(gpb_attach_t *a, gpb_pool_t *p, gpb_stats_t *got) {
  gpb_stats_t want;
  ASSERT_OK(gpb_pool_stats(p, &want));
  for (int i = 0; i < 2000; i++) {
    int rc = gpb_attach_poll(a);
    ASSERT(rc >= 0);
    if (gpb_model_stats(gpb_attach_model(a), got) == 0 && got->seq == want.seq)
      return;
    usleep(1000);
  }
  FAILF("the reader never reached event %llu", (unsigned long long)want.seq);
}

int main(void) {
  ASSERT_EQ(rank_with(NULL), -1);
  ASSERT_EQ(rank_with("0"), 0);
  ASSERT_EQ(rank_with("12"), 12);
  ASSERT_EQ(rank_with("-1"), -1);
  ASSERT_EQ(rank_with(" 3"), -1);
  ASSERT_EQ(rank_with("3x"), -1);
  ASSERT_EQ(rank_with("99999999999"), -1);

  char name[64];
  snprintf(name, sizeof name, "gpb-fleet-info-%d", (int)getpid());
  setenv("RANK", "5", 1);
  gpb_pool_t *p = make(name);
  gpb_stats_t st;
  ASSERT_OK(gpb_pool_stats(p, &st));
  ASSERT_U64_EQ(st.last_failed_request, 0);
  void *a, *b;
  ASSERT_OK(gpb_alloc(p, 512 << 10, &a));
  ASSERT_ERR(gpb_alloc(p, 768 << 10, &b), GPB_ENOMEM);
  ASSERT_OK(gpb_pool_stats(p, &st));
  ASSERT_U64_EQ(st.last_failed_request, 768 << 10);
  ASSERT(st.last_failed_request > st.largest_free);

  /* Attached after the failure: the keyframe carries it. */
  gpb_attach_t *r;
  ASSERT_OK(gpb_attach_open(name, &r));
  gpb_pool_info_t in;
  ASSERT_OK(gpb_attach_info(r, &in));
  ASSERT_EQ(in.rank, 5);
  ASSERT_OK(gpb_alloc(p, 256, &b)); /* an idle writer's keyframe comes now */
  gpb_stats_t got;
  sync_to(r, p, &got);
  ASSERT_U64_EQ(got.last_failed_request, 768 << 10);
  /* A failure while attached: the FAIL event carries it. */
  ASSERT_ERR(gpb_alloc(p, 1 << 20, &b), GPB_ENOMEM);
  sync_to(r, p, &got);
  ASSERT_U64_EQ(got.last_failed_request, 1 << 20);
  gpb_attach_close(r);
  gpb_pool_destroy(p);
  unsetenv("RANK");
  printf("fleet info: rank and the latest failed request, pool to reader\n");
  return 0;
}
