/* SPDX-License-Identifier: MIT */
/*
 * relay.h: the relay core (relay.c). It serves the block maps of one or
 * more pools over TCP to gpb_attach_connect readers: one listening
 * socket, one thread, one poll() loop, bounded memory per reader.
 *
 * A source is a pool the relay serves: a model kept current by someone
 * else (a live reader in gpubuddy-relay, an in-process pool in the tests
 * and the benchmark), whose events are handed over with gpbr_src_event.
 * A reader's HELLO names the source it wants, or names none when there
 * is one. The core never reads a pool itself, so it never blocks on one.
 */
#ifndef GPB_TOOLS_RELAY_H
#define GPB_TOOLS_RELAY_H

#include "gpubuddy.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gpbr_opts {
  const char *listen;  /* "ADDR:PORT"; NULL = 127.0.0.1:GPB_NP_DEFAULT_PORT */
  const char *token;   /* NULL or "": none needed */
  int allow_remote;
  int max_clients;     /* 0: 16 */
  size_t client_buf;   /* bytes of queued events per client; 0: 4 MiB */
  int zlevel;          /* 0 = never compress */
  int verbose;         /* -1 quiet, 0 normal, 1 chatty */
} gpbr_opts_t;

/* Sources one relay serves at most; gpbr_src_add refuses more (and logs
 * that once). */
#define GPBR_MAX_SRC 4096

typedef struct gpbr gpbr_t;
typedef struct gpbr_src gpbr_src_t;

typedef struct gpbr_counters {
  uint64_t events, bytes_sent, resyncs, accepted, refused;
  int clients;
} gpbr_counters_t;

/* Binds and listens. Anything but loopback needs allow_remote and a token:
 * GPB_EPERM otherwise; GPB_EINVAL for a bad address. Said on stderr. */
int gpbr_open(const gpbr_opts_t *o, gpbr_t **out);
void gpbr_free(gpbr_t *r);
int gpbr_port(const gpbr_t *r);
const char *gpbr_addr(const gpbr_t *r); /* "127.0.0.1:7461" */
void gpbr_counters(const gpbr_t *r, gpbr_counters_t *out);

/* One turn: flush batches, poll sockets up to timeout_ms, accept, read,
 * write. Never blocks longer than timeout_ms. */
void gpbr_step(gpbr_t *r, int timeout_ms);
/* Says BYE to every reader and gives them up to ms to take it; closes the
 * listening socket. */
void gpbr_bye_all(gpbr_t *r, const char *msg, int ms);

/* Adds a source named info->name, served from model m (which must stay
 * valid until the source is removed); user is the caller's. NULL when out
 * of memory, when a source of that name is there already, or when
 * GPBR_MAX_SRC are served (logged once). */
gpbr_src_t *gpbr_src_add(gpbr_t *r, const gpb_model_t *m,
                         const gpb_pool_info_t *info, void *user);
/* The hook of a source's reader: an event its model took, or NULL after
 * a resynchronization (readers get a keyframe). user is the source. */
void gpbr_src_event(const gpb_event_t *ev, void *src);
/* Lets the source's readers that take call sites have their frames: fn
 * gives site's text ("FRAME;FRAME;...") or NULL, and is asked once per
 * id, in id order, on the relay's thread. */
void gpbr_src_set_sites(gpbr_src_t *s,
                        const char *(*fn)(void *user, uint32_t site),
                        void *user);
/* The pool is gone: its readers get the state so far, then CLOSED; new
 * readers still get that last state. */
void gpbr_src_closed(gpbr_src_t *s);
/* Readers of the source still being sent its last state or CLOSED. */
int gpbr_src_busy(const gpbr_src_t *s);
/* Readers attached to the source, in any state. */
int gpbr_src_readers(const gpbr_src_t *s);
/* Removes it: its readers get BYE ("pool removed"). */
void gpbr_src_remove(gpbr_src_t *s);
int gpbr_src_count(const gpbr_t *r);
gpbr_src_t *gpbr_src_at(const gpbr_t *r, int i);
gpbr_src_t *gpbr_src_find(const gpbr_t *r, const char *name);
const char *gpbr_src_name(const gpbr_src_t *s);
int gpbr_src_is_closed(const gpbr_src_t *s);
void *gpbr_src_user(const gpbr_src_t *s);

/* Asked when a HELLO names a pool the relay has no source for: the
 * program may add one (gpbr_src_add) and return it, or return NULL. */
typedef gpbr_src_t *(*gpbr_lookup_fn)(gpbr_t *r, const char *name, void *user);
void gpbr_set_lookup(gpbr_t *r, gpbr_lookup_fn fn, void *user);

/* 0 when spec has the form gpbr_bind takes (a port 0..65535; the address
 * is not looked up), else GPB_EINVAL, said on stderr naming opt (opt
 * NULL: not said): a command line checks its options with it before it
 * starts anything. */
int gpbr_check_spec(const char *spec, const char *opt);
/* Listens on spec ("ADDR:PORT", "[V6]:PORT"; port 0 picks one) for opt
 * (named in messages). Anything but loopback needs remote_ok: the
 * relay's rule, for its readers and its metrics alike. 0 with *fd, the
 * bound address's name and port; or a GPB_E* code, said on stderr. */
int gpbr_bind(const char *spec, const char *opt, int remote_ok, int flags,
              int *fd, char *name, size_t nn, int *port);
/* "gpubuddy-relay: ..." on stderr when level <= r's verbosity (any r may
 * be NULL: level 0 and below are said). */
void gpbr_log(const gpbr_t *r, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* An in-process source (tests, benchmark, embedding): the pool's hook
 * queues its events under a lock; the relay's thread drains them into the
 * queue's own model and hands them to the source. */
typedef struct gpbr_queue {
  pthread_mutex_t mu;
  gpb_event_t *ev, *spare;
  size_t n, cap, spare_cap;
  gpb_model_t *model;
  gpb_pool_info_t info;
  int failed;
  gpb_pool_t *pool;
  char site_text[8192];
} gpbr_queue_t;

/* Creates the queue for pool and installs its hook; call before the pool
 * has any event. */
int gpbr_queue_init(gpbr_queue_t *q, gpb_pool_t *pool);
/* Applies what was queued to the model and hands it to s (may be NULL).
 * The count, or <0 when the model refused one (a bug). */
int gpbr_queue_drain(gpbr_queue_t *q, gpbr_src_t *s);
/* The pool's site texts, for gpbr_src_set_sites (user: the queue). */
const char *gpbr_queue_site(void *user, uint32_t site);
void gpbr_queue_free(gpbr_queue_t *q);

#endif /* GPB_TOOLS_RELAY_H */
