/* SPDX-License-Identifier: MIT */
/*
 * fuzz_plan.c: libFuzzer target for the plan file parser (lib/plan/file.c,
 * gpb_plan_load).
 *
 * Each input is written to one in-memory file (memfd, a regular file)
 * and loaded by path. A load that fails must say why in one line and
 * return no plan; one that succeeds must hold entries with size > 0 and
 * no overflow, a periodic part inside the plan, and survive a save and a
 * load back entry for entry. Built by tests/run-fuzzers.sh with
 * lib/plan/file.c compiled in so the parser is instrumented.
 */
#define _GNU_SOURCE
#include "gpubuddy.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char fuzz_path[64], fuzz_dir[64], fuzz_out[80];
static int fuzz_fd = -1;

static void fuzz_cleanup(void) {
  unlink(fuzz_out);
  rmdir(fuzz_dir);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void fuzz_setup(void) {
  fuzz_fd = memfd_create("gpb-fuzz-plan", 0);
  if (fuzz_fd < 0) abort();
  snprintf(fuzz_path, sizeof fuzz_path, "/proc/self/fd/%d", fuzz_fd);
  snprintf(fuzz_dir, sizeof fuzz_dir, "/tmp/gpb-fuzz-plan-XXXXXX");
  if (!mkdtemp(fuzz_dir)) abort();
  snprintf(fuzz_out, sizeof fuzz_out, "%s/p.plan", fuzz_dir);
  atexit(fuzz_cleanup);
}

static void fuzz_check(const gpb_plan_t *p) {
  size_t n = gpb_plan_count(p), rf = gpb_plan_repeat_from(p);
  const gpb_plan_entry_t *e = gpb_plan_entries(p);
  if (rf > n) abort();
  uint64_t ext = 0;
  for (size_t i = 0; i < n; i++) {
    if (e[i].size == 0 || e[i].offset > UINT64_MAX - e[i].size) abort();
    if (e[i].offset + e[i].size > ext) ext = e[i].offset + e[i].size;
  }
  if (ext != gpb_plan_extent(p)) abort();
  gpb_plan_t *q;
  if (gpb_plan_save(p, fuzz_out) || gpb_plan_load(fuzz_out, &q)) abort();
  if (gpb_plan_count(q) != n || gpb_plan_repeat_from(q) != rf ||
      (n && memcmp(gpb_plan_entries(q), e, n * sizeof *e)))
    abort();
  gpb_plan_destroy(q);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  if (fuzz_fd < 0) fuzz_setup();
  if (ftruncate(fuzz_fd, 0)) abort();
  size_t done = 0;
  while (done < size) {
    ssize_t n = pwrite(fuzz_fd, data + done, size - done, (off_t)done);
    if (n <= 0) abort();
    done += (size_t)n;
  }
  gpb_plan_t *p = (gpb_plan_t *)1;
  int rc = gpb_plan_load(fuzz_path, &p);
  if (rc) {
    const char *d = gpb_last_error_detail();
    if (p != NULL || !*d || strchr(d, '\n')) abort();
    return 0;
  }
  fuzz_check(p);
  gpb_plan_destroy(p);
  return 0;
}
