/* SPDX-License-Identifier: MIT */
/*
 * churn.c: the hot path's workload for callgrind (bench/callgrind.sh). A
 * seeded churn on a virtual-backend pool with nobody listening: no hook,
 * no publisher, no trace, one thread. Each op frees a random live block
 * or allocates one of 256 B to 128 KiB (about log-uniform) in its slot,
 * among --live slots; it prints how many allocs and frees it made (the
 * blocks live at the end are freed too), so that the script divides callgrind's inclusive cost of gpb_alloc and gpb_free by
 * them.
 */
#include "gpubuddy.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t churn_next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int churn_usage(FILE *f) {
  fprintf(f, "usage: gpubuddy-churn [--policy buddy|trim|bestfit] [--ops N] "
          "[--live N] [--seed N]\n");
  return f == stderr ? 2 : 0;
}

int main(int argc, char **argv) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = (size_t)1 << 30;
  cfg.flags |= GPB_CFG_NO_ENV;
  unsigned long long ops = 200000, live = 1024, seed = 42;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help")) return churn_usage(stdout);
    if (!strcmp(a, "--version")) {
      printf("gpubuddy-churn %s\n", GPB_VERSION_STRING);
      return 0;
    }
    char *end = NULL;
    unsigned long long x = v ? strtoull(v, &end, 10) : 0;
    int num = v && *v >= '0' && *v <= '9' && !*end;
    if (!strcmp(a, "--policy") && v && !gpb_policy_parse(v, &cfg.policy)) {
    } else if (!strcmp(a, "--ops") && num && x) {
      ops = x;
    } else if (!strcmp(a, "--live") && num && x && x <= 1000000) {
      live = x;
    } else if (!strcmp(a, "--seed") && num) {
      seed = x;
    } else {
      fprintf(stderr, "gpubuddy-churn: bad option or value: %s\n", a);
      return churn_usage(stderr);
    }
    i++;
  }
  gpb_pool_t *pool;
  int rc = gpb_pool_create(&cfg, &pool);
  void **p = calloc(live, sizeof *p);
  if (rc || !p) {
    fprintf(stderr, "gpubuddy-churn: %s\n", rc ? gpb_strerror(rc) : "no memory");
    return 1;
  }
  unsigned long long allocs = 0, frees = 0, fails = 0;
  uint64_t s = seed;
  for (unsigned long long k = 0; k < ops; k++) {
    uint64_t r = churn_next(&s);
    size_t i = (size_t)(r % live);
    if (p[i]) {
      gpb_free(pool, p[i]);
      p[i] = NULL;
      frees++;
    } else {
      size_t size = (size_t)256 << ((r >> 32) % 9); /* 256 B to 64 KiB */
      size += (size_t)((r >> 40) % size);
      fails += gpb_alloc(pool, size, &p[i]) != 0;
      allocs++;
    }
  }
  for (size_t i = 0; i < live; i++)
    if (p[i]) {
      gpb_free(pool, p[i]);
      frees++;
    }
  printf("policy %s: allocs %llu frees %llu failed %llu\n",
         gpb_policy_name(cfg.policy), allocs, frees, fails);
  free(p);
  gpb_pool_destroy(pool);
  return fails != 0;
}
