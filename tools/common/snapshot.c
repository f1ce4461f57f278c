/* SPDX-License-Identifier: MIT */
/*
 * snapshot.c: reads published pools once, through a live reader each
 * (snapshot.h). The reader is closed at once: a snapshot costs the writer
 * nothing but, for a late reader, one keyframe.
 */
#define _POSIX_C_SOURCE 200809L
#include "snapshot.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void snap_sleep_ms(long ms) {
  struct timespec ts = {0, ms * 1000000L};
  nanosleep(&ts, NULL);
}

int gpbt_snapshot(const char *name, double wait_s, gpbt_pool_snap_t *out) {
  memset(out, 0, sizeof *out);
  strncpy(out->name, name, sizeof out->name - 1);
  gpb_attach_t *a;
  int rc = gpb_attach_open(name, &a);
  if (rc) return out->state = rc;
  gpb_attach_info(a, &out->info);
  uint64_t until = gpb_now_ns() + (uint64_t)(wait_s * 1e9);
  for (;;) {
    rc = gpb_attach_poll(a);
    if (rc > 0) {
      out->state = 1;
      break;
    }
    if (rc == GPB_ECLOSED) { /* gone: its last state, if we got one */
      out->state = gpb_model_seq(gpb_attach_model(a)) > 0;
      break;
    }
    if (rc < 0) {
      out->state = rc;
      break;
    }
    if (gpb_now_ns() > until) break;
    snap_sleep_ms(5);
  }
  if (out->state > 0) gpb_model_stats(gpb_attach_model(a), &out->stats);
  gpb_attach_close(a);
  return out->state;
}

typedef struct snap_names {
  char (*v)[GPB_NAME_MAX];
  size_t n, cap;
  int oom;
} snap_names_t;

static void snap_name_add(const char *name, void *user) {
  snap_names_t *l = user;
  if (l->n == l->cap) {
    size_t nc = l->cap ? 2 * l->cap : 16;
    void *p = realloc(l->v, nc * sizeof *l->v);
    if (!p) {
      l->oom = 1;
      return;
    }
    l->v = p;
    l->cap = nc;
  }
  strncpy(l->v[l->n], name, GPB_NAME_MAX - 1);
  l->v[l->n++][GPB_NAME_MAX - 1] = '\0';
}

static int snap_cmp(const void *a, const void *b) {
  return strcmp(((const gpbt_pool_snap_t *)a)->name,
                ((const gpbt_pool_snap_t *)b)->name);
}

int gpbt_snapshot_all(double wait_s, gpbt_pool_snap_t **out, size_t *n) {
  snap_names_t l = {0};
  *out = NULL;
  *n = 0;
  int rc = gpb_list_pools(snap_name_add, &l);
  if (!rc && l.oom) rc = GPB_EHOSTMEM;
  gpbt_pool_snap_t *s = rc ? NULL : calloc(l.n ? l.n : 1, sizeof *s);
  if (!rc && !s) rc = GPB_EHOSTMEM;
  for (size_t i = 0; !rc && i < l.n; i++) gpbt_snapshot(l.v[i], wait_s, &s[i]);
  free(l.v);
  if (rc) {
    free(s);
    return rc;
  }
  qsort(s, l.n, sizeof *s, snap_cmp);
  *out = s;
  *n = l.n;
  return 0;
}
