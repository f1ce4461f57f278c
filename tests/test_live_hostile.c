/* SPDX-License-Identifier: MIT */
/*
 * test_live_hostile.c: what other local users (or programs) can put in
 * /dev/shm does not hang, fool or crash a pool or a reader.
 *
 *   - A FIFO named like a segment: listing, attach and create return at
 *     once (an open without O_NONBLOCK blocked on it forever).
 *   - A segment file owned by another uid (as root only; skipped
 *     otherwise): create refuses it naming the owner, attach refuses it,
 *     listing skips it.
 *   - The geometry changed under a reader after it attached (min block,
 *     orders): the reader keeps using the values it validated (a shift by
 *     the new min block was undefined behaviour, UBSan reported it).
 * Each part runs under alarm(), so a hang fails instead of stalling CI.
 */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define OFF_MINBLOCK 104
#define OFF_NUMORDERS 112

static void on_alarm(int sig) {
  (void)sig;
  static const char m[] = "FAIL: hung (alarm)\n";
  (void)!write(2, m, sizeof m - 1);
  _exit(1);
}

static int listed;
static const char *wanted;
static void list_cb(const char *name, void *user) {
  (void)user;
  if (!strcmp(name, wanted)) listed = 1;
}

static void fifo_case(void) {
  char name[64], path[128];
  snprintf(name, sizeof name, "hostile-fifo-%d", (int)getpid());
  snprintf(path, sizeof path, "/dev/shm/gpubuddy.%s", name);
  if (mkfifo(path, 0600) != 0) {
    printf("cannot make a FIFO in /dev/shm (%s): FIFO part skipped\n",
           strerror(errno));
    return;
  }
  alarm(20);
  wanted = name;
  listed = 0;
  ASSERT_OK(gpb_list_pools(list_cb, NULL));
  ASSERT(!listed);
  gpb_attach_t *a;
  int rc = gpb_attach_open(name, &a);
  ASSERT(rc == GPB_EFORMAT);
  ASSERT(strstr(gpb_last_error_detail(), "not a regular file"));
  /* Our own FIFO under the name is garbage: create replaces it. */
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.flags = GPB_CFG_NO_ENV;
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = 1 << 20;
  cfg.name = name;
  gpb_pool_t *p;
  rc = gpb_pool_create(&cfg, &p);
  if (rc == 0) {
    gpb_pool_destroy(p);
  } else {
    ASSERT(rc == GPB_EBUSY); /* just made: "being created", try again */
    unlink(path);
  }
  alarm(0);
  printf("FIFO: listing, attach and create returned at once\n");
}

static void foreign_case(void) {
  if (geteuid() != 0) {
    printf("not root: the other-owner part is skipped\n");
    return;
  }
  char name[64], path[128];
  snprintf(name, sizeof name, "hostile-foreign-%d", (int)getpid());
  snprintf(path, sizeof path, "/dev/shm/gpubuddy.%s", name);
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
  ASSERT(fd >= 0);
  ASSERT_EQ(ftruncate(fd, 1 << 20), 0);
  ASSERT_EQ(fchown(fd, 12345, 12345), 0);
  close(fd);
  alarm(20);
  gpb_attach_t *a;
  ASSERT_ERR(gpb_attach_open(name, &a), GPB_EPERM);
  ASSERT(strstr(gpb_last_error_detail(), "uid 12345"));
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.flags = GPB_CFG_NO_ENV;
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = 1 << 20;
  cfg.name = name;
  gpb_pool_t *p;
  ASSERT_ERR(gpb_pool_create(&cfg, &p), GPB_EPERM);
  ASSERT(strstr(gpb_last_error_detail(), "uid 12345"));
  wanted = name;
  listed = 0;
  ASSERT_OK(gpb_list_pools(list_cb, NULL));
  ASSERT(!listed);
  struct stat st;
  ASSERT_EQ(stat(path, &st), 0); /* left alone */
  ASSERT_EQ(st.st_uid, 12345);
  unlink(path);
  alarm(0);
  printf("another user's segment: refused by create and attach, not listed\n");
}

static void geometry_case(void) {
  char name[64], path[128];
  snprintf(name, sizeof name, "hostile-geo-%d", (int)getpid());
  snprintf(path, sizeof path, "/dev/shm/gpubuddy.%s", name);
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.flags = GPB_CFG_NO_ENV;
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = 4 << 20;
  cfg.name = name;
  gpb_pool_t *p;
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  gpb_attach_t *a;
  ASSERT_OK(gpb_attach_open(name, &a));
  ASSERT(gpb_attach_poll(a) >= 0);
  int fd = open(path, O_RDWR);
  ASSERT(fd >= 0);
  char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT(m != MAP_FAILED);
  close(fd);
  uint64_t huge = 1ull << 62;
  uint32_t orders = 70;
  memcpy(m + OFF_MINBLOCK, &huge, sizeof huge);
  memcpy(m + OFF_NUMORDERS, &orders, sizeof orders);
  alarm(20);
  void *ptr[64];
  for (int r = 0; r < 50; r++) {
    for (int i = 0; i < 64; i++) ASSERT_OK(gpb_alloc(p, 256u << (i % 8), &ptr[i]));
    for (int i = 0; i < 64; i++) ASSERT_OK(gpb_free(p, ptr[i]));
    int rc = gpb_attach_poll(a);
    ASSERT(rc >= 0 || rc == GPB_EFORMAT);
  }
  gpb_pool_info_t in;
  ASSERT_OK(gpb_attach_info(a, &in));
  ASSERT_U64_EQ(in.min_block, 256); /* what was validated at open */
  alarm(0);
  munmap(m, 4096);
  gpb_attach_close(a);
  gpb_pool_destroy(p);
  printf("geometry changed after attach: the reader kept its own\n");
}

int main(void) {
  signal(SIGALRM, on_alarm);
  fifo_case();
  foreign_case();
  geometry_case();
  printf("live hostile: all checks passed\n");
  return 0;
}
