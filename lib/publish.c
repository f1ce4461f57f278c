/* publish.c: placeholder until the live publisher lands (issue 3). */
#include "internal.h"

int gpb__pub_open(const char *name, const gpb_pool_info_t *info,
                  gpb__pub_t **out) {
  (void)name, (void)info;
  *out = NULL;
  return gpb__fail(GPB_ENOTFOUND, "live publishing is not built yet");
}
void gpb__pub_event(gpb__pub_t *p, const gpb_event_t *ev, const gpb_pool_t *pool) {
  (void)p, (void)ev, (void)pool;
}
void gpb__pub_close(gpb__pub_t *p) { (void)p; }
int gpb__attach_shm_open(const char *name, gpb_attach_t *a) {
  (void)name, (void)a;
  return GPB_ENOTFOUND;
}
int gpb_list_pools(void (*fn)(const char *, void *), void *user) { (void)fn, (void)user; return 0; }
