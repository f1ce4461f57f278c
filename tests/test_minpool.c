/* SPDX-License-Identifier: MIT */
/*
 * test_minpool.c: the smallest-pool search (tools/common/minpool.c) is
 * exact where fitting is not monotone in the pool size.
 *
 * Random small traces (min_block 256, pools of a few KiB) are searched
 * until one is found on which plain bisection over the grid answers a
 * larger size than the true smallest: a pool that fits, with a larger one
 * on the grid that fails. For that trace the test requires that
 * gpbt_minpool_find answers the true smallest, found by trying every size
 * of the grid, for each policy; then it writes the trace out and requires
 * the same answer from gpubuddy-replay --find-min-pool. Random traces are also checked against the brute force without
 * the non-monotone condition, for every policy. A last hand-made trace
 * needs best fit to end a large request where its run ends. Then bad
 * input: sizes near 2^64 are refused, not wrapped; a probe function
 * stops the search; probes are numbered 1, 2, 3... over the whole search.
 */
#include "testutil.h"
#include "minpool.h"

#include <unistd.h>

#define MB 256u

/* A trace of n ops with at most 6 live blocks of 1 to 8 units. */
static void make_trace(gpbt_seq_t *q, uint64_t *rng, int n) {
  memset(q, 0, sizeof *q);
  uint32_t live[6];
  int nlive = 0;
  for (int i = 0; i < n; i++) {
    if (nlive == 0 || (nlive < 6 && rng_next(rng) % 10 < 6)) {
      uint64_t size = (1 + rng_next(rng) % 8) * MB - rng_next(rng) % MB;
      uint32_t slot = (uint32_t)q->nslots++;
      ASSERT_OK(gpbt_seq_push(q, 1, slot, size));
      q->allocs++;
      live[nlive++] = slot;
    } else {
      int k = (int)(rng_next(rng) % (uint64_t)nlive);
      ASSERT_OK(gpbt_seq_push(q, 0, live[k], 0));
      q->frees++;
      live[k] = live[--nlive];
    }
  }
  ASSERT_OK(gpbt_seq_peak(q));
}

/* The true smallest on the grid lower + k * step, by trying every size. */
static uint64_t brute(const gpbt_seq_t *q, void **ptrs, gpb_policy_t pol,
                      uint64_t lower, uint64_t step) {
  for (uint64_t s = lower;; s += step) {
    int f = gpbt_seq_fits(q, ptrs, s, MB, pol);
    ASSERT(f >= 0);
    if (f) return s;
    ASSERT(s < (1u << 24));
  }
}

/* What the old search did: double until a fit, then bisect the grid. */
static uint64_t bisect(const gpbt_seq_t *q, void **ptrs, gpb_policy_t pol,
                       uint64_t lower, uint64_t step) {
  uint64_t hi = lower;
  while (!gpbt_seq_fits(q, ptrs, hi, MB, pol)) hi = lower + 2 * (hi - lower) + step;
  uint64_t lo = lower; /* lo may fit; search the first fit in [lo, hi] */
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / step / 2 * step;
    if (gpbt_seq_fits(q, ptrs, mid, MB, pol)) hi = mid;
    else lo = mid + step;
  }
  return hi;
}

/* A fits function for the scan that never fits and gives up after 16
 * calls: a scan whose size wrapped past 2^64 would never end. */
static int never_fits(void *ctx, uint64_t size) {
  (void)size;
  if (++*(int *)ctx > 16) FAILF("the scan went on past its upper bound");
  return 0;
}

/* Checks the numbering (1, 2, 3...) and stops after stop_at probes. */
typedef struct probe_log {
  uint64_t last, stop_at;
} probe_log_t;

static int log_probe(void *user, uint64_t size, int fits, uint64_t n) {
  probe_log_t *l = user;
  (void)size;
  (void)fits;
  if (n != l->last + 1)
    FAILF("probe %" PRIu64 " came after probe %" PRIu64, n, l->last);
  l->last = n;
  return l->stop_at && n >= l->stop_at ? 7 : 0;
}

static void write_trace(const gpbt_seq_t *q, const char *path) {
  gpb_trace_writer_t *w;
  ASSERT_OK(gpb_trace_writer_open(path, &w));
  for (size_t i = 0; i < q->n; i++) {
    gpb_trace_op_t op = {.seq = i + 1, .time_ns = i,
                         .id = 0x1000 + (uint64_t)q->ops[i].slot * 0x100,
                         .size = q->ops[i].alloc ? q->ops[i].size : 0,
                         .op = q->ops[i].alloc ? GPB_OP_ALLOC : GPB_OP_FREE};
    ASSERT_OK(gpb_trace_write(w, &op));
  }
  ASSERT_OK(gpb_trace_writer_close(w));
}

int main(int argc, char **argv) {
  uint64_t seed = test_seed(), rng = seed;
  void **ptrs = calloc(4096, sizeof *ptrs);
  ASSERT(ptrs);

  /* 1. Exact on random traces, every policy. */
  int rounds = (int)(300 * test_scale());
  for (int r = 0; r < rounds; r++) {
    gpbt_seq_t q;
    make_trace(&q, &rng, 40);
    for (int p = 0; p < GPB_NUM_POLICIES; p++) {
      gpbt_minpool_t mp;
      ASSERT_OK(gpbt_minpool_find(&q, MB, (gpb_policy_t)p, MB, NULL, NULL, &mp));
      uint64_t want = brute(&q, ptrs, (gpb_policy_t)p, mp.lower, MB);
      if (mp.size != want)
        FAILF("round %d policy %s: search says %" PRIu64 ", smallest is %" PRIu64,
              r, gpb_policy_name((gpb_policy_t)p), mp.size, want);
      ASSERT_U64_EQ(mp.step, MB);
      ASSERT(mp.lower >= q.peak_live);
    }
    gpbt_seq_free(&q);
  }

  /* 2. A trace on which bisection errs: the search must not. */
  gpbt_seq_t q;
  int found = 0;
  gpb_policy_t pol = GPB_POLICY_BUDDY;
  uint64_t lower = 0, want = 0, bis = 0;
  for (int tries = 0; tries < 200000 && !found; tries++) {
    make_trace(&q, &rng, 24);
    for (int p = 0; p < GPB_NUM_POLICIES && !found; p++) {
      pol = (gpb_policy_t)p;
      lower = (q.peak_live + MB - 1) / MB * MB;
      want = brute(&q, ptrs, pol, lower, MB);
      bis = bisect(&q, ptrs, pol, lower, MB);
      found = bis != want;
    }
    if (!found) gpbt_seq_free(&q);
  }
  if (!found) FAILF("no trace on which bisection errs in 200000 tries");
  printf("policy %s: smallest pool %" PRIu64 ", bisection says %" PRIu64
         " (%zu ops)\n", gpb_policy_name(pol), want, bis, q.n);
  ASSERT(bis > want); /* it found a fit, just not the first */
  gpbt_minpool_t mp;
  ASSERT_OK(gpbt_minpool_find(&q, MB, pol, MB, NULL, NULL, &mp));
  ASSERT_U64_EQ(mp.size, want);

  /* 3. The same answer from the program, on the trace written out (make
   * check runs in the build directory). */
  const char *prog = argc > 1 ? argv[1] : "tools/gpubuddy-replay";
  if (access(prog, X_OK) == 0) {
    char path[] = "/tmp/gpb-minpool-XXXXXX";
    int fd = mkstemp(path);
    ASSERT(fd >= 0);
    close(fd);
    write_trace(&q, path);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s --find-min-pool --policy %s --min-block %u "
             "--resolution %u --json --quiet %s", prog, gpb_policy_name(pol),
             MB, MB, path);
    FILE *f = popen(cmd, "r");
    ASSERT(f);
    char line[256];
    uint64_t got = 0;
    while (fgets(line, sizeof line, f))
      if (sscanf(line, " \"min_pool_size\": %" SCNu64, &got) == 1) break;
    while (fgets(line, sizeof line, f)) {}
    ASSERT_EQ(pclose(f), 0);
    unlink(path);
    ASSERT_U64_EQ(got, want);
  }
  gpbt_seq_free(&q);

  /* 4. A step's logits and their float copy, twice as large, with a small
   * block freed in between: 10 units stay, 10 come and go, then 30 and 60.
   * Best fit ends the 30 (an eighth of the pool or more) where its run
   * ends, so the 60 finds the rest in one piece and the peak is enough;
   * placed at the run's start, the 30 would split it in 10 and 50. */
  gpbt_seq_t big;
  memset(&big, 0, sizeof big);
  static const struct { int alloc; uint32_t slot, units; } steps[] = {
      {1, 0, 10}, {1, 1, 10}, {1, 2, 30}, {0, 1, 0}, {1, 3, 60}};
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    ASSERT_OK(gpbt_seq_push(&big, steps[i].alloc, steps[i].slot,
                            (uint64_t)steps[i].units * MB));
    if (steps[i].alloc) big.allocs++, big.nslots++;
    else big.frees++;
  }
  ASSERT_OK(gpbt_seq_peak(&big));
  ASSERT_U64_EQ(big.peak_live, 100 * MB);
  ASSERT_OK(gpbt_minpool_find(&big, MB, GPB_POLICY_BESTFIT, MB, NULL, NULL, &mp));
  ASSERT_U64_EQ(mp.size, 100 * MB);

  /* 5. Probes are numbered on from the doubling into the scan, and a
   * probe function's positive return stops the search with that value. */
  probe_log_t lg = {0, 0};
  ASSERT_OK(gpbt_minpool_find(&big, MB, GPB_POLICY_BUDDY, MB, log_probe, &lg,
                              &mp));
  ASSERT(mp.probes > 1);
  ASSERT_U64_EQ(lg.last, mp.probes);
  lg = (probe_log_t){0, 1}; /* in the doubling */
  ASSERT_EQ(gpbt_minpool_find(&big, MB, GPB_POLICY_BUDDY, MB, log_probe, &lg,
                              &mp), 7);
  ASSERT_U64_EQ(mp.probes, 1);
  lg = (probe_log_t){0, 3}; /* in the scan */
  ASSERT_EQ(gpbt_minpool_find(&big, MB, GPB_POLICY_BUDDY, MB, log_probe, &lg,
                              &mp), 7);
  ASSERT_U64_EQ(mp.probes, 3);

  /* 6. Bad input: a step, min block or peak near 2^64 is refused, where
   * rounding it to the grid or doubling it would wrap (a step of 0, then
   * a division by it). */
  ASSERT_ERR(gpbt_minpool_find(&big, MB, GPB_POLICY_BUDDY, 18000000000000000000ull,
                               NULL, NULL, &mp), GPB_EINVAL);
  ASSERT_ERR(gpbt_minpool_find(&big, MB, GPB_POLICY_BUDDY, GPBT_MINPOOL_MAX + 1,
                               NULL, NULL, &mp), GPB_EINVAL);
  ASSERT_ERR(gpbt_minpool_find(&big, (size_t)1 << 63, GPB_POLICY_BUDDY, 0,
                               NULL, NULL, &mp), GPB_EINVAL);
  ASSERT_ERR(gpbt_minpool_find(&big, 3 * MB, GPB_POLICY_BUDDY, 0, NULL, NULL,
                               &mp), GPB_EINVAL);
  gpbt_seq_free(&big);
  static const uint64_t huge[] = {(uint64_t)1 << 63, UINT64_MAX,
                                  GPBT_MINPOOL_MAX + 1};
  for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
    gpbt_seq_t h;
    memset(&h, 0, sizeof h);
    ASSERT_OK(gpbt_seq_push(&h, 1, 0, huge[i]));
    h.nslots = 1;
    ASSERT_OK(gpbt_seq_peak(&h));
    ASSERT_ERR(gpbt_minpool_find(&h, MB, GPB_POLICY_BUDDY, 0, NULL, NULL, &mp),
               GPB_ETOOBIG);
    gpbt_seq_free(&h);
  }
  /* The scan stops at its upper bound even where the next size would
   * wrap past 2^64. */
  int calls = 0;
  ASSERT_ERR(gpbt_minpool_scan(UINT64_MAX - 20, 8, UINT64_MAX, never_fits,
                               &calls, NULL, NULL, &mp), GPB_ENOMEM);
  ASSERT_EQ(calls, 3);
  ASSERT_ERR(gpbt_minpool_scan(MB, 0, 4 * MB, never_fits, &calls, NULL, NULL,
                               &mp), GPB_EINVAL);
  free(ptrs);
  printf("ok\n");
  return 0;
}
