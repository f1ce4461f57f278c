/* SPDX-License-Identifier: MIT */
/*
 * gpubuddy-relay: serves a live pool's block map over TCP, for viewers on
 * another machine (gpb_attach_connect, gpubuddy-view --connect).
 *
 * The relay is one more local reader of the named pool (gpb_attach_open):
 * it never writes to the pool and the allocating program never waits on
 * it. Its reader's hook hands it every applied event, which it encodes
 * once into a batch (netproto.c) and, once per loop turn, appends to every
 * client's output buffer; a NULL event (the reader resynchronized) sends
 * every client a fresh keyframe instead. One thread, one poll() loop.
 *
 * Bounded memory per client. A client gets INFO, then a keyframe, then
 * event batches. A keyframe is encoded once per sequence number and shared
 * by every client sending it (reference counted). A client's own buffer
 * holds event frames only, up to --client-buffer bytes: when a batch does
 * not fit, the client is slow, so its queued events are dropped (all but
 * a frame already partly sent) and it gets a fresh keyframe once its
 * socket drains. So a slow client costs at most its cap plus one frame,
 * and never slows the relay, the other clients, or the pool.
 *
 * Binding. 127.0.0.1 by default; any other address needs --allow-remote
 * and a token, which the client's HELLO must carry (compared in constant
 * time). The network can only say HELLO: the relay ignores anything else
 * a client sends, so nothing from the network reaches the pool.
 *
 * The core (relay_*) is usable without main(): tests and the benchmark
 * include this file with GPB_RELAY_NO_MAIN and feed it events from an
 * in-process pool through relay_queue_*.
 */
#define _GNU_SOURCE
#include "gpubuddy.h"
#include "live/netproto.h"
#include "metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RELAY_HELLO_MAX (16 + GPB_NP_TOKEN_MAX) /* HELLO payload bytes */
#define RELAY_HELLO_NS (5ull * 1000000000ull)   /* to say HELLO */
#define RELAY_CLOSING_NS (2ull * 1000000000ull) /* to take a BYE */
#define RELAY_DEFAULT_BUF (4u << 20)

typedef struct relay_opts {
  const char *listen;  /* "ADDR:PORT"; NULL = 127.0.0.1:GPB_NP_DEFAULT_PORT */
  const char *token;   /* NULL or "": none needed */
  int allow_remote;
  int max_clients;
  size_t client_buf;   /* bytes of queued events per client */
  int zlevel;          /* 0 = never compress */
  int verbose;         /* -1 quiet, 0 normal, 1 chatty */
} relay_opts_t;

/* An encoded keyframe: KEY_BEGIN, KEY_BLOCKS..., KEY_END frames. */
typedef struct relay_key {
  int refs;
  uint64_t seq;
  gpb_np_buf_t buf;
} relay_key_t;

enum { RC_HELLO, RC_LIVE, RC_CLOSING };

typedef struct relay_client {
  int fd, state;
  char peer[80];
  uint64_t deadline; /* HELLO or CLOSING: drop after this */
  uint8_t in[GPB_NP_HDR + RELAY_HELLO_MAX];
  size_t in_len;
  int zlib, need_key, told_closed;
  relay_key_t *key;   /* being sent, before `out` */
  size_t key_off;
  gpb_np_buf_t out;   /* whole frames; [out_off, len) not sent yet */
  size_t out_off, fstart; /* fstart: start of the frame holding out_off */
  uint64_t resyncs;
} relay_client_t;

typedef struct relay {
  relay_opts_t o;
  int lfd;
  uint64_t accept_pause; /* out of descriptors: no accept until then */
  uint64_t accept_logged; /* when that was last said (once per 10 s) */
  char addr[96];
  int port;
  relay_client_t **cl;
  int ncl;
  const gpb_model_t *model;
  gpb_pool_info_t info;
  gpb_np_evenc_t batch;
  gpb_np_buf_t braw, bframe[2];
  int bframe_ok[2];
  relay_key_t *key[2]; /* cache: [plain, zlib] */
  int src_closed;
  gpb_np_buf_t tmp;
  /* Counters, for logs and the benchmark. */
  uint64_t events, bytes_sent, resyncs, accepted, refused;
} relay_t;

static uint64_t relay_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void relay_log(const relay_t *r, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void relay_log(const relay_t *r, int level, const char *fmt, ...) {
  if (r && level > r->o.verbose) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "gpubuddy-relay: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

/* ---------------------------------------------------------------- address */

/* Splits "ADDR:PORT" / "[V6]:PORT"; port 0 asks for an ephemeral one. */
static int relay_split(const char *s, char *host, size_t hn, char *port,
                       size_t pn) {
  const char *colon;
  size_t hl;
  if (s[0] == '[') {
    const char *e = strchr(s, ']');
    if (!e || e[1] != ':') return -1;
    hl = (size_t)(e - s - 1);
    memcpy(host, s + 1, hl < hn ? hl : 0);
    colon = e + 1;
  } else {
    colon = strrchr(s, ':');
    if (!colon || strchr(s, ':') != colon) return -1;
    hl = (size_t)(colon - s);
    memcpy(host, s, hl < hn ? hl : 0);
  }
  if (hl == 0 || hl >= hn) return -1;
  host[hl] = 0;
  char *end;
  errno = 0;
  unsigned long v = strtoul(colon + 1, &end, 10);
  if (!colon[1] || *end || errno || v > 65535) return -1;
  snprintf(port, pn, "%lu", v);
  return 0;
}

static int relay_is_loopback(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *s4 = (const void *)sa;
    return (ntohl(s4->sin_addr.s_addr) >> 24) == 127;
  }
  if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *s6 = (const void *)sa;
    if (IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr)) return 1;
    return IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) && s6->sin6_addr.s6_addr[12] == 127;
  }
  return 0;
}

static void relay_name(const struct sockaddr *sa, char *out, size_t n) {
  char h[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *s4 = (const void *)sa;
    inet_ntop(AF_INET, &s4->sin_addr, h, sizeof h);
    port = ntohs(s4->sin_port);
    snprintf(out, n, "%s:%d", h, port);
  } else if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *s6 = (const void *)sa;
    inet_ntop(AF_INET6, &s6->sin6_addr, h, sizeof h);
    port = ntohs(s6->sin6_port);
    snprintf(out, n, "[%s]:%d", h, port);
  } else {
    snprintf(out, n, "?");
  }
}

/* ---------------------------------------------------------------- keyframe */

typedef struct relay_keybuild {
  relay_t *r;
  gpb_np_buf_t *frames, *chunk;
  uint32_t count;
  uint64_t total;
  int z, rc;
} relay_keybuild_t;

static void relay_key_chunk(relay_keybuild_t *kb) {
  if (kb->count == 0) return;
  uint8_t *p = kb->chunk->p;
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(kb->count >> (8 * i));
  if (kb->chunk->oom ||
      gpb__np_frame(kb->frames, GPB_NP_KEY_BLOCKS, p, kb->chunk->len,
                    kb->z ? kb->r->o.zlevel : 0))
    kb->rc = GPB_EHOSTMEM;
  kb->chunk->len = 0;
  gpb__np_put_u32(kb->chunk, 0);
  kb->count = 0;
}

static int relay_key_visit(const gpb_block_info_t *b, void *user) {
  relay_keybuild_t *kb = user;
  /* Any state the model holds is one readers can load, even between the
   * events of one operation: the events after it apply to it alike. */
  gpb__np_block_put(kb->chunk, b);
  kb->count++;
  kb->total++;
  if (kb->chunk->len >= GPB_NP_KEY_CHUNK) relay_key_chunk(kb);
  return kb->rc;
}

/* Encodes the model's state now. Caller has flushed the batch, so the
 * keyframe's seq is the last event any client was sent. */
static relay_key_t *relay_key_build(relay_t *r, int z) {
  relay_key_t *k = calloc(1, sizeof *k);
  gpb_np_buf_t blocks = {0}, chunk = {0}, pl = {0};
  if (!k) return NULL;
  k->refs = 1;
  k->seq = gpb_model_seq(r->model);
  gpb__np_put_u32(&chunk, 0);
  relay_keybuild_t kb = {r, &blocks, &chunk, 0, 0, z, 0};
  gpb_model_visit(r->model, relay_key_visit, &kb);
  if (!kb.rc) relay_key_chunk(&kb);
  gpb_stats_t s;
  gpb_model_stats(r->model, &s);
  gpb__np_key_begin_put(&pl, k->seq, kb.total);
  int rc = kb.rc || pl.oom;
  rc = rc || gpb__np_frame(&k->buf, GPB_NP_KEY_BEGIN, pl.p, pl.len, 0);
  gpb__np_put(&k->buf, blocks.p, blocks.len);
  pl.len = 0;
  gpb__np_key_end_put(&pl, k->seq, &s);
  rc = rc || pl.oom || k->buf.oom;
  rc = rc || gpb__np_frame(&k->buf, GPB_NP_KEY_END, pl.p, pl.len, 0);
  gpb__np_buf_free(&blocks);
  gpb__np_buf_free(&chunk);
  gpb__np_buf_free(&pl);
  if (rc) {
    relay_log(r, -1, "out of memory for a keyframe; will retry");
    gpb__np_buf_free(&k->buf);
    free(k);
    return NULL;
  }
  relay_log(r, 1, "keyframe at seq %" PRIu64 ": %" PRIu64 " blocks, %zu bytes%s",
            k->seq, kb.total, k->buf.len, z ? " (zlib)" : "");
  return k;
}

static void relay_key_unref(relay_key_t *k) {
  if (k && --k->refs == 0) {
    gpb__np_buf_free(&k->buf);
    free(k);
  }
}

static relay_key_t *relay_key_get(relay_t *r, int z) {
  uint64_t seq = gpb_model_seq(r->model);
  if (!r->key[z] || r->key[z]->seq != seq) {
    relay_key_unref(r->key[z]);
    r->key[z] = relay_key_build(r, z);
    if (!r->key[z]) return NULL;
  }
  r->key[z]->refs++;
  return r->key[z];
}

static void relay_key_drop_cache(relay_t *r) {
  for (int z = 0; z < 2; z++) {
    relay_key_unref(r->key[z]);
    r->key[z] = NULL;
  }
}

/* ---------------------------------------------------------------- clients */

static size_t relay_framelen(const uint8_t *p) {
  return GPB_NP_HDR + gpb__np_le32(p + 8);
}

static void relay_client_free(relay_client_t *c) {
  if (c->fd >= 0) close(c->fd);
  relay_key_unref(c->key);
  gpb__np_buf_free(&c->out);
  free(c);
}

static void relay_client_remove(relay_t *r, int i, const char *why) {
  relay_client_t *c = r->cl[i];
  relay_log(r, c->state == RC_LIVE ? 0 : 1, "client %s %s (%d left)", c->peer,
            why, r->ncl - 1);
  relay_client_free(c);
  r->cl[i] = r->cl[--r->ncl];
}

/* Appends a frame the client must get whatever its buffer holds (INFO,
 * CLOSED, BYE: small and once). */
static void relay_client_put(relay_client_t *c, int type, const gpb_np_buf_t *pl) {
  if (c->out_off == c->out.len) c->out_off = c->out.len = c->fstart = 0;
  gpb__np_frame(&c->out, type, pl ? pl->p : NULL, pl ? pl->len : 0, 0);
}

static void relay_client_refuse(relay_t *r, relay_client_t *c, int code,
                                const char *msg) {
  r->tmp.len = 0;
  gpb__np_bye_put(&r->tmp, code, msg);
  relay_client_put(c, GPB_NP_BYE, &r->tmp);
  c->state = RC_CLOSING;
  c->deadline = relay_now() + RELAY_CLOSING_NS;
  if (code != 0) {
    r->refused++;
    relay_log(r, 0, "client %s refused: %s", c->peer, msg);
  }
}

/* Drops the client's queued events and asks for a keyframe: it is slow. */
static void relay_client_resync(relay_t *r, relay_client_t *c) {
  if (c->key) {
    c->out.len = c->out_off = c->fstart = 0; /* nothing of it sent yet */
  } else if (c->out_off == c->fstart) {
    c->out.len = c->out_off;
  } else {
    c->out.len = c->fstart + relay_framelen(c->out.p + c->fstart);
  }
  c->need_key = 1;
  c->resyncs++;
  r->resyncs++;
  relay_log(r, c->resyncs == 1 ? 0 : 1,
            "client %s is slow: queued events dropped, a keyframe follows "
            "(%" PRIu64 " so far)", c->peer, c->resyncs);
}

static void relay_client_events(relay_t *r, relay_client_t *c) {
  int z = c->zlib;
  if (!r->bframe_ok[z]) {
    r->bframe[z].len = 0;
    if (gpb__np_frame(&r->bframe[z], GPB_NP_EVENTS, r->braw.p, r->braw.len,
                      z ? r->o.zlevel : 0))
      return;
    r->bframe_ok[z] = 1;
  }
  const gpb_np_buf_t *f = &r->bframe[z];
  size_t pending = c->out.len - c->out_off;
  if (pending && pending + f->len > r->o.client_buf) {
    relay_client_resync(r, c);
    return;
  }
  if (c->out_off == c->out.len) {
    c->out_off = c->out.len = c->fstart = 0;
  } else if (c->fstart > 0) {
    memmove(c->out.p, c->out.p + c->fstart, c->out.len - c->fstart);
    c->out.len -= c->fstart;
    c->out_off -= c->fstart;
    c->fstart = 0;
  }
  gpb__np_put(&c->out, f->p, f->len);
  if (c->out.oom) {
    c->out.oom = 0;
    relay_client_resync(r, c);
  }
}

/* Sends what the socket takes. 0, or -1 when the client is gone. */
static int relay_client_send(relay_t *r, relay_client_t *c) {
  for (;;) {
    const uint8_t *p;
    size_t n;
    if (c->key && c->key_off < c->key->buf.len) {
      p = c->key->buf.p + c->key_off;
      n = c->key->buf.len - c->key_off;
    } else if (c->key) {
      relay_key_unref(c->key);
      c->key = NULL;
      continue;
    } else if (c->out_off < c->out.len) {
      p = c->out.p + c->out_off;
      n = c->out.len - c->out_off;
    } else {
      c->out_off = c->out.len = c->fstart = 0;
      return 0;
    }
    ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (w <= 0) return -1;
    r->bytes_sent += (uint64_t)w;
    if (c->key) {
      c->key_off += (size_t)w;
    } else {
      c->out_off += (size_t)w;
      while (c->fstart < c->out.len &&
             c->fstart + relay_framelen(c->out.p + c->fstart) <= c->out_off)
        c->fstart += relay_framelen(c->out.p + c->fstart);
    }
  }
}

static void relay_client_hello(relay_t *r, relay_client_t *c) {
  char err[GPB_NP_ERRLEN];
  gpb_np_hdr_t h;
  if (c->in_len < GPB_NP_HDR) return;
  int rc = gpb__np_hdr_parse(c->in, &h, err);
  if (!rc && (h.type != GPB_NP_HELLO || (h.flags & GPB_NP_FLAG_ZLIB) ||
              h.len > RELAY_HELLO_MAX)) {
    snprintf(err, sizeof err, "expected a plain HELLO, got %s of %u bytes",
             gpb__np_type_name(h.type), h.len);
    rc = GPB_EFORMAT;
  }
  if (rc) {
    char msg[GPB_NP_ERRLEN + 16];
    snprintf(msg, sizeof msg, "bad hello: %s", err);
    relay_client_refuse(r, c, rc, msg);
    return;
  }
  if (c->in_len < GPB_NP_HDR + h.len) return;
  uint32_t version, flags;
  char token[GPB_NP_TOKEN_MAX + 1];
  size_t tl;
  rc = gpb__np_hello_get(c->in + GPB_NP_HDR, h.len, &version, &flags, token,
                         &tl, err);
  if (rc) {
    char msg[GPB_NP_ERRLEN + 16];
    snprintf(msg, sizeof msg, "bad hello: %s", err);
    relay_client_refuse(r, c, rc, msg);
    return;
  }
  if (version != GPB_NP_VERSION) {
    snprintf(err, sizeof err, "client speaks protocol %u, relay speaks %u",
             version, GPB_NP_VERSION);
    relay_client_refuse(r, c, GPB_EVERSION, err);
    return;
  }
  if (r->o.token && *r->o.token && !gpb__np_token_eq(token, r->o.token)) {
    relay_client_refuse(r, c, GPB_EPERM,
                        tl ? "wrong token" : "this relay needs a token "
                             "(GPB_RELAY_TOKEN or --token)");
    return;
  }
  c->zlib = (flags & GPB_NP_HELLO_ZLIB) && r->o.zlevel > 0;
  c->state = RC_LIVE;
  c->need_key = 1;
  r->tmp.len = 0;
  gpb__np_info_put(&r->tmp, &r->info);
  relay_client_put(c, GPB_NP_INFO, &r->tmp);
  r->accepted++;
  relay_log(r, 0, "client %s connected%s (%d clients)", c->peer,
            c->zlib ? ", zlib" : "", r->ncl);
}

/* Reads from a client. 0, or -1 when it is gone. */
static int relay_client_read(relay_t *r, relay_client_t *c) {
  if (c->state == RC_HELLO) {
    size_t room = sizeof c->in - c->in_len;
    ssize_t got = room ? recv(c->fd, c->in + c->in_len, room, MSG_DONTWAIT) : 0;
    if (got < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
    if (got == 0) return -1;
    c->in_len += (size_t)got;
    relay_client_hello(r, c);
    return 0;
  }
  /* After HELLO a client has nothing to say: read and ignore, a bounded
   * amount per turn, only to notice when it leaves. */
  uint8_t junk[4096];
  for (int i = 0; i < 16; i++) {
    ssize_t got = recv(c->fd, junk, sizeof junk, MSG_DONTWAIT);
    if (got > 0) continue;
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    return -1;
  }
  return 0;
}

/* --------------------------------------------------------------- the relay */

static void relay_accept(relay_t *r) {
  for (;;) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd = accept4(r->lfd, (struct sockaddr *)&ss, &sl,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      int e = errno;
      if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
        /* The pending connection stays pending, so the socket stays
         * readable: without a pause the loop would spin and log at full
         * speed. Wait 100 ms, and say so once per 10 s. */
        uint64_t now = relay_now();
        r->accept_pause = now + 100000000ull;
        if (now - r->accept_logged > 10000000000ull || !r->accept_logged) {
          relay_log(r, 0, "accept: %s; pausing new connections (said once "
                    "per 10 s)", strerror(e));
          r->accept_logged = now;
        }
      } else if (e != EAGAIN && e != EWOULDBLOCK && e != EINTR &&
                 e != ECONNABORTED) {
        relay_log(r, 0, "accept: %s", strerror(e));
      }
      return;
    }
    char peer[80];
    relay_name((struct sockaddr *)&ss, peer, sizeof peer);
    if (r->ncl >= r->o.max_clients) {
      /* Full: a connection that has not said HELLO yet gives way, oldest
       * first, so half-open connections cannot lock out a viewer. */
      int old = -1;
      for (int i = 0; i < r->ncl; i++)
        if (r->cl[i]->state == RC_HELLO &&
            (old < 0 || r->cl[i]->deadline < r->cl[old]->deadline))
          old = i;
      if (old >= 0) relay_client_remove(r, old, "no HELLO yet, and the relay is full");
    }
    if (r->ncl >= r->o.max_clients) {
      gpb_np_buf_t pl = {0}, fr = {0};
      char msg[96];
      snprintf(msg, sizeof msg, "relay is full (%d clients)", r->o.max_clients);
      gpb__np_bye_put(&pl, GPB_EBUSY, msg);
      if (!pl.oom && !gpb__np_frame(&fr, GPB_NP_BYE, pl.p, pl.len, 0))
        (void)!send(fd, fr.p, fr.len, MSG_NOSIGNAL | MSG_DONTWAIT);
      gpb__np_buf_free(&pl);
      gpb__np_buf_free(&fr);
      close(fd);
      r->refused++;
      relay_log(r, 0, "client %s refused: %s", peer, msg);
      continue;
    }
    relay_client_t *c = calloc(1, sizeof *c);
    if (!c) {
      close(fd);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->fd = fd;
    c->state = RC_HELLO;
    c->deadline = relay_now() + RELAY_HELLO_NS;
    snprintf(c->peer, sizeof c->peer, "%s", peer);
    r->cl[r->ncl++] = c;
    relay_log(r, 1, "client %s: connection, waiting for HELLO", peer);
  }
}

/* Sends the pending batch to every client that takes events. */
static void relay_flush(relay_t *r) {
  if (r->batch.count == 0) return;
  if (gpb__np_evenc_finish(&r->batch, &r->braw)) {
    /* Out of memory: everyone resynchronizes from a keyframe later. */
    for (int i = 0; i < r->ncl; i++) r->cl[i]->need_key = 1;
    return;
  }
  r->bframe_ok[0] = r->bframe_ok[1] = 0;
  for (int i = 0; i < r->ncl; i++) {
    relay_client_t *c = r->cl[i];
    if (c->state == RC_LIVE && !c->need_key) relay_client_events(r, c);
  }
}

/* The source's hook: an event its model took, or NULL after a resync. */
static void relay_event(const gpb_event_t *ev, void *user) {
  relay_t *r = user;
  if (!ev) {
    gpb__np_evenc_free(&r->batch);
    gpb__np_evenc_init(&r->batch, (uint32_t)__builtin_ctzll(r->info.min_block));
    relay_key_drop_cache(r);
    for (int i = 0; i < r->ncl; i++) r->cl[i]->need_key = 1;
    relay_log(r, 1, "source resynchronized: clients get a keyframe");
    return;
  }
  gpb__np_evenc_add(&r->batch, ev);
  r->events++;
  if (r->batch.count >= GPB_NP_BATCH_MAX) relay_flush(r);
}

/* The pool is gone: clients get the state so far, then CLOSED. */
static __attribute__((unused)) void relay_source_closed(relay_t *r) {
  relay_flush(r);
  r->src_closed = 1;
}

/* Listens on spec ("ADDR:PORT", "[V6]:PORT"; port 0 picks one) for opt
 * (named in messages). Anything but loopback needs remote_ok: the
 * relay's rule, for its clients and its metrics alike. 0 with *fd, the
 * bound address's name and port; or a GPB_E* code, said on stderr. */
static int relay_bind(const char *spec, const char *opt, int remote_ok,
                      int flags, int *fd, char *name, size_t nn, int *bport) {
  char host[256], port[16];
  *fd = -1;
  if (relay_split(spec, host, sizeof host, port, sizeof port)) {
    relay_log(NULL, 0, "%s '%s': expected ADDRESS:PORT or [V6]:PORT", opt, spec);
    return GPB_EINVAL;
  }
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  int g = getaddrinfo(host, port, &hints, &res);
  if (g) {
    relay_log(NULL, 0, "%s '%s': %s", opt, spec, gai_strerror(g));
    return GPB_ENOTFOUND;
  }
  int rc = 0;
  if (!relay_is_loopback(res->ai_addr) && !remote_ok) {
    relay_log(NULL, 0, "refusing to listen on %s: it is not a loopback address. "
              "Use an SSH tunnel (the default 127.0.0.1 with ssh -L), or give "
              "both --allow-remote and a token (--token or GPB_RELAY_TOKEN)",
              spec);
    rc = GPB_EPERM;
  }
  if (!rc) {
    *fd = socket(res->ai_family, res->ai_socktype | flags | SOCK_CLOEXEC,
                 res->ai_protocol);
    int one = 1;
    if (*fd >= 0) setsockopt(*fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (*fd < 0 || bind(*fd, res->ai_addr, res->ai_addrlen) || listen(*fd, 32)) {
      relay_log(NULL, 0, "cannot listen on %s: %s", spec, strerror(errno));
      rc = GPB_EIO;
    }
  }
  freeaddrinfo(res);
  if (rc) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
    return rc;
  }
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  getsockname(*fd, (struct sockaddr *)&ss, &sl);
  relay_name((struct sockaddr *)&ss, name, nn);
  *bport = ((struct sockaddr *)&ss)->sa_family == AF_INET6
               ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
               : ntohs(((struct sockaddr_in *)&ss)->sin_port);
  return 0;
}

static int relay_open(const relay_opts_t *o, relay_t **out) {
  *out = NULL;
  relay_t *r = calloc(1, sizeof *r);
  if (!r) return GPB_EHOSTMEM;
  r->o = *o;
  r->lfd = -1;
  if (r->o.max_clients <= 0) r->o.max_clients = 16;
  if (r->o.client_buf == 0) r->o.client_buf = RELAY_DEFAULT_BUF;
  if (r->o.token && !*r->o.token) r->o.token = NULL;
  r->cl = calloc((size_t)r->o.max_clients, sizeof *r->cl);
  if (!r->cl) {
    free(r);
    return GPB_EHOSTMEM;
  }
  char def[32];
  snprintf(def, sizeof def, "127.0.0.1:%d", GPB_NP_DEFAULT_PORT);
  int rc = relay_bind(o->listen ? o->listen : def, "--listen",
                      r->o.allow_remote && r->o.token, SOCK_NONBLOCK, &r->lfd,
                      r->addr, sizeof r->addr, &r->port);
  if (rc) {
    if (r->lfd >= 0) close(r->lfd);
    free(r->cl);
    free(r);
    return rc;
  }
  *out = r;
  return 0;
}

/* The model the relay serves (the source reader's) and its pool. */
static void relay_set_source(relay_t *r, const gpb_model_t *m,
                             const gpb_pool_info_t *info) {
  r->model = m;
  r->info = *info;
  gpb__np_evenc_init(&r->batch, (uint32_t)__builtin_ctzll(info->min_block));
}

/* Keyframes for clients that wait for one and whose socket drained, and
 * CLOSED after the last state. */
static void relay_client_upkeep(relay_t *r, relay_client_t *c) {
  if (c->state != RC_LIVE) return;
  if (c->need_key && !c->key && c->out_off == c->out.len) {
    c->key = relay_key_get(r, c->zlib);
    c->key_off = 0;
    if (c->key) c->need_key = 0;
  }
  if (r->src_closed && !c->told_closed && !c->need_key) {
    relay_client_put(c, GPB_NP_CLOSED, NULL);
    c->told_closed = 1;
  }
}

static int relay_client_wants_out(const relay_client_t *c) {
  return (c->key && c->key_off < c->key->buf.len) || c->out_off < c->out.len;
}

/* One turn: flush the batch, poll sockets up to timeout_ms, accept, read,
 * write. Never blocks longer than timeout_ms. */
static void relay_step(relay_t *r, int timeout_ms) {
  relay_flush(r);
  for (int i = 0; i < r->ncl; i++) relay_client_upkeep(r, r->cl[i]);
  struct pollfd pf[1 + 1024];
  int n = 0;
  uint64_t now = relay_now(), next = UINT64_MAX;
  int listening = r->lfd >= 0 && now >= r->accept_pause;
  if (listening) pf[n++] = (struct pollfd){r->lfd, POLLIN, 0};
  else if (r->lfd >= 0 && r->accept_pause - now < (uint64_t)timeout_ms * 1000000ull)
    timeout_ms = (int)((r->accept_pause - now) / 1000000 + 1);
  for (int i = 0; i < r->ncl; i++) {
    relay_client_t *c = r->cl[i];
    short ev = c->state == RC_CLOSING ? 0 : POLLIN;
    if (relay_client_wants_out(c)) ev |= POLLOUT;
    pf[n++] = (struct pollfd){c->fd, ev, 0};
    if (c->state != RC_LIVE && c->deadline < next) next = c->deadline;
  }
  if (next != UINT64_MAX) {
    uint64_t left = next > now ? (next - now) / 1000000 + 1 : 0;
    if (left < (uint64_t)timeout_ms) timeout_ms = (int)left;
  }
  if (poll(pf, (nfds_t)n, timeout_ms) < 0 && errno != EINTR) {
    relay_log(r, 0, "poll: %s", strerror(errno));
    return;
  }
  int base = listening ? 1 : 0;
  now = relay_now();
  /* Walk backwards: removing swaps the last client into slot i. */
  for (int i = r->ncl - 1; i >= 0; i--) {
    relay_client_t *c = r->cl[i];
    short re = pf[base + i].revents;
    const char *gone = NULL;
    if ((re & (POLLIN | POLLHUP | POLLERR)) && c->state != RC_CLOSING &&
        relay_client_read(r, c))
      gone = "left";
    if (!gone && c->state == RC_LIVE) relay_client_upkeep(r, c);
    if (!gone && relay_client_wants_out(c) && relay_client_send(r, c))
      gone = "left";
    if (!gone && c->state == RC_CLOSING && !relay_client_wants_out(c))
      gone = "closed";
    if (!gone && c->state != RC_LIVE && now > c->deadline)
      gone = c->state == RC_HELLO ? "said no HELLO in time" : "closed";
    if (gone) relay_client_remove(r, i, gone);
  }
  if (listening && (pf[0].revents & POLLIN)) relay_accept(r);
}

/* Says BYE to everyone and gives them up to `ms` to take it. */
static __attribute__((unused)) void relay_bye_all(relay_t *r, const char *msg,
                                                  int ms) {
  relay_flush(r);
  for (int i = 0; i < r->ncl; i++) {
    relay_client_t *c = r->cl[i];
    if (c->state == RC_CLOSING) continue;
    relay_client_refuse(r, c, 0, msg);
  }
  if (r->lfd >= 0) close(r->lfd);
  r->lfd = -1;
  uint64_t end = relay_now() + (uint64_t)ms * 1000000;
  while (r->ncl > 0 && relay_now() < end) relay_step(r, 10);
}

static void relay_free(relay_t *r) {
  if (!r) return;
  while (r->ncl > 0) relay_client_remove(r, r->ncl - 1, "closed");
  if (r->lfd >= 0) close(r->lfd);
  relay_key_drop_cache(r);
  gpb__np_evenc_free(&r->batch);
  gpb__np_buf_free(&r->braw);
  gpb__np_buf_free(&r->bframe[0]);
  gpb__np_buf_free(&r->bframe[1]);
  gpb__np_buf_free(&r->tmp);
  free(r->cl);
  free(r);
}

#ifdef GPB_RELAY_NO_MAIN
/* ------------------------------------------------------ in-process source */

/* Events from a pool in this process (tests, benchmark, embedding): the
 * pool's hook pushes them under a lock; the relay's thread drains them
 * into its own model and hands them to relay_event. */
typedef struct relay_queue {
  pthread_mutex_t mu;
  gpb_event_t *ev, *spare;
  size_t n, cap, spare_cap;
  gpb_model_t *model;
  int failed;
} relay_queue_t;

static void relay_queue_hook(const gpb_event_t *ev, void *user) {
  relay_queue_t *q = user;
  pthread_mutex_lock(&q->mu);
  if (q->n == q->cap) {
    size_t cap = q->cap ? q->cap * 2 : 4096;
    gpb_event_t *p = realloc(q->ev, cap * sizeof *p);
    if (!p) {
      q->failed = 1;
      pthread_mutex_unlock(&q->mu);
      return;
    }
    q->ev = p;
    q->cap = cap;
  }
  q->ev[q->n++] = *ev;
  pthread_mutex_unlock(&q->mu);
}

/* Applies what was queued to the model and the relay. Returns the count,
 * or <0 when the model refused one (a bug: the pool's events must fit). */
static int relay_queue_drain(relay_queue_t *q, relay_t *r) {
  pthread_mutex_lock(&q->mu);
  gpb_event_t *ev = q->ev;
  size_t n = q->n, cap = q->cap;
  q->ev = q->spare;
  q->cap = q->spare_cap;
  q->n = 0;
  int failed = q->failed;
  pthread_mutex_unlock(&q->mu);
  int rc = failed ? GPB_EHOSTMEM : 0;
  for (size_t i = 0; i < n && !rc; i++) {
    rc = gpb_model_apply(q->model, &ev[i]);
    if (!rc && r) relay_event(&ev[i], r);
  }
  q->spare = ev;
  q->spare_cap = cap;
  return rc ? rc : (int)n;
}

static void relay_queue_free(relay_queue_t *q) {
  free(q->ev);
  free(q->spare);
  gpb_model_destroy(q->model);
  pthread_mutex_destroy(&q->mu);
}

/* Creates the queue for `pool` and installs its hook. Call before the pool
 * has any event. */
static int relay_queue_init(relay_queue_t *q, gpb_pool_t *pool) {
  memset(q, 0, sizeof *q);
  pthread_mutex_init(&q->mu, NULL);
  gpb_pool_info_t info;
  gpb_pool_info(pool, &info);
  int rc = gpb_model_create(info.managed_size, info.min_block, &q->model);
  if (rc) return rc;
  return gpb_pool_set_hook(pool, relay_queue_hook, q);
}

#else /* GPB_RELAY_NO_MAIN */
/* ------------------------------------------------------------------- main */

static volatile sig_atomic_t relay_stop;
static void relay_on_signal(int sig) { relay_stop = sig; }

static void relay_usage(FILE *f) {
  fprintf(f,
"Usage: gpubuddy-relay [OPTIONS] NAME\n"
"       gpubuddy-relay --metrics ADDR:PORT [OPTIONS] [NAME]\n"
"Serves the live pool published as NAME (GPB_PUBLISH=NAME, or a pool\n"
"created with gpb_config_t.name) over TCP to gpubuddy-view --connect and\n"
"other gpb_attach_connect readers. Read-only: nothing from the network\n"
"reaches the pool, and the allocating program never waits on the relay.\n"
"\n"
"  --listen ADDR:PORT   where to listen (default 127.0.0.1:%d; port 0\n"
"                       picks a free one). [V6]:PORT for IPv6.\n"
"  --token T            clients must send this token (default: the\n"
"                       environment variable GPB_RELAY_TOKEN, if set)\n"
"  --allow-remote       allow a non-loopback ADDR; needs a token too\n"
"  --max-clients N      clients at once (default 16)\n"
"  --client-buffer SIZE queued events per client before it is resynced\n"
"                       from a keyframe (default 4M)\n"
"  --compress LEVEL     zlib level 0..9 for clients that accept it\n"
"                       (default 1; 0 = off)\n"
"  --port-file FILE     write the bound port number to FILE\n"
"  --wait               wait for the pool to appear instead of failing\n"
"  --exit-on-close      exit once the pool is gone and clients were told\n"
"                       (default: keep serving the last state)\n"
"  --metrics ADDR:PORT  also serve /metrics over HTTP for every pool on\n"
"                       this machine, in Prometheus's text format (port 0\n"
"                       picks one; with no NAME, metrics only, and\n"
"                       --port-file gets this port). Loopback unless\n"
"                       --allow-remote and a token, which a scraper sends\n"
"                       as 'Authorization: Bearer TOKEN'\n"
"  -q, --quiet          only errors on stderr;  -v, --verbose: more\n"
"  -h, --help           this text;  --version\n"
"\n"
"Typical use, on the GPU server:   gpubuddy-relay mypool\n"
"and on your workstation:          ssh -N -L %d:127.0.0.1:%d gpuhost &\n"
"                                  gpubuddy-view --connect 127.0.0.1:%d\n",
          GPB_NP_DEFAULT_PORT, GPB_NP_DEFAULT_PORT, GPB_NP_DEFAULT_PORT,
          GPB_NP_DEFAULT_PORT);
}

/* ------------------------------------------------------------ /metrics */

/* The metrics listener: its own socket and thread, one request at a time,
 * each bounded in size and time, so a scraper (or anyone on the port)
 * never holds up the relay's loop or the pool. */
typedef struct metrics_srv {
  int fd;
  int port;
  const char *token;
  pthread_t th;
} metrics_srv_t;

static int metrics_listen(const char *spec, const relay_opts_t *o,
                          metrics_srv_t *m) {
  char name[96];
  memset(m, 0, sizeof *m);
  m->token = o->token && *o->token ? o->token : NULL;
  return relay_bind(spec, "--metrics", o->allow_remote && m->token, 0, &m->fd,
                    name, sizeof name, &m->port);
}

static void metrics_reply(int c, const char *status, const char *type,
                          const char *body, size_t len) {
  char head[256];
  int n = snprintf(head, sizeof head, "HTTP/1.0 %s\r\nContent-Type: %s\r\n"
                   "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                   status, type, len);
  if (write(c, head, (size_t)n) != n) return;
  for (size_t off = 0; off < len;) {
    ssize_t w = write(c, body + off, len - off);
    if (w <= 0) return;
    off += (size_t)w;
  }
}

/* Reads one request (at most 8 KiB, 2 s) and answers it. */
static void metrics_serve_one(metrics_srv_t *m, int c) {
  struct timeval tv = {2, 0};
  setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  char req[8192];
  size_t n = 0;
  while (n < sizeof req - 1) {
    ssize_t got = read(c, req + n, sizeof req - 1 - n);
    if (got <= 0) break;
    n += (size_t)got;
    req[n] = '\0';
    if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n")) break;
  }
  req[n] = '\0';
  static const char text[] = "text/plain; version=0.0.4; charset=utf-8";
  if (strncmp(req, "GET /metrics ", 13) != 0 && strncmp(req, "GET /metrics?", 13) != 0) {
    static const char nf[] = "gpubuddy-relay serves /metrics only\n";
    metrics_reply(c, "404 Not Found", text, nf, sizeof nf - 1);
    return;
  }
  if (m->token) {
    char want[GPB_NP_TOKEN_MAX + 64];
    snprintf(want, sizeof want, "Authorization: Bearer %s\r\n", m->token);
    if (!strcasestr(req, want)) {
      static const char no[] = "a token is required (Authorization: Bearer)\n";
      metrics_reply(c, "401 Unauthorized", text, no, sizeof no - 1);
      return;
    }
  }
  gpbt_pool_snap_t *v = NULL;
  size_t nv = 0;
  char *body = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&body, &len);
  int ok = f && gpbt_snapshot_all(0.2, &v, &nv) == 0 &&
           gpbt_metrics_write(f, v, nv) == 0;
  if (f) fclose(f);
  if (ok) metrics_reply(c, "200 OK", text, body, len);
  else metrics_reply(c, "500 Internal Server Error", text, "", 0);
  free(body);
  free(v);
}

static void *metrics_main(void *arg) {
  metrics_srv_t *m = arg;
  while (!relay_stop) {
    struct pollfd p = {m->fd, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    int c = accept(m->fd, NULL, NULL);
    if (c < 0) {
      if (errno == EMFILE || errno == ENFILE) usleep(100000); /* back off */
      continue;
    }
    metrics_serve_one(m, c);
    close(c);
  }
  return NULL;
}

static int relay_write_port(const char *path, int port) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return -1;
  fprintf(f, "%d\n", port);
  if (fclose(f) || rename(tmp, path)) return -1;
  return 0;
}

int main(int argc, char **argv) {
  relay_opts_t o = {0};
  const char *port_file = NULL;
  int wait_pool = 0, exit_on_close = 0;
  o.zlevel = 1;
  enum { O_LISTEN = 256, O_TOKEN, O_REMOTE, O_MAX, O_BUF, O_Z, O_PORTF,
         O_WAIT, O_EXIT, O_VERSION, O_METRICS };
  const char *metrics = NULL;
  static const struct option lo[] = {
      {"listen", required_argument, 0, O_LISTEN},
      {"token", required_argument, 0, O_TOKEN},
      {"allow-remote", no_argument, 0, O_REMOTE},
      {"max-clients", required_argument, 0, O_MAX},
      {"client-buffer", required_argument, 0, O_BUF},
      {"compress", required_argument, 0, O_Z},
      {"port-file", required_argument, 0, O_PORTF},
      {"wait", no_argument, 0, O_WAIT},
      {"exit-on-close", no_argument, 0, O_EXIT},
      {"quiet", no_argument, 0, 'q'},
      {"verbose", no_argument, 0, 'v'},
      {"help", no_argument, 0, 'h'},
      {"version", no_argument, 0, O_VERSION},
      {"metrics", required_argument, 0, O_METRICS},
      {0, 0, 0, 0}};
  int ch;
  opterr = 0; /* one line of our own instead of getopt's and the usage */
  while ((ch = getopt_long(argc, argv, "qvh", lo, NULL)) != -1) {
    char *end;
    switch (ch) {
    case O_LISTEN: o.listen = optarg; break;
    case O_TOKEN: o.token = optarg; break;
    case O_REMOTE: o.allow_remote = 1; break;
    case O_MAX:
      o.max_clients = (int)strtol(optarg, &end, 10);
      if (*end || o.max_clients < 1 || o.max_clients > 1000) {
        relay_log(NULL, 0, "--max-clients '%s': expected 1..1000", optarg);
        return 2;
      }
      break;
    case O_BUF:
      if (gpb_size_parse(optarg, &o.client_buf) || o.client_buf < (64u << 10)) {
        relay_log(NULL, 0, "--client-buffer '%s': expected a size >= 64K", optarg);
        return 2;
      }
      break;
    case O_Z:
      o.zlevel = (int)strtol(optarg, &end, 10);
      if (*end || !*optarg || o.zlevel < 0 || o.zlevel > 9) {
        relay_log(NULL, 0, "--compress '%s': expected 0..9", optarg);
        return 2;
      }
      break;
    case O_PORTF: port_file = optarg; break;
    case O_WAIT: wait_pool = 1; break;
    case O_EXIT: exit_on_close = 1; break;
    case O_METRICS: metrics = optarg; break;
    case 'q': o.verbose = -1; break;
    case 'v': o.verbose = 1; break;
    case 'h': relay_usage(stdout); return 0;
    case O_VERSION: printf("gpubuddy-relay %s\n", gpb_version()); return 0;
    default:
      fprintf(stderr, "gpubuddy-relay: %s '%s' (try 'gpubuddy-relay --help')\n",
              ch == ':' ? "option needs a value:" : "unknown option",
              argv[optind - 1]);
      return 2;
    }
  }
  if (optind != argc - 1 && !(metrics && optind == argc)) {
    relay_log(NULL, 0, "expected one pool NAME (try --help)");
    return 2;
  }
  const char *name = optind < argc ? argv[optind] : NULL;
  if (!o.token) o.token = getenv("GPB_RELAY_TOKEN");
  if (o.token && strlen(o.token) > GPB_NP_TOKEN_MAX) {
    relay_log(NULL, 0, "token longer than %d bytes", GPB_NP_TOKEN_MAX);
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = relay_on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  metrics_srv_t ms = {.fd = -1};
  if (metrics) {
    if (metrics_listen(metrics, &o, &ms)) return 1;
    relay_log(NULL, 0, "serving metrics of every pool on port %d at /metrics",
              ms.port);
    if (!name) { /* metrics only */
      if (port_file && relay_write_port(port_file, ms.port)) {
        relay_log(NULL, 0, "cannot write --port-file %s: %s", port_file,
                  strerror(errno));
        return 1;
      }
      metrics_main(&ms);
      close(ms.fd);
      return 0;
    }
    if (pthread_create(&ms.th, NULL, metrics_main, &ms)) {
      relay_log(NULL, 0, "cannot start the metrics thread");
      return 1;
    }
  }

  relay_t *r;
  if (relay_open(&o, &r)) return 1;
  gpb_attach_t *src = NULL;
  for (int said = 0;;) {
    int rc = gpb_attach_open(name, &src);
    if (!rc) break;
    if (!wait_pool || relay_stop) {
      relay_log(NULL, 0, "cannot attach to pool '%s': %s (%s). Is the program "
                "running with GPB_PUBLISH=%s?", name, gpb_strerror(rc),
                gpb_last_error_detail(), name);
      relay_free(r);
      return 1;
    }
    if (!said++) relay_log(r, 0, "waiting for pool '%s' to appear", name);
    usleep(200000);
  }
  gpb_pool_info_t info;
  gpb_attach_info(src, &info);
  relay_set_source(r, gpb_attach_model(src), &info);
  gpb_attach_set_hook(src, relay_event, r);
  if (port_file && relay_write_port(port_file, r->port)) {
    relay_log(NULL, 0, "cannot write --port-file %s: %s", port_file,
              strerror(errno));
    gpb_attach_close(src);
    relay_free(r);
    return 1;
  }
  relay_log(r, 0, "serving pool '%s' (%" PRIu64 " bytes, min block %" PRIu64
            ") on %s%s", name, info.managed_size, info.min_block, r->addr,
            r->o.token ? ", token required" : "");

  uint64_t last_log = relay_now(), last_events = 0, closed_at = 0;
  uint64_t last_err = 0;
  int status = 0;
  while (!relay_stop) {
    if (!r->src_closed) {
      int rc = gpb_attach_poll(src);
      if (rc == GPB_ECLOSED) {
        relay_log(r, 0, "pool '%s' is gone; %s", name,
                  exit_on_close ? "telling clients, then exiting"
                                : "serving its last state");
        relay_source_closed(r);
        closed_at = relay_now();
      } else if (rc < 0 && relay_now() - last_err > 10000000000ull) {
        /* A garbled or oversized keyframe in the segment: clients keep
         * the last good state while the reader keeps trying. */
        relay_log(r, -1, "pool '%s': %s (%s); still trying", name,
                  gpb_strerror(rc), gpb_last_error_detail());
        last_err = relay_now();
      }
    }
    relay_step(r, 10);
    uint64_t now = relay_now();
    if (r->src_closed && exit_on_close) {
      int pending = 0;
      for (int i = 0; i < r->ncl; i++)
        pending |= r->cl[i]->state != RC_LIVE || !r->cl[i]->told_closed ||
                   relay_client_wants_out(r->cl[i]);
      if (!pending || now - closed_at > 5000000000ull) break;
    }
    if (now - last_log > 30000000000ull && r->events != last_events) {
      relay_log(r, 0, "%" PRIu64 " events relayed, %d clients, %" PRIu64
                " bytes sent, %" PRIu64 " slow-client resyncs", r->events,
                r->ncl, r->bytes_sent, r->resyncs);
      last_log = now;
      last_events = r->events;
    }
  }
  if (relay_stop) {
    relay_log(r, 0, "signal %d: saying goodbye to %d clients", (int)relay_stop,
              r->ncl);
    relay_bye_all(r, "relay shutting down", 1000);
  }
  gpb_attach_close(src);
  relay_free(r);
  if (ms.fd >= 0) {
    relay_stop = relay_stop ? relay_stop : 1;
    pthread_join(ms.th, NULL);
    close(ms.fd);
  }
  return status;
}
#endif /* GPB_RELAY_NO_MAIN */
