/* SPDX-License-Identifier: MIT */
/*
 * stream.c: the GPU side of a device or pinned pool: stream-ordered frees
 * with the semantics of cudaFreeAsync, and the NVTX region of every block.
 *
 * gpb_free_async(pool, ptr, s) records a CUDA event on s and parks the
 * block on a pending list; the block stays allocated in the buddy core
 * (stats, hooks and the viewer still see it used) until the event has
 * completed, which proves that every piece of work queued on s before the
 * free has finished. Then the block is freed normally and its FREE event
 * is emitted: only then can another stream get it. No call here ever
 * synchronizes the device or a stream.
 *
 * Pending blocks are kept per stream in free order. Events recorded on one
 * stream complete in that order, so only the oldest entry of each stream
 * is worth querying. At the start of each allocation and free, at most
 * REAP_QUERIES cudaEventQuery calls over at most REAP_STREAMS streams
 * return the blocks whose work is done: the cost per call is bounded
 * whatever the number of pending blocks.
 *
 * Reuse rule: an allocation on stream s takes a block pending on the same
 * s at once, with no event check, when that block has exactly the number
 * of units the allocation would take from the buddy core (with the buddy
 * policy: the same order; with trim and best-fit: the same number of
 * min_block units) and meets the alignment asked for. Work queued
 * on s after the allocation runs after the work queued before the free, so
 * this is safe without waiting. The pool then emits FREE for the old
 * allocation followed by ALLOC for the new one on the same range (no
 * merges in between: the state after is the state before).
 *
 * GPB_CFG_SOLO_STREAM: while one stream is all the pool has been given,
 * an async free is a plain free (the reuse rule covers every later
 * allocation). When a second stream shows up, blocks freed that way may
 * still be in use by work queued on the first, so one event (the fence)
 * is recorded there, every other stream is made to wait for it until it
 * completes, and async frees take the event path from then on.
 *
 * When an allocation finds no block (GPB_ENOMEM), every stream's pending
 * blocks whose events are done are returned and the allocation retried;
 * only if it still fails does it wait (cudaEventSynchronize) for the
 * oldest pending free, return that block, and retry, until it succeeds
 * or nothing is pending. That is the only wait in this file. The FAIL
 * events of the attempts that are retried are not emitted: the pool emits
 * FAIL only for an allocation that really fails.
 *
 * All state is guarded by the pool's lock, held by the caller. Every CUDA
 * call runs on the pool's device; the caller's current device is saved and
 * restored around it.
 */
#include "gpu/gpu.h"

#include <stdlib.h>
#include <string.h>

#ifdef GPB_HAVE_CUDA
#include <cuda_runtime_api.h>

#define REAP_QUERIES 8 /* cudaEventQuery calls per alloc/free, at most */
#define REAP_STREAMS 4 /* stream heads visited per alloc/free, at most */

/* One block waiting for the work queued before its async free. */
typedef struct stream_pend {
  uint64_t unit, units;
  uint64_t seq; /* order of the frees: the smallest is the oldest */
  void *stream;
  cudaEvent_t ev;
  struct stream_pend *next, *prev;   /* its stream's list, oldest first */
  struct stream_pend *bnext, *bprev; /* its stream's size class, newest first */
  struct stream_pend *hnext;         /* hash chain by unit */
} stream_pend_t;

/* The pending blocks of one stream. Only streams with pending blocks are
 * kept, so a program that makes a stream per request does not grow this. */
typedef struct stream_q {
  void *stream;
  stream_pend_t *head, *tail;
  stream_pend_t *cls[64]; /* by floor(log2(units)) */
} stream_q_t;

struct gpb__gpu {
  int device;
  char *base;
  void *heap; /* NVTX heap handle, NULL when no tool listens */
  stream_q_t *q;
  uint32_t nq, capq, rr; /* rr: next stream to visit when reaping */
  stream_pend_t **hash;
  uint64_t hmask; /* buckets - 1 */
  stream_pend_t *spare; /* recycled entries */
  cudaEvent_t *evs;     /* recycled events, created with timing disabled */
  uint32_t nevs, capevs;
  uint64_t npending, seq;
  gpb__emit_fn emit; /* the core's consumer, saved while FAILs are muted */
  void *emit_ctx;
  int child; /* an arena's: the heap is its pool's, and out of memory it
                asks the pool for room instead of waiting */
  /* GPB_CFG_SOLO_STREAM: 0 off, 1 no stream yet, 2 one (solo), 3 more. */
  int solo_state;
  void *solo;
  cudaEvent_t fence; /* recorded on solo when the second stream came */
};

/* ------------------------------------------------------------- devices */

/* Makes the pool's device current; returns the caller's for stream_leave. */
static int stream_enter(const gpb__gpu_t *g) { return gpb__cuda_enter(g->device); }

static void stream_leave(const gpb__gpu_t *g, int saved) {
  gpb__cuda_leave(saved, g->device);
}

/* --------------------------------------------------------------- lists */

static uint64_t stream_hash(const gpb__gpu_t *g, uint64_t unit) {
  return gpb__hash64(unit) & g->hmask; /* the project's one hash */
}

static stream_pend_t *stream_lookup(const gpb__gpu_t *g, uint64_t unit) {
  stream_pend_t *e = g->hash[stream_hash(g, unit)];
  while (e && e->unit != unit) e = e->hnext;
  return e;
}

/* Doubles the hash when it is full; a failed growth keeps the old one
 * (longer chains, still correct). */
static void stream_hash_grow(gpb__gpu_t *g) {
  uint64_t n = (g->hmask + 1) * 2;
  stream_pend_t **h = calloc(n, sizeof *h);
  if (!h) return;
  uint64_t old = g->hmask + 1;
  stream_pend_t **oh = g->hash;
  g->hash = h;
  g->hmask = n - 1;
  for (uint64_t i = 0; i < old; i++) {
    for (stream_pend_t *e = oh[i], *nx; e; e = nx) {
      nx = e->hnext;
      uint64_t b = stream_hash(g, e->unit);
      e->hnext = h[b];
      h[b] = e;
    }
  }
  free(oh);
}

static int stream_q_find(const gpb__gpu_t *g, void *stream) {
  for (uint32_t i = 0; i < g->nq; i++)
    if (g->q[i].stream == stream) return (int)i;
  return -1;
}

static uint32_t stream_class(uint64_t units) {
  return 63u - (uint32_t)__builtin_clzll(units);
}

static void stream_link(gpb__gpu_t *g, stream_q_t *q, stream_pend_t *e) {
  e->next = NULL;
  e->prev = q->tail;
  if (q->tail) q->tail->next = e; else q->head = e;
  q->tail = e;
  uint32_t c = stream_class(e->units);
  e->bprev = NULL;
  e->bnext = q->cls[c];
  if (e->bnext) e->bnext->bprev = e;
  q->cls[c] = e;
  uint64_t b = stream_hash(g, e->unit);
  e->hnext = g->hash[b];
  g->hash[b] = e;
  g->npending++;
}

/* Takes e off every list; drops its stream's queue when it empties (the
 * last queue moves into its slot). */
static void stream_unlink(gpb__gpu_t *g, uint32_t qi, stream_pend_t *e) {
  stream_q_t *q = &g->q[qi];
  if (e->prev) e->prev->next = e->next; else q->head = e->next;
  if (e->next) e->next->prev = e->prev; else q->tail = e->prev;
  if (e->bprev) e->bprev->bnext = e->bnext;
  else q->cls[stream_class(e->units)] = e->bnext;
  if (e->bnext) e->bnext->bprev = e->bprev;
  stream_pend_t **pp = &g->hash[stream_hash(g, e->unit)];
  while (*pp != e) pp = &(*pp)->hnext;
  *pp = e->hnext;
  g->npending--;
  if (!q->head) g->q[qi] = g->q[--g->nq];
}

/* Returns e's event and e itself to the free lists. */
static void stream_recycle(gpb__gpu_t *g, stream_pend_t *e) {
  if (g->nevs == g->capevs) {
    uint32_t cap = g->capevs ? g->capevs * 2 : 16;
    cudaEvent_t *v = realloc(g->evs, cap * sizeof *v);
    if (v) {
      g->evs = v;
      g->capevs = cap;
    }
  }
  if (g->nevs < g->capevs) g->evs[g->nevs++] = e->ev;
  else cudaEventDestroy(e->ev);
  e->hnext = g->spare;
  g->spare = e;
}

/* The block's work is done: free it for real (the FREE event goes out
 * now). Returns 1 when its stream's queue was dropped. */
static int stream_complete(gpb__gpu_t *g, gpb__buddy_t *core, uint32_t qi,
                           stream_pend_t *e) {
  uint32_t nq = g->nq;
  stream_unlink(g, qi, e);
  uint64_t off = e->unit << core->min_shift;
  gpb__nvtx_region_remove(g->heap, g->base + off);
  /* Cannot fail: the block is a live allocation until now. */
  gpb__buddy_free(core, off, (uint64_t)(uintptr_t)e->stream);
  stream_recycle(g, e);
  return g->nq != nq;
}

/* 1 when the work before e's free has finished. An error other than "not
 * ready" means the context is broken and runs nothing more, so the block
 * is safe to hand out again (and the error is the caller's to see). */
static int stream_done(stream_pend_t *e) {
  cudaError_t r = cudaEventQuery(e->ev);
  if (r == cudaErrorNotReady) {
    cudaGetLastError();
    return 0;
  }
  if (r != cudaSuccess) cudaGetLastError();
  return 1;
}

/* Returns completed blocks, oldest first per stream, with at most
 * `queries` event queries over at most `visits` streams. Returns how many
 * blocks came back. */
static uint64_t stream_reap(gpb__gpu_t *g, gpb__buddy_t *core, uint64_t queries,
                            uint32_t visits) {
  uint64_t back = 0;
  if (visits > g->nq) visits = g->nq;
  while (visits-- && queries && g->nq) {
    if (g->rr >= g->nq) g->rr = 0;
    uint32_t qi = g->rr;
    int dropped = 0;
    while (queries && !dropped) {
      stream_pend_t *e = g->q[qi].head;
      queries--;
      if (!stream_done(e)) break;
      dropped = stream_complete(g, core, qi, e);
      back++;
    }
    if (!dropped) g->rr++;
  }
  return back;
}

/* Waits for the oldest pending free and returns its block. */
static void stream_wait_oldest(gpb__gpu_t *g, gpb__buddy_t *core) {
  uint32_t best = 0;
  for (uint32_t i = 1; i < g->nq; i++)
    if (g->q[i].head->seq < g->q[best].head->seq) best = i;
  stream_pend_t *e = g->q[best].head;
  if (cudaEventSynchronize(e->ev) != cudaSuccess) cudaGetLastError();
  stream_complete(g, core, best, e);
}

/* ------------------------------------------------------------- entries */

/* Empty state for `device` and `base`: no heap, no pending frees. */
static int stream_new(int device, void *base, gpb__gpu_t **out) {
  gpb__gpu_t *g = calloc(1, sizeof *g);
  if (g) {
    g->hmask = 63;
    g->hash = calloc(g->hmask + 1, sizeof *g->hash);
  }
  if (!g || !g->hash) {
    free(g);
    return gpb__fail(GPB_EHOSTMEM, "no host memory for GPU state");
  }
  g->device = device;
  g->base = base;
  *out = g;
  return 0;
}

int gpb__gpu_open(gpb_backend_t backend, int device, void *base, size_t size,
                  gpb__gpu_t **out) {
  *out = NULL;
  if (backend != GPB_BACKEND_DEVICE && backend != GPB_BACKEND_PINNED) return 0;
  gpb__gpu_t *g;
  int rc = stream_new(device, base, &g);
  if (rc) return rc;
  if (size) { /* 0: a GPB_CFG_VMM range, which NVTX refuses as a heap */
    int saved = stream_enter(g);
    g->heap = gpb__nvtx_heap_open(base, size);
    stream_leave(g, saved);
  }
  *out = g;
  return 0;
}

int gpb__gpu_open_child(const gpb__gpu_t *parent, gpb__gpu_t **out) {
  *out = NULL;
  if (!parent) return 0;
  int rc = stream_new(parent->device, parent->base, out);
  if (rc) return rc;
  (*out)->heap = parent->heap;
  (*out)->child = 1;
  return 0;
}

void gpb__gpu_close(gpb__gpu_t *g) {
  if (!g) return;
  int saved = stream_enter(g);
  /* Pending blocks die with the pool like live ones: no events. The
   * backend's cudaFree/cudaFreeHost waits for the work still using them;
   * destroying a recorded event is allowed before it completes. */
  for (uint32_t i = 0; i < g->nq; i++) {
    for (stream_pend_t *e = g->q[i].head, *nx; e; e = nx) {
      nx = e->next;
      cudaEventDestroy(e->ev);
      free(e);
    }
  }
  for (uint32_t i = 0; i < g->nevs; i++) cudaEventDestroy(g->evs[i]);
  if (g->fence) cudaEventDestroy(g->fence);
  for (stream_pend_t *e = g->spare, *nx; e; e = nx) {
    nx = e->hnext;
    free(e);
  }
  if (!g->child) gpb__nvtx_heap_close(g->heap);
  stream_leave(g, saved);
  free(g->evs);
  free(g->q);
  free(g->hash);
  free(g);
}

void gpb__gpu_set_solo(gpb__gpu_t *g) {
  if (g && !g->child) g->solo_state = 1;
}

/* Notes the stream of an allocation or async free: 1 while it is the only
 * one so far. A second stream ends that: the fence goes on the first, or
 * when no event can be had, the first is waited for once, here. */
static int stream_solo(gpb__gpu_t *g, void *stream) {
  if (g->solo_state == 1) {
    g->solo = stream;
    g->solo_state = 2;
  }
  if (g->solo_state != 2) return 0;
  if (stream == g->solo) return 1;
  g->solo_state = 3;
  int saved = stream_enter(g);
  cudaEvent_t ev = NULL;
  if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess ||
      cudaEventRecord(ev, (cudaStream_t)g->solo) != cudaSuccess) {
    cudaGetLastError();
    if (ev) cudaEventDestroy(ev);
    ev = NULL;
    cudaStreamSynchronize((cudaStream_t)g->solo);
    cudaGetLastError();
  }
  g->fence = ev;
  stream_leave(g, saved);
  return 0;
}

/* Work on `stream` is about to use a block: it runs after the fence,
 * which is dropped once it has completed. */
static void stream_fence(gpb__gpu_t *g, void *stream) {
  if (!g->fence || stream == g->solo) return;
  int saved = stream_enter(g);
  if (cudaEventQuery(g->fence) == cudaSuccess) {
    cudaEventDestroy(g->fence);
    g->fence = NULL;
  } else if (cudaStreamWaitEvent((cudaStream_t)stream, g->fence, 0) !=
             cudaSuccess) {
    cudaEventSynchronize(g->fence); /* cannot order it: wait here */
  }
  cudaGetLastError();
  stream_leave(g, saved);
}

int gpb__gpu_pending(const gpb__gpu_t *g, uint64_t unit) {
  return g->npending != 0 && stream_lookup(g, unit) != NULL;
}

uint64_t gpb__gpu_npending(const gpb__gpu_t *g) { return g->npending; }

/* Forwards every event but FAIL to the pool (see the header comment). */
static void stream_mute_fail(void *ctx, gpb_event_t *ev) {
  gpb__gpu_t *g = ctx;
  if (ev->type != GPB_EV_FAIL) g->emit(g->emit_ctx, ev);
}

static int stream_try(gpb__gpu_t *g, gpb__buddy_t *core, uint64_t requested,
                      uint32_t align_order, uint32_t tag, uint32_t site,
                      void *stream, uint64_t time_ns, uint64_t *unit,
                      int mute) {
  if (mute) {
    g->emit = core->sink.emit;
    g->emit_ctx = core->sink.emit_ctx;
    core->sink.emit = stream_mute_fail;
    core->sink.emit_ctx = g;
  }
  int rc = gpb__buddy_alloc(core, requested, align_order, tag, site,
                            (uint64_t)(uintptr_t)stream, time_ns, unit);
  if (mute) {
    core->sink.emit = g->emit;
    core->sink.emit_ctx = g->emit_ctx;
  }
  return rc;
}

/* The units gpb__buddy_alloc would take for this request, or 0 when it
 * would fail whatever is free. Mirrors its arithmetic. */
static uint64_t stream_units(const gpb__buddy_t *core, uint64_t requested,
                             uint32_t align_order) {
  uint64_t units = gpb__units(requested, core->min_shift,
                              core->nunits << core->min_shift);
  if (units == 0) return 0;
  if (core->policy == GPB_POLICY_BESTFIT) return units; /* any run length */
  uint32_t k = gpb__ceil_log2(units);
  if (align_order > k) k = align_order;
  if (k >= core->norders) return 0;
  return core->policy == GPB_POLICY_TRIM ? units : 1ull << k;
}

static void stream_emit(gpb__buddy_t *core, int type, uint64_t unit,
                        uint64_t units, uint64_t requested, uint32_t tag,
                        uint32_t site, void *stream) {
  if (!core->sink.emit) return;
  gpb_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.type = (uint8_t)type;
  ev.offset = unit << core->min_shift;
  ev.size = units << core->min_shift;
  ev.order = (uint8_t)gpb__canon_order(unit, units);
  ev.requested = requested;
  ev.tag = tag;
  ev.site = (uint16_t)site;
  ev.stream = (uint64_t)(uintptr_t)stream;
  core->sink.emit(core->sink.emit_ctx, &ev);
}

/* The reuse rule: a block pending on the same stream with exactly the
 * units this request takes. 1 with *unit set when one was taken. */
static int stream_reuse(gpb__gpu_t *g, gpb__buddy_t *core, uint64_t requested,
                        uint32_t align_order, uint32_t tag, uint32_t site,
                        void *stream, uint64_t time_ns, uint64_t *unit) {
  int qi = stream_q_find(g, stream);
  if (qi < 0) return 0;
  uint64_t n = stream_units(core, requested, align_order);
  if (n == 0) return 0;
  uint64_t amask = (1ull << align_order) - 1;
  stream_pend_t *e = g->q[qi].cls[stream_class(n)];
  while (e && (e->units != n || (e->unit & amask))) e = e->bnext;
  if (!e) return 0;
  gpb__arec_t *r = gpb__atab_find(&core->atab, e->unit);
  if (!r) return 0; /* cannot happen: pending blocks stay allocated */
  uint64_t u = e->unit;
  void *freed_on = e->stream;
  stream_unlink(g, (uint32_t)qi, e);
  stream_recycle(g, e);
  stream_emit(core, GPB_EV_FREE, u, n, r->requested, r->tag, r->site,
              freed_on);
  r->requested = requested;
  r->tag = tag;
  r->site = site;
  r->time_ns = time_ns;
  stream_emit(core, GPB_EV_ALLOC, u, n, requested, tag, site, stream);
  void *p = g->base + (u << core->min_shift);
  gpb__nvtx_region_remove(g->heap, p);
  gpb__nvtx_region_add(g->heap, p, requested);
  *unit = u;
  return 1;
}

int gpb__gpu_alloc(gpb__gpu_t *g, gpb__buddy_t *core, uint64_t requested,
                   uint32_t align_order, uint32_t tag, uint32_t site,
                   void *stream, uint64_t time_ns, uint64_t *unit) {
  int rc;
  if (g->solo_state && !stream_solo(g, stream)) stream_fence(g, stream);
  if (g->npending == 0) {
    rc = gpb__buddy_alloc(core, requested, align_order, tag, site,
                          (uint64_t)(uintptr_t)stream, time_ns, unit);
  } else {
    int saved = stream_enter(g);
    stream_reap(g, core, REAP_QUERIES, REAP_STREAMS);
    if (stream_reuse(g, core, requested, align_order, tag, site, stream,
                     time_ns, unit)) {
      stream_leave(g, saved);
      return 0; /* the region was re-registered */
    }
    for (;;) {
      int mute = g->npending != 0;
      rc = stream_try(g, core, requested, align_order, tag, site, stream,
                      time_ns, unit, mute);
      if (rc == 0) break;
      if (rc != GPB_ENOMEM || g->npending == 0) {
        /* A real failure: run it again unmuted so FAIL goes out once. */
        if (mute)
          rc = stream_try(g, core, requested, align_order, tag, site,
                          stream, time_ns, unit, 0);
        break;
      }
      if (stream_reap(g, core, UINT64_MAX, UINT32_MAX) == 0) {
        if (g->child) break; /* muted: the pool tries elsewhere first */
        stream_wait_oldest(g, core);
      }
    }
    stream_leave(g, saved);
  }
  if (rc == 0)
    gpb__nvtx_region_add(g->heap, g->base + (*unit << core->min_shift),
                         requested);
  return rc;
}

int gpb__gpu_free(gpb__gpu_t *g, gpb__buddy_t *core, uint64_t off,
                  void *stream, int async) {
  uint64_t u = off >> core->min_shift;
  int aligned = (off & ((1ull << core->min_shift) - 1)) == 0;
  int saved = -2; /* -2: the device was not switched */
  int rc = 0;
  if (async && g->solo_state && stream_solo(g, stream)) async = 0;
  if (g->npending) {
    saved = stream_enter(g);
    stream_reap(g, core, REAP_QUERIES, REAP_STREAMS);
  }
  if (aligned && gpb__gpu_pending(g, u)) {
    rc = gpb__fail(GPB_EDOUBLEFREE, "offset %llu was already freed with "
                   "gpb_free_async (its stream's work is not done yet)",
                   (unsigned long long)off);
  } else if (!async) {
    rc = gpb__buddy_free(core, off, (uint64_t)(uintptr_t)stream);
    if (rc == 0) gpb__nvtx_region_remove(g->heap, g->base + off);
  } else {
    const gpb__arec_t *r = aligned ? gpb__atab_find(&core->atab, u) : NULL;
    if (!r) {
      /* Not a live allocation: let the core name the misuse. It changes
       * nothing when it finds no allocation at off. */
      rc = gpb__buddy_free(core, off, (uint64_t)(uintptr_t)stream);
    } else {
      if (saved == -2) saved = stream_enter(g);
      stream_pend_t *e = g->spare;
      if (e) g->spare = e->hnext;
      else e = calloc(1, sizeof *e);
      cudaEvent_t ev = NULL;
      cudaError_t ce = cudaSuccess;
      if (!e) {
        rc = gpb__fail(GPB_EHOSTMEM, "no host memory for a pending free");
      } else if (g->nevs) {
        ev = g->evs[--g->nevs];
      } else if ((ce = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming)) !=
                 cudaSuccess) {
        cudaGetLastError();
        rc = gpb__fail(GPB_EBACKEND, "cudaEventCreateWithFlags on device %d: "
                       "%s", g->device, cudaGetErrorString(ce));
      }
      if (rc == 0 && (ce = cudaEventRecord(ev, (cudaStream_t)stream)) !=
                         cudaSuccess) {
        cudaGetLastError();
        rc = gpb__fail(GPB_EINVAL, "cudaEventRecord on stream %p for device "
                       "%d: %s (is the stream on another device?)", stream,
                       g->device, cudaGetErrorString(ce));
      }
      if (rc == 0) {
        e->unit = u;
        e->units = r->units;
        e->seq = ++g->seq;
        e->stream = stream;
        e->ev = ev;
        int qi = stream_q_find(g, stream);
        if (qi < 0 && g->nq == g->capq) {
          uint32_t cap = g->capq ? g->capq * 2 : 4;
          stream_q_t *q = realloc(g->q, cap * sizeof *q);
          if (q) {
            g->q = q;
            g->capq = cap;
          }
        }
        if (qi < 0 && g->nq < g->capq) {
          qi = (int)g->nq++;
          memset(&g->q[qi], 0, sizeof g->q[qi]);
          g->q[qi].stream = stream;
        }
        if (qi < 0) {
          rc = gpb__fail(GPB_EHOSTMEM, "no host memory for a stream queue");
        } else {
          stream_link(g, &g->q[qi], e);
          if (g->npending > g->hmask + 1) stream_hash_grow(g);
          e = NULL;
          ev = NULL;
        }
      }
      if (ev) {
        e->ev = ev;
        e->hnext = NULL;
        stream_recycle(g, e); /* keeps the event, shelves the entry */
      } else if (e) {
        e->hnext = g->spare;
        g->spare = e;
      }
    }
  }
  if (saved != -2) stream_leave(g, saved);
  return rc;
}

int gpb__gpu_drain(gpb__gpu_t *g, gpb__buddy_t *core) {
  if (!g || g->npending == 0) return 0;
  int saved = stream_enter(g);
  while (g->npending) stream_wait_oldest(g, core);
  stream_leave(g, saved);
  return 0;
}

#else /* !GPB_HAVE_CUDA: no device or pinned pool can exist. */

int gpb__gpu_open(gpb_backend_t backend, int device, void *base, size_t size,
                  gpb__gpu_t **out) {
  (void)backend, (void)device, (void)base, (void)size;
  *out = NULL;
  return 0;
}
int gpb__gpu_open_child(const gpb__gpu_t *parent, gpb__gpu_t **out) {
  (void)parent;
  *out = NULL;
  return 0;
}
void gpb__gpu_set_solo(gpb__gpu_t *g) { (void)g; }
void gpb__gpu_close(gpb__gpu_t *g) { (void)g; }
int gpb__gpu_alloc(gpb__gpu_t *g, gpb__buddy_t *core, uint64_t requested,
                   uint32_t align_order, uint32_t tag, uint32_t site,
                   void *stream, uint64_t time_ns, uint64_t *unit) {
  (void)g;
  return gpb__buddy_alloc(core, requested, align_order, tag, site,
                          (uint64_t)(uintptr_t)stream, time_ns, unit);
}
int gpb__gpu_free(gpb__gpu_t *g, gpb__buddy_t *core, uint64_t off,
                  void *stream, int async) {
  (void)g, (void)async;
  return gpb__buddy_free(core, off, (uint64_t)(uintptr_t)stream);
}
int gpb__gpu_pending(const gpb__gpu_t *g, uint64_t unit) {
  (void)g, (void)unit;
  return 0;
}
uint64_t gpb__gpu_npending(const gpb__gpu_t *g) {
  (void)g;
  return 0;
}
int gpb__gpu_drain(gpb__gpu_t *g, gpb__buddy_t *core) {
  (void)g, (void)core;
  return 0;
}

#endif
