/* SPDX-License-Identifier: MIT */
/*
 * gpu.h: internal declarations for the GPU side of a pool: stream-ordered
 * frees (stream.c) and NVTX registration of blocks (nvtx.c).
 *
 * pool.c owns one gpb__gpu_t per device or pinned pool (NULL for host and
 * virtual pools) and routes allocations and frees through it, with the
 * pool's lock held. Nothing here exposes a CUDA type: streams are void *.
 */
#ifndef GPB_GPU_H
#define GPB_GPU_H

#include "core/core.h"

typedef struct gpb__gpu gpb__gpu_t;

/* Per-pool GPU state for a pool of `size` bytes at `base` on `device`
 * (size 0: no NVTX heap, for address space that is not all mapped).
 * *out is NULL (and 0 returned) for backends that need none, or when the
 * library was built without CUDA. */
GPB__HIDDEN int gpb__gpu_open(gpb_backend_t backend, int device, void *base,
                              size_t size, gpb__gpu_t **out);
/* GPU state for an arena of the pool whose state is `parent`: its own
 * pending frees, the parent's NVTX heap. When out of memory it returns
 * GPB_ENOMEM rather than wait (the pool has other places to look); the
 * pool drains it before a request finally fails. *out NULL for NULL. */
GPB__HIDDEN int gpb__gpu_open_child(const gpb__gpu_t *parent,
                                    gpb__gpu_t **out);
/* GPB_CFG_SOLO_STREAM for a pool's own state (not an arena's). NULL-safe. */
GPB__HIDDEN void gpb__gpu_set_solo(gpb__gpu_t *g);
/* Drops pending frees without emitting events (the pool dies with them),
 * destroys the events and unregisters the NVTX heap. NULL-safe. Call
 * before the backend releases the memory. */
GPB__HIDDEN void gpb__gpu_close(gpb__gpu_t *g);

/* Allocation through the GPU state: reaps completed async frees, may reuse
 * a block freed asynchronously on the same stream, and on GPB_ENOMEM
 * completes pending frees (waiting for the oldest only as a last resort)
 * and retries. Same contract as gpb__buddy_alloc. Caller holds the lock. */
GPB__HIDDEN int gpb__gpu_alloc(gpb__gpu_t *g, gpb__buddy_t *core,
                               uint64_t requested, uint32_t align_order,
                               uint32_t tag, uint32_t site, void *stream,
                               uint64_t time_ns, uint64_t *unit);
/* Frees the allocation at byte offset `off`: at once (async = 0, like
 * gpb__buddy_free) or ordered after the work queued so far on `stream`.
 * A block already pending an async free is GPB_EDOUBLEFREE. Caller holds
 * the lock. */
GPB__HIDDEN int gpb__gpu_free(gpb__gpu_t *g, gpb__buddy_t *core, uint64_t off,
                              void *stream, int async);
/* 1 when the block starting at `unit` waits for its async free. */
GPB__HIDDEN int gpb__gpu_pending(const gpb__gpu_t *g, uint64_t unit);
/* Waits for every pending async free and returns the blocks (FREE events
 * go out). NULL-safe. Caller holds the lock. */
GPB__HIDDEN int gpb__gpu_drain(gpb__gpu_t *g, gpb__buddy_t *core);
/* Number of blocks waiting for their async free to complete. */
GPB__HIDDEN uint64_t gpb__gpu_npending(const gpb__gpu_t *g);

/* NVTX (nvtx.c): no-ops when NVTX is absent or no tool is attached. The
 * heap handle is opaque; NULL means "not registered". */
GPB__HIDDEN void *gpb__nvtx_heap_open(void *base, size_t size);
GPB__HIDDEN void gpb__nvtx_heap_close(void *heap);
GPB__HIDDEN void gpb__nvtx_region_add(void *heap, void *ptr, size_t size);
GPB__HIDDEN void gpb__nvtx_region_remove(void *heap, void *ptr);

/* GPB_CFG_VMM (vmm.c): `virt` bytes of address space at *base, with at
 * most `phys` bytes of device memory mapped, a granule at a time, under
 * the ranges in use. use() maps what [off, off+len) lacks (GPB_ENOMEM
 * when the budget is spent even after unmapping idle granules, which
 * waits for the device); unuse() ends a use (the pages stay mapped until
 * needed elsewhere). The caller serializes. */
typedef struct gpb__vmm gpb__vmm_t;
GPB__HIDDEN int gpb__vmm_open(int device, size_t virt, size_t phys,
                              void **base, gpb__vmm_t **out);
GPB__HIDDEN void gpb__vmm_close(gpb__vmm_t *v);
GPB__HIDDEN int gpb__vmm_use(gpb__vmm_t *v, uint64_t off, uint64_t len);
GPB__HIDDEN void gpb__vmm_unuse(gpb__vmm_t *v, uint64_t off, uint64_t len);
GPB__HIDDEN void gpb__vmm_usage(const gpb__vmm_t *v, uint64_t *mapped,
                                uint64_t *limit);
GPB__HIDDEN int gpb__vmm_check(const gpb__vmm_t *v);
/* Unmaps every idle granule and releases every page no granule holds, so
 * the device gets that memory back (after a device synchronize). */
GPB__HIDDEN void gpb__vmm_trim(gpb__vmm_t *v);

/* CUDA backends (backend-cuda.c): reserve one range and release it;
 * nothing else. */
/* 0 when device exists; else GPB_ENOCUDA, said (no driver, no such
 * device): before anything is made on it. */
GPB__HIDDEN int gpb__cuda_device(int device);
GPB__HIDDEN int gpb__cuda_usable(int device);
GPB__HIDDEN int gpb__cuda_reserve(gpb_backend_t kind, int device, size_t size,
                                  void **base);
GPB__HIDDEN void gpb__cuda_release(gpb_backend_t kind, int device, void *base);
/* CUDA builds: makes `dev` current and returns the caller's device, which
 * gpb__cuda_leave restores (the caller's current device never changes). */
GPB__HIDDEN int gpb__cuda_enter(int dev);
GPB__HIDDEN void gpb__cuda_leave(int saved, int dev);

/* lib/torch/torch.c: why `size` bytes cannot come from device's shared
 * pool (gpb_device_pool), in one line for the front end `who` names (""
 * for PyTorch, " for CuPy"): what is free or mapped, the largest free
 * block, what each library holds. Like snprintf. */
GPB__HIDDEN int gpb__device_explain(int device, size_t size, const char *who,
                                    char *buf, size_t len);

#endif /* GPB_GPU_H */
