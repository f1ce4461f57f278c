/* SPDX-License-Identifier: MIT */
/*
 * http.h: the request side of gpubuddy-relay's /metrics listener
 * (http.c): what to answer to the bytes a client has sent so far, and a
 * poll()-driven server that holds many connections at once, each under
 * a total deadline, so no client (slow, silent or garbled) holds up the
 * others.
 */
#ifndef GPB_TOOLS_HTTP_H
#define GPB_TOOLS_HTTP_H

#include <signal.h>
#include <stddef.h>

#define GPBR_HTTP_MAX 8192 /* bytes of request line and headers */

/* Judges the first n bytes of a request. eof: the client sent no more.
 * Returns 0 while more bytes are needed, else the status to answer:
 * 200 (GET /metrics, authorized), 400 (empty, NUL, control or binary
 * bytes, a bad request line, headers cut short), 401 (token missing or
 * wrong; token NULL needs none), 404 (another path), 405 (another
 * method), 431 (no end of headers within GPBR_HTTP_MAX bytes). A bad
 * request line is judged as soon as it ends, without its headers. *why
 * gets a short reason for the log. */
int gpbr_http_judge(const char *buf, size_t n, int eof, const char *token,
                    const char **why);

/* Builds the body of a 200 answer into a malloc'd buffer; 0 or -1. */
typedef int (*gpbr_http_body_fn)(char **body, size_t *len, void *user);

typedef struct gpbr_http_opts {
  int fd;              /* the listening socket */
  const char *token;   /* NULL: none needed */
  int deadline_ms;     /* per connection, accept to last byte; 0: 5000 */
  int max_conns;       /* 0: 64; a new one then evicts the oldest */
  gpbr_http_body_fn body;
  void *user;
  volatile sig_atomic_t *stop; /* the loop returns once it is non-zero */
} gpbr_http_opts_t;

/* Serves until *stop. Returns 0, or -1 when out of host memory. */
int gpbr_http_serve(const gpbr_http_opts_t *o);

#endif /* GPB_TOOLS_HTTP_H */
