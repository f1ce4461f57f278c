/* SPDX-License-Identifier: MIT */
/*
 * test_trace.c: trace files round trip.
 *
 * 1. Ops written with gpb_trace_write (plain and .gz) read back equal.
 * 2. A pool records its own trace, through gpb_pool_trace_start and through
 *    GPB_TRACE; a seeded workload that also hits OOM runs on it. Replaying
 *    the trace through a fresh pool of the same config must give identical
 *    stats and an identical block map: the allocator is deterministic and
 *    the trace carries everything it decides on.
 * 3. The same with four threads sharing the recording pool: the trace is
 *    written under the pool's lock in the order things happened, so its
 *    replay must again end in the same state.
 * With --record PATH it records the workload to PATH (4 MiB virtual pool,
 * min_block 256, buddy) and prints the pool's stats as "key value" lines,
 * for tests/test_trace_replay.sh to compare with gpubuddy-replay's output.
 */
#include "testutil.h"

#include <pthread.h>
#include <unistd.h>

#define POOL (4u << 20)
#define MINB 256u

static char dir[] = "/tmp/gpb-test-trace-XXXXXX";

static void path_in(char *buf, size_t cap, const char *name) {
  snprintf(buf, cap, "%s/%s", dir, name);
}

/* -------------------------------------------------------- 1. op files */

static void test_ops_roundtrip(const char *name, uint64_t *seed) {
  char path[256];
  path_in(path, sizeof path, name);
  enum { N = 3000 };
  static gpb_trace_op_t ops[N];
  gpb_trace_writer_t *w;
  ASSERT_OK(gpb_trace_writer_open(path, &w));
  for (int i = 0; i < N; i++) {
    gpb_trace_op_t *o = &ops[i];
    memset(o, 0, sizeof *o);
    o->op = rng_below(seed, 2) ? GPB_OP_ALLOC : GPB_OP_FREE;
    o->time_ns = (uint64_t)i * 1000 + rng_below(seed, 1000);
    o->id = rng_next(seed) >> 1; /* below 2^63 */
    o->size = 1 + rng_below(seed, 1ull << rng_below(seed, 40));
    o->tag = (uint32_t)rng_below(seed, GPB_MAX_TAGS);
    o->stream = rng_below(seed, 3) ? 0 : rng_next(seed);
    if (i == 0) o->id = 0, o->stream = UINT64_MAX, o->size = UINT64_MAX;
    ASSERT_OK(gpb_trace_write(w, o));
  }
  gpb_trace_op_t bad = ops[0];
  bad.op = 7;
  ASSERT_ERR(gpb_trace_write(w, &bad), GPB_EINVAL);
  bad = ops[0];
  bad.op = GPB_OP_ALLOC;
  bad.tag = GPB_MAX_TAGS;
  ASSERT_ERR(gpb_trace_write(w, &bad), GPB_EINVAL);
  ASSERT_OK(gpb_trace_writer_close(w));

  gpb_trace_reader_t *r;
  ASSERT_OK(gpb_trace_open(path, &r));
  ASSERT(!strcmp(gpb_trace_format_name(r), "gpubuddy-trace v2"));
  gpb_trace_op_t o;
  for (int i = 0; i < N; i++) {
    int rc = gpb_trace_next(r, &o);
    if (rc != 1) FAILF("op %d: %d %s", i, rc, gpb_trace_error(r));
    ASSERT_U64_EQ(o.seq, (uint64_t)i + 1);
    ASSERT_U64_EQ(o.op, ops[i].op);
    ASSERT_U64_EQ(o.time_ns, ops[i].time_ns);
    ASSERT_U64_EQ(o.id, ops[i].id);
    ASSERT_U64_EQ(o.size, ops[i].size);
    ASSERT_U64_EQ(o.tag, ops[i].tag);
    ASSERT_U64_EQ(o.stream, ops[i].stream);
  }
  ASSERT_EQ(gpb_trace_next(r, &o), 0);
  ASSERT_EQ(gpb_trace_next(r, &o), 0);
  gpb_trace_close(r);

  /* A .gz path really is compressed (gzip magic), a plain one is text. */
  FILE *f = fopen(path, "rb");
  ASSERT(f);
  unsigned char m[2] = {0, 0};
  ASSERT_EQ(fread(m, 1, 2, f), 2);
  fclose(f);
  size_t n = strlen(path);
  if (n > 3 && !strcmp(path + n - 3, ".gz"))
    ASSERT(m[0] == 0x1f && m[1] == 0x8b);
  else
    ASSERT(m[0] == '#');
}

static void test_copy(const char *path);

/* Call sites: definitions before first use, the 8th field on ops (a
 * FREE's and a fail's too), a text too long for a line cut at a frame,
 * ids read back with their text, and an op-by-op copy that is the same
 * bytes. */
static void test_sites_roundtrip(const char *name) {
  char path[256];
  path_in(path, sizeof path, name);
  static char big[6000];
  size_t k = 0;
  for (int i = 0; k < sizeof big - 64; i++)
    k += (size_t)snprintf(big + k, sizeof big - k, "%slib%d.so+0x%x f%d",
                          i ? ";" : "", i, i * 16, i);
  const char *text[4] = {NULL, "/bin/app+0x1234 main",
                         "model.py:12 forward;??:0 c10::alloc", big};
  gpb_trace_writer_t *w;
  ASSERT_OK(gpb_trace_writer_open(path, &w));
  ASSERT_ERR(gpb_trace_write_site(w, 0, "x"), GPB_EINVAL);
  ASSERT_ERR(gpb_trace_write_site(w, GPB_MAX_SITES + 1, "x"), GPB_EINVAL);
  ASSERT_ERR(gpb_trace_write_site(w, 1, "a\nb"), GPB_EINVAL);
  gpb_trace_op_t o;
  memset(&o, 0, sizeof o);
  for (uint32_t i = 0; i < 12; i++) {
    o.site = (uint16_t)(i % 4);
    if (o.site) ASSERT_OK(gpb_trace_write_site(w, o.site, text[o.site]));
    o.op = GPB_OP_ALLOC;
    o.id = 0x1000 * (i + 1);
    o.size = 100 + i;
    o.time_ns = i;
    if (i == 5) o.id |= 1ull << 63; /* a failed request: a fail line */
    ASSERT_OK(gpb_trace_write(w, &o));
    o.op = GPB_OP_FREE;
    ASSERT_OK(gpb_trace_write(w, &o));
  }
  ASSERT_OK(gpb_trace_writer_close(w));

  gpb_trace_reader_t *r;
  ASSERT_OK(gpb_trace_open(path, &r));
  ASSERT(gpb_trace_site(r, 1) == NULL); /* nothing read yet */
  for (uint32_t i = 0; i < 12; i++) {
    for (int half = 0; half < 2; half++) {
      ASSERT_EQ(gpb_trace_next(r, &o), 1);
      ASSERT_EQ(o.op, half ? GPB_OP_FREE : GPB_OP_ALLOC);
      ASSERT_EQ(o.site, i % 4);
      ASSERT_U64_EQ(o.size, 100 + i);
      if (!o.site) continue;
      const char *t = gpb_trace_site(r, o.site);
      ASSERT(t != NULL);
      if (o.site < 3) {
        ASSERT(!strcmp(t, text[o.site]));
      } else { /* cut at a frame boundary, marked, and fits a line */
        size_t n = strlen(t);
        ASSERT(n < 4096 - 12 && n > 3000);
        ASSERT(!strcmp(t + n - 4, ";..."));
        ASSERT(!strncmp(t, big, n - 4) && big[n - 4] == ';');
      }
    }
  }
  ASSERT_EQ(gpb_trace_next(r, &o), 0);
  ASSERT(gpb_trace_site(r, 4) == NULL && gpb_trace_site(r, 0) == NULL);
  gpb_trace_close(r);
  size_t n = strlen(path);
  if (n < 3 || strcmp(path + n - 3, ".gz")) test_copy(path);
}

/* ----------------------------------------------- 2. pool round trip */

typedef struct live {
  void *p;
  uint64_t id;
} live_t;

/* A workload with frees, tags, streams and failures (the pool is small
 * and some requests are larger than the pool). */
static void workload(gpb_pool_t *pool, uint64_t seed, int steps) {
  live_t *l = calloc((size_t)steps, sizeof *l);
  ASSERT(l);
  int n = 0;
  for (int i = 0; i < steps; i++) {
    if (n && (rng_below(&seed, 100) < 45 || n == steps)) {
      int k = (int)rng_below(&seed, (uint64_t)n);
      ASSERT_OK(gpb_free(pool, l[k].p));
      l[k] = l[--n];
      continue;
    }
    size_t size = 1 + (size_t)rng_below(&seed, 1ull << (4 + rng_below(&seed, 16)));
    if (rng_below(&seed, 200) == 0) size = POOL + 1; /* ETOOBIG */
    void *stream = (void *)(uintptr_t)(rng_below(&seed, 4) * 16);
    uint32_t tag = (uint32_t)rng_below(&seed, 8);
    void *p;
    int rc = gpb_alloc_ex(pool, size, 0, tag, stream, &p);
    if (rc == GPB_ENOMEM || rc == GPB_ETOOBIG) continue;
    ASSERT_OK(rc);
    l[n++].p = p;
  }
  free(l);
}

static gpb_config_t config(gpb_policy_t policy) {
  gpb_config_t c;
  gpb_config_init(&c);
  c.backend = GPB_BACKEND_VIRTUAL;
  c.pool_size = POOL;
  c.min_block = MINB;
  c.policy = policy;
  c.flags = GPB_CFG_NO_ENV;
  return c;
}

/* Replays `path` into a fresh pool as gpubuddy-replay does; returns its
 * stats and blocks. */
static void replay(const char *path, gpb_policy_t policy, gpb_stats_t *st,
                   test_blocks_t *bl, uint64_t *ops_out, uint64_t *fails_out) {
  gpb_config_t c = config(policy);
  gpb_pool_t *pool;
  ASSERT_OK(gpb_pool_create(&c, &pool));
  gpb_trace_reader_t *r;
  ASSERT_OK(gpb_trace_open(path, &r));
  size_t cap = 4096, n = 0;
  struct ent { uint64_t id; void *p; int failed; } *e = malloc(cap * sizeof *e);
  ASSERT(e);
  gpb_trace_op_t o;
  int rc;
  uint64_t ops = 0, fails = 0;
  while ((rc = gpb_trace_next(r, &o)) == 1) {
    ops++;
    if (o.op == GPB_OP_ALLOC) {
      for (size_t i = 0; i < n; i++) ASSERT(e[i].id != o.id);
      void *p = NULL;
      int a = gpb_alloc_ex(pool, o.size, 0, o.tag, (void *)(uintptr_t)o.stream, &p);
      ASSERT(a == 0 || a == GPB_ENOMEM || a == GPB_ETOOBIG);
      if (a) fails++;
      if (n == cap) {
        cap *= 2;
        e = realloc(e, cap * sizeof *e);
        ASSERT(e);
      }
      e[n].id = o.id;
      e[n].p = p;
      e[n].failed = a != 0;
      n++;
    } else {
      size_t i;
      for (i = 0; i < n && e[i].id != o.id; i++) {}
      if (i == n) FAILF("free of unknown id 0x%llx", (unsigned long long)o.id);
      if (!e[i].failed) ASSERT_OK(gpb_free(pool, e[i].p));
      e[i] = e[--n];
    }
  }
  if (rc) FAILF("trace read: %s", gpb_trace_error(r));
  gpb_trace_close(r);
  free(e);
  ASSERT_OK(gpb_pool_stats(pool, st));
  bl->n = 0;
  ASSERT_OK(gpb_pool_visit(pool, test_collect_blocks, bl));
  ASSERT_OK(gpb_pool_check(pool));
  gpb_pool_destroy(pool);
  *ops_out = ops;
  *fails_out = fails;
}

/* Copies a trace op by op (read, write), call sites defined as the
 * reader met them, and checks the copy is the same bytes. */
static void test_copy(const char *path) {
  char copy[300];
  snprintf(copy, sizeof copy, "%s.copy", path);
  gpb_trace_reader_t *r;
  gpb_trace_writer_t *w;
  ASSERT_OK(gpb_trace_open(path, &r));
  ASSERT_OK(gpb_trace_writer_open(copy, &w));
  gpb_trace_op_t o;
  int rc;
  while ((rc = gpb_trace_next(r, &o)) == 1) {
    if (o.site) ASSERT_OK(gpb_trace_write_site(w, o.site,
                                               gpb_trace_site(r, o.site)));
    ASSERT_OK(gpb_trace_write(w, &o));
  }
  ASSERT_EQ(rc, 0);
  gpb_trace_close(r);
  ASSERT_OK(gpb_trace_writer_close(w));
  FILE *a = fopen(path, "rb"), *b = fopen(copy, "rb");
  ASSERT(a && b);
  int ca, cb;
  long at = 0;
  do {
    ca = getc(a);
    cb = getc(b);
    if (ca != cb) FAILF("%s and its copy differ at byte %ld", path, at);
    at++;
  } while (ca != EOF);
  fclose(a);
  fclose(b);
}

static void test_pool_roundtrip(gpb_policy_t policy, int use_env,
                                const char *name, uint64_t seed, int steps) {
  char path[256];
  path_in(path, sizeof path, name);
  gpb_config_t c = config(policy);
  if (use_env) {
    c.flags = 0;
    setenv("GPB_TRACE", path, 1);
    unsetenv("GPB_PUBLISH");
  }
  gpb_pool_t *pool;
  ASSERT_OK(gpb_pool_create(&c, &pool));
  if (use_env) {
    /* The k-th pool of a process that takes GPB_TRACE records PATH with
     * .k before the first dot of the file name (docs/TRACE_FORMAT.md). */
    static unsigned env_pools;
    if (env_pools) {
      char named[128];
      const char *dot = strchr(name, '.');
      snprintf(named, sizeof named, "%.*s.%u%s", (int)(dot - name), name,
               env_pools, dot);
      path_in(path, sizeof path, named);
    }
    env_pools++;
    unsetenv("GPB_TRACE");
  }
  else ASSERT_OK(gpb_pool_trace_start(pool, path));
  workload(pool, seed, steps);
  gpb_stats_t want, got;
  test_blocks_t wb = {0}, gb = {0};
  ASSERT_OK(gpb_pool_stats(pool, &want));
  ASSERT_OK(gpb_pool_visit(pool, test_collect_blocks, &wb));
  if (use_env) gpb_pool_destroy(pool); /* closes the trace */
  else ASSERT_OK(gpb_pool_trace_stop(pool));
  ASSERT(want.failures > 0); /* the workload must exercise FAIL records */

  uint64_t ops, fails;
  replay(path, policy, &got, &gb, &ops, &fails);
  printf("%s: %s, %llu ops, %llu failures, %llu splits\n", name,
         gpb_policy_name(policy), (unsigned long long)ops,
         (unsigned long long)fails, (unsigned long long)got.splits);
  test_stats_same(&want, &got);
  test_blocks_same(&wb, &gb);
  ASSERT_U64_EQ(fails, want.failures);
  /* Every event that was an ALLOC, FREE or FAIL is one op (a FAIL two). */
  ASSERT_U64_EQ(ops, want.allocs + want.frees + 2 * want.failures);

  if (!strstr(name, ".gz")) test_copy(path);

  if (!use_env) {
    /* After stop, the pool records nothing more: the file is unchanged. */
    FILE *f = fopen(path, "rb");
    ASSERT(f);
    fseek(f, 0, SEEK_END);
    long size1 = ftell(f);
    fclose(f);
    void *p;
    ASSERT_OK(gpb_alloc(pool, 1000, &p));
    ASSERT_OK(gpb_free(pool, p));
    f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    ASSERT_EQ(ftell(f), size1);
    fclose(f);
    gpb_pool_destroy(pool);
  }
  free(wb.b);
  free(gb.b);
}

typedef struct thr {
  gpb_pool_t *pool;
  uint64_t seed;
  int steps;
} thr_t;

static void *thread_main(void *arg) {
  thr_t *t = arg;
  workload(t->pool, t->seed, t->steps);
  return NULL;
}

static void test_threads_roundtrip(uint64_t seed, int steps) {
  char path[256];
  path_in(path, sizeof path, "threads.trace.gz");
  gpb_config_t c = config(GPB_POLICY_BUDDY);
  gpb_pool_t *pool;
  ASSERT_OK(gpb_pool_create(&c, &pool));
  ASSERT_OK(gpb_pool_trace_start(pool, path));
  enum { NT = 4 };
  pthread_t th[NT];
  thr_t ts[NT];
  for (int i = 0; i < NT; i++) {
    ts[i].pool = pool;
    ts[i].seed = seed + 100 + (uint64_t)i;
    ts[i].steps = steps / NT;
    ASSERT_EQ(pthread_create(&th[i], NULL, thread_main, &ts[i]), 0);
  }
  for (int i = 0; i < NT; i++) ASSERT_EQ(pthread_join(th[i], NULL), 0);
  gpb_stats_t want, got;
  test_blocks_t wb = {0}, gb = {0};
  ASSERT_OK(gpb_pool_stats(pool, &want));
  ASSERT_OK(gpb_pool_visit(pool, test_collect_blocks, &wb));
  ASSERT_OK(gpb_pool_trace_stop(pool));
  gpb_pool_destroy(pool);
  uint64_t ops, fails;
  replay(path, GPB_POLICY_BUDDY, &got, &gb, &ops, &fails);
  printf("threads: %llu ops, %llu failures\n", (unsigned long long)ops,
         (unsigned long long)fails);
  test_stats_same(&want, &got);
  test_blocks_same(&wb, &gb);
  free(wb.b);
  free(gb.b);
}

static int record_mode(const char *path) {
  gpb_config_t c = config(GPB_POLICY_BUDDY);
  gpb_pool_t *pool;
  ASSERT_OK(gpb_pool_create(&c, &pool));
  ASSERT_OK(gpb_pool_trace_start(pool, path));
  uint64_t seed = test_seed();
  workload(pool, seed, (int)(4000 * test_scale()) + 100);
  gpb_stats_t s;
  ASSERT_OK(gpb_pool_stats(pool, &s));
  gpb_pool_destroy(pool);
  printf("pool_events %llu\n", (unsigned long long)s.seq);
  printf("pool_allocs %llu\n", (unsigned long long)s.allocs);
  printf("pool_frees %llu\n", (unsigned long long)s.frees);
  printf("splits %llu\n", (unsigned long long)s.splits);
  printf("merges %llu\n", (unsigned long long)s.merges);
  printf("peak_live_bytes %llu\n", (unsigned long long)s.requested_peak);
  printf("peak_block_bytes %llu\n", (unsigned long long)s.block_peak);
  printf("failed_allocs %llu\n", (unsigned long long)s.failures);
  printf("internal_frag_bytes %llu\n", (unsigned long long)s.internal_frag_bytes);
  printf("live_allocs %llu\n", (unsigned long long)s.live_allocs);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--record")) return record_mode(argv[2]);
  if (!mkdtemp(dir)) FAILF("mkdtemp failed");
  uint64_t seed = test_seed();
  int steps = (int)(6000 * test_scale()) + 200;

  test_ops_roundtrip("ops.trace", &seed);
  test_ops_roundtrip("ops.trace.gz", &seed);
  test_sites_roundtrip("sites.trace");
  test_sites_roundtrip("sites.trace.gz");
  test_pool_roundtrip(GPB_POLICY_BUDDY, 0, "api-buddy.trace", seed, steps);
  test_pool_roundtrip(GPB_POLICY_TRIM, 0, "api-trim.trace.gz", seed + 1, steps);
  test_pool_roundtrip(GPB_POLICY_BUDDY, 1, "env-buddy.trace.gz", seed + 2, steps);
  test_pool_roundtrip(GPB_POLICY_TRIM, 1, "env-trim.trace", seed + 3, steps);
  test_threads_roundtrip(seed + 4, steps);

  /* Errors at open. */
  gpb_trace_reader_t *r;
  char path[256];
  path_in(path, sizeof path, "missing.trace");
  ASSERT_ERR(gpb_trace_open(path, &r), GPB_ENOTFOUND);
  ASSERT(r == NULL);
  gpb_trace_writer_t *w;
  ASSERT_ERR(gpb_trace_writer_open("/nonexistent-dir/x.trace", &w), GPB_EIO);
  ASSERT_ERR(gpb_trace_writer_open("", &w), GPB_EINVAL);

  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  printf("ok\n");
  return 0;
}
