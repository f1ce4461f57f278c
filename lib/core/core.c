/* SPDX-License-Identifier: MIT */
/*
 * core.c: the core's one dispatcher. A core places by one of two
 * policies families: power-of-two blocks (GPB_POLICY_BUDDY and TRIM,
 * buddy.c, per-order free bitsets) or best fit (GPB_POLICY_BESTFIT,
 * fit.c, free runs; b->exts is set). Every entry point that differs
 * between them chooses here, and only here; buddy.c and fit.c never ask
 * which one they are. The two hot calls, gpb__buddy_alloc and
 * gpb__buddy_free, choose inline in core.h, so the choice costs them no
 * call. What both families share (the allocation table, the start bits,
 * the counters' sink, coalescing and the model's primitives) stays in
 * buddy.c.
 */
#include "core/core.h"
#include "plan/plan.h"

#include <stdlib.h>
#include <string.h>

/* Marks the roots free: one run for best fit, the binary digits of
 * nunits as blocks for the others. */
static void core_set_roots(gpb__buddy_t *b) {
  if (b->exts)
    gpb__fit_roots(b);
  else
    gpb__pow2_set_roots(b);
}

int gpb__buddy_init(gpb__buddy_t *b, uint64_t nunits, uint32_t min_shift,
                    gpb_policy_t policy) {
  memset(b, 0, sizeof *b);
  if (nunits == 0) return gpb__fail(GPB_EINVAL, "pool holds no whole block");
  uint32_t top = 63u - (uint32_t)__builtin_clzll(nunits);
  if (top >= GPB_MAX_ORDERS)
    return gpb__fail(GPB_EINVAL, "pool needs %u orders; at most %d", top + 1,
                     GPB_MAX_ORDERS);
  b->nunits = nunits;
  b->min_shift = min_shift;
  b->norders = top + 1;
  b->policy = policy;
  b->defer_cap = GPB__DEFER_MAX;
  b->cap = b->norders - 1;
  if (gpb__bits_init(&b->starts, nunits) || gpb__atab_init(&b->atab, 1024)) {
    gpb__buddy_fini(b);
    return gpb__fail(GPB_EHOSTMEM, "no host memory for the allocation table");
  }
  int rc = policy == GPB_POLICY_BESTFIT ? gpb__fit_init(b) : gpb__pow2_init(b);
  if (rc) {
    gpb__buddy_fini(b);
    return rc;
  }
  /* calloc'ed bitsets are zero already; not touching them keeps creating
   * even an 80 GiB pool's metadata to a few page faults. */
  core_set_roots(b);
  return 0;
}

int gpb__buddy_init_arena(gpb__buddy_t *b, uint64_t nunits,
                          uint32_t min_shift, gpb_policy_t policy,
                          uint32_t cap) {
  int rc = gpb__buddy_init(b, nunits, min_shift, policy);
  if (rc) return rc;
  b->cap = cap < b->norders ? cap : b->norders - 1;
  if (!b->exts) {
    gpb__pow2_init_arena(b);
    return 0;
  }
  if ((rc = gpb__fit_init_arena(b))) gpb__buddy_fini(b);
  return rc;
}

void gpb__buddy_fini(gpb__buddy_t *b) {
  for (uint32_t k = 0; k < GPB_MAX_ORDERS; k++)
    if (b->freeb[k].nlev) gpb__bits_fini(&b->freeb[k]);
  if (b->starts.nlev) gpb__bits_fini(&b->starts);
  gpb__atab_fini(&b->atab);
  if (b->exts) {
    gpb__exts_fini(b->exts);
    free(b->exts);
  }
  free(b->plist);
  gpb__plan_unbind(b->plan);
  memset(b, 0, sizeof *b);
}

void gpb__buddy_reset(gpb__buddy_t *b) {
  memset(b->fpend, 0, sizeof b->fpend); /* the counters are reset too */
  b->fpending = 0;
  b->fsync = 0;
  for (uint32_t k = 0; k < b->norders; k++) {
    if (b->freeb[k].nlev) gpb__bits_zero(&b->freeb[k]);
    b->nfree[k] = 0;
    b->npairs[k] = 0;
    b->ndq[k] = 0;
  }
  b->nplist = 0;
  b->plist_lost = 0;
  gpb__atab_clear(&b->atab);
  gpb__bits_zero(&b->starts);
  if (b->exts) gpb__exts_clear(b->exts);
  if (b->plan) gpb__plan_rewind(b->plan); /* followed from the start */
  core_set_roots(b);
}

size_t gpb__buddy_meta_bytes(const gpb__buddy_t *b) {
  size_t n = sizeof *b + gpb__atab_bytes(&b->atab) + gpb__bits_bytes(&b->starts);
  if (b->exts) n += gpb__exts_bytes(b->exts);
  for (uint32_t k = 0; k < b->norders; k++) n += gpb__bits_bytes(&b->freeb[k]);
  return n;
}

size_t gpb__buddy_merged(const gpb__buddy_t *b, const uint64_t *xs, size_t nx,
                         int64_t *d, uint64_t *top, size_t ntop) {
  /* Best fit merges at once: its free blocks are coalesced already (and
   * it keeps no per-order bitsets to look buddies up in). */
  if (b->exts) return gpb__fit_merged(b, xs, nx, d);
  return gpb__pow2_merged(b, xs, nx, d, top, ntop);
}

int gpb__buddy_adopt(gpb__buddy_t *b, uint32_t k, uint64_t i) {
  if (b->exts) return gpb__fit_adopt(b, i << k);
  gpb__pow2_adopt(b, k, i);
  return 0;
}

void gpb__buddy_disown(gpb__buddy_t *b, uint32_t k, uint64_t i) {
  if (b->exts)
    gpb__fit_disown(b, i << k);
  else
    gpb__pow2_disown(b, k, i);
}

int gpb__buddy_lend(gpb__buddy_t *b, uint32_t k, uint64_t *unit) {
  return b->exts ? gpb__fit_lend(b, k, unit) : gpb__pow2_lend(b, k, unit);
}

int gpb__buddy_unlend(gpb__buddy_t *b, uint64_t u) {
  gpb__arec_t *r = u < b->nunits ? gpb__atab_find(&b->atab, u) : NULL;
  if (!r || r->tag != GPB__TAG_LENT)
    return gpb__fail(GPB_ECORRUPT, "unit %llu is not a lent superblock",
                     (unsigned long long)u);
  if (b->exts) return gpb__fit_unlend(b, u, r);
  gpb__pow2_unlend(b, u, r);
  return 0;
}

int gpb__buddy_misuse(const gpb__buddy_t *b, uint64_t off) {
  if ((off >> b->min_shift) >= b->nunits)
    return gpb__fail(GPB_EFOREIGN, "offset %llu is past the managed range",
                     (unsigned long long)off);
  const gpb__arec_t *r = (off & ((1ull << b->min_shift) - 1))
                             ? NULL
                             : gpb__atab_find(&b->atab, off >> b->min_shift);
  if (r) /* a record, so only a lent superblock's */
    return gpb__fail(GPB_EFOREIGN, "offset %llu starts a superblock lent to "
                     "an arena, not an allocation", (unsigned long long)off);
  return b->exts ? gpb__fit_misuse(b, off) : gpb__pow2_misuse(b, off);
}

int gpb__buddy_visit_range(const gpb__buddy_t *b, uint64_t u0, uint64_t u1,
                           gpb_visit_fn fn, void *user) {
  if (b->exts) return gpb__fit_visit_range(b, u0, u1, fn, user);
  return gpb__pow2_visit_range(b, u0, u1, fn, user);
}

int gpb__buddy_lookup(const gpb__buddy_t *b, uint64_t u, gpb_block_info_t *out) {
  if (u >= b->nunits) return GPB_ENOTFOUND;
  return b->exts ? gpb__fit_lookup(b, u, out) : gpb__pow2_lookup(b, u, out);
}

void gpb__buddy_nfree_in(const gpb__buddy_t *b, const uint64_t *sb,
                         uint64_t nsb, uint64_t out[GPB_MAX_ORDERS]) {
  if (!b->exts || gpb__fit_check(b, sb, nsb, out))
    memcpy(out, b->nfree, GPB_MAX_ORDERS * sizeof *out);
}

int gpb__buddy_sb_free(const gpb__buddy_t *b, uint64_t sb) {
  return b->exts ? gpb__fit_sb_free(b, sb) : gpb__pow2_sb_free(b, sb);
}

int gpb__buddy_check_in(const gpb__buddy_t *b, const uint64_t *sb,
                        uint64_t nsb) {
  if (b->exts) {
    uint64_t nfree[GPB_MAX_ORDERS];
    return gpb__fit_check(b, sb, nsb, nfree);
  }
  return gpb__pow2_check(b, sb, nsb);
}

void gpb__buddy_nfree(const gpb__buddy_t *b, uint64_t out[GPB_MAX_ORDERS]) {
  gpb__buddy_nfree_in(b, NULL, 0, out);
}

int gpb__buddy_check(const gpb__buddy_t *b) {
  return gpb__buddy_check_in(b, NULL, 0);
}
