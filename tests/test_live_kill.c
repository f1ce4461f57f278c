/* SPDX-License-Identifier: MIT */
/*
 * test_live_kill.c: writers that die, names that are taken.
 *
 *  - A child publishes and churns; the parent attaches, then kills it with
 *    SIGKILL. Polling must end in GPB_ECLOSED (the reader checks that the
 *    writer lives now and then), the model must keep a consistent state,
 *    gpb_list_pools must skip the dead pool, and a new pool must be able to
 *    take the name over.
 *  - While a live pool holds a name, another process gets GPB_EBUSY.
 *  - Bad names are refused; a name nobody publishes gives GPB_ENOTFOUND.
 *  - gpb_pool_destroy unlinks the segment; a reader gets GPB_ECLOSED and
 *    keeps the last state, which equals the pool's.
 */
#include "testutil.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char g_name[64];

static void nap_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

static int g_listed;
static void list_cb(const char *name, void *user) {
  (void)user;
  if (!strcmp(name, g_name)) g_listed++;
}

static gpb_pool_t *make_pool(const char *name, int *rc) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_HOST;
  cfg.pool_size = (size_t)4 << 20;
  cfg.name = name;
  cfg.flags = GPB_CFG_NO_ENV;
  gpb_pool_t *p = NULL;
  *rc = gpb_pool_create(&cfg, &p);
  return p;
}

static void churn(gpb_pool_t *pool, uint64_t *rng, void **live, int nlive,
                  int ops) {
  for (int i = 0; i < ops; i++) {
    int k = (int)rng_below(rng, (uint64_t)nlive);
    if (live[k]) {
      ASSERT_OK(gpb_free(pool, live[k]));
      live[k] = NULL;
    } else {
      (void)gpb_alloc(pool, 1 + rng_below(rng, 65536), &live[k]);
    }
  }
}

typedef struct cmp {
  const gpb_model_t *m;
  uint64_t n, bad;
} cmp_t;

static int cmp_block(const gpb_block_info_t *b, void *user) {
  cmp_t *c = user;
  gpb_block_info_t mb;
  if (gpb_model_lookup(c->m, b->offset, &mb) != 0 || mb.offset != b->offset ||
      mb.order != b->order || mb.used != b->used ||
      mb.requested != b->requested)
    c->bad++;
  c->n++;
  return 0;
}

int main(void) {
  uint64_t seed = test_seed(), rng = seed | 1;
  snprintf(g_name, sizeof g_name, "t-kill-%d", (int)getpid());
  gpb_attach_t *a;

  /* Names. */
  ASSERT_ERR(gpb_attach_open("a/b", &a), GPB_EINVAL);
  ASSERT_ERR(gpb_attach_open("..", &a), GPB_EINVAL);
  ASSERT_ERR(gpb_attach_open("", &a), GPB_EINVAL);
  char longname[100];
  memset(longname, 'x', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  ASSERT_ERR(gpb_attach_open(longname, &a), GPB_EINVAL);
  int rc;
  ASSERT(make_pool("bad/name", &rc) == NULL);
  ASSERT_EQ(rc, GPB_EINVAL);
  ASSERT_ERR(gpb_attach_open(g_name, &a), GPB_ENOTFOUND);

  /* A writer killed with SIGKILL. */
  int ready[2];
  ASSERT(pipe(ready) == 0);
  fflush(stdout);
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    close(ready[0]);
    gpb_pool_t *p = make_pool(g_name, &rc);
    if (!p) _exit(2);
    char r = 'R';
    if (write(ready[1], &r, 1) != 1) _exit(3);
    void *live[256] = {0};
    for (;;) {
      churn(p, &rng, live, 256, 1000);
      nap_ms(1);
    }
  }
  close(ready[1]);
  char r;
  ASSERT(read(ready[0], &r, 1) == 1);
  close(ready[0]);
  ASSERT_OK(gpb_attach_open(g_name, &a));
  for (int i = 0; i < 30; i++) {
    ASSERT(gpb_attach_poll(a) >= 0);
    nap_ms(2);
  }
  g_listed = 0;
  ASSERT_OK(gpb_list_pools(list_cb, NULL));
  ASSERT_EQ(g_listed, 1);
  ASSERT(kill(pid, SIGKILL) == 0);
  int st;
  ASSERT(waitpid(pid, &st, 0) == pid);
  ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  uint64_t t0 = gpb_now_ns();
  while ((rc = gpb_attach_poll(a)) >= 0) {
    TEST_HANG_GUARD(t0, "no GPB_ECLOSED after SIGKILL");
    nap_ms(10);
  }
  ASSERT_EQ(rc, GPB_ECLOSED);
  printf("after SIGKILL: %s\n", gpb_last_error_detail());
  ASSERT_ERR(gpb_attach_poll(a), GPB_ECLOSED); /* and it stays so */
  const gpb_model_t *m = gpb_attach_model(a);
  ASSERT(gpb_model_seq(m) > 0);
  gpb_stats_t s;
  ASSERT_OK(gpb_model_stats(m, &s));
  ASSERT(s.free_bytes + s.block_bytes == s.managed_bytes);
  gpb_attach_close(a);
  /* The stale segment is still in /dev/shm but is not listed... */
  g_listed = 0;
  ASSERT_OK(gpb_list_pools(list_cb, NULL));
  ASSERT_EQ(g_listed, 0);
  /* ...and a reader attaching to it learns at once that it is dead. */
  if (gpb_attach_open(g_name, &a) == 0) {
    while ((rc = gpb_attach_poll(a)) > 0) {
    }
    ASSERT_EQ(rc, GPB_ECLOSED);
    gpb_attach_close(a);
  }

  /* A new pool takes the name over. */
  gpb_pool_t *pool = make_pool(g_name, &rc);
  ASSERT_OK(rc);
  g_listed = 0;
  ASSERT_OK(gpb_list_pools(list_cb, NULL));
  ASSERT_EQ(g_listed, 1);

  /* A live writer holds it: another process gets GPB_EBUSY. */
  fflush(stdout);
  pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    gpb_pool_t *p = make_pool(g_name, &rc);
    _exit(p == NULL && rc == GPB_EBUSY ? 0 : 1);
  }
  ASSERT(waitpid(pid, &st, 0) == pid);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  /* ... and so does this process. */
  ASSERT(make_pool(g_name, &rc) == NULL);
  ASSERT_EQ(rc, GPB_EBUSY);

  /* Destroy: GPB_ECLOSED, and the reader keeps the pool's last state. */
  ASSERT_OK(gpb_attach_open(g_name, &a));
  void *live[128] = {0};
  churn(pool, &rng, live, 128, 3000);
  while ((rc = gpb_attach_poll(a)) > 0) {
  }
  ASSERT_EQ(rc, 0);
  cmp_t c = {gpb_attach_model(a), 0, 0};
  ASSERT_OK(gpb_pool_visit(pool, cmp_block, &c));
  ASSERT_U64_EQ(c.bad, 0);
  ASSERT(c.n > 1);
  gpb_stats_t ps;
  ASSERT_OK(gpb_pool_stats(pool, &ps));
  gpb_pool_destroy(pool);
  ASSERT_ERR(gpb_attach_poll(a), GPB_ECLOSED);
  printf("after destroy: %s\n", gpb_last_error_detail());
  ASSERT_OK(gpb_model_check(gpb_attach_model(a)));
  ASSERT_OK(gpb_model_stats(gpb_attach_model(a), &s));
  ASSERT_U64_EQ(s.seq, ps.seq);
  ASSERT_U64_EQ(s.block_bytes, ps.block_bytes);
  ASSERT_U64_EQ(s.allocs, ps.allocs);
  gpb_attach_close(a);
  ASSERT_ERR(gpb_attach_open(g_name, &a), GPB_ENOTFOUND);
  printf("ok\n");
  return 0;
}
