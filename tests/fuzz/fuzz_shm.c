/* SPDX-License-Identifier: MIT */
/*
 * fuzz_shm.c: libFuzzer target for the shared-memory reader. Each input is
 * written as a live segment (/dev/shm/gpubuddy.fuzz-shm-PID) and read the
 * way gpubuddy-view and gpubuddy-stat read one: gpb_attach_open, a few
 * polls, the model's stats, close. The reader treats the segment as
 * hostile, so any input must end in a clean error or a consistent model,
 * never a crash or a sanitizer report.
 *
 * The seed is a real segment: LLVMFuzzerInitialize publishes a small pool
 * (a 16-slot ring and 64-record keyframes, so it is 9 KiB) from this
 * process, whose pid therefore stays alive in the header, and copies it
 * to GPB_FUZZ_SEEDS/ when that is set.
 */
#include "gpubuddy.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char name[64], path[128];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  snprintf(name, sizeof name, "fuzz-shm-%d", (int)getpid());
  snprintf(path, sizeof path, "/dev/shm/gpubuddy.%s", name);
  setenv("GPB_PUBLISH_RING", "16", 1);
  setenv("GPB_PUBLISH_KEYFRAME", "64", 1);
  const char *seeds = getenv("GPB_FUZZ_SEEDS");
  if (!seeds) return 0;
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = 1 << 20;
  cfg.min_block = 4096;
  cfg.name = name;
  gpb_pool_t *p;
  if (gpb_pool_create(&cfg, &p)) return 0;
  void *v[8];
  for (int i = 0; i < 8; i++) gpb_alloc(p, 4096u << (i % 3), &v[i]);
  for (int i = 0; i < 8; i += 2) gpb_free(p, v[i]);
  gpb_attach_t *a; /* a reader asks for a keyframe: the seed has one */
  if (gpb_attach_open(name, &a) == 0) {
    for (int i = 0; i < 3; i++) gpb_attach_poll(a), gpb_alloc(p, 4096, &v[0]);
    gpb_attach_close(a);
  }
  char out[4096];
  snprintf(out, sizeof out, "%s/segment", seeds);
  mkdir(seeds, 0755);
  FILE *in = fopen(path, "rb"), *o = fopen(out, "wb");
  char buf[65536];
  size_t n;
  while (in && o && (n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, o);
  if (in) fclose(in);
  if (o) fclose(o);
  gpb_pool_destroy(p); /* the pid in the copy is still ours: alive */
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return 0;
  if (write(fd, data, size) != (ssize_t)size) {
    close(fd);
    unlink(path);
    return 0;
  }
  close(fd);
  gpb_attach_t *a;
  if (gpb_attach_open(name, &a) == 0) {
    for (int i = 0; i < 3; i++)
      if (gpb_attach_poll(a) < 0) break;
    gpb_stats_t s;
    gpb_model_stats(gpb_attach_model(a), &s);
    gpb_attach_close(a);
  }
  unlink(path);
  return 0;
}
