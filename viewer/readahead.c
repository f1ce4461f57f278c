/* SPDX-License-Identifier: MIT */
/*
 * readahead.c: a trace file read and parsed on a thread of its own.
 *
 * Replaying a trace file is parsing (and inflating, for .gz) plus ingest,
 * and on one thread the two add up: on the development VM parsing a plain
 * trace took 0.37 s and ingest 0.48 s per 3M ops. Here a reader thread
 * fills chunks of ops while the viewer ingests earlier ones, so the two
 * overlap on two cores. Memory is RA_DEPTH chunks, whatever the trace's
 * length. Ops, the end and a parse error arrive in file order: the error
 * after every good op before it, as gpb_trace_next gives them.
 *
 * The ring of chunks is owned slot by slot: the thread writes only slots
 * past the consumer's, and hands each over under the lock.
 *
 * Call site texts live in the reader, which the thread owns: as it reads
 * an op that names a site it has not passed on, it copies the site's
 * frames into a table of the op source's (vsitetab_t), under that
 * table's lock, so the viewer looks them up while the thread reads on.
 */
#include "view.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RA_CHUNK 4096u
#define RA_DEPTH 4u

typedef struct ra_chunk {
  gpb_trace_op_t op[RA_CHUNK];
  size_t n;
  int rc; /* after the ops: 1 more follow, 0 the end, <0 an error */
} ra_chunk_t;

struct vsitetab {
  pthread_mutex_t mu;
  char **s;     /* by site id */
  uint32_t cap;
};

vsitetab_t *vsitetab_new(void) {
  vsitetab_t *t = calloc(1, sizeof *t);
  if (t) pthread_mutex_init(&t->mu, NULL);
  return t;
}

void vsitetab_free(vsitetab_t *t) {
  if (!t) return;
  for (uint32_t i = 0; i < t->cap; i++) free(t->s[i]);
  free(t->s);
  pthread_mutex_destroy(&t->mu);
  free(t);
}

const char *vsitetab_get(vsitetab_t *t, uint32_t site) {
  if (!t) return NULL;
  pthread_mutex_lock(&t->mu);
  const char *p = site < t->cap ? t->s[site] : NULL;
  pthread_mutex_unlock(&t->mu);
  return p;
}

/* Whether the table lacks `site`; only the reading thread adds, so it
 * may ask without the lock. */
static int sitetab_lacks(const vsitetab_t *t, uint32_t site) {
  return site >= t->cap || !t->s[site];
}

/* Copies the frames of `site` in; without memory the site shows none. */
static void sitetab_put(vsitetab_t *t, uint32_t site, const char *text) {
  char *copy = text ? strdup(text) : NULL;
  if (!copy) return;
  pthread_mutex_lock(&t->mu);
  if (site >= t->cap) {
    uint32_t cap = t->cap ? t->cap : 64;
    while (cap <= site) cap *= 2;
    char **s = realloc(t->s, cap * sizeof *s);
    if (!s) {
      pthread_mutex_unlock(&t->mu);
      free(copy);
      return;
    }
    memset(s + t->cap, 0, (cap - t->cap) * sizeof *s);
    t->s = s;
    t->cap = cap;
  }
  if (!t->s[site]) t->s[site] = copy, copy = NULL;
  pthread_mutex_unlock(&t->mu);
  free(copy);
}

struct vra {
  gpb_trace_reader_t *rd;
  vsitetab_t *sites; /* the op source's, or NULL */
  pthread_t th;
  int threaded;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* a chunk filled, a slot freed, or stop */
  ra_chunk_t *ring;
  unsigned head, count; /* filled chunks: head .. head+count-1 */
  int stop;
  ra_chunk_t *cur; /* the chunk being consumed (slot head) */
  size_t pos;
  int final, final_rc; /* the end or an error was delivered */
  char err[256];
  char warn[400]; /* gpb_trace_warning at the end, set before it is handed
                     over (under the lock, threaded) */
};

/* An op just read names a site the table lacks: its text goes in. */
static void ra_site(vra_t *r, const gpb_trace_op_t *op) {
  if (op->site && r->sites && sitetab_lacks(r->sites, op->site))
    sitetab_put(r->sites, op->site, gpb_trace_site(r->rd, op->site));
}

static int ra_fill(vra_t *r, ra_chunk_t *c) {
  int rc = 1;
  c->n = 0;
  while (c->n < RA_CHUNK && (rc = gpb_trace_next(r->rd, &c->op[c->n])) == 1)
    ra_site(r, &c->op[c->n++]);
  if (rc < 0)
    snprintf(r->err, sizeof r->err, "%s",
             *gpb_trace_error(r->rd) ? gpb_trace_error(r->rd) : gpb_strerror(rc));
  if (rc == 0) snprintf(r->warn, sizeof r->warn, "%s", gpb_trace_warning(r->rd));
  c->rc = rc;
  return rc;
}

static void *ra_main(void *arg) {
  vra_t *r = arg;
  pthread_mutex_lock(&r->mu);
  for (;;) {
    while (r->count == RA_DEPTH && !r->stop) pthread_cond_wait(&r->cv, &r->mu);
    if (r->stop) break;
    ra_chunk_t *c = &r->ring[(r->head + r->count) % RA_DEPTH];
    pthread_mutex_unlock(&r->mu);
    int rc = ra_fill(r, c);
    pthread_mutex_lock(&r->mu);
    r->count++;
    pthread_cond_broadcast(&r->cv);
    if (rc != 1) break;
  }
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

int vra_open(const char *path, vsitetab_t *sites, vra_t **out) {
  *out = NULL;
  vra_t *r = calloc(1, sizeof *r);
  if (!r) return GPB_EHOSTMEM;
  r->sites = sites;
  int rc = gpb_trace_open(path, &r->rd);
  if (rc) {
    snprintf(r->err, sizeof r->err, "%s", gpb_last_error_detail());
    fprintf(stderr, "gpubuddy-view: cannot open trace %s: %s%s%s\n", path,
            gpb_strerror(rc), *r->err ? ": " : "", r->err);
    free(r);
    return rc;
  }
  r->ring = malloc(RA_DEPTH * sizeof *r->ring);
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  /* Without the memory or the thread, read on the caller's thread; and
   * standard input too, where a read may wait forever and closing would
   * then wait for it. */
  r->threaded = r->ring && strcmp(path, "-") != 0 &&
                pthread_create(&r->th, NULL, ra_main, r) == 0;
  *out = r;
  return 0;
}

int vra_next(vra_t *r, gpb_trace_op_t *op) {
  if (r->final) return r->final_rc;
  if (!r->threaded) {
    int rc = gpb_trace_next(r->rd, op);
    if (rc == 1) ra_site(r, op);
    if (rc < 0)
      snprintf(r->err, sizeof r->err, "%s",
               *gpb_trace_error(r->rd) ? gpb_trace_error(r->rd) : gpb_strerror(rc));
    if (rc == 0)
      snprintf(r->warn, sizeof r->warn, "%s", gpb_trace_warning(r->rd));
    if (rc != 1) r->final = 1, r->final_rc = rc;
    return rc;
  }
  for (;;) {
    if (r->cur) {
      if (r->pos < r->cur->n) {
        *op = r->cur->op[r->pos++];
        return 1;
      }
      int rc = r->cur->rc;
      pthread_mutex_lock(&r->mu);
      r->head = (r->head + 1) % RA_DEPTH;
      r->count--;
      pthread_cond_broadcast(&r->cv);
      pthread_mutex_unlock(&r->mu);
      r->cur = NULL;
      if (rc != 1) {
        r->final = 1;
        r->final_rc = rc;
        return rc;
      }
    }
    pthread_mutex_lock(&r->mu);
    while (r->count == 0) pthread_cond_wait(&r->cv, &r->mu);
    r->cur = &r->ring[r->head];
    r->pos = 0;
    pthread_mutex_unlock(&r->mu);
  }
}

const char *vra_error(const vra_t *r) { return r->err; }

const char *vra_warning(const vra_t *r) { return r->warn; }

void vra_close(vra_t *r) {
  if (!r) return;
  if (r->threaded) {
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->th, NULL);
  }
  pthread_cond_destroy(&r->cv);
  pthread_mutex_destroy(&r->mu);
  gpb_trace_close(r->rd);
  free(r->ring);
  free(r);
}
