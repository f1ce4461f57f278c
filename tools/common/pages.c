/* SPDX-License-Identifier: MIT */
/* pages.c: granules under live blocks over a replay; pages.h says why. */
#include "pages.h"

#include "gpubuddy.h"

#include <stdlib.h>
#include <string.h>

int gpbt_pages_init(gpbt_pages_t *pg, uint64_t size) {
  memset(pg, 0, sizeof *pg);
  pg->n = (size + (1ull << GPBT_PAGE_SHIFT) - 1) >> GPBT_PAGE_SHIFT;
  pg->users = calloc(pg->n ? pg->n : 1, sizeof *pg->users);
  return pg->users ? 0 : GPB_EHOSTMEM;
}

void gpbt_pages_fini(gpbt_pages_t *pg) {
  free(pg->users);
  memset(pg, 0, sizeof *pg);
}

void gpbt_pages_use(gpbt_pages_t *pg, uint64_t off, uint64_t len) {
  uint64_t last = (off + len - 1) >> GPBT_PAGE_SHIFT;
  for (uint64_t g = off >> GPBT_PAGE_SHIFT; g <= last && g < pg->n; g++)
    if (pg->users[g]++ == 0 && ++pg->used > pg->peak) pg->peak = pg->used;
}

void gpbt_pages_unuse(gpbt_pages_t *pg, uint64_t off, uint64_t len) {
  uint64_t last = (off + len - 1) >> GPBT_PAGE_SHIFT;
  for (uint64_t g = off >> GPBT_PAGE_SHIFT; g <= last && g < pg->n; g++)
    if (--pg->users[g] == 0) pg->used--;
}
