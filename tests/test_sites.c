/* SPDX-License-Identifier: MIT */
/*
 * test_sites.c: call sites (GPB_CFG_CALLSITES, GPB_CALLSITES). Two
 * functions of this test allocate from a virtual pool: each must get its
 * own site id, the same id every time, carried by ALLOC, FREE and FAIL
 * events and by block visits, and resolved by dladdr to this program
 * and (it is linked with -rdynamic) to the function's name. Deeper
 * stacks name the caller too; arenas and threads share one table; the
 * environment turns it on; a pool without it pays nothing and says so.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXEV 256

typedef struct evlog {
  gpb_event_t ev[MAXEV];
  int n;
} evlog_t;

static void log_event(const gpb_event_t *ev, void *user) {
  evlog_t *l = user;
  if (ev->type == GPB_EV_SPLIT || ev->type == GPB_EV_MERGE) return;
  if (l->n < MAXEV) l->ev[l->n++] = *ev;
}

/* The two call sites. Exported (not static) so that -rdynamic puts their
 * names where dladdr finds them; noinline so each is a frame. */
__attribute__((noinline)) void *test_sites_from_a(gpb_pool_t *p, size_t n) {
  void *ptr = NULL;
  int rc = gpb_alloc(p, n, &ptr);
  __asm__ volatile("" ::: "memory"); /* keep the call out of tail position */
  return rc ? NULL : ptr;
}

__attribute__((noinline)) void *test_sites_from_b(gpb_pool_t *p, size_t n) {
  void *ptr = NULL;
  int rc = gpb_alloc_ex(p, n, 0, 3, NULL, &ptr);
  __asm__ volatile("" ::: "memory");
  return rc ? NULL : ptr;
}

/* A caller of from_a, for stacks of depth 2 and more. */
__attribute__((noinline)) void *test_sites_outer(gpb_pool_t *p, size_t n) {
  void *ptr = test_sites_from_a(p, n);
  __asm__ volatile("" ::: "memory");
  return ptr;
}

static gpb_pool_t *make_pool(unsigned flags, uint32_t arenas) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = 64u << 20;
  cfg.flags = flags | GPB_CFG_NO_ENV;
  cfg.arenas = arenas;
  gpb_pool_t *p;
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  return p;
}

static int frame_is(const gpb_frame_t *f, const char *sym) {
  return !strcmp(f->symbol, sym);
}

typedef struct site_find {
  uint64_t off;
  uint32_t site;
  int hit;
} site_find_t;

static int site_visit(const gpb_block_info_t *b, void *u) {
  site_find_t *f = u;
  if (b->used && b->alloc_offset == f->off) {
    f->site = b->site;
    f->hit = 1;
  }
  return 0;
}

/* The site of the allocation at ptr, through the visitor: what
 * keyframes and the viewer see. */
static uint32_t site_of(gpb_pool_t *p, void *ptr) {
  gpb_pool_info_t info;
  ASSERT_OK(gpb_pool_info(p, &info));
  site_find_t f = {(uint64_t)((char *)ptr - (char *)info.base), 0, 0};
  ASSERT_OK(gpb_pool_visit(p, site_visit, &f));
  ASSERT(f.hit);
  return f.site;
}

/* Depth 1: two sites, stable ids, events and visits carry them. */
static void test_depth1(void) {
  gpb_pool_t *p = make_pool(GPB_CFG_CALLSITES, 1);
  evlog_t *log = calloc(1, sizeof *log);
  ASSERT_OK(gpb_pool_set_hook(p, log_event, log));
  void *a1 = test_sites_from_a(p, 1000);
  void *b1 = test_sites_from_b(p, 5000);
  void *a2 = test_sites_from_a(p, 300);
  ASSERT(a1 && b1 && a2);
  ASSERT_EQ(log->n, 3);
  uint32_t sa = log->ev[0].site, sb = log->ev[1].site;
  ASSERT(sa != 0 && sb != 0 && sa != sb);
  ASSERT_EQ(log->ev[2].site, sa);
  ASSERT_EQ(site_of(p, a1), sa);
  ASSERT_EQ(site_of(p, b1), sb);

  gpb_frame_t fr[4];
  uint32_t n = 0;
  ASSERT_OK(gpb_pool_site(p, sa, fr, 4, &n));
  ASSERT_EQ(n, 1);
  printf("site %u: %s+0x%llx %s\n", sa, fr[0].module,
         (unsigned long long)fr[0].offset, fr[0].symbol);
  ASSERT(strstr(fr[0].module, "test_sites") != NULL);
  ASSERT(fr[0].offset != 0 && fr[0].pc != 0);
  ASSERT(frame_is(&fr[0], "test_sites_from_a"));
  ASSERT_OK(gpb_pool_site(p, sb, fr, 4, &n));
  ASSERT(frame_is(&fr[0], "test_sites_from_b"));
  char text[512];
  int len = gpb_pool_site_text(p, sb, text, sizeof text);
  ASSERT(len > 0 && (size_t)len < sizeof text);
  printf("site %u text: %s\n", sb, text);
  ASSERT(strstr(text, "test_sites+0x") != NULL);
  ASSERT(strstr(text, " test_sites_from_b") != NULL);
  ASSERT_EQ(gpb_pool_site_text(p, sb, NULL, 0), len);
  ASSERT_ERR(gpb_pool_site(p, 999, fr, 4, &n), GPB_ENOTFOUND);
  ASSERT_ERR(gpb_pool_site(p, 0, fr, 4, &n), GPB_ENOTFOUND);

  /* A FREE carries its allocation's site, whoever frees it. */
  ASSERT_OK(gpb_free(p, b1));
  ASSERT_EQ(log->ev[3].type, GPB_EV_FREE);
  ASSERT_EQ(log->ev[3].site, sb);
  /* A FAIL carries the caller's. */
  ASSERT(test_sites_from_b(p, 1u << 30) == NULL);
  ASSERT_EQ(log->ev[4].type, GPB_EV_FAIL);
  ASSERT_EQ(log->ev[4].site, sb);
  ASSERT_OK(gpb_pool_check(p));
  gpb_pool_destroy(p);
  free(log);
}

/* Depth 4: the first frame is the allocating function, the next its
 * caller; from_a called from two places makes two sites. */
static void test_deep(void) {
  gpb_pool_t *p = make_pool(GPB_CFG_CALLSITES_DEPTH(4), 1);
  evlog_t *log = calloc(1, sizeof *log);
  ASSERT_OK(gpb_pool_set_hook(p, log_event, log));
  /* One loop: the whole stack repeats, down to this function's line.
   * A volatile count, so that no build unrolls it into two call lines
   * (TSan's -O1 did: its second pass made two more sites). */
  volatile int reps = 2;
  for (int i = 0; i < reps; i++) {
    ASSERT(test_sites_outer(p, 100));
    ASSERT(test_sites_from_a(p, 100));
  }
  ASSERT_EQ(log->n, 4);
  uint32_t s1 = log->ev[0].site, s2 = log->ev[1].site;
  ASSERT(s1 && s2 && s1 != s2);
  ASSERT_EQ(log->ev[2].site, s1);
  ASSERT_EQ(log->ev[3].site, s2);
  gpb_frame_t fr[8];
  uint32_t n = 0;
  ASSERT_OK(gpb_pool_site(p, s1, fr, 8, &n));
  ASSERT(n >= 2 && n <= 4);
  ASSERT(frame_is(&fr[0], "test_sites_from_a"));
  ASSERT(frame_is(&fr[1], "test_sites_outer"));
  ASSERT_OK(gpb_pool_site(p, s2, fr, 8, &n));
  ASSERT(frame_is(&fr[0], "test_sites_from_a"));
  ASSERT(!frame_is(&fr[1], "test_sites_outer"));
  /* Counting only. */
  uint32_t m = 0;
  ASSERT_OK(gpb_pool_site(p, s1, NULL, 0, &m));
  ASSERT(m >= 2);
  gpb_pool_destroy(p);
  free(log);
}

/* Off (the default): every site is 0 and there is no table. */
static void test_off(void) {
  gpb_pool_t *p = make_pool(0, 1);
  evlog_t *log = calloc(1, sizeof *log);
  ASSERT_OK(gpb_pool_set_hook(p, log_event, log));
  void *a = test_sites_from_a(p, 100);
  ASSERT(a);
  ASSERT_EQ(log->ev[0].site, 0);
  ASSERT_EQ(site_of(p, a), 0);
  gpb_frame_t fr[1];
  ASSERT_ERR(gpb_pool_site(p, 1, fr, 1, NULL), GPB_ENOTFOUND);
  gpb_pool_destroy(p);
  free(log);
}

/* GPB_CALLSITES=DEPTH, unless GPB_CFG_NO_ENV; bad values are refused. */
static void test_env(void) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = 1u << 20;
  gpb_pool_t *p;
  setenv("GPB_CALLSITES", "2", 1);
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  void *a = test_sites_outer(p, 100);
  uint32_t s = site_of(p, a);
  ASSERT(s != 0);
  gpb_frame_t fr[4];
  uint32_t n = 0;
  ASSERT_OK(gpb_pool_site(p, s, fr, 4, &n));
  ASSERT_EQ(n, 2);
  ASSERT(frame_is(&fr[1], "test_sites_outer"));
  gpb_pool_destroy(p);
  cfg.flags = GPB_CFG_NO_ENV;
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  ASSERT_EQ(site_of(p, test_sites_from_a(p, 100)), 0);
  gpb_pool_destroy(p);
  cfg.flags = 0;
  setenv("GPB_CALLSITES", "0", 1);
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  ASSERT_EQ(site_of(p, test_sites_from_a(p, 100)), 0);
  gpb_pool_destroy(p);
  setenv("GPB_CALLSITES", "65", 1);
  ASSERT_ERR(gpb_pool_create(&cfg, &p), GPB_EINVAL);
  ASSERT(strstr(gpb_last_error_detail(), "GPB_CALLSITES") != NULL);
  setenv("GPB_CALLSITES", "x", 1);
  ASSERT_ERR(gpb_pool_create(&cfg, &p), GPB_EINVAL);
  unsetenv("GPB_CALLSITES");
}

/* Arenas: the site is found before any lock, so arena allocations carry
 * it too; many threads share the table and agree on the ids. */
typedef struct thr {
  gpb_pool_t *p;
  uint32_t sa, sb;
} thr_t;

static void *thr_main(void *u) {
  thr_t *t = u;
  for (int i = 0; i < 200; i++) {
    void *a = test_sites_from_a(t->p, 256 + (size_t)i);
    void *b = test_sites_from_b(t->p, 512);
    ASSERT(a && b);
    uint32_t sa = site_of(t->p, a), sb = site_of(t->p, b);
    if (i == 0) {
      t->sa = sa;
      t->sb = sb;
    }
    ASSERT(sa == t->sa && sb == t->sb);
    ASSERT_OK(gpb_free(t->p, a));
    ASSERT_OK(gpb_free(t->p, b));
  }
  return NULL;
}

static void test_threads(void) {
  gpb_pool_t *p = make_pool(GPB_CFG_CALLSITES | GPB_CFG_ARENAS_EAGER, 4);
  thr_t t[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    t[i].p = p;
    ASSERT_EQ(pthread_create(&th[i], NULL, thr_main, &t[i]), 0);
  }
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  for (int i = 1; i < 4; i++) {
    ASSERT_EQ(t[i].sa, t[0].sa);
    ASSERT_EQ(t[i].sb, t[0].sb);
  }
  ASSERT(t[0].sa && t[0].sb && t[0].sa != t[0].sb);
  ASSERT_OK(gpb_pool_check(p));
  gpb_pool_destroy(p);
}

/* A pool's own trace carries its sites: each defined before the first
 * op that names it, with the text gpb_pool_site_text gives. */
static void test_trace(void) {
  char path[] = "/tmp/gpb-test-sites-XXXXXX";
  int fd = mkstemp(path);
  ASSERT(fd >= 0);
  close(fd);
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = 1u << 20;
  cfg.flags = GPB_CFG_CALLSITES | GPB_CFG_NO_ENV;
  cfg.trace_path = path;
  gpb_pool_t *p;
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  void *a = test_sites_from_a(p, 100);
  void *b = test_sites_from_b(p, 200);
  ASSERT(test_sites_from_b(p, 1u << 30) == NULL);
  uint32_t sa = site_of(p, a), sb = site_of(p, b);
  char ta[512], tb[512];
  ASSERT(gpb_pool_site_text(p, sa, ta, sizeof ta) > 0);
  ASSERT(gpb_pool_site_text(p, sb, tb, sizeof tb) > 0);
  ASSERT_OK(gpb_free(p, a));
  ASSERT_OK(gpb_free(p, b));
  gpb_pool_destroy(p);

  gpb_trace_reader_t *r;
  ASSERT_OK(gpb_trace_open(path, &r));
  gpb_trace_op_t o;
  uint32_t want[6] = {sa, sb, sb, sb, sa, sb}; /* fail: alloc and free */
  for (int i = 0; i < 6; i++) {
    ASSERT_EQ(gpb_trace_next(r, &o), 1);
    ASSERT_EQ(o.site, want[i]);
  }
  ASSERT_EQ(gpb_trace_next(r, &o), 0);
  ASSERT(!strcmp(gpb_trace_site(r, sa), ta));
  ASSERT(!strcmp(gpb_trace_site(r, sb), tb));
  ASSERT(strstr(ta, "test_sites_from_a") != NULL);
  gpb_trace_close(r);
  unlink(path);
}

int main(void) {
  test_depth1();
  test_deep();
  test_off();
  test_env();
  test_threads();
  test_trace();
  printf("ok\n");
  return 0;
}
