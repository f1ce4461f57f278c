/* SPDX-License-Identifier: MIT */
/*
 * attach.c: the public face of live readers. A reader is a block-map model
 * kept current by a transport: shared memory on the same host, or TCP
 * through gpubuddy-relay. Everything after the transport (the viewer,
 * gpubuddy-stat) goes through these calls, so both look the same.
 */
#include "live/live.h"

#include <stdlib.h>
#include <string.h>

int gpb_attach_open(const char *name, gpb_attach_t **out) {
  if (!out) return gpb__fail(GPB_EINVAL, "out is NULL");
  *out = NULL;
  if (!name || !*name) return gpb__fail(GPB_EINVAL, "empty pool name");
  gpb_attach_t *a = calloc(1, sizeof *a);
  if (!a) return GPB_EHOSTMEM;
  int rc = gpb__attach_shm_open(name, a);
  if (rc) {
    gpb__sitetab_free(&a->sites); /* taken in before open failed */
    free(a);
    return rc;
  }
  *out = a;
  return 0;
}

int gpb_attach_poll(gpb_attach_t *a) {
  if (!a) return gpb__fail(GPB_EINVAL, "reader is NULL");
  return a->ops->poll(a);
}

const gpb_model_t *gpb_attach_model(const gpb_attach_t *a) {
  return a ? a->model : NULL;
}

int gpb_attach_set_hook(gpb_attach_t *a, gpb_attach_hook_fn fn, void *user) {
  if (!a) return gpb__fail(GPB_EINVAL, "reader is NULL");
  a->hook = fn;
  a->hook_user = user;
  return 0;
}

int gpb_attach_info(const gpb_attach_t *a, gpb_pool_info_t *out) {
  if (!a || !out) return gpb__fail(GPB_EINVAL, "NULL argument");
  *out = a->info;
  return 0;
}

/* The table only reads its own copy, which a writer or relay cannot
 * change after the checks. */
int gpb__sitetab_set(gpb__sitetab_t *t, uint32_t id, const char *p, size_t n) {
  if (id == 0 || id > GPB_MAX_SITES)
    return gpb__fail(GPB_EFORMAT, "call site id %u is not 1 to %u", id,
                     GPB_MAX_SITES);
  if (n == 0) return gpb__fail(GPB_EFORMAT, "call site %u has no frames", id);
  if (id < t->cap && t->text[id]) {
    if (strlen(t->text[id]) == n && !memcmp(t->text[id], p, n)) return 0;
    return gpb__fail(GPB_EFORMAT, "call site %u is defined again, "
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

const char *gpb_attach_site(const gpb_attach_t *ca, uint32_t site) {
  if (!ca || site == 0 || site > GPB_MAX_SITES) return NULL;
  /* The reader's own, not const: a text published since the last poll
   * is taken in here (the table changes, the state the caller sees does
   * not). */
  gpb_attach_t *a = (gpb_attach_t *)ca;
  if ((site >= a->sites.cap || !a->sites.text[site]) && a->ops &&
      a->ops->sites)
    a->ops->sites(a);
  return site < a->sites.cap ? a->sites.text[site] : NULL;
}

void gpb_attach_close(gpb_attach_t *a) {
  if (!a) return;
  if (a->ops && a->ops->close) a->ops->close(a);
  gpb_model_destroy(a->model);
  gpb__sitetab_free(&a->sites);
  free(a);
}
