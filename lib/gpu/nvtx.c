/* SPDX-License-Identifier: MIT */
/*
 * nvtx.c: tells NVTX-aware tools (compute-sanitizer memcheck) where each
 * block of a device or pinned pool begins and ends.
 *
 * The pool's range is registered once as an NVTX sub-allocator heap; each
 * allocation is then registered as a region of `requested` bytes and
 * unregistered when its block really returns to the pool. Memcheck treats
 * the parts of a heap outside any region as unallocated, so a kernel that
 * writes past the end of its block is reported even though the byte lies
 * inside memory that cudaMalloc handed out.
 *
 * Cost without a tool: NVTX is header-only. Each call loads a function
 * slot, finds it disabled (no NVTX_INJECTION64_PATH was loaded at the
 * first call) and returns: a load and a compare on the allocation path.
 * gpb__nvtx_heap_open returns NULL then, and the region calls return
 * before building any descriptor. Built without the NVTX headers, every
 * entry point here is an empty function.
 */
#include "gpu/gpu.h"

#ifdef GPB_HAVE_NVTX
#include <nvtx3/nvToolsExtMem.h>
#include <pthread.h>

static nvtxDomainHandle_t nvtx_domain;
static pthread_once_t nvtx_once = PTHREAD_ONCE_INIT;

static void nvtx_init(void) { nvtx_domain = nvtxDomainCreateA("gpubuddy"); }

/* Caller has initialized the CUDA runtime (the pool's memory exists):
 * compute-sanitizer ignores NVTX calls made before that. */
void *gpb__nvtx_heap_open(void *base, size_t size) {
  pthread_once(&nvtx_once, nvtx_init);
  nvtxMemVirtualRangeDesc_t range = {size, base};
  nvtxMemHeapDesc_t desc = {0};
  desc.extCompatID = NVTX_EXT_COMPATID_MEM;
  desc.structSize = sizeof desc;
  desc.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
  desc.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  desc.typeSpecificDescSize = sizeof range;
  desc.typeSpecificDesc = &range;
  /* NULL when no tool listens: the region calls below then do nothing. */
  return (void *)nvtxMemHeapRegister(nvtx_domain, &desc);
}

void gpb__nvtx_heap_close(void *heap) {
  if (heap) nvtxMemHeapUnregister(nvtx_domain, (nvtxMemHeapHandle_t)heap);
}

void gpb__nvtx_region_add(void *heap, void *ptr, size_t size) {
  if (!heap) return;
  nvtxMemVirtualRangeDesc_t range = {size, ptr};
  nvtxMemRegionsRegisterBatch_t b = {0};
  b.extCompatID = NVTX_EXT_COMPATID_MEM;
  b.structSize = sizeof b;
  b.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  b.heap = (nvtxMemHeapHandle_t)heap;
  b.regionCount = 1;
  b.regionDescElementSize = sizeof range;
  b.regionDescElements = &range;
  nvtxMemRegionsRegister(nvtx_domain, &b);
}

void gpb__nvtx_region_remove(void *heap, void *ptr) {
  if (!heap) return;
  nvtxMemRegionRef_t ref;
  ref.pointer = ptr;
  nvtxMemRegionsUnregisterBatch_t b = {0};
  b.extCompatID = NVTX_EXT_COMPATID_MEM;
  b.structSize = sizeof b;
  b.refType = NVTX_MEM_REGION_REF_TYPE_POINTER;
  b.refCount = 1;
  b.refElementSize = sizeof ref;
  b.refElements = &ref;
  nvtxMemRegionsUnregister(nvtx_domain, &b);
}

#else /* !GPB_HAVE_NVTX */

void *gpb__nvtx_heap_open(void *base, size_t size) {
  (void)base, (void)size;
  return NULL;
}
void gpb__nvtx_heap_close(void *heap) { (void)heap; }
void gpb__nvtx_region_add(void *heap, void *ptr, size_t size) {
  (void)heap, (void)ptr, (void)size;
}
void gpb__nvtx_region_remove(void *heap, void *ptr) { (void)heap, (void)ptr; }

#endif
