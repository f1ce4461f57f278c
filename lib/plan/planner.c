/* SPDX-License-Identifier: MIT */
/*
 * planner.c: lays out a recorded run offline, for a pool to follow the
 * next time the program runs (gpb_plan_make; gpubuddy-replay --plan-out,
 * gpubuddy.make_plan).
 *
 * Online, best fit cannot know how long a block will live, and on some
 * streams that costs a few percent of memory (docs/DESIGN.md). Offline
 * every lifetime is known: allocations are placed largest first (ties:
 * the earlier), each at the lowest offset, in min_block units, clear of
 * every allocation already placed that is alive at the same time. This is
 * the greedy-by-size layout of static memory planners; it is not optimal,
 * but on the sample traces it needs 1.000 to 1.010 times peak live bytes.
 * A time index finds what each allocation meets, so it costs O(n log T)
 * plus, per allocation, a sort of the k it meets: 0.5 s for the 19,734
 * allocations of the recorded GPT-2 inference stream, 14 s for 200,266
 * with up to 1,024 live (gpubuddy-sample-churn --steps 400000), on a
 * 2-core VM.
 */
#include "plan/plan.h"

#include <stdlib.h>
#include <string.h>

/* Time is counted in allocations: two blocks may share memory unless
 * one is allocated while the other lives, and the order of frees between
 * two allocations, which varies from step to step, does not matter. */
typedef struct plan_item {
  uint64_t units;  /* size in min_block units */
  uint64_t t0, t1; /* allocation t0; freed once t1 allocations were made
                      (the run's count if never freed: open) */
} plan_item_t;

/* What is placed as one: an allocation before the periodic part, or one
 * of its entries with every copy of it (at one offset in every period). */
typedef struct plan_group {
  uint64_t units, t0;      /* t0: the first copy's start (ties by it) */
  size_t first;           /* its entry (the first copy's item) */
  size_t iv, niv;         /* its copies' lifetimes: ivs[iv, iv + niv) */
  uint64_t at;
} plan_group_t;

typedef struct plan_iv {
  uint64_t t0, t1;
} plan_iv_t;

/* Copies of each periodic entry past the end of the run, in time: the
 * run that follows the plan goes on, and what its next periods will hold
 * next to what the last one held must be clear too. */
#define PLAN_EXTRA_PERIODS 3
/* Comparisons the search for a period may make: a fraction of a second. */
#define PLAN_PERIOD_WORK ((uint64_t)1 << 27)

typedef struct plan_span {
  uint64_t lo, hi; /* units taken by an overlapping group */
} plan_span_t;

/* Largest first; the earlier of equal sizes first (t0 is unique), so the
 * plan is the same on every libc. */
static int by_size(const void *a, const void *b) {
  const plan_group_t *x = a, *y = b;
  if (x->units != y->units) return x->units > y->units ? -1 : 1;
  return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

/* Sorts k spans by lo, tmp holding k more: a radix sort a byte at a
 * time, over the bytes any lo has. A group meets hundreds of others on
 * busy traces, and qsort's calls were 90% of planning time. */
static void sort_spans(plan_span_t *a, plan_span_t *tmp, size_t k) {
  if (k < 32) {
    for (size_t i = 1; i < k; i++) {
      plan_span_t x = a[i];
      size_t j = i;
      for (; j > 0 && a[j - 1].lo > x.lo; j--) a[j] = a[j - 1];
      a[j] = x;
    }
    return;
  }
  uint64_t bits = 0;
  for (size_t i = 0; i < k; i++) bits |= a[i].lo;
  plan_span_t *src = a, *dst = tmp;
  for (unsigned sh = 0; sh < 64 && (bits >> sh); sh += 8) {
    size_t cnt[257] = {0};
    for (size_t i = 0; i < k; i++) cnt[((src[i].lo >> sh) & 255) + 1]++;
    for (int b = 1; b <= 256; b++) cnt[b] += cnt[b - 1];
    for (size_t i = 0; i < k; i++) dst[cnt[(src[i].lo >> sh) & 255]++] = src[i];
    plan_span_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != a) memcpy(a, src, k * sizeof *a);
}

/* The lowest offset where n units clear every span (spans sorted). */
static uint64_t lowest_gap(const plan_span_t *s, size_t k, uint64_t n) {
  uint64_t pos = 0;
  for (size_t i = 0; i < k; i++) {
    if (s[i].lo >= pos && s[i].lo - pos >= n) break;
    if (s[i].hi > pos) pos = s[i].hi;
  }
  return pos;
}

/* Which placed groups live at some time in [a, b): a segment tree over
 * time, so that placing n groups costs O(n log T) plus what they meet,
 * not O(n^2). A copy's interval [a, b) is listed at the nodes that cover
 * it (a walk up from the leaf of time a finds those living at a) and at
 * every node above its start leaf (so the nodes that cover (a, b) find
 * those starting within). The two sets share no interval. */
typedef struct plan_tix {
  size_t leaves;          /* a power of two above every start */
  uint32_t *cover, *start; /* per node 1..2*leaves-1: a list's first entry */
  uint32_t *grp, *next;    /* entries from 1: a group, the next entry */
  size_t n, cap;
  uint32_t *stamp;         /* per group: the query that last found it */
  uint32_t query;
} plan_tix_t;

static int tix_push(plan_tix_t *t, uint32_t *head, uint32_t g) {
  if (t->n + 1 >= t->cap) {
    size_t nc = t->cap ? t->cap * 2 : 4096;
    if (nc > UINT32_MAX) return GPB_EHOSTMEM;
    uint32_t *a = realloc(t->grp, nc * sizeof *a);
    if (a) t->grp = a;
    uint32_t *b = a ? realloc(t->next, nc * sizeof *b) : NULL;
    if (!b) return GPB_EHOSTMEM;
    t->next = b;
    t->cap = nc;
  }
  uint32_t e = (uint32_t)++t->n;
  t->grp[e] = g;
  t->next[e] = *head;
  *head = e;
  return 0;
}

static int tix_insert(plan_tix_t *t, uint32_t g, uint64_t a, uint64_t b) {
  if (a >= b) return 0; /* alive while no allocation is made: meets none */
  if (b > t->leaves) b = t->leaves;
  int rc = 0;
  for (size_t l = a + t->leaves, r = b + t->leaves; l < r && !rc;
       l >>= 1, r >>= 1) {
    if (l & 1) rc = tix_push(t, &t->cover[l++], g);
    if (!rc && (r & 1)) rc = tix_push(t, &t->cover[--r], g);
  }
  for (size_t v = a + t->leaves; v >= 1 && !rc; v >>= 1)
    rc = tix_push(t, &t->start[v], g);
  return rc;
}

/* Adds to out[*k] each group not yet found by this query (t->query) in
 * list `e`. */
static void tix_take(plan_tix_t *t, uint32_t e, uint32_t *out, size_t *k) {
  for (; e; e = t->next[e]) {
    uint32_t g = t->grp[e];
    if (t->stamp[g] != t->query) {
      t->stamp[g] = t->query;
      out[(*k)++] = g;
    }
  }
}

/* The groups living at some time in [a, b), added to out[*k]. */
static void tix_query(plan_tix_t *t, uint64_t a, uint64_t b, uint32_t *out,
                      size_t *k) {
  if (a >= b) return;
  if (b > t->leaves) b = t->leaves;
  for (size_t v = a + t->leaves; v >= 1; v >>= 1)
    tix_take(t, t->cover[v], out, k);
  for (size_t l = a + 1 + t->leaves, r = b + t->leaves; l < r;
       l >>= 1, r >>= 1) {
    if (l & 1) tix_take(t, t->start[l++], out, k);
    if (r & 1) tix_take(t, t->start[--r], out, k);
  }
}

/* The first start, from l on, of a periodic part of period p (sizes
 * repeating every p0 | p) that a longer run can follow: copies of an
 * entry never overlap in time, so one offset serves them all, and no
 * copy looks kept for good. A copy alive at the end that is older than
 * every freed copy of its entry, or whose entry has none freed, is taken
 * for one: a set-up block of the same size as a step's, which the next
 * copy, in a longer run, would meet. Both push the start past them.
 * Returns m when no start is left; *work counts the comparisons. */
static size_t period_start(const plan_item_t *it, size_t m, size_t l,
                           size_t p, size_t p0, uint64_t *work) {
  size_t last = 0; /* 1 + the last copy overlapping its next one */
  for (size_t i = l; i + p < m; i++)
    if (it[i].t1 > it[i + p].t0) last = i + 1;
  *work += m - l;
  size_t at = last > l ? last : l;
  while (at < m && *work < PLAN_PERIOD_WORK) {
    l = at;
    for (size_t c = l; c < l + p0 && c < m; c++) {
      uint64_t life = 0;
      int freed = 0;
      for (size_t i = c; i < m; i += p0)
        if (it[i].t1 < m) {
          if (it[i].t1 - it[i].t0 > life) life = it[i].t1 - it[i].t0;
          freed = 1;
        }
      for (size_t i = c; i < m; i += p0)
        if (it[i].t1 >= m && (!freed || m - it[i].t0 > life) && i + 1 > at)
          at = i + 1;
    }
    *work += 2 * (m - l);
    if (at == l) return l;
  }
  return m;
}

/* The periodic part: the earliest L and shortest P (least L + P) with
 * allocation i of the size of allocation i + P for every i >= L, two
 * whole periods at least, and a quarter of the run covered. An entry
 * whose copies overlap in time (a gradient freed in the next step) needs
 * copies at two or more offsets, in turn: the plan's period is then R
 * times P, for the least R (at most 8) that parts every entry's copies,
 * and every one of its entries must have a copy in the run. *p = 0: none;
 * *p0 is P. */
static void find_period(const plan_item_t *it, size_t m, size_t *l,
                        size_t *p, size_t *p0) {
  size_t best = m, bl = 0, bp = 0, bp0 = 0;
  /* A run of one size throughout matches every period: the search stops
   * after PLAN_PERIOD_WORK comparisons, with the best found by then. */
  uint64_t work = 0;
  for (size_t per = 1; per <= m / 2 && per < best && work < PLAN_PERIOD_WORK;
       per++) {
    size_t s = m - per;
    while (s > 0 && it[s - 1].units == it[s - 1 + per].units) s--;
    work += m - per - s + 1;
    if (m - s < 2 * per || m - s < m / 4 || s + per >= best) continue;
    for (size_t r = 1; r <= 8 && r * per <= m - s && s + r * per < best; r++) {
      size_t at = period_start(it, m, s, r * per, per, &work);
      if (at >= m || m - at < 2 * per || m - at < m / 4 ||
          r * per > m - at || at + r * per >= best)
        continue;
      best = at + r * per;
      bl = at;
      bp = r * per;
      bp0 = per;
      break;
    }
  }
  *l = bl;
  *p = bp;
  *p0 = bp0;
}

int gpb_plan_make(const gpb_plan_op_t *ops, size_t nops, size_t nslots,
                  size_t min_block, gpb_plan_progress_fn progress, void *user,
                  gpb_plan_t **out) {
  if (!out) return gpb__fail(GPB_EINVAL, "out is NULL");
  *out = NULL;
  if (!min_block || (min_block & (min_block - 1)))
    return gpb__fail(GPB_EINVAL, "min_block %zu is not a power of two",
                     min_block);
  if (nops && !ops) return gpb__fail(GPB_EINVAL, "ops is NULL");
  for (size_t i = 0; i < nops; i++)
    if (ops[i].slot >= nslots)
      return gpb__fail(GPB_EINVAL, "op %zu: slot %u, not below %zu", i + 1,
                       ops[i].slot, nslots);
  const struct {
    const gpb_plan_op_t *ops;
    size_t n, nslots;
  } qq = {ops, nops, nslots}, *q = &qq;
  uint32_t shift = (uint32_t)__builtin_ctzll(min_block);
  size_t n = 0, m = 0;
  for (size_t i = 0; i < q->n; i++) n += q->ops[i].alloc != 0;
  size_t cap = n ? n : 1;
  plan_item_t *it = calloc(cap, sizeof *it);
  plan_group_t *g = calloc(cap, sizeof *g);
  plan_iv_t *ivs = calloc(cap + cap * PLAN_EXTRA_PERIODS, sizeof *ivs);
  plan_span_t *sp = calloc(2 * cap, sizeof *sp); /* spans, then sort room */
  uint64_t *live = malloc((q->nslots ? q->nslots : 1) * sizeof *live);
  gpb_plan_entry_t *pe = calloc(cap, sizeof *pe);
  plan_tix_t tix;
  memset(&tix, 0, sizeof tix);
  uint32_t *found = NULL;
  int rc = GPB_EHOSTMEM;
  if (n > UINT32_MAX - 1) goto out; /* groups are numbered in 32 bits */
  if (!it || !g || !ivs || !sp || !live || !pe) goto out;
  memset(live, 0xff, (q->nslots ? q->nslots : 1) * sizeof *live);
  for (size_t i = 0; i < q->n; i++) {
    const gpb_plan_op_t *op = &q->ops[i];
    if (op->alloc) {
      it[m].units = (op->size >> shift) + ((op->size & (min_block - 1)) != 0);
      it[m].t0 = m;
      it[m].t1 = n; /* open until freed */
      pe[m].size = op->size;
      live[op->slot] = m++;
    } else if (live[op->slot] != UINT64_MAX) {
      it[live[op->slot]].t1 = m;
      live[op->slot] = UINT64_MAX;
    }
  }
  size_t l, per, per0, ng, niv = 0;
  find_period(it, m, &l, &per, &per0);
  ng = per ? l + per : m;
  for (size_t k = 0; k < ng; k++) {
    plan_group_t *x = &g[k];
    x->first = k;
    x->units = it[k].units;
    x->iv = niv;
    if (k < l || !per) {
      /* Open before the periodic part: alive for good (weights). */
      uint64_t e = it[k].t1 == m && per ? UINT64_MAX : it[k].t1;
      ivs[niv++] = (plan_iv_t){it[k].t0, e};
    } else {
      /* The copies in the run, then PLAN_EXTRA_PERIODS more a period
       * apart, each living as long as the longest-lived copy freed of the
       * same entry of any P-period: a following run goes on past the end
       * of this one, and what its next periods allocate must clear what
       * the last one still holds. An open copy lives to the end and, in
       * a run that goes on, that long too. */
      size_t c = (m - k + per - 1) / per;
      uint64_t life = 0, any = 0;
      for (size_t i = l + (k - l) % per0; i < m; i += per0)
        if (it[i].t1 < m) {
          if (it[i].t1 - it[i].t0 > life) life = it[i].t1 - it[i].t0;
          any = 1;
        }
      if (!any) life = UINT64_MAX / 4; /* never freed in the run */
      for (size_t i = 0; i < c + PLAN_EXTRA_PERIODS; i++) {
        uint64_t t = k + i * per;
        uint64_t e = i < c ? it[t].t1 : t + life;
        if (i < c && e == m && t + life > e) e = t + life;
        ivs[niv++] = (plan_iv_t){t, e};
      }
    }
    x->niv = niv - x->iv;
    x->t0 = ivs[x->iv].t0;
  }
  qsort(g, ng, sizeof *g, by_size);
  /* The time index: starts are below tmax, so ends past it change no
   * answer and are cut there. */
  uint64_t tmax = 1;
  for (size_t i = 0; i < niv; i++)
    if (ivs[i].t0 + 1 > tmax) tmax = ivs[i].t0 + 1;
  size_t leaves = 1;
  while (leaves < tmax) leaves <<= 1;
  tix.leaves = leaves;
  tix.cover = calloc(2 * leaves, sizeof *tix.cover);
  tix.start = calloc(2 * leaves, sizeof *tix.start);
  tix.stamp = calloc(ng ? ng : 1, sizeof *tix.stamp);
  found = calloc(ng ? ng : 1, sizeof *found);
  rc = GPB_EHOSTMEM;
  if (!tix.cover || !tix.start || !tix.stamp || !found) goto out;
  for (size_t j = 0; j < ng; j++) {
    size_t k = 0;
    tix.query = (uint32_t)j + 1;
    for (size_t i = g[j].iv; i < g[j].iv + g[j].niv; i++)
      tix_query(&tix, ivs[i].t0, ivs[i].t1, found, &k);
    for (size_t i = 0; i < k; i++)
      sp[i] = (plan_span_t){g[found[i]].at, g[found[i]].at + g[found[i]].units};
    sort_spans(sp, sp + (ng ? ng : 1), k);
    g[j].at = lowest_gap(sp, k, g[j].units);
    for (size_t i = g[j].iv; i < g[j].iv + g[j].niv; i++)
      if ((rc = tix_insert(&tix, (uint32_t)j, ivs[i].t0, ivs[i].t1))) goto out;
    if (progress && (j + 1) % 4096 == 0 &&
        (rc = progress(user, j + 1, ng)) > 0)
      goto out;
  }
  for (size_t j = 0; j < ng; j++) pe[g[j].first].offset = g[j].at << shift;
  rc = gpb_plan_create_periodic(pe, ng, per ? l : ng, out);
out:
  free(it);
  free(g);
  free(ivs);
  free(sp);
  free(live);
  free(pe);
  free(found);
  free(tix.cover);
  free(tix.start);
  free(tix.grp);
  free(tix.next);
  free(tix.stamp);
  return rc;
}
