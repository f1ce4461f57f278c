/* SPDX-License-Identifier: MIT */
/*
 * test_live.c: a reader process attaches to a busy pool in another
 * process, detaches and attaches again, and at quiescent points its
 * block map and stats must equal the writer's own exactly.
 *
 * A forked child creates a named host-backend pool and churns. The parent
 * attaches mid-run several times and polls. To compare, the parent sends
 * 'S'; the child stops, writes gpb_pool_visit's blocks and its stats to a
 * temp file and answers with its last event's seq; the parent polls until
 * its model reaches that seq and compares. A reader that fell behind while
 * the child was idle needs a keyframe, which the writer serves only at its
 * next allocation: the parent then sends 'N' and the child makes one
 * allocation that fails (a FAIL event changes no block) and reports again.
 *
 * Built twice: test_live with the default ring, and test_live_lag with
 * LIVE_LAG, a 64-slot ring (GPB_PUBLISH_RING) and a slow reader, so the
 * reader falls behind and must resync from keyframes.
 */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef LIVE_LAG
#define LIVE_LAG 0
#endif

#define POOL_SIZE ((size_t)16 << 20)
#define MAX_LIVE 512

static char g_name[64], g_dump[256];

static void nap_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static void write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) FAILF("write: %s", strerror(errno));
    p += w;
    n -= (size_t)w;
  }
}

static void read_all(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) FAILF("read: %s", r ? strerror(errno) : "peer closed");
    p += r;
    n -= (size_t)r;
  }
}

/* ------------------------------------------------------------ the child */

typedef struct dump {
  gpb_block_info_t *b;
  size_t n, cap;
} dump_t;

static int dump_block(const gpb_block_info_t *b, void *user) {
  dump_t *d = user;
  if (d->n == d->cap) {
    d->cap = d->cap ? d->cap * 2 : 1024;
    d->b = realloc(d->b, d->cap * sizeof *d->b);
    if (!d->b) return GPB_EHOSTMEM;
  }
  d->b[d->n++] = *b;
  return 0;
}

/* Writes stats and blocks to g_dump and the last seq to the pipe. */
static void child_report(gpb_pool_t *pool, int out) {
  dump_t d = {0};
  gpb_stats_t s;
  ASSERT_OK(gpb_pool_check(pool));
  ASSERT_OK(gpb_pool_stats(pool, &s));
  ASSERT_OK(gpb_pool_visit(pool, dump_block, &d));
  FILE *f = fopen(g_dump, "wb");
  if (!f) FAILF("cannot write %s", g_dump);
  uint64_t n = d.n;
  if (fwrite(&s, sizeof s, 1, f) != 1 || fwrite(&n, sizeof n, 1, f) != 1 ||
      (n && fwrite(d.b, sizeof *d.b, n, f) != n) || fclose(f) != 0)
    FAILF("cannot write %s", g_dump);
  free(d.b);
  char q = 'Q';
  write_all(out, &q, 1);
  write_all(out, &s.seq, sizeof s.seq);
}

static int child_main(uint64_t seed, int in, int out) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_HOST;
  cfg.pool_size = POOL_SIZE;
  cfg.min_block = 256;
  cfg.policy = (gpb_policy_t)(seed % GPB_NUM_POLICIES);
  cfg.name = g_name;
  cfg.flags = GPB_CFG_NO_ENV;
  gpb_pool_t *pool;
  ASSERT_OK(gpb_pool_create(&cfg, &pool));
  fcntl(in, F_SETFL, fcntl(in, F_GETFL) | O_NONBLOCK);
  char r = 'R';
  write_all(out, &r, 1);

  void *live[MAX_LIVE] = {0};
  uint64_t rng = seed | 1;
  int quiet = 0; /* between a report and the parent's 'C' */
  for (uint64_t it = 0;; it++) {
    char cmd;
    ssize_t got = read(in, &cmd, 1);
    if (got == 0) break; /* parent gone */
    if (got < 0 && errno != EAGAIN && errno != EINTR)
      FAILF("read: %s", strerror(errno));
    if (got == 1) {
      if (cmd == 'X') break;
      if (cmd == 'N') { /* a FAIL event: a keyframe point, no block moves */
        void *p;
        ASSERT_ERR(gpb_alloc(pool, POOL_SIZE * 2, &p), GPB_ETOOBIG);
      }
      if (cmd == 'S' || cmd == 'N') {
        child_report(pool, out);
        quiet = 1;
      }
      if (cmd == 'C') quiet = 0;
      continue;
    }
    if (quiet) {
      nap_us(200);
      continue;
    }
    size_t i = (size_t)rng_below(&rng, MAX_LIVE);
    if (live[i]) {
      ASSERT_OK(gpb_free(pool, live[i]));
      live[i] = NULL;
    } else {
      size_t size = (size_t)1 << (4 + rng_below(&rng, 13)); /* 16 B..64 KiB */
      size += (size_t)rng_below(&rng, size);
      int rc = gpb_alloc_tagged(pool, size, (uint32_t)rng_below(&rng, 8), &live[i]);
      if (rc != 0 && rc != GPB_ENOMEM) FAILF("alloc: %s", gpb_err_name(rc));
    }
    if ((it & 255) == 0) nap_us(50); /* leave the reader some CPU */
  }
  gpb_pool_destroy(pool);
  return 0;
}

/* ----------------------------------------------------------- the parent */

typedef struct counts {
  uint64_t events, resyncs;
} counts_t;

static void count_hook(const gpb_event_t *ev, void *user) {
  counts_t *c = user;
  if (ev) c->events++;
  else c->resyncs++;
}

static int poll_ok(gpb_attach_t *a) {
  int rc = gpb_attach_poll(a);
  if (rc < 0)
    FAILF("poll: %s: %s", gpb_err_name(rc), gpb_last_error_detail());
  return rc;
}

static void compare(gpb_attach_t *a) {
  FILE *f = fopen(g_dump, "rb");
  if (!f) FAILF("cannot read %s", g_dump);
  gpb_stats_t want, got;
  uint64_t n;
  if (fread(&want, sizeof want, 1, f) != 1 || fread(&n, sizeof n, 1, f) != 1)
    FAILF("short dump");
  dump_t d = {0};
  d.b = malloc((n ? n : 1) * sizeof *d.b);
  ASSERT(d.b);
  if (n && fread(d.b, sizeof *d.b, n, f) != n) FAILF("short dump");
  fclose(f);

  const gpb_model_t *m = gpb_attach_model(a);
  ASSERT_OK(gpb_model_check(m));
  dump_t mine = {0};
  ASSERT_OK(gpb_model_visit(m, dump_block, &mine));
  ASSERT_U64_EQ(mine.n, n);
  for (uint64_t i = 0; i < n; i++) {
    const gpb_block_info_t *x = &mine.b[i], *y = &d.b[i];
    if (x->offset != y->offset || x->size != y->size || x->order != y->order ||
        x->used != y->used || x->alloc_offset != y->alloc_offset ||
        x->alloc_size != y->alloc_size || x->requested != y->requested ||
        x->time_ns != y->time_ns || x->tag != y->tag)
      FAILF("block %" PRIu64 ": reader has offset %" PRIu64 " order %u used "
            "%u alloc %" PRIu64 "+%" PRIu64 " req %" PRIu64 " tag %u; pool "
            "has offset %" PRIu64 " order %u used %u alloc %" PRIu64 "+%" PRIu64
            " req %" PRIu64 " tag %u", i, x->offset, x->order, x->used,
            x->alloc_offset, x->alloc_size, x->requested, x->tag, y->offset,
            y->order, y->used, y->alloc_offset, y->alloc_size, y->requested,
            y->tag);
  }
  ASSERT_OK(gpb_model_stats(m, &got));
  ASSERT_U64_EQ(got.seq, want.seq);
  ASSERT_U64_EQ(got.requested_bytes, want.requested_bytes);
  ASSERT_U64_EQ(got.block_bytes, want.block_bytes);
  ASSERT_U64_EQ(got.free_bytes, want.free_bytes);
  ASSERT_U64_EQ(got.requested_peak, want.requested_peak);
  ASSERT_U64_EQ(got.block_peak, want.block_peak);
  ASSERT_U64_EQ(got.free_peak, want.free_peak);
  ASSERT_U64_EQ(got.allocs, want.allocs);
  ASSERT_U64_EQ(got.frees, want.frees);
  ASSERT_U64_EQ(got.failures, want.failures);
  ASSERT_U64_EQ(got.splits, want.splits);
  ASSERT_U64_EQ(got.merges, want.merges);
  ASSERT_U64_EQ(got.live_allocs, want.live_allocs);
  ASSERT_U64_EQ(got.largest_free, want.largest_free);
  ASSERT_U64_EQ(got.internal_frag_bytes, want.internal_frag_bytes);
  for (int k = 0; k < GPB_MAX_ORDERS; k++)
    ASSERT_U64_EQ(got.free_blocks[k], want.free_blocks[k]);
  for (int t = 0; t < GPB_MAX_TAGS; t++)
    ASSERT_U64_EQ(got.tag_bytes[t], want.tag_bytes[t]);
  ASSERT(got.external_frag == want.external_frag);
  printf("  match at event %" PRIu64 ": %" PRIu64 " blocks, %" PRIu64
         " live allocations\n", want.seq, n, want.live_allocs);
  free(d.b);
  free(mine.b);
}

/* Stops the child, waits for the reader to reach its state, compares. */
static void quiesce_and_compare(gpb_attach_t *a, int to, int from) {
  char cmd = 'S', q;
  uint64_t seq;
  write_all(to, &cmd, 1);
  read_all(from, &q, 1);
  ASSERT_EQ(q, 'Q');
  read_all(from, &seq, sizeof seq);
  uint64_t start = gpb_now_ns();
  for (;;) {
    uint64_t t0 = gpb_now_ns(); /* a nudge every 200 ms: pacing, no check */
    while (gpb_model_seq(gpb_attach_model(a)) != seq &&
           gpb_now_ns() - t0 < 200000000ull) {
      poll_ok(a);
      nap_us(500);
    }
    if (gpb_model_seq(gpb_attach_model(a)) == seq) break;
    TEST_HANG_GUARD(start, "reader stuck at event %" PRIu64 ", writer at %"
                    PRIu64, gpb_model_seq(gpb_attach_model(a)), seq);
    cmd = 'N'; /* behind and the writer is idle: make it serve a keyframe */
    write_all(to, &cmd, 1);
    read_all(from, &q, 1);
    ASSERT_EQ(q, 'Q');
    read_all(from, &seq, sizeof seq);
  }
  compare(a);
}

typedef struct seen {
  int found;
} seen_t;

static void list_cb(const char *name, void *user) {
  if (!strcmp(name, g_name)) ((seen_t *)user)->found++;
}

int main(void) {
  uint64_t seed = test_seed();
  double scale = test_scale();
  snprintf(g_name, sizeof g_name, "t-live%s-%d", LIVE_LAG ? "lag" : "",
           (int)getpid());
  const char *tmp = getenv("TMPDIR");
  snprintf(g_dump, sizeof g_dump, "%s/gpb-%s.dump", tmp && *tmp ? tmp : "/tmp",
           g_name);
  if (LIVE_LAG) setenv("GPB_PUBLISH_RING", "64", 1);

  int p2c[2], c2p[2];
  ASSERT(pipe(p2c) == 0 && pipe(c2p) == 0);
  fflush(stdout);
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    close(p2c[1]);
    close(c2p[0]);
    _exit(child_main(seed, p2c[0], c2p[1]));
  }
  close(p2c[0]);
  close(c2p[1]);
  int to = p2c[1], from = c2p[0];
  char r;
  read_all(from, &r, 1);
  ASSERT_EQ(r, 'R');

  seen_t seen = {0};
  ASSERT_OK(gpb_list_pools(list_cb, &seen));
  ASSERT_EQ(seen.found, 1);

  int cycles = 3, rounds = 3;
  long poll_ms = (long)(40 * scale) + 5;
  counts_t c = {0, 0};
  for (int round = 0; round < rounds; round++) {
    /* Attach, poll, detach: several readers over the run. */
    for (int cyc = 0; cyc < cycles; cyc++) {
      gpb_attach_t *a;
      ASSERT_OK(gpb_attach_open(g_name, &a));
      gpb_pool_info_t in;
      ASSERT_OK(gpb_attach_info(a, &in));
      ASSERT_U64_EQ(in.managed_size, POOL_SIZE);
      ASSERT_EQ(in.backend, GPB_BACKEND_HOST);
      ASSERT(!strcmp(in.name, g_name));
      ASSERT_OK(gpb_attach_set_hook(a, count_hook, &c));
      /* Poll for poll_ms, and on until the reader holds some state (a
       * loaded machine may give the writer no time in the window; the
       * hang guard only bounds the wait). */
      uint64_t t0 = gpb_now_ns();
      while (gpb_now_ns() - t0 < (uint64_t)poll_ms * 1000000ull ||
             gpb_model_seq(gpb_attach_model(a)) == 0) {
        TEST_HANG_GUARD(t0, "a reader attached mid-run got no state");
        poll_ok(a);
        nap_us(LIVE_LAG ? 3000 : 200);
      }
      /* No gpb_model_check here: between a FREE and its MERGEs the map
       * legitimately holds free buddies not yet merged. */
      ASSERT(gpb_model_seq(gpb_attach_model(a)) > 0);
      gpb_attach_close(a);
      nap_us(5000);
    }
    /* A reader that stays, then a quiescent point. */
    gpb_attach_t *a;
    ASSERT_OK(gpb_attach_open(g_name, &a));
    ASSERT_OK(gpb_attach_set_hook(a, count_hook, &c));
    for (int i = 0; i < 20; i++) {
      poll_ok(a);
      nap_us(LIVE_LAG ? 3000 : 500);
    }
    quiesce_and_compare(a, to, from);
    gpb_attach_close(a);
    char cont = 'C';
    write_all(to, &cont, 1);
  }
  printf("reader applied %" PRIu64 " events and %" PRIu64 " resyncs\n",
         c.events, c.resyncs);
  if (!LIVE_LAG) ASSERT(c.events > 0);
  /* Every attach syncs once; a lagging reader must have resynced more. */
  if (LIVE_LAG) ASSERT(c.resyncs > (uint64_t)(rounds * (cycles + 1)));

  /* Destroy: a reader sees GPB_ECLOSED and keeps the last state. */
  gpb_attach_t *a;
  ASSERT_OK(gpb_attach_open(g_name, &a));
  char x = 'X';
  write_all(to, &x, 1);
  int st;
  ASSERT(waitpid(pid, &st, 0) == pid);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  int rc;
  for (int i = 0; i < 10 && (rc = gpb_attach_poll(a)) >= 0; i++) {
  }
  ASSERT_ERR(gpb_attach_poll(a), GPB_ECLOSED);
  ASSERT_OK(gpb_model_check(gpb_attach_model(a)));
  gpb_attach_close(a);
  ASSERT_ERR(gpb_attach_open(g_name, &a), GPB_ENOTFOUND);
  seen.found = 0;
  ASSERT_OK(gpb_list_pools(list_cb, &seen));
  ASSERT_EQ(seen.found, 0);
  unlink(g_dump);
  printf("ok\n");
  return 0;
}
