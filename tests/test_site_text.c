/* SPDX-License-Identifier: MIT */
/*
 * test_site_text.c: call sites a framework gives (gpb_pool_site_intern,
 * gpb_alloc_site), as PyTorch's front end gives Python stacks. One key
 * is one site, the same id every time; its frames read back with the
 * file, line and function split out; allocations and their events carry
 * it, and a trace writes its text and reads it back; C frames a framework
 * unwound ("MODULE+0xOFF [SYMBOL]") split into module, offset and
 * symbol, beside its Python frames; a pool without call
 * sites gives 0 and allocates; a site the pool never gave is refused.
 */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *py = "/srv/app/model.py:216 forward;"
                        "/srv/app/train.py:40 step;train.py:9 <module>";

static void check_frames(gpb_pool_t *p, uint32_t site) {
  gpb_frame_t fr[4];
  uint32_t n = 0;
  ASSERT_OK(gpb_pool_site(p, site, fr, 4, &n));
  ASSERT_EQ(n, 3);
  ASSERT(!strcmp(fr[0].module, "/srv/app/model.py"));
  ASSERT_U64_EQ(fr[0].offset, 216);
  ASSERT(!strcmp(fr[0].symbol, "forward"));
  ASSERT_U64_EQ(fr[0].pc, 0);
  ASSERT(!strcmp(fr[2].module, "train.py") && !strcmp(fr[2].symbol, "<module>"));
  char text[256];
  ASSERT(gpb_pool_site_text(p, site, text, sizeof text) > 0);
  ASSERT(!strcmp(text, py));
}

/* C++ frames, then Python's, as enable(stacks="all") gives them. */
static void check_mixed(gpb_pool_t *p) {
  static const char *mixed = "/t/lib/libc10_cuda.so+0x1a2b _ZN3c104cuda1fEv;"
                             "/t/lib/libtorch_cpu.so+0x40;"
                             "/srv/app/model.py:216 forward";
  uint32_t site = 0, n = 0;
  gpb_frame_t fr[4];
  ASSERT_OK(gpb_pool_site_intern(p, 99, mixed, &site));
  ASSERT_OK(gpb_pool_site(p, site, fr, 4, &n));
  ASSERT_EQ(n, 3);
  ASSERT(!strcmp(fr[0].module, "/t/lib/libc10_cuda.so"));
  ASSERT_U64_EQ(fr[0].offset, 0x1a2b);
  ASSERT(!strcmp(fr[0].symbol, "_ZN3c104cuda1fEv"));
  ASSERT(!strcmp(fr[1].module, "/t/lib/libtorch_cpu.so") && !*fr[1].symbol);
  ASSERT_U64_EQ(fr[1].offset, 0x40);
  ASSERT(!strcmp(fr[2].module, "/srv/app/model.py"));
  ASSERT_U64_EQ(fr[2].offset, 216);
}

static void last_site(const gpb_event_t *ev, void *user) {
  if (ev->type == GPB_EV_ALLOC) *(uint32_t *)user = ev->site;
}

int main(void) {
  char path[] = "/tmp/gpb-site-text-XXXXXX";
  int fd = mkstemp(path);
  ASSERT(fd >= 0);
  close(fd);
  gpb_config_t c;
  gpb_config_init(&c);
  c.backend = GPB_BACKEND_VIRTUAL;
  c.pool_size = 1 << 20;
  c.flags = GPB_CFG_NO_ENV | GPB_CFG_CALLSITES;
  c.trace_path = path;
  gpb_pool_t *p;
  ASSERT_OK(gpb_pool_create(&c, &p));
  uint32_t a = 0, b = 0, again = 0, seen = 0;
  ASSERT_OK(gpb_pool_site_intern(p, 42, py, &a));
  ASSERT_OK(gpb_pool_site_intern(p, 7, "other.py:1 f", &b));
  ASSERT_OK(gpb_pool_site_intern(p, 42, "ignored: the key is known", &again));
  ASSERT(a != 0 && b != 0 && a != b && again == a);
  check_frames(p, a);
  check_mixed(p);
  ASSERT_OK(gpb_pool_set_hook(p, last_site, &seen));
  void *x, *y;
  ASSERT_OK(gpb_alloc_site(p, 1000, 0, GPB_TAG_TORCH, NULL, a, &x));
  ASSERT_EQ(seen, a);
  ASSERT_OK(gpb_alloc_site(p, 512, 0, 0, NULL, 0, &y)); /* unknown */
  ASSERT_EQ(seen, 0);
  ASSERT_ERR(gpb_alloc_site(p, 512, 0, 0, NULL, 999, &y), GPB_EINVAL);
  ASSERT_ERR(gpb_pool_site_intern(p, 1, NULL, &b), GPB_EINVAL);
  ASSERT_OK(gpb_pool_check(p));
  ASSERT_OK(gpb_free(p, x));
  gpb_pool_destroy(p); /* flushes the trace */

  /* The trace names the site with its text, before the op that uses it. */
  gpb_trace_reader_t *tr;
  gpb_trace_op_t op;
  ASSERT_OK(gpb_trace_open(path, &tr));
  ASSERT_EQ(gpb_trace_next(tr, &op), 1);
  ASSERT_EQ(op.op, GPB_OP_ALLOC);
  ASSERT_EQ(op.site, a);
  ASSERT(gpb_trace_site(tr, a) && !strcmp(gpb_trace_site(tr, a), py));
  gpb_trace_close(tr);
  unlink(path);

  /* Without call sites: id 0, and the allocation goes on as ever. */
  c.flags = GPB_CFG_NO_ENV;
  c.trace_path = NULL;
  ASSERT_OK(gpb_pool_create(&c, &p));
  ASSERT_OK(gpb_pool_site_intern(p, 42, py, &a));
  ASSERT_EQ(a, 0);
  ASSERT_OK(gpb_alloc_site(p, 1000, 0, 0, NULL, a, &x));
  ASSERT_ERR(gpb_alloc_site(p, 1000, 0, 0, NULL, 1, &y), GPB_EINVAL);
  gpb_pool_destroy(p);
  printf("test_site_text: ok\n");
  return 0;
}
