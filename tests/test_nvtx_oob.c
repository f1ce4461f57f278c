/* SPDX-License-Identifier: MIT */
/*
 * test_nvtx_oob.c: a kernel writes one byte just past the end of a
 * gpubuddy block. The byte lies inside the pool (memory cudaMalloc handed
 * out), in a free block, so only the NVTX registration of the pool and its
 * blocks lets compute-sanitizer memcheck see the write as invalid.
 *
 * On its own the test exits 0 (the stray byte harms nothing). Under
 * `compute-sanitizer --tool memcheck`, scripts/gpu-check.sh expects an
 * "Invalid __global__ write" report. GPB_OOB_AT=inside writes the block's
 * last byte instead: the control run, which memcheck must pass.
 * Without a GPU the test is skipped (exit 77).
 */
#include "testutil.h"
#include "gpu.h"

#include <cuda_runtime_api.h>

int main(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
    SKIP("no CUDA device");
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.flags = GPB_CFG_NO_ENV;
  cfg.backend = GPB_BACKEND_DEVICE;
  cfg.pool_size = 1 << 20;
  cfg.min_block = 256;
  gpb_pool_t *pool;
  ASSERT_OK(gpb_pool_create(&cfg, &pool));
  void *p;
  ASSERT_OK(gpb_alloc(pool, 1024, &p));
  gpb_pool_info_t info;
  ASSERT_OK(gpb_pool_info(pool, &info));
  size_t usable;
  ASSERT_OK(gpb_usable_size(pool, p, &usable));
  ASSERT_EQ(usable, 1024);
  const char *at = getenv("GPB_OOB_AT");
  int inside = at && strcmp(at, "inside") == 0;
  size_t off = inside ? 1023 : 1024;
  /* The target is in the pool, in free space: its buddy is not allocated. */
  ASSERT((char *)p + off < (char *)info.base + info.pool_size);
  gpb_stats_t st;
  ASSERT_OK(gpb_pool_stats(pool, &st));
  ASSERT_U64_EQ(st.live_allocs, 1);
  printf("writing 1 byte at block + %zu (%s the 1024-byte block, inside the "
         "pool at offset %zu)\n", off, inside ? "inside" : "just past",
         (size_t)((char *)p - (char *)info.base) + off);
  fflush(stdout);
  ASSERT_EQ(gpbt_write_byte(p, off, NULL), 0);
  cudaError_t e = cudaDeviceSynchronize();
  printf("kernel finished: %s\n", cudaGetErrorString(e));
  ASSERT_OK(gpb_free(pool, p));
  gpb_pool_destroy(pool);
  return 0;
}
