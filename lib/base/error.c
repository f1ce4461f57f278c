/* SPDX-License-Identifier: MIT */
/*
 * error.c: error codes, their names, and per-thread error details.
 *
 * Codes are small negative ints from one list in gpubuddy.h; the detail
 * string carries what a code alone cannot (sizes, line numbers, CUDA's own
 * text) without letting CUDA types cross the API.
 */
#include "base/base.h"

#include <stdio.h>

static _Thread_local char err_detail[512];

const char *gpb_strerror(int err) {
  switch (err) {
  case GPB_OK:
    return "success";
#define GPB__ERRSTR(code, val, msg) \
  case GPB_##code:                  \
    return msg;
    GPB_ERRNO_MAP(GPB__ERRSTR)
#undef GPB__ERRSTR
  default:
    return "unknown error";
  }
}

const char *gpb_err_name(int err) {
  switch (err) {
  case GPB_OK:
    return "GPB_OK";
#define GPB__ERRNAME(code, val, msg) \
  case GPB_##code:                   \
    return "GPB_" #code;
    GPB_ERRNO_MAP(GPB__ERRNAME)
#undef GPB__ERRNAME
  default:
    return "GPB_E?";
  }
}

const char *gpb_last_error_detail(void) { return err_detail; }

int gpb__fail(int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err_detail, sizeof err_detail, fmt, ap);
  va_end(ap);
  return err;
}
