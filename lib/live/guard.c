/* SPDX-License-Identifier: MIT */
/*
 * guard.c: keeps a truncated live segment from killing the process that
 * maps it.
 *
 * A live segment is a file in /dev/shm that the writer and every reader
 * map shared. Any process of the same user (or root) can ftruncate it,
 * and then a load or store to a mapped page past the new end raises
 * SIGBUS (BUS_ADRERR): the default action kills the allocating program,
 * a relay serving a fleet, or a viewer. A size check before each access
 * cannot close the window (the file can shrink between the check and the
 * store, and the writer stores on every event), and a tmpfs file cannot
 * be sealed against shrinking (only memfds can). So the pages that fault
 * are made harmless instead: each mapping of a segment is registered
 * here, and a SIGBUS handler that finds the faulting address inside one
 * maps private zero pages over that whole mapping (mmap MAP_FIXED, a
 * system call, safe in a handler), marks it cut, and returns; the access
 * runs again on memory the process owns. The writer then publishes into
 * memory no one reads (it says so once, from the handler, with write(2));
 * a reader sees the cut mark at its next poll and drops the pool with a
 * message. The hot path is unchanged: no check per event.
 *
 * The handler is installed with the first mapping. Every other SIGBUS
 * (not BUS_ADRERR, or an address outside our mappings) goes to the
 * action the program had before: its handler, or the default, which the
 * handler restores so that the access faults again and kills as it
 * would have. A program that installs its own SIGBUS handler later
 * replaces ours, and a truncation then reaches its handler.
 * GUARD_SLOTS mappings are guarded at once; more are mapped unguarded.
 */
#include "live/shm.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define GUARD_SLOTS 4096

typedef struct guard_slot {
  _Atomic uintptr_t start; /* 0: free */
  _Atomic size_t len;
  _Atomic int cut;
  const char *_Atomic msg; /* written to stderr when it is cut, or NULL */
} guard_slot_t;

static guard_slot_t guard_slots[GUARD_SLOTS];
static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction guard_old; /* the action before ours */
static int guard_installed;

/* Passes a SIGBUS that is not ours to the action the program had. */
static void guard_chain(int sig, siginfo_t *si, void *uc) {
  if (guard_old.sa_flags & SA_SIGINFO) {
    if (guard_old.sa_sigaction) guard_old.sa_sigaction(sig, si, uc);
    return;
  }
  if (guard_old.sa_handler == SIG_DFL || guard_old.sa_handler == SIG_IGN) {
    /* The fault comes back when the access runs again, and kills. */
    signal(sig, SIG_DFL);
    if (si->si_code <= 0) raise(sig); /* sent, not a fault */
    return;
  }
  guard_old.sa_handler(sig);
}

static void guard_on_sigbus(int sig, siginfo_t *si, void *uc) {
  uintptr_t a = (uintptr_t)si->si_addr;
  if (si->si_code == BUS_ADRERR) {
    for (int i = 0; i < GUARD_SLOTS; i++) {
      guard_slot_t *s = &guard_slots[i];
      uintptr_t st = atomic_load(&s->start);
      size_t len = atomic_load(&s->len);
      if (!st || a < st || a - st >= len) continue;
      if (mmap((void *)st, len, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
        break; /* cannot help: fail as before */
      if (!atomic_exchange(&s->cut, 1)) {
        const char *m = atomic_load(&s->msg);
        if (m) (void)!write(2, m, strlen(m));
      }
      return;
    }
  }
  guard_chain(sig, si, uc);
}

/* Caller holds guard_lock. */
static void guard_install(void) {
  if (guard_installed) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = guard_on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGBUS, &sa, &guard_old) == 0) guard_installed = 1;
}

int gpb__guard_add(void *map, size_t len, const char *msg) {
  pthread_mutex_lock(&guard_lock);
  guard_install();
  int slot = -1;
  for (int i = 0; i < GUARD_SLOTS && slot < 0; i++) {
    if (atomic_load(&guard_slots[i].start)) continue;
    guard_slot_t *s = &guard_slots[i];
    atomic_store(&s->cut, 0);
    atomic_store(&s->msg, msg);
    atomic_store(&s->len, len);
    atomic_store(&s->start, (uintptr_t)map); /* last: the slot is live */
    slot = i;
  }
  pthread_mutex_unlock(&guard_lock);
  return slot;
}

int gpb__guard_cut(int slot) {
  return slot >= 0 && slot < GUARD_SLOTS &&
         atomic_load_explicit(&guard_slots[slot].cut, memory_order_relaxed);
}

void gpb__guard_remove(int slot) {
  if (slot < 0 || slot >= GUARD_SLOTS) return;
  pthread_mutex_lock(&guard_lock);
  atomic_store(&guard_slots[slot].start, 0);
  pthread_mutex_unlock(&guard_lock);
}
