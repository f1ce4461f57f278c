/* SPDX-License-Identifier: MIT */
/*
 * http.c: gpubuddy-relay's /metrics listener, the request side (http.h).
 *
 * Judging. A request is judged on the bytes it has sent so far, so that
 * garbage is answered at once rather than after a timeout: a NUL or a
 * control byte anywhere, a byte above 0x7e in the request line, or an
 * empty first line is 400; once the request line ends, another method is
 * 405 and another path 404, without waiting for headers. Only a GET of
 * /metrics waits for the blank line that ends the headers, then for the
 * token when one is set (compared exactly, in constant time).
 *
 * Serving. One thread, one poll() over the listening socket and up to
 * max_conns non-blocking connections. Each connection has one deadline
 * from its accept to its last byte written (SO_RCVTIMEO restarted on
 * every byte, so one byte a second held the old one-at-a-time server
 * forever); a full table evicts its oldest connection. A scrape waits at
 * most for the body to be built, never for another client.
 */
#define _GNU_SOURCE
#include "http.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ judging */

static int http_bad(const char **why, const char *w, int code) {
  *why = w;
  return code;
}

/* Whether header line [p, e) is "Authorization: Bearer TOKEN". */
static int http_auth_line(const char *p, const char *e, const char *token) {
  static const char name[] = "authorization:";
  size_t nl = sizeof name - 1;
  if ((size_t)(e - p) < nl || strncasecmp(p, name, nl) != 0) return 0;
  p += nl;
  while (p < e && (*p == ' ' || *p == '\t')) p++;
  while (e > p && (e[-1] == ' ' || e[-1] == '\t')) e--;
  if (e - p < 7 || strncasecmp(p, "bearer ", 7) != 0) return 0;
  p += 7;
  while (p < e && *p == ' ') p++;
  size_t n = (size_t)(e - p), tn = strlen(token);
  unsigned diff = n != tn;
  for (size_t i = 0; i < tn; i++)
    diff |= (unsigned char)token[i] ^ (unsigned char)(i < n ? p[i] : 0);
  return diff == 0;
}

/* Whether the headers [p, e) carry the token. */
static int http_authorized(const char *p, const char *e, const char *token) {
  while (p < e) {
    const char *nl = memchr(p, '\n', (size_t)(e - p));
    const char *le = nl ? nl : e;
    const char *lc = le > p && le[-1] == '\r' ? le - 1 : le;
    if (http_auth_line(p, lc, token)) return 1;
    p = nl ? nl + 1 : e;
  }
  return 0;
}

/* Judges a complete request line [p, e) (no CR LF). */
static int http_line(const char *p, const char *e, const char **why) {
  const char *sp1 = memchr(p, ' ', (size_t)(e - p));
  if (!sp1 || sp1 == p) return http_bad(why, "bad request line", 400);
  const char *t = sp1 + 1;
  const char *sp2 = memchr(t, ' ', (size_t)(e - t));
  if (!sp2 || sp2 == t || e - sp2 - 1 < 8 ||
      strncmp(sp2 + 1, "HTTP/1.", 7) != 0)
    return http_bad(why, "bad request line", 400);
  if (sp1 - p != 3 || strncmp(p, "GET", 3) != 0)
    return http_bad(why, "method other than GET", 405);
  size_t tl = (size_t)(sp2 - t);
  if (tl < 8 || strncmp(t, "/metrics", 8) != 0 || (tl > 8 && t[8] != '?'))
    return http_bad(why, "path other than /metrics", 404);
  return 0;
}

/* The first bad byte in [p, e): NUL, a control byte (but CR, LF and, in
 * headers, tab), DEL, or in the request line anything above 0x7e. NULL
 * when there is none; *why says which. */
static const char *http_bad_byte(const char *p, const char *e, int line,
                                 const char **why) {
  for (; p < e; p++) {
    unsigned char c = (unsigned char)*p;
    if (c == 0) {
      *why = "NUL byte";
      return p;
    }
    if ((c < 0x20 && c != '\r' && c != '\n' && (line || c != '\t')) ||
        c == 0x7f || (line && c > 0x7e)) {
      *why = "binary data";
      return p;
    }
  }
  return NULL;
}

/* Bytes are judged in the order they came, and a judgement looks only
 * at the bytes before the point it is made, so more bytes never change
 * it: the server answers as soon as there is one. */
int gpbr_http_judge(const char *buf, size_t n, int eof, const char *token,
                    const char **why) {
  *why = "";
  if (n == 0)
    return eof ? http_bad(why, "empty request", 400) : 0;
  const char *line_end = memchr(buf, '\n', n);
  const char *le = line_end ? line_end : buf + n;
  if (http_bad_byte(buf, le, 1, why)) return 400;
  if (!line_end)
    return n >= GPBR_HTTP_MAX ? http_bad(why, "request line too long", 431)
           : eof              ? http_bad(why, "request cut short", 400)
                              : 0;
  if (le > buf && le[-1] == '\r') le--;
  if (le == buf) return http_bad(why, "empty request line", 400);
  int rc = http_line(buf, le, why);
  if (rc) return rc;
  /* The headers end with an empty line; each is checked as it comes. */
  const char *h = line_end + 1, *end = NULL, *p = h;
  while (p < buf + n) {
    const char *nl = memchr(p, '\n', (size_t)(buf + n - p));
    if (http_bad_byte(p, nl ? nl : buf + n, 0, why)) return 400;
    if (!nl) break;
    if (nl == p || (nl == p + 1 && *p == '\r')) {
      end = p;
      break;
    }
    p = nl + 1;
  }
  if (!end)
    return n >= GPBR_HTTP_MAX ? http_bad(why, "headers too long", 431)
           : eof              ? http_bad(why, "headers cut short", 400)
                              : 0;
  if (token && !http_authorized(h, end, token))
    return http_bad(why, "no token or a wrong one", 401);
  return 200;
}

/* ------------------------------------------------------------ serving */

typedef struct http_conn {
  int fd;           /* -1: free */
  uint64_t born;    /* accept time (ns) */
  uint64_t deadline;
  size_t n;         /* request bytes read */
  char *out;        /* the answer, once judged */
  size_t out_len, out_off;
  char req[GPBR_HTTP_MAX];
} http_conn_t;

static uint64_t http_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void http_close(http_conn_t *c) {
  if (c->fd >= 0) close(c->fd);
  free(c->out);
  c->fd = -1;
  c->out = NULL;
}

static const char *http_reason(int code) {
  switch (code) {
  case 200: return "OK";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 408: return "Request Timeout";
  case 431: return "Request Header Fields Too Large";
  default: return "Internal Server Error";
  }
}

/* Puts the answer to `code` in c->out. Out of memory: the connection is
 * closed unanswered. */
static void http_answer(const gpbr_http_opts_t *o, http_conn_t *c, int code,
                        const char *why) {
  char *body = NULL, msg[160];
  size_t blen = 0;
  if (code == 200 && o->body(&body, &blen, o->user) != 0) {
    free(body);
    body = NULL;
    code = 500;
    why = "cannot read the pools";
  }
  if (code != 200) {
    blen = (size_t)snprintf(msg, sizeof msg, "gpubuddy-relay serves GET "
                            "/metrics only: %s\n", why);
    body = NULL;
  }
  const char *b = body ? body : msg;
  static const char type[] = "text/plain; version=0.0.4; charset=utf-8";
  char head[320];
  int hn = snprintf(head, sizeof head, "HTTP/1.0 %d %s\r\nContent-Type: %s"
                    "\r\nContent-Length: %zu\r\n%s%sConnection: close\r\n\r\n",
                    code, http_reason(code), type, blen,
                    code == 405 ? "Allow: GET\r\n" : "",
                    code == 401 ? "WWW-Authenticate: Bearer\r\n" : "");
  c->out = malloc((size_t)hn + blen);
  if (c->out) {
    memcpy(c->out, head, (size_t)hn);
    memcpy(c->out + hn, b, blen);
    c->out_len = (size_t)hn + blen;
    c->out_off = 0;
  }
  free(body);
  if (!c->out) http_close(c);
}

/* Reads what the client sent; judges it; may answer. */
static void http_read(const gpbr_http_opts_t *o, http_conn_t *c) {
  int eof = 0;
  for (;;) {
    if (c->n == sizeof c->req) break;
    ssize_t got = recv(c->fd, c->req + c->n, sizeof c->req - c->n, 0);
    if (got > 0) {
      c->n += (size_t)got;
      continue;
    }
    if (got == 0) eof = 1;
    else if (errno == EINTR) continue;
    else if (errno != EAGAIN && errno != EWOULDBLOCK) {
      http_close(c);
      return;
    }
    break;
  }
  const char *why;
  int code = gpbr_http_judge(c->req, c->n, eof, o->token, &why);
  if (code) http_answer(o, c, code, why);
  else if (eof) http_close(c);
}

static void http_write(http_conn_t *c) {
  while (c->out_off < c->out_len) {
    ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                     MSG_NOSIGNAL);
    if (w > 0) {
      c->out_off += (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    break;
  }
  /* All written (or the peer is gone): a half close lets the client
   * read to the end before it sees the connection go. */
  shutdown(c->fd, SHUT_WR);
  http_close(c);
}

/* Takes one new connection, evicting the oldest when the table is full. */
static void http_accept(const gpbr_http_opts_t *o, http_conn_t *cs, int nc,
                        uint64_t now, uint64_t *pause_until) {
  int fd = accept4(o->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
        errno == ENOMEM)
      *pause_until = now + 100000000ull; /* back off: no busy loop */
    return;
  }
  http_conn_t *slot = NULL, *oldest = NULL;
  for (int i = 0; i < nc && !slot; i++) {
    if (cs[i].fd < 0) slot = &cs[i];
    else if (!oldest || cs[i].born < oldest->born) oldest = &cs[i];
  }
  if (!slot) {
    http_close(oldest);
    slot = oldest;
  }
  uint64_t dl = (uint64_t)(o->deadline_ms > 0 ? o->deadline_ms : 5000);
  slot->fd = fd;
  slot->born = now;
  slot->deadline = now + dl * 1000000ull;
  slot->n = 0;
  slot->out = NULL;
}

int gpbr_http_serve(const gpbr_http_opts_t *o) {
  int nc = o->max_conns > 0 ? o->max_conns : 64;
  http_conn_t *cs = calloc((size_t)nc, sizeof *cs);
  struct pollfd *pf = calloc((size_t)nc + 1, sizeof *pf);
  if (!cs || !pf) {
    free(cs);
    free(pf);
    return -1;
  }
  for (int i = 0; i < nc; i++) cs[i].fd = -1;
  uint64_t pause_until = 0;
  while (!*o->stop) {
    uint64_t now = http_now(), next = now + 200000000ull;
    for (int i = 0; i < nc; i++) {
      http_conn_t *c = &cs[i];
      if (c->fd < 0) continue;
      if (now >= c->deadline) {
        /* Too slow: a late answer if it had none, then gone. */
        if (!c->out) http_answer(o, c, 408, "too slow");
        if (c->fd >= 0) {
          (void)!send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                      MSG_NOSIGNAL | MSG_DONTWAIT);
          http_close(c);
        }
        continue;
      }
      if (c->deadline < next) next = c->deadline;
    }
    pf[0].fd = now >= pause_until ? o->fd : -1;
    pf[0].events = POLLIN;
    for (int i = 0; i < nc; i++) {
      pf[i + 1].fd = cs[i].fd;
      pf[i + 1].events = cs[i].out ? POLLOUT : POLLIN;
      pf[i + 1].revents = 0;
    }
    int wait_ms = (int)((next - now) / 1000000ull) + 1;
    if (poll(pf, (nfds_t)nc + 1, wait_ms) <= 0) continue;
    now = http_now();
    for (int i = 0; i < nc; i++) {
      if (cs[i].fd < 0 || !pf[i + 1].revents) continue;
      if (!cs[i].out) http_read(o, &cs[i]);
      if (cs[i].fd >= 0 && cs[i].out) http_write(&cs[i]);
    }
    if (pf[0].fd >= 0 && (pf[0].revents & POLLIN))
      http_accept(o, cs, nc, now, &pause_until);
  }
  for (int i = 0; i < nc; i++) http_close(&cs[i]);
  free(cs);
  free(pf);
  return 0;
}
