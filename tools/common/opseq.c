/* SPDX-License-Identifier: MIT */
/*
 * opseq.c: loads a trace into a gpbt_seq_t (opseq.h). Trace ids become
 * slot numbers through the id map of replay-util.c, which holds only the
 * ids live at the time, so loading needs memory for the ops and the peak
 * live count, not for every id the trace ever used.
 */
#include "opseq.h"

#include "gpubuddy.h"
#include "idmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gpbt_seq_push(gpbt_seq_t *q, int alloc, uint32_t slot, uint64_t size) {
  if (q->n == q->cap) {
    size_t nc = q->cap ? q->cap * 2 : 4096;
    gpbt_op_t *p = realloc(q->ops, nc * sizeof *p);
    if (!p) return GPB_EHOSTMEM;
    q->ops = p;
    q->cap = nc;
  }
  q->ops[q->n++] = (gpbt_op_t){size, slot, (uint32_t)(alloc != 0)};
  return 0;
}

/* A new slot for one allocation; slots are never reused, so a replay's
 * pointer array holds every allocation apart. */
static int seq_alloc(gpbt_seq_t *q, uint64_t size, uint32_t *slot) {
  if (q->nslots >= UINT32_MAX) return GPB_EHOSTMEM;
  *slot = (uint32_t)q->nslots++;
  q->allocs++;
  return gpbt_seq_push(q, 1, *slot, size);
}

/* Trace ids of requests that failed when recorded (docs/TRACE_FORMAT.md:
 * the reader gives each as an alloc of such an id and its free at once). */
#define SEQ_FAIL_ID (1ull << 63)

static int seq_op(gpbt_seq_t *q, gpbt_idmap_t *m, const gpb_trace_op_t *op,
                  int with_failed) {
  uint32_t slot;
  int rc;
  int failed = (op->id & SEQ_FAIL_ID) != 0;
  if (failed && !with_failed) { /* counted, not kept */
    q->failed += op->op == GPB_OP_ALLOC;
    return 0;
  }
  if (op->op == GPB_OP_ALLOC) {
    if (op->size == 0) {
      q->zero++;
      return 0;
    }
    gpbt_idslot_t *e = gpbt_idmap_claim(m, op->id, &rc);
    if (!e && !rc) { /* live already: the replay skips it */
      q->dup++;
      return 0;
    }
    if (!e) return rc;
    if ((rc = seq_alloc(q, op->size, &slot))) return rc;
    gpbt_idmap_commit(m, e, op->id, slot);
    q->failed += (uint64_t)failed;
    return 0;
  }
  if (op->op == GPB_OP_FREE) {
    gpbt_idslot_t *e = gpbt_idmap_find(m, op->id);
    if (!e) {
      q->unmatched++; /* allocated before the trace began */
      return 0;
    }
    slot = (uint32_t)e->val;
    gpbt_idmap_remove(m, e);
    q->frees++;
    return gpbt_seq_push(q, 0, slot, 0);
  }
  return 0;
}

int gpbt_seq_load(const char *path, int with_failed, gpbt_seq_t *q,
                  char *err, size_t errlen) {
  memset(q, 0, sizeof *q);
  gpb_trace_reader_t *r;
  int rc = gpb_trace_open(path, &r);
  if (rc) {
    snprintf(err, errlen, "%s: %s: %s", path, gpb_strerror(rc),
             gpb_last_error_detail());
    return rc;
  }
  gpbt_idmap_t m = {0};
  gpb_trace_op_t op;
  int rd;
  while ((rd = gpb_trace_next(r, &op)) == 1)
    if ((rc = seq_op(q, &m, &op, with_failed))) break;
  if (rc == 0 && rd < 0) {
    rc = rd;
    snprintf(err, errlen, "%s: %s: %s", path, gpb_strerror(rd),
             gpb_trace_error(r));
  } else if (rc == 0) {
    rc = gpbt_seq_peak(q);
  }
  if (rc && rc != rd) snprintf(err, errlen, "%s: out of memory", path);
  gpb_trace_close(r);
  gpbt_idmap_fini(&m);
  if (rc) gpbt_seq_free(q);
  return rc;
}

int gpbt_seq_peak(gpbt_seq_t *q) {
  uint64_t *sz = calloc(q->nslots ? q->nslots : 1, sizeof *sz);
  if (!sz) return GPB_EHOSTMEM;
  uint64_t live = 0, peak = 0, top = 0;
  for (size_t i = 0; i < q->n; i++) {
    const gpbt_op_t *op = &q->ops[i];
    if (op->alloc) {
      live -= sz[op->slot];
      sz[op->slot] = op->size;
      live += op->size;
      if (live > peak) peak = live;
      if (op->size > top) top = op->size;
    } else {
      live -= sz[op->slot];
      sz[op->slot] = 0;
    }
  }
  free(sz);
  q->peak_live = peak;
  q->max_request = top;
  return 0;
}

void gpbt_seq_free(gpbt_seq_t *q) {
  free(q->ops);
  memset(q, 0, sizeof *q);
}

uint64_t gpbt_pool_size_for(uint64_t peak_live, uint64_t max_request) {
  uint64_t want = peak_live > UINT64_MAX / 2 ? UINT64_MAX : peak_live * 2;
  uint64_t p = 1;
  if (want < max_request) want = max_request;
  if (want < (1u << 20)) want = 1u << 20;
  while (p < want && p < (1ull << 62)) p <<= 1;
  return p;
}
