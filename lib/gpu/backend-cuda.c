/* SPDX-License-Identifier: MIT */
/*
 * backend-cuda.c: reserves the pool's range through the CUDA runtime:
 * cudaMalloc for device memory, cudaMallocHost for pinned host memory.
 *
 * This is the only file (with stream.c) that sees CUDA types. Errors are
 * translated to GPB_E* codes; CUDA's own text goes to the error detail.
 * Each call switches to the pool's device and back, so the caller's
 * current device never matters. Without CUDA (./configure --without-cuda)
 * the entry points report GPB_ENOCUDA.
 */
#include "gpu/gpu.h"

#ifdef GPB_HAVE_CUDA
#include <cuda_runtime_api.h>

int gpb__cuda_enter(int dev) {
  int saved = -1;
  if (cudaGetDevice(&saved) != cudaSuccess) {
    cudaGetLastError();
    saved = -1; /* nothing to restore */
  }
  if (saved != dev) cudaSetDevice(dev);
  return saved;
}

void gpb__cuda_leave(int saved, int dev) {
  if (saved >= 0 && saved != dev) cudaSetDevice(saved);
}

/* The devices present into *n (0 on an error, which is cleared: the
 * runtime keeps "no device" sticky otherwise). */
static cudaError_t cuda_count(int *n) {
  *n = 0;
  cudaError_t e = cudaGetDeviceCount(n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    *n = 0;
  }
  return e;
}

int gpb__cuda_usable(int device) {
  int n;
  cuda_count(&n);
  return device >= 0 && device < n;
}

int gpb__cuda_device(int device) {
  int n;
  cudaError_t e = cuda_count(&n);
  if (e != cudaSuccess || n == 0) {
    /* Without any driver the runtime says the driver is "insufficient",
     * which sends people to upgrade one they do not have. */
    if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || n == 0)
      return gpb__fail(GPB_ENOCUDA, "no CUDA device: no GPU or no NVIDIA "
                       "driver here, or a driver older than this CUDA runtime "
                       "(host pools work without one)");
    return gpb__fail(GPB_ENOCUDA, "no CUDA device: %s", cudaGetErrorString(e));
  }
  if (device < 0 || device >= n)
    return gpb__fail(GPB_ENOCUDA, "device %d does not exist (%d present)",
                     device, n);
  return 0;
}

int gpb__cuda_reserve(gpb_backend_t kind, int device, size_t size,
                      void **base) {
  cudaError_t e;
  if (gpb__cuda_device(device)) return GPB_ENOCUDA;
  int rc = 0;
  int saved = gpb__cuda_enter(device);
  {
    if (kind == GPB_BACKEND_DEVICE) {
      size_t free_b = 0, total_b = 0;
      e = cudaMemGetInfo(&free_b, &total_b);
      if (e == cudaSuccess && size > free_b) {
        rc = gpb__fail(GPB_EDEVMEM,
                       "pool of %zu bytes is larger than device %d's free "
                       "memory (%zu bytes free of %zu)",
                       size, device, free_b, total_b);
      } else {
        e = cudaMalloc(base, size);
        if (e != cudaSuccess) {
          cudaGetLastError();
          rc = gpb__fail(e == cudaErrorMemoryAllocation ? GPB_EDEVMEM
                                                        : GPB_EBACKEND,
                         "cudaMalloc(%zu) on device %d: %s", size, device,
                         cudaGetErrorString(e));
        }
      }
    } else {
      e = cudaMallocHost(base, size);
      if (e != cudaSuccess) {
        cudaGetLastError();
        rc = gpb__fail(GPB_EBACKEND, "cudaMallocHost(%zu): %s", size,
                       cudaGetErrorString(e));
      }
    }
  }
  gpb__cuda_leave(saved, device);
  return rc;
}

void gpb__cuda_release(gpb_backend_t kind, int device, void *base) {
  int saved = gpb__cuda_enter(device);
  if (kind == GPB_BACKEND_DEVICE)
    cudaFree(base);
  else
    cudaFreeHost(base);
  gpb__cuda_leave(saved, device);
}

#else /* !GPB_HAVE_CUDA */

int gpb__cuda_device(int device) {
  (void)device;
  return gpb__fail(GPB_ENOCUDA, "libgpubuddy was built without CUDA; use the "
                   "host backend");
}

int gpb__cuda_usable(int device) {
  (void)device;
  return 0;
}

int gpb__cuda_reserve(gpb_backend_t kind, int device, size_t size,
                      void **base) {
  (void)kind, (void)device, (void)size, (void)base;
  return gpb__fail(GPB_ENOCUDA, "libgpubuddy was built without CUDA; use the "
                   "host backend");
}

void gpb__cuda_release(gpb_backend_t kind, int device, void *base) {
  (void)kind, (void)device, (void)base;
}

#endif
