/* SPDX-License-Identifier: MIT */
/*
 * test_live_garbled.c: a reader treats a live segment as hostile.
 *
 * It copies a real segment (from a named pool in this process) into fake
 * ones under other names, breaks them on purpose (bad magic, version,
 * sizes larger than the file, truncated files, random bytes, random
 * flips in the header, ring and keyframes), and checks that every one is
 * refused with GPB_EFORMAT or GPB_EVERSION and a detail, or, where the
 * damage is not visible in the header, that polling never crashes and the
 * model stays consistent. Offsets are those documented in docs/LIVE.md.
 */
#include "testutil.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Header offsets (docs/LIVE.md). */
#define OFF_MAGIC 0
#define OFF_VERSION 8
#define OFF_HDRSIZE 12
#define OFF_SLOTSIZE 16
#define OFF_NSLOTS 20
#define OFF_KFCAP 40
#define OFF_KFOFF0 48
#define OFF_KFOFF1 56
#define OFF_TOTAL 64
#define OFF_MINBLOCK 104
#define OFF_NAME 136
#define HDR 4096

static char g_src[64], g_fake[64];

static void put_u32(unsigned char *b, size_t off, uint32_t v) {
  memcpy(b + off, &v, sizeof v);
}
static void put_u64(unsigned char *b, size_t off, uint64_t v) {
  memcpy(b + off, &v, sizeof v);
}
static uint64_t get_u64(const unsigned char *b, size_t off) {
  uint64_t v;
  memcpy(&v, b + off, sizeof v);
  return v;
}

static void write_fake(const unsigned char *bytes, size_t n) {
  char path[96];
  snprintf(path, sizeof path, "/gpubuddy.%s", g_fake);
  shm_unlink(path);
  int fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT(fd >= 0);
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, bytes + done, n - done);
    ASSERT(w > 0);
    done += (size_t)w;
  }
  close(fd);
}

static void drop_fake(void) {
  char path[96];
  snprintf(path, sizeof path, "/gpubuddy.%s", g_fake);
  shm_unlink(path);
}

/* A copy of the source segment renamed to the fake name. */
static unsigned char *copy_source(size_t *n) {
  char path[96];
  snprintf(path, sizeof path, "/gpubuddy.%s", g_src);
  int fd = shm_open(path, O_RDONLY, 0);
  ASSERT(fd >= 0);
  struct stat st;
  ASSERT(fstat(fd, &st) == 0);
  *n = (size_t)st.st_size;
  unsigned char *b = malloc(*n);
  ASSERT(b);
  ASSERT(pread(fd, b, *n, 0) == (ssize_t)*n);
  close(fd);
  memset(b + OFF_NAME, 0, GPB_NAME_MAX);
  memcpy(b + OFF_NAME, g_fake, strlen(g_fake));
  return b;
}

static void expect_refused(const unsigned char *b, size_t n, int code,
                           const char *what) {
  write_fake(b, n);
  gpb_attach_t *a = NULL;
  int rc = gpb_attach_open(g_fake, &a);
  if (rc != code)
    FAILF("%s: attach returned %s (%s), expected %s", what, gpb_err_name(rc),
          gpb_last_error_detail(), gpb_err_name(code));
  ASSERT(a == NULL);
  ASSERT(strlen(gpb_last_error_detail()) > 0);
  printf("  %-34s %s: %s\n", what, gpb_err_name(rc), gpb_last_error_detail());
  drop_fake();
}

static int g_listed;
static void list_cb(const char *name, void *user) {
  (void)user;
  if (!strcmp(name, g_fake)) g_listed++;
}

/* Opens and polls a damaged copy: any result is fine but a crash, and a
 * model that holds a state must be a consistent one. */
static int try_damaged(const unsigned char *b, size_t n) {
  write_fake(b, n);
  gpb_attach_t *a = NULL;
  int rc = gpb_attach_open(g_fake, &a);
  if (rc == 0) {
    for (int i = 0; i < 3 && rc >= 0; i++) rc = gpb_attach_poll(a);
    const gpb_model_t *m = gpb_attach_model(a);
    gpb_stats_t s;
    ASSERT_OK(gpb_model_stats(m, &s));
    ASSERT(s.free_bytes + s.block_bytes == s.managed_bytes);
    gpb_attach_close(a);
  } else {
    ASSERT(a == NULL);
  }
  g_listed = 0;
  ASSERT_OK(gpb_list_pools(list_cb, NULL));
  drop_fake();
  return rc;
}

int main(void) {
  uint64_t seed = test_seed(), rng = seed | 1;
  double scale = test_scale();
  snprintf(g_src, sizeof g_src, "t-garb-%d", (int)getpid());
  snprintf(g_fake, sizeof g_fake, "t-garb-%d-fake", (int)getpid());

  /* A real segment with history in its ring and a keyframe. */
  setenv("GPB_PUBLISH_RING", "256", 1);
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_HOST;
  cfg.pool_size = (size_t)1 << 20;
  cfg.name = g_src;
  cfg.flags = GPB_CFG_NO_ENV;
  gpb_pool_t *pool;
  ASSERT_OK(gpb_pool_create(&cfg, &pool));
  gpb_attach_t *reader;
  ASSERT_OK(gpb_attach_open(g_src, &reader));
  void *p[64] = {0};
  for (int i = 0; i < 2000; i++) {
    int k = (int)rng_below(&rng, 64);
    if (p[k]) {
      ASSERT_OK(gpb_free(pool, p[k]));
      p[k] = NULL;
    } else {
      (void)gpb_alloc(pool, 1 + rng_below(&rng, 8192), &p[k]);
    }
    if (i == 1500) ASSERT(gpb_attach_poll(reader) >= 0); /* asks a keyframe */
  }
  ASSERT(gpb_attach_poll(reader) >= 0);

  size_t n;
  unsigned char *good = copy_source(&n);
  unsigned char *b = malloc(n);
  ASSERT(b);

  /* The untouched copy attaches: the baseline the cases below break. */
  write_fake(good, n);
  gpb_attach_t *a;
  ASSERT_OK(gpb_attach_open(g_fake, &a));
  g_listed = 0;
  ASSERT_OK(gpb_list_pools(list_cb, NULL));
  ASSERT_EQ(g_listed, 1);
  gpb_attach_close(a);
  drop_fake();

  printf("refused as expected:\n");
  memcpy(b, good, n);
  b[OFF_MAGIC] ^= 0xff;
  expect_refused(b, n, GPB_EFORMAT, "bad magic");

  memcpy(b, good, n);
  put_u32(b, OFF_VERSION, 3); /* a newer writer's */
  expect_refused(b, n, GPB_EVERSION, "version 3");

  memcpy(b, good, n);
  put_u32(b, OFF_VERSION, 0);
  expect_refused(b, n, GPB_EVERSION, "version 0");

  memcpy(b, good, n);
  put_u32(b, OFF_HDRSIZE, 8192);
  expect_refused(b, n, GPB_EFORMAT, "header size");

  memcpy(b, good, n);
  put_u32(b, OFF_SLOTSIZE, 32);
  expect_refused(b, n, GPB_EFORMAT, "slot size");

  memcpy(b, good, n);
  put_u32(b, OFF_NSLOTS, 1000);
  expect_refused(b, n, GPB_EFORMAT, "ring not a power of two");

  /* Consistent sizes that describe a larger file than there is. */
  memcpy(b, good, n);
  uint64_t ns = 1u << 20, cap = get_u64(good, OFF_KFCAP);
  put_u32(b, OFF_NSLOTS, (uint32_t)ns);
  put_u64(b, OFF_KFOFF0, HDR + ns * 64);
  put_u64(b, OFF_KFOFF1, HDR + ns * 64 + cap * 32);
  put_u64(b, OFF_TOTAL, HDR + ns * 64 + 2 * cap * 32);
  expect_refused(b, n, GPB_EFORMAT, "sizes larger than the file");

  memcpy(b, good, n);
  put_u64(b, OFF_KFCAP, (uint64_t)1 << 40);
  expect_refused(b, n, GPB_EFORMAT, "keyframe capacity");

  memcpy(b, good, n);
  put_u64(b, OFF_MINBLOCK, 0);
  expect_refused(b, n, GPB_EFORMAT, "min block 0");

  memcpy(b, good, n);
  b[OFF_NAME] ^= 1;
  expect_refused(b, n, GPB_EFORMAT, "name mismatch");

  expect_refused(good, n / 2, GPB_EFORMAT, "truncated to half");
  expect_refused(good, 100, GPB_EFORMAT, "truncated to 100 bytes");
  expect_refused(good, 0, GPB_EFORMAT, "empty file");

  int iters = (int)(200 * scale) + 20;
  for (int i = 0; i < iters; i++) {
    size_t len = (size_t)rng_below(&rng, 3 * HDR);
    for (size_t x = 0; x < len; x++) b[x] = (unsigned char)rng_next(&rng);
    write_fake(b, len);
    ASSERT_ERR(gpb_attach_open(g_fake, &a), GPB_EFORMAT);
    drop_fake();
  }
  printf("  %-34s GPB_EFORMAT (%d files)\n", "random bytes", iters);

  /* Random flips anywhere in the header, ring or keyframes. */
  int outcomes[3] = {0, 0, 0}; /* opened and polled fine, refused, other */
  for (int i = 0; i < iters; i++) {
    memcpy(b, good, n);
    int flips = 1 + (int)rng_below(&rng, 8);
    for (int f = 0; f < flips; f++) {
      size_t at = rng_below(&rng, 2) ? (size_t)rng_below(&rng, HDR)
                                     : (size_t)rng_below(&rng, n);
      b[at] ^= (unsigned char)(1u << rng_below(&rng, 8));
    }
    int rc = try_damaged(b, n);
    outcomes[rc >= 0 ? 0 : (rc == GPB_EFORMAT || rc == GPB_EVERSION) ? 1 : 2]++;
  }
  printf("  %-34s %d fine, %d refused, %d other errors\n", "random flips",
         outcomes[0], outcomes[1], outcomes[2]);

  /* Garbage in every ring slot and keyframe record under a good header. */
  for (int i = 0; i < iters / 4 + 1; i++) {
    memcpy(b, good, n);
    for (size_t x = HDR; x < n; x++)
      if (rng_below(&rng, 4) == 0) b[x] = (unsigned char)rng_next(&rng);
    (void)try_damaged(b, n);
  }
  printf("  %-34s no crash\n", "garbage ring and keyframes");

  gpb_attach_close(reader);
  gpb_pool_destroy(pool);
  free(good);
  free(b);
  printf("ok\n");
  return 0;
}
