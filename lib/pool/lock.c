/* SPDX-License-Identifier: MIT */
/*
 * lock.c: the slow path of the pool's lock (gpb__lock_t, pool.h).
 *
 * The lock is one word: 0 free, 1 held, 2 held and maybe waited for
 * (Drepper, "Futexes Are Tricky", mutex 3). Taking a free lock and
 * giving back one nobody waits for are one atomic each, inline in
 * pool.h; only a lock found held comes here. A waiter spins a little (a
 * pool's critical sections are a few hundred instructions), then marks
 * the word 2 and sleeps on it in the kernel; an unlock that finds 2 wakes
 * one sleeper. Without futexes (not Linux) a waiter yields instead.
 */
#include "pool/pool.h"

#include <sched.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* Tries before sleeping: about as long as a pool call under the lock. */
#define LOCK_SPINS 100

static inline void lock_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

void gpb__lock_wait(gpb__lock_t *l) {
  for (int i = 0; i < LOCK_SPINS; i++) {
    uint32_t z = 0;
    if (atomic_load_explicit(&l->w, memory_order_relaxed) == 0 &&
        atomic_compare_exchange_weak_explicit(&l->w, &z, 1,
                                              memory_order_acquire,
                                              memory_order_relaxed))
      return;
    lock_pause();
  }
  /* Held as 2 from here on: whoever unlocks next wakes a sleeper, and a
   * waiter that gets the lock this way keeps it marked, which at worst
   * costs one wake nobody needed. */
  while (atomic_exchange_explicit(&l->w, 2, memory_order_acquire) != 0) {
#ifdef __linux__
    syscall(SYS_futex, &l->w, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
#else
    sched_yield();
#endif
  }
}

void gpb__lock_wake(gpb__lock_t *l) {
#ifdef __linux__
  syscall(SYS_futex, &l->w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
#else
  (void)l;
#endif
}
