/* SPDX-License-Identifier: MIT */
/*
 * test_live_sites.c: the live segment carries call sites
 * (GPB_CFG_CALLSITES): events and keyframe records name them, and the
 * segment's site table gives their frames to gpb_attach_site.
 *
 *   - A reader attached from the start sees every event's site, and the
 *     text of each is what gpb_pool_site_text says.
 *   - A reader that attaches late (a 64-slot ring, long overrun) gets
 *     the sites of the live blocks from a keyframe, with their texts.
 *   - A full table (GPB_PUBLISH_SITES at its least) stops publishing
 *     texts; ids still travel and the pool keeps allocating.
 *   - A version 1 segment (no table) still reads; one claiming a table
 *     is refused.
 *   - Hostile tables: a length past the end, an id out of order, id 0, a
 *     NUL in a text, a bad table size: GPB_EFORMAT naming the problem,
 *     never a crash.
 */
#include "testutil.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define OFF_VERSION 8
#define OFF_SITES_OFF 200
#define OFF_SITES_SIZE 208

static void on_alarm(int sig) {
  (void)sig;
  static const char m[] = "FAIL: hung (alarm)\n";
  (void)!write(2, m, sizeof m - 1);
  _exit(1);
}

static void *test_live_sites_alloc(gpb_pool_t *p, int k, size_t n) {
  void *ptr = NULL;
  return test_alloc_at(p, k, n, 0, &ptr) ? NULL : ptr;
}

static gpb_pool_t *make_pool(const char *name, unsigned flags) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.flags = flags | GPB_CFG_NO_ENV;
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = 64u << 20;
  cfg.name = name;
  gpb_pool_t *p;
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  return p;
}

static void seg_name(char *name, size_t n, const char *what) {
  snprintf(name, n, "sites-%s-%d", what, (int)getpid());
}

static char *seg_map(const char *name, size_t *size) {
  char path[128];
  snprintf(path, sizeof path, "/dev/shm/gpubuddy.%s", name);
  int fd = open(path, O_RDWR);
  ASSERT(fd >= 0);
  struct stat st;
  ASSERT_EQ(fstat(fd, &st), 0);
  char *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                 MAP_SHARED, fd, 0);
  ASSERT(m != MAP_FAILED);
  close(fd);
  *size = (size_t)st.st_size;
  return m;
}

static void same_text(gpb_pool_t *p, gpb_attach_t *a, uint32_t s) {
  test_site_text_is(p, s, gpb_attach_site(a, s));
}

typedef struct evlog {
  gpb_event_t ev[4096];
  int n;
} evlog_t;

static void log_hook(const gpb_event_t *ev, void *user) {
  evlog_t *l = user;
  if (ev && (ev->type == GPB_EV_ALLOC || ev->type == GPB_EV_FAIL) &&
      l->n < 4096)
    l->ev[l->n++] = *ev;
}

/* From the start: every ALLOC and FAIL names its site, with its text. */
static void test_from_start(void) {
  char name[64];
  seg_name(name, sizeof name, "start");
  gpb_pool_t *p = make_pool(name, GPB_CFG_CALLSITES);
  gpb_attach_t *a;
  ASSERT_OK(gpb_attach_open(name, &a));
  evlog_t *log = calloc(1, sizeof *log);
  ASSERT_OK(gpb_attach_set_hook(a, log_hook, log));
  ASSERT(gpb_attach_poll(a) >= 0);
  void *v[8];
  for (int k = 0; k < 8; k++) ASSERT((v[k] = test_live_sites_alloc(p, k, 4096)));
  ASSERT(test_live_sites_alloc(p, 8, 1u << 30) == NULL); /* FAIL */
  ASSERT(gpb_attach_poll(a) > 0);
  ASSERT_EQ(log->n, 9);
  for (int i = 0; i < log->n; i++) {
    ASSERT(log->ev[i].site != 0);
    same_text(p, a, log->ev[i].site);
    for (int j = 0; j < i; j++) ASSERT(log->ev[i].site != log->ev[j].site);
  }
  ASSERT_EQ(log->ev[8].type, GPB_EV_FAIL);
  ASSERT(gpb_attach_site(a, 0) == NULL);
  ASSERT(gpb_attach_site(a, 60000) == NULL);
  /* A site published since the last poll: asking takes it in. */
  void *w = test_live_sites_alloc(p, 9, 4096);
  ASSERT(w);
  uint32_t last = 0;
  for (int i = 0; i < log->n; i++)
    if (log->ev[i].site > last) last = log->ev[i].site;
  ASSERT(gpb_attach_site(a, last + 1) != NULL);
  same_text(p, a, last + 1);
  ASSERT_OK(gpb_free(p, w));
  for (int k = 0; k < 8; k++) ASSERT_OK(gpb_free(p, v[k]));
  gpb_attach_close(a);
  free(log);
  gpb_pool_destroy(p);
  printf("from the start: 9 events, each with its site and text\n");
}

/* Late: a 64-slot ring long overrun, so the reader starts from a
 * keyframe; its blocks carry their sites, and the texts are there. */
static void test_late(void) {
  char name[64];
  seg_name(name, sizeof name, "late");
  setenv("GPB_PUBLISH_RING", "64", 1);
  gpb_pool_t *p = make_pool(name, GPB_CFG_CALLSITES);
  unsetenv("GPB_PUBLISH_RING");
  void *keep[16];
  for (int k = 0; k < 16; k++)
    ASSERT((keep[k] = test_live_sites_alloc(p, k, 1024u << (k % 4))));
  for (int r = 0; r < 200; r++) {
    void *t = test_live_sites_alloc(p, 16 + r % 8, 512);
    ASSERT(t);
    ASSERT_OK(gpb_free(p, t));
  }
  gpb_attach_t *a;
  ASSERT_OK(gpb_attach_open(name, &a));
  /* The keyframe it found may be older than the ring reaches back (they
   * are rate limited); its request is answered at the next allocation. */
  gpb_stats_t ps;
  for (int i = 0; i < 1000; i++) {
    ASSERT(gpb_attach_poll(a) >= 0);
    ASSERT_OK(gpb_pool_stats(p, &ps));
    if (gpb_model_seq(gpb_attach_model(a)) == ps.seq) break;
    void *t = test_live_sites_alloc(p, 30, 512);
    ASSERT(t);
    ASSERT_OK(gpb_free(p, t));
    usleep(2000);
  }
  ASSERT_U64_EQ(gpb_model_seq(gpb_attach_model(a)), ps.seq);
  test_site_check_t c = {p, a, 0};
  ASSERT_OK(gpb_model_visit(gpb_attach_model(a), test_check_site, &c));
  ASSERT_EQ(c.used, 16);
  for (int k = 0; k < 16; k++) ASSERT_OK(gpb_free(p, keep[k]));
  gpb_attach_close(a);
  gpb_pool_destroy(p);
  printf("late: 16 live blocks from a keyframe, each with its site\n");
}

/* A full table: the first sites have texts, the later ones none; every
 * event still names its site, and the pool allocates on. */
static void test_full(void) {
  char name[64];
  seg_name(name, sizeof name, "full");
  setenv("GPB_PUBLISH_SITES", "1", 1); /* raised to the least, 8 KiB */
  gpb_pool_t *p = make_pool(name, GPB_CFG_CALLSITES_DEPTH(8));
  unsetenv("GPB_PUBLISH_SITES");
  gpb_attach_t *a;
  ASSERT_OK(gpb_attach_open(name, &a));
  evlog_t *log = calloc(1, sizeof *log);
  ASSERT_OK(gpb_attach_set_hook(a, log_hook, log));
  void *v[TEST_NSITES];
  for (int k = 0; k < TEST_NSITES; k++)
    ASSERT((v[k] = test_live_sites_alloc(p, k, 4096)));
  ASSERT(gpb_attach_poll(a) > 0);
  ASSERT_EQ(log->n, TEST_NSITES);
  int with = 0, without = 0;
  for (int i = 0; i < log->n; i++) {
    uint32_t s = log->ev[i].site;
    ASSERT(s != 0);
    if (gpb_attach_site(a, s)) {
      ASSERT_EQ(without, 0); /* texts stop, they do not skip */
      same_text(p, a, s);
      with++;
    } else {
      without++;
    }
  }
  ASSERT(with > 0 && without > 0);
  for (int k = 0; k < TEST_NSITES; k++) ASSERT_OK(gpb_free(p, v[k]));
  ASSERT_OK(gpb_pool_check(p));
  ASSERT(gpb_attach_poll(a) > 0);
  gpb_attach_close(a);
  free(log);
  gpb_pool_destroy(p);
  printf("full table: %d sites with texts, %d without; the pool went on\n",
         with, without);
}

/* Version 1: the same layout without a table. */
static void test_v1(void) {
  char name[64];
  seg_name(name, sizeof name, "v1");
  gpb_pool_t *p = make_pool(name, 0);
  void *x;
  ASSERT_OK(gpb_alloc(p, 4096, &x));
  size_t size;
  char *m = seg_map(name, &size);
  uint32_t v1 = 1;
  memcpy(m + OFF_VERSION, &v1, sizeof v1);
  gpb_attach_t *a;
  ASSERT_OK(gpb_attach_open(name, &a));
  ASSERT(gpb_attach_poll(a) >= 0);
  ASSERT_OK(gpb_free(p, x));
  ASSERT(gpb_attach_poll(a) > 0);
  gpb_attach_close(a);
  munmap(m, size);
  gpb_pool_destroy(p);

  /* A version 1 segment with a site table is not one. */
  p = make_pool(name, GPB_CFG_CALLSITES);
  m = seg_map(name, &size);
  memcpy(m + OFF_VERSION, &v1, sizeof v1);
  ASSERT_ERR(gpb_attach_open(name, &a), GPB_EFORMAT);
  ASSERT(strstr(gpb_last_error_detail(), "site table"));
  munmap(m, size);
  gpb_pool_destroy(p);
  printf("version 1: reads; with a site table: refused\n");
}

/* Opens a reader on a corrupted segment: it must refuse with `what` in
 * the detail. */
static void refused(const char *name, const char *what) {
  gpb_attach_t *a;
  ASSERT_ERR(gpb_attach_open(name, &a), GPB_EFORMAT);
  if (!strstr(gpb_last_error_detail(), what))
    FAILF("expected '%s' in: %s", what, gpb_last_error_detail());
}

static void test_hostile(void) {
  char name[64];
  seg_name(name, sizeof name, "hostile");
  gpb_pool_t *p = make_pool(name, GPB_CFG_CALLSITES);
  void *x = test_live_sites_alloc(p, 0, 4096);
  void *y = test_live_sites_alloc(p, 1, 4096);
  ASSERT(x && y);
  size_t size;
  char *m = seg_map(name, &size);
  uint64_t off, tsize;
  memcpy(&off, m + OFF_SITES_OFF, sizeof off);
  memcpy(&tsize, m + OFF_SITES_SIZE, sizeof tsize);
  ASSERT(off > 0 && off + tsize == size);
  char *e1 = m + off;
  uint32_t len1, id1, len2, id2;
  memcpy(&len1, e1, 4);
  memcpy(&id1, e1 + 4, 4);
  char *e2 = e1 + 8 + ((len1 + 7) & ~7u);
  memcpy(&len2, e2, 4);
  memcpy(&id2, e2 + 4, 4);
  ASSERT(len1 > 0 && len2 > 0 && id2 > id1);
  char save[16384];
  ASSERT(e2 + 8 + len2 - e1 <= (long)sizeof save);
  memcpy(save, e1, (size_t)(e2 + 8 + len2 - e1));
#define RESTORE() memcpy(e1, save, (size_t)(e2 + 8 + len2 - e1))

  uint32_t bad = 0x7fffffff; /* past the table */
  memcpy(e2, &bad, 4);
  refused(name, "runs past the table");
  RESTORE();
  bad = (uint32_t)tsize; /* just past what is left */
  memcpy(e2, &bad, 4);
  refused(name, "runs past the table");
  RESTORE();
  memcpy(e2 + 4, &id1, 4); /* the same id again */
  refused(name, "ids must grow");
  RESTORE();
  bad = 0;
  memcpy(e1 + 4, &bad, 4); /* id 0 */
  refused(name, "ids must grow");
  RESTORE();
  e2[8 + len2 / 2] = 0; /* a NUL in a text */
  refused(name, "NUL");
  RESTORE();
  uint64_t odd = tsize + 4;
  memcpy(m + OFF_SITES_SIZE, &odd, sizeof odd);
  refused(name, "site table");
  memcpy(m + OFF_SITES_SIZE, &tsize, sizeof tsize);

  /* A reader attached first: a bad entry written later stops it at its
   * next poll. */
  gpb_attach_t *a;
  ASSERT_OK(gpb_attach_open(name, &a));
  ASSERT(gpb_attach_poll(a) >= 0);
  same_text(p, a, id2);
  char *e3 = e2 + 8 + ((len2 + 7) & ~7u);
  uint32_t three[3] = {4, id2, 0x41414141};
  memcpy(e3 + 4, &three[1], 8);
  __atomic_store_n((uint32_t *)(void *)e3, three[0], __ATOMIC_RELEASE);
  ASSERT_ERR(gpb_attach_poll(a), GPB_EFORMAT);
  ASSERT(strstr(gpb_last_error_detail(), "ids must grow"));
  ASSERT(gpb_attach_poll(a) < 0); /* and stays stopped */
  gpb_attach_close(a);
  RESTORE();
  memset(e3, 0, 12);
  munmap(m, size);
  ASSERT_OK(gpb_free(p, x));
  ASSERT_OK(gpb_free(p, y));
  gpb_pool_destroy(p);
  printf("hostile tables: refused with a reason, no crash\n");
}

int main(void) {
  signal(SIGALRM, on_alarm);
  alarm(60);
  test_from_start();
  test_late();
  test_full();
  test_v1();
  test_hostile();
  printf("ok\n");
  return 0;
}
