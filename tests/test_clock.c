/* SPDX-License-Identifier: MIT */
/*
 * test_clock.c: gpb_now_ns, the clock events are stamped with. On x86-64
 * it reads the TSC once calibrated (lib/base/clock.c). Checks, in four threads
 * at once: it never goes back, it tracks CLOCK_MONOTONIC within 5 ms
 * before, during and after calibration (and past a re-anchor), and elapsed
 * times agree with CLOCK_MONOTONIC's within 2%. A clock, not a speed: no
 * figure here depends on how fast anything runs. Runs under TSan in CI.
 */
#include "testutil.h"

#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void check_near(uint64_t before, uint64_t got, uint64_t after) {
  /* got was read between before and after, give or take 5 ms (a loaded
   * machine, or a sanitizer, can skew the rate measured). */
  if (got + 5000000 < before || got > after + 5000000)
    FAILF("gpb_now_ns %" PRIu64 " outside [%" PRIu64 ", %" PRIu64 "] by more "
          "than 5 ms", got, before, after);
}

static void *work(void *arg) {
  (void)arg;
  uint64_t last = 0, m0 = mono(), g0 = gpb_now_ns();
  /* 60 ms of calls: through calibration (the first 20 ms) and beyond. */
  while (mono() - m0 < 60000000) {
    uint64_t b = mono(), g = gpb_now_ns(), a = mono();
    if (g < last) FAILF("went back: %" PRIu64 " after %" PRIu64, g, last);
    check_near(b, g, a);
    last = g;
  }
  struct timespec nap = {0, 20000000};
  nanosleep(&nap, NULL);
  uint64_t m1 = mono(), g1 = gpb_now_ns();
  double dm = (double)(m1 - m0), dg = (double)(g1 - g0);
  if (dg < dm * 0.98 - 5e6 || dg > dm * 1.02 + 5e6)
    FAILF("elapsed %.0f ns by gpb_now_ns, %.0f ns by CLOCK_MONOTONIC", dg, dm);
  return NULL;
}

/* GPB_CLOCK=bogus is named on stderr once (it was ignored in silence),
 * in a child whose clock has not been read yet. x86-64 only: elsewhere
 * there is no TSC path to choose. */
static void bogus_env(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  int fd[2];
  ASSERT(pipe(fd) == 0);
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    dup2(fd[1], 2);
    setenv("GPB_CLOCK", "bogus", 1);
    for (int i = 0; i < 3; i++) (void)gpb_now_ns();
    _exit(0);
  }
  close(fd[1]);
  char buf[512];
  size_t n = 0;
  ssize_t k;
  while (n < sizeof buf - 1 && (k = read(fd[0], buf + n, sizeof buf - 1 - n)) > 0)
    n += (size_t)k;
  buf[n] = 0;
  close(fd[0]);
  int st;
  ASSERT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  const char *at = strstr(buf, "GPB_CLOCK=bogus");
  if (!at || strstr(at + 1, "GPB_CLOCK=bogus"))
    FAILF("GPB_CLOCK=bogus: want one line naming it, got '%s'", buf);
  printf("GPB_CLOCK=bogus: %s", buf);
#endif
}

int main(void) {
  bogus_env();
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, work, NULL);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  /* Past a re-anchor (once a second): still near and still monotonic. */
  uint64_t last = gpb_now_ns(), m0 = mono();
  while (mono() - m0 < 1200000000ull) {
    uint64_t b = mono(), g = gpb_now_ns(), a = mono();
    if (g < last) FAILF("went back after a re-anchor");
    check_near(b, g, a);
    last = g;
    struct timespec nap = {0, 1000000};
    nanosleep(&nap, NULL);
  }
  printf("gpb_now_ns tracked CLOCK_MONOTONIC in 5 threads\n");
  return 0;
}
