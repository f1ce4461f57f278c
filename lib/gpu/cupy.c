/* SPDX-License-Identifier: MIT */
/*
 * cupy.c: gpubuddy as CuPy's allocator, through
 * cupy.cuda.memory.CFunctionAllocatorMemory (python/gpubuddy/cupy.py).
 *
 * CuPy calls gpb_cupy_malloc(param, size, device) when an array needs
 * memory and gpb_cupy_free(param, ptr, device) when the Python object that
 * owns it dies. Both take the device's shared pool from gpb_device_pool,
 * the pool gpb_torch_malloc uses too, so a program that mixes PyTorch and
 * CuPy keeps one cache of device memory, not two. CuPy's blocks carry tag
 * GPB_TAG_CUPY, PyTorch's GPB_TAG_TORCH: stats, the viewer and the OOM
 * text tell them apart.
 *
 * Which stream a free is ordered on. CuPy frees when the Python object
 * dies, which can be while kernels that use the memory are still queued.
 * The free must not hand the block to other work before those kernels
 * finish. The candidates:
 *  - CuPy's current stream at the free: it can differ from the stream the
 *    array was used on (a `with stream:` block has ended), so the block
 *    could be reused on it while the old stream still reads it;
 *  - the legacy default stream: an event on it waits for every blocking
 *    stream, but not for CuPy's non_blocking=True streams;
 *  - the stream current at the malloc, which is where CuPy's own memory
 *    pool returns a freed block (it keys free lists on that stream and
 *    reuses a block only there) and what PyTorch's allocator does.
 * We take the third: python/gpubuddy/cupy.py passes CuPy's current stream
 * at the malloc as `param`, CuPy hands the same param to the free, and the
 * free is gpb_free_async on it: work queued on that stream later may reuse
 * the block at once, other streams only after an event (the pool's
 * stream-ordered free). With both libraries on the default stream (the
 * usual case: both use stream 0), the PyTorch pools' solo-stream mode stays
 * on and no free costs an event. As with CuPy's own pool, a stream must
 * outlive the arrays allocated on it.
 */
#include "gpu/gpu.h"

#include <stdio.h>

#define CUPY_MAX_DEVICES 64

static uint64_t cupy_mallocs[CUPY_MAX_DEVICES];
static uint64_t cupy_failures[CUPY_MAX_DEVICES];
static uint64_t cupy_frees[CUPY_MAX_DEVICES];

static int cupy_device_ok(int device) {
  return device >= 0 && device < CUPY_MAX_DEVICES;
}

void *gpb_cupy_malloc(void *stream, size_t size, int device) {
  if (size == 0 || !cupy_device_ok(device)) return NULL;
  gpb_pool_t *p = NULL;
  void *ptr = NULL;
  int rc = gpb_device_pool(device, &p);
  if (rc == 0) rc = gpb_alloc_ex(p, size, 0, GPB_TAG_CUPY, stream, &ptr);
  if (rc) {
    /* gpubuddy.cupy raises OutOfMemoryError with gpb_cupy_explain. */
    __atomic_fetch_add(&cupy_failures[device], 1, __ATOMIC_RELAXED);
    return NULL;
  }
  __atomic_fetch_add(&cupy_mallocs[device], 1, __ATOMIC_RELAXED);
  return ptr;
}

void gpb_cupy_free(void *stream, void *ptr, int device) {
  if (!ptr) return;
  gpb_pool_t *p = NULL;
  /* A block came from this pool, so it exists: no creation here. */
  int rc = cupy_device_ok(device) ? gpb_device_pool(device, &p) : GPB_EINVAL;
  if (rc == 0) rc = gpb_free_async(p, ptr, stream); /* see the header */
  if (rc) {
    /* A void function cannot report: say it, since it means a bug. */
    fprintf(stderr, "gpubuddy: CuPy free(%p) on device %d: %s: %s\n", ptr,
            device, gpb_strerror(rc), gpb_last_error_detail());
    return;
  }
  __atomic_fetch_add(&cupy_frees[device], 1, __ATOMIC_RELAXED);
}

int gpb_cupy_calls(int device, uint64_t *mallocs, uint64_t *failures,
                   uint64_t *frees) {
  if (!cupy_device_ok(device))
    return gpb__fail(GPB_EINVAL, "device %d is out of range", device);
  if (mallocs) *mallocs = __atomic_load_n(&cupy_mallocs[device], __ATOMIC_RELAXED);
  if (failures) *failures = __atomic_load_n(&cupy_failures[device], __ATOMIC_RELAXED);
  if (frees) *frees = __atomic_load_n(&cupy_frees[device], __ATOMIC_RELAXED);
  return 0;
}

/* The device's shared pool if it exists: stats never make one. */
static gpb_pool_t *cupy_existing(int device) { return gpb_torch_pool(device); }

int gpb_cupy_bytes(int device, uint64_t *torch, uint64_t *cupy) {
  gpb_pool_t *p = cupy_existing(device);
  if (!p) return gpb__fail(GPB_ENOTFOUND, "device %d has no gpubuddy pool",
                           device);
  gpb_stats_t s;
  int rc = gpb_pool_stats(p, &s);
  if (rc) return rc;
  if (torch) *torch = s.tag_bytes[GPB_TAG_TORCH];
  if (cupy) *cupy = s.tag_bytes[GPB_TAG_CUPY];
  return 0;
}

int gpb_cupy_explain(int device, size_t size, char *buf, size_t len) {
  return gpb__device_explain(device, size, " for CuPy", buf, len);
}
