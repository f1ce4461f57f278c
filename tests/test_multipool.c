/* SPDX-License-Identifier: MIT */
/*
 * test_multipool.c: one pool per device, and two pools on one device,
 * used while another device is current. Every gpubuddy call must leave the
 * caller's current device as it was and do its CUDA work (events) on the
 * pool's device. Kernels write every block; the host reads them back.
 * Runs over every device present; without a GPU it is skipped (exit 77).
 */
#include "testutil.h"
#include "gpu.h"

#include <cuda_runtime_api.h>

#define CK(call)                                                          \
  do {                                                                    \
    cudaError_t e_ = (call);                                              \
    if (e_ != cudaSuccess) FAILF("%s: %s", #call, cudaGetErrorString(e_)); \
  } while (0)

#define NPOOL_MAX 17
#define NB 32

typedef struct pool_case {
  gpb_pool_t *pool;
  int device;
  cudaStream_t stream;
  void *ptr[NB];
  size_t size[NB];
} pool_case_t;

static void still_on(int dev) {
  int cur = -1;
  CK(cudaGetDevice(&cur));
  if (cur != dev) FAILF("current device changed from %d to %d", dev, cur);
}

int main(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
    SKIP("no CUDA device");
  uint64_t rng = test_seed();
  if (ndev > NPOOL_MAX - 1) ndev = NPOOL_MAX - 1;
  pool_case_t pc[NPOOL_MAX];
  int np = ndev + 1; /* one per device, plus a second pool on device 0 */
  memset(pc, 0, sizeof pc);
  for (int i = 0; i < np; i++) {
    int dev = i < ndev ? i : 0;
    pc[i].device = dev;
    /* The caller sits on another device while the pool is made. */
    int other = (dev + 1) % ndev;
    CK(cudaSetDevice(dev));
    CK(cudaStreamCreateWithFlags(&pc[i].stream, cudaStreamNonBlocking));
    CK(cudaSetDevice(other));
    gpb_config_t cfg;
    gpb_config_init(&cfg);
    cfg.flags = GPB_CFG_NO_ENV;
    cfg.backend = GPB_BACKEND_DEVICE;
    cfg.device = dev;
    cfg.pool_size = 64 << 20;
    ASSERT_OK(gpb_pool_create(&cfg, &pc[i].pool));
    still_on(other);
    printf("pool %d on device %d (caller on device %d)\n", i, dev, other);
  }
  for (int round = 0; round < 4; round++) {
    for (int i = 0; i < np; i++) {
      int dev = pc[i].device, other = (dev + 1) % ndev;
      for (int b = 0; b < NB; b++) {
        CK(cudaSetDevice(other));
        size_t sz = 4 * (1 + rng_below(&rng, 1u << (4 + rng_below(&rng, 14))));
        ASSERT_OK(gpb_alloc_ex(pc[i].pool, sz, 0, 0, pc[i].stream, &pc[i].ptr[b]));
        still_on(other);
        pc[i].size[b] = sz;
        CK(cudaSetDevice(dev));
        ASSERT_EQ(gpbt_fill(pc[i].ptr[b], sz, (uint32_t)(i * 1000 + b) << 12,
                            pc[i].stream), 0);
      }
    }
    /* A pointer of one pool is foreign to every other. */
    for (int i = 0; i < np; i++)
      ASSERT_ERR(gpb_free(pc[(i + 1) % np].pool, pc[i].ptr[0]), GPB_EFOREIGN);
    for (int i = 0; i < np; i++) {
      int dev = pc[i].device, other = (dev + 1) % ndev;
      CK(cudaSetDevice(dev));
      CK(cudaStreamSynchronize(pc[i].stream));
      for (int b = 0; b < NB; b++) {
        uint32_t *h = malloc(pc[i].size[b]);
        CK(cudaMemcpy(h, pc[i].ptr[b], pc[i].size[b], cudaMemcpyDeviceToHost));
        uint32_t v = (uint32_t)(i * 1000 + b) << 12;
        for (size_t w = 0; w < pc[i].size[b] / 4; w++)
          if (h[w] != (v ^ (uint32_t)w))
            FAILF("pool %d block %d word %zu: overlap or wrong device", i, b, w);
        free(h);
      }
      CK(cudaSetDevice(other));
      for (int b = 0; b < NB; b++) {
        ASSERT_OK(gpb_free_async(pc[i].pool, pc[i].ptr[b], pc[i].stream));
        still_on(other);
      }
      ASSERT_OK(gpb_pool_check(pc[i].pool));
    }
  }
  for (int i = 0; i < np; i++) {
    int other = (pc[i].device + 1) % ndev;
    CK(cudaSetDevice(other));
    ASSERT_OK(gpb_pool_drain(pc[i].pool));
    still_on(other);
    gpb_stats_t st;
    ASSERT_OK(gpb_pool_stats(pc[i].pool, &st));
    ASSERT_U64_EQ(st.live_allocs, 0);
    ASSERT_U64_EQ(st.allocs, 4 * NB);
    gpb_pool_destroy(pc[i].pool);
    still_on(other);
    CK(cudaSetDevice(pc[i].device));
    CK(cudaStreamDestroy(pc[i].stream));
  }
  printf("multipool: %d pools on %d device(s), all data intact\n", np, ndev);
  return 0;
}
