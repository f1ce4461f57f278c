/* SPDX-License-Identifier: MIT */
/*
 * oom.h: why an allocation failed, and what would have let it succeed,
 * for gpubuddy-replay --explain-oom (and the viewer, which can hand it a
 * model).
 *
 * A failed request of s bytes needed, with the buddy and trim policies,
 * one free block of the next power of two at or above s (and min_block):
 * a naturally aligned window of that size, since buddy blocks only ever
 * start at a multiple of their size. With bestfit it needed a free run of
 * s rounded up to min_block, at any min_block boundary. The explanation
 * names the free bytes and the largest free block then, and the cheapest
 * window: of all windows the request could have used, the one whose live
 * blocks hold the fewest bytes (ties: the fewest allocations, then the
 * oldest, that is the one whose newest allocation is oldest, then the
 * lowest address). Its allocations are the ones that, freed or moved,
 * would have let the request succeed.
 *
 * The block walk (gpb_pool_visit or gpb_model_visit) becomes a map of the
 * live allocations in address order; free blocks are not kept, so free
 * buddies left unmerged by deferred coalescing count as free, as they do
 * for an allocation that would otherwise fail. The search then slides over
 * that map once: aligned windows are disjoint, and a window wholly inside
 * one allocation is scored once for all its like; a run's cost changes
 * only where its start leaves an allocation or its end meets one, so only
 * those starts are scored (two pointers, and a monotone queue for the
 * newest allocation). O(blocks) per failure, O(allocations) memory.
 */
#ifndef GPBT_OOM_H
#define GPBT_OOM_H

#include "gpubuddy.h"

#include <stdio.h>

/* One live allocation: its blocks' range, what was asked, and the
 * caller's name for it. */
typedef struct gpbt_oom_alloc {
  uint64_t offset;    /* first byte, from the pool base */
  uint64_t size;      /* bytes of its blocks */
  uint64_t requested; /* bytes asked for */
  uint64_t time_ns;   /* when allocated, on the caller's clock (block's
                         time_ns unless the namer says otherwise) */
  uint64_t in_window; /* listed in an explanation: its bytes in the window */
  uint64_t id;        /* the caller's name for it (a trace id), if has_id */
  uint32_t tag;
  uint32_t has_id;
  uint32_t site;      /* its call site, 0 unknown: the block's, unless the
                         namer says otherwise (a replay's pool records its
                         own call stack, not the trace's) */
} gpbt_oom_alloc_t;

/* Called once per allocation after a walk, to set id, has_id, time_ns
 * and site (a replay maps offsets to trace ids, times and sites). */
typedef void (*gpbt_oom_name_fn)(void *user, gpbt_oom_alloc_t *a);

/* The live allocations of a pool or model, in address order. */
typedef struct gpbt_oom_map {
  gpbt_oom_alloc_t *a;
  size_t n, cap;
  uint64_t managed;   /* bytes the blocks cover */
  uint64_t min_block; /* from the blocks (size >> order) */
  int err;            /* GPB_EHOSTMEM once an append failed */
} gpbt_oom_map_t;

/* An empty map; fini frees it. clear empties it and keeps its memory. */
void gpbt_oom_map_init(gpbt_oom_map_t *m);
void gpbt_oom_map_fini(gpbt_oom_map_t *m);
void gpbt_oom_map_clear(gpbt_oom_map_t *m);
/* A gpb_visit_fn (user: the map): takes blocks in address order, the
 * whole pool's after a clear. Nonzero (stop) when out of memory. */
int gpbt_oom_map_block(const gpb_block_info_t *b, void *m);
/* Clears m and walks the pool (or model) into it, then calls name (may be
 * NULL) on each allocation. 0 or a negative GPB_E* code. */
int gpbt_oom_map_pool(gpbt_oom_map_t *m, const gpb_pool_t *pool,
                      gpbt_oom_name_fn name, void *user);
int gpbt_oom_map_model(gpbt_oom_map_t *m, const gpb_model_t *model,
                       gpbt_oom_name_fn name, void *user);

/* A window [offset, offset + size) and the live allocations in it. */
typedef struct gpbt_oom_window {
  uint64_t offset, size; /* size 0: the pool has no window of that size */
  uint64_t live_bytes;   /* bytes of live blocks inside the window */
  uint64_t live_allocs;  /* allocations with blocks inside it */
  uint64_t newest_ns;    /* the latest time_ns among them; 0 when none */
  size_t first;          /* they are m->a[first .. first + live_allocs) */
} gpbt_oom_window_t;

/* The cheapest window of `size` bytes in m (see above): aligned, windows
 * start at multiples of size (a power of two); else at any multiple of
 * min_block (a run). out->size is 0 when none fits in the pool. 0 or
 * GPB_EHOSTMEM. */
int gpbt_oom_cheapest(const gpbt_oom_map_t *m, uint64_t size, int aligned,
                      gpbt_oom_window_t *out);

/* Allocations listed per explanation: those holding the most bytes of
 * the window, in address order; the window's totals count them all. */
#define GPBT_OOM_LIST 8

/* One failure explained. */
typedef struct gpbt_oom {
  /* The request, as the caller names it (explain leaves these alone). */
  uint64_t op;      /* op number in the trace */
  uint64_t id;      /* trace id */
  uint64_t time_ns; /* when it failed: ages are measured from here */
  uint32_t tag;
  /* The pool when it failed. */
  gpb_policy_t policy;
  uint64_t requested;
  uint64_t need;         /* the block (aligned) or run it needed; 0: larger
                            than the pool */
  int aligned;           /* buddy, trim: an aligned block; bestfit: a run */
  uint64_t managed, min_block;
  uint64_t free_bytes;   /* bytes in free blocks */
  uint64_t largest_free; /* largest free block, unmerged buddies merged */
  uint64_t largest_run;  /* largest run of free bytes */
  gpbt_oom_window_t win; /* the cheapest window of need bytes */
  gpbt_oom_alloc_t *list; /* its allocations (malloc'd), in_window set */
  size_t nlist;           /* min(win.live_allocs, GPBT_OOM_LIST) */
  char **site_names;      /* NULL, or nlist names of list[i].site (each
                             NULL or malloc'd): set by the caller, which
                             knows the frames; freed by gpbt_oom_free */
} gpbt_oom_t;

/* Explains a failed request of `requested` bytes against m with the given
 * policy. Fills every field but the caller's (op, id, time_ns, tag).
 * 0 or GPB_EHOSTMEM; gpbt_oom_free releases the list either way. */
int gpbt_oom_explain(const gpbt_oom_map_t *m, gpb_policy_t policy,
                     uint64_t requested, gpbt_oom_t *out);
void gpbt_oom_free(gpbt_oom_t *o);

/* Text: a few lines per failure, each starting with indent. */
void gpbt_oom_print(FILE *f, const gpbt_oom_t *o, const char *indent);
/* JSON: one object, a member per line below indent (the list of
 * allocations a row each); the caller writes nothing around it but the
 * separator before it. */
void gpbt_oom_json(FILE *f, const gpbt_oom_t *o, const char *indent);

#endif /* GPBT_OOM_H */
