/* SPDX-License-Identifier: MIT */
/*
 * trace.c: gpb_plan_make for the run a trace recorded (gpubuddy.make_plan
 * calls it through ctypes). Built into libgpubuddy-read, beside the trace
 * readers it uses.
 *
 * The trace names allocations by ids, which a free repeats; the planner
 * wants slots. Rather than a hash table over live ids, the ops are sorted
 * by (id, position): each id's ops then come in trace order, and a walk
 * pairs every free with the allocation before it. Skipped, as the replay
 * skips them (tools/common/opseq.c): zero-size requests, an allocation of
 * an id already live, and a free of an id not live (allocated before the
 * trace began). Requests that failed when recorded are kept (the reader
 * gives each as an allocation of a marked id and its free at once), as a
 * pool that serves every request must place them.
 */
#include "plan/plan.h"

#include <stdlib.h>
#include <string.h>

typedef struct trace_rec {
  uint64_t id, size; /* size: 0 for a free */
  uint64_t pos;      /* in the trace; bit 63: skipped */
  uint64_t mate;     /* a free: the position of its allocation */
} trace_rec_t;

#define TRACE_SKIP (1ull << 63)

static int trace_by_id(const void *a, const void *b) {
  const trace_rec_t *x = a, *y = b;
  if (x->id != y->id) return x->id < y->id ? -1 : 1;
  return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int trace_by_pos(const void *a, const void *b) {
  uint64_t x = ((const trace_rec_t *)a)->pos & ~TRACE_SKIP;
  uint64_t y = ((const trace_rec_t *)b)->pos & ~TRACE_SKIP;
  return x < y ? -1 : x > y;
}

/* Reads every alloc and free of the trace into *out (*n of them). */
static int trace_read(const char *path, trace_rec_t **out, size_t *n) {
  gpb_trace_reader_t *r;
  int rc = gpb_trace_open(path, &r), rd;
  if (rc) return rc;
  trace_rec_t *v = NULL;
  size_t cap = 0;
  gpb_trace_op_t op;
  *n = 0;
  while ((rd = gpb_trace_next(r, &op)) == 1) {
    if (op.op != GPB_OP_ALLOC && op.op != GPB_OP_FREE) continue;
    if (op.op == GPB_OP_ALLOC && op.size == 0) continue;
    if (*n == cap) {
      size_t nc = cap ? cap * 2 : 4096;
      trace_rec_t *t = realloc(v, nc * sizeof *t);
      if (!t) {
        rd = gpb__fail(GPB_EHOSTMEM, "%s: no host memory for %zu ops", path,
                       nc);
        break;
      }
      v = t;
      cap = nc;
    }
    v[*n] = (trace_rec_t){op.id, op.op == GPB_OP_ALLOC ? op.size : 0, *n, 0};
    (*n)++;
  }
  if (rd < 0 && rd != GPB_EHOSTMEM)
    rd = gpb__fail(rd, "%s: %s", path, gpb_trace_error(r));
  gpb_trace_close(r);
  if (rd < 0) {
    free(v);
    return rd;
  }
  *out = v;
  return 0;
}

/* Pairs frees with allocations, id by id, and marks what is skipped. */
static void trace_pair(trace_rec_t *v, size_t n) {
  qsort(v, n, sizeof *v, trace_by_id);
  for (size_t i = 0; i < n;) {
    size_t j = i;
    uint64_t live = UINT64_MAX;
    for (; j < n && v[j].id == v[i].id; j++) {
      if (v[j].size) { /* an allocation */
        if (live != UINT64_MAX) v[j].pos |= TRACE_SKIP;
        else live = v[j].pos;
      } else if (live == UINT64_MAX) {
        v[j].pos |= TRACE_SKIP;
      } else {
        v[j].mate = live;
        live = UINT64_MAX;
      }
    }
    i = j;
  }
  qsort(v, n, sizeof *v, trace_by_pos);
}

/* The planner's ops, in trace order (v sorted by position, so an op's
 * position is its index), and the peak of live bytes. */
static int trace_ops(const trace_rec_t *v, size_t n, gpb_plan_op_t **ops,
                     size_t *nops, size_t *nslots, uint64_t *peak) {
  size_t m = n ? n : 1;
  gpb_plan_op_t *o = malloc(m * sizeof *o);
  uint32_t *slot = malloc(m * sizeof *slot); /* by position */
  uint64_t *size = malloc(m * sizeof *size); /* by slot */
  int rc = 0;
  size_t k = 0, s = 0;
  uint64_t live = 0;
  *peak = 0;
  if (!o || !slot || !size) {
    rc = gpb__fail(GPB_EHOSTMEM, "no host memory for %zu ops", n);
    n = 0;
  }
  for (size_t i = 0; i < n; i++) {
    if (v[i].pos & TRACE_SKIP) continue;
    if (v[i].size) {
      if (s >= UINT32_MAX) break; /* slots are 32 bits: plan what fits */
      slot[i] = (uint32_t)s;
      size[s] = v[i].size;
      o[k++] = (gpb_plan_op_t){v[i].size, (uint32_t)s++, 1};
      live += v[i].size;
      if (live > *peak) *peak = live;
    } else {
      uint32_t a = slot[v[i].mate];
      live -= size[a];
      o[k++] = (gpb_plan_op_t){0, a, 0};
    }
  }
  free(slot);
  free(size);
  if (rc) {
    free(o);
    return rc;
  }
  *ops = o;
  *nops = k;
  *nslots = s;
  return 0;
}

int gpb_plan_make_trace(const char *trace_path, size_t min_block,
                        gpb_plan_t **out, uint64_t *peak_live) {
  if (!out) return gpb__fail(GPB_EINVAL, "out is NULL");
  *out = NULL;
  if (!trace_path) return gpb__fail(GPB_EINVAL, "trace_path is NULL");
  trace_rec_t *v = NULL;
  size_t n = 0, nops = 0, nslots = 0;
  gpb_plan_op_t *ops = NULL;
  uint64_t peak = 0;
  int rc = trace_read(trace_path, &v, &n);
  if (!rc) {
    trace_pair(v, n);
    rc = trace_ops(v, n, &ops, &nops, &nslots, &peak);
  }
  free(v);
  if (!rc)
    rc = gpb_plan_make(ops, nops, nslots, min_block, NULL, NULL, out);
  free(ops);
  if (!rc && peak_live) *peak_live = peak;
  return rc;
}
