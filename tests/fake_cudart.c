/* SPDX-License-Identifier: MIT */
/*
 * fake_cudart.c: the CUDA runtime double described in fake_cudart.h. Only
 * the calls libgpubuddy makes are defined; their prototypes come from the
 * real header, so a signature change breaks the build, not the test.
 */
#include "fake_cudart.h"

#include <cuda.h>
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

#define FAKE_MAX_STREAMS 256
static struct CUstream_st *fake_streams[FAKE_MAX_STREAMS];
static int fake_nstreams;

void *fake_stream_create(int device) {
  struct CUstream_st *s = calloc(1, sizeof *s);
  s->device = device;
  if (fake_nstreams < FAKE_MAX_STREAMS) fake_streams[fake_nstreams++] = s;
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

/* ------------------------------------------------- driver VMM (GPB_CFG_VMM)
 * Address ranges are numbers (nothing dereferences device memory); the
 * fake keeps which granules are mapped, so a test can ask whether a live
 * block lies on memory, and counts unmaps made while work was queued. */

#define FAKE_GRAN (2u << 20)
#define FAKE_MAX_GRAN (1u << 16)

static uint64_t fake_va_next = 1ull << 44;
static uint64_t fake_va_base, fake_va_size;
static uint8_t fake_mapped[FAKE_MAX_GRAN];

static int fake_busy(void) {
  for (int i = 0; i < FAKE_MAX_DEV; i++)
    if (fake_default[i].done < fake_default[i].queued) return 1;
  for (int i = 0; i < fake_nstreams; i++)
    if (fake_streams[i]->done < fake_streams[i]->queued) return 1;
  return 0;
}

cudaError_t cudaDeviceSynchronize(void) {
  fake_counts.device_syncs++;
  for (int i = 0; i < FAKE_MAX_DEV; i++) fake_default[i].done = fake_default[i].queued;
  for (int i = 0; i < fake_nstreams; i++) fake_streams[i]->done = fake_streams[i]->queued;
  return cudaSuccess;
}

static CUresult fake_reserve(CUdeviceptr *p, size_t size, size_t align,
                             CUdeviceptr addr, unsigned long long flags) {
  (void)addr, (void)flags;
  if (!align) align = FAKE_GRAN;
  if (size % FAKE_GRAN || size / FAKE_GRAN > FAKE_MAX_GRAN || fake_va_size)
    return CUDA_ERROR_INVALID_VALUE; /* one range at a time, small */
  fake_va_next = (fake_va_next + align - 1) & ~(uint64_t)(align - 1);
  *p = fake_va_base = fake_va_next;
  fake_va_size = size;
  fake_va_next += size;
  memset(fake_mapped, 0, sizeof fake_mapped);
  return CUDA_SUCCESS;
}

static CUresult fake_afree(CUdeviceptr p, size_t size) {
  if (p != fake_va_base || size != fake_va_size) return CUDA_ERROR_INVALID_VALUE;
  for (uint64_t i = 0; i < size / FAKE_GRAN; i++)
    if (fake_mapped[i]) return CUDA_ERROR_INVALID_VALUE; /* still mapped */
  fake_va_size = 0;
  return CUDA_SUCCESS;
}

static CUresult fake_create(CUmemGenericAllocationHandle *h, size_t size,
                            const CUmemAllocationProp *prop,
                            unsigned long long flags) {
  (void)flags;
  if (size != FAKE_GRAN || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  if ((fake_counts.vmm_pages + 1) * FAKE_GRAN > fake_free)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *h = ++fake_counts.vmm_creates;
  fake_counts.vmm_pages++;
  return CUDA_SUCCESS;
}

static CUresult fake_release(CUmemGenericAllocationHandle h) {
  if (!h) return CUDA_ERROR_INVALID_VALUE;
  fake_counts.vmm_pages--;
  return CUDA_SUCCESS;
}

static int fake_gran(CUdeviceptr p, size_t size, uint64_t *g) {
  if (p < fake_va_base || p + size > fake_va_base + fake_va_size ||
      (p - fake_va_base) % FAKE_GRAN || size != FAKE_GRAN)
    return 0;
  *g = (p - fake_va_base) / FAKE_GRAN;
  return 1;
}

static CUresult fake_map(CUdeviceptr p, size_t size, size_t off,
                         CUmemGenericAllocationHandle h,
                         unsigned long long flags) {
  uint64_t g;
  if (off || flags || !h || !fake_gran(p, size, &g) || fake_mapped[g])
    return CUDA_ERROR_INVALID_VALUE;
  fake_mapped[g] = 1;
  fake_counts.vmm_maps++;
  return CUDA_SUCCESS;
}

static CUresult fake_unmap(CUdeviceptr p, size_t size) {
  uint64_t g;
  if (!fake_gran(p, size, &g) || !fake_mapped[g]) return CUDA_ERROR_INVALID_VALUE;
  if (fake_busy()) fake_counts.vmm_unsafe_unmaps++;
  fake_mapped[g] = 0;
  fake_counts.vmm_unmaps++;
  return CUDA_SUCCESS;
}

static CUresult fake_access(CUdeviceptr p, size_t size,
                            const CUmemAccessDesc *d, size_t n) {
  uint64_t g;
  if (n != 1 || d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE ||
      !fake_gran(p, size, &g) || !fake_mapped[g])
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

static CUresult fake_granularity(size_t *g, const CUmemAllocationProp *prop,
                                 CUmemAllocationGranularity_flags o) {
  (void)prop, (void)o;
  *g = FAKE_GRAN;
  return CUDA_SUCCESS;
}

int fake_vmm_mapped(uint64_t addr, uint64_t len) {
  if (addr < fake_va_base || addr + len > fake_va_base + fake_va_size) return 0;
  for (uint64_t g = (addr - fake_va_base) / FAKE_GRAN;
       g <= (addr + len - 1 - fake_va_base) / FAKE_GRAN; g++)
    if (!fake_mapped[g]) return 0;
  return 1;
}

uint64_t fake_vmm_mapped_bytes(void) {
  uint64_t n = 0;
  for (uint64_t g = 0; g < fake_va_size / FAKE_GRAN; g++) n += fake_mapped[g];
  return n * FAKE_GRAN;
}

cudaError_t cudaGetDriverEntryPointByVersion(
    const char *symbol, void **fn, unsigned int version,
    unsigned long long flags, enum cudaDriverEntryPointQueryResult *q) {
  (void)version, (void)flags;
  static const struct {
    const char *name;
    void *fn;
  } syms[] = {
      {"cuMemAddressReserve", (void *)fake_reserve},
      {"cuMemAddressFree", (void *)fake_afree},
      {"cuMemCreate", (void *)fake_create},
      {"cuMemRelease", (void *)fake_release},
      {"cuMemMap", (void *)fake_map},
      {"cuMemUnmap", (void *)fake_unmap},
      {"cuMemSetAccess", (void *)fake_access},
      {"cuMemGetAllocationGranularity", (void *)fake_granularity},
  };
  for (size_t i = 0; i < sizeof syms / sizeof *syms; i++)
    if (!strcmp(symbol, syms[i].name)) {
      *fn = syms[i].fn;
      if (q) *q = cudaDriverEntryPointSuccess;
      return cudaSuccess;
    }
  *fn = NULL;
  if (q) *q = cudaDriverEntryPointSymbolNotFound;
  return cudaErrorSymbolNotFound;
}
