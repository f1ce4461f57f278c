/* SPDX-License-Identifier: MIT */
/*
 * test_live_tick.c: the millisecond ticker that stamps a publisher-only
 * pool's events (clock.c). Allocation times never run ahead of the real
 * clock and catch up with it; one ticker thread serves every publisher
 * and goes away with the last; a forked child, which has no ticker, still
 * gets times that advance. How far a stamp lags depends on when the
 * ticker last ran, which a loaded machine stretches, so no lag is
 * asserted: waits are bounded by the hang guard only.
 */
#include "testutil.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MS ((uint64_t)1000000)

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Ticker threads in this process, by the name clock.c gives them (-1
 * where /proc is missing). Sanitizers add threads of their own, so no
 * total count. */
static int ticker_count(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[300], comm[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (fgets(comm, sizeof comm, f) && !strncmp(comm, "gpb-tick", 8)) n++;
    fclose(f);
  }
  closedir(d);
  return n;
}

typedef struct find {
  uint64_t off, time_ns;
  int found;
} find_t;

static int find_cb(const gpb_block_info_t *b, void *user) {
  find_t *f = user;
  if (b->used && b->alloc_offset == f->off) {
    f->time_ns = b->time_ns;
    f->found = 1;
  }
  return 0;
}

/* The time a pool recorded for the allocation at p. */
static uint64_t alloc_time(gpb_pool_t *pool, void *p) {
  gpb_pool_info_t info;
  gpb_pool_info(pool, &info);
  find_t f = {(uint64_t)((char *)p - (char *)info.base), 0, 0};
  ASSERT_OK(gpb_pool_visit(pool, find_cb, &f));
  ASSERT(f.found);
  return f.time_ns;
}

static gpb_pool_t *make_pool(const char *tag) {
  gpb_config_t c;
  gpb_config_init(&c);
  c.backend = GPB_BACKEND_HOST;
  c.pool_size = 1 << 20;
  c.flags = GPB_CFG_NO_ENV;
  char name[64];
  snprintf(name, sizeof name, "test-tick-%s-%d", tag, (int)getpid());
  c.name = name;
  gpb_pool_t *p;
  ASSERT_OK(gpb_pool_create(&c, &p));
  return p;
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* An allocation's time is a CLOCK_MONOTONIC (or coarse) reading from the
 * past, so never after a reading taken after the call; and the stamps
 * catch up: allocating again (a millisecond apart) until one is stamped
 * at or after a reading taken before the first call. *out is that
 * allocation; the ones before it are freed. */
static void check_stamp(gpb_pool_t *pool, void **out) {
  uint64_t before = mono_ns(), start = gpb_now_ns();
  for (;;) {
    ASSERT_OK(gpb_alloc(pool, 1000, out));
    uint64_t after = mono_ns(), t = alloc_time(pool, *out);
    if (t > after)
      FAILF("allocation stamped %" PRIu64 " ns, after the clock read %" PRIu64,
            t, after);
    if (t >= before) return;
    ASSERT_OK(gpb_free(pool, *out));
    TEST_HANG_GUARD(start, "stamps stuck at %" PRIu64 " ns, the clock at %"
                    PRIu64, t, after);
    sleep_ms(1);
  }
}

/* Until no ticker thread is listed: the join returns when the thread has
 * run its last instruction, and the kernel may list it a little longer. */
static void wait_no_ticker(void) {
  for (uint64_t t0 = gpb_now_ns(); ticker_count() != 0;) {
    TEST_HANG_GUARD(t0, "%d ticker threads still listed", ticker_count());
    sleep_ms(5);
  }
}

/* Publishers come and go from several threads at once: a hold racing a
 * drop must never leave a second ticker behind. */
static void *churn_publishers(void *arg) {
  char tag[32];
  for (int i = 0; i < 40; i++) {
    snprintf(tag, sizeof tag, "r%d-%d", (int)(intptr_t)arg, i);
    gpb_pool_t *p = make_pool(tag);
    void *q;
    ASSERT_OK(gpb_alloc(p, 100, &q));
    gpb_pool_destroy(p);
  }
  return NULL;
}

static void test_hold_drop_race(int t0) {
  pthread_t th[4];
  for (int i = 0; i < 4; i++)
    ASSERT(pthread_create(&th[i], NULL, churn_publishers, (void *)(intptr_t)i) == 0);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  if (t0 == 0) wait_no_ticker();
  printf("publishers opened and closed from 4 threads: ok\n");
}

int main(void) {
  int t0 = ticker_count(); /* -1: no /proc, 0: none yet */
  gpb_pool_t *a = make_pool("a");
  void *p1, *p2, *p3, *p4;
  check_stamp(a, &p1);
  sleep_ms(30);
  check_stamp(a, &p2);
  /* p1's stamp is before a reading taken before the sleep, p2's after
   * one taken after it: ordering, not a measured lag. */
  uint64_t d = alloc_time(a, p2) - alloc_time(a, p1);
  if (alloc_time(a, p2) <= alloc_time(a, p1))
    FAILF("across a 30 ms sleep, stamps went from %" PRIu64 " to %" PRIu64,
          alloc_time(a, p1), alloc_time(a, p2));
  printf("stamps follow the clock: ok (%" PRIu64 " ms apart)\n", d / MS);

  gpb_pool_t *b = make_pool("b");
  if (t0 == 0) ASSERT_EQ(ticker_count(), 1); /* one for both publishers */
  check_stamp(b, &p3);

  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    /* The child inherits the pools but no ticker: times still advance. */
    void *c1, *c2;
    check_stamp(a, &c1);
    sleep_ms(30);
    check_stamp(a, &c2);
    if (alloc_time(a, c2) <= alloc_time(a, c1)) _exit(3);
    gpb_pool_destroy(b); /* must not stop the parent's ticker */
    gpb_pool_destroy(a);
    _exit(0);
  }
  int st;
  ASSERT(waitpid(pid, &st, 0) == pid);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    FAILF("forked child failed (status %d)", st);
  printf("forked child: ok\n");

  gpb_pool_destroy(a);
  sleep_ms(5);
  check_stamp(b, &p4); /* b's ticker survives a's close */
  if (t0 == 0) ASSERT_EQ(ticker_count(), 1);
  gpb_pool_destroy(b);
  if (t0 == 0) {
    wait_no_ticker();
    printf("ticker gone with the last publisher: ok\n");
  }
  /* A new publisher starts it again. */
  gpb_pool_t *c = make_pool("c");
  void *q1, *q2;
  check_stamp(c, &q1);
  sleep_ms(30);
  check_stamp(c, &q2);
  ASSERT(alloc_time(c, q2) > alloc_time(c, q1));
  gpb_pool_destroy(c);
  test_hold_drop_race(t0);
  printf("test_live_tick: ok\n");
  return 0;
}
