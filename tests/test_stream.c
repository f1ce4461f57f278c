/* SPDX-License-Identifier: MIT */
/*
 * test_stream.c: stream-ordered frees on a real GPU.
 *
 * The proof: a slow kernel on stream A spins, then writes pattern A into a
 * block. While it spins, the block is freed with gpb_free_async on A and
 * allocated for stream B, whose kernel writes pattern B. The pool holds
 * just that one block, so B can only get it by waiting for A's work. If
 * the pool handed it over early, A's late writes would land after B's and
 * the read-back would show pattern A. Then: same-stream reuse (no wait,
 * stream order keeps it correct), a larger pool (B gets another block at
 * once), and a seeded stress over three streams with real kernels. A hook
 * keeps a block-map model in step with the events. compute-sanitizer
 * memcheck and racecheck run this test in scripts/gpu-check.sh.
 * Without a GPU the test is skipped (exit 77).
 */
#include "testutil.h"
#include "gpu.h"

#include <cuda_runtime_api.h>

#define CK(call)                                                          \
  do {                                                                    \
    cudaError_t e_ = (call);                                              \
    if (e_ != cudaSuccess) FAILF("%s: %s", #call, cudaGetErrorString(e_)); \
  } while (0)

static long long spin; /* clocks for about 50 ms */

static void on_event(const gpb_event_t *ev, void *user) {
  int rc = gpb_model_apply(user, ev);
  if (rc) FAILF("model refused event %" PRIu64 ": %s", ev->seq,
                gpb_last_error_detail());
}

static gpb_pool_t *make_pool(size_t size, gpb_model_t **model) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.flags = GPB_CFG_NO_ENV;
  cfg.backend = GPB_BACKEND_DEVICE;
  cfg.pool_size = size;
  cfg.min_block = 256;
  gpb_pool_t *p;
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  gpb_pool_info_t info;
  ASSERT_OK(gpb_pool_info(p, &info));
  ASSERT_OK(gpb_model_create(info.managed_size, info.min_block, model));
  ASSERT_OK(gpb_pool_set_hook(p, on_event, *model));
  return p;
}

static void check_pool(gpb_pool_t *p, gpb_model_t *m) {
  ASSERT_OK(gpb_pool_check(p));
  ASSERT_OK(gpb_model_check(m));
  gpb_stats_t a, b;
  ASSERT_OK(gpb_pool_stats(p, &a));
  ASSERT_OK(gpb_model_stats(m, &b));
  ASSERT_U64_EQ(a.live_allocs, b.live_allocs);
  ASSERT_U64_EQ(a.free_bytes, b.free_bytes);
}

static void drop_pool(gpb_pool_t *p, gpb_model_t *m) {
  CK(cudaDeviceSynchronize());
  ASSERT_OK(gpb_pool_drain(p));
  check_pool(p, m);
  gpb_pool_destroy(p);
  gpb_model_destroy(m);
}

static void expect(const void *dev, size_t bytes, uint32_t v, const char *what) {
  uint32_t *h = malloc(bytes);
  ASSERT(h);
  CK(cudaMemcpy(h, dev, bytes, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < bytes / 4; i++)
    if (h[i] != (v ^ (uint32_t)i))
      FAILF("%s: word %zu is %08x, expected %08x (%s)", what, i, h[i],
            v ^ (uint32_t)i,
            h[i] == (0xAAAA0000u ^ (uint32_t)i) ? "stream A's late write: "
            "the block was handed over before A's work finished" : "corrupt");
  free(h);
}

static void test_proof(cudaStream_t a, cudaStream_t b) {
  gpb_model_t *m;
  gpb_pool_t *p = make_pool(1 << 20, &m);
  void *x, *y;
  ASSERT_OK(gpb_alloc_ex(p, 1 << 20, 0, 0, a, &x));
  ASSERT_EQ(gpbt_slow_fill(x, 1 << 20, 0xAAAA0000u, spin, a), 0);
  ASSERT_OK(gpb_free_async(p, x, a));
  ASSERT_ERR(gpb_free(p, x), GPB_EDOUBLEFREE);
  ASSERT_OK(gpb_alloc_ex(p, 1 << 20, 0, 0, b, &y)); /* the only block */
  ASSERT(y == x);
  ASSERT_EQ(gpbt_fill(y, 1 << 20, 0xBBBB0000u, b), 0);
  CK(cudaStreamSynchronize(b));
  CK(cudaStreamSynchronize(a));
  expect(y, 1 << 20, 0xBBBB0000u, "cross-stream reuse");
  ASSERT_OK(gpb_free_async(p, y, b));
  printf("proof: block freed on A while A's kernel ran went to B only after\n");
  drop_pool(p, m);
}

static void test_same_stream(cudaStream_t a, cudaStream_t b) {
  gpb_model_t *m;
  gpb_pool_t *p = make_pool(4 << 20, &m);
  void *x, *y, *z;
  ASSERT_OK(gpb_alloc_ex(p, 1 << 20, 0, 0, a, &x));
  ASSERT_EQ(gpbt_slow_fill(x, 1 << 20, 0xAAAA0000u, spin, a), 0);
  ASSERT_OK(gpb_free_async(p, x, a));
  /* B cannot have it yet: it gets another block at once. */
  ASSERT_OK(gpb_alloc_ex(p, 1 << 20, 0, 0, b, &z));
  ASSERT(z != x);
  ASSERT_EQ(gpbt_fill(z, 1 << 20, 0xCCCC0000u, b), 0);
  /* A can: its next kernel runs after the slow one. */
  ASSERT_OK(gpb_alloc_ex(p, 1 << 20, 0, 0, a, &y));
  ASSERT(y == x);
  ASSERT_EQ(gpbt_fill(y, 1 << 20, 0xDDDD0000u, a), 0);
  CK(cudaDeviceSynchronize());
  expect(y, 1 << 20, 0xDDDD0000u, "same-stream reuse");
  expect(z, 1 << 20, 0xCCCC0000u, "other stream, other block");
  ASSERT_OK(gpb_free_async(p, y, a));
  ASSERT_OK(gpb_free_async(p, z, b));
  drop_pool(p, m);
}

#define NB 96

static void test_stress(cudaStream_t *s, int ns, uint64_t *rng) {
  gpb_model_t *m;
  gpb_pool_t *p = make_pool(8 << 20, &m);
  void *ptr[NB] = {0};
  size_t size[NB];
  uint32_t val[NB];
  int str[NB];
  int steps = (int)(3000 * test_scale());
  for (int step = 0; step < steps; step++) {
    int i = (int)rng_below(rng, NB);
    if (!ptr[i]) {
      int k = (int)rng_below(rng, (uint64_t)ns);
      size_t sz = 4 * (1 + rng_below(rng, 1u << (6 + rng_below(rng, 12))));
      void *x;
      int rc = gpb_alloc_ex(p, sz, 0, 0, s[k], &x);
      if (rc == GPB_ENOMEM) continue;
      ASSERT_OK(rc);
      ptr[i] = x;
      size[i] = sz;
      str[i] = k;
      val[i] = (uint32_t)rng_next(rng) & 0xFFFF0000u;
      if (rng_below(rng, 8) == 0)
        ASSERT_EQ(gpbt_slow_fill(x, sz, val[i], spin / 50, s[k]), 0);
      else
        ASSERT_EQ(gpbt_fill(x, sz, val[i], s[k]), 0);
    } else if (rng_below(rng, 4)) {
      /* Verify it on its stream's timeline, then free it there. */
      if (rng_below(rng, 16) == 0) {
        CK(cudaStreamSynchronize(s[str[i]]));
        expect(ptr[i], size[i], val[i], "stress");
      }
      ASSERT_OK(gpb_free_async(p, ptr[i], s[str[i]]));
      ptr[i] = NULL;
    }
    if (step % 500 == 0) check_pool(p, m);
  }
  CK(cudaDeviceSynchronize());
  for (int i = 0; i < NB; i++) {
    if (!ptr[i]) continue;
    expect(ptr[i], size[i], val[i], "stress end");
    ASSERT_OK(gpb_free(p, ptr[i]));
  }
  gpb_stats_t st;
  ASSERT_OK(gpb_pool_drain(p));
  ASSERT_OK(gpb_pool_stats(p, &st));
  ASSERT_U64_EQ(st.live_allocs, 0);
  printf("stress: %" PRIu64 " allocs over %d streams, data intact\n",
         st.allocs, ns);
  drop_pool(p, m);
}

int main(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
    SKIP("no CUDA device");
  uint64_t rng = test_seed();
  int khz = 0;
  CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  spin = (long long)khz * 50; /* 50 ms */
  if (spin <= 0) spin = 100000000;
  cudaStream_t s[3];
  for (int i = 0; i < 3; i++) CK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
  test_proof(s[0], s[1]);
  test_same_stream(s[0], s[1]);
  test_stress(s, 3, &rng);
  for (int i = 0; i < 3; i++) CK(cudaStreamDestroy(s[i]));
  return 0;
}
