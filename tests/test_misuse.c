/* SPDX-License-Identifier: MIT */
/*
 * test_misuse.c: every kind of misuse gets its own error code, a detail
 * message, and leaves the pool intact and usable.
 */
#include "testutil.h"

static gpb_pool_t *make(gpb_backend_t be, size_t size, gpb_policy_t pol) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.flags = GPB_CFG_NO_ENV;
  cfg.backend = be;
  cfg.pool_size = size;
  cfg.policy = pol;
  gpb_pool_t *p;
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  return p;
}

/* The pool still works: check passes and a full fill-and-free cycle runs. */
static void still_usable(gpb_pool_t *p, const gpb_stats_t *before) {
  ASSERT_OK(gpb_pool_check(p));
  gpb_stats_t s;
  ASSERT_OK(gpb_pool_stats(p, &s));
  ASSERT_U64_EQ(s.live_allocs, before->live_allocs);
  ASSERT_U64_EQ(s.free_bytes, before->free_bytes);
  void *q;
  ASSERT_OK(gpb_alloc(p, 256, &q));
  ASSERT_OK(gpb_free(p, q));
  ASSERT_OK(gpb_pool_check(p));
}

static void expect_detail(void) {
  ASSERT(strlen(gpb_last_error_detail()) > 0);
}

static void misuse(gpb_backend_t be, gpb_policy_t pol) {
  gpb_pool_t *p = make(be, 1 << 20, pol);
  gpb_stats_t st;
  void *a, *b, *c;
  ASSERT_OK(gpb_alloc(p, 1000, &a));
  ASSERT_OK(gpb_alloc(p, 5000, &b));
  ASSERT_OK(gpb_alloc(p, 300, &c));
  ASSERT_OK(gpb_free(p, c));
  ASSERT_OK(gpb_pool_stats(p, &st));

  /* Double free: c is gone already. */
  ASSERT_ERR(gpb_free(p, c), GPB_EDOUBLEFREE);
  expect_detail();
  still_usable(p, &st);

  /* Foreign pointers: below, above, and from another pool or the stack. */
  int on_stack;
  ASSERT_ERR(gpb_free(p, &on_stack), GPB_EFOREIGN);
  expect_detail();
  ASSERT_ERR(gpb_free(p, (char *)a - 1), GPB_EFOREIGN);
  gpb_pool_info_t info;
  ASSERT_OK(gpb_pool_info(p, &info));
  ASSERT_ERR(gpb_free(p, (char *)info.base + info.managed_size), GPB_EFOREIGN);
  gpb_pool_t *other = make(be, 1 << 16, pol);
  void *o;
  ASSERT_OK(gpb_alloc(other, 64, &o));
  ASSERT_ERR(gpb_free(p, o), GPB_EFOREIGN);
  ASSERT_OK(gpb_free(other, o));
  gpb_pool_destroy(other);
  still_usable(p, &st);

  /* Interior pointers: unaligned, and aligned but past the start. */
  ASSERT_ERR(gpb_free(p, (char *)b + 1), GPB_EINTERIOR);
  expect_detail();
  ASSERT_ERR(gpb_free(p, (char *)b + 256), GPB_EINTERIOR);
  ASSERT_ERR(gpb_free(p, (char *)b + 4096), GPB_EINTERIOR);
  size_t us;
  ASSERT_ERR(gpb_usable_size(p, (char *)b + 256, &us), GPB_EINTERIOR);
  still_usable(p, &st);

  /* Sizes: larger than the pool, far larger, SIZE_MAX. */
  void *x = (void *)1;
  ASSERT_ERR(gpb_alloc(p, info.managed_size + 1, &x), GPB_ETOOBIG);
  ASSERT(x == NULL);
  expect_detail();
  ASSERT_ERR(gpb_alloc(p, SIZE_MAX, &x), GPB_ETOOBIG);
  ASSERT_ERR(gpb_alloc(p, SIZE_MAX - 255, &x), GPB_ETOOBIG);
  /* Fits the pool but not what is free now. */
  ASSERT_ERR(gpb_alloc(p, info.managed_size, &x), GPB_ENOMEM);
  still_usable(p, &st);
  gpb_stats_t after;
  ASSERT_OK(gpb_pool_stats(p, &after));
  ASSERT(after.failures >= 4);

  /* Alignment: not a power of two, larger than the pool. */
  ASSERT_ERR(gpb_alloc_aligned(p, 64, 3, &x), GPB_EALIGN);
  expect_detail();
  ASSERT_ERR(gpb_alloc_aligned(p, 64, 768, &x), GPB_EALIGN);
  ASSERT_ERR(gpb_alloc_aligned(p, 64, (size_t)1 << 40, &x), GPB_EALIGN);
  ASSERT_OK(gpb_alloc_aligned(p, 64, 65536, &x));
  ASSERT((uintptr_t)x % 65536 == 0);
  ASSERT_OK(gpb_free(p, x));
  still_usable(p, &st);

  /* Tags out of range. */
  ASSERT_ERR(gpb_alloc_tagged(p, 64, GPB_MAX_TAGS, &x), GPB_EINVAL);
  still_usable(p, &st);

  /* Size 0: success, NULL, nothing recorded; freeing NULL is a no-op. */
  x = (void *)1;
  ASSERT_OK(gpb_alloc(p, 0, &x));
  ASSERT(x == NULL);
  ASSERT_OK(gpb_free(p, NULL));
  still_usable(p, &st);

  /* NULL arguments. */
  ASSERT_ERR(gpb_alloc(NULL, 64, &x), GPB_EINVAL);
  ASSERT_ERR(gpb_alloc(p, 64, NULL), GPB_EINVAL);
  ASSERT_ERR(gpb_free(NULL, a), GPB_EINVAL);

  ASSERT_OK(gpb_free(p, a));
  ASSERT_OK(gpb_free(p, b));
  ASSERT_ERR(gpb_free(p, a), GPB_EDOUBLEFREE);
  ASSERT_OK(gpb_pool_check(p));
  gpb_pool_destroy(p);
}

static void bad_configs(void) {
  gpb_config_t cfg;
  gpb_pool_t *p = (gpb_pool_t *)1;
  gpb_config_init(&cfg);
  cfg.flags = GPB_CFG_NO_ENV;
  cfg.backend = GPB_BACKEND_HOST;
  cfg.min_block = 100;
  ASSERT_ERR(gpb_pool_create(&cfg, &p), GPB_EINVAL);
  ASSERT(p == NULL);
  cfg.min_block = 8;
  ASSERT_ERR(gpb_pool_create(&cfg, &p), GPB_EINVAL);
  cfg.min_block = 256;
  cfg.pool_size = 100;
  ASSERT_ERR(gpb_pool_create(&cfg, &p), GPB_EINVAL);
  cfg.pool_size = 1 << 20;
  cfg.name = "";
  ASSERT_ERR(gpb_pool_create(&cfg, &p), GPB_EINVAL);
  cfg.name = NULL;
  cfg.backend = (gpb_backend_t)42;
  ASSERT_ERR(gpb_pool_create(&cfg, &p), GPB_EINVAL);
  ASSERT_ERR(gpb_pool_create(&cfg, NULL), GPB_EINVAL);

  /* Device and pinned backends without a usable GPU: a clear code. */
  cfg.backend = GPB_BACKEND_DEVICE;
  int rc = gpb_pool_create(&cfg, &p);
  if (rc == 0) {
    /* A GPU is here: a pool far beyond its memory must name both sizes. */
    gpb_pool_destroy(p);
    cfg.pool_size = (size_t)1 << 50;
    ASSERT_ERR(gpb_pool_create(&cfg, &p), GPB_EDEVMEM);
    ASSERT(strstr(gpb_last_error_detail(), "1125899906842624") != NULL);
    ASSERT(strstr(gpb_last_error_detail(), "free") != NULL);
    printf("device: oversize pool refused: %s\n", gpb_last_error_detail());
  } else {
    ASSERT_EQ(rc, GPB_ENOCUDA);
    printf("device backend unavailable here: %s\n", gpb_last_error_detail());
  }
}

static void strings(void) {
  for (int e = 0; e >= -20; e--) {
    ASSERT(gpb_strerror(e) != NULL && strlen(gpb_strerror(e)) > 0);
    ASSERT(strncmp(gpb_err_name(e), "GPB_", 4) == 0);
    for (int f = 0; f > e; f--) ASSERT(strcmp(gpb_strerror(e), gpb_strerror(f)) != 0);
  }
  ASSERT(strcmp(gpb_strerror(-999), "unknown error") == 0);
  size_t v;
  ASSERT_OK(gpb_size_parse("1.5GiB", &v));
  ASSERT_U64_EQ(v, 1610612736ull);
  ASSERT_OK(gpb_size_parse("64M", &v));
  ASSERT_U64_EQ(v, 64ull << 20);
  ASSERT_OK(gpb_size_parse("4096", &v));
  ASSERT_U64_EQ(v, 4096);
  ASSERT_ERR(gpb_size_parse("12Q", &v), GPB_EINVAL);
  ASSERT_ERR(gpb_size_parse("-1", &v), GPB_EINVAL);
  ASSERT_ERR(gpb_size_parse("", &v), GPB_EINVAL);
  gpb_backend_t be;
  ASSERT_ERR(gpb_backend_parse("gpu", &be), GPB_EINVAL);
  ASSERT_OK(gpb_backend_parse("virtual", &be));
  ASSERT_EQ(be, GPB_BACKEND_VIRTUAL);
}

int main(void) {
  strings();
  bad_configs();
  for (int pol = 0; pol < 2; pol++) {
    misuse(GPB_BACKEND_HOST, (gpb_policy_t)pol);
    misuse(GPB_BACKEND_VIRTUAL, (gpb_policy_t)pol);
  }
  printf("misuse: every case refused with its own code, pool intact\n");
  return 0;
}
