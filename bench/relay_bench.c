/* SPDX-License-Identifier: MIT */
/*
 * relay_bench.c: what remote viewing costs on the wire and how fast it
 * goes, through loopback.
 *
 * An in-process pool (virtual backend) churns with log-uniform sizes; its
 * hook feeds the relay core (tools/relay/relay.c) running in a thread, exactly as the relay program is fed by its
 * shared-memory reader; one reader connects with gpb_attach_connect and
 * polls between chunks of work. For each zlib level it reports bytes on
 * the wire per event (everything the relay sent, keyframe included) and
 * events per second end to end: from the first operation until the
 * reader's model has applied the last event.
 *
 *   relay_bench [--ops N] [--levels 0,1,6]
 */
#include "relay.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct bench {
  gpbr_queue_t q;
  gpbr_t *r;
  gpbr_src_t *src;
  atomic_int stop;
} bench_t;

static void *bench_relay(void *arg) {
  bench_t *b = arg;
  while (!atomic_load(&b->stop)) {
    if (gpbr_queue_drain(&b->q, b->src) < 0) {
      fprintf(stderr, "relay_bench: model refused an event\n");
      exit(1);
    }
    gpbr_step(b->r, 1);
  }
  return NULL;
}

static uint64_t xs(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1Dull;
}

static int bench_one(int zlevel, long ops) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = (size_t)1 << 30;
  cfg.min_block = 256;
  cfg.flags = GPB_CFG_NO_ENV;
  gpb_pool_t *pool;
  int rc = gpb_pool_create(&cfg, &pool);
  if (rc) {
    fprintf(stderr, "relay_bench: %s\n", gpb_last_error_detail());
    return 1;
  }
  bench_t b;
  memset(&b, 0, sizeof b);
  gpbr_opts_t o = {0};
  o.listen = "127.0.0.1:0";
  o.zlevel = zlevel;
  o.verbose = -1;
  if (gpbr_queue_init(&b.q, pool) || gpbr_open(&o, &b.r)) return 1;
  b.src = gpbr_src_add(b.r, b.q.model, &b.q.info, NULL);
  if (!b.src) return 1;
  pthread_t th;
  pthread_create(&th, NULL, bench_relay, &b);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", gpbr_port(b.r));
  gpb_attach_t *a;
  if ((rc = gpb_attach_connect(addr, NULL, &a))) {
    fprintf(stderr, "relay_bench: connect: %s\n", gpb_last_error_detail());
    return 1;
  }
  enum { SLOTS = 4096 };
  void **live = calloc(SLOTS, sizeof *live);
  uint64_t seed = 42;
  uint64_t t0 = gpb_now_ns();
  for (long i = 0; i < ops; i++) {
    uint64_t k = xs(&seed) % SLOTS;
    if (live[k]) {
      gpb_free(pool, live[k]);
      live[k] = NULL;
    } else {
      size_t sz = (size_t)1 << (xs(&seed) % 20);
      sz += xs(&seed) % sz;
      gpb_alloc_tagged(pool, sz, (uint32_t)(xs(&seed) % 8), &live[k]);
    }
    if ((i & 1023) == 0) gpb_attach_poll(a);
    if ((i % (ops / 10 + 1)) == 0 && i)
      fprintf(stderr, "\rrelay_bench: zlib %d: %ld%%", zlevel, i * 100 / ops);
  }
  gpb_stats_t s;
  gpb_pool_stats(pool, &s);
  while (gpb_model_seq(gpb_attach_model(a)) < s.seq) {
    rc = gpb_attach_poll(a);
    if (rc < 0) {
      fprintf(stderr, "relay_bench: poll: %s\n", gpb_last_error_detail());
      return 1;
    }
    if (rc == 0) usleep(100);
  }
  uint64_t dt = gpb_now_ns() - t0;
  atomic_store(&b.stop, 1);
  pthread_join(th, NULL);
  fprintf(stderr, "\r%40s\r", "");
  double ev = (double)s.seq;
  gpbr_counters_t c;
  gpbr_counters(b.r, &c);
  printf("zlib %d  %10.0f events  %6.2f bytes/event  %10.0f events/s  "
         "%8.1f MB/s on the wire  resyncs %llu\n",
         zlevel, ev, (double)c.bytes_sent / ev, ev / ((double)dt / 1e9),
         (double)c.bytes_sent / ((double)dt / 1e9) / 1e6,
         (unsigned long long)c.resyncs);
  gpb_attach_close(a);
  gpbr_free(b.r);
  gpb_pool_set_hook(pool, NULL, NULL);
  for (int k = 0; k < SLOTS; k++)
    if (live[k]) gpb_free(pool, live[k]);
  free(live);
  gpb_pool_destroy(pool);
  gpbr_queue_free(&b.q);
  return 0;
}

int main(int argc, char **argv) {
  long ops = 1000000;
  const char *levels = "0,1,6";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--ops") && i + 1 < argc) {
      ops = atol(argv[++i]);
    } else if (!strcmp(argv[i], "--levels") && i + 1 < argc) {
      levels = argv[++i];
    } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("Usage: relay_bench [--ops N] [--levels 0,1,6]\n"
             "Bytes per event and events per second through gpubuddy-relay's\n"
             "core and a gpb_attach_connect reader on loopback, per zlib level.\n");
      return 0;
    } else {
      fprintf(stderr, "relay_bench: unknown argument '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  if (ops < 1000) ops = 1000;
  signal(SIGPIPE, SIG_IGN);
  printf("relay_bench: %ld alloc/free operations per level\n", ops);
  for (const char *p = levels; *p;) {
    char *end;
    long z = strtol(p, &end, 10);
    if (end == p || z < 0 || z > 9) {
      fprintf(stderr, "relay_bench: --levels '%s': expected 0..9 list\n", levels);
      return 2;
    }
    if (bench_one((int)z, ops)) return 1;
    p = *end == ',' ? end + 1 : end;
  }
  return 0;
}
