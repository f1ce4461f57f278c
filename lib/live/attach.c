/* SPDX-License-Identifier: MIT */
/*
 * attach.c: the public face of live readers. A reader is a block-map model
 * kept current by a transport: shared memory on the same host, or TCP
 * through gpubuddy-relay. Everything after the transport (the viewer,
 * gpubuddy-stat) goes through these calls, so both look the same.
 */
#include "live/live.h"

#include <stdlib.h>

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

const char *gpb_attach_site(const gpb_attach_t *ca, uint32_t site) {
  if (!ca || site == 0 || site > GPB_MAX_SITES) return NULL;
  /* The reader's own, not const: a text published since the last poll
   * is taken in here (the table changes, the state the caller sees does
   * not). */
  gpb_attach_t *a = (gpb_attach_t *)ca;
  if (!gpb__sitetab_get(&a->sites, site) && a->ops && a->ops->sites)
    a->ops->sites(a);
  return gpb__sitetab_get(&a->sites, site);
}

void gpb_attach_close(gpb_attach_t *a) {
  if (!a) return;
  if (a->ops && a->ops->close) a->ops->close(a);
  gpb_model_destroy(a->model);
  gpb__sitetab_free(&a->sites);
  free(a);
}
