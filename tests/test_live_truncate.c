/* SPDX-License-Identifier: MIT */
/*
 * test_live_truncate.c: a live segment truncated by another process (to
 * 0, 4096 and 65536 bytes) kills neither its writer nor its readers.
 *
 *   - The writer keeps allocating after the cut (its stores would have
 *     raised SIGBUS) and says once that it stopped publishing.
 *   - Its reader drops the pool with "... (truncated?)", whether it
 *     touched a page that is gone first (size 0: the header) or found
 *     the file short at its next look.
 *   - A second pool, published beside it, keeps being read, and the
 *     listing skips the cut one.
 * Before the guard (lib/live/guard.c) this died of SIGBUS (exit 135).
 */
#include "testutil.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

static void on_alarm(int sig) {
  (void)sig;
  static const char m[] = "FAIL: hung (alarm)\n";
  (void)!write(2, m, sizeof m - 1);
  _exit(1);
}

static gpb_pool_t *make_pool(const char *name) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.flags = GPB_CFG_NO_ENV;
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = 64 << 20;
  cfg.name = name;
  gpb_pool_t *p;
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  return p;
}

/* n alloc/free pairs: enough to wrap the ring (16384 slots) twice. */
static void churn(gpb_pool_t *p, int n) {
  for (int i = 0; i < n; i++) {
    void *x;
    ASSERT_OK(gpb_alloc(p, 4096 + (size_t)(i % 7) * 1024, &x));
    ASSERT_OK(gpb_free(p, x));
  }
}

static int listed;
static const char *wanted;
static void list_cb(const char *name, void *user) {
  (void)user;
  if (!strcmp(name, wanted)) listed = 1;
}

/* Counts lines holding `what` in a file. */
static int count_in(const char *path, const char *what) {
  FILE *f = fopen(path, "r");
  ASSERT(f);
  char line[512];
  int n = 0;
  while (fgets(line, sizeof line, f)) n += strstr(line, what) != NULL;
  fclose(f);
  return n;
}

static void one_size(off_t cut) {
  char na[64], nb[64], path[128], errf[64];
  snprintf(na, sizeof na, "trunc-a-%d-%lld", (int)getpid(), (long long)cut);
  snprintf(nb, sizeof nb, "trunc-b-%d-%lld", (int)getpid(), (long long)cut);
  snprintf(path, sizeof path, "/dev/shm/gpubuddy.%s", na);
  gpb_pool_t *pa = make_pool(na), *pb = make_pool(nb);
  gpb_attach_t *ra, *rb;
  ASSERT_OK(gpb_attach_open(na, &ra));
  ASSERT_OK(gpb_attach_open(nb, &rb));
  churn(pa, 100);
  churn(pb, 100);
  ASSERT(gpb_attach_poll(ra) >= 0);
  ASSERT(gpb_attach_poll(rb) >= 0);

  int fd = open(path, O_RDWR);
  ASSERT(fd >= 0);
  ASSERT(ftruncate(fd, cut) == 0);
  close(fd);

  /* The reader first: at size 0 it touches the missing header page. */
  int rc = gpb_attach_poll(ra);
  ASSERT(rc >= 0 || rc == GPB_EFORMAT);

  /* The writer keeps allocating; its message goes to a file, once. */
  snprintf(errf, sizeof errf, "/tmp/test_live_truncate.%d", (int)getpid());
  fflush(stderr);
  int save = dup(2), ef = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT(save >= 0 && ef >= 0);
  dup2(ef, 2);
  churn(pa, 40000);
  fflush(stderr);
  dup2(save, 2);
  close(save);
  close(ef);
  ASSERT_EQ(count_in(errf, "publishing stopped"), 1);
  unlink(errf);

  for (int i = 0; i < 300 && rc >= 0; i++) {
    rc = gpb_attach_poll(ra);
    if (rc >= 0) usleep(10000);
  }
  ASSERT_EQ(rc, GPB_EFORMAT);
  ASSERT(strstr(gpb_last_error_detail(), "truncated?"));
  printf("cut to %lld: writer alive; reader: %s\n", (long long)cut,
         gpb_last_error_detail());
  ASSERT_EQ(gpb_attach_poll(ra), GPB_EFORMAT); /* dropped for good */

  /* The other pool is served as before. */
  uint64_t seq0 = gpb_model_seq(gpb_attach_model(rb));
  churn(pb, 10);
  ASSERT(gpb_attach_poll(rb) > 0);
  ASSERT(gpb_model_seq(gpb_attach_model(rb)) >= seq0 + 20);
  wanted = na;
  listed = 0;
  ASSERT_OK(gpb_list_pools(list_cb, NULL));
  ASSERT(!listed);
  wanted = nb;
  ASSERT_OK(gpb_list_pools(list_cb, NULL));
  ASSERT(listed);

  gpb_attach_close(ra);
  gpb_attach_close(rb);
  gpb_pool_destroy(pa);
  gpb_pool_destroy(pb);
  unlink(path); /* destroy leaves it when it cannot tell it is ours */
}

int main(void) {
  signal(SIGALRM, on_alarm);
  alarm(120);
  one_size(0);
  one_size(4096);
  one_size(65536);
  printf("ok\n");
  return 0;
}
