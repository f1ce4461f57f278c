/* SPDX-License-Identifier: MIT */
/*
 * relay.c: the relay core (relay.h). gpubuddy-relay wraps it around live
 * readers; the tests and the benchmark around in-process pools.
 *
 * Each source's events are encoded once into a batch (netproto.c) and,
 * once per loop turn, appended to the output buffer of every client of
 * that source; a NULL event (the source's reader resynchronized) sends
 * them a fresh keyframe instead.
 *
 * Call sites. A source that can name its sites' frames (gpbr_src_set_sites)
 * has each site's text asked once, in id order, when an event or a
 * keyframe block first names it, and kept encoded. Clients that said
 * HELLO_SITES get the texts new since the last batch in SITES frames
 * before it, and every text so far before each keyframe (so one that
 * dropped queued batches misses none). Others get events and blocks with
 * the sites taken out: the batch, encoded with sites, is re-encoded
 * without them only when it named one and such a client is there.
 *
 * Bounded memory per client. A client gets INFO, then a keyframe, then
 * event batches. A keyframe is encoded once per sequence number and shared
 * by every client sending it (reference counted). A client's own buffer
 * holds event frames only, up to client_buf bytes: when a batch does not
 * fit, the client is slow, so its queued events are dropped (all but a
 * frame already partly sent) and it gets a fresh keyframe once its socket
 * drains. So a slow client costs at most its cap plus one frame, and
 * never slows the relay, the other clients, or the pool.
 *
 * Binding. 127.0.0.1 by default; any other address needs allow_remote
 * and a token, which the client's HELLO must carry (compared in constant
 * time). The network can only say HELLO: the relay ignores anything else
 * a client sends, so nothing from the network reaches a pool.
 */
#define _GNU_SOURCE
#include "relay.h"
#include "live/netproto.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RELAY_HELLO_MAX (18 + GPB_NP_TOKEN_MAX + GPB_NAME_MAX) /* payload */
#define RELAY_HELLO_NS (5ull * 1000000000ull)   /* to say HELLO */
#define RELAY_CLOSING_NS (2ull * 1000000000ull) /* to take a BYE */
#define RELAY_DEFAULT_BUF (4u << 20)
/* Pools served at once: each costs a model and a mapping of its segment
 * (guarded against truncation, lib/live/guard.c, up to 4096), no
 * descriptor. Past it, a pool is not served, and the log says so once. */
#define RELAY_MAX_SRC GPBR_MAX_SRC
#define RELAY_SITES_MAX (64u << 20) /* bytes of site texts a source keeps */

/* An encoded keyframe: KEY_BEGIN, KEY_BLOCKS..., KEY_END frames. */
typedef struct relay_key {
  int refs;
  uint64_t seq;
  gpb_np_buf_t buf;
} relay_key_t;

struct gpbr_src {
  gpbr_t *r;
  void *user;
  const gpb_model_t *model;
  gpb_pool_info_t info;
  gpb_np_evenc_t batch;   /* with sites */
  uint32_t batch_sites;   /* its events that name a site */
  /* [without sites, with sites]; [plain, zlib] */
  gpb_np_buf_t braw[2], bframe[2][2];
  int braw_ok[2], bframe_ok[2][2];
  relay_key_t *key[2][2]; /* cache */
  int closed;
  /* Call sites: texts of ids 1..sites_asked as SITES entries, in id
   * order; [sites_from, sites_to) are new in the batch being sent. */
  const char *(*site_fn)(void *user, uint32_t site);
  void *site_user;
  uint32_t sites_asked;
  gpb_np_buf_t sites_all;
  size_t sites_sent, sites_from, sites_to;
  gpb_event_t *strip; /* GPB_NP_BATCH_MAX, for re-encoding */
};

enum { RC_HELLO, RC_LIVE, RC_CLOSING };

typedef struct relay_client {
  int fd, state;
  char peer[80];
  gpbr_src_t *src;   /* what it is served, once live */
  uint64_t deadline; /* HELLO or CLOSING: drop after this */
  uint8_t in[GPB_NP_HDR + RELAY_HELLO_MAX];
  size_t in_len;
  int zlib, sites, need_key, told_closed;
  relay_key_t *key;   /* being sent, before `out` */
  size_t key_off;
  gpb_np_buf_t out;   /* whole frames; [out_off, len) not sent yet */
  size_t out_off, fstart; /* fstart: start of the frame holding out_off */
  uint64_t resyncs;
} relay_client_t;

struct gpbr {
  gpbr_opts_t o;
  int lfd;
  uint64_t accept_pause; /* out of descriptors: no accept until then */
  uint64_t accept_logged; /* when that was last said (once per 10 s) */
  char addr[96];
  int port;
  relay_client_t **cl;
  int ncl;
  gpbr_src_t **src;
  int nsrc;
  int full_said; /* the pool cap was logged */
  gpbr_lookup_fn lookup;
  void *lookup_user;
  gpb_np_buf_t tmp;
  gpbr_counters_t n;
};

static uint64_t relay_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void gpbr_log(const gpbr_t *r, int level, const char *fmt, ...) {
  if (r ? level > r->o.verbose : level > 0) return;
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

/* Asks the source for the texts of sites sites_asked+1 to site and keeps
 * them encoded, up to RELAY_SITES_MAX bytes (later ones are not kept:
 * readers have their ids only). */
static void relay_sites_learn(gpbr_src_t *s, uint32_t site) {
  if (!s->site_fn || site <= s->sites_asked) return;
  for (uint32_t id = s->sites_asked + 1; id <= site; id++) {
    const char *t = s->site_fn(s->site_user, id);
    if (t && *t && s->sites_all.len <= RELAY_SITES_MAX - 4 - GPB_NP_SITE_TEXT_MAX &&
        !gpb__np_buf_reserve(&s->sites_all, 4 + GPB_NP_SITE_TEXT_MAX))
      gpb__np_site_put(&s->sites_all, id, t);
  }
  s->sites_asked = site;
}

/* Appends the entries in [from, to) of sites_all as SITES frames, each
 * as large as a frame may be. 0 or GPB_EHOSTMEM. */
static int relay_sites_frames(const gpbr_src_t *s, size_t from, size_t to,
                              gpb_np_buf_t *out, int zlevel) {
  const uint8_t *p = s->sites_all.p;
  while (from < to) {
    size_t end = from;
    while (end < to) {
      size_t e = 4 + (size_t)(p[end + 2] | p[end + 3] << 8);
      if (end + e - from > GPB_NP_MAX_RAW) break;
      end += e;
    }
    if (gpb__np_frame(out, GPB_NP_SITES, p + from, end - from, zlevel))
      return GPB_EHOSTMEM;
    from = end;
  }
  return 0;
}

typedef struct relay_keybuild {
  gpbr_src_t *s;
  gpb_np_buf_t *frames, *chunk;
  uint32_t count;
  uint64_t total;
  int v, z, rc;
} relay_keybuild_t;

static void relay_key_chunk(relay_keybuild_t *kb) {
  if (kb->count == 0) return;
  uint8_t *p = kb->chunk->p;
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(kb->count >> (8 * i));
  if (kb->chunk->oom ||
      gpb__np_frame(kb->frames, GPB_NP_KEY_BLOCKS, p, kb->chunk->len,
                    kb->z ? kb->s->r->o.zlevel : 0))
    kb->rc = GPB_EHOSTMEM;
  kb->chunk->len = 0;
  gpb__np_put_u32(kb->chunk, 0);
  kb->count = 0;
}

static int relay_key_visit(const gpb_block_info_t *b, void *user) {
  relay_keybuild_t *kb = user;
  /* Any state the model holds is one readers can load, even between the
   * events of one operation: the events after it apply to it alike. */
  if (kb->v) {
    relay_sites_learn(kb->s, b->site);
    gpb__np_block_put(kb->chunk, b);
  } else {
    gpb_block_info_t plain = *b;
    plain.site = 0;
    gpb__np_block_put(kb->chunk, &plain);
  }
  kb->count++;
  kb->total++;
  if (kb->chunk->len >= GPB_NP_KEY_CHUNK) relay_key_chunk(kb);
  return kb->rc;
}

/* Encodes the source's state now, with every site text so far first for
 * clients that take sites (v). Caller has flushed the batch, so the
 * keyframe's seq is the last event any client was sent. */
static relay_key_t *relay_key_build(gpbr_src_t *s, int v, int z) {
  relay_key_t *k = calloc(1, sizeof *k);
  gpb_np_buf_t blocks = {0}, chunk = {0}, pl = {0};
  if (!k) return NULL;
  k->refs = 1;
  k->seq = gpb_model_seq(s->model);
  gpb__np_put_u32(&chunk, 0);
  relay_keybuild_t kb = {s, &blocks, &chunk, 0, 0, v, z, 0};
  gpb_model_visit(s->model, relay_key_visit, &kb);
  if (!kb.rc) relay_key_chunk(&kb);
  gpb_stats_t st;
  gpb_model_stats(s->model, &st);
  gpb__np_key_begin_put(&pl, k->seq, kb.total);
  int rc = kb.rc || pl.oom;
  rc = rc || (v && relay_sites_frames(s, 0, s->sites_all.len, &k->buf,
                                      z ? s->r->o.zlevel : 0));
  rc = rc || gpb__np_frame(&k->buf, GPB_NP_KEY_BEGIN, pl.p, pl.len, 0);
  gpb__np_put(&k->buf, blocks.p, blocks.len);
  pl.len = 0;
  gpb__np_key_end_put(&pl, k->seq, &st);
  rc = rc || pl.oom || k->buf.oom;
  rc = rc || gpb__np_frame(&k->buf, GPB_NP_KEY_END, pl.p, pl.len, 0);
  gpb__np_buf_free(&blocks);
  gpb__np_buf_free(&chunk);
  gpb__np_buf_free(&pl);
  if (rc) {
    gpbr_log(s->r, -1, "out of memory for a keyframe; will retry");
    gpb__np_buf_free(&k->buf);
    free(k);
    return NULL;
  }
  gpbr_log(s->r, 1, "pool '%s': keyframe at seq %" PRIu64 ": %" PRIu64
           " blocks, %zu bytes%s", s->info.name, k->seq, kb.total, k->buf.len,
           z ? " (zlib)" : "");
  return k;
}

static void relay_key_unref(relay_key_t *k) {
  if (k && --k->refs == 0) {
    gpb__np_buf_free(&k->buf);
    free(k);
  }
}

static relay_key_t *relay_key_get(gpbr_src_t *s, int v, int z) {
  uint64_t seq = gpb_model_seq(s->model);
  relay_key_t **k = &s->key[v][z];
  if (!*k || (*k)->seq != seq) {
    relay_key_unref(*k);
    *k = relay_key_build(s, v, z);
    if (!*k) return NULL;
  }
  (*k)->refs++;
  return *k;
}

static void relay_key_drop_cache(gpbr_src_t *s) {
  for (int v = 0; v < 2; v++)
    for (int z = 0; z < 2; z++) {
      relay_key_unref(s->key[v][z]);
      s->key[v][z] = NULL;
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

static void relay_client_remove(gpbr_t *r, int i, const char *why) {
  relay_client_t *c = r->cl[i];
  gpbr_log(r, c->state == RC_LIVE ? 0 : 1, "client %s %s (%d left)", c->peer,
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

static void relay_client_refuse(gpbr_t *r, relay_client_t *c, int code,
                                const char *msg) {
  r->tmp.len = 0;
  gpb__np_bye_put(&r->tmp, code, msg);
  relay_client_put(c, GPB_NP_BYE, &r->tmp);
  c->state = RC_CLOSING;
  c->deadline = relay_now() + RELAY_CLOSING_NS;
  if (code != 0) {
    r->n.refused++;
    gpbr_log(r, 0, "client %s refused: %s", c->peer, msg);
  }
}

/* Drops the client's queued events and asks for a keyframe: it is slow. */
static void relay_client_resync(gpbr_t *r, relay_client_t *c) {
  if (c->key) {
    c->out.len = c->out_off = c->fstart = 0; /* nothing of it sent yet */
  } else if (c->out_off == c->fstart) {
    c->out.len = c->out_off;
  } else {
    c->out.len = c->fstart + relay_framelen(c->out.p + c->fstart);
  }
  c->need_key = 1;
  c->resyncs++;
  r->n.resyncs++;
  gpbr_log(r, c->resyncs == 1 ? 0 : 1,
            "client %s is slow: queued events dropped, a keyframe follows "
            "(%" PRIu64 " so far)", c->peer, c->resyncs);
}

/* The batch's payload for clients that take sites (v) or not: the one
 * encoded, or, when it named a site, that one without them (once). */
static const gpb_np_buf_t *relay_batch(gpbr_src_t *s, int v) {
  if (v || !s->batch_sites) return &s->braw[1];
  if (s->braw_ok[0]) return &s->braw[0];
  uint32_t shift = (uint32_t)__builtin_ctzll(s->info.min_block);
  char err[GPB_NP_ERRLEN];
  size_t n;
  if (!s->strip && !(s->strip = malloc(GPB_NP_BATCH_MAX * sizeof *s->strip)))
    return NULL;
  if (gpb__np_events_get(s->braw[1].p, s->braw[1].len, shift, s->strip,
                         GPB_NP_BATCH_MAX, &n, err))
    return NULL; /* ours: cannot be bad */
  gpb_np_evenc_t e;
  gpb__np_evenc_init(&e, shift);
  for (size_t i = 0; i < n; i++) {
    s->strip[i].site = 0;
    gpb__np_evenc_add(&e, &s->strip[i]);
  }
  int rc = gpb__np_evenc_finish(&e, &s->braw[0]);
  gpb__np_evenc_free(&e);
  if (rc) return NULL;
  s->braw_ok[0] = 1;
  return &s->braw[0];
}

static void relay_client_events(gpbr_t *r, relay_client_t *c) {
  gpbr_src_t *s = c->src;
  int z = c->zlib, v = c->sites;
  gpb_np_buf_t *f = &s->bframe[v][z];
  if (!s->bframe_ok[v][z]) {
    const gpb_np_buf_t *raw = relay_batch(s, v);
    int zl = z ? r->o.zlevel : 0;
    f->len = 0;
    if (!raw ||
        (v && relay_sites_frames(s, s->sites_from, s->sites_to, f, zl)) ||
        gpb__np_frame(f, GPB_NP_EVENTS, raw->p, raw->len, zl)) {
      relay_client_resync(r, c); /* out of memory: a keyframe later */
      return;
    }
    s->bframe_ok[v][z] = 1;
  }
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
static int relay_client_send(gpbr_t *r, relay_client_t *c) {
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
    r->n.bytes_sent += (uint64_t)w;
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

/* The names of the open sources, for POOLS and for messages. */
static size_t relay_names(const gpbr_t *r, const char **v, size_t cap) {
  size_t n = 0;
  for (int i = 0; i < r->nsrc && n < cap; i++)
    if (!r->src[i]->closed) v[n++] = r->src[i]->info.name;
  return n;
}

/* The source a HELLO asks for; NULL after refusing the client. */
static gpbr_src_t *relay_pick(gpbr_t *r, relay_client_t *c, const char *pool) {
  char msg[GPB_NP_MSG_MAX];
  if (*pool) {
    gpbr_src_t *s = gpbr_src_find(r, pool);
    if (!s && r->lookup) s = r->lookup(r, pool, r->lookup_user);
    if (s) return s;
    snprintf(msg, sizeof msg, "no pool '%s' here%s", pool,
             r->nsrc ? " (gpubuddy-stat --all lists them)" : "");
    relay_client_refuse(r, c, GPB_ENOTFOUND, msg);
    return NULL;
  }
  if (r->nsrc == 1) return r->src[0];
  const char *v[8];
  size_t n = relay_names(r, v, 8);
  if (r->nsrc == 0) {
    relay_client_refuse(r, c, GPB_ENOTFOUND, "no pool is published here yet");
    return NULL;
  }
  int len = snprintf(msg, sizeof msg, "this relay serves %d pools; connect "
                     "to %s/NAME, NAME one of:", r->nsrc, r->addr);
  for (size_t i = 0; i < n && len > 0 && (size_t)len < sizeof msg; i++)
    len += snprintf(msg + len, sizeof msg - (size_t)len, " %s", v[i]);
  relay_client_refuse(r, c, GPB_EINVAL, msg);
  return NULL;
}

/* POOLS, then BYE: the names, and nothing else. */
static void relay_client_list(gpbr_t *r, relay_client_t *c) {
  const char **v = malloc((size_t)(r->nsrc ? r->nsrc : 1) * sizeof *v);
  size_t n = v ? relay_names(r, v, (size_t)r->nsrc) : 0;
  r->tmp.len = 0;
  gpb__np_pools_put(&r->tmp, v, n);
  free(v);
  c->out_off = c->out.len = c->fstart = 0;
  gpb__np_frame(&c->out, GPB_NP_POOLS, r->tmp.p, r->tmp.len, 0);
  relay_client_refuse(r, c, 0, "pool list sent");
  gpbr_log(r, 1, "client %s: sent the names of %zu pools", c->peer, n);
}

static void relay_client_hello(gpbr_t *r, relay_client_t *c) {
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
  char token[GPB_NP_TOKEN_MAX + 1], pool[GPB_NAME_MAX];
  size_t tl;
  rc = gpb__np_hello_get(c->in + GPB_NP_HDR, h.len, &version, &flags, token,
                         &tl, pool, err);
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
  if (flags & GPB_NP_HELLO_LIST) {
    relay_client_list(r, c);
    return;
  }
  gpbr_src_t *s = relay_pick(r, c, pool);
  if (!s) return;
  c->src = s;
  c->zlib = (flags & GPB_NP_HELLO_ZLIB) && r->o.zlevel > 0;
  c->sites = (flags & GPB_NP_HELLO_SITES) != 0;
  c->state = RC_LIVE;
  c->need_key = 1;
  r->tmp.len = 0;
  gpb__np_info_put(&r->tmp, &s->info);
  relay_client_put(c, GPB_NP_INFO, &r->tmp);
  r->n.accepted++;
  gpbr_log(r, 0, "client %s connected to pool '%s'%s (%d clients)", c->peer,
           s->info.name, c->zlib ? ", zlib" : "", r->ncl);
}

/* Reads from a client. 0, or -1 when it is gone. */
static int relay_client_read(gpbr_t *r, relay_client_t *c) {
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

static void relay_accept(gpbr_t *r) {
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
          gpbr_log(r, 0, "accept: %s; pausing new connections (said once "
                    "per 10 s)", strerror(e));
          r->accept_logged = now;
        }
      } else if (e != EAGAIN && e != EWOULDBLOCK && e != EINTR &&
                 e != ECONNABORTED) {
        gpbr_log(r, 0, "accept: %s", strerror(e));
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
      r->n.refused++;
      gpbr_log(r, 0, "client %s refused: %s", peer, msg);
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
    gpbr_log(r, 1, "client %s: connection, waiting for HELLO", peer);
  }
}

/* Sends a source's pending batch to every client of it that takes events. */
static void relay_flush(gpbr_src_t *s) {
  gpbr_t *r = s->r;
  if (s->batch.count == 0) return;
  memset(s->bframe_ok, 0, sizeof s->bframe_ok);
  s->braw_ok[0] = 0;
  s->sites_from = s->sites_sent;
  s->sites_to = s->sites_sent = s->sites_all.len;
  if (gpb__np_evenc_finish(&s->batch, &s->braw[1])) {
    /* Out of memory: everyone resynchronizes from a keyframe later. */
    s->batch_sites = 0;
    for (int i = 0; i < r->ncl; i++)
      if (r->cl[i]->src == s) r->cl[i]->need_key = 1;
    return;
  }
  for (int i = 0; i < r->ncl; i++) {
    relay_client_t *c = r->cl[i];
    if (c->src == s && c->state == RC_LIVE && !c->need_key)
      relay_client_events(r, c);
  }
  s->batch_sites = 0;
}

void gpbr_src_event(const gpb_event_t *ev, void *user) {
  gpbr_src_t *s = user;
  gpbr_t *r = s->r;
  if (!ev) {
    gpb__np_evenc_free(&s->batch);
    gpb__np_evenc_init(&s->batch, (uint32_t)__builtin_ctzll(s->info.min_block));
    s->batch_sites = 0;
    relay_key_drop_cache(s);
    for (int i = 0; i < r->ncl; i++)
      if (r->cl[i]->src == s) r->cl[i]->need_key = 1;
    gpbr_log(r, 1, "pool '%s' resynchronized: its clients get a keyframe",
             s->info.name);
    return;
  }
  if (ev->site) {
    relay_sites_learn(s, ev->site);
    s->batch_sites++;
  }
  gpb__np_evenc_add(&s->batch, ev);
  r->n.events++;
  if (s->batch.count >= GPB_NP_BATCH_MAX) relay_flush(s);
}

void gpbr_src_closed(gpbr_src_t *s) {
  relay_flush(s);
  s->closed = 1;
}

gpbr_src_t *gpbr_src_add(gpbr_t *r, const gpb_model_t *m,
                         const gpb_pool_info_t *info, void *user) {
  if (gpbr_src_find(r, info->name)) return NULL;
  if (r->nsrc >= RELAY_MAX_SRC) {
    if (!r->full_said++)
      gpbr_log(r, -1, "serving %d pools, the most one relay serves: pool "
               "'%s' and any more are not served (run another relay)",
               RELAY_MAX_SRC, info->name);
    return NULL;
  }
  gpbr_src_t **v = realloc(r->src, (size_t)(r->nsrc + 1) * sizeof *v);
  if (!v) return NULL;
  r->src = v;
  gpbr_src_t *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->r = r;
  s->user = user;
  s->model = m;
  s->info = *info;
  gpb__np_evenc_init(&s->batch, (uint32_t)__builtin_ctzll(info->min_block));
  r->src[r->nsrc++] = s;
  return s;
}

void gpbr_src_remove(gpbr_src_t *s) {
  gpbr_t *r = s->r;
  for (int i = 0; i < r->ncl; i++) {
    relay_client_t *c = r->cl[i];
    if (c->src != s) continue;
    if (c->state == RC_LIVE) relay_client_refuse(r, c, 0, "pool removed");
    c->src = NULL;
    relay_key_unref(c->key); /* keys belong to the source's encodings */
    c->key = NULL;
  }
  for (int i = 0; i < r->nsrc; i++)
    if (r->src[i] == s) r->src[i] = r->src[--r->nsrc];
  relay_key_drop_cache(s);
  gpb__np_evenc_free(&s->batch);
  for (int v = 0; v < 2; v++) {
    gpb__np_buf_free(&s->braw[v]);
    gpb__np_buf_free(&s->bframe[v][0]);
    gpb__np_buf_free(&s->bframe[v][1]);
  }
  gpb__np_buf_free(&s->sites_all);
  free(s->strip);
  free(s);
}

void gpbr_src_set_sites(gpbr_src_t *s,
                        const char *(*fn)(void *user, uint32_t site),
                        void *user) {
  s->site_fn = fn;
  s->site_user = user;
}

int gpbr_src_count(const gpbr_t *r) { return r->nsrc; }
gpbr_src_t *gpbr_src_at(const gpbr_t *r, int i) {
  return i >= 0 && i < r->nsrc ? r->src[i] : NULL;
}
gpbr_src_t *gpbr_src_find(const gpbr_t *r, const char *name) {
  for (int i = 0; i < r->nsrc; i++)
    if (!strcmp(r->src[i]->info.name, name)) return r->src[i];
  return NULL;
}
const char *gpbr_src_name(const gpbr_src_t *s) { return s->info.name; }
int gpbr_src_is_closed(const gpbr_src_t *s) { return s->closed; }
void *gpbr_src_user(const gpbr_src_t *s) { return s->user; }

void gpbr_set_lookup(gpbr_t *r, gpbr_lookup_fn fn, void *user) {
  r->lookup = fn;
  r->lookup_user = user;
}

int gpbr_check_spec(const char *spec, const char *opt) {
  char host[256], port[16];
  if (relay_split(spec, host, sizeof host, port, sizeof port)) {
    if (opt)
      gpbr_log(NULL, 0, "%s '%s': expected ADDRESS:PORT or [V6]:PORT, "
               "port 0..65535 (try 'gpubuddy-relay --help')", opt, spec);
    return GPB_EINVAL;
  }
  return 0;
}

int gpbr_bind(const char *spec, const char *opt, int remote_ok, int flags,
              int *fd, char *name, size_t nn, int *bport) {
  char host[256], port[16];
  *fd = -1;
  if (gpbr_check_spec(spec, opt)) return GPB_EINVAL;
  relay_split(spec, host, sizeof host, port, sizeof port);
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  int g = getaddrinfo(host, port, &hints, &res);
  if (g) {
    gpbr_log(NULL, 0, "%s '%s': %s", opt, spec, gai_strerror(g));
    return GPB_ENOTFOUND;
  }
  int rc = 0;
  if (!relay_is_loopback(res->ai_addr) && !remote_ok) {
    gpbr_log(NULL, 0, "refusing to listen on %s: it is not a loopback address. "
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
      gpbr_log(NULL, 0, "cannot listen on %s: %s", spec, strerror(errno));
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

int gpbr_open(const gpbr_opts_t *o, gpbr_t **out) {
  *out = NULL;
  gpbr_t *r = calloc(1, sizeof *r);
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
  int rc = gpbr_bind(o->listen ? o->listen : def, "--listen",
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

int gpbr_port(const gpbr_t *r) { return r->port; }
const char *gpbr_addr(const gpbr_t *r) { return r->addr; }

void gpbr_counters(const gpbr_t *r, gpbr_counters_t *out) {
  *out = r->n;
  out->clients = r->ncl;
}

int gpbr_src_readers(const gpbr_src_t *s) {
  int n = 0;
  for (int i = 0; i < s->r->ncl; i++) n += s->r->cl[i]->src == s;
  return n;
}

/* Keyframes for clients that wait for one and whose socket drained, and
 * CLOSED after the last state. */
static void relay_client_upkeep(gpbr_t *r, relay_client_t *c) {
  (void)r;
  if (c->state != RC_LIVE) return;
  gpbr_src_t *s = c->src;
  if (c->need_key && !c->key && c->out_off == c->out.len) {
    c->key = relay_key_get(s, c->sites, c->zlib);
    c->key_off = 0;
    if (c->key) c->need_key = 0;
  }
  if (s->closed && !c->told_closed && !c->need_key) {
    relay_client_put(c, GPB_NP_CLOSED, NULL);
    c->told_closed = 1;
  }
}

static int relay_client_wants_out(const relay_client_t *c) {
  return (c->key && c->key_off < c->key->buf.len) || c->out_off < c->out.len;
}

/* One turn: flush the batch, poll sockets up to timeout_ms, accept, read,
 * write. Never blocks longer than timeout_ms. */
void gpbr_step(gpbr_t *r, int timeout_ms) {
  for (int i = 0; i < r->nsrc; i++) relay_flush(r->src[i]);
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
    gpbr_log(r, 0, "poll: %s", strerror(errno));
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

int gpbr_src_busy(const gpbr_src_t *s) {
  for (int i = 0; i < s->r->ncl; i++) {
    const relay_client_t *c = s->r->cl[i];
    if (c->src == s && (c->state != RC_LIVE || !c->told_closed ||
                        relay_client_wants_out(c)))
      return 1;
  }
  return 0;
}

void gpbr_bye_all(gpbr_t *r, const char *msg, int ms) {
  for (int i = 0; i < r->nsrc; i++) relay_flush(r->src[i]);
  for (int i = 0; i < r->ncl; i++) {
    relay_client_t *c = r->cl[i];
    if (c->state == RC_CLOSING) continue;
    relay_client_refuse(r, c, 0, msg);
  }
  if (r->lfd >= 0) close(r->lfd);
  r->lfd = -1;
  uint64_t end = relay_now() + (uint64_t)ms * 1000000;
  while (r->ncl > 0 && relay_now() < end) gpbr_step(r, 10);
}

void gpbr_free(gpbr_t *r) {
  if (!r) return;
  while (r->ncl > 0) relay_client_remove(r, r->ncl - 1, "closed");
  if (r->lfd >= 0) close(r->lfd);
  while (r->nsrc > 0) gpbr_src_remove(r->src[r->nsrc - 1]);
  free(r->src);
  gpb__np_buf_free(&r->tmp);
  free(r->cl);
  free(r);
}

/* ------------------------------------------------------ in-process source */

static void relay_queue_hook(const gpb_event_t *ev, void *user) {
  gpbr_queue_t *q = user;
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

int gpbr_queue_drain(gpbr_queue_t *q, gpbr_src_t *s) {
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
    if (!rc && s) gpbr_src_event(&ev[i], s);
  }
  q->spare = ev;
  q->spare_cap = cap;
  return rc ? rc : (int)n;
}

const char *gpbr_queue_site(void *user, uint32_t site) {
  gpbr_queue_t *q = user;
  /* Longer than a site may be sent: the relay cuts it at a frame. */
  return gpb_pool_site_text(q->pool, site, q->site_text,
                            sizeof q->site_text) > 0 ? q->site_text : NULL;
}

void gpbr_queue_free(gpbr_queue_t *q) {
  free(q->ev);
  free(q->spare);
  gpb_model_destroy(q->model);
  pthread_mutex_destroy(&q->mu);
}

int gpbr_queue_init(gpbr_queue_t *q, gpb_pool_t *pool) {
  memset(q, 0, sizeof *q);
  pthread_mutex_init(&q->mu, NULL);
  q->pool = pool;
  gpb_pool_info(pool, &q->info);
  int rc = gpb_model_create(q->info.managed_size, q->info.min_block, &q->model);
  if (rc) return rc;
  return gpb_pool_set_hook(pool, relay_queue_hook, q);
}
