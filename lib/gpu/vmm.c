/* SPDX-License-Identifier: MIT */
/*
 * vmm.c: a device pool over reserved address space (GPB_CFG_VMM), with
 * physical memory mapped only under granules that hold live blocks.
 *
 * A plain device pool is one cudaMalloc: every byte of it is physical,
 * so the holes fragmentation leaves between live blocks cost memory.
 * Here the buddy core places blocks in a range of address space several
 * times the physical budget (cuMemAddressReserve), and each granule
 * (2 MiB on current GPUs) gets a physical page (cuMemCreate, cuMemMap)
 * the first time a live block touches it. A granule whose last block
 * leaves keeps its page, so steady state maps nothing. Only when the
 * budget is spent and a new granule is needed does it wait for the
 * device (cudaDeviceSynchronize: blocks freed stream-ordered may still be
 * in use) and unmap every idle granule, whose pages then go where they
 * are needed. What the pool holds is then bounded by the granules live
 * blocks touch, not by where buddy placement left holes.
 *
 * The driver's cuMem* calls are found through the runtime
 * (cudaGetDriverEntryPointByVersion), so nothing links libcuda. The
 * pool's lock serializes every call here.
 */
#include "gpu/gpu.h"

#include <stdlib.h>
#include <string.h>

#ifdef GPB_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>

typedef CUresult (*vmm_reserve_fn)(CUdeviceptr *, size_t, size_t, CUdeviceptr,
                                   unsigned long long);
typedef CUresult (*vmm_afree_fn)(CUdeviceptr, size_t);
typedef CUresult (*vmm_create_fn)(CUmemGenericAllocationHandle *, size_t,
                                  const CUmemAllocationProp *,
                                  unsigned long long);
typedef CUresult (*vmm_release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*vmm_map_fn)(CUdeviceptr, size_t, size_t,
                               CUmemGenericAllocationHandle,
                               unsigned long long);
typedef CUresult (*vmm_unmap_fn)(CUdeviceptr, size_t);
typedef CUresult (*vmm_access_fn)(CUdeviceptr, size_t, const CUmemAccessDesc *,
                                  size_t);
typedef CUresult (*vmm_gran_fn)(size_t *, const CUmemAllocationProp *,
                                CUmemAllocationGranularity_flags);

struct gpb__vmm {
  int device;
  CUdeviceptr base;
  size_t virt;
  uint32_t gshift;    /* granule = 1 << gshift bytes */
  uint64_t ngran;
  uint32_t *users;    /* per granule: live allocations touching it */
  CUmemGenericAllocationHandle *page; /* per granule: its page, 0 none */
  CUmemGenericAllocationHandle *spare; /* made, unmapped */
  uint64_t nspare, nmade, max_pages, nidle; /* idle: mapped, no users */
  CUmemAllocationProp prop;
  CUmemAccessDesc access;
  vmm_reserve_fn reserve;
  vmm_afree_fn afree;
  vmm_create_fn create;
  vmm_release_fn release;
  vmm_map_fn map;
  vmm_unmap_fn unmap;
  vmm_access_fn set_access;
  vmm_gran_fn granularity;
};

static int vmm_sym(const char *name, void **fn) {
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  cudaError_t e = cudaGetDriverEntryPointByVersion(name, fn, 12000,
                                                   cudaEnableDefault, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !*fn) {
    cudaGetLastError();
    return gpb__fail(GPB_EBACKEND, "the CUDA driver has no %s (needed by "
                     "GPB_CFG_VMM)", name);
  }
  return 0;
}

static int vmm_cu(CUresult r, const char *what, size_t n) {
  if (r == CUDA_SUCCESS) return 0;
  return gpb__fail(r == CUDA_ERROR_OUT_OF_MEMORY ? GPB_EDEVMEM : GPB_EBACKEND,
                   "%s(%zu): CUDA driver error %d", what, n, (int)r);
}

int gpb__vmm_open(int device, size_t virt, size_t phys, void **base,
                  gpb__vmm_t **out) {
  *out = NULL;
  /* The driver maps nothing on a device that is not there, but reserving
   * the range and asking the granularity may still succeed. */
  if (gpb__cuda_device(device)) return GPB_ENOCUDA;
  gpb__vmm_t *v = calloc(1, sizeof *v);
  if (!v) return gpb__fail(GPB_EHOSTMEM, "out of host memory");
  v->device = device;
  int rc = 0;
  int saved = gpb__cuda_enter(device);
  if ((rc = vmm_sym("cuMemAddressReserve", (void **)&v->reserve)) ||
      (rc = vmm_sym("cuMemAddressFree", (void **)&v->afree)) ||
      (rc = vmm_sym("cuMemCreate", (void **)&v->create)) ||
      (rc = vmm_sym("cuMemRelease", (void **)&v->release)) ||
      (rc = vmm_sym("cuMemMap", (void **)&v->map)) ||
      (rc = vmm_sym("cuMemUnmap", (void **)&v->unmap)) ||
      (rc = vmm_sym("cuMemSetAccess", (void **)&v->set_access)) ||
      (rc = vmm_sym("cuMemGetAllocationGranularity",
                    (void **)&v->granularity)))
    goto out;
  v->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  v->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  v->prop.location.id = device;
  v->access.location = v->prop.location;
  v->access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  size_t g = 0;
  if ((rc = vmm_cu(v->granularity(&g, &v->prop,
                                  CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                   "cuMemGetAllocationGranularity", 0)))
    goto out;
  if (g == 0 || (g & (g - 1))) {
    rc = gpb__fail(GPB_EBACKEND, "granularity %zu is not a power of two", g);
    goto out;
  }
  v->gshift = (uint32_t)__builtin_ctzll(g);
  v->virt = (virt + g - 1) & ~(g - 1);
  v->ngran = v->virt >> v->gshift;
  v->max_pages = (phys + g - 1) >> v->gshift;
  v->users = calloc(v->ngran, sizeof *v->users);
  v->page = calloc(v->ngran, sizeof *v->page);
  v->spare = calloc(v->max_pages ? v->max_pages : 1, sizeof *v->spare);
  if (!v->users || !v->page || !v->spare) {
    rc = gpb__fail(GPB_EHOSTMEM, "out of host memory for %llu granules",
                   (unsigned long long)v->ngran);
    goto out;
  }
  /* Aligned to the range's largest power of two (up to 1 GiB), as the
   * buddy core's blocks want their addresses aligned like their sizes. */
  size_t align = (size_t)1 << (63 - __builtin_clzll(v->virt));
  if (align > ((size_t)1 << 30)) align = (size_t)1 << 30;
  if (align < g) align = g;
  if ((rc = vmm_cu(v->reserve(&v->base, v->virt, align, 0, 0),
                   "cuMemAddressReserve", v->virt)))
    goto out;
  *base = (void *)(uintptr_t)v->base;
out:
  gpb__cuda_leave(saved, device);
  if (rc) {
    gpb__vmm_close(v);
    return rc;
  }
  *out = v;
  return 0;
}

void gpb__vmm_close(gpb__vmm_t *v) {
  if (!v) return;
  int saved = gpb__cuda_enter(v->device);
  if (v->base) {
    if (v->nmade) cudaDeviceSynchronize(); /* no kernel still on a page */
    for (uint64_t i = 0; i < v->ngran && v->page; i++) {
      if (!v->page[i]) continue;
      v->unmap(v->base + (i << v->gshift), (size_t)1 << v->gshift);
      v->release(v->page[i]);
    }
    v->afree(v->base, v->virt);
  }
  for (uint64_t i = 0; i < v->nspare; i++) v->release(v->spare[i]);
  cudaGetLastError();
  gpb__cuda_leave(saved, v->device);
  free(v->users);
  free(v->page);
  free(v->spare);
  free(v);
}

/* Unmaps every idle granule, after the device has finished the work that
 * might still read them; their pages become spares. */
static void vmm_reclaim(gpb__vmm_t *v) {
  cudaDeviceSynchronize();
  cudaGetLastError();
  for (uint64_t i = 0; i < v->ngran && v->nidle; i++) {
    if (!v->page[i] || v->users[i]) continue;
    if (v->unmap(v->base + (i << v->gshift), (size_t)1 << v->gshift) !=
        CUDA_SUCCESS)
      continue; /* stays mapped and idle */
    v->spare[v->nspare++] = v->page[i];
    v->page[i] = 0;
    v->nidle--;
  }
}

/* Gives granule i a page. */
static int vmm_map_one(gpb__vmm_t *v, uint64_t i) {
  size_t g = (size_t)1 << v->gshift;
  CUmemGenericAllocationHandle h = 0;
  if (!v->nspare && v->nmade == v->max_pages && v->nidle) vmm_reclaim(v);
  if (v->nspare) {
    h = v->spare[--v->nspare];
  } else if (v->nmade < v->max_pages) {
    int rc = vmm_cu(v->create(&h, g, &v->prop, 0), "cuMemCreate", g);
    if (rc && v->nidle) { /* the device is full (other users): reuse ours */
      vmm_reclaim(v);
      if (v->nspare) {
        h = v->spare[--v->nspare];
        rc = 0;
      }
    } else if (rc == 0) {
      v->nmade++;
    }
    /* Out of device memory is the pool's out of memory to its caller. */
    if (rc == GPB_EDEVMEM)
      return gpb__fail(GPB_ENOMEM, "device %d has no memory for another "
                       "page: %llu of the pool's %llu bytes are mapped",
                       v->device,
                       (unsigned long long)((v->nmade - v->nspare) << v->gshift),
                       (unsigned long long)(v->max_pages << v->gshift));
    if (rc) return rc;
  } else {
    return gpb__fail(GPB_ENOMEM, "the pool's physical memory is in use: "
                     "%llu of %llu bytes mapped under live blocks",
                     (unsigned long long)(v->nmade << v->gshift),
                     (unsigned long long)(v->max_pages << v->gshift));
  }
  CUdeviceptr a = v->base + (i << v->gshift);
  int rc = vmm_cu(v->map(a, g, 0, h, 0), "cuMemMap", g);
  if (!rc && (rc = vmm_cu(v->set_access(a, g, &v->access, 1),
                          "cuMemSetAccess", g)) != 0)
    v->unmap(a, g);
  if (rc) {
    v->spare[v->nspare++] = h;
    return rc;
  }
  v->page[i] = h;
  return 0;
}

int gpb__vmm_use(gpb__vmm_t *v, uint64_t off, uint64_t len) {
  uint64_t first = off >> v->gshift, last = (off + len - 1) >> v->gshift;
  int saved = -2, rc = 0;
  uint64_t i;
  for (i = first; i <= last; i++) {
    if (v->users[i]++) continue;
    if (v->page[i]) {
      v->nidle--;
      continue;
    }
    if (saved == -2) saved = gpb__cuda_enter(v->device);
    if ((rc = vmm_map_one(v, i)) != 0) {
      v->users[i]--;
      break;
    }
  }
  if (rc && i > first) gpb__vmm_unuse(v, first << v->gshift, (i - first) << v->gshift);
  if (saved != -2) gpb__cuda_leave(saved, v->device);
  return rc;
}

void gpb__vmm_unuse(gpb__vmm_t *v, uint64_t off, uint64_t len) {
  uint64_t first = off >> v->gshift, last = (off + len - 1) >> v->gshift;
  for (uint64_t i = first; i <= last; i++)
    if (--v->users[i] == 0) v->nidle++;
}

void gpb__vmm_usage(const gpb__vmm_t *v, uint64_t *mapped, uint64_t *limit) {
  if (mapped) *mapped = (v->nmade - v->nspare) << v->gshift;
  if (limit) *limit = v->max_pages << v->gshift;
}

void gpb__vmm_trim(gpb__vmm_t *v) {
  int saved = gpb__cuda_enter(v->device);
  if (v->nidle) vmm_reclaim(v);
  for (uint64_t i = 0; i < v->nspare; i++) v->release(v->spare[i]);
  v->nmade -= v->nspare;
  v->nspare = 0;
  cudaGetLastError();
  gpb__cuda_leave(saved, v->device);
}

int gpb__vmm_check(const gpb__vmm_t *v) {
  uint64_t idle = 0, mapped = 0;
  for (uint64_t i = 0; i < v->ngran; i++) {
    if (v->users[i] && !v->page[i])
      return gpb__fail(GPB_ECORRUPT, "vmm: granule %llu is used but not "
                       "mapped", (unsigned long long)i);
    idle += v->page[i] && !v->users[i];
    mapped += v->page[i] != 0;
  }
  if (idle != v->nidle || mapped + v->nspare != v->nmade ||
      v->nmade > v->max_pages)
    return gpb__fail(GPB_ECORRUPT, "vmm: %llu idle (counted %llu), %llu "
                     "mapped + %llu spare of %llu made (at most %llu)",
                     (unsigned long long)idle, (unsigned long long)v->nidle,
                     (unsigned long long)mapped, (unsigned long long)v->nspare,
                     (unsigned long long)v->nmade,
                     (unsigned long long)v->max_pages);
  return 0;
}

#else /* !GPB_HAVE_CUDA */

int gpb__vmm_open(int device, size_t virt, size_t phys, void **base,
                  gpb__vmm_t **out) {
  (void)device, (void)virt, (void)phys, (void)base;
  *out = NULL;
  return gpb__fail(GPB_ENOCUDA, "libgpubuddy was built without CUDA");
}
void gpb__vmm_close(gpb__vmm_t *v) { (void)v; }
int gpb__vmm_use(gpb__vmm_t *v, uint64_t off, uint64_t len) {
  (void)v, (void)off, (void)len;
  return 0;
}
void gpb__vmm_unuse(gpb__vmm_t *v, uint64_t off, uint64_t len) {
  (void)v, (void)off, (void)len;
}
void gpb__vmm_usage(const gpb__vmm_t *v, uint64_t *mapped, uint64_t *limit) {
  (void)v;
  if (mapped) *mapped = 0;
  if (limit) *limit = 0;
}
int gpb__vmm_check(const gpb__vmm_t *v) {
  (void)v;
  return 0;
}
void gpb__vmm_trim(gpb__vmm_t *v) { (void)v; }

#endif
