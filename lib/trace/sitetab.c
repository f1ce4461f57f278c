/* SPDX-License-Identifier: MIT */
/*
 * sitetab.c: call site texts by id, as a reader takes them in: the trace
 * reader from "# site" lines, live readers from a segment's site table
 * or a relay's SITES frames. Every text is checked, copied once, kept
 * until the reader closes, and the whole table is bounded
 * (GPB__SITETAB_MAX bytes), whatever the source says.
 */
#include "trace/trace.h"

#include <stdlib.h>
#include <string.h>

/* The table keeps its own copy, checked after it was taken: a writer or
 * relay cannot change it after the checks. */
int gpb__sitetab_set(gpb__sitetab_t *t, uint32_t id, const char *p, size_t n) {
  if (id == 0 || id > GPB_MAX_SITES)
    return gpb__fail(GPB_EFORMAT, "call site id %u is not 1 to %u", id,
                     GPB_MAX_SITES);
  if (n == 0) return gpb__fail(GPB_EFORMAT, "call site %u has no frames", id);
  if (id < t->cap && t->text[id]) {
    if (strlen(t->text[id]) == n && !memcmp(t->text[id], p, n)) return 0;
    return gpb__fail(GPB_EFORMAT, "call site %u is defined twice, "
                     "differently", id);
  }
  if (t->bytes + n > GPB__SITETAB_MAX) return 0; /* kept no more */
  char *c = malloc(n + 1);
  if (!c) return gpb__fail(GPB_EHOSTMEM, "no host memory for call sites");
  memcpy(c, p, n);
  c[n] = 0;
  if (strlen(c) != n) {
    free(c);
    return gpb__fail(GPB_EFORMAT, "call site %u: its frames hold a NUL byte",
                     id);
  }
  if (id >= t->cap) {
    uint32_t cap = t->cap ? t->cap : 64;
    while (cap <= id) cap *= 2;
    char **v = realloc(t->text, cap * sizeof *v);
    if (!v) {
      free(c);
      return gpb__fail(GPB_EHOSTMEM, "no host memory for call sites");
    }
    memset(v + t->cap, 0, (cap - t->cap) * sizeof *v);
    t->text = v;
    t->cap = cap;
  }
  t->text[id] = c;
  t->bytes += n;
  return 0;
}

void gpb__sitetab_free(gpb__sitetab_t *t) {
  for (uint32_t i = 0; i < t->cap; i++) free(t->text[i]);
  free(t->text);
  memset(t, 0, sizeof *t);
}

const char *gpb__sitetab_get(const gpb__sitetab_t *t, uint32_t id) {
  return id < t->cap ? t->text[id] : NULL;
}
