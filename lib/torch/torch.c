/* SPDX-License-Identifier: MIT */
/*
 * torch.c: each device's shared pool for the framework front ends
 * (gpb_device_pool: PyTorch's C++ allocator, CuPy), and the entry points
 * of torch.cuda.memory.CUDAPluggableAllocator, the fallback front end.
 *
 * PyTorch calls gpb_torch_malloc(size, device, stream) and
 * gpb_torch_free(ptr, size, device, stream) for every tensor storage (a
 * pluggable allocator gets no caching layer in front of it). Each device
 * gets its own pool, made lazily at the first call for that device: the
 * fast path is one atomic load of the device's pool pointer; creation
 * takes a global mutex and publishes the pointer with release order.
 * Frees are stream-ordered (gpb_free_async on the stream the storage was
 * allocated on), which is what PyTorch's own caching allocator guarantees.
 *
 * Configuration, read once per pool from the environment:
 *   GPB_TORCH_POOL_SIZE  "24G" or "90%" (of the device's free memory at
 *                        the first call); default 90%
 *   GPB_TORCH_MIN_BLOCK  default 512 (PyTorch rounds sizes to 512)
 *   GPB_TORCH_POLICY     buddy, trim or bestfit; default bestfit, the
 *                        policy that needs the least memory
 *   GPB_TORCH_VMM        1 (the default): pool_size is the memory the pool
 *                        may map, under live blocks only (GPB_CFG_VMM);
 *                        0: one plain device range of pool_size
 *   GPB_TORCH_STACKS     N > 0: the C++ allocator gives each allocation
 *                        its Python stack (N frames) as its call site
 *   GPB_TORCH_PUBLISH    publish each pool live as NAME.DEVICE
 *   GPB_TORCH_VERBOSE    1: say on stderr why a malloc failed
 *   GPB_TORCH_PLAN       follow a placement plan (gpb_pool_set_plan) made
 *                        from an earlier run's trace: PATH.DEVICE when
 *                        that file exists, else PATH
 *   GPB_TORCH_PLAN_CACHE a plan per device kept from run to run: follow
 *                        PATH.DEVICE when an earlier run left it, else
 *                        record this run to PATH.DEVICE.trace.gz, for
 *                        gpubuddy.torch to lay out at exit (not with
 *                        GPB_TORCH_PLAN or GPB_TORCH_TRACE)
 *   GPB_TORCH_PLAN_CACHE_ALLOCS  the recording stops by itself after
 *                        this many allocations (default 200000; 0: never):
 *                        a plan needs a few steps, not a whole job
 * A pool that cannot be made is reported once on stderr; later mallocs on
 * that device return NULL at once (PyTorch raises OutOfMemoryError).
 */
#include "gpu/gpu.h"   /* gpb__device_explain */
#include "pool/pool.h" /* gpb__options_size: one parser for sizes */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef GPB_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define TORCH_MAX_DEVICES 64

static gpb_pool_t *torch_pool[TORCH_MAX_DEVICES];
static int torch_broken[TORCH_MAX_DEVICES]; /* why creation failed: no retry */
static uint64_t torch_mallocs[TORCH_MAX_DEVICES];
static uint64_t torch_failures[TORCH_MAX_DEVICES];
static uint64_t torch_frees[TORCH_MAX_DEVICES];
/* Allocations left to record for GPB_TORCH_PLAN_CACHE (0: not counting). */
static int64_t torch_record_left[TORCH_MAX_DEVICES];
static pthread_mutex_t torch_lock = PTHREAD_MUTEX_INITIALIZER;

/* Free bytes on `device`, or 0 when unknown. */
static size_t torch_free_mem(int device) {
#ifdef GPB_HAVE_CUDA
  int saved = -1;
  if (cudaGetDevice(&saved) != cudaSuccess) cudaGetLastError();
  if (saved != device) cudaSetDevice(device);
  size_t fr = 0, total = 0;
  if (cudaMemGetInfo(&fr, &total) != cudaSuccess) {
    cudaGetLastError();
    fr = 0;
  }
  if (saved >= 0 && saved != device) cudaSetDevice(saved);
  return fr;
#else
  (void)device;
  return 0;
#endif
}

/* GPB_TORCH_POOL_SIZE ("90%" or a size, options.c's form) in bytes. */
static int torch_pool_size(int device, size_t *out) {
  const char *e = getenv("GPB_TORCH_POOL_SIZE");
  double share;
  int rc = gpb__options_size("GPB_TORCH_POOL_SIZE", e && *e ? e : "90%",
                             &share, out);
  if (rc || share == 0) return rc;
  size_t fr = torch_free_mem(device);
  if (fr == 0)
    return gpb__fail(GPB_ENOCUDA, "cannot read device %d's free memory",
                     device);
  *out = (size_t)((double)fr * share);
  return 0;
}

static int torch_create(int device, gpb_pool_t **out) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_DEVICE;
  cfg.device = device;
  cfg.min_block = 512;
  cfg.policy = GPB_POLICY_BESTFIT;
  cfg.flags = GPB_CFG_NO_ENV; /* one GPB_PUBLISH name cannot serve N pools */
  /* PyTorch frees on the stream it allocated on; with one stream no event
   * per free is needed (ResNet-50 steps were 6% slower with them). */
  cfg.flags |= GPB_CFG_SOLO_STREAM;
  int rc = torch_pool_size(device, &cfg.pool_size);
  if (rc) return rc;
  /* Memory only under live blocks, the default: the holes cost none. */
  const char *v = getenv("GPB_TORCH_VMM");
  if (v && *v && strcmp(v, "0") && strcmp(v, "1"))
    return gpb__fail(GPB_EINVAL, "GPB_TORCH_VMM=%s: expected 0 or 1", v);
  if (!v || !*v || !strcmp(v, "1")) cfg.flags |= GPB_CFG_VMM;
  /* Python stacks as call sites: the C++ allocator interns them; the
   * pool keeps the table (its own unwinding would name only torch). */
  const char *st = getenv("GPB_TORCH_STACKS");
  if (st && *st && strcmp(st, "0")) cfg.flags |= GPB_CFG_CALLSITES;
  const char *e = getenv("GPB_TORCH_MIN_BLOCK");
  if (e && *e && (rc = gpb_size_parse(e, &cfg.min_block)))
    return gpb__fail(rc, "GPB_TORCH_MIN_BLOCK=%s is not a size", e);
  e = getenv("GPB_TORCH_POLICY");
  if (e && *e && (rc = gpb_policy_parse(e, &cfg.policy)))
    return gpb__fail(rc, "GPB_TORCH_POLICY=%s: expected buddy, trim or bestfit", e);
  e = getenv("GPB_TORCH_ARENAS");
  if (e && *e && (rc = gpb__parse_arenas("GPB_TORCH_ARENAS", e, &cfg.arenas)))
    return rc;
  char name[GPB_NAME_MAX];
  e = getenv("GPB_TORCH_PUBLISH");
  if (e && *e) {
    int n = snprintf(name, sizeof name, "%s.%d", e, device);
    if (n < 0 || (size_t)n >= sizeof name)
      return gpb__fail(GPB_EINVAL, "GPB_TORCH_PUBLISH=%s is too long", e);
    cfg.name = name;
  }
  e = getenv("GPB_TORCH_TRACE");
  char path[4096];
  const char *cache = getenv("GPB_TORCH_PLAN_CACHE");
  const char *plan = getenv("GPB_TORCH_PLAN");
  if (cache && *cache) {
    if ((e && *e) || (plan && *plan))
      return gpb__fail(GPB_EINVAL, "GPB_TORCH_PLAN_CACHE excludes "
                       "GPB_TORCH_PLAN and GPB_TORCH_TRACE");
    int n = snprintf(path, sizeof path, "%s.%d", cache, device);
    if (n < 0 || (size_t)n + sizeof ".trace.gz" > sizeof path)
      return gpb__fail(GPB_EINVAL, "GPB_TORCH_PLAN_CACHE=%s is too long", cache);
    if (access(path, R_OK) == 0) {
      plan = path; /* an earlier run's plan: follow it, record nothing */
    } else {
      uint32_t most = 200000;
      const char *m = getenv("GPB_TORCH_PLAN_CACHE_ALLOCS");
      if (m && *m &&
          (rc = gpb__parse_env_u32("GPB_TORCH_PLAN_CACHE_ALLOCS", m,
                                   UINT32_MAX, "0 (no limit) to 4294967295",
                                   &most)))
        return rc;
      torch_record_left[device] = most; /* read once the pool is published */
      memcpy(path + n, ".trace.gz", sizeof ".trace.gz");
      cfg.trace_path = path;
    }
  } else if (e && *e) {
    /* PATH.DEVICE, or before a ".gz", which says to compress. */
    size_t len = strlen(e);
    int gz = len > 3 && !strcmp(e + len - 3, ".gz");
    int n = snprintf(path, sizeof path, "%.*s.%d%s", (int)(gz ? len - 3 : len),
                     e, device, gz ? ".gz" : "");
    if (n < 0 || (size_t)n >= sizeof path)
      return gpb__fail(GPB_EINVAL, "GPB_TORCH_TRACE=%s is too long", e);
    cfg.trace_path = path;
  }
  if ((rc = gpb_pool_create(&cfg, out))) return rc;
  if (plan == path) {
    rc = gpb_pool_set_plan_file(*out, path);
  } else if (plan && *plan) {
    /* PATH.DEVICE when there is one (a plan per device), else PATH. */
    int n = snprintf(path, sizeof path, "%s.%d", plan, device);
    if (n < 0 || (size_t)n >= sizeof path || access(path, R_OK))
      n = snprintf(path, sizeof path, "%s", plan);
    if (n < 0 || (size_t)n >= sizeof path)
      rc = gpb__fail(GPB_EINVAL, "GPB_TORCH_PLAN=%s is too long", plan);
    else
      rc = gpb_pool_set_plan_file(*out, path);
  }
  if (rc) {
    gpb_pool_destroy(*out);
    *out = NULL;
    return rc;
  }
  return 0;
}

/* The device's pool, made at the first call; NULL when it cannot be. */
static gpb_pool_t *torch_get(int device) {
  if (device < 0 || device >= TORCH_MAX_DEVICES) return NULL;
  gpb_pool_t *p = __atomic_load_n(&torch_pool[device], __ATOMIC_ACQUIRE);
  if (GPB__LIKELY(p != NULL)) return p;
  pthread_mutex_lock(&torch_lock);
  p = torch_pool[device];
  if (!p && !torch_broken[device]) {
    int rc = torch_create(device, &p);
    if (rc) {
      __atomic_store_n(&torch_broken[device], rc, __ATOMIC_RELAXED);
      p = NULL;
      fprintf(stderr, "gpubuddy: cannot make the pool for device %d: %s: %s\n",
              device, gpb_strerror(rc), gpb_last_error_detail());
    } else {
      __atomic_store_n(&torch_pool[device], p, __ATOMIC_RELEASE);
    }
  }
  pthread_mutex_unlock(&torch_lock);
  return p;
}

int gpb_device_pool(int device, gpb_pool_t **out) {
  *out = NULL;
  if (device < 0 || device >= TORCH_MAX_DEVICES)
    return gpb__fail(GPB_EINVAL, "device %d is out of range (0 to %d)", device,
                     TORCH_MAX_DEVICES - 1);
  gpb_pool_t *p = torch_get(device);
  if (p) {
    *out = p;
    return 0;
  }
  int rc = __atomic_load_n(&torch_broken[device], __ATOMIC_RELAXED);
  return gpb__fail(rc ? rc : GPB_ENOCUDA, "device %d has no pool: it could "
                   "not be made (see the message printed at its first use)",
                   device);
}

void *gpb_torch_malloc(ptrdiff_t size, int device, void *stream) {
  if (size <= 0) return NULL;
  gpb_pool_t *p = torch_get(device);
  void *ptr = NULL;
  int rc = p ? gpb_alloc_ex(p, (size_t)size, 0, GPB_TAG_TORCH, stream, &ptr)
             : GPB_ENOCUDA;
  if (rc) {
    if (device >= 0 && device < TORCH_MAX_DEVICES)
      __atomic_fetch_add(&torch_failures[device], 1, __ATOMIC_RELAXED);
    const char *v = getenv("GPB_TORCH_VERBOSE");
    if (p && v && *v == '1')
      fprintf(stderr, "gpubuddy: malloc(%td) on device %d: %s: %s\n", size,
              device, gpb_strerror(rc), gpb_last_error_detail());
    return NULL;
  }
  __atomic_fetch_add(&torch_mallocs[device], 1, __ATOMIC_RELAXED);
  /* The plan cache's recording: exactly one call takes the count to 0. */
  if (GPB__UNLIKELY(__atomic_load_n(&torch_record_left[device],
                                    __ATOMIC_RELAXED) > 0) &&
      __atomic_sub_fetch(&torch_record_left[device], 1, __ATOMIC_RELAXED) == 0) {
    int trc = gpb_pool_trace_stop(p);
    fprintf(stderr, "gpubuddy: device %d: recorded enough allocations for "
            "the plan cache; the recording stopped%s%s\n", device,
            trc ? ": " : " (its plan is written at exit)",
            trc ? gpb_last_error_detail() : "");
  }
  return ptr;
}

void gpb_torch_free(void *ptr, ptrdiff_t size, int device, void *stream) {
  (void)size; /* the pool knows each block's size */
  if (!ptr) return;
  gpb_pool_t *p = device >= 0 && device < TORCH_MAX_DEVICES
                      ? __atomic_load_n(&torch_pool[device], __ATOMIC_ACQUIRE)
                      : NULL;
  int rc = p ? gpb_free_async(p, ptr, stream) : GPB_EFOREIGN;
  if (rc) {
    /* A void function cannot report: say it, since it means a bug. */
    fprintf(stderr, "gpubuddy: free(%p) on device %d: %s: %s\n", ptr, device,
            gpb_strerror(rc), p ? gpb_last_error_detail() : "no pool");
    return;
  }
  __atomic_fetch_add(&torch_frees[device], 1, __ATOMIC_RELAXED);
}

gpb_pool_t *gpb_torch_pool(int device) {
  if (device < 0 || device >= TORCH_MAX_DEVICES) return NULL;
  return __atomic_load_n(&torch_pool[device], __ATOMIC_ACQUIRE);
}

int gpb_torch_stats(int device, gpb_stats_t *out) {
  gpb_pool_t *p = gpb_torch_pool(device);
  if (!p) return gpb__fail(GPB_ENOTFOUND, "device %d has no gpubuddy pool",
                           device);
  return gpb_pool_stats(p, out);
}

int gpb_torch_calls(int device, uint64_t *mallocs, uint64_t *failures,
                    uint64_t *frees) {
  if (device < 0 || device >= TORCH_MAX_DEVICES)
    return gpb__fail(GPB_EINVAL, "device %d is out of range", device);
  if (mallocs) *mallocs = __atomic_load_n(&torch_mallocs[device], __ATOMIC_RELAXED);
  if (failures) *failures = __atomic_load_n(&torch_failures[device], __ATOMIC_RELAXED);
  if (frees) *frees = __atomic_load_n(&torch_frees[device], __ATOMIC_RELAXED);
  return 0;
}

int gpb_torch_drain(int device) {
  gpb_pool_t *p = gpb_torch_pool(device);
  if (!p) return gpb__fail(GPB_ENOTFOUND, "device %d has no gpubuddy pool",
                           device);
  return gpb_pool_drain(p);
}

int gpb__device_explain(int device, size_t size, const char *who, char *buf,
                        size_t len) {
  gpb_pool_t *p = gpb_torch_pool(device);
  if (!p)
    return snprintf(buf, len, "gpubuddy: device %d has no pool (it could not "
                    "be made: see the message printed when it was first used)",
                    device);
  gpb_stats_t s;
  gpb_pool_info_t in;
  uint64_t held, limit;
  int rc = gpb_pool_stats(p, &s);
  if (rc == 0) rc = gpb_pool_info(p, &in);
  if (rc == 0) rc = gpb_pool_memory(p, &held, &limit);
  if (rc) return rc;
  /* A VMM pool's limit is the memory it may map, not its address range:
   * say what is mapped, as the free bytes of the range mean little. */
  char what[160];
  if (limit != in.pool_size)
    snprintf(what, sizeof what, "%llu of the pool's %llu bytes of memory are "
             "mapped under live blocks", (unsigned long long)held,
             (unsigned long long)limit);
  else
    snprintf(what, sizeof what, "%llu bytes free in the pool of %llu",
             (unsigned long long)s.free_bytes, (unsigned long long)in.pool_size);
  return snprintf(buf, len, "gpubuddy: cannot allocate %zu bytes%s on "
                  "device %d: %s, the largest free block %llu bytes (policy "
                  "%s; CuPy holds %llu bytes, PyTorch %llu). Set a larger "
                  "pool_size in gpubuddy.torch.enable() or gpubuddy.cupy.enable() "
                  "(GPB_TORCH_POOL_SIZE).", size, who, device, what,
                  (unsigned long long)s.largest_free, gpb_policy_name(in.policy),
                  (unsigned long long)s.tag_bytes[GPB_TAG_CUPY],
                  (unsigned long long)s.tag_bytes[GPB_TAG_TORCH]);
}

int gpb_torch_explain(int device, size_t size, char *buf, size_t len) {
  return gpb__device_explain(device, size, "", buf, len);
}

int gpb_torch_trace(int device, const char *path) {
  gpb_pool_t *p = gpb_torch_pool(device);
  if (!p) return gpb__fail(GPB_ENOTFOUND, "device %d has no gpubuddy pool",
                           device);
  if (path) return gpb_pool_trace_start(p, path);
  /* Stopped by hand (save_plan): the plan cache's count is done too. */
  __atomic_store_n(&torch_record_left[device], 0, __ATOMIC_RELAXED);
  return gpb_pool_trace_stop(p);
}
