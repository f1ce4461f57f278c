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

/* The planner's working set: one allocation per item, each placed as
 * part of a group (itself, or every copy of a periodic entry). */
typedef struct plan_work {
  plan_item_t *it;
  plan_group_t *g;
  plan_iv_t *ivs;
  plan_span_t *sp;       /* spans, then room to sort them */
  uint64_t *live;        /* per slot: its item while live, else all ones */
  gpb_plan_entry_t *pe;  /* the plan's entries */
  plan_tix_t tix;
  uint32_t *found;
  size_t n, m;           /* allocations; items made */
  size_t l, per, per0;   /* the periodic part (find_period) */
  size_t ng, niv;
} plan_work_t;

static void plan_work_free(plan_work_t *w) {
  free(w->it);
  free(w->g);
  free(w->ivs);
  free(w->sp);
  free(w->live);
  free(w->pe);
  free(w->found);
  free(w->tix.cover);
  free(w->tix.start);
  free(w->tix.grp);
  free(w->tix.next);
  free(w->tix.stamp);
}

/* One item per allocation of the run, its lifetime counted in
 * allocations. GPB_EHOSTMEM. */
static int plan_items(plan_work_t *w, const gpb_plan_op_t *ops, size_t nops,
                      size_t nslots, uint32_t shift) {
  for (size_t i = 0; i < nops; i++) w->n += ops[i].alloc != 0;
  size_t cap = w->n ? w->n : 1;
  if (w->n > UINT32_MAX - 1) return GPB_EHOSTMEM; /* 32-bit group numbers */
  w->it = calloc(cap, sizeof *w->it);
  w->g = calloc(cap, sizeof *w->g);
  w->ivs = calloc(cap + cap * PLAN_EXTRA_PERIODS, sizeof *w->ivs);
  w->sp = calloc(2 * cap, sizeof *w->sp);
  w->live = malloc((nslots ? nslots : 1) * sizeof *w->live);
  w->pe = calloc(cap, sizeof *w->pe);
  if (!w->it || !w->g || !w->ivs || !w->sp || !w->live || !w->pe)
    return GPB_EHOSTMEM;
  memset(w->live, 0xff, (nslots ? nslots : 1) * sizeof *w->live);
  uint64_t mask = (1ull << shift) - 1;
  for (size_t i = 0; i < nops; i++) {
    const gpb_plan_op_t *op = &ops[i];
    if (op->alloc) {
      plan_item_t *x = &w->it[w->m];
      x->units = (op->size >> shift) + ((op->size & mask) != 0);
      x->t0 = w->m;
      x->t1 = w->n; /* open until freed */
      w->pe[w->m].size = op->size;
      w->live[op->slot] = w->m++;
    } else if (w->live[op->slot] != UINT64_MAX) {
      w->it[w->live[op->slot]].t1 = w->m;
      w->live[op->slot] = UINT64_MAX;
    }
  }
  return 0;
}

/* The lifetimes of group k's copies of a periodic entry: the copies in
 * the run, then PLAN_EXTRA_PERIODS more a period apart, each living as
 * long as the longest-lived copy freed of the same entry of any
 * P-period: a following run goes on past the end of this one, and what
 * its next periods allocate must clear what the last one still holds.
 * An open copy lives to the end and, in a run that goes on, that long
 * too. */
static void plan_copies(plan_work_t *w, size_t k) {
  const plan_item_t *it = w->it;
  size_t m = w->m, per = w->per, c = (m - k + per - 1) / per;
  uint64_t life = 0, any = 0;
  for (size_t i = w->l + (k - w->l) % w->per0; i < m; i += w->per0)
    if (it[i].t1 < m) {
      if (it[i].t1 - it[i].t0 > life) life = it[i].t1 - it[i].t0;
      any = 1;
    }
  if (!any) life = UINT64_MAX / 4; /* never freed in the run */
  for (size_t i = 0; i < c + PLAN_EXTRA_PERIODS; i++) {
    uint64_t t = k + i * per;
    uint64_t e = i < c ? it[t].t1 : t + life;
    if (i < c && e == m && t + life > e) e = t + life;
    w->ivs[w->niv++] = (plan_iv_t){t, e};
  }
}

/* The groups, with their copies' lifetimes, largest first. */
static void plan_groups(plan_work_t *w) {
  find_period(w->it, w->m, &w->l, &w->per, &w->per0);
  w->ng = w->per ? w->l + w->per : w->m;
  for (size_t k = 0; k < w->ng; k++) {
    plan_group_t *x = &w->g[k];
    x->first = k;
    x->units = w->it[k].units;
    x->iv = w->niv;
    if (k < w->l || !w->per) {
      /* Open before the periodic part: alive for good (weights). */
      uint64_t e = w->it[k].t1 == w->m && w->per ? UINT64_MAX : w->it[k].t1;
      w->ivs[w->niv++] = (plan_iv_t){w->it[k].t0, e};
    } else {
      plan_copies(w, k);
    }
    x->niv = w->niv - x->iv;
    x->t0 = w->ivs[x->iv].t0;
  }
  qsort(w->g, w->ng, sizeof *w->g, by_size);
}

/* The time index: starts are below tmax, so ends past it change no
 * answer and are cut there. GPB_EHOSTMEM. */
static int plan_index(plan_work_t *w) {
  uint64_t tmax = 1;
  for (size_t i = 0; i < w->niv; i++)
    if (w->ivs[i].t0 + 1 > tmax) tmax = w->ivs[i].t0 + 1;
  size_t leaves = 1;
  while (leaves < tmax) leaves <<= 1;
  size_t ng = w->ng ? w->ng : 1;
  w->tix.leaves = leaves;
  w->tix.cover = calloc(2 * leaves, sizeof *w->tix.cover);
  w->tix.start = calloc(2 * leaves, sizeof *w->tix.start);
  w->tix.stamp = calloc(ng, sizeof *w->tix.stamp);
  w->found = calloc(ng, sizeof *w->found);
  if (!w->tix.cover || !w->tix.start || !w->tix.stamp || !w->found)
    return GPB_EHOSTMEM;
  return 0;
}

/* Places each group, largest first, at the lowest offset clear of every
 * placed group it meets in time. 0, GPB_EHOSTMEM, or progress's code. */
static int plan_place(plan_work_t *w, gpb_plan_progress_fn progress,
                      void *user) {
  plan_group_t *g = w->g;
  const plan_iv_t *ivs = w->ivs;
  int rc;
  for (size_t j = 0; j < w->ng; j++) {
    size_t k = 0;
    w->tix.query = (uint32_t)j + 1;
    for (size_t i = g[j].iv; i < g[j].iv + g[j].niv; i++)
      tix_query(&w->tix, ivs[i].t0, ivs[i].t1, w->found, &k);
    for (size_t i = 0; i < k; i++) {
      const plan_group_t *f = &g[w->found[i]];
      w->sp[i] = (plan_span_t){f->at, f->at + f->units};
    }
    sort_spans(w->sp, w->sp + (w->ng ? w->ng : 1), k);
    g[j].at = lowest_gap(w->sp, k, g[j].units);
    for (size_t i = g[j].iv; i < g[j].iv + g[j].niv; i++)
      if ((rc = tix_insert(&w->tix, (uint32_t)j, ivs[i].t0, ivs[i].t1)))
        return rc;
    if (progress && (j + 1) % 4096 == 0 &&
        (rc = progress(user, j + 1, w->ng)) > 0)
      return rc;
  }
  return 0;
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
  uint32_t shift = (uint32_t)__builtin_ctzll(min_block);
  plan_work_t w;
  memset(&w, 0, sizeof w);
  int rc = plan_items(&w, ops, nops, nslots, shift);
  if (!rc) {
    plan_groups(&w);
    rc = plan_index(&w);
  }
  if (!rc) rc = plan_place(&w, progress, user);
  if (!rc) {
    for (size_t j = 0; j < w.ng; j++)
      w.pe[w.g[j].first].offset = w.g[j].at << shift;
    rc = gpb_plan_create_periodic(w.pe, w.ng, w.per ? w.l : w.ng, out);
  } else if (rc == GPB_EHOSTMEM) {
    rc = gpb__fail(rc, "no host memory to plan %zu allocations", w.n);
  }
  plan_work_free(&w);
  return rc;
}
