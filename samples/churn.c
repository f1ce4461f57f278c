/* SPDX-License-Identifier: MIT */
/*
 * churn.c: gpubuddy-sample-churn, random allocation churn.
 *
 * Each step either allocates a block whose size is log-uniform between
 * --min-size and --max-size (so 300 B and 300 KiB requests are equally
 * common, as in real programs) or frees a random live block. The chance to
 * allocate is 1 - live/--max-live, so the live count hovers around half of
 * --max-live and the pool sees a steady mix of splits and merges.
 *
 * ENOMEM (or ETOOBIG when --max-size exceeds the pool) is expected once the
 * live set outgrows the pool: it is counted, and that step frees a random
 * live block instead so the run goes on.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct churn_block {
  void *p;
  size_t size;
  uint32_t value;
} churn_block_t;

static size_t churn_min_size = 256;
static size_t churn_max_size = 1 << 20;
static uint64_t churn_max_live = 1024;
static uint64_t churn_verify_every = 64;

static const gpbs_extra_t churn_extras[] = {
    {"--min-size", GPBS_ARG_SIZE, &churn_min_size, "smallest request"},
    {"--max-size", GPBS_ARG_SIZE, &churn_max_size, "largest request"},
    {"--max-live", GPBS_ARG_UINT, &churn_max_live,
     "most allocations live at once (about half are, on average)"},
    {"--verify-every", GPBS_ARG_UINT, &churn_verify_every,
     "read a block back before every Nth free (0: never)"},
};

static const char *churn_validate(const gpbs_t *s) {
  (void)s;
  if (churn_min_size < 1) return "--min-size must be at least 1 byte";
  if (churn_max_size < churn_min_size)
    return "--max-size must be at least --min-size";
  if (churn_max_live < 1 || churn_max_live > 100000000)
    return "--max-live must be 1 to 100000000";
  return NULL;
}

static const gpbs_sample_t churn_sample = {
    .prog = "gpubuddy-sample-churn",
    .summary = "Random allocation churn with log-uniform sizes.",
    .details =
        "Each step allocates (size log-uniform in [--min-size, --max-size])\n"
        "or frees a random live block; the live count hovers around half of\n"
        "--max-live. Blocks are written when allocated and read back before\n"
        "some frees. ENOMEM when the live set outgrows the pool is expected:\n"
        "it is counted and that step frees a block instead.",
    .default_steps = 100000,
    .extras = churn_extras,
    .nextras = sizeof churn_extras / sizeof churn_extras[0],
    .validate = churn_validate,
};

static void churn_free_one(gpbs_t *s, churn_block_t *live, uint64_t *nlive,
                           bool verify) {
  uint64_t i = gpbs_below(s, *nlive);
  if (verify) gpbs_verify(s, live[i].p, live[i].size, live[i].value);
  gpbs_free(s, live[i].p);
  live[i] = live[--*nlive];
}

int main(int argc, char **argv) {
  gpbs_t s;
  int status;
  if (!gpbs_start(&s, &churn_sample, argc, argv, &status)) return status;

  churn_block_t *live = calloc(churn_max_live, sizeof *live);
  if (!live) {
    gpbs_error(&s, "no host memory for %llu live records",
               (unsigned long long)churn_max_live);
    return gpbs_finish(&s);
  }
  uint64_t nlive = 0, frees = 0;
  uint64_t step;
  for (step = 0; step < s.steps && gpbs_running(&s); step++) {
    bool alloc = nlive == 0 ||
                 (nlive < churn_max_live &&
                  gpbs_uniform(&s) >= (double)nlive / (double)churn_max_live);
    if (alloc) {
      size_t size = gpbs_log_uniform(&s, churn_min_size, churn_max_size);
      void *p;
      int rc = gpbs_alloc(&s, size, (uint32_t)(63 - __builtin_clzll(size)), &p);
      if (rc == 0) {
        live[nlive].p = p;
        live[nlive].size = size;
        live[nlive].value = gpbs_touch(&s, p, size);
        nlive++;
      } else if ((rc == GPB_ENOMEM || rc == GPB_ETOOBIG) && nlive > 0) {
        churn_free_one(&s, live, &nlive, false); /* make room, go on */
      } else if (rc != GPB_ENOMEM && rc != GPB_ETOOBIG) {
        break; /* unexpected: already reported */
      }
    } else {
      frees++;
      churn_free_one(&s, live, &nlive,
                     churn_verify_every && frees % churn_verify_every == 0);
    }
    gpbs_progress(&s, step + 1, "%llu live", (unsigned long long)nlive);
    gpbs_pace(&s);
  }

  gpbs_say(&s, "%llu steps done, %llu allocations live", (unsigned long long)step,
           (unsigned long long)nlive);
  gpbs_report(&s, "at the end");
  while (nlive) churn_free_one(&s, live, &nlive, true);
  free(live);
  return gpbs_finish(&s);
}
