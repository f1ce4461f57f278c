/* SPDX-License-Identifier: MIT */
/*
 * fuzz_trace.c: libFuzzer target for the trace readers (native text,
 * gzip-compressed native, RAPIDS RMM CSV).
 *
 * The readers take a path (they read through lib/trace/zin.c), so each
 * input is written to one in-memory file and read back to the end. Any
 * outcome but a crash, a sanitizer report or a leak is fine; the target
 * also checks the reader's own contract: an error comes with a message.
 * Built and run by tests/run-fuzzers.sh, with the library compiled with
 * the fuzzer's coverage so the parser is instrumented.
 */
#define _GNU_SOURCE
#include "gpubuddy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char fuzz_path[64];
static int fuzz_fd = -1;

/* Each input goes into one in-memory file (memfd), reopened by path. */
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  if (fuzz_fd < 0) {
    fuzz_fd = memfd_create("gpb-fuzz-trace", 0);
    if (fuzz_fd < 0) abort();
    snprintf(fuzz_path, sizeof fuzz_path, "/proc/self/fd/%d", fuzz_fd);
  }
  if (ftruncate(fuzz_fd, 0)) abort();
  size_t done = 0;
  while (done < size) {
    ssize_t n = pwrite(fuzz_fd, data + done, size - done, (off_t)done);
    if (n <= 0) abort();
    done += (size_t)n;
  }

  gpb_trace_reader_t *r;
  int rc = gpb_trace_open(fuzz_path, &r);
  if (rc) {
    if (r != NULL || !*gpb_last_error_detail()) abort();
    return 0;
  }
  gpb_trace_op_t op;
  unsigned long n = 0;
  while ((rc = gpb_trace_next(r, &op)) == 1) {
    if (op.op != GPB_OP_ALLOC && op.op != GPB_OP_FREE) abort();
    if (op.tag >= GPB_MAX_TAGS) abort();
    const char *site = gpb_trace_site(r, op.site); /* touched: ASan */
    if (site && !*site) abort(); /* a site has frames */
    n++;
  }
  if (rc < 0 && !*gpb_trace_error(r)) abort();
  if (rc < 0 && gpb_trace_next(r, &op) != rc) abort(); /* errors stick */
  (void)gpb_trace_format_name(r);
  gpb_trace_close(r);
  (void)n;
  return 0;
}
