/* SPDX-License-Identifier: MIT */
/*
 * metrics.h: the pools of this machine in Prometheus's text exposition
 * format (version 0.0.4), for gpubuddy-relay --metrics.
 */
#ifndef GPBT_METRICS_H
#define GPBT_METRICS_H

#include "snapshot.h"

#include <stdio.h>

/* Writes the metrics of the n pools in v to f. 0, or -1 on a write
 * error. */
int gpbt_metrics_write(FILE *f, const gpbt_pool_snap_t *v, size_t n);

#endif /* GPBT_METRICS_H */
