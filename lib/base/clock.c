/* SPDX-License-Identifier: MIT */
/*
 * clock.c: the timestamps events carry.
 *
 * Reading CLOCK_MONOTONIC costs 20-30 ns through the vDSO, and in a VM
 * often more; a pool with a consumer reads it on every call, which was
 * most of the cost of publishing live. On x86-64 with an invariant TSC the
 * clock is instead the TSC, converted with a rate measured against
 * CLOCK_MONOTONIC over the process's first 20 ms of calls (which read the
 * real clock meanwhile). Each thread re-anchors to CLOCK_MONOTONIC once a
 * second, so readings stay within microseconds of it and never go back.
 * GPB_CLOCK=monotonic in the environment turns the TSC path off (tsc or
 * auto: the default; another value is named on stderr once).
 *
 * The tick. A pool whose only consumer is the live publisher needs times
 * for people (ages, to the millisecond), and even the kernel's coarse
 * clock costs 7 ns through the vDSO, twice per free+alloc: a third of what
 * publishing cost. While any publisher exists, one thread per process
 * stores CLOCK_MONOTONIC into gpb__tick_ns every millisecond, and those
 * pools read that word instead. It blocks every signal; it stops when the
 * last publisher closes; in a forked child it is gone, and the word reads
 * 0, which sends readers back to the coarse clock.
 */
#define _GNU_SOURCE /* pthread_setname_np: the ticker's name in top and gdb */
#include "base/base.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <x86intrin.h>
#define CLOCK_HAVE_TSC 1
#endif

uint64_t gpb__now_coarse_ns(void) {
#ifdef CLOCK_MONOTONIC_COARSE
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#else
  return gpb_now_ns();
#endif
}

static uint64_t clock_mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#ifdef CLOCK_HAVE_TSC
#define CALIB_NS 20000000ull /* measure the rate over 20 ms */
#define ANCHOR_NS 1000000000ull /* re-anchor each thread every second */

/* 0 unknown, 1 calibrating, 2 TSC in use, 3 TSC not used. */
static _Atomic int clock_state;
static _Atomic uint64_t clock_mult; /* ns per tick, 32.32 fixed point */
static _Atomic uint64_t clock_anchor_ticks; /* ANCHOR_NS in ticks */
static uint64_t calib_tsc, calib_ns; /* written once, before state 1 */

/* initial-exec: a plain TLS load instead of a __tls_get_addr call per
 * read; 24 bytes fit the static TLS glibc keeps even for dlopen. */
#define CLOCK_TLS __attribute__((tls_model("initial-exec")))
static _Thread_local uint64_t t_tsc CLOCK_TLS, t_ns CLOCK_TLS,
    t_last CLOCK_TLS;

static int clock_tsc_usable(void) {
  const char *e = getenv("GPB_CLOCK");
  if (e && strcmp(e, "monotonic") == 0) return 0;
  /* Anything else but the default is a mistake worth a line: it has no
   * error path (any call may read the clock first), so it is said once,
   * here, where the choice is made. */
  if (e && *e && strcmp(e, "tsc") != 0 && strcmp(e, "auto") != 0)
    fprintf(stderr, "gpubuddy: GPB_CLOCK=%.64s is not 'monotonic' or 'tsc' "
            "(or 'auto', the default); using the default\n", e);
  unsigned a, b, c, d;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return 0;
  __get_cpuid(0x80000007u, &a, &b, &c, &d);
  return (d >> 8) & 1; /* invariant TSC: constant rate, runs in all states */
}

/* A (TSC, CLOCK_MONOTONIC) pair read close together: a pair that took
 * long (the thread was preempted) is read again. */
static void clock_pair(uint64_t *tsc, uint64_t *ns) {
  for (int i = 0; i < 8; i++) {
    uint64_t t0 = __rdtsc();
    *ns = clock_mono();
    uint64_t t1 = __rdtsc();
    *tsc = t0 + (t1 - t0) / 2;
    if (t1 - t0 < 20000) return; /* a few microseconds at most */
  }
}

static uint64_t clock_slow(int state) {
  uint64_t ns = clock_mono();
  if (state == 0) {
    int want = 0;
    if (atomic_compare_exchange_strong(&clock_state, &want, -1)) {
      if (clock_tsc_usable()) {
        clock_pair(&calib_tsc, &calib_ns);
        atomic_store(&clock_state, 1);
      } else {
        atomic_store(&clock_state, 3);
      }
    }
  } else if (state == 1 && ns - calib_ns >= CALIB_NS) {
    uint64_t tsc, now;
    clock_pair(&tsc, &now);
    uint64_t ticks = tsc - calib_tsc, el = now - calib_ns;
    if (ticks > el / 16) { /* a sane rate: above 62.5 MHz */
      uint64_t mult = (uint64_t)(((unsigned __int128)el << 32) / ticks);
      atomic_store(&clock_mult, mult);
      atomic_store(&clock_anchor_ticks,
                   (uint64_t)(((unsigned __int128)ANCHOR_NS << 32) / mult));
      int want = 1;
      atomic_compare_exchange_strong(&clock_state, &want, 2);
    } else {
      atomic_store(&clock_state, 3);
    }
  }
  return ns;
}

uint64_t gpb_now_ns(void) {
  int state = atomic_load_explicit(&clock_state, memory_order_acquire);
  if (GPB__UNLIKELY(state != 2)) return state == 3 ? clock_mono() : clock_slow(state);
  uint64_t tsc = __rdtsc();
  uint64_t d = tsc - t_tsc;
  if (GPB__UNLIKELY(t_ns == 0 ||
                    d >= atomic_load_explicit(&clock_anchor_ticks,
                                              memory_order_relaxed))) {
    clock_pair(&t_tsc, &t_ns);
    d = tsc > t_tsc ? tsc - t_tsc : 0;
  }
  uint64_t mult = atomic_load_explicit(&clock_mult, memory_order_relaxed);
  uint64_t ns = t_ns + (uint64_t)(((unsigned __int128)d * mult) >> 32);
  if (ns < t_last) ns = t_last; /* a re-anchor may land a little behind */
  t_last = ns;
  return ns;
}
#else
uint64_t gpb_now_ns(void) { return clock_mono(); }
#endif

/* ------------------------------------------------------------------ tick */

_Atomic uint64_t gpb__tick_ns;
#define TICK_NS 1000000L

static pthread_mutex_t tick_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t tick_once = PTHREAD_ONCE_INIT;
static pthread_t tick_thread;
static unsigned tick_users, tick_gen;
static int tick_running;
static _Atomic int tick_stop;

static void *tick_main(void *arg) {
  (void)arg;
#ifdef __GLIBC__
  pthread_setname_np(pthread_self(), "gpb-tick"); /* 15 characters at most */
#endif
  while (!atomic_load_explicit(&tick_stop, memory_order_relaxed)) {
    atomic_store_explicit(&gpb__tick_ns, clock_mono(), memory_order_relaxed);
    struct timespec ts = {0, TICK_NS};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static void tick_prefork(void) { pthread_mutex_lock(&tick_lock); }
static void tick_parent(void) { pthread_mutex_unlock(&tick_lock); }
static void tick_child(void) {
  /* Only the forking thread lives on: no ticker here. Holds taken before
   * the fork belong to the parent (tick_gen tells them apart). */
  pthread_mutex_init(&tick_lock, NULL);
  atomic_store(&gpb__tick_ns, 0);
  atomic_store(&tick_stop, 0);
  tick_users = 0;
  tick_running = 0;
  tick_gen++;
}

static void tick_register(void) {
  pthread_atfork(tick_prefork, tick_parent, tick_child);
}

unsigned gpb__tick_hold(void) {
  pthread_once(&tick_once, tick_register);
  pthread_mutex_lock(&tick_lock);
  unsigned gen = tick_gen;
  if (tick_users++ == 0 && !tick_running) {
    atomic_store(&gpb__tick_ns, clock_mono());
    atomic_store(&tick_stop, 0);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    tick_running = pthread_create(&tick_thread, NULL, tick_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    /* No thread: readers fall back to the coarse clock. */
    if (!tick_running) atomic_store(&gpb__tick_ns, 0);
  }
  pthread_mutex_unlock(&tick_lock);
  return gen;
}

void gpb__tick_drop(unsigned gen) {
  pthread_mutex_lock(&tick_lock);
  if (gen == tick_gen && tick_users > 0 && --tick_users == 0 && tick_running) {
    /* Joined under the lock (the ticker never takes it, and it wakes
     * within a millisecond), so a hold cannot start a second ticker while
     * this one is still looking at tick_stop. */
    atomic_store(&tick_stop, 1);
    pthread_join(tick_thread, NULL);
    tick_running = 0;
    atomic_store(&gpb__tick_ns, 0);
  }
  pthread_mutex_unlock(&tick_lock);
}
