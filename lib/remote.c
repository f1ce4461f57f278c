/* remote.c: placeholder until the TCP transport lands (issue 7). */
#include "internal.h"

int gpb_attach_connect(const char *hostport, const char *token,
                       gpb_attach_t **out) {
  (void)hostport, (void)token;
  if (out) *out = NULL;
  return gpb__fail(GPB_ENOTFOUND, "remote viewing is not built yet");
}
