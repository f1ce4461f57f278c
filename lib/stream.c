/* stream.c: stream-ordered free. Placeholder (issue 5): frees at once. */
#include "internal.h"

int gpb_free_async(gpb_pool_t *pool, void *ptr, void *stream) {
  (void)stream;
  return gpb_free(pool, ptr);
}
