/* SPDX-License-Identifier: MIT */
/*
 * sitetab.c: call site texts by id, as a reader takes them in: the trace
 * reader from "# site" lines, live readers from a segment's site table
 * or a relay's SITES frames. Every text is checked, copied once, kept
 * until the reader closes, and the whole table is bounded
 * (GPB__SITETAB_MAX bytes), whatever the source says.
 *
 * A v3 trace defines each frame text once ("# frame FID TEXT") and each
 * site as a list of frame ids ("# stack SID FID ...", continued by
 * "# stack+ FID ..." lines, so a stack of any depth fits lines of 4096
 * bytes). The table keeps the frames once and a site's joined text, so
 * readers see v2's "FRAME;FRAME" either way.
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
  if (t->bytes + n > GPB__SITETAB_MAX) { /* kept no more */
    t->full = 1;
    return 0;
  }
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
  for (uint32_t i = 0; i < t->fcap; i++) free(t->frame[i]);
  free(t->frame);
  memset(t, 0, sizeof *t);
}

const char *gpb__sitetab_get(const gpb__sitetab_t *t, uint32_t id) {
  return id < t->cap ? t->text[id] : NULL;
}

/* ---------------------------------------------------------- v3 frames */

/* Grows an array of strings to hold index id. 0, or -1 without memory. */
static int sitetab_grow(char ***v, uint32_t *cap, uint32_t id) {
  if (id < *cap) return 0;
  uint32_t n = *cap ? *cap : 64;
  while (n <= id) n *= 2;
  char **w = realloc(*v, n * sizeof *w);
  if (!w) return -1;
  memset(w + *cap, 0, (n - *cap) * sizeof *w);
  *v = w;
  *cap = n;
  return 0;
}

/* The decimal id at *p (1 to max), *p moved past it and its blanks. */
static int sitetab_id(const char **p, uint32_t max, uint32_t *id) {
  const char *s = *p;
  uint64_t v = 0;
  size_t n = 0;
  while (s[n] >= '0' && s[n] <= '9' && n < 12) v = v * 10 + (uint64_t)(s[n++] - '0');
  if (!n || v == 0 || v > max || (s[n] && s[n] != ' ' && s[n] != '\t'))
    return -1;
  for (s += n; *s == ' ' || *s == '\t';) s++;
  *p = s;
  *id = (uint32_t)v;
  return 0;
}

/* "FID TEXT": one frame, kept once however many stacks use it. */
static int sitetab_frame(gpb__sitetab_t *t, const char *p) {
  uint32_t id;
  if (sitetab_id(&p, GPB__FRAME_MAX, &id))
    return gpb__fail(GPB_EFORMAT, "frame id is not 1 to %u", GPB__FRAME_MAX);
  size_t n = strlen(p);
  if (!n || strchr(p, ';'))
    return gpb__fail(GPB_EFORMAT, "frame %u is empty or holds a ';'", id);
  if (id < t->fcap && t->frame[id]) {
    if (!strcmp(t->frame[id], p)) return 0;
    return gpb__fail(GPB_EFORMAT, "frame %u is defined twice, differently",
                     id);
  }
  if (t->bytes + n > GPB__SITETAB_MAX) {
    t->full = 1;
    return 0;
  }
  char *c = malloc(n + 1);
  if (c) memcpy(c, p, n + 1);
  if (!c || sitetab_grow(&t->frame, &t->fcap, id)) {
    free(c);
    return gpb__fail(GPB_EHOSTMEM, "no host memory for call sites");
  }
  t->frame[id] = c;
  t->bytes += n;
  return 0;
}

/* The frames "FID FID ..." at p joined with ';' (after a ';' when
 * sep): a new string, or NULL with *rc set (0: a frame was not kept). */
static char *sitetab_join(const gpb__sitetab_t *t, const char *p, int sep,
                          int *rc) {
  size_t len = 0, cap = 256;
  if (!*p) {
    *rc = gpb__fail(GPB_EFORMAT, "a stack line lists no frames");
    return NULL;
  }
  char *b = malloc(cap);
  *rc = GPB_EHOSTMEM;
  while (b && *p) {
    uint32_t id;
    if (sitetab_id(&p, GPB__FRAME_MAX, &id)) {
      *rc = gpb__fail(GPB_EFORMAT, "frame id is not 1 to %u", GPB__FRAME_MAX);
      break;
    }
    const char *f = id < t->fcap ? t->frame[id] : NULL;
    if (!f) {
      *rc = t->full ? 0 : gpb__fail(GPB_EFORMAT, "frame %u is not defined",
                                    id);
      break;
    }
    size_t n = strlen(f);
    if (len + n + 2 > cap) {
      while (len + n + 2 > cap) cap *= 2;
      char *nb = realloc(b, cap);
      if (!nb) break;
      b = nb;
    }
    if (len || sep) b[len++] = ';';
    memcpy(b + len, f, n);
    len += n;
    b[len] = 0;
    if (!*p) return b;
  }
  if (*rc == GPB_EHOSTMEM)
    gpb__fail(GPB_EHOSTMEM, "no host memory for call sites");
  free(b);
  return NULL;
}

/* "stack+ FID ...": more frames of the last stack. */
static int sitetab_more(gpb__sitetab_t *t, const char *p) {
  if (!t->last || t->last >= t->cap || !t->text[t->last])
    return t->full ? 0 : gpb__fail(GPB_EFORMAT, "a 'stack+' line follows "
                                   "no 'stack' line");
  int rc;
  char *more = sitetab_join(t, p, 1, &rc);
  if (!more) return rc;
  size_t a = strlen(t->text[t->last]), n = strlen(more);
  char *c = NULL;
  if (t->bytes + n <= GPB__SITETAB_MAX && (c = realloc(t->text[t->last],
                                                       a + n + 1))) {
    memcpy(c + a, more, n + 1);
    t->text[t->last] = c;
    t->bytes += n;
  }
  free(more);
  if (!c && t->bytes + n <= GPB__SITETAB_MAX)
    return gpb__fail(GPB_EHOSTMEM, "no host memory for call sites");
  if (!c) t->full = 1; /* the stack keeps its first frames */
  return 0;
}

int gpb__sitetab_line(gpb__sitetab_t *t, int kind, const char *p) {
  while (*p == ' ' || *p == '\t') p++;
  if (kind == 0) return sitetab_frame(t, p);
  if (kind == 2) return sitetab_more(t, p);
  uint32_t id;
  if (sitetab_id(&p, GPB_MAX_SITES, &id))
    return gpb__fail(GPB_EFORMAT, "call site id is not 1 to %u",
                     GPB_MAX_SITES);
  int defined = id < t->cap && t->text[id];
  int rc;
  char *s = sitetab_join(t, p, 0, &rc);
  t->last = 0;
  if (!s) return rc;
  rc = gpb__sitetab_set(t, id, s, strlen(s));
  free(s);
  /* A stack defined again (the same) takes no "stack+" lines. */
  if (!rc && !defined && id < t->cap && t->text[id]) t->last = id;
  return rc;
}
