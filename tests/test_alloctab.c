/* SPDX-License-Identifier: MIT */
/*
 * test_alloctab.c: the allocation table against a plain array, through
 * many incremental growths: inserts, finds and removes interleaved while
 * old slots migrate, with keys that collide and cluster.
 */
#include "testutil.h"
#include "core/core.h"

#define KEYS 200000

int main(void) {
  uint64_t seed = test_seed(), rng = seed;
  static uint64_t val[KEYS]; /* 0 = absent, else the stored `requested` */
  gpb__atab_t t;
  ASSERT_OK(gpb__atab_init(&t, 1));
  uint64_t live = 0, ops = (uint64_t)(3000000 * test_scale());
  for (uint64_t op = 0; op < ops; op++) {
    /* Clustered keys: consecutive runs and strided values. */
    uint64_t k = rng_below(&rng, 4) ? rng_below(&rng, KEYS)
                                    : (rng_below(&rng, KEYS / 64) * 64) % KEYS;
    /* Grow for a while, then shrink, so growth and migration overlap removes. */
    int grow = (op / 400000) % 2 == 0;
    gpb__arec_t *r = gpb__atab_find(&t, k);
    if ((r != NULL) != (val[k] != 0)) FAILF("op %" PRIu64 ": key %" PRIu64 " presence", op, k);
    if (r && r->requested != val[k]) FAILF("op %" PRIu64 ": key %" PRIu64 " value", op, k);
    if (!r && (grow || rng_below(&rng, 4) == 0)) {
      gpb__arec_t rec = {0};
      rec.requested = rng_next(&rng) | 1;
      ASSERT_OK(gpb__atab_insert(&t, k, &rec));
      val[k] = rec.requested;
      live++;
    } else if (r && (!grow || rng_below(&rng, 3) == 0)) {
      gpb__atab_remove(&t, k);
      val[k] = 0;
      live--;
    }
    if (gpb__atab_count(&t) != live) FAILF("op %" PRIu64 ": count %" PRIu64 " != %" PRIu64, op, gpb__atab_count(&t), live);
  }
  for (uint64_t k = 0; k < KEYS; k++) {
    gpb__arec_t *r = gpb__atab_find(&t, k);
    if ((r != NULL) != (val[k] != 0)) FAILF("final: key %" PRIu64, k);
  }
  printf("alloctab: %" PRIu64 " operations, %" PRIu64 " live, table of %" PRIu64 " slots\n", ops, live, t.cap);
  gpb__atab_fini(&t);

  /* Reserve: an empty table sized once takes that many inserts without
   * growing; a table in use is left alone. */
  ASSERT_OK(gpb__atab_init(&t, 1));
  ASSERT_OK(gpb__atab_reserve(&t, 5000));
  uint64_t cap = t.cap;
  ASSERT(cap >= 10000);
  for (uint64_t k = 0; k < 5000; k++) {
    gpb__arec_t rec = {0};
    rec.requested = k + 1;
    ASSERT_OK(gpb__atab_insert(&t, k * 3, &rec));
    ASSERT(t.cap == cap && t.old == NULL);
  }
  ASSERT_OK(gpb__atab_reserve(&t, 1u << 20));
  ASSERT(t.cap == cap);
  for (uint64_t k = 0; k < 5000; k++) {
    gpb__arec_t *r = gpb__atab_find(&t, k * 3);
    ASSERT(r && r->requested == k + 1);
  }
  gpb__atab_fini(&t);
  printf("alloctab reserve: ok\n");
  return 0;
}
