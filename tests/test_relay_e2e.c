/* SPDX-License-Identifier: MIT */
/*
 * test_relay_e2e.c: remote viewing end to end, across processes.
 *
 * A writer child publishes a named host pool and churns on command; the
 * gpubuddy-relay program serves it on an ephemeral loopback port (it
 * writes the port to --port-file); this process reads the pool twice, once
 * through shared memory (gpb_attach_open) and once through the relay
 * (gpb_attach_connect). At every quiescent point both block maps, and
 * their counters, must be equal, exactly; the pool records call sites,
 * and each block's site has the same frames through either reader.
 *
 * Then: the reader disconnects and reconnects; the relay is killed with
 * SIGKILL (poll says GPB_ECLOSED, the model keeps the state); a second
 * relay with a token refuses a wrong one; the pool closes (readers are
 * told, a late reader still gets the last state); SIGTERM ends the relay
 * cleanly; a non-loopback --listen without --allow-remote is refused.
 *
 * The relay program is ./tools/gpubuddy-relay from the build directory, or
 * $GPB_RELAY_BIN.
 */
#include "testutil.h"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char g_name[64], g_tmp[256];
static pid_t g_writer = -1, g_relays[4];
static int g_nrelays;

static void nap_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

static void cleanup(void) {
  for (int i = 0; i < g_nrelays; i++)
    if (g_relays[i] > 0) kill(g_relays[i], SIGKILL);
  if (g_writer > 0) kill(g_writer, SIGKILL);
}

/* ---------------------------------------------------------------- writer */

static void writer_main(int cmd, int rep, uint64_t seed) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_HOST;
  cfg.pool_size = (size_t)8 << 20;
  cfg.min_block = 256;
  cfg.policy = GPB_POLICY_TRIM;
  cfg.name = g_name;
  cfg.flags = GPB_CFG_NO_ENV | GPB_CFG_CALLSITES;
  gpb_pool_t *p;
  int32_t rc = gpb_pool_create(&cfg, &p);
  if (rc) fprintf(stderr, "writer: %s: %s\n", gpb_err_name(rc), gpb_last_error_detail());
  if (write(rep, &rc, sizeof rc) != sizeof rc || rc) _exit(0);
  void *live[512] = {0};
  for (;;) {
    char c;
    uint32_t ops;
    if (read(cmd, &c, 1) != 1 || c == 'q') break; /* parent gone or done */
    if (read(cmd, &ops, sizeof ops) != sizeof ops) break;
    for (uint32_t i = 0; i < ops; i++) {
      int k = (int)rng_below(&seed, 512);
      if (live[k]) {
        if (gpb_free(p, live[k])) _exit(3);
        live[k] = NULL;
      } else {
        size_t sz = (size_t)1 << rng_below(&seed, 17);
        sz += rng_below(&seed, sz);
        int r = test_alloc_at(p, k % 8, sz, (uint32_t)rng_below(&seed, 8),
                              &live[k]);
        if (r && r != GPB_ENOMEM) _exit(4);
      }
    }
    gpb_stats_t s;
    gpb_pool_stats(p, &s);
    if (write(rep, &s.seq, sizeof s.seq) != sizeof s.seq) break;
  }
  gpb_pool_destroy(p);
  uint64_t done = 0;
  (void)!write(rep, &done, sizeof done);
  _exit(0);
}

static int w_cmd, w_rep;

static uint64_t writer_churn(uint32_t ops) {
  char c = 'c';
  uint64_t seq;
  ASSERT(write(w_cmd, &c, 1) == 1);
  ASSERT(write(w_cmd, &ops, sizeof ops) == sizeof ops);
  ASSERT(read(w_rep, &seq, sizeof seq) == sizeof seq);
  return seq;
}

/* ----------------------------------------------------------------- relay */

static const char *relay_bin(void) {
  const char *b = getenv("GPB_RELAY_BIN");
  return b ? b : "./tools/gpubuddy-relay";
}

/* Starts the relay with extra args; returns its port (0 if it exited). */
static int relay_start(pid_t *pid, const char *extra1, const char *extra2) {
  char pf[300];
  snprintf(pf, sizeof pf, "%s/port.%d", g_tmp, g_nrelays);
  unlink(pf);
  pid_t p = fork();
  ASSERT(p >= 0);
  if (p == 0) {
    const char *argv[12];
    int n = 0;
    argv[n++] = relay_bin();
    argv[n++] = "--listen";
    argv[n++] = extra2 && !strcmp(extra2, "--public") ? "0.0.0.0:0" : "127.0.0.1:0";
    argv[n++] = "--port-file";
    argv[n++] = pf;
    if (extra1) argv[n++] = extra1;
    if (extra2 && strcmp(extra2, "--public")) argv[n++] = extra2;
    if (!getenv("GPB_TEST_VERBOSE")) argv[n++] = "-q";
    argv[n++] = g_name;
    argv[n] = NULL;
    execv(argv[0], (char *const *)argv);
    fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  *pid = p;
  g_relays[g_nrelays++] = p;
  for (uint64_t t0 = gpb_now_ns();;) {
    FILE *f = fopen(pf, "r");
    if (f) {
      int port = 0;
      int ok = fscanf(f, "%d", &port) == 1;
      fclose(f);
      if (ok && port > 0) return port;
    }
    int st;
    if (waitpid(p, &st, WNOHANG) == p) {
      *pid = -1;
      g_relays[g_nrelays - 1] = -1;
      ASSERT(!(WIFEXITED(st) && WEXITSTATUS(st) == 127));
      return 0;
    }
    TEST_HANG_GUARD(t0, "the relay wrote no port file");
    nap_ms(10);
  }
}

/* --------------------------------------------------------------- readers */

static void wait_seq(gpb_attach_t *a, uint64_t seq, const char *who) {
  uint64_t t0 = gpb_now_ns();
  while (gpb_model_seq(gpb_attach_model(a)) < seq) {
    int rc = gpb_attach_poll(a);
    if (rc < 0) FAILF("%s: poll: %s: %s", who, gpb_err_name(rc), gpb_last_error_detail());
    TEST_HANG_GUARD(t0, "%s stuck at seq %llu, want %llu", who,
                    (unsigned long long)gpb_model_seq(gpb_attach_model(a)),
                    (unsigned long long)seq);
    if (rc == 0) nap_ms(1);
  }
  ASSERT_U64_EQ(gpb_model_seq(gpb_attach_model(a)), seq);
}


static void compare(gpb_attach_t *local, gpb_attach_t *remote) {
  test_blocks_t x = {0}, y = {0};
  ASSERT_OK(gpb_model_visit(gpb_attach_model(local), test_collect_blocks, &x));
  ASSERT_OK(gpb_model_visit(gpb_attach_model(remote), test_collect_blocks, &y));
  ASSERT_EQ(x.n, y.n);
  uint32_t sites = 0; /* bits: the sites seen */
  for (size_t i = 0; i < x.n; i++) {
    if (memcmp(&x.b[i], &y.b[i], sizeof x.b[i]))
      FAILF("block %zu differs (offset %llu vs %llu)", i,
            (unsigned long long)x.b[i].offset, (unsigned long long)y.b[i].offset);
    if (!x.b[i].used) continue;
    /* Call sites: the same id, and the same frames through the relay. */
    const char *lt = gpb_attach_site(local, x.b[i].site);
    const char *rt = gpb_attach_site(remote, x.b[i].site);
    if (!lt || !rt || strcmp(lt, rt))
      FAILF("block %zu: call site %u is '%s' here, '%s' through the relay", i,
            x.b[i].site, lt ? lt : "(null)", rt ? rt : "(null)");
    if (x.b[i].site < 32) sites |= 1u << x.b[i].site;
  }
  ASSERT(x.n < 16 || __builtin_popcount(sites) > 1);
  gpb_stats_t a, b;
  ASSERT_OK(gpb_model_stats(gpb_attach_model(local), &a));
  ASSERT_OK(gpb_model_stats(gpb_attach_model(remote), &b));
  ASSERT_U64_EQ(a.seq, b.seq);
  ASSERT_U64_EQ(a.block_bytes, b.block_bytes);
  ASSERT_U64_EQ(a.requested_bytes, b.requested_bytes);
  ASSERT_U64_EQ(a.live_allocs, b.live_allocs);
  ASSERT_U64_EQ(a.allocs, b.allocs);
  ASSERT_U64_EQ(a.frees, b.frees);
  ASSERT_U64_EQ(a.splits, b.splits);
  ASSERT_U64_EQ(a.merges, b.merges);
  gpb_pool_info_t li, ri;
  ASSERT_OK(gpb_attach_info(local, &li));
  ASSERT_OK(gpb_attach_info(remote, &ri));
  ASSERT_U64_EQ(li.managed_size, ri.managed_size);
  ASSERT(strcmp(li.name, ri.name) == 0);
  printf("   equal at seq %llu: %zu blocks, %llu live allocations\n",
         (unsigned long long)a.seq, x.n, (unsigned long long)a.live_allocs);
  free(x.b);
  free(y.b);
}

static int poll_until_closed(gpb_attach_t *a) {
  uint64_t t0 = gpb_now_ns();
  int rc;
  while ((rc = gpb_attach_poll(a)) >= 0) {
    TEST_HANG_GUARD(t0, "no GPB_ECLOSED");
    nap_ms(2);
  }
  return rc;
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  alarm(300); /* a hang is a failure, not a stuck CI job */
  uint64_t seed = test_seed();
  if (access(relay_bin(), X_OK) != 0)
    FAILF("relay program %s not found (set GPB_RELAY_BIN)", relay_bin());
  snprintf(g_name, sizeof g_name, "relaytest-%d", (int)getpid());
  snprintf(g_tmp, sizeof g_tmp, "%s/gpb-relay-e2e.XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  ASSERT(mkdtemp(g_tmp));
  atexit(cleanup);

  int c2w[2], w2c[2];
  ASSERT(pipe(c2w) == 0 && pipe(w2c) == 0);
  g_writer = fork();
  ASSERT(g_writer >= 0);
  if (g_writer == 0) {
    close(c2w[1]);
    close(w2c[0]);
    writer_main(c2w[0], w2c[1], seed);
  }
  close(c2w[0]);
  close(w2c[1]);
  w_cmd = c2w[1];
  w_rep = w2c[0];
  int32_t wrc;
  ASSERT(read(w_rep, &wrc, sizeof wrc) == sizeof wrc);
  if (wrc == GPB_ENOTFOUND) SKIP("live publishing is not available here");
  ASSERT_OK(wrc);
  uint32_t ops = (uint32_t)(4000 * test_scale());
  if (ops < 200) ops = 200;

  printf("-- relay 1, no token\n");
  uint64_t seq = writer_churn(ops);
  pid_t r1;
  int port = relay_start(&r1, NULL, NULL);
  ASSERT(port > 0);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  gpb_attach_t *local, *remote;
  ASSERT_OK(gpb_attach_open(g_name, &local));
  ASSERT_OK(gpb_attach_connect(addr, NULL, &remote));
  for (int round = 0; round < 4; round++) {
    if (round) seq = writer_churn(ops);
    wait_seq(local, seq, "local");
    wait_seq(remote, seq, "remote");
    compare(local, remote);
  }

  printf("-- disconnect, churn, reconnect\n");
  gpb_attach_close(remote);
  seq = writer_churn(ops);
  ASSERT_OK(gpb_attach_connect(addr, NULL, &remote));
  wait_seq(local, seq, "local");
  wait_seq(remote, seq, "remote");
  compare(local, remote);

  printf("-- relay killed\n");
  ASSERT(kill(r1, SIGKILL) == 0);
  ASSERT(waitpid(r1, NULL, 0) == r1);
  g_relays[0] = -1;
  ASSERT_EQ(poll_until_closed(remote), GPB_ECLOSED);
  printf("   %s\n", gpb_last_error_detail());
  compare(local, remote); /* the last state stays */
  gpb_attach_close(remote);
  ASSERT_ERR(gpb_attach_connect(addr, NULL, &remote), GPB_EIO);

  printf("-- relay 2, with a token\n");
  pid_t r2;
  port = relay_start(&r2, "--token", "s3cret");
  ASSERT(port > 0);
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  unsetenv("GPB_RELAY_TOKEN");
  ASSERT_ERR(gpb_attach_connect(addr, "guess", &remote), GPB_EPERM);
  printf("   %s\n", gpb_last_error_detail());
  ASSERT_OK(gpb_attach_connect(addr, "s3cret", &remote));
  seq = writer_churn(ops);
  wait_seq(local, seq, "local");
  wait_seq(remote, seq, "remote");
  compare(local, remote);

  printf("-- pool closes\n");
  char q = 'q';
  ASSERT(write(w_cmd, &q, 1) == 1);
  uint64_t done;
  ASSERT(read(w_rep, &done, sizeof done) == sizeof done);
  ASSERT_EQ(poll_until_closed(local), GPB_ECLOSED);
  ASSERT_EQ(poll_until_closed(remote), GPB_ECLOSED);
  printf("   %s\n", gpb_last_error_detail());
  compare(local, remote);
  gpb_attach_t *late;
  ASSERT_OK(gpb_attach_connect(addr, "s3cret", &late));
  ASSERT_EQ(poll_until_closed(late), GPB_ECLOSED);
  compare(local, late);
  gpb_attach_close(late);

  printf("-- SIGTERM\n");
  ASSERT(kill(r2, SIGTERM) == 0);
  int st;
  ASSERT(waitpid(r2, &st, 0) == r2);
  g_relays[1] = -1;
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);

  printf("-- public address without --allow-remote\n");
  pid_t r3;
  ASSERT_EQ(relay_start(&r3, NULL, "--public"), 0);

  gpb_attach_close(remote);
  gpb_attach_close(local);
  ASSERT(waitpid(g_writer, &st, 0) == g_writer);
  g_writer = -1;
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  char pf[300];
  for (int i = 0; i < g_nrelays; i++) {
    snprintf(pf, sizeof pf, "%s/port.%d", g_tmp, i);
    unlink(pf);
  }
  rmdir(g_tmp);
  printf("ok\n");
  return 0;
}
