/* SPDX-License-Identifier: MIT */
/*
 * test_relay_proto.c: the relay wire codec (lib/live/netproto.c) on its own.
 *
 * Events and keyframes come from a real pool run (a hook collects every
 * event; the visitor gives the blocks), go through the encoders, and must
 * decode to exactly what went in, with and without zlib. Then every
 * truncation and many random corruptions of valid payloads and headers
 * must decode cleanly or fail with GPB_EFORMAT/GPB_EVERSION: never crash,
 * never read out of bounds (run under ASan/UBSan).
 */
#include "live/netproto.h"
#include "testutil.h"

#include <zlib.h>

typedef struct evlog {
  gpb_event_t *ev;
  size_t n, cap;
} evlog_t;

static void log_hook(const gpb_event_t *ev, void *user) {
  evlog_t *l = user;
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 1024;
    l->ev = realloc(l->ev, l->cap * sizeof *l->ev);
    ASSERT(l->ev);
  }
  l->ev[l->n++] = *ev;
}


/* A pool with trim policy (multi-block allocations), tags, streams,
 * failures; returns its event log and final blocks. */
static gpb_pool_t *make_pool(uint64_t *seed, evlog_t *log) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = (8u << 20) + (3u << 12); /* several roots */
  cfg.min_block = 256;
  cfg.policy = GPB_POLICY_TRIM;
  cfg.flags = GPB_CFG_NO_ENV | GPB_CFG_CALLSITES; /* events name sites */
  gpb_pool_t *p;
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  ASSERT_OK(gpb_pool_set_hook(p, log_hook, log));
  void *live[512] = {0};
  int ops = (int)(20000 * test_scale());
  for (int i = 0; i < ops; i++) {
    int k = (int)rng_below(seed, 512);
    if (live[k]) {
      ASSERT_OK(gpb_free(p, live[k]));
      live[k] = NULL;
    } else {
      size_t sz = (size_t)1 << rng_below(seed, 18);
      sz += rng_below(seed, sz);
      int rc = k & 1 ? test_alloc_at(p, k % 8, sz, (uint32_t)rng_below(seed, 8),
                                     &live[k])
                     : gpb_alloc_ex(p, sz, 0, (uint32_t)rng_below(seed, 8),
                                    (void *)(uintptr_t)rng_below(seed, 3),
                                    &live[k]);
      ASSERT(rc == 0 || rc == GPB_ENOMEM || rc == GPB_ETOOBIG);
    }
  }
  return p;
}

static void check_events(const evlog_t *log, uint32_t shift, int z) {
  gpb_np_evenc_t enc;
  gpb_np_buf_t raw = {0}, fr = {0};
  gpb_event_t *dec = malloc(GPB_NP_BATCH_MAX * sizeof *dec);
  uint8_t *scratch = malloc(GPB_NP_MAX_RAW);
  char err[GPB_NP_ERRLEN];
  gpb__np_evenc_init(&enc, shift);
  size_t at = 0, bytes = 0;
  while (at < log->n) {
    size_t start = at;
    size_t want = 1 + (at * 7919) % GPB_NP_BATCH_MAX; /* varied batch sizes */
    while (at < log->n && at - start < want) gpb__np_evenc_add(&enc, &log->ev[at++]);
    ASSERT_OK(gpb__np_evenc_finish(&enc, &raw));
    fr.len = 0;
    ASSERT_OK(gpb__np_frame(&fr, GPB_NP_EVENTS, raw.p, raw.len, z));
    bytes += fr.len;
    gpb_np_hdr_t h;
    ASSERT_OK(gpb__np_hdr_parse(fr.p, &h, err));
    ASSERT_EQ(h.type, GPB_NP_EVENTS);
    ASSERT_EQ(h.len + GPB_NP_HDR, fr.len);
    const uint8_t *p;
    ASSERT_OK(gpb__np_payload(&h, fr.p + GPB_NP_HDR, scratch, &p, err));
    size_t n;
    ASSERT_OK(gpb__np_events_get(p, h.raw_len, shift, dec, GPB_NP_BATCH_MAX, &n, err));
    ASSERT_EQ(n, at - start);
    for (size_t i = 0; i < n; i++) {
      const gpb_event_t *a = &log->ev[start + i], *b = &dec[i];
      ASSERT_U64_EQ(a->seq, b->seq);
      ASSERT_U64_EQ(a->time_ns, b->time_ns);
      ASSERT_U64_EQ(a->offset, b->offset);
      ASSERT_U64_EQ(a->size, b->size);
      ASSERT_U64_EQ(a->requested, b->requested);
      ASSERT_U64_EQ(a->stream, b->stream);
      ASSERT_EQ(a->tag, b->tag);
      ASSERT_EQ(a->site, b->site);
      ASSERT_EQ(a->type, b->type);
      ASSERT_EQ(a->order, b->order);
    }
    /* Every truncation of the payload fails cleanly. */
    if (start == 0) {
      for (size_t cut = 0; cut < raw.len; cut++)
        ASSERT_ERR(gpb__np_events_get(raw.p, cut, shift, dec, GPB_NP_BATCH_MAX,
                                      &n, err), GPB_EFORMAT);
    }
  }
  printf("events: %zu in %zu bytes (%.2f bytes/event)%s\n", log->n, bytes,
         (double)bytes / (double)log->n, z ? " zlib" : "");
  gpb__np_evenc_free(&enc);
  gpb__np_buf_free(&raw);
  gpb__np_buf_free(&fr);
  free(dec);
  free(scratch);
}

static void check_keyframe(gpb_pool_t *p) {
  gpb_pool_info_t info;
  ASSERT_OK(gpb_pool_info(p, &info));
  test_blocks_t v = {0};
  ASSERT_OK(gpb_pool_visit(p, test_collect_blocks, &v));
  gpb_np_buf_t b = {0};
  gpb__np_put_u32(&b, (uint32_t)v.n);
  for (size_t i = 0; i < v.n; i++) gpb__np_block_put(&b, &v.b[i]);
  ASSERT(!b.oom);
  gpb_block_info_t *out = calloc(v.n, sizeof *out);
  gpb_np_keydec_t d;
  gpb__np_keydec_init(&d, &info);
  char err[GPB_NP_ERRLEN];
  size_t n;
  ASSERT_OK(gpb__np_key_blocks_get(&d, b.p, b.len, out, v.n, &n, err));
  ASSERT_EQ(n, v.n);
  ASSERT(memcmp(out, v.b, n * sizeof *out) == 0);
  /* The decoded list loads into a model equal to the pool. */
  gpb_model_t *m;
  gpb_stats_t ps;
  ASSERT_OK(gpb_pool_stats(p, &ps));
  ASSERT_OK(gpb_model_create(info.managed_size, info.min_block, &m));
  ASSERT_OK(gpb_model_load(m, out, n, ps.seq));
  ASSERT_OK(gpb_model_check(m));
  /* Truncations and a too-small out array fail cleanly. */
  for (size_t cut = 0; cut < b.len; cut += 1 + cut / 64) {
    gpb__np_keydec_init(&d, &info);
    ASSERT_ERR(gpb__np_key_blocks_get(&d, b.p, cut, out, v.n, &n, err),
               GPB_EFORMAT);
  }
  if (v.n > 1) {
    gpb__np_keydec_init(&d, &info);
    ASSERT_ERR(gpb__np_key_blocks_get(&d, b.p, b.len, out, v.n - 1, &n, err),
               GPB_EFORMAT);
  }
  printf("keyframe: %zu blocks in %zu bytes\n", v.n, b.len);
  gpb_model_destroy(m);
  gpb__np_buf_free(&b);
  free(out);
  free(v.b);
}

typedef struct sites_seen {
  uint32_t id[8];
  char text[8][GPB_NP_SITE_TEXT_MAX + 1];
  int n;
} sites_seen_t;

static int sites_note(uint32_t id, const char *t, size_t n, void *user) {
  sites_seen_t *s = user;
  ASSERT(s->n < 8 && n <= GPB_NP_SITE_TEXT_MAX);
  s->id[s->n] = id;
  memcpy(s->text[s->n], t, n);
  s->text[s->n++][n] = 0;
  return 0;
}

/* SITES: texts round trip, one too long is cut at a frame, and every
 * truncation, an id out of order and a NUL fail cleanly. */
static void check_sites(void) {
  static char longer[6000];
  for (size_t i = 0; i < sizeof longer - 1; i++)
    longer[i] = i % 100 == 99 ? ';' : 'a' + (char)(i % 26);
  gpb_np_buf_t b = {0};
  gpb__np_site_put(&b, 1, "lib.so+0x10 f+0x4;main+0x8");
  gpb__np_site_put(&b, 7, longer);
  gpb__np_site_put(&b, 65535, "x");
  ASSERT(!b.oom);
  sites_seen_t seen = {0};
  char err[GPB_NP_ERRLEN];
  ASSERT_OK(gpb__np_sites_get(b.p, b.len, sites_note, &seen, err));
  ASSERT_EQ(seen.n, 3);
  ASSERT_EQ(seen.id[1], 7);
  ASSERT(!strcmp(seen.text[0], "lib.so+0x10 f+0x4;main+0x8"));
  size_t l = strlen(seen.text[1]);
  ASSERT(l <= GPB_NP_SITE_TEXT_MAX && l > 4000);
  ASSERT(!strcmp(seen.text[1] + l - 4, ";..."));
  ASSERT(!strncmp(seen.text[1], longer, l - 4));
  ASSERT_EQ(seen.id[2], 65535);
  for (size_t cut = 0; cut < b.len; cut++) {
    seen.n = 0;
    int rc = gpb__np_sites_get(b.p, cut, sites_note, &seen, err);
    /* A cut between entries leaves a shorter, valid frame. */
    if (cut == 0 || cut == 4 + 26 || cut == 4 + 26 + 4 + l)
      ASSERT_EQ(rc, cut ? 0 : GPB_EFORMAT);
    else
      ASSERT_EQ(rc, GPB_EFORMAT);
  }
  b.len = 0;
  gpb__np_site_put(&b, 2, "a");
  gpb__np_site_put(&b, 2, "a");
  ASSERT_ERR(gpb__np_sites_get(b.p, b.len, sites_note, &seen, err), GPB_EFORMAT);
  b.len = 0;
  gpb__np_site_put(&b, 2, "a;b");
  b.p[5] = 0;
  seen.n = 0;
  ASSERT_ERR(gpb__np_sites_get(b.p, b.len, sites_note, &seen, err), GPB_EFORMAT);
  ASSERT_EQ(seen.n, 0); /* a bad frame defines nothing */
  printf("sites: round trip, cut, truncations\n");
  gpb__np_buf_free(&b);
}

typedef struct pools_seen {
  int n;
  char last[GPB_NAME_MAX];
} pools_seen_t;

static void pools_note(const char *name, void *user) {
  pools_seen_t *ps = user;
  ps->n++;
  snprintf(ps->last, sizeof ps->last, "%s", name);
}

static void check_small_payloads(gpb_pool_t *p) {
  char err[GPB_NP_ERRLEN];
  gpb_np_buf_t b = {0};
  /* HELLO */
  uint32_t ver, flags;
  char tok[GPB_NP_TOKEN_MAX + 1], pool[GPB_NAME_MAX];
  size_t tl;
  gpb__np_hello_put(&b, GPB_NP_HELLO_ZLIB, "s3cret", NULL);
  ASSERT_OK(gpb__np_hello_get(b.p, b.len, &ver, &flags, tok, &tl, pool, err));
  ASSERT_EQ(ver, GPB_NP_VERSION);
  ASSERT_EQ(flags, GPB_NP_HELLO_ZLIB);
  ASSERT(strcmp(tok, "s3cret") == 0 && tl == 6 && pool[0] == 0);
  for (size_t cut = 0; cut < b.len; cut++)
    ASSERT_ERR(gpb__np_hello_get(b.p, cut, &ver, &flags, tok, &tl, pool, err),
               GPB_EFORMAT);
  gpb__np_put_u8(&b, 0);
  ASSERT_ERR(gpb__np_hello_get(b.p, b.len, &ver, &flags, tok, &tl, pool, err),
             GPB_EFORMAT);
  b.p[9] = 0x10, b.p[8] = 0x01; /* token length 4097 */
  ASSERT_ERR(gpb__np_hello_get(b.p, b.len, &ver, &flags, tok, &tl, pool, err),
             GPB_EFORMAT);
  /* HELLO naming a pool: every cut, a NUL, a '/', an empty or long name. */
  b.len = 0;
  gpb__np_hello_put(&b, GPB_NP_HELLO_ZLIB, NULL, "rank-0");
  ASSERT_OK(gpb__np_hello_get(b.p, b.len, &ver, &flags, tok, &tl, pool, err));
  ASSERT_EQ(flags, GPB_NP_HELLO_ZLIB | GPB_NP_HELLO_POOL);
  ASSERT(strcmp(pool, "rank-0") == 0 && tl == 0);
  for (size_t cut = 0; cut < b.len; cut++)
    ASSERT_ERR(gpb__np_hello_get(b.p, cut, &ver, &flags, tok, &tl, pool, err),
               GPB_EFORMAT);
  static const char *const bad[] = {"a\0b", "a/b", "", ".x"};
  for (int i = 0; i < 4; i++) {
    size_t n = i == 0 ? 3 : strlen(bad[i]);
    b.len = 0;
    gpb__np_put_u32(&b, GPB_NP_VERSION);
    gpb__np_put_u32(&b, GPB_NP_HELLO_POOL);
    gpb__np_put_u16(&b, 0);
    gpb__np_put_u16(&b, (uint16_t)n);
    gpb__np_put(&b, bad[i], n);
    ASSERT_ERR(gpb__np_hello_get(b.p, b.len, &ver, &flags, tok, &tl, pool, err),
               GPB_EFORMAT);
  }
  b.len = 0;
  gpb__np_put_u32(&b, GPB_NP_VERSION);
  gpb__np_put_u32(&b, GPB_NP_HELLO_POOL);
  gpb__np_put_u16(&b, 0);
  gpb__np_put_u16(&b, GPB_NAME_MAX); /* one byte too long */
  for (int i = 0; i < GPB_NAME_MAX; i++) gpb__np_put_u8(&b, 'x');
  ASSERT_ERR(gpb__np_hello_get(b.p, b.len, &ver, &flags, tok, &tl, pool, err),
             GPB_EFORMAT);
  /* POOLS: a round trip, every cut, a bad name, a count past the limit;
   * a bad frame calls back for no name at all. */
  static const char *const names[] = {"a", "rank-1", "x.y_z"};
  b.len = 0;
  gpb__np_pools_put(&b, names, 3);
  pools_seen_t ps = {0};
  ASSERT_OK(gpb__np_pools_get(b.p, b.len, pools_note, &ps, err));
  ASSERT(ps.n == 3 && !strcmp(ps.last, "x.y_z"));
  for (size_t cut = 0; cut < b.len; cut++) {
    ps.n = 0;
    ASSERT_ERR(gpb__np_pools_get(b.p, cut, pools_note, &ps, err), GPB_EFORMAT);
    ASSERT_EQ(ps.n, 0);
  }
  b.p[b.len - 1] = '/';
  ps.n = 0;
  ASSERT_ERR(gpb__np_pools_get(b.p, b.len, pools_note, &ps, err), GPB_EFORMAT);
  ASSERT_EQ(ps.n, 0);
  b.len = 0;
  gpb__np_put_u32(&b, GPB_NP_POOLS_MAX + 1);
  ASSERT_ERR(gpb__np_pools_get(b.p, b.len, pools_note, &ps, err), GPB_EFORMAT);
  /* INFO */
  gpb_pool_info_t in, out;
  ASSERT_OK(gpb_pool_info(p, &in));
  b.len = 0;
  gpb__np_info_put(&b, &in);
  ASSERT_OK(gpb__np_info_get(b.p, b.len, &out, err));
  ASSERT_U64_EQ(out.managed_size, in.managed_size);
  ASSERT_U64_EQ(out.pool_size, in.pool_size);
  ASSERT_U64_EQ(out.min_block, in.min_block);
  ASSERT_EQ(out.num_orders, in.num_orders);
  ASSERT_EQ(out.backend, in.backend);
  ASSERT_EQ(out.policy, in.policy);
  ASSERT(out.base == in.base);
  b.p[16] = 100; /* min_block 100 */
  ASSERT_ERR(gpb__np_info_get(b.p, b.len, &out, err), GPB_EFORMAT);
  ASSERT(strstr(err, "min_block"));
  for (size_t cut = 0; cut < b.len; cut++)
    ASSERT_ERR(gpb__np_info_get(b.p, cut, &out, err), GPB_EFORMAT);
  /* KEY_END */
  gpb_stats_t s, s2;
  ASSERT_OK(gpb_pool_stats(p, &s));
  b.len = 0;
  gpb__np_key_end_put(&b, 77, &s);
  uint64_t seq;
  ASSERT_OK(gpb__np_key_end_get(b.p, b.len, &seq, &s2, err));
  ASSERT_U64_EQ(seq, 77);
  ASSERT_U64_EQ(s2.allocs, s.allocs);
  ASSERT_U64_EQ(s2.merges, s.merges);
  ASSERT_U64_EQ(s2.free_peak, s.free_peak);
  ASSERT_ERR(gpb__np_key_end_get(b.p, b.len - 1, &seq, &s2, err), GPB_EFORMAT);
  /* BYE: control characters never reach a log. */
  int32_t code;
  char msg[GPB_NP_MSG_MAX + 1];
  b.len = 0;
  gpb__np_bye_put(&b, GPB_EPERM, "no\x1b[2J entry");
  ASSERT_OK(gpb__np_bye_get(b.p, b.len, &code, msg, err));
  ASSERT_EQ(code, GPB_EPERM);
  ASSERT(strcmp(msg, "no?[2J entry") == 0);
  gpb__np_buf_free(&b);
  /* Tokens. */
  ASSERT(gpb__np_token_eq("abc", "abc"));
  ASSERT(gpb__np_token_eq("", NULL));
  ASSERT(!gpb__np_token_eq("abc", "abd"));
  ASSERT(!gpb__np_token_eq("abc", "ab"));
  ASSERT(!gpb__np_token_eq("abc", NULL));
}

static void check_headers(uint64_t *seed) {
  char err[GPB_NP_ERRLEN];
  gpb_np_buf_t b = {0};
  uint8_t payload[300];
  for (size_t i = 0; i < sizeof payload; i++) payload[i] = (uint8_t)(i % 7);
  ASSERT_OK(gpb__np_frame(&b, GPB_NP_KEY_BLOCKS, payload, sizeof payload, 6));
  gpb_np_hdr_t h;
  ASSERT_OK(gpb__np_hdr_parse(b.p, &h, err));
  ASSERT(h.flags & GPB_NP_FLAG_ZLIB); /* it compresses */
  ASSERT(h.len < h.raw_len);
  uint8_t *scratch = malloc(GPB_NP_MAX_RAW);
  const uint8_t *p;
  ASSERT_OK(gpb__np_payload(&h, b.p + GPB_NP_HDR, scratch, &p, err));
  ASSERT(memcmp(p, payload, sizeof payload) == 0);
  /* The header's own checks. */
  uint8_t x[GPB_NP_HDR];
  memcpy(x, b.p, sizeof x);
  x[0] ^= 1;
  ASSERT_ERR(gpb__np_hdr_parse(x, &h, err), GPB_EFORMAT);
  ASSERT(strstr(err, "magic"));
  memcpy(x, b.p, sizeof x), x[4] = 2;
  ASSERT_ERR(gpb__np_hdr_parse(x, &h, err), GPB_EVERSION);
  memcpy(x, b.p, sizeof x), x[5] = 0;
  ASSERT_ERR(gpb__np_hdr_parse(x, &h, err), GPB_EFORMAT);
  memcpy(x, b.p, sizeof x), x[5] = 99;
  ASSERT_ERR(gpb__np_hdr_parse(x, &h, err), GPB_EFORMAT);
  memcpy(x, b.p, sizeof x), x[6] |= 2;
  ASSERT_ERR(gpb__np_hdr_parse(x, &h, err), GPB_EFORMAT);
  memcpy(x, b.p, sizeof x), x[15] = 0x7f; /* raw length 2 GiB */
  ASSERT_ERR(gpb__np_hdr_parse(x, &h, err), GPB_EFORMAT);
  memcpy(x, b.p, sizeof x), x[6] = 0; /* plain, lengths differ */
  ASSERT_ERR(gpb__np_hdr_parse(x, &h, err), GPB_EFORMAT);
  /* A corrupted zlib payload, or one that inflates to another length. */
  ASSERT_OK(gpb__np_hdr_parse(b.p, &h, err));
  for (int t = 0; t < 200; t++) {
    uint8_t *copy = malloc(h.len);
    memcpy(copy, b.p + GPB_NP_HDR, h.len);
    copy[rng_below(seed, h.len)] ^= (uint8_t)(1 + rng_below(seed, 255));
    int rc = gpb__np_payload(&h, copy, scratch, &p, err);
    ASSERT(rc == 0 || rc == GPB_EFORMAT);
    free(copy);
  }
  h.raw_len -= 1;
  ASSERT_ERR(gpb__np_payload(&h, b.p + GPB_NP_HDR, scratch, &p, err), GPB_EFORMAT);
  /* A varint too long for 64 bits. */
  uint8_t v[11];
  memset(v, 0xff, sizeof v);
  gpb_np_rd_t r = {v, sizeof v, 0, 0};
  (void)gpb__np_get_var(&r);
  ASSERT(r.bad);
  free(scratch);
  gpb__np_buf_free(&b);
}

/* Random byte flips in valid event payloads: decode or refuse, no crash. */
static void check_flips(const evlog_t *log, uint32_t shift, uint64_t *seed) {
  gpb_np_evenc_t enc;
  gpb_np_buf_t raw = {0};
  gpb_event_t *dec = malloc(GPB_NP_BATCH_MAX * sizeof *dec);
  char err[GPB_NP_ERRLEN];
  gpb__np_evenc_init(&enc, shift);
  size_t n = log->n < 500 ? log->n : 500;
  for (size_t i = 0; i < n; i++) gpb__np_evenc_add(&enc, &log->ev[i]);
  ASSERT_OK(gpb__np_evenc_finish(&enc, &raw));
  int refused = 0, trials = (int)(5000 * test_scale());
  for (int t = 0; t < trials; t++) {
    uint8_t *c = malloc(raw.len);
    memcpy(c, raw.p, raw.len);
    for (int k = 0; k < 3; k++)
      c[rng_below(seed, raw.len)] = (uint8_t)rng_next(seed);
    size_t got;
    int rc = gpb__np_events_get(c, raw.len, shift, dec, GPB_NP_BATCH_MAX, &got, err);
    ASSERT(rc == 0 || rc == GPB_EFORMAT);
    refused += rc != 0;
    free(c);
  }
  printf("flips: %d of %d corrupted batches refused by the codec\n", refused,
         trials);
  gpb__np_evenc_free(&enc);
  gpb__np_buf_free(&raw);
  free(dec);
}

int main(void) {
  uint64_t seed = test_seed();
  evlog_t log = {0};
  gpb_pool_t *p = make_pool(&seed, &log);
  ASSERT(log.n > 1000);
  gpb_pool_info_t info;
  ASSERT_OK(gpb_pool_info(p, &info));
  uint32_t shift = (uint32_t)__builtin_ctzll(info.min_block);
  check_events(&log, shift, 0);
  check_events(&log, shift, 1);
  check_keyframe(p);
  check_small_payloads(p);
  check_sites();
  check_headers(&seed);
  check_flips(&log, shift, &seed);
  gpb_pool_destroy(p);
  free(log.ev);
  printf("ok\n");
  return 0;
}
