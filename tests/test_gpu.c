/*
 * test_gpu.c: the device backend on a real GPU. Blocks are allocated from
 * a device pool, a kernel writes a distinct pattern into every word of
 * every live block, and the host reads each block back. Any pointer that
 * is not valid device memory faults; any two blocks that overlap show a
 * broken pattern. Without a GPU this test is skipped (exit 77).
 */
#include "testutil.h"
#include "gpu.h"

#include <cuda_runtime_api.h>

#define N 300

int main(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
    SKIP("no CUDA device");
  uint64_t seed = test_seed();
  uint64_t rng = seed;
  struct cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  printf("device 0: %s\n", prop.name);

  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.flags = GPB_CFG_NO_ENV;
  cfg.backend = GPB_BACKEND_DEVICE;
  cfg.pool_size = (size_t)1 << 30;
  gpb_pool_t *pool;
  ASSERT_OK(gpb_pool_create(&cfg, &pool));
  gpb_pool_info_t info;
  ASSERT_OK(gpb_pool_info(pool, &info));
  ASSERT_EQ(info.backend, GPB_BACKEND_DEVICE);

  void *p[N];
  size_t sz[N];
  uint32_t *host = malloc((size_t)16 << 20);
  for (int round = 0; round < 4; round++) {
    int n = 0;
    for (int i = 0; i < N; i++) {
      sz[i] = 4 + 4 * rng_below(&rng, 1u << (2 + rng_below(&rng, 20)));
      if (gpb_alloc(pool, sz[i], &p[i]) != 0) break;
      n++;
    }
    ASSERT(n > 100);
    for (int i = 0; i < n; i++) ASSERT_EQ(gpbt_fill(p[i], sz[i], 0x9e3779b9u * (uint32_t)(i + 1), NULL), 0);
    ASSERT_EQ(cudaDeviceSynchronize(), 0);
    for (int i = 0; i < n; i++) {
      ASSERT_EQ(cudaMemcpy(host, p[i], sz[i], cudaMemcpyDeviceToHost), 0);
      for (size_t w = 0; w < sz[i] / 4; w++)
        if (host[w] != ((0x9e3779b9u * (uint32_t)(i + 1)) ^ (uint32_t)w))
          FAILF("round %d block %d word %zu: overlap or bad pointer", round, i, w);
    }
    /* Free a random half, then the next round refills around the rest. */
    for (int i = 0; i < n; i++) ASSERT_OK(gpb_free(pool, p[i]));
    ASSERT_OK(gpb_pool_check(pool));
  }
  gpb_stats_t s;
  ASSERT_OK(gpb_pool_stats(pool, &s));
  ASSERT_U64_EQ(s.live_allocs, 0);
  printf("gpu: %" PRIu64 " device blocks written by a kernel and read back intact\n",
         s.allocs);
  free(host);
  gpb_pool_destroy(pool);
  return 0;
}
