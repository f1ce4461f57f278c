/* SPDX-License-Identifier: MIT */
/*
 * snapshot.h: the state of every pool published on this machine, read
 * once (gpubuddy-stat --all, the relay's /metrics).
 */
#ifndef GPBT_SNAPSHOT_H
#define GPBT_SNAPSHOT_H

#include "gpubuddy.h"

#include <stddef.h>

typedef struct gpbt_pool_snap {
  char name[GPB_NAME_MAX];
  gpb_pool_info_t info;
  gpb_stats_t stats;
  int state; /* 1 stats valid, 0 no state yet (idle writer), <0 error */
} gpbt_pool_snap_t;

/* Attaches to the pool published as name and polls until its model holds
 * the pool's state, for at most wait_s seconds (an idle writer sends its
 * keyframe at its next allocation). Fills *out; returns out->state. */
int gpbt_snapshot(const char *name, double wait_s, gpbt_pool_snap_t *out);

/* Every pool published now, each read as gpbt_snapshot does, sorted by
 * name. *out is malloc'ed (free it); 0 or a negative GPB_E* code. */
int gpbt_snapshot_all(double wait_s, gpbt_pool_snap_t **out, size_t *n);

#endif /* GPBT_SNAPSHOT_H */
