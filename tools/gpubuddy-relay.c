/* SPDX-License-Identifier: MIT */
/*
 * gpubuddy-relay: serves live pools' block maps over TCP, for viewers on
 * another machine (gpb_attach_connect, gpubuddy-view --connect), and
 * Prometheus metrics for every pool on the machine (--metrics).
 *
 * The relay core (relay/relay.c) does the serving; this program feeds it.
 * Each pool it serves is one more local reader (gpb_attach_open): it never
 * writes to a pool and the allocating program never waits on it. With
 * --all it looks for new pools once a second, and when a reader names one
 * it has not seen yet; a pool that is gone is kept while readers hold it,
 * and replaced when a pool of the same name is published again.
 */
#define _GNU_SOURCE
#include "gpubuddy.h"
#include "http.h"
#include "live/netproto.h"
#include "metrics.h"
#include "opts.h"
#include "relay.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static volatile sig_atomic_t relay_stop;
static void relay_on_signal(int sig) { relay_stop = sig; }

static void relay_usage(FILE *f) {
  fprintf(f,
"Usage: gpubuddy-relay [OPTIONS] NAME\n"
"       gpubuddy-relay --all [OPTIONS]\n"
"       gpubuddy-relay --metrics ADDR:PORT [OPTIONS] [NAME | --all]\n"
"Serves the live pool published as NAME (GPB_PUBLISH=NAME, or a pool\n"
"created with gpb_config_t.name) over TCP to gpubuddy-view --connect and\n"
"other gpb_attach_connect readers. With --all, one port serves every pool\n"
"published on this machine, including pools that appear later; a reader\n"
"names one as HOST:PORT/NAME. Read-only: nothing from the network\n"
"reaches a pool, and the allocating program never waits on the relay.\n"
"\n"
"  --all                serve every pool on this machine, now and later\n"
"                       (up to 4096 at once)\n"
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
"                       (default: keep serving the last state; one NAME)\n"
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
"                                  gpubuddy-view --connect 127.0.0.1:%d\n"
"Every pool of an 8-GPU job:       gpubuddy-relay --all\n"
"                                  gpubuddy-view --connect 127.0.0.1:7461\n",
          GPB_NP_DEFAULT_PORT, GPB_NP_DEFAULT_PORT, GPB_NP_DEFAULT_PORT,
          GPB_NP_DEFAULT_PORT);
}

/* ------------------------------------------------------------ sources */

/* The texts of the pool's call sites, as its live segment gave them. */
static const char *app_site(void *a, uint32_t site) {
  return gpb_attach_site(a, site);
}

/* Attaches pool `name` and serves it. NULL when it cannot be read now. */
static gpbr_src_t *app_attach(gpbr_t *r, const char *name, int say) {
  gpb_attach_t *a;
  int rc = gpb_attach_open(name, &a);
  if (rc) {
    if (say)
      gpbr_log(NULL, 0, "cannot attach to pool '%s': %s (%s). Is the program "
               "running with GPB_PUBLISH=%s?", name, gpb_strerror(rc),
               gpb_last_error_detail(), name);
    return NULL;
  }
  gpb_pool_info_t info;
  gpb_attach_info(a, &info);
  snprintf(info.name, sizeof info.name, "%s", name);
  gpbr_src_t *s = gpbr_src_add(r, gpb_attach_model(a), &info, a);
  if (!s) {
    gpb_attach_close(a);
    return NULL;
  }
  gpb_attach_set_hook(a, gpbr_src_event, s);
  gpbr_src_set_sites(s, app_site, a);
  gpbr_log(r, 0, "serving pool '%s' (%" PRIu64 " bytes, min block %" PRIu64
           ") on %s/%s", name, info.managed_size, info.min_block, gpbr_addr(r),
           name);
  return s;
}

static void app_detach(gpbr_src_t *s) {
  gpb_attach_t *a = gpbr_src_user(s);
  gpbr_src_remove(s);
  gpb_attach_close(a);
}

/* A reader named a pool the relay has no source for (--all). */
static gpbr_src_t *app_lookup(gpbr_t *r, const char *name, void *user) {
  (void)user;
  return app_attach(r, name, 0);
}

typedef struct scan {
  gpbr_t *r;
  int found;
} scan_t;

static void app_scan_one(const char *name, void *user) {
  scan_t *sc = user;
  gpbr_src_t *s = gpbr_src_find(sc->r, name);
  /* A closed pool published again: its readers were told CLOSED and keep
   * the last state; new readers get the new pool. */
  if (s && gpbr_src_is_closed(s)) {
    app_detach(s);
    s = NULL;
  }
  if (!s) sc->found += app_attach(sc->r, name, 0) != NULL;
}

/* --all: new pools in, closed pools nobody reads out. */
static void app_scan(gpbr_t *r) {
  scan_t sc = {r, 0};
  gpb_list_pools(app_scan_one, &sc);
  for (int i = gpbr_src_count(r) - 1; i >= 0; i--) {
    gpbr_src_t *s = gpbr_src_at(r, i);
    if (gpbr_src_is_closed(s) && gpbr_src_readers(s) == 0) {
      gpbr_log(r, 0, "pool '%s' is gone and has no readers: dropped",
               gpbr_src_name(s));
      app_detach(s);
    }
  }
}

/* One pool by name, closed: a program that restarts publishes the name
 * again, and the relay follows it (it served the dead pool's last state
 * for good). The old readers were told CLOSED; new ones get the new
 * pool. A segment that opens but whose reader fails (a killed
 * program's) is not followed. */
static void app_follow(gpbr_t *r, const char *name) {
  if (gpbr_src_count(r) == 0) { /* the new one could not be read: again */
    if (app_attach(r, name, 0))
      gpbr_log(r, 0, "pool '%s' is back: serving the new one", name);
    return;
  }
  if (gpbr_src_count(r) != 1 || !gpbr_src_is_closed(gpbr_src_at(r, 0))) return;
  gpb_attach_t *a;
  if (gpb_attach_open(name, &a)) return;
  int rc = 0;
  for (int i = 0; i < 2 && rc >= 0; i++) rc = gpb_attach_poll(a);
  gpb_attach_close(a);
  if (rc < 0) return;
  app_detach(gpbr_src_at(r, 0));
  if (app_attach(r, name, 1))
    gpbr_log(r, 0, "pool '%s' is back: serving the new one", name);
}

/* Polls every open source's reader. */
static void app_poll(gpbr_t *r, int exit_on_close, uint64_t *last_err) {
  for (int i = 0; i < gpbr_src_count(r); i++) {
    gpbr_src_t *s = gpbr_src_at(r, i);
    if (gpbr_src_is_closed(s)) continue;
    int rc = gpb_attach_poll(gpbr_src_user(s));
    if (rc == GPB_ECLOSED) {
      gpbr_log(r, 0, "pool '%s' is gone; %s", gpbr_src_name(s),
               exit_on_close ? "telling clients, then exiting"
                             : "serving its last state");
      gpbr_src_closed(s);
    } else if (rc == GPB_EFORMAT &&
               strstr(gpb_last_error_detail(), "(truncated?)")) {
      /* Cut short by another process: its reader has given up on it
       * for good (its writer too). Clients keep the last state; --all
       * drops it once nobody reads it. */
      gpbr_log(r, -1, "pool '%s': %s; dropped, serving the others",
               gpbr_src_name(s), gpb_last_error_detail());
      gpbr_src_closed(s);
    } else if (rc < 0 && now_ns() - *last_err > 10000000000ull) {
      /* A garbled or oversized keyframe in the segment: clients keep the
       * last good state while the reader keeps trying. */
      gpbr_log(r, -1, "pool '%s': %s (%s); still trying", gpbr_src_name(s),
               gpb_strerror(rc), gpb_last_error_detail());
      *last_err = now_ns();
    }
  }
}

/* ------------------------------------------------------------ /metrics */

/* The metrics listener: its own socket and thread, so a scraper (or
 * anyone on the port) never holds up the relay's loop or the pool. The
 * requests are judged and served by http.c: many at once, each under a
 * total deadline. */
typedef struct metrics_srv {
  int fd;
  int port;
  const char *token;
  pthread_t th;
} metrics_srv_t;

static int metrics_listen(const char *spec, const gpbr_opts_t *o,
                          metrics_srv_t *m) {
  char name[96];
  memset(m, 0, sizeof *m);
  m->token = o->token && *o->token ? o->token : NULL;
  return gpbr_bind(spec, "--metrics", o->allow_remote && m->token, 0, &m->fd,
                    name, sizeof name, &m->port);
}

/* The body of an answer to GET /metrics: every pool of the machine. */
static int metrics_body(char **body, size_t *len, void *user) {
  (void)user;
  gpbt_pool_snap_t *v = NULL;
  size_t nv = 0;
  *body = NULL;
  *len = 0;
  FILE *f = open_memstream(body, len);
  int ok = f && gpbt_snapshot_all(0.2, &v, &nv) == 0 &&
           gpbt_metrics_write(f, v, nv) == 0;
  if (f) fclose(f);
  free(v);
  return ok ? 0 : -1;
}

static void *metrics_main(void *arg) {
  metrics_srv_t *m = arg;
  gpbr_http_opts_t o = {.fd = m->fd, .token = m->token,
                        .body = metrics_body, .stop = &relay_stop};
  if (gpbr_http_serve(&o))
    gpbr_log(NULL, 0, "metrics: out of host memory; /metrics stopped");
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

/* What the command line asked for. */
typedef struct relay_args {
  gpbr_opts_t o;
  const char *port_file;
  const char *metrics;
  const char *name;
  int wait_pool, exit_on_close, all;
} relay_args_t;

#define RELAY_SPEC_TAKES "ADDRESS:PORT or [V6]:PORT, port 0..65535"

/* Each option's setter (opts.h): NULL, or what the option takes. */
static const char *relay_set_listen(void *av, const char *arg) {
  relay_args_t *a = av;
  if (gpbr_check_spec(arg, NULL)) return RELAY_SPEC_TAKES;
  a->o.listen = arg;
  return NULL;
}

static const char *relay_set_metrics(void *av, const char *arg) {
  relay_args_t *a = av;
  if (gpbr_check_spec(arg, NULL)) return RELAY_SPEC_TAKES;
  a->metrics = arg;
  return NULL;
}

static const char *relay_set_buf(void *av, const char *arg) {
  relay_args_t *a = av;
  return gpb_size_parse(arg, &a->o.client_buf) || a->o.client_buf < (64u << 10)
             ? "a size >= 64K" : NULL;
}

static const gpbt_opt_t relay_opt_defs[] = {
    GPBT_SET("listen", GPBT_ARG_REQUIRED, relay_set_listen),
    GPBT_STR("token", relay_args_t, o.token),
    GPBT_FLAG("allow-remote", relay_args_t, o.allow_remote, 1),
    GPBT_INT("max-clients", relay_args_t, o.max_clients, 1, 1000),
    GPBT_SET("client-buffer", GPBT_ARG_REQUIRED, relay_set_buf),
    GPBT_INT("compress", relay_args_t, o.zlevel, 0, 9),
    GPBT_STR("port-file", relay_args_t, port_file),
    GPBT_FLAG("wait", relay_args_t, wait_pool, 1),
    GPBT_FLAG("exit-on-close", relay_args_t, exit_on_close, 1),
    GPBT_FLAG("all", relay_args_t, all, 1),
    GPBT_FLAG("quiet", relay_args_t, o.verbose, -1),
    GPBT_SHORT('q', "quiet"),
    GPBT_FLAG("verbose", relay_args_t, o.verbose, 1),
    GPBT_SHORT('v', "verbose"),
    GPBT_HELP,
    GPBT_VERSION,
    GPBT_SET("metrics", GPBT_ARG_REQUIRED, relay_set_metrics),
};

/* The operands (argv[1..n]) and the options' combinations: -1 to go on,
 * else the exit code. */
static int relay_check_args(int n, char **argv, relay_args_t *a) {
  int want_name = !a->all && !a->metrics;
  if ((a->all && n) || (want_name && n != 1) || n > 1) {
    gpbr_log(NULL, 0, a->all ? "--all serves every pool: give no NAME (try "
             "'gpubuddy-relay --help')" : "expected one pool NAME, or --all "
             "(try 'gpubuddy-relay --help')");
    return 2;
  }
  if (a->all && a->exit_on_close) {
    gpbr_log(NULL, 0, "--exit-on-close needs one NAME, not --all (try "
             "'gpubuddy-relay --help')");
    return 2;
  }
  a->name = n ? argv[1] : NULL;
  if (!a->o.token) a->o.token = getenv("GPB_RELAY_TOKEN");
  if (a->o.token && strlen(a->o.token) > GPB_NP_TOKEN_MAX) {
    gpbr_log(NULL, 0, "token longer than %d bytes", GPB_NP_TOKEN_MAX);
    return 2;
  }
  return -1;
}

/* The command line into `a`: -1 to go on, else the exit code. */
static int relay_parse_args(int argc, char **argv, relay_args_t *a) {
  static const gpbt_optspec_t spec = {
      "gpubuddy-relay", relay_opt_defs,
      sizeof relay_opt_defs / sizeof relay_opt_defs[0], relay_usage, NULL};
  memset(a, 0, sizeof *a);
  a->o.zlevel = 1;
  int n, rc = gpbt_opts_parse(&spec, argc, argv, a, &n);
  if (rc >= 0) return rc;
  return relay_check_args(n, argv, a);
}

/* --metrics: listen, and serve in a thread (or here, when metrics are all
 * the relay serves): -1 to go on, else the exit code. */
static int relay_start_metrics(const relay_args_t *a, metrics_srv_t *ms) {
  if (metrics_listen(a->metrics, &a->o, ms)) return 1;
  gpbr_log(NULL, 0, "serving metrics of every pool on port %d at /metrics",
           ms->port);
  if (!a->name && !a->all) { /* metrics only */
    if (a->port_file && relay_write_port(a->port_file, ms->port)) {
      gpbr_log(NULL, 0, "cannot write --port-file %s: %s", a->port_file,
               strerror(errno));
      return 1;
    }
    metrics_main(ms);
    close(ms->fd);
    return 0;
  }
  if (pthread_create(&ms->th, NULL, metrics_main, ms)) {
    gpbr_log(NULL, 0, "cannot start the metrics thread");
    return 1;
  }
  return -1;
}

static void relay_detach_all(gpbr_t *r) {
  while (gpbr_src_count(r) > 0) app_detach(gpbr_src_at(r, 0));
}

/* The relay and its first sources; 0, or 1 after a line on stderr. */
static int relay_start(const relay_args_t *a, gpbr_t **out) {
  gpbr_t *r;
  if (gpbr_open(&a->o, &r)) return 1;
  if (a->all) {
    gpbr_set_lookup(r, app_lookup, NULL);
    app_scan(r);
    gpbr_log(r, 0, "serving every pool on this machine (%d now) on %s%s",
             gpbr_src_count(r), gpbr_addr(r),
             a->o.token ? ", token required" : "");
  } else {
    for (int said = 0; !app_attach(r, a->name, !a->wait_pool || relay_stop);) {
      if (!a->wait_pool || relay_stop) {
        gpbr_free(r);
        return 1;
      }
      if (!said++) gpbr_log(r, 0, "waiting for pool '%s' to appear", a->name);
      usleep(200000);
    }
  }
  if (a->port_file && relay_write_port(a->port_file, gpbr_port(r))) {
    gpbr_log(NULL, 0, "cannot write --port-file %s: %s", a->port_file,
             strerror(errno));
    relay_detach_all(r);
    gpbr_free(r);
    return 1;
  }
  *out = r;
  return 0;
}

/* Serves until a signal, or (--exit-on-close) until the pool is gone and
 * its clients were told or 5 s passed. */
static void relay_loop(const relay_args_t *a, gpbr_t *r) {
  uint64_t last_log = now_ns(), last_scan = now_ns(), last_events = 0;
  uint64_t closed_at = 0, last_err = 0;
  while (!relay_stop) {
    app_poll(r, a->exit_on_close, &last_err);
    gpbr_step(r, 10);
    uint64_t now = now_ns();
    if (now - last_scan > 1000000000ull) {
      if (a->all) app_scan(r);
      else if (!a->exit_on_close) app_follow(r, a->name);
      last_scan = now;
    }
    if (a->exit_on_close && gpbr_src_is_closed(gpbr_src_at(r, 0))) {
      if (!closed_at) closed_at = now;
      if (!gpbr_src_busy(gpbr_src_at(r, 0)) || now - closed_at > 5000000000ull)
        break;
    }
    gpbr_counters_t c;
    gpbr_counters(r, &c);
    if (now - last_log > 30000000000ull && c.events != last_events) {
      gpbr_log(r, 0, "%" PRIu64 " events relayed, %d clients, %" PRIu64
               " bytes sent, %" PRIu64 " slow-client resyncs", c.events,
               c.clients, c.bytes_sent, c.resyncs);
      last_log = now;
      last_events = c.events;
    }
  }
}

/* Goodbye to the clients on a signal, then everything closed. */
static void relay_stop_all(gpbr_t *r, metrics_srv_t *ms) {
  if (relay_stop) {
    gpbr_counters_t c;
    gpbr_counters(r, &c);
    gpbr_log(r, 0, "signal %d: saying goodbye to %d clients", (int)relay_stop,
             c.clients);
    gpbr_bye_all(r, "relay shutting down", 1000);
  }
  relay_detach_all(r);
  gpbr_free(r);
  if (ms->fd >= 0) {
    relay_stop = relay_stop ? relay_stop : 1;
    pthread_join(ms->th, NULL);
    close(ms->fd);
  }
}

int main(int argc, char **argv) {
  relay_args_t a;
  int rc = relay_parse_args(argc, argv, &a);
  if (rc >= 0) return rc;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = relay_on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  metrics_srv_t ms = {.fd = -1};
  if (a.metrics && (rc = relay_start_metrics(&a, &ms)) >= 0) return rc;
  gpbr_t *r;
  if (relay_start(&a, &r)) return 1;
  relay_loop(&a, r);
  relay_stop_all(r, &ms);
  return 0;
}
