/* SPDX-License-Identifier: MIT */
/*
 * test_random.c: randomized differential test of the buddy allocator.
 *
 * A deliberately naive reference (one byte per unit, linear scans) runs
 * the same placement rule as the library: the smallest sufficient order,
 * lowest address first, trimming tails under GPB_POLICY_TRIM. Every
 * allocation must land at the offset the reference picks, fail exactly
 * when the reference fails, and leave the stats equal to the reference's
 * counts. Under GPB_POLICY_BESTFIT, whose bins the reference does not
 * mirror, the pool's choice must be the start of a free run (or its first
 * aligned unit) long enough, or its end (or last aligned unit) for a
 * request of an eighth of the pool or more, and a failure must mean no such run exists;
 * the reference then carves the same run and the stats must agree.
 *
 * The reference also defers coalescing as the pool does: a freed single
 * block whose buddy is free stays unmerged while its order has fewer than
 * 8 such pairs, and an allocation finding no block merges everything
 * first. Some rounds use GPB_CFG_EAGER_MERGE, where nothing is deferred,
 * as under GPB_POLICY_BESTFIT always.
 *
 * Every step checks the placement against the reference and the twin (a
 * pool with no consumer, whose SPLITs and MERGEs are counted in place, not
 * emitted). Every CHECK_EVERY steps (GPB_TEST_CHECK_EVERY; 1 pins a
 * failure to its step), at every failed allocation and at the end of each
 * round, the whole structures are compared: gpb_pool_check() on both
 * pools, the stats against the reference's counts and the twin's, and a
 * block-map model fed by the pool's hook against the pool. When all is
 * freed and coalesced the pool must be its roots.
 */
#include "testutil.h"

#define MAXU 2048
#define CHECK_EVERY 64 /* steps between whole-structure checks */

static uint64_t g_check_every = CHECK_EVERY;
#define NONE 0xff

typedef struct ref {
  uint64_t n;          /* units */
  uint32_t norders;
  int trim;
  uint32_t defer_cap;  /* pairs left unmerged per order: 8, or 0 (eager) */
  uint8_t freeord[MAXU]; /* order of the free block starting here, or NONE */
  uint64_t alen[MAXU];   /* units of the allocation starting here, or 0 */
  uint64_t areq[MAXU];
  uint8_t owner[MAXU];   /* 1 when the unit is in a live allocation */
} ref_t;

/* The largest free blocks covering the free units of [s, s + 2^k). */
static void ref_canon(ref_t *r, uint64_t s, uint32_t k) {
  uint64_t x = s;
  while (x < s + (1ull << k) && !r->owner[x]) x++;
  if (x == s + (1ull << k)) {
    r->freeord[s] = (uint8_t)k;
  } else if (k > 0) {
    ref_canon(r, s, k - 1);
    ref_canon(r, s + (1ull << (k - 1)), k - 1);
  }
}

/* Merges every pair: the fully coalesced map of the free units. */
static void ref_coalesce(ref_t *r) {
  memset(r->freeord, NONE, sizeof r->freeord);
  uint64_t s = 0;
  for (int j = (int)r->norders - 1; j >= 0; j--)
    if (r->n & (1ull << j)) {
      ref_canon(r, s, (uint32_t)j);
      s += 1ull << j;
    }
}

static void ref_init(ref_t *r, uint64_t n, int trim, uint32_t defer_cap) {
  memset(r, 0, sizeof *r);
  r->n = n;
  r->trim = trim;
  r->defer_cap = defer_cap;
  uint32_t k = 0;
  while ((2ull << k) <= n) k++;
  r->norders = k + 1;
  ref_coalesce(r);
}

/* (k, s) has a buddy: its parent fits in the pool. */
static int ref_has_buddy(const ref_t *r, uint64_t s, uint32_t k) {
  return k + 1 < r->norders && (s >> (k + 1)) < (r->n >> (k + 1));
}

/* Free buddy pairs of order k, counted the slow way. */
static uint64_t ref_pairs(const ref_t *r, uint32_t k) {
  uint64_t c = 0;
  for (uint64_t s = 0; s + (1ull << k) < r->n; s += 2ull << k)
    if (r->freeord[s] == k && r->freeord[s + (1ull << k)] == k &&
        ref_has_buddy(r, s, k))
      c++;
  return c;
}

static uint32_t clog2(uint64_t x) {
  uint32_t k = 0;
  while ((1ull << k) < x) k++;
  return k;
}

/* Returns the unit, or -1 when no block fits. */
static int64_t ref_alloc(ref_t *r, uint64_t units, uint32_t align_order) {
  uint32_t k = clog2(units);
  if (align_order > k) k = align_order;
  if (k >= r->norders) return -1; /* larger than any block: no merging */
  int64_t best = -1;
  for (int pass = 0; pass < 2 && best < 0; pass++) {
    if (pass) ref_coalesce(r); /* nothing fits: merge deferred pairs */
    for (uint64_t u = 0; u < r->n; u++) {
      if (r->freeord[u] == NONE || r->freeord[u] < k) continue;
      if (best < 0 || r->freeord[u] < r->freeord[best]) best = (int64_t)u;
    }
  }
  if (best < 0) return -1;
  uint64_t u = (uint64_t)best;
  uint32_t j = r->freeord[u];
  while (j > k) { /* split, keep the left half */
    j--;
    r->freeord[u] = (uint8_t)j;
    r->freeord[u + (1ull << j)] = (uint8_t)j;
  }
  uint64_t n = r->trim ? units : 1ull << k;
  uint64_t s = u, rem = n;
  while (rem != (1ull << j)) {
    j--;
    r->freeord[s] = (uint8_t)j;
    r->freeord[s + (1ull << j)] = (uint8_t)j;
    if (rem > (1ull << j)) {
      rem -= 1ull << j;
      s += 1ull << j;
    }
  }
  for (uint64_t x = u; x < u + n; x++) {
    r->freeord[x] = NONE;
    if (r->owner[x]) FAILF("reference overlap at unit %" PRIu64, x);
    r->owner[x] = 1;
  }
  r->alen[u] = n;
  return (int64_t)u;
}

static void ref_free(ref_t *r, uint64_t u) {
  uint64_t n = r->alen[u];
  r->alen[u] = 0;
  for (uint64_t x = u; x < u + n; x++) r->owner[x] = 0;
  uint64_t st[64], cnt = 0;
  uint32_t od[64];
  for (uint64_t p = u, m = n; m;) {
    uint32_t k = 0;
    while ((2ull << k) <= m && (p % (2ull << k)) == 0) k++;
    st[cnt] = p;
    od[cnt++] = k;
    p += 1ull << k;
    m -= 1ull << k;
  }
  if (cnt == 1 && ref_has_buddy(r, st[0], od[0]) &&
      r->freeord[st[0] ^ (1ull << od[0])] == od[0] &&
      ref_pairs(r, od[0]) < r->defer_cap) {
    r->freeord[st[0]] = (uint8_t)od[0]; /* deferred: stays unmerged */
    return;
  }
  while (cnt--) {
    uint64_t s = st[cnt];
    uint32_t k = od[cnt];
    r->freeord[s] = (uint8_t)k;
    for (;;) {
      uint64_t b = s ^ (1ull << k);
      if (k + 1 >= r->norders || (s >> (k + 1)) >= (r->n >> (k + 1))) break;
      if (r->freeord[b] != k) break;
      uint64_t lo = s < b ? s : b;
      r->freeord[s] = r->freeord[b] = NONE;
      s = lo;
      k++;
      r->freeord[s] = (uint8_t)k;
    }
  }
}

/* Bestfit: checks the pool's choice and carves it in the reference. A
 * negative `got` means the pool failed: no fitting run may exist. */
static int64_t ref_fit(ref_t *r, uint64_t units, uint32_t a, int64_t got, int got_rc) {
  if (got < 0) {
    /* An aligned request is promised a run long enough for any start. */
    uint64_t need = units + (1ull << a) - 1;
    for (uint64_t u = 0; u < r->n; u++) {
      if (r->owner[u]) continue;
      uint64_t x = u;
      while (x < r->n && x < u + need && !r->owner[x]) x++;
      if (x == u + need)
        FAILF("pool failed (%s: %s) but units [%" PRIu64 ", +%" PRIu64 ") are free",
              gpb_err_name(got_rc), gpb_last_error_detail(), u, units);
    }
    return -1;
  }
  uint64_t u = (uint64_t)got;
  if (u & ((1ull << a) - 1)) FAILF("bestfit start %" PRIu64 " not aligned", u);
  if (u + units > r->n) FAILF("bestfit run past the end");
  for (uint64_t x = u; x < u + units; x++)
    if (r->owner[x]) FAILF("bestfit run at %" PRIu64 " overlaps a live block", u);
  /* The start of a free run, unless alignment pushed it in; an eighth
   * of the pool or more, its end, unless alignment pulled it in. */
  uint64_t end = u + units;
  while (end < r->n && !r->owner[end]) end++;
  if (r->n >= 8 && units >= r->n >> 3) {
    if (end - (u + units) >= (1ull << a))
      FAILF("bestfit run at %" PRIu64 " of %" PRIu64 " units does not end its free run", u, units);
  } else if (a == 0 && u > 0 && !r->owner[u - 1]) {
    FAILF("bestfit run at %" PRIu64 " does not start its free run", u);
  }
  for (uint64_t p = u, m = units; m;) { /* carve each canonical block */
    uint32_t k = 0;
    while ((2ull << k) <= m && (p % (2ull << k)) == 0) k++;
    uint32_t j = k;
    uint64_t s = p;
    for (;; j++) {
      if (j >= r->norders) break;
      s = (p >> j) << j;
      if (r->freeord[s] == j) break;
    }
    if (j >= r->norders) { /* free in smaller pieces: merged into one */
      for (uint64_t x = p; x < p + (1ull << k); x++) {
        if (r->owner[x]) FAILF("reference: unit %" PRIu64 " is not free", x);
        r->freeord[x] = NONE;
      }
      j = k;
      s = p;
    }
    while (j > k) {
      j--;
      r->freeord[s] = (uint8_t)j;
      r->freeord[s + (1ull << j)] = (uint8_t)j;
      if (p >= s + (1ull << j)) s += 1ull << j;
    }
    r->freeord[p] = NONE;
    p += 1ull << k;
    m -= 1ull << k;
  }
  for (uint64_t x = u; x < u + units; x++) r->owner[x] = 1;
  r->alen[u] = units;
  return (int64_t)u;
}

typedef struct live {
  void *p, *tp; /* in the pool and in its twin */
  uint64_t unit, units, req;
} live_t;

static void check_against_ref(gpb_pool_t *pool, const ref_t *r,
                              uint64_t min_block, uint64_t nlive,
                              uint64_t allocs, uint64_t frees,
                              uint64_t fails) {
  ASSERT_OK(gpb_pool_check(pool));
  gpb_stats_t s;
  ASSERT_OK(gpb_pool_stats(pool, &s));
  uint64_t want[GPB_MAX_ORDERS] = {0}, free_units = 0, used = 0, req = 0;
  for (uint64_t u = 0; u < r->n; u++) {
    if (r->freeord[u] != NONE) {
      want[r->freeord[u]]++;
      free_units += 1ull << r->freeord[u];
    }
    if (r->alen[u]) {
      used += r->alen[u];
      req += r->areq[u];
    }
  }
  for (uint32_t k = 0; k < r->norders; k++)
    if (s.free_blocks[k] != want[k])
      FAILF("order %u: the pool has %" PRIu64 " free blocks, the reference %"
            PRIu64 " (policy %s, %s merging)", k, s.free_blocks[k], want[k],
            r->trim ? "trim" : "buddy or bestfit",
            r->defer_cap ? "deferred" : "eager");
  ASSERT_U64_EQ(s.free_bytes, free_units * min_block);
  ASSERT_U64_EQ(s.block_bytes, used * min_block);
  ASSERT_U64_EQ(s.requested_bytes, req);
  ASSERT_U64_EQ(s.internal_frag_bytes, used * min_block - req);
  ASSERT_U64_EQ(s.live_allocs, nlive);
  ASSERT_U64_EQ(s.allocs, allocs);
  ASSERT_U64_EQ(s.frees, frees);
  ASSERT_U64_EQ(s.failures, fails);
}

/* The model fed by the hook must list exactly the pool's blocks. */
typedef struct cmp {
  gpb_block_info_t *v;
  size_t n, cap, pos;
  int bad;
} cmp_t;

static int collect(const gpb_block_info_t *b, void *u) {
  cmp_t *c = u;
  if (c->n == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 256;
    c->v = realloc(c->v, c->cap * sizeof *c->v);
  }
  c->v[c->n++] = *b;
  return 0;
}

static int compare(const gpb_block_info_t *b, void *u) {
  cmp_t *c = u;
  if (c->pos >= c->n || memcmp(&c->v[c->pos], b, sizeof *b) != 0) {
    c->bad = 1;
    return 1;
  }
  c->pos++;
  return 0;
}

static void hook_to_model(const gpb_event_t *ev, void *user) {
  int rc = gpb_model_apply(user, ev);
  if (rc) FAILF("model refused event %" PRIu64 " (%s): %s", ev->seq,
                gpb_event_type_name(ev->type), gpb_last_error_detail());
}

static void check_model(gpb_pool_t *pool, gpb_model_t *m) {
  ASSERT_OK(gpb_model_check(m));
  cmp_t c = {0};
  ASSERT_OK(gpb_pool_visit(pool, collect, &c));
  gpb_model_visit(m, compare, &c);
  if (c.bad || c.pos != c.n) FAILF("model and pool block maps differ at block %zu", c.pos);
  gpb_stats_t a, b;
  gpb_pool_stats(pool, &a);
  gpb_model_stats(m, &b);
  if (memcmp(&a, &b, sizeof a) != 0) FAILF("model and pool stats differ");
  free(c.v);
}

/* A pool with no consumer counts SPLIT and MERGE in place: its stats
 * must be the hooked pool's, sequence numbers included. */
static void check_twin(gpb_pool_t *pool, gpb_pool_t *twin) {
  gpb_stats_t a, b;
  ASSERT_OK(gpb_pool_stats(pool, &a));
  ASSERT_OK(gpb_pool_stats(twin, &b));
  if (memcmp(&a, &b, sizeof a) != 0)
    FAILF("the twin pool's stats differ (seq %" PRIu64 " vs %" PRIu64 ")",
          a.seq, b.seq);
  ASSERT_OK(gpb_pool_check(twin));
}

static void run_round(uint64_t *rng, uint64_t ops, uint64_t *total_ops) {
  static ref_t ref;
  static const uint64_t mins[] = {16, 64, 256, 4096};
  uint64_t min_block = mins[rng_below(rng, 4)];
  uint64_t nunits = 1 + rng_below(rng, rng_below(rng, 2) ? MAXU : 64);
  int policy = (int)rng_below(rng, GPB_NUM_POLICIES);
  int trim = policy == GPB_POLICY_TRIM;
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.flags = GPB_CFG_NO_ENV;
  cfg.backend = rng_below(rng, 8) == 0 ? GPB_BACKEND_HOST : GPB_BACKEND_VIRTUAL;
  cfg.min_block = min_block;
  /* Sometimes leave a ragged tail shorter than a block. */
  cfg.pool_size = nunits * min_block + rng_below(rng, 2) * rng_below(rng, min_block);
  cfg.policy = (gpb_policy_t)policy;
  int eager = rng_below(rng, 4) == 0;
  if (eager) cfg.flags |= GPB_CFG_EAGER_MERGE;
  gpb_pool_t *pool, *twin;
  ASSERT_OK(gpb_pool_create(&cfg, &pool));
  ASSERT_OK(gpb_pool_create(&cfg, &twin));
  gpb_pool_info_t tinfo;
  ASSERT_OK(gpb_pool_info(twin, &tinfo));
  gpb_pool_info_t info;
  ASSERT_OK(gpb_pool_info(pool, &info));
  ASSERT_U64_EQ(info.managed_size, nunits * min_block);
  gpb_model_t *model;
  ASSERT_OK(gpb_model_create(info.managed_size, min_block, &model));
  ASSERT_OK(gpb_pool_set_hook(pool, hook_to_model, model));
  /* Best fit merges at once: its blocks are always its runs' (fit.c). */
  ref_init(&ref, nunits, trim, eager || policy == GPB_POLICY_BESTFIT ? 0 : 8);
  char *base = info.base;

  live_t *live = calloc(MAXU, sizeof *live);
  uint64_t nlive = 0, allocs = 0, frees = 0, fails = 0;
  uint32_t norders = info.num_orders;
  int bias = (int)rng_below(rng, 3); /* 0 balanced, 1 fill-heavy, 2 free-heavy */
  for (uint64_t op = 0; op < ops; op++) {
    int want_failed = 0;
    uint64_t r = rng_below(rng, 100);
    int do_alloc = nlive == 0 || r < (bias == 1 ? 70u : bias == 2 ? 35u : 52u);
    if (do_alloc) {
      /* A size in a random order, 1 byte to 2x the pool. */
      uint32_t k = (uint32_t)rng_below(rng, norders + 1);
      uint64_t hi = min_block << k, lo = k ? (min_block << (k - 1)) : 0;
      uint64_t size = lo + 1 + rng_below(rng, hi - lo);
      if (rng_below(rng, 16) == 0) size = hi;
      uint64_t align = 0;
      uint32_t aorder = 0;
      if (rng_below(rng, 8) == 0) {
        align = (uint64_t)1 << rng_below(rng, 64 - __builtin_clzll(min_block << (norders - 1)));
        if (align > min_block) aorder = (uint32_t)(__builtin_ctzll(align) - __builtin_ctzll(min_block));
      }
      void *p = NULL;
      uint32_t tag = (uint32_t)rng_below(rng, 4);
      int rc = gpb_alloc_ex(pool, size, align, tag, NULL, &p);
      void *tp = NULL;
      int trc = gpb_alloc_ex(twin, size, align, tag, NULL, &tp);
      if (trc != rc || (!rc && (char *)tp - (char *)tinfo.base != (char *)p - base))
        FAILF("op %" PRIu64 ": the twin pool placed differently", op);
      uint64_t units = (size + min_block - 1) / min_block;
      int64_t want;
      if (size > info.managed_size)
        want = -1;
      else if (policy == GPB_POLICY_BESTFIT)
        want = ref_fit(&ref, units, aorder, rc ? -1 : (int64_t)(((char *)p - base) / (int64_t)min_block), rc);
      else
        want = ref_alloc(&ref, units, aorder);
      if (want < 0) {
        if (rc != GPB_ENOMEM && rc != GPB_ETOOBIG)
          FAILF("op %" PRIu64 ": alloc(%" PRIu64 ") gave %s, reference had no room",
                op, size, gpb_err_name(rc));
        if (size > info.managed_size) ASSERT_EQ(rc, GPB_ETOOBIG);
        ASSERT(p == NULL);
        fails++;
        want_failed = 1;
      } else {
        if (rc) FAILF("op %" PRIu64 ": alloc(%" PRIu64 ") failed with %s: %s; "
                      "reference placed it at unit %" PRId64,
                      op, size, gpb_err_name(rc), gpb_last_error_detail(), want);
        uint64_t unit = (uint64_t)((char *)p - base) / min_block;
        if ((uint64_t)((char *)p - base) % min_block)
          FAILF("op %" PRIu64 ": unaligned offset", op);
        if (unit != (uint64_t)want)
          FAILF("op %" PRIu64 ": placed at unit %" PRIu64 ", reference %" PRId64,
                op, unit, want);
        if (align && ((uintptr_t)p % align)) FAILF("op %" PRIu64 ": not %" PRIu64 "-aligned", op, align);
        uint64_t first = 1; /* the first block's size */
        while ((first << 1) <= ref.alen[unit] && unit % (first << 1) == 0) first <<= 1;
        if (unit % first) FAILF("block not aligned to its size");
        if (policy != GPB_POLICY_BESTFIT && unit % (first << 0) != 0) FAILF("misaligned");
        size_t us;
        ASSERT_OK(gpb_usable_size(pool, p, &us));
        ASSERT_U64_EQ(us, ref.alen[unit] * min_block);
        ASSERT(us >= size);
        ref.areq[unit] = size;
        live[nlive++] = (live_t){p, tp, unit, ref.alen[unit], size};
        allocs++;
      }
    } else {
      uint64_t i = rng_below(rng, nlive);
      ASSERT_OK(gpb_free(pool, live[i].p));
      ASSERT_OK(gpb_free(twin, live[i].tp));
      ref_free(&ref, live[i].unit);
      live[i] = live[--nlive];
      frees++;
    }
    /* A failure is where a wrong count would first show. */
    if (op % g_check_every == 0 || (do_alloc && want_failed)) {
      check_against_ref(pool, &ref, min_block, nlive, allocs, frees, fails);
      check_twin(pool, twin);
      check_model(pool, model);
    }
  }
  while (nlive) {
    ASSERT_OK(gpb_free(pool, live[--nlive].p));
    ASSERT_OK(gpb_free(twin, live[nlive].tp));
    ref_free(&ref, live[nlive].unit);
    frees++;
    if (nlive % g_check_every == 0) {
      check_against_ref(pool, &ref, min_block, nlive, allocs, frees, fails);
      check_twin(pool, twin);
    }
  }
  check_model(pool, model);
  ASSERT_OK(gpb_pool_coalesce(pool));
  ASSERT_OK(gpb_pool_coalesce(twin));
  ref_coalesce(&ref);
  check_against_ref(pool, &ref, min_block, nlive, allocs, frees, fails);
  check_twin(pool, twin);
  check_model(pool, model);
  /* Everything coalesced back to the roots. */
  gpb_stats_t s;
  ASSERT_OK(gpb_pool_stats(pool, &s));
  for (uint32_t k = 0; k < norders; k++)
    ASSERT_U64_EQ(s.free_blocks[k], (nunits >> k) & 1);
  ASSERT_U64_EQ(s.free_bytes, info.managed_size);
  *total_ops += ops;
  free(live);
  gpb_pool_destroy(pool);
  gpb_pool_destroy(twin);
  gpb_model_destroy(model);
}

int main(void) {
  uint64_t seed = test_seed();
  const char *ce = getenv("GPB_TEST_CHECK_EVERY");
  if (ce && atoll(ce) > 0) g_check_every = (uint64_t)atoll(ce);
  printf("whole-structure checks every %" PRIu64 " steps and at each failure\n",
         g_check_every);
  uint64_t rng = seed ? seed : 1;
  uint64_t target = (uint64_t)(2000000 * test_scale());
  uint64_t done = 0;
  int rounds = 0;
  while (done < target) {
    uint64_t ops = 2000 + rng_below(&rng, 30000);
    run_round(&rng, ops, &done);
    rounds++;
  }
  printf("%" PRIu64 " operations in %d pools: pool matched the reference\n", done, rounds);
  return 0;
}
