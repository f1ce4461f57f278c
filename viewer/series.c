/* SPDX-License-Identifier: MIT */
/*
 * series.c: the time series shown under the stats (used bytes, largest
 * free block, external fragmentation), in bounded memory.
 *
 * Points are taken every `stride` steps. When the buffer is full, every
 * other point is dropped and the stride doubles, so a run of any length
 * keeps between half and all of VSERIES_CAP points, evenly spaced.
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
  }
  s->n = j;
  s->stride *= 2;
}

void vseries_add(vseries_t *s, uint64_t x, const gpb_stats_t *st) {
  if (s->n == VSERIES_CAP) series_halve(s);
  s->x[s->n] = x;
  s->used[s->n] = (double)st->block_bytes;
  s->largest[s->n] = (double)st->largest_free;
  s->frag[s->n] = st->external_frag;
  s->n++;
}

void vseries_tick(vseries_t *s, uint64_t x, const gpb_model_t *model) {
  if (++s->count < s->stride) return;
  s->count = 0;
  gpb_stats_t st;
  if (gpb_model_stats(model, &st) == 0) vseries_add(s, x, &st);
}
