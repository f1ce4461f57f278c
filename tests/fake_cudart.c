/* SPDX-License-Identifier: MIT */
/*
 * fake_cudart.c: the CUDA runtime double described in fake_cudart.h. Only
 * the calls libgpubuddy makes are defined; their prototypes come from the
 * real header, so a signature change breaks the build, not the test.
 */
#include "fake_cudart.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_MAX_DEV 8

struct CUstream_st {
  int device;
  uint64_t queued, done;
};

struct CUevent_st {
  int device;
  struct CUstream_st *s;
  uint64_t ticket;
};

fake_counts_t fake_counts;
static int fake_ndev;
static size_t fake_free;
static _Thread_local int fake_cur;
static struct CUstream_st fake_default[FAKE_MAX_DEV];

void fake_cuda_setup(int ndev, size_t free_bytes) {
  fake_ndev = ndev > FAKE_MAX_DEV ? FAKE_MAX_DEV : ndev;
  fake_free = free_bytes;
  for (int i = 0; i < FAKE_MAX_DEV; i++) {
    fake_default[i].device = i;
    fake_default[i].queued = fake_default[i].done = 0;
  }
}

void *fake_stream_create(int device) {
  struct CUstream_st *s = calloc(1, sizeof *s);
  s->device = device;
  return s;
}

void *fake_stream_default(int device) { return &fake_default[device]; }

static struct CUstream_st *fake_resolve(void *stream) {
  return stream ? stream : &fake_default[fake_cur];
}

uint64_t fake_stream_enqueue(void *stream) {
  struct CUstream_st *s = fake_resolve(stream);
  return ++s->queued;
}

void fake_stream_finish(void *stream) {
  struct CUstream_st *s = fake_resolve(stream);
  s->done = s->queued;
}

uint64_t fake_stream_done(void *stream) { return fake_resolve(stream)->done; }

int fake_current_device(void) { return fake_cur; }

cudaError_t cudaGetDeviceCount(int *n) {
  *n = fake_ndev;
  return fake_ndev ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaGetDevice(int *d) {
  *d = fake_cur;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int d) {
  if (d < 0 || d >= fake_ndev) return cudaErrorInvalidDevice;
  fake_counts.set_device++;
  fake_cur = d;
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) { return cudaSuccess; }

const char *cudaGetErrorString(cudaError_t e) {
  (void)e;
  return "fake CUDA error";
}

cudaError_t cudaMemGetInfo(size_t *fr, size_t *total) {
  *fr = fake_free;
  *total = fake_free * 2;
  return cudaSuccess;
}

static cudaError_t fake_alloc(void **p, size_t size) {
  /* Like cudaMalloc: a large alignment, so pools see a well-aligned base. */
  if (posix_memalign(p, (size_t)1 << 21, size ? size : 1)) return cudaErrorMemoryAllocation;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t size) { return fake_alloc(p, size); }
cudaError_t cudaMallocHost(void **p, size_t size) { return fake_alloc(p, size); }
cudaError_t cudaFree(void *p) {
  free(p);
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void *p) {
  free(p);
  return cudaSuccess;
}

static void fake_check_dev(const struct CUevent_st *e) {
  if (e->device != fake_cur) fake_counts.wrong_device++;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned flags) {
  (void)flags;
  struct CUevent_st *e = calloc(1, sizeof *e);
  if (!e) return cudaErrorMemoryAllocation;
  e->device = fake_cur;
  fake_counts.event_creates++;
  *ev = e;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  fake_check_dev(e);
  fake_counts.event_destroys++;
  free(e);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t stream) {
  struct CUstream_st *s = fake_resolve(stream);
  fake_check_dev(e);
  if (s->device != e->device) return cudaErrorInvalidResourceHandle;
  fake_counts.records++;
  e->s = s;
  e->ticket = s->queued;
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  fake_check_dev(e);
  fake_counts.queries++;
  if (!e->s || e->s->done >= e->ticket) return cudaSuccess;
  return cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  fake_check_dev(e);
  fake_counts.syncs++;
  if (e->s && e->s->done < e->ticket) e->s->done = e->ticket;
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t e,
                                unsigned flags) {
  struct CUstream_st *s = fake_resolve(stream);
  fake_check_dev(e);
  if (flags || s->device != e->device) return cudaErrorInvalidResourceHandle;
  fake_counts.waits++;
  fake_counts.wait_stream = s;
  fake_counts.wait_on = e->s;
  fake_counts.wait_ticket = e->ticket;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  struct CUstream_st *s = fake_resolve(stream);
  fake_counts.stream_syncs++;
  s->done = s->queued;
  return cudaSuccess;
}

void fake_set_device(int device) { fake_cur = device; }
