/* SPDX-License-Identifier: MIT */
// kernels.cu: the kernels the samples launch on the blocks gpubuddy hands
// out on the device backend. fill writes a pattern whose XOR over the
// block has a closed form, so xor can prove on the host that the block
// holds what was written and nothing else scribbled over it.
#include "kernels.h"

#include <cuda_runtime.h>

__global__ static void kern_fill_words(uint32_t *p, size_t n, uint32_t v) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = v ^ (uint32_t)i;
}

__global__ static void kern_xor_words(const uint32_t *p, size_t n,
                                      uint32_t *acc) {
  uint32_t x = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    x ^= p[i];
  atomicXor(acc, x);
}

static unsigned kern_grid(size_t n) {
  size_t blocks = (n + 255) / 256;
  if (blocks > 1024) blocks = 1024;
  return blocks ? (unsigned)blocks : 1u;
}

// One word of device scratch for the XOR result, made on first use.
static uint32_t *kern_acc;

extern "C" int gpbs_kern_fill(void *p, size_t bytes, uint32_t value) {
  size_t n = bytes / 4;
  if (n == 0) return 0;
  kern_fill_words<<<kern_grid(n), 256>>>((uint32_t *)p, n, value);
  return (int)cudaGetLastError();
}

extern "C" int gpbs_kern_xor(const void *p, size_t bytes, uint32_t *out) {
  cudaError_t e;
  size_t n = bytes / 4;
  *out = 0;
  if (n == 0) return 0;
  if (!kern_acc && (e = cudaMalloc((void **)&kern_acc, sizeof *kern_acc)))
    return (int)e;
  if ((e = cudaMemset(kern_acc, 0, sizeof *kern_acc))) return (int)e;
  kern_xor_words<<<kern_grid(n), 256>>>((const uint32_t *)p, n, kern_acc);
  if ((e = cudaGetLastError())) return (int)e;
  return (int)cudaMemcpy(out, kern_acc, sizeof *out, cudaMemcpyDeviceToHost);
}

extern "C" int gpbs_kern_sync(void) { return (int)cudaDeviceSynchronize(); }

extern "C" const char *gpbs_kern_error(int code) {
  return cudaGetErrorString((cudaError_t)code);
}

extern "C" void gpbs_kern_fini(void) {
  if (kern_acc) cudaFree(kern_acc);
  kern_acc = NULL;
}
