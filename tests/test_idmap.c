/* SPDX-License-Identifier: MIT */
/*
 * test_idmap.c: the tools' id map (tools/common/idmap.c) against a plain
 * array, over random inserts, claims left uncommitted, finds and removes
 * of ids shaped like addresses (multiples of 512, which cluster under a
 * weak hash), with growth, reserve and clear on the way.
 */
#include "idmap.h"
#include "testutil.h"

#define NIDS 4096

int main(void) {
  uint64_t seed = test_seed(), rng = seed | 1;
  static uint64_t val[NIDS];
  static int live[NIDS];
  gpbt_idmap_t m = {0};
  ASSERT(gpbt_idmap_find(&m, 5) == NULL); /* empty, unallocated */
  uint64_t n = 0, steps = (uint64_t)(200000 * test_scale());
  for (uint64_t step = 0; step < steps; step++) {
    uint64_t k = rng_next(&rng) % NIDS, id = 0x7f0000000000ull + k * 512;
    uint64_t r = rng_next(&rng) % 100;
    int err;
    if (r < 45) {
      gpbt_idslot_t *s = gpbt_idmap_claim(&m, id, &err);
      ASSERT_EQ(err, 0);
      if (live[k]) {
        ASSERT(s == NULL);
      } else {
        ASSERT(s != NULL && s->key == 0);
        if (r < 40) { /* else the claim is left, as a failed alloc leaves it */
          val[k] = rng_next(&rng);
          gpbt_idmap_commit(&m, s, id, val[k]);
          live[k] = 1;
          n++;
        }
      }
    } else if (r < 90) {
      gpbt_idslot_t *s = gpbt_idmap_find(&m, id);
      ASSERT((s != NULL) == live[k]);
      if (s) {
        ASSERT_U64_EQ(s->val, val[k]);
        gpbt_idmap_remove(&m, s);
        live[k] = 0;
        n--;
      }
    } else if (r < 99) {
      gpbt_idmap_prefetch(&m, id); /* a hint: changes nothing */
    } else if (rng_next(&rng) % 50 == 0) {
      gpbt_idmap_clear(&m);
      memset(live, 0, sizeof live);
      n = 0;
      gpbt_idmap_reserve(&m, NIDS); /* empty: sized at once */
    }
    ASSERT_U64_EQ(m.n, n);
    ASSERT(m.n * 4 <= m.cap * 3);
  }
  for (uint64_t k = 0; k < NIDS; k++) {
    gpbt_idslot_t *s = gpbt_idmap_find(&m, 0x7f0000000000ull + k * 512);
    ASSERT((s != NULL) == live[k]);
    if (s) ASSERT_U64_EQ(s->val, val[k]);
  }
  gpbt_idmap_fini(&m);
  gpbt_idmap_reserve(&m, 3000);
  ASSERT(m.cap >= 4096 && m.n == 0);
  gpbt_idmap_fini(&m);
  printf("id map: %" PRIu64 " random steps against an array: ok\n", steps);
  return 0;
}
