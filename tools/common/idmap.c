/* SPDX-License-Identifier: MIT */
/* idmap.c: the tools' id map, what is not inline; idmap.h says why. */
#include "idmap.h"

#include <stdlib.h>

#define IDMAP_MIN 1024u

void gpbt_idmap_fini(gpbt_idmap_t *m) {
  free(m->s);
  memset(m, 0, sizeof *m);
}

void gpbt_idmap_clear(gpbt_idmap_t *m) {
  if (m->s) memset(m->s, 0, m->cap * sizeof *m->s);
  m->n = 0;
}

static int idmap_resize(gpbt_idmap_t *m, uint64_t ncap) {
  gpbt_idslot_t *ns = calloc(ncap, sizeof *ns);
  if (!ns) return GPB_EHOSTMEM;
  for (uint64_t i = 0; i < m->cap; i++) {
    if (!m->s[i].key) continue;
    uint64_t j = gpbt_idmap_home(m->s[i].key, ncap);
    while (ns[j].key) j = (j + 1) & (ncap - 1);
    ns[j] = m->s[i];
  }
  free(m->s);
  m->s = ns;
  m->cap = ncap;
  return 0;
}

int gpbt_idmap_grow(gpbt_idmap_t *m) {
  return idmap_resize(m, m->cap ? m->cap * 2 : IDMAP_MIN);
}

void gpbt_idmap_reserve(gpbt_idmap_t *m, uint64_t n) {
  uint64_t cap = IDMAP_MIN;
  while (cap < n + n / 3 + 1 && cap < (1ull << 40)) cap <<= 1;
  if (m->n == 0 && cap > m->cap) (void)idmap_resize(m, cap); /* else grows */
}
