/* SPDX-License-Identifier: MIT */
/*
 * backend-host.c: reserves the pool's range in plain host memory.
 *
 * mmap gives page-granular, lazily backed memory and lets us align the base
 * to a large power of two cheaply: map size + align bytes and unmap the
 * slack on both sides. The virtual backend reserves the same way with
 * PROT_NONE: unique, aligned addresses and no memory behind them.
 */
#include "pool/pool.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int gpb__host_reserve(size_t size, size_t align, int backed, void **base) {
  size_t span = size + align;
  if (span < size) return gpb__fail(GPB_EBACKEND, "pool size overflows");
  char *m = mmap(NULL, span, backed ? PROT_READ | PROT_WRITE : PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED)
    return gpb__fail(GPB_EBACKEND, "mmap of %zu bytes failed: %s", span,
                     strerror(errno));
  uintptr_t a = ((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1);
  size_t head = a - (uintptr_t)m;
  /* munmap wants a page-aligned start: the slack after the pool begins
   * at the first page boundary past it (a pool of 256 B multiples would
   * otherwise keep its whole tail mapped, pool after pool). */
  uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t end = (a + size + pg - 1) & ~(pg - 1);
  uintptr_t stop = (uintptr_t)m + span;
  if (head) munmap(m, head);
  if (end < stop) munmap((void *)end, stop - end);
  *base = (void *)a;
  return 0;
}

void gpb__host_release(void *base, size_t size, size_t align) {
  (void)align;
  munmap(base, size);
}
