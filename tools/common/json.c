/* SPDX-License-Identifier: MIT */
/*
 * json.c: the JSON writer of json.h. Keys are the caller's literals and
 * are written unescaped; values that are strings go through
 * gpbt_json_str.
 */
#include "json.h"

#include <math.h>

void gpbt_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

void gpbt_json_key(gpbt_json_t *j, const char *key) {
  fprintf(j->f, "%s\"%s\": ", j->n++ ? j->sep : "", key);
}

void gpbt_json_put_str(gpbt_json_t *j, const char *key, const char *s) {
  gpbt_json_key(j, key);
  gpbt_json_str(j->f, s);
}

void gpbt_json_put_u64(gpbt_json_t *j, const char *key, uint64_t v) {
  gpbt_json_key(j, key);
  fprintf(j->f, "%llu", (unsigned long long)v);
}

void gpbt_json_put_int(gpbt_json_t *j, const char *key, long long v) {
  gpbt_json_key(j, key);
  fprintf(j->f, "%lld", v);
}

void gpbt_json_put_bool(gpbt_json_t *j, const char *key, int v) {
  gpbt_json_key(j, key);
  fputs(v ? "true" : "false", j->f);
}

void gpbt_json_put_num(gpbt_json_t *j, const char *key, double v) {
  gpbt_json_key(j, key);
  if (isfinite(v)) fprintf(j->f, "%.6g", v);
  else fputs("null", j->f);
}
