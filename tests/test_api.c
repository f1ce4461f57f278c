/* SPDX-License-Identifier: MIT */
/*
 * test_api.c: the public API on known layouts: roots of odd-sized pools,
 * stats and fragmentation figures, the visitor, hooks and sequence numbers,
 * debug fill patterns, tags, and the model (keyframe load, refusal of
 * events that do not fit).
 */
#include "testutil.h"

#include <math.h>

static gpb_pool_t *make(size_t size, size_t min, gpb_policy_t pol, int debug) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.flags = GPB_CFG_NO_ENV;
  cfg.backend = GPB_BACKEND_HOST;
  cfg.pool_size = size;
  cfg.min_block = min;
  cfg.policy = pol;
  cfg.debug = debug;
  gpb_pool_t *p;
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  return p;
}

typedef struct list {
  gpb_block_info_t b[256];
  int n;
} list_t;

static int collect(const gpb_block_info_t *b, void *u) {
  list_t *l = u;
  if (l->n < 256) l->b[l->n] = *b;
  l->n++;
  return 0;
}

static void roots(void) {
  /* 7 units of 256 B: roots of 4, 2 and 1 units. */
  gpb_pool_t *p = make(7 * 256 + 100, 256, GPB_POLICY_BUDDY, 0);
  gpb_pool_info_t info;
  ASSERT_OK(gpb_pool_info(p, &info));
  ASSERT_EQ(info.num_roots, 3);
  ASSERT_EQ(info.num_orders, 3);
  ASSERT_U64_EQ(info.managed_size, 7 * 256);
  ASSERT_EQ(info.backend, GPB_BACKEND_HOST);
  list_t l = {0};
  ASSERT_OK(gpb_pool_visit(p, collect, &l));
  ASSERT_EQ(l.n, 3);
  ASSERT_U64_EQ(l.b[0].offset, 0);
  ASSERT_EQ(l.b[0].order, 2);
  ASSERT_U64_EQ(l.b[1].offset, 1024);
  ASSERT_EQ(l.b[1].order, 1);
  ASSERT_U64_EQ(l.b[2].offset, 1536);
  ASSERT_EQ(l.b[2].order, 0);
  /* The smallest order first: a 1-unit request takes the 1-unit root. */
  void *a;
  ASSERT_OK(gpb_alloc(p, 10, &a));
  ASSERT((char *)a - (char *)info.base == 1536);
  ASSERT((uintptr_t)info.base % 1024 == 0);
  ASSERT_OK(gpb_free(p, a));
  gpb_pool_destroy(p);
}

static void stats_known(void) {
  /* 16 units of 256 B. Allocate 1 unit: splits 16 -> 8+4+2+1+1. */
  gpb_pool_t *p = make(4096, 256, GPB_POLICY_BUDDY, 0);
  void *a, *b;
  ASSERT_OK(gpb_alloc_tagged(p, 100, 3, &a));
  gpb_stats_t s;
  ASSERT_OK(gpb_pool_stats(p, &s));
  ASSERT_EQ(s.version, GPB_STATS_VERSION);
  ASSERT_U64_EQ(s.free_blocks[0], 1);
  ASSERT_U64_EQ(s.free_blocks[1], 1);
  ASSERT_U64_EQ(s.free_blocks[2], 1);
  ASSERT_U64_EQ(s.free_blocks[3], 1);
  ASSERT_U64_EQ(s.free_blocks[4], 0);
  ASSERT_U64_EQ(s.splits, 4);
  ASSERT_U64_EQ(s.requested_bytes, 100);
  ASSERT_U64_EQ(s.block_bytes, 256);
  ASSERT_U64_EQ(s.internal_frag_bytes, 156);
  ASSERT_U64_EQ(s.free_bytes, 3840);
  ASSERT_U64_EQ(s.largest_free, 2048);
  ASSERT_U64_EQ(s.tag_bytes[3], 256);
  /* Unusable index for order 2 (1 KiB): free bytes in blocks < 1 KiB. */
  ASSERT(fabs(s.unusable_index[0] - 0.0) < 1e-12);
  ASSERT(fabs(s.unusable_index[2] - 768.0 / 3840) < 1e-12);
  ASSERT(fabs(s.unusable_index[3] - 1792.0 / 3840) < 1e-12);
  ASSERT(fabs(s.unusable_index[4] - 1.0) < 1e-12);
  double sumsq = 256.0 * 256 + 512.0 * 512 + 1024.0 * 1024 + 2048.0 * 2048;
  ASSERT(fabs(s.external_frag - (1 - sqrt(sumsq) / 3840)) < 1e-12);
  /* Peaks stay after a free. */
  ASSERT_OK(gpb_alloc(p, 2048, &b));
  ASSERT_OK(gpb_free(p, b));
  ASSERT_OK(gpb_pool_stats(p, &s));
  ASSERT_U64_EQ(s.block_peak, 2304);
  ASSERT_U64_EQ(s.requested_peak, 2148);
  ASSERT_U64_EQ(s.block_bytes, 256);
  ASSERT_OK(gpb_free(p, a));
  /* The last free leaves the unit and its free buddy unmerged (deferred
   * coalescing); coalescing merges them and the cascade above. */
  ASSERT_OK(gpb_pool_stats(p, &s));
  ASSERT_U64_EQ(s.free_blocks[0], 2);
  ASSERT_U64_EQ(s.free_blocks[4], 0);
  /* The derived figures count them merged: the whole pool is free. */
  ASSERT_U64_EQ(s.largest_free, 4096);
  ASSERT(s.external_frag == 0.0);
  ASSERT(s.unusable_index[4] == 0.0);
  uint64_t merges = s.merges;
  ASSERT_OK(gpb_pool_check(p));
  ASSERT_OK(gpb_pool_coalesce(p));
  ASSERT_OK(gpb_pool_check(p));
  ASSERT_OK(gpb_pool_stats(p, &s));
  ASSERT_U64_EQ(s.free_blocks[0], 0);
  ASSERT_U64_EQ(s.free_blocks[4], 1);
  ASSERT_U64_EQ(s.merges, merges + 4);
  ASSERT(s.external_frag == 0.0);
  ASSERT_U64_EQ(s.tag_bytes[3], 0);
  gpb_pool_destroy(p);
}

static void to_model(const gpb_event_t *ev, void *user) {
  ASSERT_OK(gpb_model_apply(user, ev));
}

/* Free buddies that deferred coalescing kept apart are not fragmentation:
 * two free 256 KiB buddies make a largest free block of 512 KiB (a 512 KiB
 * request succeeds), recursively with a free 512 KiB buddy next to them,
 * in the pool's stats and a following model's alike (they said 256 KiB). */
static void stats_coalesced(void) {
  gpb_pool_t *p = make(1 << 20, 4096, GPB_POLICY_BUDDY, 0);
  gpb_model_t *m;
  ASSERT_OK(gpb_model_create(1 << 20, 4096, &m));
  ASSERT_OK(gpb_pool_set_hook(p, to_model, m));
  void *a, *b, *c;
  ASSERT_OK(gpb_alloc(p, 256 << 10, &a));
  ASSERT_OK(gpb_alloc(p, 256 << 10, &b));
  ASSERT_OK(gpb_alloc(p, 512 << 10, &c));
  ASSERT_OK(gpb_free(p, a));
  ASSERT_OK(gpb_free(p, b)); /* its buddy is free: the two stay apart */
  gpb_stats_t s, ms;
  ASSERT_OK(gpb_pool_stats(p, &s));
  ASSERT_OK(gpb_model_stats(m, &ms));
  ASSERT_U64_EQ(s.free_blocks[6], 2); /* the map as it is */
  ASSERT_U64_EQ(s.free_blocks[7], 0);
  ASSERT_U64_EQ(s.largest_free, 512 << 10);
  ASSERT(s.external_frag == 0.0);
  ASSERT(s.unusable_index[7] == 0.0);
  test_stats_same(&s, &ms);
  ASSERT_OK(gpb_pool_check(p));
  ASSERT_OK(gpb_model_check(m));
  /* The merged pair and a free block beside it: the whole pool. */
  ASSERT_OK(gpb_free(p, c));
  ASSERT_OK(gpb_pool_stats(p, &s));
  ASSERT_OK(gpb_model_stats(m, &ms));
  ASSERT_U64_EQ(s.free_blocks[7], 1);
  ASSERT_U64_EQ(s.largest_free, 1 << 20);
  test_stats_same(&s, &ms);
  ASSERT_OK(gpb_pool_check(p));
  ASSERT_OK(gpb_model_check(m));
  /* And the pool serves what the figure promised. */
  ASSERT_OK(gpb_alloc(p, 1 << 20, &a));
  ASSERT_OK(gpb_pool_stats(p, &s));
  ASSERT_U64_EQ(s.largest_free, 0);
  ASSERT_OK(gpb_free(p, a));
  gpb_pool_destroy(p);
  gpb_model_destroy(m);
}

/* Deferred coalescing: freeing and re-asking for one size splits once; the
 * pairs per order stay bounded; an allocation that needs the merged block
 * still gets it; GPB_CFG_EAGER_MERGE merges at once. */
static void deferred_merge(void) {
  for (int eager = 0; eager < 2; eager++) {
    gpb_config_t cfg;
    gpb_config_init(&cfg);
    cfg.backend = GPB_BACKEND_VIRTUAL;
    cfg.pool_size = 1 << 20;
    cfg.min_block = 256;
    cfg.flags = GPB_CFG_NO_ENV | (eager ? GPB_CFG_EAGER_MERGE : 0);
    gpb_pool_t *p;
    ASSERT_OK(gpb_pool_create(&cfg, &p));
    void *x;
    gpb_stats_t s;
    ASSERT_OK(gpb_alloc(p, 256, &x));
    ASSERT_OK(gpb_free(p, x));
    ASSERT_OK(gpb_pool_stats(p, &s));
    ASSERT_U64_EQ(s.splits, 12);
    ASSERT_U64_EQ(s.merges, eager ? 12 : 0);
    for (int i = 0; i < 100; i++) {
      ASSERT_OK(gpb_alloc(p, 200, &x));
      ASSERT_OK(gpb_free(p, x));
    }
    ASSERT_OK(gpb_pool_stats(p, &s));
    ASSERT_U64_EQ(s.splits, eager ? 12 * 101 : 12);
    ASSERT_OK(gpb_pool_check(p));
    /* Twenty 1-unit blocks freed in address order: each meets its free
     * buddy once every other free; at most 8 pairs stay unmerged. */
    void *v[20];
    for (int i = 0; i < 20; i++) ASSERT_OK(gpb_alloc(p, 256, &v[i]));
    for (int i = 0; i < 20; i++) ASSERT_OK(gpb_free(p, v[i]));
    ASSERT_OK(gpb_pool_check(p));
    ASSERT_OK(gpb_pool_stats(p, &s));
    ASSERT(s.free_blocks[0] <= (eager ? 1u : 16u));
    /* The whole pool in one piece: deferred pairs are merged first. */
    ASSERT_OK(gpb_alloc(p, 1 << 20, &x));
    ASSERT_OK(gpb_pool_check(p));
    ASSERT_OK(gpb_free(p, x));
    ASSERT_OK(gpb_pool_coalesce(p));
    ASSERT_OK(gpb_pool_stats(p, &s));
    ASSERT_U64_EQ(s.free_blocks[12], 1);
    ASSERT_U64_EQ(s.free_bytes, 1 << 20);
    gpb_pool_destroy(p);
  }
}

static void trim_policy(void) {
  /* 5 units under trim: one 4-unit and one 1-unit block, tail freed. */
  gpb_pool_t *p = make(8 * 256, 256, GPB_POLICY_TRIM, 0);
  void *a;
  ASSERT_OK(gpb_alloc(p, 5 * 256 - 10, &a));
  size_t us;
  ASSERT_OK(gpb_usable_size(p, a, &us));
  ASSERT_U64_EQ(us, 5 * 256);
  list_t l = {0};
  ASSERT_OK(gpb_pool_visit(p, collect, &l));
  ASSERT_EQ(l.n, 4);
  ASSERT(l.b[0].used && l.b[0].order == 2 && l.b[0].alloc_size == 1280);
  ASSERT(l.b[1].used && l.b[1].order == 0 && l.b[1].alloc_offset == 0);
  ASSERT(!l.b[2].used && l.b[2].order == 0 && l.b[2].offset == 1280);
  ASSERT(!l.b[3].used && l.b[3].order == 1 && l.b[3].offset == 1536);
  gpb_stats_t s;
  ASSERT_OK(gpb_pool_stats(p, &s));
  ASSERT_U64_EQ(s.internal_frag_bytes, 10);
  ASSERT_OK(gpb_free(p, a));
  ASSERT_OK(gpb_pool_stats(p, &s));
  ASSERT_U64_EQ(s.free_blocks[3], 1);
  gpb_pool_destroy(p);
}

static void bestfit_policy(void) {
  /* 6 units (roots of 4 and 2): a 5-unit run spans both roots. */
  gpb_pool_t *p = make(6 * 256, 256, GPB_POLICY_BESTFIT, 0);
  void *a, *b, *c, *d, *e;
  ASSERT_OK(gpb_alloc(p, 5 * 256, &a));
  ASSERT_OK(gpb_pool_check(p));
  ASSERT_OK(gpb_free(p, a));
  /* Make free runs of 1 and 3 units; a 1-unit request takes the 1-run. */
  ASSERT_OK(gpb_alloc(p, 256, &a));     /* [0,1) */
  ASSERT_OK(gpb_alloc(p, 256, &b));     /* [1,2) */
  ASSERT_OK(gpb_alloc(p, 256, &c));     /* [2,3) */
  ASSERT_OK(gpb_free(p, b));            /* run [1,2) */
  ASSERT_OK(gpb_alloc(p, 256, &d));
  ASSERT(d == b);                       /* exact fit, not the 3-unit tail */
  ASSERT_OK(gpb_alloc(p, 3 * 256, &e)); /* [3,6) crosses the roots */
  gpb_stats_t s;
  ASSERT_OK(gpb_pool_stats(p, &s));
  ASSERT_U64_EQ(s.free_bytes, 0);
  ASSERT_U64_EQ(s.internal_frag_bytes, 0);
  ASSERT_OK(gpb_pool_check(p));
  ASSERT_OK(gpb_free(p, a));
  ASSERT_OK(gpb_free(p, c));
  ASSERT_OK(gpb_free(p, d));
  ASSERT_OK(gpb_free(p, e));
  ASSERT_OK(gpb_pool_coalesce(p)); /* nothing is deferred: a no-op */
  ASSERT_OK(gpb_pool_stats(p, &s));
  ASSERT_U64_EQ(s.free_blocks[2], 1);
  ASSERT_U64_EQ(s.free_blocks[1], 1);
  gpb_pool_destroy(p);
}

static void debug_fill(void) {
  gpb_pool_t *p = make(1 << 16, 256, GPB_POLICY_BUDDY, 1);
  unsigned char *a;
  ASSERT_OK(gpb_alloc(p, 300, (void **)&a));
  for (int i = 0; i < 300; i++) ASSERT_EQ(a[i], 0xA5);
  ASSERT_OK(gpb_free(p, a));
  for (int i = 0; i < 512; i++) ASSERT_EQ(a[i], 0xDD);
  gpb_pool_destroy(p);
}

typedef struct seqcheck {
  uint64_t last;
  int counts[6];
} seqcheck_t;

static void on_event(const gpb_event_t *ev, void *u) {
  seqcheck_t *s = u;
  ASSERT_U64_EQ(ev->seq, s->last + 1);
  ASSERT(ev->time_ns > 0);
  s->last = ev->seq;
  ASSERT(ev->type >= 1 && ev->type <= 5);
  s->counts[ev->type]++;
}

static void hooks_and_model(void) {
  gpb_pool_t *p = make(4 << 20, 256, GPB_POLICY_TRIM, 0);
  seqcheck_t sc = {0};
  ASSERT_OK(gpb_pool_set_hook(p, on_event, &sc));
  void *v[40];
  for (int i = 0; i < 40; i++) ASSERT_OK(gpb_alloc_tagged(p, 100 + 977 * (size_t)i, (uint32_t)(i % 5), &v[i]));
  for (int i = 0; i < 40; i += 3) ASSERT_OK(gpb_free(p, v[i]));
  void *x;
  ASSERT_ERR(gpb_alloc(p, 1 << 23, &x), GPB_ETOOBIG);
  gpb_stats_t s;
  ASSERT_OK(gpb_pool_stats(p, &s));
  ASSERT_U64_EQ(s.seq, sc.last);
  ASSERT_EQ(sc.counts[GPB_EV_ALLOC], 40);
  ASSERT_EQ(sc.counts[GPB_EV_FREE], 14);
  ASSERT_EQ(sc.counts[GPB_EV_FAIL], 1);
  ASSERT_U64_EQ((uint64_t)sc.counts[GPB_EV_SPLIT], s.splits);
  ASSERT_U64_EQ((uint64_t)sc.counts[GPB_EV_MERGE], s.merges);

  /* A keyframe (the visitor's list) loads into a model that then matches. */
  list_t l = {0};
  ASSERT_OK(gpb_pool_visit(p, collect, &l));
  ASSERT(l.n < 256);
  gpb_model_t *m;
  gpb_pool_info_t info;
  ASSERT_OK(gpb_pool_info(p, &info));
  ASSERT_OK(gpb_model_create(info.managed_size, info.min_block, &m));
  ASSERT_OK(gpb_model_load(m, l.b, (size_t)l.n, s.seq));
  ASSERT_OK(gpb_model_check(m));
  list_t l2 = {0};
  ASSERT_OK(gpb_model_visit(m, collect, &l2));
  ASSERT_EQ(l2.n, l.n);
  ASSERT(memcmp(l.b, l2.b, sizeof(gpb_block_info_t) * (size_t)l.n) == 0);
  gpb_stats_t ms;
  ASSERT_OK(gpb_model_stats(m, &ms));
  ASSERT_U64_EQ(ms.free_bytes, s.free_bytes);
  ASSERT_U64_EQ(ms.requested_bytes, s.requested_bytes);
  for (int k = 0; k < GPB_MAX_ORDERS; k++) ASSERT_U64_EQ(ms.free_blocks[k], s.free_blocks[k]);
  ASSERT_U64_EQ(gpb_model_seq(m), s.seq);

  /* Lookup finds the block under any byte. */
  gpb_block_info_t bi;
  ASSERT_OK(gpb_model_lookup(m, (uint64_t)((char *)v[1] - (char *)info.base) + 5, &bi));
  ASSERT(bi.used && bi.alloc_offset == (uint64_t)((char *)v[1] - (char *)info.base));
  ASSERT_ERR(gpb_model_lookup(m, info.managed_size, &bi), GPB_ENOTFOUND);

  /* Events that do not fit are refused, and the model is unchanged. */
  gpb_event_t ev = {0};
  ev.seq = s.seq + 1;
  ev.type = GPB_EV_FREE;
  ev.offset = (uint64_t)((char *)v[0] - (char *)info.base); /* freed already */
  ev.size = 256;
  ASSERT_ERR(gpb_model_apply(m, &ev), GPB_EFORMAT);
  ev.type = GPB_EV_ALLOC;
  ev.offset = (uint64_t)((char *)v[1] - (char *)info.base); /* in use */
  ev.size = 256;
  ASSERT_ERR(gpb_model_apply(m, &ev), GPB_EFORMAT);
  ev.type = GPB_EV_SPLIT;
  ev.order = 0;
  ASSERT_ERR(gpb_model_apply(m, &ev), GPB_EFORMAT);
  ev.type = 99;
  ASSERT_ERR(gpb_model_apply(m, &ev), GPB_EFORMAT);
  ev.type = GPB_EV_FAIL;
  ev.seq = s.seq + 5;
  ASSERT_ERR(gpb_model_apply(m, &ev), GPB_EAGAIN);
  ev.offset = 3; /* not a multiple of min_block */
  ev.seq = s.seq + 1;
  ASSERT_ERR(gpb_model_apply(m, &ev), GPB_EFORMAT);
  ASSERT_OK(gpb_model_check(m));
  ASSERT_U64_EQ(gpb_model_seq(m), s.seq);

  /* A keyframe with a hole, an overlap or a short cover is refused. */
  gpb_block_info_t bad[3] = {{0}};
  bad[0].offset = 0; bad[0].order = 0; bad[0].size = 256;
  bad[1].offset = 512; bad[1].order = 0; bad[1].size = 256;
  ASSERT_ERR(gpb_model_load(m, bad, 2, 1), GPB_EFORMAT);
  bad[1].offset = 256;
  ASSERT_ERR(gpb_model_load(m, bad, 2, 1), GPB_EFORMAT); /* short */
  ASSERT_OK(gpb_model_check(m));
  gpb_model_destroy(m);

  for (int i = 0; i < 40; i++)
    if (i % 3) ASSERT_OK(gpb_free(p, v[i]));
  ASSERT_OK(gpb_pool_coalesce(p));
  ASSERT_OK(gpb_pool_stats(p, &s));
  ASSERT_U64_EQ(s.free_bytes, 4 << 20);
  ASSERT_U64_EQ(s.free_blocks[14], 1);
  gpb_pool_destroy(p);
}

static void defaults(void) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  ASSERT_EQ(cfg.min_block, 256);
  ASSERT_EQ(cfg.backend, GPB_BACKEND_AUTO);
  cfg.flags = GPB_CFG_NO_ENV;
  cfg.pool_size = 1 << 20;
  gpb_pool_t *p;
  /* AUTO picks the device where a GPU is usable, the host otherwise. */
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  gpb_pool_info_t info;
  ASSERT_OK(gpb_pool_info(p, &info));
  ASSERT(info.backend == GPB_BACKEND_HOST || info.backend == GPB_BACKEND_DEVICE);
  printf("auto backend chose %s\n", gpb_backend_name(info.backend));
  gpb_pool_destroy(p);
  gpb_pool_destroy(NULL);
  ASSERT(strcmp(gpb_version(), GPB_VERSION_STRING) == 0);
}

/* gpb_stats_json: the figures as JSON, measured and cut like snprintf. */
static void stats_json(void) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.flags = GPB_CFG_NO_ENV;
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = 1 << 20;
  gpb_pool_t *p;
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  void *a;
  ASSERT_OK(gpb_alloc(p, 1000, &a));
  gpb_stats_t s;
  ASSERT_OK(gpb_pool_stats(p, &s));
  int need = gpb_stats_json(&s, NULL, 0);
  ASSERT(need > 100);
  char *buf = malloc((size_t)need + 1);
  ASSERT(buf);
  ASSERT_EQ(gpb_stats_json(&s, buf, (size_t)need + 1), need);
  ASSERT_EQ((int)strlen(buf), need);
  ASSERT(buf[0] == '{' && buf[need - 1] == '}');
  ASSERT(strstr(buf, "\"used_bytes\":1024,"));
  ASSERT(strstr(buf, "\"requested_bytes\":1000,"));
  ASSERT(strstr(buf, "\"allocs\":1,"));
  char small[16];
  ASSERT_EQ(gpb_stats_json(&s, small, sizeof small), need); /* cut, NUL-ended */
  ASSERT_EQ((int)strlen(small), (int)sizeof small - 1);
  ASSERT_ERR(gpb_stats_json(NULL, buf, 8), GPB_EINVAL);
  free(buf);
  gpb_free(p, a);
  gpb_pool_destroy(p);
}

/* gpb_size_format: units, the carry at 1024.0, and cutting like snprintf. */
static void size_format_one(uint64_t v, const char *want) {
  char buf[GPB_SIZE_FORMAT_MAX];
  int len = gpb_size_format(v, buf, sizeof buf);
  if (len != (int)strlen(want) || strcmp(buf, want) != 0)
    FAILF("gpb_size_format(%" PRIu64 ") = '%s' (%d), expected '%s'", v, buf,
          len, want);
}

static void size_format(void) {
  size_format_one(0, "0 B");
  size_format_one(1, "1 B");
  size_format_one(1023, "1023 B");
  size_format_one(1024, "1.0 KiB");
  size_format_one(1536, "1.5 KiB");
  size_format_one(4096, "4.0 KiB");
  size_format_one(2u << 20, "2.0 MiB");
  size_format_one((1u << 20) - 1, "1.0 MiB"); /* not "1024.0 KiB" */
  size_format_one((uint64_t)1 << 40, "1.0 TiB");
  size_format_one(((uint64_t)1 << 60) - 1, "1.0 EiB");
  size_format_one(UINT64_MAX, "16.0 EiB");
  /* The longest text there is fits GPB_SIZE_FORMAT_MAX. */
  size_format_one(((uint64_t)1 << 60) - ((uint64_t)1 << 47), "1023.9 PiB");
  char buf[8];
  memset(buf, 'x', sizeof buf);
  ASSERT_EQ(gpb_size_format(1536, buf, 4), 7); /* "1.5 KiB", cut */
  ASSERT(strcmp(buf, "1.5") == 0 && buf[4] == 'x');
  ASSERT_EQ(gpb_size_format(1536, buf, 1), 7);
  ASSERT(buf[0] == '\0' && buf[1] == '.');
  ASSERT_EQ(gpb_size_format(UINT64_MAX, NULL, 0), 8); /* measures */
  ASSERT_ERR(gpb_size_format(1, NULL, 8), GPB_EINVAL);
  /* What it writes, gpb_size_parse reads back (to the decimal shown). */
  size_t back;
  ASSERT_EQ(gpb_size_format(3 << 19, buf, sizeof buf), 7);
  ASSERT_OK(gpb_size_parse(buf, &back));
  ASSERT_EQ(back, 3 << 19);
}

/* A fitting run deep in its bin, behind more than the 16 entries a
 * request looks at first, with nothing larger free: it must still be
 * found rather than the request failing. */
static void bestfit_deep_bin(void) {
  enum { RUNS = 20 };
  gpb_pool_t *p = make(4096 * 256, 256, GPB_POLICY_BESTFIT, 0);
  void *a[RUNS + 1], *sep[RUNS + 1], *rest, *q;
  for (int i = 0; i <= RUNS; i++) { /* [33][1][32][1]...[32][1][rest] */
    ASSERT_OK(gpb_alloc(p, (size_t)(i ? 32 : 33) * 256, &a[i]));
    ASSERT_OK(gpb_alloc(p, 256, &sep[i]));
  }
  gpb_stats_t s;
  ASSERT_OK(gpb_pool_stats(p, &s));
  ASSERT_OK(gpb_alloc(p, s.free_bytes, &rest));
  for (int i = 0; i <= RUNS; i++) ASSERT_OK(gpb_free(p, a[i])); /* 33 first */
  ASSERT_OK(gpb_alloc(p, 33 * 256, &q)); /* 32 and 33 share a bin */
  ASSERT(q == a[0]);
  ASSERT_OK(gpb_pool_check(p));
  gpb_pool_destroy(p);
}

/* A request whose own bin is empty goes to the closest run of the next
 * bin up, not to the bin's newest (34 and 35 units share a bin). */
static void bestfit_next_bin(void) {
  gpb_pool_t *p = make(4096 * 256, 256, GPB_POLICY_BESTFIT, 0);
  void *a34, *a35, *sep[2], *rest, *q;
  ASSERT_OK(gpb_alloc(p, 34 * 256, &a34));
  ASSERT_OK(gpb_alloc(p, 256, &sep[0]));
  ASSERT_OK(gpb_alloc(p, 35 * 256, &a35));
  ASSERT_OK(gpb_alloc(p, 256, &sep[1]));
  gpb_stats_t s;
  ASSERT_OK(gpb_pool_stats(p, &s));
  ASSERT_OK(gpb_alloc(p, s.free_bytes, &rest));
  ASSERT_OK(gpb_free(p, a34));
  ASSERT_OK(gpb_free(p, a35)); /* the newest in the bin */
  ASSERT_OK(gpb_alloc(p, 20 * 256, &q));
  ASSERT(q == a34);
  ASSERT_OK(gpb_pool_check(p));
  gpb_pool_destroy(p);
}

/* The host and virtual backends map size + align and unmap the slack;
 * a size off a page multiple once kept the whole tail mapped, so pool
 * after pool (a --find-min-pool search) ran out of address space.
 * Linux only: the address space is read from /proc/self/status. */
static unsigned long long vm_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  unsigned long long kib = 0;
  if (!f) return 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmSize: %llu", &kib) == 1) break;
  fclose(f);
  return kib;
}

static void reserve_slack(void) {
  gpb_config_t c;
  gpb_config_init(&c);
  c.backend = GPB_BACKEND_VIRTUAL;
  c.pool_size = (size_t)470000128; /* 256 B multiple, not a page one */
  unsigned long long before = vm_kib();
  for (int i = 0; i < 64; i++) {
    gpb_pool_t *p;
    ASSERT_OK(gpb_pool_create(&c, &p));
    gpb_pool_destroy(p);
  }
  /* Leaking, each pool left about 230 MiB behind: 14 GiB in all. */
  if (before) ASSERT(vm_kib() < before + 256 * 1024);
}

int main(void) {
  defaults();
  size_format();
  stats_json();
  roots();
  stats_known();
  stats_coalesced();
  deferred_merge();
  trim_policy();
  bestfit_policy();
  bestfit_deep_bin();
  bestfit_next_bin();
  debug_fill();
  hooks_and_model();
  reserve_slack();
  printf("api: all checks passed\n");
  return 0;
}
