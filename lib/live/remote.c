/* SPDX-License-Identifier: MIT */
/*
 * remote.c: the TCP transport for live readers (gpb_attach_connect).
 *
 * A reader connects to gpubuddy-relay, says HELLO (with the token, if any)
 * and gets the pool's INFO, a keyframe (KEY_BEGIN, KEY_BLOCKS..., KEY_END)
 * and then batches of EVENTS, until CLOSED or BYE (docs/PROTOCOL.md).
 * gpb_attach_connect waits until the first keyframe is loaded, so the
 * model is current when it returns; after that gpb_attach_poll reads what
 * has arrived without blocking, checks every frame (netproto.c), and feeds
 * the model, whose own validation refuses any event or keyframe that does
 * not fit. Anything wrong drops the connection with GPB_EFORMAT and a
 * detail; later polls say GPB_ECLOSED and the model keeps its last good
 * state, exactly as when the relay goes away. The reader never sends
 * anything after HELLO: the network cannot ask the relay to do anything.
 *
 * Call sites: the HELLO asks for them (GPB_NP_HELLO_SITES), and SITES
 * frames fill the reader's table (a->sites, attach.c, which bounds it);
 * a relay older than sites sends none, and events come without them.
 *
 * A relay may serve several pools (gpubuddy-relay --all): "HOST:PORT/NAME"
 * names one in the HELLO, and gpb_attach_list_remote asks for the names
 * instead of a pool (HELLO with GPB_NP_HELLO_LIST, answered by POOLS).
 */
#include "live/live.h"
#include "live/netproto.h"
#include "live/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define REMOTE_IDLE_MS 10000      /* handshake: give up after this silence */
#define REMOTE_POLL_BUDGET (16u << 20) /* bytes one poll reads at most */

typedef struct remote {
  int fd;           /* -1 once dropped */
  int done_rc;      /* 0 while live, else what polls report */
  int pending_rc;   /* a drop during connect, for the first poll */
  char done_msg[GPB_NP_ERRLEN + 64];
  char peer[128];
  uint8_t *in;      /* GPB_NP_HDR + GPB_NP_MAX_WIRE bytes */
  size_t in_len;
  uint8_t *scratch; /* GPB_NP_MAX_RAW bytes, for inflating */
  gpb_event_t *evs; /* GPB_NP_BATCH_MAX */
  int have_info, loaded;
  /* The keyframe being received. */
  int in_key;
  uint64_t key_seq, key_n;
  gpb_np_keydec_t kd;
  gpb_block_info_t *blocks;
  size_t nblocks, blocks_cap;
  int applied; /* events (and keyframes) applied in this poll */
} remote_t;

/* Drops the connection; polls report `code` once, then GPB_ECLOSED. */
static int remote_drop(remote_t *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int remote_drop(remote_t *r, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->done_msg, sizeof r->done_msg, fmt, ap);
  va_end(ap);
  if (r->fd >= 0) close(r->fd);
  r->fd = -1;
  r->done_rc = GPB_ECLOSED;
  r->in_key = 0;
  free(r->blocks);
  r->blocks = NULL;
  r->nblocks = r->blocks_cap = 0;
  return gpb__fail(code, "%s", r->done_msg);
}

/* ------------------------------------------------------------ frame input */

/* Most blocks this reader holds for one keyframe: a relay, trusted or
 * not, must not make it allocate 64 bytes for each of the 2^30 blocks a
 * pool may have (34 KB of compressed frames asked for 1 GiB). 4M blocks
 * (256 MiB) by default; GPB_REMOTE_MAX_BLOCKS raises it. */
static uint64_t remote_max_blocks(void) {
  const char *e = getenv("GPB_REMOTE_MAX_BLOCKS");
  char *end;
  unsigned long long v = e && *e ? strtoull(e, &end, 10) : 0;
  return v && e && !*end ? v : (uint64_t)1 << 22;
}

static int remote_key_begin(gpb_attach_t *a, remote_t *r, const uint8_t *p,
                            size_t n, char *err) {
  int rc = gpb__np_key_begin_get(p, n, &r->key_seq, &r->key_n, err);
  if (rc) return rc;
  /* No pool info yet means no block size to divide by: out of place. */
  uint64_t units = r->have_info && a->info.min_block
                       ? a->info.managed_size / a->info.min_block
                       : 0;
  if (!r->have_info || r->in_key || r->key_n == 0 || r->key_n > units) {
    snprintf(err, GPB_NP_ERRLEN, "KEY_BEGIN of %llu blocks out of place",
             (unsigned long long)r->key_n);
    return GPB_EFORMAT;
  }
  uint64_t most = remote_max_blocks();
  if (r->key_n > most) {
    snprintf(err, GPB_NP_ERRLEN, "the relay announced a keyframe of %llu "
             "blocks; this reader takes at most %llu (GPB_REMOTE_MAX_BLOCKS)",
             (unsigned long long)r->key_n, (unsigned long long)most);
    return GPB_EFORMAT;
  }
  gpb__np_keydec_init(&r->kd, &a->info);
  r->nblocks = 0;
  r->in_key = 1;
  return 0;
}

static int remote_key_blocks(remote_t *r, const uint8_t *p, size_t n,
                             char *err) {
  if (!r->in_key) {
    snprintf(err, GPB_NP_ERRLEN, "KEY_BLOCKS outside a keyframe");
    return GPB_EFORMAT;
  }
  /* Room for what this frame can hold (2 bytes a block at least), never
   * more than the keyframe announced. */
  size_t left = (size_t)(r->key_n - r->nblocks);
  size_t most = n / 2 < left ? n / 2 : left;
  if (r->nblocks + most > r->blocks_cap) {
    size_t cap = r->blocks_cap ? r->blocks_cap : 1024;
    while (cap < r->nblocks + most) cap *= 2;
    if (cap > r->key_n) cap = (size_t)r->key_n;
    gpb_block_info_t *nb = realloc(r->blocks, cap * sizeof *nb);
    if (!nb) {
      snprintf(err, GPB_NP_ERRLEN, "no host memory for a keyframe of %zu "
               "blocks", cap);
      return GPB_EHOSTMEM;
    }
    r->blocks = nb;
    r->blocks_cap = cap;
  }
  size_t got;
  int rc = gpb__np_key_blocks_get(&r->kd, p, n,
                                  r->blocks ? r->blocks + r->nblocks : NULL,
                                  most, &got, err);
  r->nblocks += got;
  return rc;
}

static int remote_key_end(gpb_attach_t *a, remote_t *r, const uint8_t *p,
                          size_t n, char *err) {
  uint64_t seq;
  gpb_stats_t c;
  int rc = gpb__np_key_end_get(p, n, &seq, &c, err);
  if (rc) return rc;
  if (!r->in_key || seq != r->key_seq || r->nblocks != r->key_n) {
    snprintf(err, GPB_NP_ERRLEN,
             "KEY_END (seq %llu) after %zu of %llu blocks (seq %llu)",
             (unsigned long long)seq, r->nblocks,
             (unsigned long long)r->key_n, (unsigned long long)r->key_seq);
    return GPB_EFORMAT;
  }
  rc = gpb_model_load(a->model, r->blocks, r->nblocks, seq);
  r->in_key = 0;
  /* A keyframe is the largest thing a reader holds; do not keep it. */
  free(r->blocks);
  r->blocks = NULL;
  r->nblocks = r->blocks_cap = 0;
  if (rc) {
    snprintf(err, GPB_NP_ERRLEN, "keyframe refused by the model: %s",
             gpb_last_error_detail());
    return GPB_EFORMAT;
  }
  gpb__model_set_counters(a->model, &c);
  r->loaded = 1;
  r->applied++;
  gpb__attach_notify(a, NULL);
  return 0;
}

static int remote_events(gpb_attach_t *a, remote_t *r, const uint8_t *p,
                         size_t n, char *err) {
  if (!r->loaded || r->in_key) {
    snprintf(err, GPB_NP_ERRLEN, "EVENTS before a keyframe");
    return GPB_EFORMAT;
  }
  size_t got;
  int rc = gpb__np_events_get(p, n, (uint32_t)__builtin_ctzll(a->info.min_block),
                              r->evs, GPB_NP_BATCH_MAX, &got, err);
  if (rc) return rc;
  for (size_t i = 0; i < got; i++) {
    rc = gpb_model_apply(a->model, &r->evs[i]);
    if (rc) {
      snprintf(err, GPB_NP_ERRLEN, "event %llu refused by the model: %s",
               (unsigned long long)r->evs[i].seq, gpb_last_error_detail());
      return GPB_EFORMAT;
    }
    r->applied++;
    gpb__attach_notify(a, &r->evs[i]);
  }
  return 0;
}

typedef struct remote_sites {
  gpb_attach_t *a;
  char *err;
} remote_sites_t;

static int remote_site(uint32_t id, const char *text, size_t len, void *user) {
  remote_sites_t *c = user;
  int rc = gpb__sitetab_set(&c->a->sites, id, text, len);
  if (rc) snprintf(c->err, GPB_NP_ERRLEN, "SITES: %s", gpb_last_error_detail());
  return rc;
}

/* One whole frame. 0, or an error code with `err` filled; GPB_ECLOSED
 * with done_msg set when the relay said CLOSED or BYE. */
static int remote_frame(gpb_attach_t *a, remote_t *r, const gpb_np_hdr_t *h,
                        const uint8_t *wire, char *err) {
  const uint8_t *p;
  int rc = gpb__np_payload(h, wire, r->scratch, &p, err);
  if (rc) return rc;
  size_t n = h->raw_len;
  switch (h->type) {
  case GPB_NP_INFO: {
    gpb_pool_info_t info;
    if (r->have_info) {
      snprintf(err, GPB_NP_ERRLEN, "second INFO frame");
      return GPB_EFORMAT;
    }
    rc = gpb__np_info_get(p, n, &info, err);
    if (rc) return rc;
    rc = gpb_model_create(info.managed_size, info.min_block, &a->model);
    if (rc) {
      snprintf(err, GPB_NP_ERRLEN, "cannot model the pool: %s",
               gpb_last_error_detail());
      return rc == GPB_EHOSTMEM ? rc : GPB_EFORMAT;
    }
    a->info = info;
    a->info.rank = -1; /* the wire format does not carry it */
    r->have_info = 1;
    return 0;
  }
  case GPB_NP_KEY_BEGIN:
    return remote_key_begin(a, r, p, n, err);
  case GPB_NP_KEY_BLOCKS:
    return remote_key_blocks(r, p, n, err);
  case GPB_NP_KEY_END:
    return remote_key_end(a, r, p, n, err);
  case GPB_NP_EVENTS:
    return remote_events(a, r, p, n, err);
  case GPB_NP_SITES: {
    if (!r->have_info) {
      snprintf(err, GPB_NP_ERRLEN, "SITES before INFO");
      return GPB_EFORMAT;
    }
    remote_sites_t c = {a, err};
    return gpb__np_sites_get(p, n, remote_site, &c, err);
  }
  case GPB_NP_CLOSED:
    if (n != 0) {
      snprintf(err, GPB_NP_ERRLEN, "CLOSED frame with a payload");
      return GPB_EFORMAT;
    }
    snprintf(err, GPB_NP_ERRLEN,
             "pool '%.63s' was closed; relay %.64s keeps its last state",
             a->info.name, r->peer);
    return GPB_ECLOSED;
  case GPB_NP_BYE: {
    int32_t code;
    char msg[GPB_NP_MSG_MAX + 1];
    rc = gpb__np_bye_get(p, n, &code, msg, err);
    if (rc) return rc;
    snprintf(err, GPB_NP_ERRLEN, "relay at %.48s says: %.120s", r->peer, msg);
    /* The relay's reason, when it is one this side knows, else closed. */
    if (code == GPB_EPERM || code == GPB_EBUSY || code == GPB_EVERSION ||
        code == GPB_EFORMAT || code == GPB_ENOTFOUND || code == GPB_EINVAL)
      return code;
    return GPB_ECLOSED;
  }
  default:
    snprintf(err, GPB_NP_ERRLEN, "unexpected %s frame from the relay",
             gpb__np_type_name(h->type));
    return GPB_EFORMAT;
  }
}

/* Handles every whole frame in the input buffer. */
static int remote_frames(gpb_attach_t *a, remote_t *r) {
  char err[GPB_NP_ERRLEN] = "";
  size_t off = 0;
  int rc = 0;
  gpb_np_hdr_t h = {0};
  while (r->in_len - off >= GPB_NP_HDR) {
    rc = gpb__np_hdr_parse(r->in + off, &h, err);
    if (rc) break;
    if (r->in_len - off - GPB_NP_HDR < h.len) break;
    rc = remote_frame(a, r, &h, r->in + off + GPB_NP_HDR, err);
    off += GPB_NP_HDR + h.len;
    if (rc) break;
  }
  if (rc) {
    if (rc == GPB_ECLOSED || h.type == GPB_NP_BYE)
      return remote_drop(r, rc, "%s", err);
    return remote_drop(r, rc, "bad data from relay at %s: %s", r->peer, err);
  }
  memmove(r->in, r->in + off, r->in_len - off);
  r->in_len -= off;
  return 0;
}

/* Reads what the socket has (up to a budget) and handles it. 0, or the
 * code the connection was dropped with. */
static int remote_pump(gpb_attach_t *a, remote_t *r) {
  size_t budget = REMOTE_POLL_BUDGET;
  while (r->fd >= 0 && budget > 0) {
    size_t room = GPB_NP_HDR + GPB_NP_MAX_WIRE - r->in_len;
    ssize_t got = recv(r->fd, r->in + r->in_len, room, MSG_DONTWAIT);
    if (got > 0) {
      r->in_len += (size_t)got;
      budget = (size_t)got < budget ? budget - (size_t)got : 0;
      int rc = remote_frames(a, r);
      if (rc) return rc;
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (got == 0)
      return remote_drop(r, GPB_ECLOSED, "relay at %s closed the connection%s",
                         r->peer, r->in_len ? " in the middle of a frame" : "");
    return remote_drop(r, GPB_ECLOSED, "relay at %s: %s", r->peer,
                       strerror(errno));
  }
  return 0;
}

/* ------------------------------------------------------------------ ops */

static int remote_poll(gpb_attach_t *a) {
  remote_t *r = a->impl;
  if (r->fd < 0) {
    int rc = r->pending_rc ? r->pending_rc : r->done_rc;
    r->pending_rc = 0;
    return gpb__fail(rc, "%s", r->done_msg);
  }
  r->applied = 0;
  int rc = remote_pump(a, r);
  return rc ? rc : r->applied;
}

static void remote_free(remote_t *r) {
  if (!r) return;
  if (r->fd >= 0) close(r->fd);
  free(r->in);
  free(r->scratch);
  free(r->evs);
  free(r->blocks);
  free(r);
}

static void remote_close(gpb_attach_t *a) {
  remote_free(a->impl);
  a->impl = NULL;
}

static const gpb__attach_ops_t remote_ops = {remote_poll, remote_close, NULL};

static remote_t *remote_new(void) {
  remote_t *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->fd = -1;
  r->in = malloc(GPB_NP_HDR + GPB_NP_MAX_WIRE);
  r->scratch = malloc(GPB_NP_MAX_RAW);
  r->evs = malloc(GPB_NP_BATCH_MAX * sizeof *r->evs);
  if (!r->in || !r->scratch || !r->evs) {
    remote_free(r);
    return NULL;
  }
  return r;
}

/* ------------------------------------------------------------- connecting */

/* "HOST:PORT", "[V6]:PORT", or HOST alone (default port). */
static int remote_split(const char *hp, char *host, size_t hn, char *port) {
  const char *colon;
  size_t hl;
  if (hp[0] == '[') {
    const char *end = strchr(hp, ']');
    if (!end || (end[1] && end[1] != ':'))
      return gpb__fail(GPB_EINVAL, "'%s': expected [ADDRESS]:PORT", hp);
    hp++;
    hl = (size_t)(end - hp);
    colon = end[1] ? end + 1 : NULL;
  } else {
    colon = strrchr(hp, ':');
    if (colon && strchr(hp, ':') != colon)
      return gpb__fail(GPB_EINVAL, "'%s': write IPv6 addresses as [ADDR]:PORT",
                       hp);
    hl = colon ? (size_t)(colon - hp) : strlen(hp);
  }
  if (hl == 0 || hl >= hn)
    return gpb__fail(GPB_EINVAL, "'%s': missing or too long host", hp);
  memcpy(host, hp, hl);
  host[hl] = 0;
  if (!colon) {
    snprintf(port, 8, "%d", GPB_NP_DEFAULT_PORT);
    return 0;
  }
  char *end;
  errno = 0;
  unsigned long v = strtoul(colon + 1, &end, 10);
  if (!colon[1] || *end || errno || v == 0 || v > 65535)
    return gpb__fail(GPB_EINVAL, "'%s': port must be 1..65535", colon + 1);
  snprintf(port, 8, "%lu", v);
  return 0;
}

static int remote_wait(int fd, short ev, int ms) {
  struct pollfd p = {fd, ev, 0};
  int n;
  do n = poll(&p, 1, ms);
  while (n < 0 && errno == EINTR);
  return n;
}

static int remote_dial(remote_t *r, const char *hostport) {
  char host[256], port[8];
  int rc = remote_split(hostport, host, sizeof host, port);
  if (rc) return rc;
  snprintf(r->peer, sizeof r->peer, "%s", hostport);
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int g = getaddrinfo(host, port, &hints, &res);
  if (g)
    return gpb__fail(GPB_ENOTFOUND, "relay host '%s': %s", host,
                     gai_strerror(g));
  int err = 0;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    ai->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS) {
      socklen_t sl = sizeof err;
      if (remote_wait(fd, POLLOUT, REMOTE_IDLE_MS) <= 0)
        err = ETIMEDOUT;
      else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0)
        err = errno;
      if (!err) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        r->fd = fd;
        break;
      }
    } else {
      err = errno;
    }
    close(fd);
  }
  freeaddrinfo(res);
  if (r->fd < 0)
    return gpb__fail(GPB_EIO, "cannot connect to relay at %s: %s (is "
                     "gpubuddy-relay running there?)", hostport,
                     strerror(err ? err : ECONNREFUSED));
  return 0;
}

static int remote_hello(remote_t *r, const char *token, const char *pool,
                        uint32_t flags) {
  gpb_np_buf_t pl = {0}, fr = {0};
  gpb__np_hello_put(&pl, flags, token, pool);
  int rc = pl.oom ? GPB_EHOSTMEM : gpb__np_frame(&fr, GPB_NP_HELLO, pl.p, pl.len, 0);
  for (size_t off = 0; !rc && off < fr.len;) {
    ssize_t w = send(r->fd, fr.p + off, fr.len - off, MSG_NOSIGNAL);
    if (w > 0) {
      off += (size_t)w;
    } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (remote_wait(r->fd, POLLOUT, REMOTE_IDLE_MS) <= 0)
        rc = gpb__fail(GPB_EIO, "relay at %s does not take our HELLO", r->peer);
    } else {
      rc = gpb__fail(GPB_EIO, "relay at %s: %s", r->peer, strerror(errno));
    }
  }
  gpb__np_buf_free(&pl);
  gpb__np_buf_free(&fr);
  return rc;
}

/* Splits "HOST:PORT/NAME" into the address and the pool name ("" when
 * there is none), and takes the token from the environment if need be. */
static int remote_args(const char *addr, const char **token, char *hp,
                       size_t hn, char *pool) {
  if (!addr || !*addr) return gpb__fail(GPB_EINVAL, "empty relay address");
  const char *slash = strrchr(addr, '/');
  size_t hl = slash ? (size_t)(slash - addr) : strlen(addr);
  if (hl == 0 || hl >= hn)
    return gpb__fail(GPB_EINVAL, "'%s': missing or too long address", addr);
  memcpy(hp, addr, hl);
  hp[hl] = 0;
  pool[0] = 0;
  if (slash) {
    if (!slash[1])
      return gpb__fail(GPB_EINVAL, "'%s': no pool name after the '/' (give "
                       "HOST:PORT/NAME, or HOST:PORT for the relay's list)",
                       addr);
    int rc = gpb__shm_check_name(slash + 1);
    /* The detail is copied first: formatting it into the message it is
     * part of wrote it twice. */
    char why[160];
    snprintf(why, sizeof why, "%s", rc ? gpb_last_error_detail() : "");
    if (rc) return gpb__fail(rc, "'%s': bad pool name after the '/': %s",
                             addr, why);
    snprintf(pool, GPB_NAME_MAX, "%s", slash + 1);
  }
  if (!*token || !**token) *token = getenv("GPB_RELAY_TOKEN");
  if (*token && strlen(*token) > GPB_NP_TOKEN_MAX)
    return gpb__fail(GPB_EINVAL, "token longer than %d bytes", GPB_NP_TOKEN_MAX);
  return 0;
}

int gpb_attach_connect(const char *addr, const char *token,
                       gpb_attach_t **out) {
  if (!out) return gpb__fail(GPB_EINVAL, "out is NULL");
  *out = NULL;
  char hostport[300], pool[GPB_NAME_MAX];
  int rc = remote_args(addr, &token, hostport, sizeof hostport, pool);
  if (rc) return rc;
  gpb_attach_t *a = calloc(1, sizeof *a);
  remote_t *r = remote_new();
  if (!a || !r) {
    free(a);
    remote_free(r);
    return gpb__fail(GPB_EHOSTMEM, "no memory for a reader");
  }
  a->ops = &remote_ops;
  a->impl = r;
  rc = remote_dial(r, hostport);
  if (!rc)
    rc = remote_hello(r, token, pool, GPB_NP_HELLO_ZLIB | GPB_NP_HELLO_SITES);
  /* Wait for INFO and the first keyframe: the model is current on return. */
  while (!rc && !r->loaded) {
    int n = remote_wait(r->fd, POLLIN, REMOTE_IDLE_MS);
    if (n <= 0) {
      rc = gpb__fail(GPB_EIO, "relay at %s sent no keyframe within %d s",
                     hostport, REMOTE_IDLE_MS / 1000);
      break;
    }
    rc = remote_pump(a, r);
    /* A state arrived: return it even if the stream ended right after
     * (pool closed); the first poll reports that. */
    if (r->loaded) {
      r->pending_rc = rc;
      rc = 0;
    }
    else if (!rc && r->fd < 0) rc = gpb__fail(r->done_rc, "%s", r->done_msg);
  }
  if (rc) {
    gpb_attach_close(a);
    return rc;
  }
  *out = a;
  return 0;
}

typedef struct list_ctx {
  void (*fn)(const char *, void *);
  void *user;
  int n;
} list_ctx_t;

static void list_one(const char *name, void *user) {
  list_ctx_t *c = user;
  c->n++;
  c->fn(name, c->user);
}

/* The names list: POOLS, then the relay closes. Handles every whole frame
 * in r->in; 1 once the list was handed out, 0 for more, or an error. */
static int remote_list_frames(remote_t *r, void (*fn)(const char *, void *),
                              void *user, int *count) {
  char err[GPB_NP_ERRLEN] = "";
  gpb_np_hdr_t h;
  if (r->in_len < GPB_NP_HDR) return 0;
  int rc = gpb__np_hdr_parse(r->in, &h, err);
  if (rc) return gpb__fail(rc, "bad data from relay at %s: %s", r->peer, err);
  if (r->in_len - GPB_NP_HDR < h.len) return 0;
  const uint8_t *p;
  rc = gpb__np_payload(&h, r->in + GPB_NP_HDR, r->scratch, &p, err);
  if (!rc && h.type == GPB_NP_POOLS) {
    list_ctx_t c = {fn, user, 0};
    rc = gpb__np_pools_get(p, h.raw_len, list_one, &c, err);
    if (!rc) {
      *count = c.n;
      return 1;
    }
  } else if (!rc && h.type == GPB_NP_BYE) {
    int32_t code;
    char msg[GPB_NP_MSG_MAX + 1];
    rc = gpb__np_bye_get(p, h.raw_len, &code, msg, err);
    if (!rc)
      return gpb__fail(code < 0 ? code : GPB_ECLOSED, "relay at %s says: %s",
                       r->peer, msg);
  } else if (!rc) {
    snprintf(err, sizeof err, "%s frame where POOLS was expected (a relay "
             "older than the pool list?)", gpb__np_type_name(h.type));
    rc = GPB_EFORMAT;
  }
  return gpb__fail(rc, "bad data from relay at %s: %s", r->peer, err);
}

int gpb_attach_list_remote(const char *addr, const char *token,
                           void (*fn)(const char *name, void *user),
                           void *user) {
  if (!fn) return gpb__fail(GPB_EINVAL, "fn is NULL");
  char hostport[300], pool[GPB_NAME_MAX];
  int rc = remote_args(addr, &token, hostport, sizeof hostport, pool);
  if (rc) return rc;
  remote_t *r = remote_new();
  if (!r) return gpb__fail(GPB_EHOSTMEM, "no memory for a reader");
  int count = 0;
  rc = remote_dial(r, hostport);
  if (!rc) rc = remote_hello(r, token, NULL, GPB_NP_HELLO_LIST);
  while (!rc) {
    if (remote_wait(r->fd, POLLIN, REMOTE_IDLE_MS) <= 0) {
      rc = gpb__fail(GPB_EIO, "relay at %s sent no pool list within %d s",
                     hostport, REMOTE_IDLE_MS / 1000);
      break;
    }
    size_t room = GPB_NP_HDR + GPB_NP_MAX_WIRE - r->in_len;
    ssize_t got = recv(r->fd, r->in + r->in_len, room, MSG_DONTWAIT);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) {
      rc = gpb__fail(GPB_ECLOSED, "relay at %s closed the connection before "
                     "its pool list", hostport);
      break;
    }
    r->in_len += (size_t)got;
    rc = remote_list_frames(r, fn, user, &count);
    if (rc == 1) break;
  }
  remote_free(r);
  return rc < 0 ? rc : count;
}

/* Runs bytes through the frame handling of a reader that never connected,
 * in chunks, as if they had arrived from a relay; for the fuzz target. */
int gpb__remote_feed(const uint8_t *data, size_t n, size_t chunk) {
  gpb_attach_t *a = calloc(1, sizeof *a);
  remote_t *r = remote_new();
  if (!a || !r) {
    free(a);
    remote_free(r);
    return GPB_EHOSTMEM;
  }
  a->ops = &remote_ops;
  a->impl = r;
  snprintf(r->peer, sizeof r->peer, "fuzz");
  r->fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* dropped like a socket */
  int rc = 0;
  if (chunk == 0) chunk = 1;
  for (size_t off = 0; !rc && r->fd >= 0 && off < n;) {
    size_t room = GPB_NP_HDR + GPB_NP_MAX_WIRE - r->in_len;
    size_t take = n - off < chunk ? n - off : chunk;
    if (take > room) take = room;
    memcpy(r->in + r->in_len, data + off, take);
    r->in_len += take;
    off += take;
    rc = remote_frames(a, r);
  }
  if (!rc && a->model) rc = gpb_model_check(a->model);
  gpb_attach_close(a);
  return rc;
}
