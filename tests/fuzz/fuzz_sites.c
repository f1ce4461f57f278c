/* SPDX-License-Identifier: MIT */
/*
 * fuzz_sites.c: libFuzzer target for the call-site tables readers fill
 * from data they do not trust (lib/trace/sitetab.c), through both ways
 * in. Byte 0 picks one:
 *   - even: a trace. The rest follows a v2 header ("# site ID FRAMES"
 *     lines and ops that name sites); every op's site text is touched.
 *   - odd: a live segment. The rest overwrites the site table of a real
 *     segment of a pool that records call sites (built at start: a
 *     16-slot ring, 64-record keyframes, the least table, 8 KiB), which
 *     is then attached, polled and asked for every id.
 * Any outcome but a crash or a sanitizer report is fine; a text handed
 * out must be non-empty and end where strlen says.
 * GPB_FUZZ_SEEDS=DIR writes one seed of each kind there.
 */
#define _GNU_SOURCE
#include "gpubuddy.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char name[64], path[128], trace_path[64];
static unsigned char *seg; /* the segment as its writer left it */
static size_t seg_size;
static uint64_t sites_off, sites_size;

/* Three call sites, each its own frames. */
__attribute__((noinline)) static void fuzz_site_a(gpb_pool_t *p, void **v) {
  gpb_alloc(p, 4096, v);
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void fuzz_site_b(gpb_pool_t *p, void **v) {
  gpb_alloc(p, 8192, v);
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void fuzz_site_c(gpb_pool_t *p, void **v) {
  gpb_alloc(p, 16384, v);
  __asm__ volatile("" ::: "memory");
}

static void fuzz_seed(const char *dir, const char *file, const void *a,
                      size_t an, const void *b, size_t bn) {
  char out[4096];
  snprintf(out, sizeof out, "%s/%s", dir, file);
  mkdir(dir, 0755);
  FILE *f = fopen(out, "wb");
  if (!f) return;
  fwrite(a, 1, an, f);
  fwrite(b, 1, bn, f);
  fclose(f);
}

/* Publishes a pool with call sites and keeps its segment's bytes. */
static void fuzz_make_segment(void) {
  setenv("GPB_PUBLISH_RING", "16", 1);
  setenv("GPB_PUBLISH_KEYFRAME", "64", 1);
  setenv("GPB_PUBLISH_SITES", "8192", 1);
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = 1 << 20;
  cfg.min_block = 4096;
  cfg.name = name;
  cfg.flags = GPB_CFG_NO_ENV | GPB_CFG_CALLSITES;
  gpb_pool_t *p;
  if (gpb_pool_create(&cfg, &p)) return;
  void *v[3];
  fuzz_site_a(p, &v[0]);
  fuzz_site_b(p, &v[1]);
  fuzz_site_c(p, &v[2]);
  int fd = open(path, O_RDONLY);
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 216 &&
      (seg = malloc((size_t)st.st_size)) &&
      read(fd, seg, (size_t)st.st_size) == st.st_size) {
    seg_size = (size_t)st.st_size;
    memcpy(&sites_off, seg + 200, 8);
    memcpy(&sites_size, seg + 208, 8);
    if (sites_off + sites_size > seg_size) sites_size = 0;
  }
  if (fd >= 0) close(fd);
  gpb_pool_destroy(p); /* the copy keeps our pid: a live writer */
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  snprintf(name, sizeof name, "fuzz-sites-%d", (int)getpid());
  snprintf(path, sizeof path, "/dev/shm/gpubuddy.%s", name);
  snprintf(trace_path, sizeof trace_path, "/tmp/fuzz-sites-%d.trace",
           (int)getpid());
  fuzz_make_segment();
  const char *dir = getenv("GPB_FUZZ_SEEDS");
  if (dir) {
    static const char t[] =
        "\0# site 1 main (a.c:10);run (b.c:20)\n"
        "# site 2 step (c.py:3)\n"
        "1 0 alloc 0x0 4096 0 0 1\n2 5 alloc 0x1000 64 0 0 2\n"
        "3 9 fail 0x0 1048576 0 0x0 2\n4 12 free 0x0 0 0 0\n";
    fuzz_seed(dir, "trace", t, sizeof t - 1, NULL, 0);
    if (sites_size)
      fuzz_seed(dir, "live", "\1", 1, seg + sites_off, (size_t)sites_size);
  }
  return 0;
}

static void fuzz_text(const char *t) {
  if (t && (!*t || strlen(t) > 8192)) abort();
}

static void fuzz_trace_case(const uint8_t *data, size_t size) {
  static const char hdr[] = "# gpubuddy-trace v2\n";
  FILE *f = fopen(trace_path, "wb");
  if (!f) return;
  fwrite(hdr, 1, sizeof hdr - 1, f);
  fwrite(data, 1, size, f);
  fclose(f);
  gpb_trace_reader_t *r;
  if (gpb_trace_open(trace_path, &r) == 0) {
    gpb_trace_op_t op;
    while (gpb_trace_next(r, &op) == 1) fuzz_text(gpb_trace_site(r, op.site));
    for (uint32_t id = 0; id < 8; id++) fuzz_text(gpb_trace_site(r, id));
    gpb_trace_close(r);
  }
  unlink(trace_path);
}

static void fuzz_live_case(const uint8_t *data, size_t size) {
  if (!sites_size) return;
  unsigned char *b = malloc(seg_size);
  if (!b) return;
  memcpy(b, seg, seg_size);
  memcpy(b + sites_off, data, size < sites_size ? size : (size_t)sites_size);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  int ok = fd >= 0 && write(fd, b, seg_size) == (ssize_t)seg_size;
  if (fd >= 0) close(fd);
  free(b);
  gpb_attach_t *a;
  if (ok && gpb_attach_open(name, &a) == 0) {
    for (int i = 0; i < 2; i++)
      if (gpb_attach_poll(a) < 0) break;
    for (uint32_t id = 0; id < 70; id++) fuzz_text(gpb_attach_site(a, id));
    gpb_attach_close(a);
  }
  unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  if (data[0] & 1) fuzz_live_case(data + 1, size - 1);
  else fuzz_trace_case(data + 1, size - 1);
  return 0;
}
