/* SPDX-License-Identifier: MIT */
/*
 * fuzz_http.c: libFuzzer target for gpubuddy-relay's /metrics request
 * reader (tools/relay/http.c, gpbr_http_judge). Byte 0 picks the case:
 * bit 0, the client has closed (eof); bit 1, a token is required. The
 * rest is what the client sent. Besides no crash and no sanitizer report,
 * the target checks the judge's contract:
 *   - the answer is 0 (more bytes needed) or one of the statuses http.h
 *     lists, with a reason for every status but 200;
 *   - with eof it is never 0 (a closed client is answered or dropped);
 *   - at GPBR_HTTP_MAX bytes it is never 0 (the buffer is full);
 *   - a judgement, once made, stands when more bytes come (an answer
 *     sent early is not contradicted by what follows), checked on every
 *     prefix of short inputs.
 */
#include "http.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fuzz_http_known(int code) {
  switch (code) {
  case 0: case 200: case 400: case 401: case 404: case 405: case 431:
    return 1;
  default:
    return 0;
  }
}

static int fuzz_http_judge(const char *b, size_t n, int eof, const char *tok) {
  const char *why = NULL;
  int code = gpbr_http_judge(b, n, eof, tok, &why);
  if (!fuzz_http_known(code) || !why) abort();
  if (code != 0 && code != 200 && !*why) abort();
  if (eof && code == 0) abort();
  if (n >= GPBR_HTTP_MAX && code == 0) abort();
  return code;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  int eof = data[0] & 1;
  const char *tok = data[0] & 2 ? "s3cret" : NULL;
  size_t n = size - 1;
  if (n > GPBR_HTTP_MAX) n = GPBR_HTTP_MAX;
  /* A copy of exactly n bytes, so ASan sees any read past them. */
  char *b = malloc(n ? n : 1);
  if (!b) return 0;
  memcpy(b, data + 1, n);
  int code = fuzz_http_judge(b, n, eof, tok);
  if (n <= 512) {
    int first = 0;
    for (size_t k = 0; k <= n; k++) {
      int c = fuzz_http_judge(b, k, 0, tok);
      if (first && c != first) abort(); /* changed its mind */
      if (!first) first = c;
    }
    if (first && code != first) abort();
  }
  free(b);
  return 0;
}
