/* SPDX-License-Identifier: MIT */
/*
 * json.h: a small JSON writer onto a FILE, for the tools' --json output
 * and the bench's results.json.
 *
 * gpbt_json_str writes one escaped string. A gpbt_json_t writes an
 * object's members one by one, putting the caller's separator between
 * them, so one layout can have a member per line (",\n  ") and another a
 * row per line (", "). The caller writes the braces and brackets; the
 * writer neither buffers nor checks nesting.
 */
#ifndef GPBT_JSON_H
#define GPBT_JSON_H

#include <stdint.h>
#include <stdio.h>

/* s in double quotes, with '"' and '\' escaped and bytes below 0x20 as
 * \u00XX; other bytes (UTF-8) as they are. */
void gpbt_json_str(FILE *f, const char *s);

typedef struct gpbt_json {
  FILE *f;
  const char *sep; /* written before every member but the first */
  int n;           /* members written so far */
} gpbt_json_t;

/* The separator (after the first member) and "key": ; the caller writes
 * the value (an array, say). */
void gpbt_json_key(gpbt_json_t *j, const char *key);
/* A whole member: key and value. */
void gpbt_json_put_str(gpbt_json_t *j, const char *key, const char *s);
void gpbt_json_put_u64(gpbt_json_t *j, const char *key, uint64_t v);
void gpbt_json_put_int(gpbt_json_t *j, const char *key, long long v);
void gpbt_json_put_bool(gpbt_json_t *j, const char *key, int v);
/* v as %.6g; null when it is not finite (JSON has no NaN or Infinity). */
void gpbt_json_put_num(gpbt_json_t *j, const char *key, double v);

#endif /* GPBT_JSON_H */
