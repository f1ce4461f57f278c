/* SPDX-License-Identifier: MIT */
/*
 * topsites.c: bytes and failures by call site (topsites.h). Per-op
 * updates touch one site's entry; a ranking is one pass over the ids
 * seen and a sort of the sites that qualify.
 */
#include "topsites.h"

#include "gpubuddy.h"

#include <stdlib.h>
#include <string.h>

/* Entries at first: most traces name a few sites, if any. */
#define SITES_FIRST 64u

int gpbt_sites_init(gpbt_sites_t *t) {
  t->v = calloc(SITES_FIRST, sizeof *t->v);
  t->cap = t->v ? SITES_FIRST : 0;
  t->err = 0;
  t->epoch = 1; /* entries start at 0: "changed since no peak" */
  t->max_site = 0;
  return t->v ? 0 : -1;
}

void gpbt_sites_fini(gpbt_sites_t *t) {
  free(t->v);
  t->v = NULL;
  t->cap = 0;
}

/* The entry of `site`, the table grown to hold it; site 0's when it
 * cannot be (err says so), or for an id no reader gives. */
static uint32_t sites_slot(gpbt_sites_t *t, uint32_t site) {
  if (site > GPB_MAX_SITES) return 0;
  if (site >= t->cap) {
    uint32_t cap = t->cap ? t->cap : SITES_FIRST;
    while (cap <= site) cap *= 2;
    if (cap > GPB_MAX_SITES + 1) cap = GPB_MAX_SITES + 1;
    gpbt_site_acc_t *v = realloc(t->v, (size_t)cap * sizeof *v);
    if (!v) {
      t->err = 1;
      return 0;
    }
    memset(v + t->cap, 0, (size_t)(cap - t->cap) * sizeof *v);
    t->v = v;
    t->cap = cap;
  }
  if (site > t->max_site) t->max_site = site;
  return site;
}

/* The site's entry, its figures at the last peak saved first if this is
 * their first change since. */
static gpbt_site_acc_t *sites_touch(gpbt_sites_t *t, uint32_t site) {
  site = sites_slot(t, site);
  gpbt_site_acc_t *a = &t->v[site];
  if (a->epoch != t->epoch) {
    a->peak = a->live;
    a->peak_n = a->live_n;
    a->epoch = t->epoch;
  }
  return a;
}

void gpbt_sites_alloc(gpbt_sites_t *t, uint32_t site, uint64_t bytes) {
  gpbt_site_acc_t *a = sites_touch(t, site);
  a->live += bytes;
  a->live_n++;
}

void gpbt_sites_free(gpbt_sites_t *t, uint32_t site, uint64_t bytes) {
  gpbt_site_acc_t *a = sites_touch(t, site);
  a->live -= bytes;
  a->live_n--;
}

void gpbt_sites_peak(gpbt_sites_t *t) { t->epoch++; }

void gpbt_sites_fail(gpbt_sites_t *t, uint32_t site, uint64_t bytes) {
  site = sites_slot(t, site);
  t->v[site].fails++;
  t->v[site].fail_bytes += bytes;
}

static int sites_cmp(const void *x, const void *y) {
  const gpbt_site_row_t *a = x, *b = y;
  if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
  if (a->n != b->n) return a->n > b->n ? -1 : 1;
  return a->site < b->site ? -1 : a->site > b->site;
}

static int sites_cmp_fail(const void *x, const void *y) {
  const gpbt_site_row_t *a = x, *b = y;
  if (a->n != b->n) return a->n > b->n ? -1 : 1;
  return sites_cmp(x, y);
}

size_t gpbt_sites_top(const gpbt_sites_t *t, int by, gpbt_site_row_t *rows,
                      size_t max, size_t *total) {
  size_t n = 0;
  int failed = by == GPBT_SITES_FAILED;
  if (total) *total = 0;
  if (!t->v) return 0;
  gpbt_site_row_t *all = malloc(((size_t)t->max_site + 1) * sizeof *all);
  if (!all) return 0;
  for (uint32_t s = 0; s <= t->max_site; s++) {
    const gpbt_site_acc_t *a = &t->v[s];
    gpbt_site_row_t r = {s, 0, 0};
    if (failed) {
      r.bytes = a->fail_bytes;
      r.n = a->fails;
    } else if (by == GPBT_SITES_PEAK && a->epoch == t->epoch) {
      /* changed since the peak */
      r.bytes = a->peak;
      r.n = a->peak_n;
    } else {
      r.bytes = a->live;
      r.n = a->live_n;
    }
    if (r.n) all[n++] = r;
  }
  qsort(all, n, sizeof *all, failed ? sites_cmp_fail : sites_cmp);
  if (total) *total = n;
  if (n > max) n = max;
  for (size_t i = 0; i < n; i++) rows[i] = all[i];
  free(all);
  return n;
}
