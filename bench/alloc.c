/* SPDX-License-Identifier: MIT */
/*
 * alloc.c: gpubuddy and glibc malloc behind bench_alloc_t.
 *
 * Each allocator is reached through the same indirect call, so the cost
 * of the table is the same for every contender. The CUDA allocators live
 * in cuda.c, which is only built with the CUDA runtime.
 */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

const char *bench_kind_name(bench_kind_t kind) {
  switch (kind) {
  case BENCH_GPUBUDDY: return "gpubuddy";
  case BENCH_MALLOC: return "malloc";
  case BENCH_CUDAMALLOC: return "cudaMalloc";
  case BENCH_CUDAASYNC: return "cudaMallocAsync";
  case BENCH_EMPTY: return "empty-call";
  default: return "?";
  }
}

static int alloc_gpb_alloc(void *ctx, size_t size, void **out) {
  return gpb_alloc((gpb_pool_t *)ctx, size, out);
}

static int alloc_gpb_free(void *ctx, void *ptr) {
  return gpb_free((gpb_pool_t *)ctx, ptr);
}

static void alloc_gpb_close(void *ctx) { gpb_pool_destroy((gpb_pool_t *)ctx); }

/* Larger requests fail before malloc, as they would in it on any host the
 * bench runs on: ASan's malloc aborts on them (allocation-size-too-big,
 * past 2^40 bytes) instead of returning NULL, ending the run. */
#define ALLOC_MALLOC_MAX ((size_t)1 << 40)

static int alloc_malloc_alloc(void *ctx, size_t size, void **out) {
  (void)ctx;
  if (size > ALLOC_MALLOC_MAX) {
    *out = NULL;
    return -1;
  }
  *out = malloc(size);
  return *out ? 0 : -1;
}

static int alloc_malloc_free(void *ctx, void *ptr) {
  (void)ctx;
  free(ptr);
  return 0;
}

/* The empty call: what the timer and the call through the table cost, and
 * the tail the host adds to any allocator measured on it. */
static int alloc_empty_alloc(void *ctx, size_t size, void **out) {
  static char byte;
  (void)ctx;
  (void)size;
  *out = &byte;
  return 0;
}

static int alloc_empty_free(void *ctx, void *ptr) {
  (void)ctx;
  (void)ptr;
  return 0;
}

int bench_alloc_open(bench_kind_t kind, const bench_pool_opts_t *o,
                     bench_alloc_t *out) {
  memset(out, 0, sizeof *out);
  out->kind = kind;
  snprintf(out->name, sizeof out->name, "%s", bench_kind_name(kind));
  switch (kind) {
  case BENCH_GPUBUDDY: {
    gpb_config_t cfg;
    gpb_config_init(&cfg);
    cfg.backend = o->backend;
    cfg.policy = o->policy;
    cfg.pool_size = o->pool_size;
    cfg.min_block = o->min_block ? o->min_block : 256;
    cfg.device = o->device;
    cfg.arenas = o->arenas ? o->arenas : 1;
    /* NO_ENV: a stray GPB_TRACE would skew timings. */
    cfg.flags = GPB_CFG_NO_ENV | o->flags;
    gpb_pool_t *pool;
    int rc = gpb_pool_create(&cfg, &pool);
    if (rc) {
      char b[32];
      fprintf(stderr, "gpubuddy-bench: %s pool of %s: %s: %s\n",
              gpb_backend_name(cfg.backend),
              bench_fmt_bytes(cfg.pool_size, b, sizeof b),
              gpb_strerror(rc), gpb_last_error_detail());
      return rc;
    }
    if (o->policy != GPB_POLICY_BUDDY)
      snprintf(out->name, sizeof out->name, "gpubuddy-%s",
               gpb_policy_name(o->policy));
    if (o->arenas > 1)
      snprintf(out->name, sizeof out->name, "gpubuddy%s%s-arenas",
               o->policy != GPB_POLICY_BUDDY ? "-" : "",
               o->policy != GPB_POLICY_BUDDY ? gpb_policy_name(o->policy) : "");
    out->ctx = pool;
    out->alloc = alloc_gpb_alloc;
    out->free = alloc_gpb_free;
    out->close = alloc_gpb_close;
    return 0;
  }
  case BENCH_MALLOC:
    out->alloc = alloc_malloc_alloc;
    out->free = alloc_malloc_free;
    return 0;
  case BENCH_EMPTY:
    out->alloc = alloc_empty_alloc;
    out->free = alloc_empty_free;
    return 0;
  case BENCH_CUDAMALLOC:
  case BENCH_CUDAASYNC:
#ifdef GPB_HAVE_CUDA
    return bench_cuda_open(kind, o->device, out);
#else
    fprintf(stderr, "gpubuddy-bench: built without CUDA\n");
    return -1;
#endif
  default:
    fprintf(stderr, "gpubuddy-bench: unknown allocator %d\n", (int)kind);
    return -1;
  }
}

void bench_alloc_close(bench_alloc_t *a) {
  if (a->sync) a->sync(a->ctx);
  if (a->close) a->close(a->ctx);
  memset(a, 0, sizeof *a);
}
