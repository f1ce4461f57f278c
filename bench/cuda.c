/* SPDX-License-Identifier: MIT */
/*
 * cuda.c: the CUDA allocators gpubuddy is compared with, behind
 * bench_alloc_t. Plain C calling the CUDA runtime; built only when
 * configure found it.
 *
 * cudaMallocAsync runs on the device's default memory pool with its
 * release threshold at UINT64_MAX, so freed memory stays in the pool
 * instead of going back to the driver at each synchronization: the
 * fastest configuration, as PyTorch users would set it. The harness warms
 * every allocator with an untimed pass before it times one. Closing the
 * async allocator trims the pool, so the next contender finds the device
 * memory free.
 */
#include "bench.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

typedef struct cuda_ctx {
  int device;
  cudaStream_t stream;
  cudaMemPool_t pool;
} cuda_ctx_t;

static int cuda_check(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return 0;
  fprintf(stderr, "gpubuddy-bench: %s: %s\n", what, cudaGetErrorString(e));
  return -1;
}

static int cuda_malloc(void *ctx, size_t size, void **out) {
  (void)ctx;
  if (cudaMalloc(out, size) != cudaSuccess) {
    (void)cudaGetLastError(); /* an OOM must not poison later calls */
    *out = NULL;
    return -1;
  }
  return 0;
}

static int cuda_free(void *ctx, void *ptr) {
  (void)ctx;
  return cudaFree(ptr) == cudaSuccess ? 0 : -1;
}

static int cuda_malloc_async(void *ctx, size_t size, void **out) {
  cuda_ctx_t *c = ctx;
  if (cudaMallocAsync(out, size, c->stream) != cudaSuccess) {
    (void)cudaGetLastError();
    *out = NULL;
    return -1;
  }
  return 0;
}

static int cuda_free_async(void *ctx, void *ptr) {
  cuda_ctx_t *c = ctx;
  return cudaFreeAsync(ptr, c->stream) == cudaSuccess ? 0 : -1;
}

static void cuda_sync(void *ctx) {
  cuda_ctx_t *c = ctx;
  if (c->stream) cudaStreamSynchronize(c->stream);
  else cudaDeviceSynchronize();
}

static void cuda_close(void *ctx) {
  cuda_ctx_t *c = ctx;
  if (c->stream) {
    cudaStreamSynchronize(c->stream);
    cudaStreamDestroy(c->stream);
  }
  if (c->pool) cudaMemPoolTrimTo(c->pool, 0);
  free(c);
}

int bench_cuda_open(bench_kind_t kind, int device, bench_alloc_t *out) {
  cuda_ctx_t *c = calloc(1, sizeof *c);
  if (!c) return -1;
  c->device = device;
  if (cuda_check(cudaSetDevice(device), "cudaSetDevice")) goto fail;
  if (kind == BENCH_CUDAASYNC) {
    if (cuda_check(cudaDeviceGetDefaultMemPool(&c->pool, device),
                   "cudaDeviceGetDefaultMemPool"))
      goto fail;
    uint64_t thr = UINT64_MAX;
    if (cuda_check(cudaMemPoolSetAttribute(c->pool,
                                           cudaMemPoolAttrReleaseThreshold,
                                           &thr),
                   "cudaMemPoolSetAttribute(ReleaseThreshold)"))
      goto fail;
    if (cuda_check(cudaStreamCreateWithFlags(&c->stream,
                                             cudaStreamNonBlocking),
                   "cudaStreamCreate"))
      goto fail;
    out->alloc = cuda_malloc_async;
    out->free = cuda_free_async;
  } else {
    out->alloc = cuda_malloc;
    out->free = cuda_free;
  }
  out->ctx = c;
  out->sync = cuda_sync;
  out->close = cuda_close;
  return 0;
fail:
  free(c);
  return -1;
}

size_t bench_cuda_free_mem(int device) {
  size_t fr = 0, total = 0;
  if (cudaSetDevice(device) != cudaSuccess) return 0;
  if (cudaMemGetInfo(&fr, &total) != cudaSuccess) return 0;
  return fr;
}

void bench_cuda_describe(int device, char *buf, size_t n) {
  struct cudaDeviceProp prop;
  int drv = 0, rt = 0;
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    (void)cudaGetLastError();
    snprintf(buf, n, "no usable CUDA device %d", device);
    return;
  }
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  snprintf(buf, n, "%s (%.1f GiB), CUDA driver API %d.%d, runtime %d.%d",
           prop.name, (double)prop.totalGlobalMem / (1 << 30), drv / 1000,
           (drv % 1000) / 10, rt / 1000, (rt % 1000) / 10);
}
