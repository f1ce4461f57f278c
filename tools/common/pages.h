/* SPDX-License-Identifier: MIT */
/*
 * pages.h: the memory a GPB_CFG_VMM pool would hold for a replay. Such a
 * pool maps a 2 MiB page under every granule a live block touches (and
 * moves idle pages where they are needed once its budget is spent), so
 * the budget it needs is the peak count of granules touched by live
 * blocks. Counting them over a replay answers "how small a VMM pool?"
 * without a GPU.
 */
#ifndef GPB_TOOLS_PAGES_H
#define GPB_TOOLS_PAGES_H

#include <stdint.h>

#define GPBT_PAGE_SHIFT 21 /* the driver's granularity on current GPUs */

typedef struct gpbt_pages {
  uint32_t *users; /* per granule: live blocks touching it */
  uint64_t n;      /* granules */
  uint64_t used, peak; /* granules with users, now and at most */
} gpbt_pages_t;

/* For a pool of `size` bytes: 0 or GPB_EHOSTMEM. */
int gpbt_pages_init(gpbt_pages_t *pg, uint64_t size);
void gpbt_pages_fini(gpbt_pages_t *pg);
/* A live block [off, off+len) begins or ends (len > 0, inside the pool). */
void gpbt_pages_use(gpbt_pages_t *pg, uint64_t off, uint64_t len);
void gpbt_pages_unuse(gpbt_pages_t *pg, uint64_t off, uint64_t len);
/* The peak in bytes. */
static inline uint64_t gpbt_pages_peak(const gpbt_pages_t *pg) {
  return pg->peak << GPBT_PAGE_SHIFT;
}

#endif /* GPB_TOOLS_PAGES_H */
