/* SPDX-License-Identifier: MIT */
/*
 * oom.c: failed allocations explained (oom.h): the map of live
 * allocations a block walk leaves, the cheapest-window search over it, and
 * the text and JSON an explanation prints as.
 *
 * Both searches score a window by (live bytes, live allocations, newest
 * allocation time) and keep the first of equals, going up in address, so
 * ties go to the lowest address. Aligned windows: a window no allocation
 * touches costs nothing and ends the search; a window wholly inside one
 * allocation is scored once, and the search jumps to that allocation's
 * end, so a pool-sized allocation costs one step, not one per window.
 */
#include "oom.h"
#include "json.h"
#include "replay.h" /* gpbt_ns_format */

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static uint64_t oom_end(const gpbt_oom_alloc_t *a) { return a->offset + a->size; }

/* Bytes of [off, off + size) inside [lo, hi). */
static uint64_t oom_clip(uint64_t off, uint64_t size, uint64_t lo, uint64_t hi) {
  uint64_t a = off > lo ? off : lo, b = off + size < hi ? off + size : hi;
  return b > a ? b - a : 0;
}

void gpbt_oom_map_init(gpbt_oom_map_t *m) { memset(m, 0, sizeof *m); }

void gpbt_oom_map_fini(gpbt_oom_map_t *m) {
  free(m->a);
  memset(m, 0, sizeof *m);
}

void gpbt_oom_map_clear(gpbt_oom_map_t *m) {
  m->n = 0;
  m->managed = m->min_block = 0;
  m->err = 0;
}

int gpbt_oom_map_block(const gpb_block_info_t *b, void *user) {
  gpbt_oom_map_t *m = user;
  if (!m->min_block) m->min_block = b->size >> b->order;
  m->managed = b->offset + b->size;
  if (!b->used) return 0; /* unmerged free buddies are free all the same */
  /* The later blocks of an allocation (trim, bestfit) repeat its record. */
  if (m->n && m->a[m->n - 1].offset == b->alloc_offset) return 0;
  if (m->n == m->cap) {
    size_t ncap = m->cap ? 2 * m->cap : 256;
    gpbt_oom_alloc_t *na = realloc(m->a, ncap * sizeof *na);
    if (!na) {
      m->err = GPB_EHOSTMEM;
      return 1;
    }
    m->a = na;
    m->cap = ncap;
  }
  gpbt_oom_alloc_t *a = &m->a[m->n++];
  memset(a, 0, sizeof *a);
  a->offset = b->alloc_offset;
  a->size = b->alloc_size;
  a->requested = b->requested;
  a->time_ns = b->time_ns;
  a->tag = b->tag;
  a->site = b->site;
  return 0;
}

static int oom_map_finish(gpbt_oom_map_t *m, int rc, gpbt_oom_name_fn name,
                          void *user) {
  if (m->err) return m->err;
  if (rc < 0) return rc;
  for (size_t i = 0; name && i < m->n; i++) name(user, &m->a[i]);
  return 0;
}

int gpbt_oom_map_pool(gpbt_oom_map_t *m, const gpb_pool_t *pool,
                      gpbt_oom_name_fn name, void *user) {
  gpbt_oom_map_clear(m);
  return oom_map_finish(m, gpb_pool_visit(pool, gpbt_oom_map_block, m), name,
                        user);
}

int gpbt_oom_map_model(gpbt_oom_map_t *m, const gpb_model_t *model,
                       gpbt_oom_name_fn name, void *user) {
  gpbt_oom_map_clear(m);
  return oom_map_finish(m, gpb_model_visit(model, gpbt_oom_map_block, m), name,
                        user);
}

/* ------------------------------------------------------------ search */

/* c beats best: fewer live bytes, then fewer allocations, then an older
 * newest allocation. Equal is not better: the lower address stays. */
static int oom_better(const gpbt_oom_window_t *c, const gpbt_oom_window_t *best) {
  if (!best->size) return 1;
  if (c->live_bytes != best->live_bytes) return c->live_bytes < best->live_bytes;
  if (c->live_allocs != best->live_allocs)
    return c->live_allocs < best->live_allocs;
  return c->newest_ns < best->newest_ns;
}

/* Windows [w*B, (w+1)*B) with (w+1)*B <= managed. */
static void oom_aligned(const gpbt_oom_map_t *m, uint64_t B,
                        gpbt_oom_window_t *best) {
  uint64_t nwin = m->managed / B;
  size_t i = 0; /* the first allocation ending after the window's start */
  for (uint64_t w = 0; w < nwin;) {
    uint64_t lo = w * B, hi = lo + B;
    while (i < m->n && oom_end(&m->a[i]) <= lo) i++;
    gpbt_oom_window_t c = {lo, B, 0, 0, 0, i};
    if (i == m->n || m->a[i].offset >= hi) { /* untouched: nothing beats it */
      if (oom_better(&c, best)) *best = c;
      return;
    }
    const gpbt_oom_alloc_t *a = &m->a[i];
    if (a->offset <= lo && oom_end(a) >= hi) {
      /* Inside one allocation, as are the windows up to its end: the
       * first of them stands for all. */
      c.live_bytes = B;
      c.live_allocs = 1;
      c.newest_ns = a->time_ns;
      if (oom_better(&c, best)) *best = c;
      w = oom_end(a) / B;
      continue;
    }
    for (size_t k = i; k < m->n && m->a[k].offset < hi; k++) {
      c.live_bytes += oom_clip(m->a[k].offset, m->a[k].size, lo, hi);
      c.live_allocs++;
      if (m->a[k].time_ns > c.newest_ns) c.newest_ns = m->a[k].time_ns;
    }
    if (oom_better(&c, best)) *best = c;
    w++;
  }
}

/* Runs [s, s+L) for s a multiple of min_block up to managed - L. The cost
 * falls only as s leaves an allocation and rises only as s + L enters
 * one, so its minima lie at s = 0, an allocation's end, an allocation's
 * start - L, or managed - L: those are scored, in increasing order. */
static int oom_runs(const gpbt_oom_map_t *m, uint64_t L, gpbt_oom_window_t *best) {
  const gpbt_oom_alloc_t *a = m->a;
  size_t n = m->n;
  uint64_t smax = m->managed - L;
  size_t *q = malloc((n ? n : 1) * sizeof *q); /* newest first, by time */
  if (!q) return GPB_EHOSTMEM;
  size_t qh = 0, qt = 0;
  size_t lo = 0, hi = 0; /* the run's allocations: [lo, hi) */
  uint64_t sum = 0;      /* their whole sizes */
  size_t ie = 0, is = 0; /* next end (ie = 0: the candidate 0), next start */
  int done = 0, scored = 0;
  uint64_t last = 0;
  while (!done) {
    uint64_t ve = ie == 0 ? 0 : ie <= n ? oom_end(&a[ie - 1]) : UINT64_MAX;
    while (is < n && a[is].offset < L) is++;
    uint64_t vs = is < n ? a[is].offset - L : UINT64_MAX;
    uint64_t s = ve < vs ? ve : vs;
    if (s == ve) ie++;
    else is++;
    if (s >= smax) {
      s = smax;
      done = 1;
    }
    if (scored && s <= last) continue;
    scored = 1;
    last = s;
    while (hi < n && a[hi].offset < s + L) {
      sum += a[hi].size;
      while (qt > qh && a[q[qt - 1]].time_ns <= a[hi].time_ns) qt--;
      q[qt++] = hi++;
    }
    while (lo < hi && oom_end(&a[lo]) <= s) sum -= a[lo++].size;
    while (qh < qt && q[qh] < lo) qh++;
    gpbt_oom_window_t c = {s, L, sum, hi - lo, 0, lo};
    if (lo < hi) {
      if (a[lo].offset < s) c.live_bytes -= s - a[lo].offset;
      if (oom_end(&a[hi - 1]) > s + L) c.live_bytes -= oom_end(&a[hi - 1]) - (s + L);
      c.newest_ns = a[q[qh]].time_ns;
    }
    if (oom_better(&c, best)) *best = c;
    if (!c.live_allocs) break; /* free: nothing beats it */
  }
  free(q);
  return 0;
}

int gpbt_oom_cheapest(const gpbt_oom_map_t *m, uint64_t size, int aligned,
                      gpbt_oom_window_t *out) {
  memset(out, 0, sizeof *out);
  if (!size || size > m->managed) return 0;
  if (aligned) {
    oom_aligned(m, size, out);
    return 0;
  }
  return oom_runs(m, size, out);
}

/* ------------------------------------------------------------ explain */

/* The largest aligned power-of-two block inside [lo, hi): the greatest
 * of its canonical blocks. */
static uint64_t oom_largest_block(uint64_t lo, uint64_t hi) {
  uint64_t best = 0;
  while (lo < hi) {
    uint64_t b = lo ? lo & -lo : UINT64_C(1) << 63;
    while (b > hi - lo) b >>= 1;
    if (b > best) best = b;
    lo += b;
  }
  return best;
}

int gpbt_oom_explain(const gpbt_oom_map_t *m, gpb_policy_t policy,
                     uint64_t requested, gpbt_oom_t *o) {
  o->policy = policy;
  o->requested = requested;
  o->aligned = policy != GPB_POLICY_BESTFIT;
  o->managed = m->managed;
  o->min_block = m->min_block;
  o->need = 0;
  o->list = NULL;
  o->site_names = NULL;
  o->nlist = 0;
  memset(&o->win, 0, sizeof o->win);
  /* Free space is the gaps between allocations; the largest block in a
   * gap is what the gap's buddies make once merged. */
  uint64_t used = 0, at = 0;
  o->largest_free = o->largest_run = 0;
  for (size_t i = 0; i <= m->n; i++) {
    uint64_t next = i < m->n ? m->a[i].offset : m->managed;
    if (next > at) {
      uint64_t lb = oom_largest_block(at, next);
      if (lb > o->largest_free) o->largest_free = lb;
      if (next - at > o->largest_run) o->largest_run = next - at;
    }
    if (i < m->n) {
      used += m->a[i].size;
      at = oom_end(&m->a[i]);
    }
  }
  o->free_bytes = m->managed - used;
  if (!m->min_block || requested > m->managed) return 0; /* too big */
  uint64_t units = requested ? (requested + m->min_block - 1) / m->min_block : 1;
  if (o->aligned) {
    uint64_t b = 1;
    while (b < units) b <<= 1;
    o->need = b * m->min_block;
  } else {
    o->need = units * m->min_block;
  }
  int rc = gpbt_oom_cheapest(m, o->need, o->aligned, &o->win);
  if (rc || !o->win.size || !o->win.live_allocs) return rc;
  o->nlist = o->win.live_allocs < GPBT_OOM_LIST ? (size_t)o->win.live_allocs
                                                : GPBT_OOM_LIST;
  o->list = malloc(o->nlist * sizeof *o->list);
  if (!o->list) {
    o->nlist = 0;
    return GPB_EHOSTMEM;
  }
  /* The nlist holding the most bytes of the window (the first of equals),
   * kept by replacing the least; then in address order. */
  uint64_t wlo = o->win.offset, whi = o->win.offset + o->win.size;
  size_t least = 0;
  for (size_t i = 0; i < o->win.live_allocs; i++) {
    gpbt_oom_alloc_t x = m->a[o->win.first + i];
    x.in_window = oom_clip(x.offset, x.size, wlo, whi);
    if (i < o->nlist) {
      o->list[i] = x;
    } else if (x.in_window > o->list[least].in_window) {
      o->list[least] = x;
    } else {
      continue;
    }
    if (i + 1 < o->nlist) continue;
    least = 0; /* the least, the last of equals: the first to go */
    for (size_t k = 1; k < o->nlist; k++)
      if (o->list[k].in_window < o->list[least].in_window ||
          (o->list[k].in_window == o->list[least].in_window &&
           o->list[k].offset > o->list[least].offset))
        least = k;
  }
  for (size_t i = 1; i < o->nlist; i++) {
    gpbt_oom_alloc_t x = o->list[i];
    size_t k = i;
    for (; k > 0 && o->list[k - 1].offset > x.offset; k--) o->list[k] = o->list[k - 1];
    o->list[k] = x;
  }
  return 0;
}

void gpbt_oom_free(gpbt_oom_t *o) {
  for (size_t i = 0; o->site_names && i < o->nlist; i++) free(o->site_names[i]);
  free(o->site_names);
  o->site_names = NULL;
  free(o->list);
  o->list = NULL;
  o->nlist = 0;
}

/* ------------------------------------------------------------ output */

static uint64_t oom_age(const gpbt_oom_t *o, const gpbt_oom_alloc_t *a) {
  return o->time_ns > a->time_ns ? o->time_ns - a->time_ns : 0;
}

void gpbt_oom_print(FILE *f, const gpbt_oom_t *o, const char *in) {
  char a[GPB_SIZE_FORMAT_MAX], b[GPB_SIZE_FORMAT_MAX], c[GPB_SIZE_FORMAT_MAX];
  gpb_size_format(o->requested, a, sizeof a);
  fprintf(f, "%sfailed at op %" PRIu64 " (id 0x%" PRIx64 ", tag %u): %" PRIu64
          " bytes requested (%s)", in, o->op, o->id, o->tag, o->requested, a);
  gpb_size_format(o->need, b, sizeof b);
  gpb_size_format(o->managed, c, sizeof c);
  if (!o->need)
    fprintf(f, ", more than the pool's %" PRIu64 " bytes (%s)\n", o->managed, c);
  else
    fprintf(f, "; needs a %s of %" PRIu64 " bytes (%s)\n",
            o->aligned ? "block" : "run", o->need, b);
  gpb_size_format(o->free_bytes, a, sizeof a);
  gpb_size_format(o->largest_free, b, sizeof b);
  fprintf(f, "%s  pool: %" PRIu64 " bytes free (%s), largest free block %"
          PRIu64 " bytes (%s)", in, o->free_bytes, a, o->largest_free, b);
  if (!o->aligned) {
    gpb_size_format(o->largest_run, c, sizeof c);
    fprintf(f, ", largest free run %" PRIu64 " bytes (%s)", o->largest_run, c);
  }
  fprintf(f, "\n");
  if (!o->need) return;
  if (!o->win.size) {
    fprintf(f, "%s  no window of %" PRIu64 " bytes: the pool's largest block "
            "is smaller\n", in, o->need);
    return;
  }
  gpb_size_format(o->win.live_bytes, a, sizeof a);
  fprintf(f, "%s  cheapest window: [0x%" PRIx64 ", 0x%" PRIx64 "), %" PRIu64
          " bytes live (%s) in %" PRIu64 " allocation%s", in, o->win.offset,
          o->win.offset + o->win.size, o->win.live_bytes, a,
          o->win.live_allocs, o->win.live_allocs == 1 ? "" : "s");
  if (!o->win.live_allocs) {
    fprintf(f, ": free, so the request should have fit\n");
    return;
  }
  fprintf(f, "; freed or moved, %s would have let it succeed:\n",
          o->win.live_allocs == 1 ? "it" : "they");
  for (size_t i = 0; i < o->nlist; i++) {
    const gpbt_oom_alloc_t *x = &o->list[i];
    char age[32];
    gpb_size_format(x->size, a, sizeof a);
    gpbt_ns_format(age, sizeof age, oom_age(o, x));
    fprintf(f, "%s    0x%" PRIx64 ": %" PRIu64 " bytes (%s)", in, x->offset,
            x->size, a);
    if (x->in_window != x->size)
      fprintf(f, ", %" PRIu64 " in the window", x->in_window);
    fprintf(f, ", requested %" PRIu64 ", age %s, tag %u", x->requested, age,
            x->tag);
    if (x->has_id) fprintf(f, ", id 0x%" PRIx64, x->id);
    if (x->site) fprintf(f, ", site %u", x->site);
    if (x->site && o->site_names && o->site_names[i])
      fprintf(f, " (%s)", o->site_names[i]);
    fprintf(f, "\n");
  }
  if (o->win.live_allocs > o->nlist) {
    uint64_t listed = 0;
    for (size_t i = 0; i < o->nlist; i++) listed += o->list[i].in_window;
    fprintf(f, "%s    ... and %" PRIu64 " more (%" PRIu64 " bytes in the "
            "window)\n", in, o->win.live_allocs - o->nlist,
            o->win.live_bytes - listed);
  }
}

void gpbt_oom_json(FILE *f, const gpbt_oom_t *o, const char *in) {
  char sep[64];
  snprintf(sep, sizeof sep, ",\n%s  ", in);
  gpbt_json_t j = {f, sep, 0};
  fprintf(f, "{\n%s  ", in);
  gpbt_json_put_u64(&j, "op", o->op);
  gpbt_json_put_u64(&j, "id", o->id);
  gpbt_json_put_u64(&j, "time_ns", o->time_ns);
  gpbt_json_put_u64(&j, "tag", o->tag);
  gpbt_json_put_u64(&j, "requested", o->requested);
  gpbt_json_put_str(&j, "needs", o->need ? o->aligned ? "block" : "run"
                                         : "more than the pool");
  gpbt_json_put_u64(&j, "need_bytes", o->need);
  gpbt_json_put_u64(&j, "free_bytes", o->free_bytes);
  gpbt_json_put_u64(&j, "largest_free", o->largest_free);
  gpbt_json_put_u64(&j, "largest_free_run", o->largest_run);
  gpbt_json_key(&j, "window");
  if (!o->win.size) {
    fprintf(f, "null\n%s}", in);
    return;
  }
  snprintf(sep, sizeof sep, ",\n%s    ", in);
  gpbt_json_t w = {f, sep, 0};
  fprintf(f, "{\n%s    ", in);
  gpbt_json_put_u64(&w, "offset", o->win.offset);
  gpbt_json_put_u64(&w, "size", o->win.size);
  gpbt_json_put_u64(&w, "live_bytes", o->win.live_bytes);
  gpbt_json_put_u64(&w, "live_allocs", o->win.live_allocs);
  gpbt_json_put_u64(&w, "listed", o->nlist);
  gpbt_json_key(&w, "allocs");
  fprintf(f, "[");
  for (size_t i = 0; i < o->nlist; i++) {
    const gpbt_oom_alloc_t *x = &o->list[i];
    gpbt_json_t r = {f, ", ", 0};
    fprintf(f, "%s\n%s      {", i ? "," : "", in);
    gpbt_json_put_u64(&r, "offset", x->offset);
    gpbt_json_put_u64(&r, "size", x->size);
    gpbt_json_put_u64(&r, "in_window", x->in_window);
    gpbt_json_put_u64(&r, "requested", x->requested);
    gpbt_json_put_u64(&r, "age_ns", oom_age(o, x));
    gpbt_json_put_u64(&r, "tag", x->tag);
    gpbt_json_key(&r, "id");
    if (x->has_id) fprintf(f, "%" PRIu64, x->id);
    else fprintf(f, "null");
    /* Only when known: what a trace without sites printed stays as it was. */
    if (x->site) gpbt_json_put_u64(&r, "site", x->site);
    if (x->site && o->site_names && o->site_names[i])
      gpbt_json_put_str(&r, "site_name", o->site_names[i]);
    fprintf(f, "}");
  }
  if (o->nlist) fprintf(f, "\n%s    ", in);
  fprintf(f, "]\n%s  }\n%s}", in, in);
}
