/* SPDX-License-Identifier: MIT */
/*
 * series.c: the time series shown under the stats (used bytes, largest
 * free block, external fragmentation) and by the timeline (used bytes by
 * call site and by tag, failed allocations), in bounded memory.
 *
 * Points are taken every `stride` steps. When the buffer is full, every
 * other point is dropped and the stride doubles, so a run of any length
 * keeps between half and all of VSERIES_CAP points, evenly spaced. Each
 * point keeps its VSERIES_K largest sites and tags, which is all a stack
 * of the top few groups needs; the rest of its bytes are "other".
 * Failures are kept one by one up to VSERIES_OOMS, then only counted.
 * All of it is 128 KiB a view, fixed: a grid of 256 pools holds
 * 32 MiB of series.
 */
#include "view.h"

#include <string.h>

void vseries_reset(vseries_t *s) {
  memset(s, 0, sizeof *s);
  s->stride = 1;
}

static void series_halve(vseries_t *s) {
  int j = 0;
  for (int i = 0; i < s->n; i += 2, j++) {
    s->x[j] = s->x[i];
    s->used[j] = s->used[i];
    s->largest[j] = s->largest[i];
    s->frag[j] = s->frag[i];
    s->site[j] = s->site[i];
    s->tag[j] = s->tag[i];
  }
  s->n = j;
  s->stride *= 2;
}

/* Keeps (id, bytes) if among the K largest so far; g is largest first. */
static void series_rank(vseries_grp_t *g, uint32_t id, uint64_t bytes) {
  int i = g->n < VSERIES_K ? g->n : VSERIES_K - 1;
  if (g->n == VSERIES_K && g->bytes[i] >= bytes) return;
  for (; i > 0 && g->bytes[i - 1] < bytes; i--) {
    g->id[i] = g->id[i - 1];
    g->bytes[i] = g->bytes[i - 1];
  }
  g->id[i] = (uint16_t)id;
  g->bytes[i] = bytes;
  if (g->n < VSERIES_K) g->n++;
}

/* Point i from the stats and sites now. */
static void series_put(vseries_t *s, int i, uint64_t x, const gpb_stats_t *st,
                       const gpbt_sites_t *sites) {
  s->x[i] = x;
  s->used[i] = (double)st->block_bytes;
  s->largest[i] = (double)st->largest_free;
  s->frag[i] = st->external_frag;
  memset(&s->tag[i], 0, sizeof s->tag[i]);
  memset(&s->site[i], 0, sizeof s->site[i]);
  for (uint32_t t = 0; t < GPB_MAX_TAGS; t++)
    if (st->tag_bytes[t]) series_rank(&s->tag[i], t, st->tag_bytes[t]);
  if (sites && sites->v) {
    gpbt_site_row_t rows[VSERIES_K];
    size_t k = gpbt_sites_top(sites, GPBT_SITES_LIVE, rows, VSERIES_K, NULL);
    for (size_t j = 0; j < k; j++)
      series_rank(&s->site[i], rows[j].site, rows[j].bytes);
  }
}

void vseries_add(vseries_t *s, uint64_t x, const gpb_stats_t *st,
                 const gpbt_sites_t *sites) {
  if (s->n == VSERIES_CAP) series_halve(s);
  series_put(s, s->n++, x, st, sites);
}

void vseries_tick(vseries_t *s, uint64_t x, const gpb_model_t *model,
                  const gpbt_sites_t *sites) {
  if (s->n && x < s->x[s->n - 1]) return; /* a replay run again */
  gpb_stats_t st;
  /* The op's later events (an alloc after its splits): the point shows
   * the op's end, not its first event (the chart lagged an op, and an
   * alloc's peak was lost). Run again, the op ends the same. */
  if (s->n && x == s->x[s->n - 1]) {
    if (gpb_model_stats(model, &st) == 0) series_put(s, s->n - 1, x, &st, sites);
    return;
  }
  if (++s->count < s->stride) return;
  s->count = 0;
  if (gpb_model_stats(model, &st) == 0) vseries_add(s, x, &st, sites);
}

int vseries_fail(vseries_t *s, uint64_t x, const gpb_event_t *ev) {
  if (s->ooms && x <= s->oom_x) return 0;
  s->ooms++;
  s->oom_x = x;
  /* A live view wants its recent failures: the ticks at the end of its
   * timeline, and the ones it can still explain. */
  if (s->noom == VSERIES_OOMS && s->oom_latest) {
    size_t drop = VSERIES_OOMS / 4;
    memmove(s->oom, s->oom + drop, (VSERIES_OOMS - drop) * sizeof *s->oom);
    s->noom -= drop;
  }
  if (s->noom < VSERIES_OOMS) {
    vseries_oom_t *o = &s->oom[s->noom++];
    o->x = x;
    o->requested = ev->requested;
    o->site = ev->site;
    o->tag = ev->tag;
  }
  return 1;
}
