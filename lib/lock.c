/*
 * lock.c: how the pool's and arenas' mutexes are made.
 *
 * A pool call holds its lock for tens of nanoseconds. A thread that finds
 * it taken would, with a default mutex, go to sleep in the kernel at once
 * and be woken microseconds later: with many threads on one lock that is
 * most of their time. An adaptive mutex spins a little first, which is
 * how long the holder needs. Where that kind does not exist, a default
 * mutex does the same job more slowly.
 */
#define _GNU_SOURCE /* PTHREAD_MUTEX_ADAPTIVE_NP */
#include "internal.h"

#include <pthread.h>

void gpb__mutex_init(pthread_mutex_t *m) {
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
  pthread_mutexattr_t a;
  if (pthread_mutexattr_init(&a) == 0) {
    if (pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP) == 0 &&
        pthread_mutex_init(m, &a) == 0) {
      pthread_mutexattr_destroy(&a);
      return;
    }
    pthread_mutexattr_destroy(&a);
  }
#endif
  pthread_mutex_init(m, NULL);
}
