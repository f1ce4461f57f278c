/* SPDX-License-Identifier: MIT */
/*
 * zin.c: the bytes under trace readers: plain text, any gzip stream, or
 * blocked gzip (zblock.h), whose members it inflates whole. Part of
 * libgpubuddy-read.
 *
 * Members are independent, so on a machine with cores to spare the
 * reader inflates several at once: the calling thread reads each member
 * in order into a slot of a small ring, workers inflate slots as they
 * come, and text and faults are handed out in file order. A fault a
 * worker finds waits behind the text of the members before it, as in
 * the one-thread path.
 */
#include "trace/trace.h"
#include "trace/zblock.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ZIN_CAP (4 * ZB_MEMBER_MAX) /* compressed bytes read at a time */

enum { ZIN_PLAIN, ZIN_STREAM, ZIN_BLOCKED };

/* The inflater of one thread: libdeflate's, or a raw zlib stream. */
typedef struct zdec {
#ifdef GPB_HAVE_LIBDEFLATE
  struct libdeflate_decompressor *ld;
#else
  z_stream zs;
  int live;
#endif
} zdec_t;

#define ZPAR_MAX_WORKERS 8

/* One member on its way: read by the caller, inflated by a worker. */
typedef struct zjob {
  unsigned char *src;  /* the whole member, header to trailer */
  unsigned char *text; /* its text, once inflated */
  uint32_t msize, tlen;
  uint64_t at;     /* its file offset, for messages */
  int done;        /* inflated (under zpar.lock) */
  const char *why; /* what the worker found wrong, or NULL */
} zjob_t;

/* Parallel inflate of blocked members. Slots are used in file order:
 * [head, head+count) are in flight, workers take them from `work` on. */
typedef struct zpar {
  pthread_mutex_t lock;
  pthread_cond_t work_cv, done_cv;
  pthread_t tid[ZPAR_MAX_WORKERS];
  zdec_t dec[ZPAR_MAX_WORKERS];
  int nworkers, started, stop;
  zjob_t *jobs;
  unsigned njobs, head, count, work;
  int held;       /* the caller is reading jobs[head]'s text */
  int read_end;   /* no more members will be queued */
  int pend;       /* a fault found reading, after the queued members */
  char pend_msg[256];
} zpar_t;
struct gpb__zin {
  int fd;
  int mode;
  int eof;       /* read() returned 0 */
  int done;      /* the clean end was seen; next returns 0 */
  int seen_last; /* blocked: the empty last member was read */
  int err;       /* a stream error held back behind the text before it */
  char msg[256];
  char cut[200]; /* the file ended early: what was lost ("" when not) */
  unsigned char *in; /* bytes as read from the file */
  size_t in_len, in_pos;
  uint64_t base; /* file offset of in[0], for messages */
  unsigned char *out; /* inflated text handed out by gpb__zin_next */
  z_stream zs; /* a foreign stream's inflater */
  int zs_live;
  zdec_t dec;  /* blocked members, one thread */
  zpar_t *par; /* blocked members, several threads; NULL for one */
};

static int zdec_init(zdec_t *d) {
#ifdef GPB_HAVE_LIBDEFLATE
  return (d->ld = libdeflate_alloc_decompressor()) ? 0 : GPB_EHOSTMEM;
#else
  if (inflateInit2(&d->zs, -15) != Z_OK) return GPB_EHOSTMEM;
  d->live = 1;
  return 0;
#endif
}

static void zdec_fini(zdec_t *d) {
#ifdef GPB_HAVE_LIBDEFLATE
  if (d->ld) libdeflate_free_decompressor(d->ld);
  d->ld = NULL;
#else
  if (d->live) inflateEnd(&d->zs);
  d->live = 0;
#endif
}

/* Inflates the member at m (msize bytes, its text tlen long) into out
 * and checks the CRC: NULL, or what is wrong. Touches nothing shared, so
 * workers call it unlocked. */
static const char *zb_inflate(zdec_t *d, const unsigned char *m, uint32_t msize,
                              uint32_t tlen, unsigned char *out) {
  const unsigned char *src = m + ZB_HDR;
  size_t slen = msize - ZB_HDR - ZB_TRL, got = 0;
  int ok;
#ifdef GPB_HAVE_LIBDEFLATE
  size_t used = 0;
  ok = libdeflate_deflate_decompress_ex(d->ld, src, slen, out, tlen, &used,
                                        &got) == LIBDEFLATE_SUCCESS &&
       used == slen;
#else
  inflateReset(&d->zs);
  d->zs.next_in = (unsigned char *)src;
  d->zs.avail_in = (uInt)slen;
  d->zs.next_out = out;
  d->zs.avail_out = ZB_TEXT_MAX;
  ok = inflate(&d->zs, Z_FINISH) == Z_STREAM_END && d->zs.avail_in == 0;
  got = ZB_TEXT_MAX - d->zs.avail_out;
#endif
  if (!ok || got != tlen) return "damaged deflate data";
  if (zb_crc(out, tlen) != zb_get32(m + msize - 8)) return "CRC mismatch";
  return NULL;
}

/* Makes at least want bytes available at in[in_pos] unless the file ends
 * first. The number available, or <0 on a read error. */
static long zin_fill(gpb__zin_t *z, size_t want) {
  if (z->in_len - z->in_pos >= want || z->eof) return (long)(z->in_len - z->in_pos);
  if (z->in_pos) {
    memmove(z->in, z->in + z->in_pos, z->in_len - z->in_pos);
    z->base += z->in_pos;
    z->in_len -= z->in_pos;
    z->in_pos = 0;
  }
  while (z->in_len < want && !z->eof) {
    ssize_t n = read(z->fd, z->in + z->in_len, ZIN_CAP - z->in_len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return gpb__fail(GPB_EIO, "read error: %s", strerror(errno));
    }
    if (n == 0) z->eof = 1;
    z->in_len += (size_t)n;
  }
  return (long)(z->in_len - z->in_pos);
}

static int zb_corrupt_at(uint64_t at, const char *why) {
  return gpb__fail(GPB_EFORMAT,
                   "corrupt or truncated gzip stream (block at byte %llu: %s)",
                   (unsigned long long)at, why);
}

static int zin_corrupt(gpb__zin_t *z, const char *why) {
  return zb_corrupt_at(z->base + z->in_pos, why);
}

/* The file ends early (a writer killed before it closed the trace): the
 * members before are whole, so the text ends here, with a note that
 * the reader turns into a warning. 0, as at the clean end. */
static int zin_cut(gpb__zin_t *z, const char *where) {
  snprintf(z->cut, sizeof z->cut, "the gzip stream ends at byte %llu %s: "
           "cut short (a killed writer?); what came before it was read",
           (unsigned long long)(z->base + z->in_len), where);
  return 0;
}

const char *gpb__zin_cut(const gpb__zin_t *z) { return z ? z->cut : ""; }

/* Reads the next member's bytes and checks its frame (header, lengths,
 * what may follow the last). 1 with *m at the member in z->in (valid
 * until the next read), 0 at the clean end, or <0. */
static int zin_member(gpb__zin_t *z, const unsigned char **m, uint32_t *msize,
                      uint32_t *tlen) {
  long have = zin_fill(z, ZB_HDR);
  if (have < 0) return (int)have;
  if (have == 0) {
    if (!z->seen_last)
      return zin_cut(z, "without its last block");
    return 0;
  }
  if (z->seen_last) return zin_corrupt(z, "data after the last block");
  if (have < ZB_HDR) return zin_cut(z, "inside a block's header");
  const unsigned char *h = z->in + z->in_pos;
  if (!zb_is_header(h)) return zin_corrupt(z, "not a gpubuddy gzip block");
  uint32_t len = zb_get32(h + 16);
  if (len < ZB_HDR + ZB_TRL + 2 || len > ZB_MEMBER_MAX)
    return zin_corrupt(z, "block length out of range");
  have = zin_fill(z, len);
  if (have < 0) return (int)have;
  if ((size_t)have < len) return zin_cut(z, "inside a block");
  h = z->in + z->in_pos;
  uint32_t t = zb_get32(h + len - 4);
  if (t > ZB_TEXT_MAX) return zin_corrupt(z, "text length out of range");
  *m = h;
  *msize = len;
  *tlen = t;
  return 1;
}

static int zin_next_blocked(gpb__zin_t *z, unsigned char **p, size_t *n) {
  for (;;) {
    const unsigned char *m;
    uint32_t msize, tlen;
    int rc = zin_member(z, &m, &msize, &tlen);
    if (rc <= 0) return rc;
    const char *why = zb_inflate(&z->dec, m, msize, tlen, z->out);
    if (why) return zin_corrupt(z, why);
    z->in_pos += msize;
    if (tlen == 0) {
      z->seen_last = 1;
      continue;
    }
    *p = z->out;
    *n = tlen;
    return 1;
  }
}

/* ------------------------------------------------ several inflate threads */

static void *zpar_main(void *arg) {
  gpb__zin_t *z = arg;
  zpar_t *q = z->par;
  pthread_mutex_lock(&q->lock);
  zdec_t *dec = &q->dec[q->started++];
  for (;;) {
    while (!q->stop && q->work == q->head + q->count)
      pthread_cond_wait(&q->work_cv, &q->lock);
    if (q->stop) break;
    zjob_t *j = &q->jobs[q->work++ % q->njobs];
    pthread_mutex_unlock(&q->lock);
    const char *why = zb_inflate(dec, j->src, j->msize, j->tlen, j->text);
    pthread_mutex_lock(&q->lock);
    j->why = why;
    j->done = 1;
    pthread_cond_broadcast(&q->done_cv);
  }
  pthread_mutex_unlock(&q->lock);
  return NULL;
}

/* Reads members into free slots until the ring is full or the file ends.
 * A fault in the framing stops reading; it is reported once the members
 * queued before it are handed out. */
static void zpar_fill(gpb__zin_t *z) {
  zpar_t *q = z->par;
  while (!q->read_end && q->count < q->njobs) {
    const unsigned char *m;
    uint32_t msize, tlen;
    int rc = zin_member(z, &m, &msize, &tlen);
    if (rc <= 0) {
      q->read_end = 1;
      if (rc < 0) {
        q->pend = rc;
        snprintf(q->pend_msg, sizeof q->pend_msg, "%s", gpb_last_error_detail());
      }
      return;
    }
    /* Only this thread writes a free slot, and a worker reads it after
     * the lock below publishes it. */
    zjob_t *j = &q->jobs[(q->head + q->count) % q->njobs];
    memcpy(j->src, m, msize);
    j->msize = msize;
    j->tlen = tlen;
    j->at = z->base + z->in_pos;
    j->why = NULL;
    z->in_pos += msize;
    if (tlen == 0) z->seen_last = 1;
    pthread_mutex_lock(&q->lock);
    j->done = 0;
    q->count++;
    pthread_cond_signal(&q->work_cv);
    pthread_mutex_unlock(&q->lock);
  }
}

static int zin_next_par(gpb__zin_t *z, unsigned char **p, size_t *n) {
  zpar_t *q = z->par;
  for (;;) {
    if (q->held) { /* the caller is done with the text handed out last */
      pthread_mutex_lock(&q->lock);
      q->head++;
      q->count--;
      q->held = 0;
      pthread_mutex_unlock(&q->lock);
    }
    zpar_fill(z);
    if (q->count == 0) {
      if (q->pend) return gpb__fail(q->pend, "%s", q->pend_msg);
      return 0;
    }
    zjob_t *j = &q->jobs[q->head % q->njobs];
    pthread_mutex_lock(&q->lock);
    while (!j->done) pthread_cond_wait(&q->done_cv, &q->lock);
    pthread_mutex_unlock(&q->lock);
    q->held = 1;
    if (j->why) return zb_corrupt_at(j->at, j->why);
    if (j->tlen == 0) continue; /* the empty last member */
    *p = j->text;
    *n = j->tlen;
    return 1;
  }
}

static void zpar_free(gpb__zin_t *z) {
  zpar_t *q = z->par;
  if (!q) return;
  pthread_mutex_lock(&q->lock);
  q->stop = 1;
  pthread_cond_broadcast(&q->work_cv);
  pthread_mutex_unlock(&q->lock);
  for (int i = 0; i < q->nworkers; i++) pthread_join(q->tid[i], NULL);
  for (int i = 0; i < ZPAR_MAX_WORKERS; i++) zdec_fini(&q->dec[i]);
  for (unsigned i = 0; q->jobs && i < q->njobs; i++) {
    free(q->jobs[i].src);
    free(q->jobs[i].text);
  }
  free(q->jobs);
  pthread_cond_destroy(&q->work_cv);
  pthread_cond_destroy(&q->done_cv);
  pthread_mutex_destroy(&q->lock);
  free(q);
  z->par = NULL;
}

/* How many inflate threads a blocked file gets: GPB_INFLATE_THREADS if
 * set (0: inflate on the calling thread), else the cores left after two
 * (the parser and a replay), at most 4. On the 2-core development VM one
 * worker made gpubuddy-replay 15% faster but the viewer, which already
 * runs two threads, 8% slower, so fewer than 4 cores get none. */
static int zpar_workers(void) {
  const char *e = getenv("GPB_INFLATE_THREADS");
  if (e && *e) {
    long v = strtol(e, NULL, 10);
    return v < 0 ? 0 : v > ZPAR_MAX_WORKERS ? ZPAR_MAX_WORKERS : (int)v;
  }
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu < 4) return 0;
  return ncpu - 2 > 4 ? 4 : (int)(ncpu - 2);
}

/* Starts the workers; on any failure the reader stays on one thread. */
static void zpar_start(gpb__zin_t *z, int nworkers) {
  zpar_t *q = calloc(1, sizeof *q);
  if (!q) return;
  z->par = q;
  pthread_mutex_init(&q->lock, NULL);
  pthread_cond_init(&q->work_cv, NULL);
  pthread_cond_init(&q->done_cv, NULL);
  q->njobs = 2u * (unsigned)nworkers + 2u;
  q->jobs = calloc(q->njobs, sizeof *q->jobs);
  int ok = q->jobs != NULL;
  for (unsigned i = 0; ok && i < q->njobs; i++)
    ok = (q->jobs[i].src = malloc(ZB_MEMBER_MAX)) &&
         (q->jobs[i].text = malloc(ZB_TEXT_MAX));
  for (int i = 0; ok && i < nworkers; i++) ok = zdec_init(&q->dec[i]) == 0;
  for (int i = 0; ok && i < nworkers; i++) {
    if (pthread_create(&q->tid[i], NULL, zpar_main, z) != 0) ok = 0;
    else q->nworkers++;
  }
  if (!ok) zpar_free(z);
}

/* Hands out the text inflated so far; an error found after it waits for
 * the next call, so no line before a fault is lost. */
static int zin_stream_fault(gpb__zin_t *z, int rc, unsigned char **p,
                            size_t *n) {
  size_t got = ZB_TEXT_MAX - z->zs.avail_out;
  if (!got) return rc;
  z->err = rc;
  snprintf(z->msg, sizeof z->msg, "%s", gpb_last_error_detail());
  *p = z->out;
  *n = got;
  return 1;
}

/* Any gzip stream, members one after another, through zlib. */
static int zin_next_stream(gpb__zin_t *z, unsigned char **p, size_t *n) {
  z_stream *s = &z->zs;
  s->next_out = z->out;
  s->avail_out = ZB_TEXT_MAX;
  int rc = 0;
  while (s->avail_out) {
    long have = zin_fill(z, 1);
    if (have < 0) return zin_stream_fault(z, (int)have, p, n);
    if (have == 0) { /* cut short: the text so far, then the end */
      zin_cut(z, "inside a member");
      z->done = 1;
      break;
    }
    s->next_in = z->in + z->in_pos;
    s->avail_in = (uInt)have;
    int zrc = inflate(s, Z_NO_FLUSH);
    z->in_pos += (size_t)have - s->avail_in;
    if (zrc == Z_STREAM_END) {
      /* Another member may follow; anything else after one is an error
       * (gzip only warns, but then bytes of the trace could be lost). */
      have = zin_fill(z, 2);
      if (have < 0) return zin_stream_fault(z, (int)have, p, n);
      if (have == 0) {
        z->done = 1;
        break;
      }
      const unsigned char *m = z->in + z->in_pos;
      if (have < 2 || m[0] != 0x1f || m[1] != 0x8b) {
        rc = gpb__fail(GPB_EFORMAT,
                       "corrupt or truncated gzip stream (data after its "
                       "end at byte %llu)",
                       (unsigned long long)(z->base + z->in_pos));
        return zin_stream_fault(z, rc, p, n);
      }
      inflateReset(s);
    } else if (zrc != Z_OK && zrc != Z_BUF_ERROR) {
      rc = gpb__fail(zrc == Z_MEM_ERROR ? GPB_EHOSTMEM : GPB_EFORMAT,
                     "corrupt or truncated gzip stream (%s)",
                     s->msg ? s->msg : "zlib error");
      return zin_stream_fault(z, rc, p, n);
    }
  }
  *p = z->out;
  *n = ZB_TEXT_MAX - s->avail_out;
  return *n ? 1 : 0;
}

int gpb__zin_next(gpb__zin_t *z, unsigned char **p, size_t *n) {
  *p = NULL;
  *n = 0;
  if (z->err) return gpb__fail(z->err, "%s", z->msg);
  if (z->done) return 0;
  if (z->mode == ZIN_BLOCKED) {
    int rc = z->par ? zin_next_par(z, p, n) : zin_next_blocked(z, p, n);
    if (rc < 0) { /* sticky, like the others */
      z->err = rc;
      snprintf(z->msg, sizeof z->msg, "%s", gpb_last_error_detail());
    } else if (rc == 0) {
      z->done = 1;
    }
    return rc;
  }
  if (z->mode == ZIN_STREAM) return zin_next_stream(z, p, n);
  long have = zin_fill(z, 1);
  if (have < 0) return (int)have;
  if (have == 0) {
    z->done = 1;
    return 0;
  }
  /* Plain text is handed out in place; the next call reads past it. */
  *p = z->in + z->in_pos;
  *n = (size_t)have;
  z->in_pos = z->in_len;
  return 1;
}

void gpb__zin_close(gpb__zin_t *z) {
  if (!z) return;
  zpar_free(z);
  if (z->zs_live) inflateEnd(&z->zs);
  zdec_fini(&z->dec);
  if (z->fd >= 0) close(z->fd);
  free(z->in);
  free(z->out);
  free(z);
}

int gpb__zin_open(const char *path, gpb__zin_t **out) {
  *out = NULL;
  gpb__zin_t *z = calloc(1, sizeof *z);
  if (!z) return gpb__fail(GPB_EHOSTMEM, "no memory for a trace reader");
  z->fd = -1;
  if (!(z->in = malloc(ZIN_CAP)) || !(z->out = malloc(ZB_TEXT_MAX))) {
    gpb__zin_close(z);
    return gpb__fail(GPB_EHOSTMEM, "no memory for a trace reader");
  }
  z->fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : dup(0);
  if (z->fd < 0) {
    int e = errno;
    gpb__zin_close(z);
    return gpb__fail(e == ENOENT ? GPB_ENOTFOUND : GPB_EIO,
                     "cannot open trace '%s': %s", path, strerror(e));
  }
  long have = zin_fill(z, ZB_HDR);
  if (have < 0) {
    gpb__zin_close(z);
    return (int)have;
  }
  const unsigned char *h = z->in;
  if (have >= ZB_HDR && zb_is_header(h)) {
    z->mode = ZIN_BLOCKED;
  } else if (have >= 2 && h[0] == 0x1f && h[1] == 0x8b) {
    z->mode = ZIN_STREAM;
  } else {
    z->mode = ZIN_PLAIN;
    *out = z;
    return 0;
  }
  if (z->mode == ZIN_BLOCKED) {
    /* Blocked members are raw deflate between headers this file parses. */
    if (zdec_init(&z->dec)) {
      gpb__zin_close(z);
      return gpb__fail(GPB_EHOSTMEM, "no memory for a trace reader");
    }
    int w = zpar_workers();
    if (w > 0) zpar_start(z, w);
  } else {
    /* A foreign stream is parsed by zlib (15 + 16: the gzip wrapper). */
    if (inflateInit2(&z->zs, 15 + 16) != Z_OK) {
      gpb__zin_close(z);
      return gpb__fail(GPB_EHOSTMEM, "no memory for a trace reader");
    }
    z->zs_live = 1;
  }
  *out = z;
  return 0;
}
