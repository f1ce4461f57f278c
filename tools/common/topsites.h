/* SPDX-License-Identifier: MIT */
/*
 * topsites.h: bytes and failures by call site, for a replay's
 * --top-sites (topsites.c).
 *
 * A trace's ops carry call site ids (docs/TRACE_FORMAT.md, 0 unknown).
 * The table keeps, per id, the bytes and allocations live now and at the
 * replay's peak, and the allocations that failed. A peak costs nothing
 * however many sites there are: each site's figures at the last peak are
 * saved the first time they change after it (an epoch per site), so
 * every op is O(1). The table grows with the largest id seen, so a trace
 * with a few sites (or a viewer of many pools) holds a few entries, not
 * GPB_MAX_SITES.
 */
#ifndef GPBT_TOPSITES_H
#define GPBT_TOPSITES_H

#include <stddef.h>
#include <stdint.h>

typedef struct gpbt_site_acc {
  uint64_t live, live_n;       /* bytes, allocations live now */
  uint64_t peak, peak_n;       /* at the last peak, when epoch is its */
  uint64_t epoch;
  uint64_t fails, fail_bytes;  /* failed allocations, bytes they asked */
} gpbt_site_acc_t;

typedef struct gpbt_sites {
  gpbt_site_acc_t *v; /* by site id, 0 to cap - 1 (NULL: not initialized) */
  uint32_t cap;       /* entries in v: grows to GPB_MAX_SITES + 1 at most */
  int err;            /* a site could not be given an entry: it went to 0 */
  uint64_t epoch;     /* bumped at each new peak */
  uint32_t max_site;  /* the largest id seen, 0 when none */
} gpbt_sites_t;

/* What gpbt_sites_top ranks by. */
#define GPBT_SITES_PEAK 0   /* bytes held at the last peak */
#define GPBT_SITES_FAILED 1 /* failures, then the bytes they asked */
#define GPBT_SITES_LIVE 2   /* bytes held now */

/* One row of a ranking. */
typedef struct gpbt_site_row {
  uint32_t site;
  uint64_t bytes, n; /* at the peak (or now): bytes, allocations; failed:
                        bytes asked, failures */
} gpbt_site_row_t;

/* 0, or -1 without memory. */
int gpbt_sites_init(gpbt_sites_t *t);
void gpbt_sites_fini(gpbt_sites_t *t);
/* An allocation of `bytes` from `site` succeeded, or was freed. */
void gpbt_sites_alloc(gpbt_sites_t *t, uint32_t site, uint64_t bytes);
void gpbt_sites_free(gpbt_sites_t *t, uint32_t site, uint64_t bytes);
/* Live bytes (all sites) just reached a new peak. */
void gpbt_sites_peak(gpbt_sites_t *t);
/* An allocation of `bytes` from `site` failed. */
void gpbt_sites_fail(gpbt_sites_t *t, uint32_t site, uint64_t bytes);
/* The `max` sites holding the most bytes at the last peak
 * (GPBT_SITES_PEAK, 0) or now (GPBT_SITES_LIVE), or with the most
 * failures (GPBT_SITES_FAILED, 1), largest first, ties by id; sites with
 * nothing are left out. Returns how many were written, and in *total how
 * many sites qualify (NULL: not wanted). */
size_t gpbt_sites_top(const gpbt_sites_t *t, int by, gpbt_site_row_t *rows,
                      size_t max, size_t *total);

#endif /* GPBT_TOPSITES_H */
