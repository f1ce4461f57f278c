/* SPDX-License-Identifier: MIT */
/*
 * pickle.h: a streaming writer of Python pickles (protocol 2), for
 * gpubuddy-export-torch's PyTorch memory snapshots (pickle.c).
 *
 * Only what a snapshot holds: dicts, lists, tuples, str, int, bool and
 * None, each written as it comes (no tree in memory, so a snapshot of
 * any size costs a buffer). Dicts and lists open empty and take items
 * one by one (SETITEM, APPEND). A value written once can be kept in the
 * memo and written again as a reference (a stack's frames, shared by
 * every entry of that site), which also makes the reader share it.
 */
#ifndef GPBT_PICKLE_H
#define GPBT_PICKLE_H

#include <stdint.h>
#include <stdio.h>

typedef struct gpbt_pk {
  FILE *f;
  uint32_t memo; /* the next memo index */
  int err;       /* a write failed (errno says why) */
} gpbt_pk_t;

/* Writes the protocol header to f. */
void gpbt_pk_begin(gpbt_pk_t *p, FILE *f);
/* Writes STOP: 0, or -1 when any write failed. */
int gpbt_pk_end(gpbt_pk_t *p);

void gpbt_pk_dict(gpbt_pk_t *p);      /* an empty dict: key, value, setitem */
void gpbt_pk_setitem(gpbt_pk_t *p);   /* dict[key] = value (the top two) */
void gpbt_pk_list(gpbt_pk_t *p);      /* an empty list: value, append */
void gpbt_pk_append(gpbt_pk_t *p);
void gpbt_pk_tuple2(gpbt_pk_t *p);    /* the top two become a tuple */
void gpbt_pk_str(gpbt_pk_t *p, const char *s);  /* UTF-8 */
void gpbt_pk_strn(gpbt_pk_t *p, const char *s, size_t n);
void gpbt_pk_int(gpbt_pk_t *p, int64_t v);
void gpbt_pk_uint(gpbt_pk_t *p, uint64_t v);
void gpbt_pk_bool(gpbt_pk_t *p, int v);
void gpbt_pk_none(gpbt_pk_t *p);
/* Keeps the value on top in the memo; returns its index for gpbt_pk_get. */
uint32_t gpbt_pk_put(gpbt_pk_t *p);
void gpbt_pk_get(gpbt_pk_t *p, uint32_t index);
/* A dict member with a str key: key, then the caller writes the value and
 * calls gpbt_pk_setitem. Shorthands for the common values follow. */
void gpbt_pk_key(gpbt_pk_t *p, const char *key);
void gpbt_pk_kv_str(gpbt_pk_t *p, const char *key, const char *v);
void gpbt_pk_kv_uint(gpbt_pk_t *p, const char *key, uint64_t v);

#endif /* GPBT_PICKLE_H */
