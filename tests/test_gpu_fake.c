/* SPDX-License-Identifier: MIT */
/*
 * test_gpu_fake.c: stream-ordered frees, device switching and the PyTorch
 * entry points against the fake CUDA runtime (fake_cudart.c), so their
 * logic is tested on every machine, GPU or not.
 *
 * A hook feeds every event of the pool into a block-map model and counts
 * FAILs, so the event stream must stay valid through async frees, reuse
 * and reaping. A seeded stress run keeps a shadow of the pending frees and
 * checks the one rule that matters: a block freed on stream s is handed
 * to another stream only after the work queued on s before the free is
 * done.
 */
#include "testutil.h"

#include <unistd.h>
#include "fake_cudart.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>

typedef struct watch {
  gpb_model_t *model;
  uint64_t fails, events;
} watch_t;

static void on_event(const gpb_event_t *ev, void *user) {
  watch_t *w = user;
  w->events++;
  if (ev->type == GPB_EV_FAIL) w->fails++;
  int rc = gpb_model_apply(w->model, ev);
  if (rc) FAILF("model refused event %" PRIu64 " (%s): %s", ev->seq,
                gpb_event_type_name(ev->type), gpb_last_error_detail());
}

static unsigned make_flags; /* added to the next pools' cfg.flags */

static gpb_pool_t *make_pool_arenas(int device, size_t size,
                                    gpb_policy_t policy, uint32_t arenas,
                                    watch_t *w) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.flags = GPB_CFG_NO_ENV | GPB_CFG_ARENAS_EAGER | make_flags;
  cfg.backend = GPB_BACKEND_DEVICE;
  cfg.device = device;
  cfg.pool_size = size;
  cfg.min_block = 256;
  cfg.policy = policy;
  cfg.arenas = arenas;
  gpb_pool_t *p;
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  gpb_pool_info_t info;
  ASSERT_OK(gpb_pool_info(p, &info));
  ASSERT_OK(gpb_model_create(info.managed_size, info.min_block, &w->model));
  w->fails = w->events = 0;
  ASSERT_OK(gpb_pool_set_hook(p, on_event, w));
  return p;
}

static gpb_pool_t *make_pool(int device, size_t size, gpb_policy_t policy,
                             watch_t *w) {
  return make_pool_arenas(device, size, policy, 1, w);
}

/* Pool and model agree, invariants hold, and the caller's device (1) is
 * still current. */
static void check_pool(gpb_pool_t *p, watch_t *w) {
  ASSERT_OK(gpb_pool_check(p));
  ASSERT_OK(gpb_model_check(w->model));
  gpb_stats_t a, b;
  ASSERT_OK(gpb_pool_stats(p, &a));
  ASSERT_OK(gpb_model_stats(w->model, &b));
  ASSERT_U64_EQ(a.seq, b.seq);
  ASSERT_U64_EQ(a.live_allocs, b.live_allocs);
  ASSERT_U64_EQ(a.free_bytes, b.free_bytes);
  ASSERT_U64_EQ(a.requested_bytes, b.requested_bytes);
  ASSERT_EQ(fake_current_device(), 1);
  ASSERT_U64_EQ(fake_counts.wrong_device, 0);
}

static void finish_pool(gpb_pool_t *p, watch_t *w) {
  gpb_pool_destroy(p);
  gpb_model_destroy(w->model);
}

static void test_basic(void) {
  watch_t w;
  gpb_pool_t *p = make_pool(0, 1 << 20, GPB_POLICY_BUDDY, &w);
  void *s0 = fake_stream_create(0), *s1 = fake_stream_create(0);
  gpb_stats_t st;
  void *a, *b, *c;

  ASSERT_OK(gpb_alloc_ex(p, 4000, 0, 3, s0, &a));
  fake_stream_enqueue(s0); /* a kernel using a */
  ASSERT_OK(gpb_free_async(p, a, s0));
  ASSERT_OK(gpb_pool_stats(p, &st));
  ASSERT_U64_EQ(st.live_allocs, 1); /* still allocated until s0 is done */
  ASSERT_U64_EQ(st.frees, 0);
  ASSERT_ERR(gpb_free(p, a), GPB_EDOUBLEFREE);
  ASSERT_ERR(gpb_free_async(p, a, s0), GPB_EDOUBLEFREE);
  ASSERT_ERR(gpb_free_async(p, (char *)a + 256, s0), GPB_EINTERIOR);
  check_pool(p, &w);

  /* Same stream, same order: reused at once, without waiting. */
  uint64_t syncs = fake_counts.syncs;
  ASSERT_OK(gpb_alloc_ex(p, 3000, 0, 5, s0, &b));
  ASSERT(b == a);
  ASSERT_U64_EQ(fake_counts.syncs, syncs);
  ASSERT_OK(gpb_pool_stats(p, &st));
  ASSERT_U64_EQ(st.allocs, 2);
  ASSERT_U64_EQ(st.frees, 1);
  ASSERT_U64_EQ(st.requested_bytes, 3000);
  ASSERT_U64_EQ(st.tag_bytes[5], 4096);
  ASSERT_U64_EQ(st.tag_bytes[3], 0);
  size_t us;
  ASSERT_OK(gpb_usable_size(p, b, &us));
  ASSERT_U64_EQ(us, 4096);
  check_pool(p, &w);

  /* Another stream must not get it while s0's work runs. */
  fake_stream_enqueue(s0);
  ASSERT_OK(gpb_free_async(p, b, s0));
  ASSERT_OK(gpb_alloc_ex(p, 4096, 0, 0, s1, &c));
  ASSERT(c != b);
  /* A different size on s0 does not take it either (exact-units rule). */
  void *d;
  ASSERT_OK(gpb_alloc_ex(p, 8192, 0, 0, s0, &d));
  ASSERT(d != b);
  /* Once the work is done, the next calls reap it: FREE goes out then. */
  fake_stream_finish(s0);
  ASSERT_OK(gpb_free(p, d));
  ASSERT_OK(gpb_pool_stats(p, &st));
  ASSERT_U64_EQ(st.live_allocs, 1);
  ASSERT_OK(gpb_free_async(p, c, s1)); /* s1 has no work: done at once */
  ASSERT_OK(gpb_pool_drain(p));
  ASSERT_OK(gpb_pool_stats(p, &st));
  ASSERT_U64_EQ(st.live_allocs, 0);
  ASSERT_U64_EQ(st.free_bytes, 1 << 20);
  ASSERT_U64_EQ(w.fails, 0);
  check_pool(p, &w);

  /* A stream of another device is refused; the block stays live. */
  void *other = fake_stream_create(1);
  ASSERT_OK(gpb_alloc_ex(p, 100, 0, 0, NULL, &a));
  ASSERT_ERR(gpb_free_async(p, a, other), GPB_EINVAL);
  ASSERT_OK(gpb_pool_stats(p, &st));
  ASSERT_U64_EQ(st.live_allocs, 1);
  /* NULL means the pool device's default stream, whatever is current. */
  fake_stream_enqueue(fake_stream_default(0));
  ASSERT_OK(gpb_free_async(p, a, NULL));
  ASSERT_OK(gpb_pool_stats(p, &st));
  ASSERT_U64_EQ(st.live_allocs, 1);
  ASSERT_OK(gpb_pool_drain(p));
  ASSERT_OK(gpb_pool_stats(p, &st));
  ASSERT_U64_EQ(st.live_allocs, 0);
  ASSERT_U64_EQ(fake_stream_done(fake_stream_default(0)), 1);
  /* Misuse through the async path is classified like gpb_free's. */
  ASSERT_ERR(gpb_free_async(p, a, s0), GPB_EDOUBLEFREE);
  ASSERT_ERR(gpb_free_async(p, (char *)a - 1, s0), GPB_EFOREIGN);
  check_pool(p, &w);
  finish_pool(p, &w);
}

/* GPB_CFG_SOLO_STREAM: async frees on the only stream return at once,
 * with no event; a second stream gets a fence on the first, waits for it
 * (never the host) until it completes, and async frees take events from
 * then on. Not with arenas. */
static void test_solo(void) {
  watch_t w;
  make_flags = GPB_CFG_SOLO_STREAM;
  gpb_pool_t *p = make_pool(0, 1 << 20, GPB_POLICY_BESTFIT, &w);
  void *s0 = fake_stream_create(0), *s1 = fake_stream_create(0);
  gpb_stats_t st;
  void *a, *b, *c, *d;
  uint64_t records = fake_counts.records, syncs = fake_counts.syncs;
  ASSERT_OK(gpb_alloc_ex(p, 4000, 0, 0, s0, &a));
  fake_stream_enqueue(s0);
  ASSERT_OK(gpb_free_async(p, a, s0));
  ASSERT_OK(gpb_pool_stats(p, &st));
  ASSERT_U64_EQ(st.live_allocs, 0);
  ASSERT_U64_EQ(st.frees, 1);
  ASSERT_U64_EQ(fake_counts.records, records); /* no event */
  ASSERT_ERR(gpb_free_async(p, a, s0), GPB_EDOUBLEFREE);
  ASSERT_OK(gpb_alloc_ex(p, 4000, 0, 0, s0, &b));
  ASSERT(b == a); /* same stream: its work is ordered after the free */
  check_pool(p, &w);

  /* A second stream: one fence on s0 at its work so far, s1 waits on it. */
  uint64_t ticket = fake_stream_enqueue(s0);
  uint64_t waits = fake_counts.waits;
  ASSERT_OK(gpb_alloc_ex(p, 4000, 0, 0, s1, &c));
  ASSERT_U64_EQ(fake_counts.records, records + 1);
  ASSERT_U64_EQ(fake_counts.waits, waits + 1);
  ASSERT(fake_counts.wait_stream == s1 && fake_counts.wait_on == s0);
  ASSERT_U64_EQ(fake_counts.wait_ticket, ticket);
  ASSERT_U64_EQ(fake_counts.syncs, syncs); /* the host never waited */
  /* From now on async frees are stream-ordered. */
  ASSERT_OK(gpb_free_async(p, b, s0));
  ASSERT_OK(gpb_pool_stats(p, &st));
  ASSERT_U64_EQ(st.live_allocs, 2);
  ASSERT_OK(gpb_alloc_ex(p, 100, 0, 0, s1, &d)); /* fence still running */
  ASSERT_U64_EQ(fake_counts.waits, waits + 2);
  fake_stream_finish(s0);
  ASSERT_OK(gpb_free_async(p, d, s1));
  ASSERT_OK(gpb_alloc_ex(p, 100, 0, 0, s1, &d)); /* done: dropped, no wait */
  ASSERT_U64_EQ(fake_counts.waits, waits + 2);
  ASSERT_OK(gpb_free(p, d));
  ASSERT_OK(gpb_free(p, c));
  ASSERT_OK(gpb_pool_drain(p));
  ASSERT_OK(gpb_pool_stats(p, &st));
  ASSERT_U64_EQ(st.live_allocs, 0);
  check_pool(p, &w);
  finish_pool(p, &w);

  /* With arenas the flag does nothing: the free waits for s0's work. */
  p = make_pool_arenas(0, 4 << 20, GPB_POLICY_BUDDY, 2, &w);
  ASSERT_OK(gpb_alloc_ex(p, 4000, 0, 0, s0, &a));
  fake_stream_enqueue(s0);
  ASSERT_OK(gpb_free_async(p, a, s0));
  ASSERT_OK(gpb_pool_stats(p, &st));
  ASSERT_U64_EQ(st.live_allocs, 1);
  fake_stream_finish(s0);
  ASSERT_OK(gpb_pool_drain(p));
  finish_pool(p, &w);
  make_flags = 0;
}

/* Out of memory: done frees come back first; waiting is the last resort,
 * and the FAILs of retried attempts are not emitted. */
static void test_oom(void) {
  watch_t w;
  gpb_pool_t *p = make_pool(0, 1 << 20, GPB_POLICY_BUDDY, &w);
  void *s0 = fake_stream_create(0), *s1 = fake_stream_create(0);
  void *x, *y, *z;

  ASSERT_OK(gpb_alloc_ex(p, 1 << 20, 0, 0, s0, &x));
  uint64_t t = fake_stream_enqueue(s0);
  ASSERT_OK(gpb_free_async(p, x, s0));
  uint64_t syncs = fake_counts.syncs;
  ASSERT_OK(gpb_alloc_ex(p, 1 << 20, 0, 0, s1, &y));
  ASSERT(y == x);
  ASSERT_U64_EQ(fake_counts.syncs, syncs + 1); /* the one wait */
  ASSERT(fake_stream_done(s0) >= t);           /* s0's work finished first */
  ASSERT_U64_EQ(w.fails, 0);

  /* Done already: no wait at all. */
  fake_stream_enqueue(s1);
  ASSERT_OK(gpb_free_async(p, y, s1));
  fake_stream_finish(s1);
  syncs = fake_counts.syncs;
  ASSERT_OK(gpb_alloc_ex(p, 1 << 19, 0, 0, s0, &x));
  ASSERT_U64_EQ(fake_counts.syncs, syncs);
  check_pool(p, &w);

  /* Still out of memory after every pending free returned: one FAIL. */
  ASSERT_OK(gpb_alloc_ex(p, 1 << 19, 0, 0, s0, &y));
  fake_stream_enqueue(s0);
  ASSERT_OK(gpb_free_async(p, x, s0));
  ASSERT_ERR(gpb_alloc_ex(p, 1 << 20, 0, 0, s1, &z), GPB_ENOMEM);
  ASSERT_U64_EQ(w.fails, 1);
  gpb_stats_t st;
  ASSERT_OK(gpb_pool_stats(p, &st));
  ASSERT_U64_EQ(st.live_allocs, 1); /* x came back while trying */
  ASSERT_U64_EQ(st.failures, 1);
  /* Too big is never retried; one FAIL too. */
  fake_stream_enqueue(s0);
  ASSERT_OK(gpb_free_async(p, y, s0));
  ASSERT_ERR(gpb_alloc_ex(p, 2 << 20, 0, 0, s1, &z), GPB_ETOOBIG);
  ASSERT_U64_EQ(w.fails, 2);
  ASSERT_OK(gpb_pool_drain(p));
  check_pool(p, &w);
  finish_pool(p, &w);
}

/* Reaping is bounded per call and every block comes back eventually. */
static void test_reap(void) {
  watch_t w;
  gpb_pool_t *p = make_pool(0, 4 << 20, GPB_POLICY_TRIM, &w);
  enum { NS = 6, NB = 120 };
  void *s[NS], *b[NB];
  for (int i = 0; i < NS; i++) s[i] = fake_stream_create(0);
  for (int i = 0; i < NB; i++) ASSERT_OK(gpb_alloc_ex(p, 1000 + 37 * i, 0, 0, s[i % NS], &b[i]));
  for (int i = 0; i < NB; i++) {
    fake_stream_enqueue(s[i % NS]);
    ASSERT_OK(gpb_free_async(p, b[i], s[i % NS]));
  }
  for (int i = 0; i < NS; i++) fake_stream_finish(s[i]);
  gpb_stats_t st;
  int calls = 0;
  do {
    uint64_t q = fake_counts.queries;
    void *x;
    ASSERT_OK(gpb_alloc_ex(p, 64, 0, 0, NULL, &x));
    ASSERT(fake_counts.queries - q <= 8);
    ASSERT_OK(gpb_free(p, x));
    ASSERT(fake_counts.queries - q <= 16);
    ASSERT_OK(gpb_pool_stats(p, &st));
    ASSERT(++calls < 100);
  } while (st.live_allocs);
  ASSERT_U64_EQ(st.frees, NB + calls);
  /* Events are recycled, not created per free. */
  uint64_t made = fake_counts.event_creates;
  for (int r = 0; r < 5; r++) {
    for (int i = 0; i < 20; i++) {
      ASSERT_OK(gpb_alloc_ex(p, 5000, 0, 0, s[0], &b[i]));
      ASSERT_OK(gpb_free_async(p, b[i], s[0]));
    }
    ASSERT_OK(gpb_pool_drain(p));
  }
  ASSERT(fake_counts.event_creates == made);
  check_pool(p, &w);
  finish_pool(p, &w);
}

/* Seeded stress with a shadow of pending frees. */
typedef struct shadow {
  char *p;
  size_t size;
  void *stream;
  uint64_t ticket; /* pending: work on `stream` up to here */
  int live, pending;
} shadow_t;

static void test_stress(uint64_t *rng) {
  watch_t w;
  static const gpb_policy_t pol[] = {GPB_POLICY_BUDDY, GPB_POLICY_TRIM,
                                     GPB_POLICY_BESTFIT};
  /* Half the runs with arenas: each has its own pending frees. */
  uint32_t arenas = rng_below(rng, 2) ? 4 : 1;
  gpb_pool_t *p = make_pool_arenas(0, 2 << 20,
                                   pol[rng_below(rng, arenas > 1 ? 2 : 3)],
                                   arenas, &w);
  enum { NS = 3, NSH = 200 };
  void *s[NS];
  for (int i = 0; i < NS; i++) s[i] = fake_stream_create(0);
  shadow_t sh[NSH];
  memset(sh, 0, sizeof sh);
  int steps = (int)(20000 * test_scale());
  uint64_t reused = 0, waited0 = fake_counts.syncs;
  for (int step = 0; step < steps; step++) {
    int i = (int)rng_below(rng, NSH);
    uint32_t what = (uint32_t)rng_below(rng, 10);
    if (what == 0) {
      fake_stream_finish(s[rng_below(rng, NS)]);
    } else if (what == 1) {
      fake_stream_enqueue(s[rng_below(rng, NS)]);
    } else if (!sh[i].live) {
      void *st = s[rng_below(rng, NS)];
      size_t size = 1 + rng_below(rng, 1u << (6 + rng_below(rng, 12)));
      void *x;
      int rc = gpb_alloc_ex(p, size, 0, 0, st, &x);
      if (rc == GPB_ENOMEM || rc == GPB_ETOOBIG) continue;
      ASSERT_OK(rc);
      /* Any pending block it overlaps must be of this stream, or done. */
      for (int j = 0; j < NSH; j++) {
        if (!sh[j].pending) continue;
        if ((char *)x < sh[j].p + sh[j].size && sh[j].p < (char *)x + size) {
          if (sh[j].stream != st && fake_stream_done(sh[j].stream) < sh[j].ticket)
            FAILF("step %d: block of a free on stream %p handed to stream %p "
                  "before that stream's work was done", step, sh[j].stream, st);
          if (sh[j].stream == st) reused++;
          sh[j].pending = 0;
        }
      }
      sh[i] = (shadow_t){x, size, st, 0, 1, 0};
    } else if (what < 8) {
      /* Work on the block's stream, then free it there. */
      sh[i].ticket = fake_stream_enqueue(sh[i].stream);
      ASSERT_OK(gpb_free_async(p, sh[i].p, sh[i].stream));
      sh[i].live = 0;
      sh[i].pending = 1;
    } else {
      ASSERT_OK(gpb_free(p, sh[i].p));
      sh[i].live = 0;
    }
    if (step % 997 == 0) check_pool(p, &w);
  }
  for (int i = 0; i < NSH; i++)
    if (sh[i].live) ASSERT_OK(gpb_free(p, sh[i].p));
  ASSERT_OK(gpb_pool_drain(p));
  gpb_stats_t st;
  ASSERT_OK(gpb_pool_stats(p, &st));
  ASSERT_U64_EQ(st.live_allocs, 0);
  ASSERT_U64_EQ(st.allocs, st.frees);
  ASSERT_U64_EQ(w.fails, st.failures);
  check_pool(p, &w);
  printf("stress (%u arena(s)): %" PRIu64 " allocs, %" PRIu64 " same-stream "
         "reuses, %" PRIu64 " waits, %" PRIu64 " failures\n", arenas, st.allocs,
         reused,
         fake_counts.syncs - waited0, st.failures);
  finish_pool(p, &w);
}

/* Two pools on one device and one on another, driven from a third
 * current device. */
static void test_devices(void) {
  watch_t w0, w1, w2;
  gpb_pool_t *p0 = make_pool(0, 1 << 20, GPB_POLICY_BUDDY, &w0);
  gpb_pool_t *p1 = make_pool(0, 1 << 20, GPB_POLICY_BUDDY, &w1);
  gpb_pool_t *p2 = make_pool(2, 1 << 20, GPB_POLICY_BUDDY, &w2);
  void *s0 = fake_stream_create(0), *s2 = fake_stream_create(2);
  void *a, *b, *c;
  ASSERT_OK(gpb_alloc_ex(p0, 512, 0, 0, s0, &a));
  ASSERT_OK(gpb_alloc_ex(p1, 512, 0, 0, s0, &b));
  ASSERT_OK(gpb_alloc_ex(p2, 512, 0, 0, s2, &c));
  fake_stream_enqueue(s0);
  fake_stream_enqueue(s2);
  ASSERT_OK(gpb_free_async(p0, a, s0));
  ASSERT_ERR(gpb_free(p1, a), GPB_EFOREIGN);
  ASSERT_OK(gpb_free_async(p1, b, s0));
  ASSERT_ERR(gpb_free_async(p2, c, s0), GPB_EINVAL); /* s0 is on device 0 */
  ASSERT_OK(gpb_free_async(p2, c, s2));
  ASSERT_OK(gpb_pool_drain(p0));
  ASSERT_OK(gpb_pool_drain(p1));
  ASSERT_OK(gpb_pool_drain(p2));
  check_pool(p0, &w0);
  check_pool(p1, &w1);
  check_pool(p2, &w2);
  finish_pool(p0, &w0);
  finish_pool(p1, &w1);
  finish_pool(p2, &w2);
}

/* The trace at path opens, and its first op allocates `size` bytes. */
static void first_op_is_alloc(const char *path, uint64_t size) {
  gpb_trace_reader_t *tr;
  gpb_trace_op_t op;
  ASSERT_OK(gpb_trace_open(path, &tr));
  ASSERT_EQ(gpb_trace_next(tr, &op), 1);
  ASSERT_EQ(op.op, GPB_OP_ALLOC);
  ASSERT_U64_EQ(op.size, size);
  gpb_trace_close(tr);
}

/* The PyTorch entry points: lazy pools per device, env config, counters. */
static void test_torch(void) {
  setenv("GPB_TORCH_POOL_SIZE", "4M", 1);
  setenv("GPB_TORCH_POLICY", "buddy", 1);
  setenv("GPB_TORCH_VMM", "0", 1); /* one plain range; VMM is the default */
  void *s0 = fake_stream_create(0);
  gpb_stats_t st;
  ASSERT_ERR(gpb_torch_stats(0, &st), GPB_ENOTFOUND);
  void *a = gpb_torch_malloc(1000, 0, s0);
  void *b = gpb_torch_malloc(2 << 20, 0, s0);
  ASSERT(a && b);
  ASSERT(gpb_torch_malloc(3 << 20, 0, s0) == NULL); /* 4 MiB pool */
  ASSERT_EQ(fake_current_device(), 1);
  gpb_pool_info_t info;
  ASSERT_OK(gpb_pool_info(gpb_torch_pool(0), &info));
  ASSERT_U64_EQ(info.pool_size, 4 << 20);
  ASSERT_U64_EQ(info.min_block, 512);
  ASSERT_EQ(info.policy, GPB_POLICY_BUDDY);
  ASSERT_EQ(info.device, 0);
  fake_stream_enqueue(s0);
  gpb_torch_free(a, 1000, 0, s0);
  gpb_torch_free(b, 2 << 20, 0, s0);
  gpb_torch_free(NULL, 0, 0, s0);
  ASSERT_OK(gpb_torch_stats(0, &st));
  ASSERT_U64_EQ(st.live_allocs, 0); /* one stream: back at once */
  ASSERT_OK(gpb_torch_drain(0));
  ASSERT_OK(gpb_torch_stats(0, &st));
  uint64_t m, f, fr;
  ASSERT_OK(gpb_torch_calls(0, &m, &f, &fr));
  ASSERT_U64_EQ(m, 2);
  ASSERT_U64_EQ(f, 1);
  ASSERT_U64_EQ(fr, 2);
  ASSERT_U64_EQ(st.allocs, m);
  ASSERT_U64_EQ(st.frees, fr);
  ASSERT_U64_EQ(st.live_allocs, 0);

  /* A percentage of the device's free memory (the fake has 64 MiB). */
  setenv("GPB_TORCH_POOL_SIZE", "50%", 1);
  unsetenv("GPB_TORCH_POLICY");
  /* GPB_TORCH_TRACE=X.gz records device 2 to X.2.gz, compressed. */
  char edir[] = "/tmp/gpb-torch-env-XXXXXX", epath[64];
  ASSERT(mkdtemp(edir));
  snprintf(epath, sizeof epath, "%s/run.trace.gz", edir);
  setenv("GPB_TORCH_TRACE", epath, 1);
  void *c = gpb_torch_malloc(512, 2, NULL);
  ASSERT(c);
  unsetenv("GPB_TORCH_TRACE");
  ASSERT_OK(gpb_torch_trace(2, NULL));
  snprintf(epath, sizeof epath, "%s/run.trace.2.gz", edir);
  FILE *ef = fopen(epath, "rb");
  ASSERT(ef);
  ASSERT(fgetc(ef) == 0x1f && fgetc(ef) == 0x8b); /* gzip's magic */
  fclose(ef);
  first_op_is_alloc(epath, 512);
  ASSERT(unlink(epath) == 0 && rmdir(edir) == 0);
  ASSERT_OK(gpb_pool_info(gpb_torch_pool(2), &info));
  ASSERT_U64_EQ(info.pool_size, 32 << 20);
  ASSERT_EQ(info.policy, GPB_POLICY_BESTFIT); /* the memory-best default */
  /* The OutOfMemoryError text names the request, what is free, the
   * largest free block and the pool. */
  char why[512];
  int n = gpb_torch_explain(2, (size_t)64 << 20, why, sizeof why);
  ASSERT(n > 0 && (size_t)n < sizeof why);
  ASSERT(strstr(why, "cannot allocate 67108864 bytes on device 2"));
  ASSERT(strstr(why, "largest free block"));
  ASSERT(strstr(why, "in the pool of 33554432"));
  ASSERT(gpb_torch_explain(3, 512, why, sizeof why) > 0); /* no pool: says so */
  ASSERT(strstr(why, "device 3 has no pool"));
  ASSERT_ERR(gpb_torch_trace(3, "/dev/null"), GPB_ENOTFOUND);
  char tpath[] = "/tmp/gpb-torch-trace-XXXXXX";
  int tfd = mkstemp(tpath);
  ASSERT(tfd >= 0);
  close(tfd);
  ASSERT_OK(gpb_torch_trace(2, tpath));
  void *t = gpb_torch_malloc(4096, 2, NULL);
  ASSERT(t);
  gpb_torch_free(t, 4096, 2, NULL);
  ASSERT_OK(gpb_torch_drain(2));
  ASSERT_OK(gpb_torch_trace(2, NULL));
  first_op_is_alloc(tpath, 4096);
  unlink(tpath);
  gpb_torch_free(c, 512, 2, NULL);
  ASSERT_OK(gpb_torch_drain(2));

  /* A bad setting: the pool is refused once, then NULL at once. */
  setenv("GPB_TORCH_POOL_SIZE", "150%", 1);
  ASSERT(gpb_torch_malloc(512, 3, NULL) == NULL);
  ASSERT(gpb_torch_malloc(512, 3, NULL) == NULL);
  ASSERT(gpb_torch_pool(3) == NULL);
  ASSERT_OK(gpb_torch_calls(3, &m, &f, &fr));
  ASSERT_U64_EQ(f, 2);
  ASSERT(gpb_torch_malloc(512, -1, NULL) == NULL);
  ASSERT(gpb_torch_malloc(512, 1000, NULL) == NULL);
  ASSERT_ERR(gpb_torch_calls(1000, &m, &f, &fr), GPB_EINVAL);
  ASSERT_EQ(fake_current_device(), 1);
  ASSERT_U64_EQ(fake_counts.wrong_device, 0);
  /* The torch pools live until exit, like PyTorch's allocator. */
}

/* GPB_TORCH_PLAN_CACHE=X, in a child process (the torch pools are the
 * process's, made once): device 1, with X.1 left by an earlier run,
 * follows that plan and records nothing; device 0, with none, records to
 * X.0.trace.gz for gpubuddy.torch to lay out at exit, and stops after
 * GPB_TORCH_PLAN_CACHE_ALLOCS; beside GPB_TORCH_TRACE, or with a bad
 * count, the pool is refused. */
static void test_torch_plan_cache(void) {
  char dir[] = "/tmp/gpb-torch-cache-XXXXXX", base[64], f[96];
  ASSERT(mkdtemp(dir));
  snprintf(base, sizeof base, "%s/run.plan", dir);
  snprintf(f, sizeof f, "%s.1", base);
  FILE *pf = fopen(f, "w");
  ASSERT(pf);
  fputs("gpubuddy-plan 1\n1024 4096\n512 0\n", pf);
  fclose(pf);
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    fake_cuda_setup(6, (size_t)64 << 20); /* no pools yet: a device each */
    fake_set_device(1);
    setenv("GPB_TORCH_POOL_SIZE", "1M", 1);
    setenv("GPB_TORCH_VMM", "0", 1); /* the fake reserves one VMM range */
    setenv("GPB_TORCH_PLAN_CACHE", base, 1);
    void *a = gpb_torch_malloc(1000, 1, NULL), *b = gpb_torch_malloc(512, 1, NULL);
    ASSERT(a && b);
    gpb_plan_info_t pi;
    ASSERT_OK(gpb_pool_plan_info(gpb_torch_pool(1), &pi));
    ASSERT_U64_EQ(pi.entries, 2);
    ASSERT_U64_EQ(pi.placed, 2); /* where the plan said, */
    gpb_pool_info_t info;
    ASSERT_OK(gpb_pool_info(gpb_torch_pool(1), &info));
    ASSERT((char *)a - (char *)info.base == 4096 && b == info.base); /* here */
    snprintf(f, sizeof f, "%s.1.trace.gz", base);
    ASSERT(access(f, F_OK) != 0); /* and nothing recorded */
    /* The recording stops by itself after GPB_TORCH_PLAN_CACHE_ALLOCS. */
    setenv("GPB_TORCH_PLAN_CACHE_ALLOCS", "2", 1);
    for (int i = 0; i < 3; i++) ASSERT(gpb_torch_malloc(2048 << i, 0, NULL));
    ASSERT_OK(gpb_pool_plan_info(gpb_torch_pool(0), &pi));
    ASSERT_U64_EQ(pi.entries, 0);
    snprintf(f, sizeof f, "%s.0.trace.gz", base);
    first_op_is_alloc(f, 2048);
    gpb_trace_reader_t *tr;
    gpb_trace_op_t op;
    int nops = 0;
    ASSERT_OK(gpb_trace_open(f, &tr));
    while (gpb_trace_next(tr, &op) == 1) nops++;
    gpb_trace_close(tr);
    ASSERT_EQ(nops, 2);
    ASSERT_OK(gpb_torch_trace(0, NULL)); /* stopped already: nothing to do */
    /* Stopped by hand first (save_plan), the count stops with it, so a
     * trace started later (start_trace) keeps every op. */
    setenv("GPB_TORCH_PLAN_CACHE_ALLOCS", "3", 1);
    ASSERT(gpb_torch_malloc(512, 4, NULL) && gpb_torch_malloc(512, 4, NULL));
    ASSERT_OK(gpb_torch_trace(4, NULL));
    snprintf(f, sizeof f, "%s.own.trace", base);
    ASSERT_OK(gpb_torch_trace(4, f));
    for (int i = 0; i < 3; i++) ASSERT(gpb_torch_malloc(1024, 4, NULL));
    ASSERT_OK(gpb_torch_trace(4, NULL));
    nops = 0;
    ASSERT_OK(gpb_trace_open(f, &tr));
    while (gpb_trace_next(tr, &op) == 1) nops++;
    gpb_trace_close(tr);
    ASSERT_EQ(nops, 3);
    unlink(f);
    snprintf(f, sizeof f, "%s.4.trace.gz", base);
    unlink(f);
    snprintf(f, sizeof f, "%s.0.trace.gz", base);
    setenv("GPB_TORCH_PLAN_CACHE_ALLOCS", "many", 1);
    ASSERT(gpb_torch_malloc(512, 3, NULL) == NULL);
    ASSERT(strstr(gpb_last_error_detail(), "GPB_TORCH_PLAN_CACHE_ALLOCS"));
    setenv("GPB_TORCH_TRACE", f, 1);
    ASSERT(gpb_torch_malloc(512, 2, NULL) == NULL);
    ASSERT(strstr(gpb_last_error_detail(), "GPB_TORCH_PLAN_CACHE excludes"));
    _exit(0);
  }
  int st = 0;
  ASSERT(waitpid(pid, &st, 0) == pid);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  snprintf(f, sizeof f, "%s.1", base);
  ASSERT(unlink(f) == 0);
  snprintf(f, sizeof f, "%s.0.trace.gz", base);
  ASSERT(unlink(f) == 0 && rmdir(dir) == 0);
}

/* GPB_CFG_VMM: random allocations and frees (async behind queued work,
 * on one stream or two) into a pool whose budget is a quarter of its
 * address range. After every step each live allocation lies on mapped
 * memory, the pool holds what the fake has mapped and never more than
 * its budget, nothing was unmapped under queued work, and the pool's
 * checker (granule counts included) and the model agree; a failure
 * happens only with the budget (or the device) spent or no block free. */
static void test_vmm(uint64_t *rng, gpb_policy_t policy, int solo,
                     size_t dev_free, int slots) {
  enum { N = 64 };
  const size_t budget = (size_t)16 << 20;
  fake_cuda_setup(4, dev_free); /* the device may hold less than the budget */
  fake_set_device(1);
  watch_t w;
  make_flags = GPB_CFG_VMM | (solo ? GPB_CFG_SOLO_STREAM : 0);
  gpb_pool_t *p = make_pool(0, budget, policy, &w);
  make_flags = 0;
  uint64_t held, limit;
  ASSERT_OK(gpb_pool_memory(p, &held, &limit));
  ASSERT_U64_EQ(held, 0);
  ASSERT_U64_EQ(limit, budget);
  gpb_pool_info_t info;
  ASSERT_OK(gpb_pool_info(p, &info));
  ASSERT_U64_EQ(info.pool_size, 4 * budget);
  void *s[2] = {fake_stream_create(0), solo ? NULL : fake_stream_create(0)};
  if (!s[1]) s[1] = s[0];
  void *live[N] = {0};
  size_t sz[N] = {0};
  uint64_t fails = 0;
  for (int step = 0; step < 3000; step++) {
    int i = (int)rng_below(rng, (uint64_t)slots);
    void *st = s[rng_below(rng, 2)];
    if (live[i]) {
      fake_stream_enqueue(st); /* work that may still use the block */
      if (rng_below(rng, 4)) ASSERT_OK(gpb_free_async(p, live[i], st));
      else ASSERT_OK(gpb_free(p, live[i]));
      live[i] = NULL;
      if (rng_below(rng, 8) == 0) fake_stream_finish(st);
    } else {
      size_t n = rng_below(rng, 3) ? 256 + rng_below(rng, 256 << 10)
                                   : rng_below(rng, 3u << 20) + 1;
      int rc = gpb_alloc_ex(p, n, 0, 0, st, &live[i]);
      if (rc == GPB_ENOMEM) {
        gpb_stats_t st2;
        ASSERT_OK(gpb_pool_stats(p, &st2));
        ASSERT_OK(gpb_pool_memory(p, &held, &limit));
        /* Pages that live blocks need, counted here; the request needs
         * at most its own length in pages plus one. */
        uint64_t room = (limit < dev_free ? limit : dev_free) >> 21;
        uint64_t in_use = 0, need = (n >> 21) + 2;
        static uint8_t g[1u << 12];
        memset(g, 0, sizeof g);
        for (int j = 0; j < N; j++) {
          if (!live[j]) continue;
          uint64_t o = (uint64_t)((char *)live[j] - (char *)info.base);
          for (uint64_t k = o >> 21; k <= (o + sz[j] - 1) >> 21; k++)
            in_use += !g[k]++;
        }
        if (in_use + need <= room && st2.largest_free >= n)
          FAILF("step %d: %zu bytes failed with %llu pages in use of %llu "
                "(%llu held) and a free block of %llu", step, n,
                (unsigned long long)in_use, (unsigned long long)room,
                (unsigned long long)held, (unsigned long long)st2.largest_free);
        fails++;
      } else {
        ASSERT_OK(rc);
        ASSERT_OK(gpb_usable_size(p, live[i], &sz[i]));
      }
    }
    for (int j = 0; j < N; j++)
      if (live[j] && !fake_vmm_mapped((uint64_t)(uintptr_t)live[j], sz[j]))
        FAILF("step %d: allocation %p (%zu bytes) is not on mapped memory",
              step, live[j], sz[j]);
    ASSERT_OK(gpb_pool_memory(p, &held, &limit));
    ASSERT(held <= limit);
    ASSERT_U64_EQ(held, fake_vmm_mapped_bytes());
    ASSERT_U64_EQ(fake_counts.vmm_unsafe_unmaps, 0);
    check_pool(p, &w);
  }
  /* A refused page fails the request like a full pool: a FAIL event. */
  gpb_stats_t fin;
  ASSERT_OK(gpb_pool_stats(p, &fin));
  ASSERT_U64_EQ(fin.failures, fails);
  printf("vmm (%s, %s): %llu failed allocations, %llu maps, %llu unmaps, "
         "%llu device syncs\n", gpb_policy_name(policy),
         solo ? "one stream" : "two streams", (unsigned long long)fails,
         (unsigned long long)fake_counts.vmm_maps,
         (unsigned long long)fake_counts.vmm_unmaps,
         (unsigned long long)fake_counts.device_syncs);
  for (int j = 0; j < N; j++) ASSERT_OK(gpb_free(p, live[j]));
  gpb_pool_destroy(p);
  gpb_model_destroy(w.model);
  ASSERT_U64_EQ(fake_counts.vmm_pages, 0); /* every page released */
  ASSERT_EQ(fake_current_device(), 1);
  fake_cuda_setup(4, (size_t)64 << 20); /* what the other tests expect */
}

/* GPB_CFG_VMM refuses what it cannot do. */
static void test_vmm_args(void) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.flags = GPB_CFG_NO_ENV | GPB_CFG_VMM;
  cfg.backend = GPB_BACKEND_HOST;
  cfg.pool_size = 1 << 20;
  gpb_pool_t *p;
  ASSERT_ERR(gpb_pool_create(&cfg, &p), GPB_EINVAL);
  ASSERT(p == NULL);
  cfg.backend = GPB_BACKEND_DEVICE;
  cfg.arenas = 4;
  ASSERT_ERR(gpb_pool_create(&cfg, &p), GPB_EINVAL);
  /* A plain pool holds all of itself. */
  cfg.flags = GPB_CFG_NO_ENV;
  cfg.arenas = 1;
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  uint64_t held, limit;
  ASSERT_OK(gpb_pool_memory(p, &held, &limit));
  ASSERT_U64_EQ(held, 1 << 20);
  ASSERT_U64_EQ(limit, 1 << 20);
  gpb_pool_destroy(p);
  ASSERT_ERR(gpb_pool_memory(NULL, &held, &limit), GPB_EINVAL);
}

/* gpb_device_pool, in a child (the pools are the process's): one VMM pool
 * per device by default, the same for every caller and the pluggable
 * entry points; trim gives its idle pages back; the peaks restart. */
static void test_device_pool(void) {
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    fake_cuda_setup(4, (size_t)64 << 20);
    unsetenv("GPB_TORCH_VMM");
    unsetenv("GPB_TORCH_POLICY");
    setenv("GPB_TORCH_POOL_SIZE", "8M", 1);
    gpb_pool_t *p = NULL, *q = NULL;
    ASSERT_OK(gpb_device_pool(2, &p));
    ASSERT_OK(gpb_device_pool(2, &q));
    ASSERT(p && p == q && p == gpb_torch_pool(2));
    uint64_t held, limit;
    ASSERT_OK(gpb_pool_memory(p, &held, &limit));
    ASSERT_U64_EQ(limit, 8 << 20); /* a budget: VMM is the default */
    ASSERT_U64_EQ(held, 0);
    void *v = gpb_torch_malloc(3 << 20, 2, NULL);
    ASSERT(v);
    gpb_stats_t st;
    ASSERT_OK(gpb_pool_stats(p, &st));
    ASSERT_U64_EQ(st.tag_bytes[GPB_TAG_TORCH], 3 << 20);
    gpb_torch_free(v, 3 << 20, 2, NULL);
    ASSERT_OK(gpb_torch_drain(2));
    ASSERT_OK(gpb_pool_memory(p, &held, NULL));
    ASSERT_U64_EQ(held, 4 << 20); /* two granules, kept mapped when idle */
    uint64_t pages = fake_counts.vmm_pages;
    ASSERT_OK(gpb_pool_trim(p));
    ASSERT_OK(gpb_pool_memory(p, &held, NULL));
    ASSERT_U64_EQ(held, 0);
    ASSERT_U64_EQ(fake_counts.vmm_pages, pages - 2); /* back to the device */
    ASSERT(gpb_torch_malloc(1 << 20, 2, NULL)); /* and it maps again */
    ASSERT_OK(gpb_pool_stats(p, &st));
    ASSERT_U64_EQ(st.block_peak, 3 << 20);
    ASSERT_OK(gpb_pool_reset_peaks(p));
    ASSERT_OK(gpb_pool_stats(p, &st));
    ASSERT_U64_EQ(st.block_peak, 1 << 20);
    ASSERT_ERR(gpb_pool_reset_peaks(NULL), GPB_EINVAL);
    ASSERT_ERR(gpb_device_pool(-1, &q), GPB_EINVAL);
    ASSERT(q == NULL);
    setenv("GPB_TORCH_VMM", "maybe", 1); /* refused, then at once */
    ASSERT_ERR(gpb_device_pool(3, &q), GPB_EINVAL);
    ASSERT_ERR(gpb_device_pool(3, &q), GPB_EINVAL);
    _exit(0);
  }
  int status;
  ASSERT(waitpid(pid, &status, 0) == pid);
  ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void) {
  uint64_t rng = test_seed();
  fake_cuda_setup(4, (size_t)64 << 20);
  fake_set_device(1); /* the caller works on another device */
  test_basic();
  test_solo();
  test_oom();
  test_reap();
  test_devices();
  for (int r = 0; r < 6; r++) test_stress(&rng);
  test_vmm_args();
  test_vmm(&rng, GPB_POLICY_BESTFIT, 1, (size_t)64 << 20, 64);
  test_vmm(&rng, GPB_POLICY_BUDDY, 0, (size_t)64 << 20, 64);
  test_vmm(&rng, GPB_POLICY_TRIM, 1, (size_t)64 << 20, 64);
  /* A device with room for 5 pages under a budget of 8, and few live
   * blocks: page creation fails while idle pages exist, which must then
   * be reused. */
  test_vmm(&rng, GPB_POLICY_BUDDY, 1, (size_t)10 << 20, 3);
  /* Budgets were spent and idle pages moved, or the test tested less
   * (one run alone may never need to: bestfit packs tightly). */
  ASSERT(fake_counts.vmm_unmaps > 0 && fake_counts.device_syncs > 0);
  ASSERT_U64_EQ(fake_counts.event_creates, fake_counts.event_destroys);
  test_torch_plan_cache();
  test_device_pool();
  test_torch();
  printf("fake: %" PRIu64 " events made, %" PRIu64 " records, %" PRIu64
         " queries, %" PRIu64 " waits\n", fake_counts.event_creates,
         fake_counts.records, fake_counts.queries, fake_counts.syncs);
  return 0;
}
