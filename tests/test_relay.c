/* SPDX-License-Identifier: MIT */
/*
 * test_relay.c: the relay core and the TCP reader, in one process.
 *
 * The relay core (tools/relay/relay.c) runs in its own thread on an
 * ephemeral loopback port and is fed by in-process pools through
 * gpbr_queue (gpb_pool_set_hook), so this test
 * needs no shared-memory publisher. Readers come in through the public
 * gpb_attach_connect. At each quiescent point a reader's block map must
 * equal the pool's own visitor output exactly.
 *
 * Cases: zlib on and off; ten readers at once; wrong, missing and right
 * tokens; a full relay; garbage sent to the relay; garbage sent to a
 * reader by a fake relay (clean GPB_EFORMAT, model keeps its state); a
 * slow reader resynchronized from a keyframe; disconnect and reconnect;
 * the pool closing; the relay going away (GPB_ECLOSED); one relay serving
 * two pools (names, the list, a pool it does not have, none named); call
 * sites (events, keyframes, texts; none for a reader that did not ask;
 * hostile SITES data, and a flood that the reader's table caps).
 */
#define _GNU_SOURCE
#include "live/netproto.h"
#include "relay.h"
#include "testutil.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdatomic.h>

/* --------------------------------------------------------------- harness */

typedef struct harness {
  gpb_pool_t *pool; /* the one churn and sync_and_compare use */
  gpb_pool_t *pools[2];
  gpbr_queue_t q[2];
  gpbr_src_t *src[2];
  int npools;
  gpbr_t *r;
  pthread_t th;
  atomic_int stop, close_src;
  atomic_ullong resyncs, accepted, refused;
  char addr[64];
  void *lives[2][1024];
  void **live; /* the pool's row of lives */
  uint64_t seed;
} harness_t;

static unsigned g_pool_flags; /* the harness's pools get these too */

static void *relay_thread(void *arg) {
  harness_t *h = arg;
  int closed = 0;
  while (!atomic_load(&h->stop)) {
    /* Read the flag first: every event queued before it was set is then
     * drained before the relay hears that the pool closed. */
    int closing = atomic_load(&h->close_src);
    for (int k = 0; k < h->npools; k++)
      ASSERT(gpbr_queue_drain(&h->q[k], h->src[k]) >= 0);
    if (closing && !closed) {
      gpbr_src_closed(h->src[0]);
      closed = 1;
    }
    gpbr_step(h->r, 2);
    gpbr_counters_t c;
    gpbr_counters(h->r, &c);
    atomic_store(&h->resyncs, c.resyncs);
    atomic_store(&h->accepted, c.accepted);
    atomic_store(&h->refused, c.refused);
  }
  return NULL;
}

/* npools pools, served as sources named "" (one) or "a", "b" (two). */
static void harness_start_n(harness_t *h, const gpbr_opts_t *o0,
                            gpb_policy_t pol, int npools) {
  memset(h, 0, sizeof *h);
  h->seed = test_seed();
  gpbr_opts_t o = *o0;
  o.listen = "127.0.0.1:0";
  o.verbose = getenv("GPB_TEST_VERBOSE") ? 1 : -1;
  ASSERT_OK(gpbr_open(&o, &h->r));
  h->npools = npools;
  for (int k = 0; k < npools; k++) {
    gpb_config_t cfg;
    gpb_config_init(&cfg);
    cfg.backend = GPB_BACKEND_VIRTUAL;
    cfg.pool_size = (32u << 20) + (5u << 14) + ((size_t)k << 20);
    cfg.min_block = 256;
    cfg.policy = pol;
    cfg.flags = GPB_CFG_NO_ENV | g_pool_flags;
    ASSERT_OK(gpb_pool_create(&cfg, &h->pools[k]));
    ASSERT_OK(gpbr_queue_init(&h->q[k], h->pools[k]));
    gpb_pool_info_t info = h->q[k].info;
    if (npools > 1) snprintf(info.name, sizeof info.name, "%c", 'a' + k);
    h->src[k] = gpbr_src_add(h->r, h->q[k].model, &info, NULL);
    ASSERT(h->src[k] != NULL);
    gpbr_src_set_sites(h->src[k], gpbr_queue_site, &h->q[k]);
  }
  if (npools == 1) /* one name, one source */
    ASSERT(gpbr_src_add(h->r, h->q[0].model, &h->q[0].info, NULL) == NULL);
  h->pool = h->pools[0];
  h->live = h->lives[0];
  snprintf(h->addr, sizeof h->addr, "127.0.0.1:%d", gpbr_port(h->r));
  ASSERT(pthread_create(&h->th, NULL, relay_thread, h) == 0);
}

static void harness_start(harness_t *h, const gpbr_opts_t *o0, gpb_policy_t pol) {
  harness_start_n(h, o0, pol, 1);
}

/* Stops the relay thread and frees the relay: its sockets close. */
static void harness_kill_relay(harness_t *h) {
  if (!h->r) return;
  atomic_store(&h->stop, 1);
  pthread_join(h->th, NULL);
  gpbr_free(h->r);
  h->r = NULL;
}

static void harness_stop(harness_t *h) {
  if (h->r) { /* gracefully: readers get a BYE */
    atomic_store(&h->stop, 1);
    pthread_join(h->th, NULL);
    gpbr_bye_all(h->r, "test over", 500);
    gpbr_free(h->r);
    h->r = NULL;
  }
  for (int k = 0; k < h->npools; k++) {
    gpb_pool_set_hook(h->pools[k], NULL, NULL);
    gpb_pool_destroy(h->pools[k]);
    gpbr_queue_free(&h->q[k]);
  }
}

/* Random allocs and frees; log-uniform sizes, tags, failures. */
static void churn(harness_t *h, int ops) {
  for (int i = 0; i < ops; i++) {
    int k = (int)rng_below(&h->seed, 1024);
    if (h->live[k]) {
      ASSERT_OK(gpb_free(h->pool, h->live[k]));
      h->live[k] = NULL;
    } else {
      size_t sz = (size_t)1 << rng_below(&h->seed, 20);
      sz += rng_below(&h->seed, sz);
      int rc = gpb_alloc_ex(h->pool, sz, 0, (uint32_t)rng_below(&h->seed, 16),
                            NULL, &h->live[k]);
      ASSERT(rc == 0 || rc == GPB_ENOMEM || rc == GPB_ETOOBIG);
    }
  }
}

static uint64_t pool_seq(harness_t *h) {
  gpb_stats_t s;
  ASSERT_OK(gpb_pool_stats(h->pool, &s));
  return s.seq;
}


/* Polls the reader until it has seen `seq` (bounded), then compares its
 * map and counters with the pool's. */
static void sync_and_compare(harness_t *h, gpb_attach_t *a) {
  uint64_t want = pool_seq(h);
  uint64_t t0 = gpb_now_ns();
  while (gpb_model_seq(gpb_attach_model(a)) != want) {
    int rc = gpb_attach_poll(a);
    if (rc < 0)
      FAILF("poll: %s: %s", gpb_err_name(rc), gpb_last_error_detail());
    TEST_HANG_GUARD(t0, "reader stuck at seq %llu, pool at %llu",
                    (unsigned long long)gpb_model_seq(gpb_attach_model(a)),
                    (unsigned long long)want);
    if (rc == 0) usleep(1000);
  }
  test_blocks_t pv = {0}, mv = {0};
  ASSERT_OK(gpb_pool_visit(h->pool, test_collect_blocks, &pv));
  ASSERT_OK(gpb_model_visit(gpb_attach_model(a), test_collect_blocks, &mv));
  ASSERT_EQ(pv.n, mv.n);
  for (size_t i = 0; i < pv.n; i++)
    if (memcmp(&pv.b[i], &mv.b[i], sizeof pv.b[i]))
      FAILF("block %zu differs: offset %llu/%llu used %u/%u", i,
            (unsigned long long)pv.b[i].offset, (unsigned long long)mv.b[i].offset,
            pv.b[i].used, mv.b[i].used);
  gpb_stats_t ps, ms;
  ASSERT_OK(gpb_pool_stats(h->pool, &ps));
  ASSERT_OK(gpb_model_stats(gpb_attach_model(a), &ms));
  ASSERT_U64_EQ(ms.seq, ps.seq);
  ASSERT_U64_EQ(ms.allocs, ps.allocs);
  ASSERT_U64_EQ(ms.frees, ps.frees);
  ASSERT_U64_EQ(ms.failures, ps.failures);
  ASSERT_U64_EQ(ms.splits, ps.splits);
  ASSERT_U64_EQ(ms.merges, ps.merges);
  ASSERT_U64_EQ(ms.block_bytes, ps.block_bytes);
  ASSERT_U64_EQ(ms.requested_bytes, ps.requested_bytes);
  ASSERT_OK(gpb_model_check(gpb_attach_model(a)));
  gpb_pool_info_t pi, ai;
  ASSERT_OK(gpb_pool_info(h->pool, &pi));
  ASSERT_OK(gpb_attach_info(a, &ai));
  ASSERT_U64_EQ(ai.managed_size, pi.managed_size);
  ASSERT_U64_EQ(ai.min_block, pi.min_block);
  free(pv.b);
  free(mv.b);
}

static int scaled(int n) {
  int v = (int)(n * test_scale());
  return v < 100 ? 100 : v;
}

/* Counts hook calls: events and keyframes (NULL). */
typedef struct hookcount {
  uint64_t events, keyframes, last_seq;
} hookcount_t;

static void count_hook(const gpb_event_t *ev, void *user) {
  hookcount_t *c = user;
  if (!ev) {
    c->keyframes++;
    return;
  }
  if (c->last_seq && ev->seq != c->last_seq + 1 && c->keyframes == 0)
    FAILF("hook saw seq %llu after %llu", (unsigned long long)ev->seq,
          (unsigned long long)c->last_seq);
  c->last_seq = ev->seq;
  c->events++;
}

/* ----------------------------------------------------------------- cases */

static void test_basic(int zlevel, gpb_policy_t pol) {
  printf("-- basic, zlib level %d, policy %s\n", zlevel, gpb_policy_name(pol));
  harness_t h;
  gpbr_opts_t o = {0};
  o.zlevel = zlevel;
  harness_start(&h, &o, pol);
  churn(&h, scaled(3000)); /* state before the reader joins */
  gpb_attach_t *a;
  ASSERT_OK(gpb_attach_connect(h.addr, NULL, &a));
  hookcount_t hc = {0};
  ASSERT_OK(gpb_attach_set_hook(a, count_hook, &hc));
  sync_and_compare(&h, a);
  for (int round = 0; round < 3; round++) {
    churn(&h, scaled(5000));
    sync_and_compare(&h, a);
  }
  ASSERT(hc.events > 0);
  gpb_attach_close(a);
  harness_stop(&h);
}

static void test_many_clients(void) {
  printf("-- ten readers at once\n");
  harness_t h;
  gpbr_opts_t o = {0};
  o.zlevel = 1;
  harness_start(&h, &o, GPB_POLICY_BUDDY);
  enum { N = 10 };
  gpb_attach_t *a[N];
  for (int i = 0; i < N; i++) {
    churn(&h, scaled(300));
    ASSERT_OK(gpb_attach_connect(h.addr, NULL, &a[i]));
  }
  churn(&h, scaled(4000));
  for (int i = 0; i < N; i++) sync_and_compare(&h, a[i]);
  for (int i = 0; i < N; i++) gpb_attach_close(a[i]);
  harness_stop(&h);
}

static void test_tokens(void) {
  printf("-- tokens\n");
  harness_t h;
  gpbr_opts_t o = {0};
  o.token = "open-sesame";
  o.max_clients = 2;
  harness_start(&h, &o, GPB_POLICY_BUDDY);
  churn(&h, scaled(500));
  unsetenv("GPB_RELAY_TOKEN");
  gpb_attach_t *a = NULL;
  ASSERT_ERR(gpb_attach_connect(h.addr, "open-sesamE", &a), GPB_EPERM);
  ASSERT(a == NULL);
  ASSERT(strstr(gpb_last_error_detail(), "wrong token"));
  ASSERT_ERR(gpb_attach_connect(h.addr, NULL, &a), GPB_EPERM);
  ASSERT(strstr(gpb_last_error_detail(), "needs a token"));
  ASSERT_ERR(gpb_attach_connect(h.addr, "open-sesame-and-more", &a), GPB_EPERM);
  ASSERT_OK(gpb_attach_connect(h.addr, "open-sesame", &a));
  sync_and_compare(&h, a);
  /* The token may also come from the environment. */
  setenv("GPB_RELAY_TOKEN", "open-sesame", 1);
  gpb_attach_t *b;
  ASSERT_OK(gpb_attach_connect(h.addr, NULL, &b));
  unsetenv("GPB_RELAY_TOKEN");
  /* Two clients is this relay's limit. */
  gpb_attach_t *c = NULL;
  ASSERT_ERR(gpb_attach_connect(h.addr, "open-sesame", &c), GPB_EBUSY);
  ASSERT(strstr(gpb_last_error_detail(), "full"));
  churn(&h, scaled(2000));
  sync_and_compare(&h, a);
  sync_and_compare(&h, b);
  ASSERT(atomic_load(&h.refused) >= 4);
  gpb_attach_close(a);
  gpb_attach_close(b);
  harness_stop(&h);
}

static int dial(const char *addr) {
  int port = atoi(strrchr(addr, ':') + 1);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT(fd >= 0);
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
  return fd;
}

/* Reads one whole frame (blocking, bounded by SO_RCVTIMEO). */
static int read_frame(int fd, gpb_np_hdr_t *h, uint8_t *pl, size_t cap) {
  uint8_t hdr[GPB_NP_HDR];
  char err[GPB_NP_ERRLEN];
  size_t got = 0;
  while (got < sizeof hdr) {
    ssize_t n = recv(fd, hdr + got, sizeof hdr - got, 0);
    if (n <= 0) return -1;
    got += (size_t)n;
  }
  ASSERT_OK(gpb__np_hdr_parse(hdr, h, err));
  ASSERT(h->len <= cap);
  for (got = 0; got < h->len;) {
    ssize_t n = recv(fd, pl + got, h->len - got, 0);
    if (n <= 0) return -1;
    got += (size_t)n;
  }
  return 0;
}

static void test_garbage_to_relay(void) {
  printf("-- garbage sent to the relay\n");
  harness_t h;
  gpbr_opts_t o = {0};
  harness_start(&h, &o, GPB_POLICY_BUDDY);
  churn(&h, scaled(500));
  gpb_attach_t *a;
  ASSERT_OK(gpb_attach_connect(h.addr, NULL, &a));
  static const char *junk[] = {
      "GET / HTTP/1.0\r\n\r\n",
      "GPBR\x01\x01\x00\x00\xff\xff\xff\x7f\xff\xff\xff\x7f", /* huge HELLO */
      "GPBR\x02\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", /* version 2 */
      "GPBR\x01\x06\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", /* not HELLO */
  };
  static const int want[] = {GPB_EFORMAT, GPB_EFORMAT, GPB_EVERSION, GPB_EFORMAT};
  for (size_t j = 0; j < sizeof junk / sizeof *junk; j++) {
    int fd = dial(h.addr);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    size_t len = j == 0 ? strlen(junk[j]) : GPB_NP_HDR;
    ASSERT(send(fd, junk[j], len, MSG_NOSIGNAL) == (ssize_t)len);
    gpb_np_hdr_t fh;
    uint8_t pl[1024];
    ASSERT(read_frame(fd, &fh, pl, sizeof pl) == 0);
    ASSERT_EQ(fh.type, GPB_NP_BYE);
    int32_t code;
    char msg[GPB_NP_MSG_MAX + 1], err[GPB_NP_ERRLEN];
    ASSERT_OK(gpb__np_bye_get(pl, fh.raw_len, &code, msg, err));
    ASSERT_EQ(code, want[j]);
    printf("   refused: %s\n", msg);
    /* ...and then the relay hangs up. */
    char c;
    ASSERT(recv(fd, &c, 1, 0) == 0);
    close(fd);
  }
  /* A HELLO, then noise: ignored; the reader still works. */
  int fd = dial(h.addr);
  gpb_np_buf_t pl = {0}, fr = {0};
  gpb__np_hello_put(&pl, 0, NULL, NULL);
  ASSERT_OK(gpb__np_frame(&fr, GPB_NP_HELLO, pl.p, pl.len, 0));
  gpb__np_put(&fr, "noise noise noise", 17);
  ASSERT(send(fd, fr.p, fr.len, MSG_NOSIGNAL) == (ssize_t)fr.len);
  gpb__np_buf_free(&pl);
  gpb__np_buf_free(&fr);
  churn(&h, scaled(2000));
  sync_and_compare(&h, a);
  close(fd);
  /* A client that says nothing at all is dropped later; meanwhile others
   * are served. */
  int mute = dial(h.addr);
  churn(&h, scaled(500));
  sync_and_compare(&h, a);
  close(mute);
  gpb_attach_close(a);
  harness_stop(&h);
}

/* ------------------------------------------------------------ fake relay */

typedef struct fake {
  int lfd, port;
  gpb_np_buf_t script; /* bytes sent after the HELLO */
  int hold;            /* keep the socket open until told */
  atomic_int release;
  pthread_t th;
} fake_t;

static void *fake_thread(void *arg) {
  fake_t *f = arg;
  int fd = accept(f->lfd, NULL, NULL);
  ASSERT(fd >= 0);
  uint8_t buf[512];
  (void)!recv(fd, buf, sizeof buf, 0); /* the HELLO */
  if (f->script.len)
    ASSERT(send(fd, f->script.p, f->script.len, MSG_NOSIGNAL) ==
           (ssize_t)f->script.len);
  while (f->hold && !atomic_load(&f->release)) usleep(1000);
  close(fd);
  return NULL;
}

static void fake_start(fake_t *f, int hold) {
  f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT(bind(f->lfd, (struct sockaddr *)&sa, sizeof sa) == 0);
  ASSERT(listen(f->lfd, 4) == 0);
  socklen_t sl = sizeof sa;
  getsockname(f->lfd, (struct sockaddr *)&sa, &sl);
  f->port = ntohs(sa.sin_port);
  f->hold = hold;
  atomic_store(&f->release, 0);
  ASSERT(pthread_create(&f->th, NULL, fake_thread, f) == 0);
}

static void fake_stop(fake_t *f) {
  atomic_store(&f->release, 1);
  pthread_join(f->th, NULL);
  close(f->lfd);
  gpb__np_buf_free(&f->script);
}

static void put_frame(gpb_np_buf_t *out, int type, gpb_np_buf_t *pl) {
  ASSERT_OK(gpb__np_frame(out, type, pl->p, pl->len, 0));
  pl->len = 0;
}

/* A valid stream for `pool` (INFO + keyframe), as the relay would send. */
static void script_key(gpb_np_buf_t *s, gpb_pool_t *pool) {
  gpb_pool_info_t info;
  gpb_stats_t st;
  ASSERT_OK(gpb_pool_info(pool, &info));
  ASSERT_OK(gpb_pool_stats(pool, &st));
  gpb_np_buf_t pl = {0};
  gpb__np_info_put(&pl, &info);
  put_frame(s, GPB_NP_INFO, &pl);
  test_blocks_t v = {0};
  ASSERT_OK(gpb_pool_visit(pool, test_collect_blocks, &v));
  gpb__np_key_begin_put(&pl, st.seq, v.n);
  put_frame(s, GPB_NP_KEY_BEGIN, &pl);
  gpb__np_put_u32(&pl, (uint32_t)v.n);
  for (size_t i = 0; i < v.n; i++) gpb__np_block_put(&pl, &v.b[i]);
  put_frame(s, GPB_NP_KEY_BLOCKS, &pl);
  gpb__np_key_end_put(&pl, st.seq, &st);
  put_frame(s, GPB_NP_KEY_END, &pl);
  gpb__np_buf_free(&pl);
  free(v.b);
}

static void test_garbage_to_reader(void) {
  printf("-- garbage sent to a reader by a fake relay\n");
  uint64_t seed = test_seed();
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = 1u << 20;
  cfg.flags = GPB_CFG_NO_ENV;
  gpb_pool_t *pool;
  ASSERT_OK(gpb_pool_create(&cfg, &pool));
  void *p[8];
  for (int i = 0; i < 8; i++) ASSERT_OK(gpb_alloc(pool, 1000 * (i + 1), &p[i]));
  char addr[64];
  int trials = scaled(60);
  for (int t = 0; t < trials; t++) {
    fake_t f = {0};
    gpb_np_buf_t valid = {0};
    script_key(&valid, pool);
    int mode = t % 4;
    if (mode == 0) {
      /* Pure noise instead of a stream. */
      for (int i = 0; i < 64; i++) gpb__np_put_u8(&f.script, (uint8_t)rng_next(&seed));
    } else {
      /* A valid stream with a few bytes changed, or cut short. */
      gpb__np_put(&f.script, valid.p, valid.len);
      if (mode == 3) {
        f.script.len = rng_below(&seed, valid.len);
      } else {
        for (int k = 0; k < mode; k++)
          f.script.p[rng_below(&seed, f.script.len)] = (uint8_t)rng_next(&seed);
      }
    }
    fake_start(&f, 0);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", f.port);
    gpb_attach_t *a = NULL;
    int rc = gpb_attach_connect(addr, NULL, &a);
    if (rc == 0) {
      /* The corruption hit something harmless (a time, a name): the map
       * loaded must still be a valid one; the relay then hangs up. */
      ASSERT_OK(gpb_model_check(gpb_attach_model(a)));
      while ((rc = gpb_attach_poll(a)) >= 0) usleep(1000);
      ASSERT_EQ(rc, GPB_ECLOSED);
      gpb_attach_close(a);
    } else {
      ASSERT(rc == GPB_EFORMAT || rc == GPB_EVERSION || rc == GPB_ECLOSED ||
             rc == GPB_EHOSTMEM);
      ASSERT(a == NULL);
    }
    fake_stop(&f);
    gpb__np_buf_free(&valid);
  }
  /* A good keyframe, then an event that does not fit: GPB_EFORMAT with a
   * detail, the connection dropped, the model kept. */
  fake_t f = {0};
  script_key(&f.script, pool);
  gpb_stats_t st;
  ASSERT_OK(gpb_pool_stats(pool, &st));
  gpb_np_evenc_t enc;
  gpb__np_evenc_init(&enc, 8);
  gpb_event_t ev = {0};
  ev.seq = st.seq + 1;
  ev.type = GPB_EV_MERGE;
  ev.order = 3;
  ev.offset = 0; /* the block there is allocated: cannot merge */
  ev.size = 256u << 3;
  gpb__np_evenc_add(&enc, &ev);
  gpb_np_buf_t pl = {0};
  ASSERT_OK(gpb__np_evenc_finish(&enc, &pl));
  put_frame(&f.script, GPB_NP_EVENTS, &pl);
  gpb__np_evenc_free(&enc);
  gpb__np_buf_free(&pl);
  fake_start(&f, 1);
  snprintf(addr, sizeof addr, "127.0.0.1:%d", f.port);
  gpb_attach_t *a;
  ASSERT_OK(gpb_attach_connect(addr, NULL, &a));
  int rc;
  uint64_t t0 = gpb_now_ns();
  while ((rc = gpb_attach_poll(a)) == 0) {
    TEST_HANG_GUARD(t0, "the refused keyframe never came");
    usleep(1000);
  }
  ASSERT_EQ(rc, GPB_EFORMAT);
  printf("   refused: %s\n", gpb_last_error_detail());
  ASSERT(strstr(gpb_last_error_detail(), "refused by the model"));
  ASSERT_U64_EQ(gpb_model_seq(gpb_attach_model(a)), st.seq);
  ASSERT_ERR(gpb_attach_poll(a), GPB_ECLOSED);
  gpb_attach_close(a);
  fake_stop(&f);
  /* Nothing listening at all. */
  ASSERT_ERR(gpb_attach_connect("127.0.0.1:1", NULL, &a), GPB_EIO);
  ASSERT_ERR(gpb_attach_connect("no-port:", NULL, &a), GPB_EINVAL);
  ASSERT_ERR(gpb_attach_connect("[::1", NULL, &a), GPB_EINVAL);
  ASSERT_ERR(gpb_attach_connect("", NULL, &a), GPB_EINVAL);
  for (int i = 0; i < 8; i++) ASSERT_OK(gpb_free(pool, p[i]));
  gpb_pool_destroy(pool);
}

static void test_slow_client(void) {
  printf("-- a slow reader is resynchronized from a keyframe\n");
  harness_t h;
  gpbr_opts_t o = {0};
  o.zlevel = 0;
  o.client_buf = 64u << 10;
  harness_start(&h, &o, GPB_POLICY_TRIM);
  churn(&h, scaled(500));
  gpb_attach_t *slow;
  ASSERT_OK(gpb_attach_connect(h.addr, NULL, &slow));
  hookcount_t hc = {0};
  ASSERT_OK(gpb_attach_set_hook(slow, count_hook, &hc));
  /* Churn without reading `slow` until the relay had to drop its queue
   * (the socket buffers fill first, so this takes a few MB). */
  uint64_t t0 = gpb_now_ns();
  while (atomic_load(&h.resyncs) == 0) {
    churn(&h, 20000);
    TEST_HANG_GUARD(t0, "the relay never resynced");
  }
  churn(&h, scaled(1000));
  sync_and_compare(&h, slow);
  ASSERT(hc.keyframes >= 1); /* the resync reached the reader's hook */
  printf("   relay resyncs %llu, reader saw %llu keyframes, %llu events\n",
         (unsigned long long)atomic_load(&h.resyncs),
         (unsigned long long)hc.keyframes, (unsigned long long)hc.events);
  gpb_attach_close(slow);
  harness_stop(&h);
}

static void test_reconnect_and_close(void) {
  printf("-- reconnect, pool closed, relay gone\n");
  harness_t h;
  gpbr_opts_t o = {0};
  o.zlevel = 1;
  harness_start(&h, &o, GPB_POLICY_BUDDY);
  churn(&h, scaled(1000));
  gpb_attach_t *a;
  ASSERT_OK(gpb_attach_connect(h.addr, NULL, &a));
  sync_and_compare(&h, a);
  gpb_attach_close(a);
  churn(&h, scaled(3000)); /* missed while away */
  ASSERT_OK(gpb_attach_connect(h.addr, NULL, &a));
  sync_and_compare(&h, a);
  churn(&h, scaled(1000));
  sync_and_compare(&h, a);
  /* The relay goes away: ECLOSED, the model keeps its state. */
  uint64_t seq = gpb_model_seq(gpb_attach_model(a));
  harness_kill_relay(&h);
  int rc;
  uint64_t t0 = gpb_now_ns();
  while ((rc = gpb_attach_poll(a)) >= 0) {
    TEST_HANG_GUARD(t0, "no GPB_ECLOSED");
    usleep(1000);
  }
  ASSERT_EQ(rc, GPB_ECLOSED);
  printf("   %s\n", gpb_last_error_detail());
  ASSERT_U64_EQ(gpb_model_seq(gpb_attach_model(a)), seq);
  ASSERT_ERR(gpb_attach_poll(a), GPB_ECLOSED);
  gpb_attach_close(a);
  harness_stop(&h);

  /* The pool closes: readers are told, and later readers still get the
   * last state. */
  harness_start(&h, &o, GPB_POLICY_BUDDY);
  churn(&h, scaled(1000));
  ASSERT_OK(gpb_attach_connect(h.addr, NULL, &a));
  sync_and_compare(&h, a);
  churn(&h, scaled(500));
  atomic_store(&h.close_src, 1);
  t0 = gpb_now_ns();
  while ((rc = gpb_attach_poll(a)) >= 0) {
    TEST_HANG_GUARD(t0, "no GPB_ECLOSED");
    usleep(1000);
  }
  ASSERT_EQ(rc, GPB_ECLOSED);
  ASSERT(strstr(gpb_last_error_detail(), "was closed"));
  test_blocks_t x = {0};
  ASSERT_OK(gpb_model_visit(gpb_attach_model(a), test_collect_blocks, &x));
  gpb_attach_t *b;
  ASSERT_OK(gpb_attach_connect(h.addr, NULL, &b));
  t0 = gpb_now_ns();
  while ((rc = gpb_attach_poll(b)) >= 0) {
    TEST_HANG_GUARD(t0, "no GPB_ECLOSED");
    usleep(1000);
  }
  ASSERT_EQ(rc, GPB_ECLOSED);
  test_blocks_t y = {0};
  ASSERT_OK(gpb_model_visit(gpb_attach_model(b), test_collect_blocks, &y));
  ASSERT_EQ(x.n, y.n);
  ASSERT(memcmp(x.b, y.b, x.n * sizeof *x.b) == 0);
  /* ...and both equal the pool, which did not change since. */
  ASSERT_U64_EQ(gpb_model_seq(gpb_attach_model(b)), pool_seq(&h));
  free(x.b);
  free(y.b);
  gpb_attach_close(a);
  gpb_attach_close(b);
  harness_stop(&h);
}

typedef struct names {
  char v[4][GPB_NAME_MAX];
  int n;
} names_t;

static void note_name(const char *name, void *user) {
  names_t *l = user;
  if (l->n < 4) snprintf(l->v[l->n++], GPB_NAME_MAX, "%s", name);
}

/* One relay, two pools: a reader names one as ADDR/NAME; the list; a name
 * the relay does not serve; no name when there are two. */
static void test_two_pools(void) {
  printf("-- two pools on one port\n");
  harness_t h;
  gpbr_opts_t o = {0};
  o.zlevel = 1;
  harness_start_n(&h, &o, GPB_POLICY_BUDDY, 2);
  names_t l = {0};
  ASSERT_EQ(gpb_attach_list_remote(h.addr, NULL, note_name, &l), 2);
  ASSERT_EQ(l.n, 2);
  ASSERT(!strcmp(l.v[0], "a") && !strcmp(l.v[1], "b"));
  char addr[96];
  gpb_attach_t *a[2];
  for (int k = 0; k < 2; k++) {
    h.pool = h.pools[k];
    h.live = h.lives[k];
    churn(&h, scaled(3000));
    snprintf(addr, sizeof addr, "%s/%c", h.addr, 'a' + k);
    ASSERT_OK(gpb_attach_connect(addr, NULL, &a[k]));
    gpb_pool_info_t ai;
    ASSERT_OK(gpb_attach_info(a[k], &ai));
    ASSERT(!strcmp(ai.name, k ? "b" : "a"));
  }
  for (int round = 0; round < 3; round++)
    for (int k = 0; k < 2; k++) { /* each reader follows its own pool */
      h.pool = h.pools[k];
      h.live = h.lives[k];
      churn(&h, scaled(1000));
      sync_and_compare(&h, a[k]);
    }
  gpb_attach_t *x = NULL;
  snprintf(addr, sizeof addr, "%s/zz", h.addr);
  ASSERT_ERR(gpb_attach_connect(addr, NULL, &x), GPB_ENOTFOUND);
  ASSERT(strstr(gpb_last_error_detail(), "no pool 'zz'"));
  ASSERT_ERR(gpb_attach_connect(h.addr, NULL, &x), GPB_EINVAL);
  ASSERT(strstr(gpb_last_error_detail(), "/NAME"));
  printf("   no name: %s\n", gpb_last_error_detail());
  snprintf(addr, sizeof addr, "%s/bad name", h.addr);
  ASSERT_ERR(gpb_attach_connect(addr, NULL, &x), GPB_EINVAL);
  ASSERT(x == NULL);
  gpb_attach_close(a[0]);
  gpb_attach_close(a[1]);
  harness_stop(&h);
}

static void test_bind_rules(void) {
  printf("-- binding rules\n");
  gpbr_opts_t o = {0};
  gpbr_t *r;
  o.verbose = -1;
  o.listen = "0.0.0.0:0";
  ASSERT_ERR(gpbr_open(&o, &r), GPB_EPERM); /* no --allow-remote */
  o.allow_remote = 1;
  ASSERT_ERR(gpbr_open(&o, &r), GPB_EPERM); /* no token */
  o.token = "t";
  ASSERT_OK(gpbr_open(&o, &r));
  gpbr_free(r);
  o.listen = "localhost";
  ASSERT_ERR(gpbr_open(&o, &r), GPB_EINVAL);
  o.listen = "[::1]:0";
  o.allow_remote = 0;
  o.token = NULL;
  int rc = gpbr_open(&o, &r); /* loopback; IPv6 may be off here */
  ASSERT(rc == 0 || rc == GPB_EIO || rc == GPB_ENOTFOUND);
  if (rc == 0) gpbr_free(r);
}

/* ------------------------------------------------------------ call sites */

typedef struct sitelog {
  uint32_t site[4096];
  int n;
} sitelog_t;

static void site_hook(const gpb_event_t *ev, void *user) {
  sitelog_t *l = user;
  if (ev && ev->type == GPB_EV_ALLOC && l->n < 4096) l->site[l->n++] = ev->site;
}

/* A reader of the protocol before sites: its HELLO does not ask for
 * them, so it must get no SITES frame and no site in events or blocks. */
static void old_reader(harness_t *h) {
  int fd = dial(h->addr);
  struct timeval tv = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  gpb_np_buf_t pl = {0}, fr = {0};
  gpb__np_hello_put(&pl, 0, NULL, NULL);
  ASSERT_OK(gpb__np_frame(&fr, GPB_NP_HELLO, pl.p, pl.len, 0));
  ASSERT(send(fd, fr.p, fr.len, MSG_NOSIGNAL) == (ssize_t)fr.len);
  gpb__np_buf_free(&pl);
  gpb__np_buf_free(&fr);
  uint8_t *buf = malloc(GPB_NP_MAX_RAW);
  gpb_block_info_t *bl = malloc(GPB_NP_KEY_CHUNK * sizeof *bl);
  gpb_event_t *ev = malloc(GPB_NP_BATCH_MAX * sizeof *ev);
  ASSERT(buf && bl && ev);
  gpb_pool_info_t info;
  ASSERT_OK(gpb_pool_info(h->pool, &info));
  gpb_np_keydec_t kd;
  gpb__np_keydec_init(&kd, &info);
  char err[GPB_NP_ERRLEN];
  int blocks = 0, events = 0;
  void *x = NULL;
  while (!events) {
    gpb_np_hdr_t fh;
    ASSERT(read_frame(fd, &fh, buf, GPB_NP_MAX_RAW) == 0);
    ASSERT(fh.type != GPB_NP_SITES);
    size_t n = 0;
    if (fh.type == GPB_NP_KEY_BLOCKS) {
      ASSERT_OK(gpb__np_key_blocks_get(&kd, buf, fh.raw_len, bl,
                                       GPB_NP_KEY_CHUNK, &n, err));
      for (size_t i = 0; i < n; i++) ASSERT_EQ(bl[i].site, 0);
      blocks += (int)n;
    } else if (fh.type == GPB_NP_KEY_END) {
      /* Now an allocation from a site, so that events follow. */
      ASSERT_OK(test_alloc_at(h->pool, 5, 1000, 0, &x));
    } else if (fh.type == GPB_NP_EVENTS) {
      ASSERT_OK(gpb__np_events_get(buf, fh.raw_len, 8, ev, GPB_NP_BATCH_MAX,
                                   &n, err));
      for (size_t i = 0; i < n; i++) ASSERT_EQ(ev[i].site, 0);
      events += (int)n;
    }
  }
  ASSERT(blocks > 0);
  ASSERT_OK(gpb_free(h->pool, x));
  close(fd);
  free(buf);
  free(bl);
  free(ev);
  printf("   a reader that did not ask: %d blocks, %d events, no sites\n",
         blocks, events);
}

static void test_sites(void) {
  printf("-- call sites\n");
  harness_t h;
  gpbr_opts_t o = {0};
  o.zlevel = 1;
  g_pool_flags = GPB_CFG_CALLSITES;
  harness_start(&h, &o, GPB_POLICY_BUDDY);
  g_pool_flags = 0;
  gpb_attach_t *a;
  ASSERT_OK(gpb_attach_connect(h.addr, NULL, &a));
  sitelog_t *log = calloc(1, sizeof *log);
  ASSERT_OK(gpb_attach_set_hook(a, site_hook, log));
  void *v[TEST_NSITES];
  for (int k = 0; k < TEST_NSITES; k++)
    ASSERT_OK(test_alloc_at(h.pool, k, 4096 + 64 * (size_t)k, (uint32_t)k % 16,
                            &v[k]));
  sync_and_compare(&h, a); /* the blocks' sites too */
  ASSERT_EQ(log->n, TEST_NSITES);
  for (int i = 0; i < log->n; i++) {
    test_site_text_is(h.pool, log->site[i], gpb_attach_site(a, log->site[i]));
    if (i) ASSERT(log->site[i] != log->site[i - 1]);
  }
  /* Late: the keyframe names the sites, and their texts come first. */
  gpb_attach_t *b;
  ASSERT_OK(gpb_attach_connect(h.addr, NULL, &b));
  sync_and_compare(&h, b);
  test_site_check_t c = {h.pool, b, 0};
  ASSERT_OK(gpb_model_visit(gpb_attach_model(b), test_check_site, &c));
  ASSERT_EQ(c.used, TEST_NSITES);
  old_reader(&h);
  for (int k = 0; k < TEST_NSITES; k++) ASSERT_OK(gpb_free(h.pool, v[k]));
  sync_and_compare(&h, a);
  sync_and_compare(&h, b);
  printf("   %d sites from the start and from a keyframe, with their texts\n",
         TEST_NSITES);
  gpb_attach_close(a);
  gpb_attach_close(b);
  free(log);
  harness_stop(&h);
}

/* Runs `script` from a fake relay: the reader must stop with GPB_EFORMAT
 * naming `what`, at connect or at a poll. */
static void expect_bad(gpb_np_buf_t *script, const char *what) {
  fake_t f = {0};
  f.script = *script;
  memset(script, 0, sizeof *script);
  fake_start(&f, 1);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", f.port);
  gpb_attach_t *a = NULL;
  int rc = gpb_attach_connect(addr, NULL, &a);
  for (int i = 0; rc == 0 && i < 10000; i++) {
    rc = gpb_attach_poll(a);
    if (rc == 0) usleep(1000);
  }
  if (rc != GPB_EFORMAT || !strstr(gpb_last_error_detail(), what))
    FAILF("expected GPB_EFORMAT naming '%s', got %s: %s", what,
          gpb_err_name(rc), gpb_last_error_detail());
  printf("   refused: %s\n", gpb_last_error_detail());
  gpb_attach_close(a);
  fake_stop(&f);
}

static void put_site_raw(gpb_np_buf_t *b, uint16_t id, const char *t,
                         size_t n) {
  gpb__np_put_u16(b, id);
  gpb__np_put_u16(b, (uint16_t)n);
  gpb__np_put(b, t, n);
}

static void test_sites_hostile(void) {
  printf("-- hostile call sites from a fake relay\n");
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = 1u << 20;
  cfg.flags = GPB_CFG_NO_ENV | GPB_CFG_CALLSITES;
  gpb_pool_t *pool;
  ASSERT_OK(gpb_pool_create(&cfg, &pool));
  void *x, *y;
  ASSERT_OK(test_alloc_at(pool, 0, 1000, 0, &x));
  ASSERT_OK(test_alloc_at(pool, 1, 3000, 0, &y));
  gpb_np_buf_t s = {0}, pl = {0};
  char big[5000];
  memset(big, 'f', sizeof big);

  script_key(&s, pool);
  gpb__np_site_put(&pl, 5, "a;b");
  gpb__np_site_put(&pl, 3, "c");
  put_frame(&s, GPB_NP_SITES, &pl);
  expect_bad(&s, "ids grow");

  script_key(&s, pool);
  put_site_raw(&pl, 1, "a\0b", 3);
  put_frame(&s, GPB_NP_SITES, &pl);
  expect_bad(&s, "NUL");

  script_key(&s, pool);
  put_site_raw(&pl, 1, "", 0);
  put_frame(&s, GPB_NP_SITES, &pl);
  expect_bad(&s, "1 to 4096 bytes");

  script_key(&s, pool);
  put_site_raw(&pl, 1, big, sizeof big);
  put_frame(&s, GPB_NP_SITES, &pl);
  expect_bad(&s, "1 to 4096 bytes");

  script_key(&s, pool);
  put_site_raw(&pl, 1, "abc", 3);
  pl.len -= 2; /* cut short */
  put_frame(&s, GPB_NP_SITES, &pl);
  expect_bad(&s, "truncated");

  script_key(&s, pool);
  gpb__np_site_put(&pl, 1, "a;b");
  put_frame(&s, GPB_NP_SITES, &pl);
  gpb__np_site_put(&pl, 1, "a;b"); /* again, the same: fine */
  put_frame(&s, GPB_NP_SITES, &pl);
  gpb__np_site_put(&pl, 1, "c");
  put_frame(&s, GPB_NP_SITES, &pl);
  expect_bad(&s, "defined twice");

  gpb__np_site_put(&pl, 1, "a;b");
  put_frame(&s, GPB_NP_SITES, &pl);
  script_key(&s, pool);
  expect_bad(&s, "SITES before INFO");

  /* An event naming a site past any id. */
  script_key(&s, pool);
  gpb_stats_t st;
  ASSERT_OK(gpb_pool_stats(pool, &st));
  gpb__np_put_u64(&pl, st.seq + 1);
  gpb__np_put_u64(&pl, 0);
  gpb__np_put_u32(&pl, 1);
  gpb__np_put_u8(&pl, GPB_EV_ALLOC);
  gpb__np_put_u8(&pl, 0);
  gpb__np_put_u8(&pl, 0x20);
  gpb__np_put_var(&pl, 0);
  gpb__np_put_var(&pl, 0);
  gpb__np_put_var(&pl, 70000);
  put_frame(&s, GPB_NP_EVENTS, &pl);
  expect_bad(&s, "call site 70000");

  /* A keyframe block naming one. */
  gpb_pool_info_t info;
  ASSERT_OK(gpb_pool_info(pool, &info));
  gpb__np_info_put(&pl, &info);
  put_frame(&s, GPB_NP_INFO, &pl);
  test_blocks_t v = {0};
  ASSERT_OK(gpb_pool_visit(pool, test_collect_blocks, &v));
  gpb__np_key_begin_put(&pl, st.seq, v.n);
  put_frame(&s, GPB_NP_KEY_BEGIN, &pl);
  gpb__np_put_u32(&pl, (uint32_t)v.n);
  for (size_t i = 0; i < v.n; i++) {
    if (v.b[i].used) v.b[i].site = 70000;
    gpb__np_block_put(&pl, &v.b[i]);
  }
  free(v.b);
  put_frame(&s, GPB_NP_KEY_BLOCKS, &pl);
  expect_bad(&s, "call site 70000");

  /* A flood: every id with a 2 KiB text, 128 MiB (zlib makes it small
   * on the wire), then CLOSED. The reader keeps what its table holds
   * (64 MiB), not more, and reads on to the end. */
  script_key(&s, pool);
  char kib[2048];
  memset(kib, 'k', sizeof kib);
  for (uint32_t id = 1; id <= GPB_MAX_SITES; id++) {
    put_site_raw(&pl, (uint16_t)id, kib, sizeof kib);
    if (pl.len + 4 + sizeof kib > GPB_NP_MAX_RAW || id == GPB_MAX_SITES) {
      ASSERT_OK(gpb__np_frame(&s, GPB_NP_SITES, pl.p, pl.len, 6));
      pl.len = 0;
    }
  }
  ASSERT_OK(gpb__np_frame(&s, GPB_NP_CLOSED, NULL, 0, 0));
  fake_t f = {0};
  f.script = s;
  memset(&s, 0, sizeof s);
  fake_start(&f, 1);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", f.port);
  gpb_attach_t *a;
  ASSERT_OK(gpb_attach_connect(addr, NULL, &a));
  int rc = 0;
  for (int i = 0; i < 100000 && rc >= 0; i++) {
    rc = gpb_attach_poll(a);
    if (rc == 0) usleep(1000);
  }
  ASSERT_EQ(rc, GPB_ECLOSED);
  ASSERT(gpb_attach_site(a, 1) && strlen(gpb_attach_site(a, 1)) == sizeof kib);
  ASSERT(gpb_attach_site(a, GPB_MAX_SITES) == NULL);
  int kept = 0;
  for (uint32_t id = 1; id <= GPB_MAX_SITES; id++) kept += !!gpb_attach_site(a, id);
  ASSERT(kept > 0 && (uint64_t)kept * sizeof kib <= (64u << 20));
  printf("   a flood of %u texts: kept %d (64 MiB)\n", GPB_MAX_SITES, kept);
  gpb_attach_close(a);
  fake_stop(&f);

  gpb__np_buf_free(&pl);
  ASSERT_OK(gpb_free(pool, x));
  ASSERT_OK(gpb_free(pool, y));
  gpb_pool_destroy(pool);
}

/* One relay serves GPBR_MAX_SRC pools (it served 1024 and refused the
 * rest without a word); the next is refused with one log line, however
 * many more come. */
static void test_many_sources(void) {
  gpbr_opts_t o = {0};
  o.listen = "127.0.0.1:0";
  o.verbose = -1; /* the cap is said even so */
  gpbr_t *r;
  ASSERT_OK(gpbr_open(&o, &r));
  gpb_model_t *m;
  ASSERT_OK(gpb_model_create(1 << 20, 256, &m));
  gpb_pool_info_t info;
  memset(&info, 0, sizeof info);
  info.managed_size = info.pool_size = 1 << 20;
  info.min_block = 256;
  for (int i = 0; i < GPBR_MAX_SRC; i++) {
    snprintf(info.name, sizeof info.name, "p%d", i);
    ASSERT(gpbr_src_add(r, m, &info, NULL) != NULL);
  }
  char errf[64];
  snprintf(errf, sizeof errf, "/tmp/test_relay_cap.%d", (int)getpid());
  fflush(stderr);
  int save = dup(2), ef = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT(save >= 0 && ef >= 0);
  dup2(ef, 2);
  for (int i = 0; i < 3; i++) {
    snprintf(info.name, sizeof info.name, "over%d", i);
    ASSERT(gpbr_src_add(r, m, &info, NULL) == NULL);
  }
  fflush(stderr);
  dup2(save, 2);
  close(save);
  close(ef);
  FILE *f = fopen(errf, "r");
  ASSERT(f);
  char line[512];
  int said = 0;
  while (fgets(line, sizeof line, f)) said += strstr(line, "over0") != NULL;
  fclose(f);
  unlink(errf);
  ASSERT_EQ(said, 1);
  ASSERT_EQ(gpbr_src_count(r), GPBR_MAX_SRC);
  gpbr_free(r);
  gpb_model_destroy(m);
  printf("many sources: %d served, the next refused with one log line\n",
         GPBR_MAX_SRC);
}

/* Occurrences of what in s. */
static int count_of(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, what)) != NULL; p += strlen(what)) n++;
  return n;
}

/* A bad HOST:PORT/NAME is refused before any connection, in a message
 * that says it once (the detail was formatted into itself: "after '/'
 * comes a pool name: 'A/': after '/' comes a pool name: "). */
static void test_connect_args(void) {
  gpb_attach_t *a = NULL;
  ASSERT_ERR(gpb_attach_connect("127.0.0.1:1/", NULL, &a), GPB_EINVAL);
  const char *d = gpb_last_error_detail();
  ASSERT(strstr(d, "no pool name after the '/'"));
  ASSERT_EQ(count_of(d, "127.0.0.1:1/"), 1);
  ASSERT_ERR(gpb_attach_connect("127.0.0.1:1/a b", NULL, &a), GPB_EINVAL);
  d = gpb_last_error_detail();
  ASSERT(strstr(d, "bad pool name after the '/'"));
  ASSERT_EQ(count_of(d, "127.0.0.1:1/a b"), 1);
  ASSERT_EQ(count_of(d, "after the '/'"), 1);
  printf("connect arguments: %s\n", d);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  test_connect_args();
  test_many_sources();
  test_bind_rules();
  test_basic(1, GPB_POLICY_BUDDY);
  test_basic(0, GPB_POLICY_TRIM);
  test_many_clients();
  test_tokens();
  test_garbage_to_relay();
  test_garbage_to_reader();
  test_slow_client();
  test_reconnect_and_close();
  test_two_pools();
  test_sites();
  test_sites_hostile();
  printf("ok\n");
  return 0;
}
