/* SPDX-License-Identifier: MIT */
// gpu_kernels.cu: small kernels the GPU tests launch on gpubuddy blocks.
#include <cuda_runtime.h>
#include <stdint.h>

__global__ static void fill_words(uint32_t *p, size_t n, uint32_t v) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = v ^ (uint32_t)i;
}

// Writes v ^ index into every 32-bit word of [p, p + bytes) on `stream`.
extern "C" int gpbt_fill(void *p, size_t bytes, uint32_t v, void *stream) {
  size_t n = bytes / 4;
  unsigned blocks = (unsigned)((n + 255) / 256);
  if (blocks > 1024) blocks = 1024;
  if (blocks == 0) blocks = 1;
  fill_words<<<blocks, 256, 0, (cudaStream_t)stream>>>((uint32_t *)p, n, v);
  return (int)cudaGetLastError();
}

__global__ static void spin_then_fill(uint32_t *p, size_t n, uint32_t v,
                                      long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) p[i] = v ^ (uint32_t)i;
}

// A slow writer: spins for `cycles` clocks, then fills like gpbt_fill.
extern "C" int gpbt_slow_fill(void *p, size_t bytes, uint32_t v,
                              long long cycles, void *stream) {
  spin_then_fill<<<1, 256, 0, (cudaStream_t)stream>>>((uint32_t *)p, bytes / 4,
                                                      v, cycles);
  return (int)cudaGetLastError();
}

__global__ static void write_past(unsigned char *p, size_t at) { p[at] = 1; }

// Writes one byte at p + at: used to prove out-of-bounds detection.
extern "C" int gpbt_write_byte(void *p, size_t at, void *stream) {
  write_past<<<1, 1, 0, (cudaStream_t)stream>>>((unsigned char *)p, at);
  return (int)cudaGetLastError();
}
