/* SPDX-License-Identifier: MIT */
/*
 * minpool.c: the exact smallest-pool search (minpool.h says why it scans
 * rather than bisects).
 */
#include "minpool.h"

#include <stdlib.h>
#include <string.h>

uint64_t gpbt_minpool_step(uint64_t peak, uint64_t min_block) {
  uint64_t s = (peak / 1024 + min_block - 1) / min_block * min_block;
  return s ? s : min_block;
}

int gpbt_minpool_scan(uint64_t lower, uint64_t step, uint64_t upper,
                      gpbt_fits_fn fits, void *ctx, gpbt_probe_fn probe,
                      void *user, gpbt_minpool_t *out) {
  memset(out, 0, sizeof *out);
  out->lower = lower;
  out->step = step;
  for (uint64_t s = lower; s <= upper; s += step) {
    int f = fits(ctx, s);
    out->probes++;
    if (probe) probe(user, s, f, out->probes);
    if (f < 0) return f;
    if (f) {
      out->size = s;
      return 0;
    }
  }
  return GPB_ENOMEM;
}

int gpbt_seq_fits(const gpbt_seq_t *q, void **ptrs, uint64_t pool_size,
                  size_t min_block, gpb_policy_t policy) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = (size_t)pool_size;
  cfg.min_block = min_block;
  cfg.policy = policy;
  /* A probe must not publish or record itself because the environment
   * says so, and it maps only the metadata it touches. */
  cfg.flags = GPB_CFG_NO_ENV | GPB_CFG_LAZY_META;
  gpb_pool_t *pool;
  int rc = gpb_pool_create(&cfg, &pool);
  if (rc) return rc;
  int ok = 1;
  for (size_t i = 0; i < q->n && ok; i++) {
    const gpbt_op_t *op = &q->ops[i];
    if (op->alloc) {
      if (gpb_alloc(pool, (size_t)op->size, &ptrs[op->slot])) ok = 0;
    } else if (ptrs[op->slot]) {
      gpb_free(pool, ptrs[op->slot]);
      ptrs[op->slot] = NULL;
    }
  }
  memset(ptrs, 0, q->nslots * sizeof *ptrs);
  gpb_pool_destroy(pool); /* live blocks die with the pool */
  return ok;
}

typedef struct minpool_ctx {
  const gpbt_seq_t *q;
  void **ptrs;
  size_t min_block;
  gpb_policy_t policy;
} minpool_ctx_t;

static int minpool_fits(void *ctx, uint64_t size) {
  minpool_ctx_t *c = ctx;
  return gpbt_seq_fits(c->q, c->ptrs, size, c->min_block, c->policy);
}

int gpbt_minpool_find(const gpbt_seq_t *q, size_t min_block,
                      gpb_policy_t policy, uint64_t step, gpbt_probe_fn probe,
                      void *user, gpbt_minpool_t *out) {
  memset(out, 0, sizeof *out);
  uint64_t g = min_block;
  uint64_t need = q->peak_live > q->max_request ? q->peak_live : q->max_request;
  if (need == 0) need = g;
  if (step == 0) step = gpbt_minpool_step(need, g);
  step = (step + g - 1) / g * g;
  uint64_t lower = (need + step - 1) / step * step;
  minpool_ctx_t c = {q, calloc(q->nslots ? q->nslots : 1, sizeof(void *)), g,
                     policy};
  if (!c.ptrs) return GPB_EHOSTMEM;
  /* A size that fits bounds the scan: twice the need, doubled until it
   * fits. */
  uint64_t upper = (2 * need + step - 1) / step * step, probes = 0;
  int f, rc = 0;
  for (;;) {
    f = minpool_fits(&c, upper);
    probes++;
    if (probe) probe(user, upper, f, probes);
    if (f < 0) {
      rc = f;
      goto out;
    }
    if (f) break;
    if (upper > ((uint64_t)1 << 46)) {
      rc = GPB_ENOMEM;
      goto out;
    }
    upper *= 2;
  }
  rc = gpbt_minpool_scan(lower, step, upper, minpool_fits, &c, probe, user,
                         out);
  out->probes += probes;
out:
  free(c.ptrs);
  return rc;
}
