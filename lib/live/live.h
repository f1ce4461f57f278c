/* SPDX-License-Identifier: MIT */
/*
 * live.h: live publishing and reading. The writer (writer.c) is a sink
 * the pool plugs into the core; readers (reader.c over shared memory,
 * remote.c over TCP) fill a following model behind gpb_attach_t
 * (attach.c). Layout of the segment: shm.h; of the wire: netproto.h.
 */
#ifndef GPB_LIVE_H
#define GPB_LIVE_H

#include "core/core.h"
#include "trace/trace.h" /* gpb__sitetab_t */

/* Live publisher (writer.c). NULL-safe; never blocks the caller. */
typedef struct gpb__pub gpb__pub_t;
typedef struct gpb__ring gpb__ring_t;
/* callsites: the pool records call sites, so the segment gets a site
 * table (GPB_PUBLISH_SITES bytes, default 4 MiB). */
GPB__HIDDEN int gpb__pub_open(const char *name, const gpb_pool_info_t *info,
                              int callsites, gpb__pub_t **out);
/* Publishes one event that went through the pool's sink. */
GPB__HIDDEN void gpb__pub_event(gpb__pub_t *p, const gpb_event_t *ev);
GPB__HIDDEN void gpb__pub_close(gpb__pub_t *p);

/* The publisher's event ring as its writer sees it (writer.c owns the
 * segment; shm.h and docs/LIVE.md give the layout). A slot is a small seqlock:
 * stamp 0, the payload, stamp = seq, then head = seq. */
typedef struct gpb__ring_slot {
  _Atomic uint64_t stamp;
  /* time, offset, size, requested, stream,
   * tag | type << 32 | order << 40 | site << 48, seq */
  _Atomic uint64_t w[7];
} gpb__ring_slot_t;

struct gpb__ring {
  gpb__ring_slot_t *slots;
  uint64_t mask;
  uint32_t sites_pub;           /* call sites 1..sites_pub are published
                                   (UINT32_MAX: no more will be) */
  _Atomic uint64_t *head;
  _Atomic uint64_t *kf_request; /* readers ask for keyframes here */
  uint64_t served;              /* request count the last keyframe answered */
  uint64_t kf_seq;              /* seq of the last keyframe */
  uint64_t half;                /* a keyframe at least every half ring */
  const uint64_t *now;          /* the pool's time of the call in progress */
  gpb__pub_t *pub;
  /* What a keyframe reads, supplied by the pool when it binds the ring:
   * its blocks in address order and its counters, under its lock. */
  const void *src;
  int (*visit)(const void *src, gpb_visit_fn fn, void *user);
  const gpb_stats_t *(*counters)(const void *src);
  /* A call site's frames ("FRAME;..."), or NULL; may be NULL itself. */
  const char *(*site_text)(const void *src, uint32_t site);
};

/* The ring, for the pool to bind: it sets now, src, visit, counters and
 * site_text. */
GPB__HIDDEN gpb__ring_t *gpb__pub_ring(gpb__pub_t *p);
/* A keyframe may be due after event seq (an ALLOC or FAIL): the rate
 * limits decide, out of line. */
GPB__HIDDEN void gpb__ring_keyframe(gpb__ring_t *r, uint64_t seq, uint64_t req);
/* Publishes the texts of call sites sites_pub+1 to site, then ends the
 * put of event seq (gpb__ring_done): out of line, and a tail call, so
 * the inline put saves no registers for it. */
GPB__HIDDEN void gpb__ring_sites(gpb__ring_t *r, uint32_t site, uint64_t seq,
                                 int type);

/* The end of a put, once the slot holds event seq: head names it, and a
 * keyframe may be due. */
static GPB__INLINE void gpb__ring_done(gpb__ring_t *r, uint64_t seq,
                                       int type) {
  atomic_store_explicit(r->head, seq, memory_order_release);
  if (type != GPB_EV_ALLOC && type != GPB_EV_FAIL) return;
  uint64_t req = atomic_load_explicit(r->kf_request, memory_order_relaxed);
  if (GPB__LIKELY(req == r->served && seq - r->kf_seq < r->half)) return;
  gpb__ring_keyframe(r, seq, req);
}

/* Publishes one event: about ten plain stores, and a load of the request
 * word after ALLOC and FAIL, the only events after which the core is
 * consistent enough for a keyframe. Caller holds the pool's lock. */
/* Always inlined: with the site test GCC stopped inlining it into the
 * sink, and the call cost more than the test. */
static GPB__INLINE void gpb__ring_put(gpb__ring_t *r, uint64_t seq,
                                      uint64_t time, int type, uint64_t off,
                                      uint64_t size, uint64_t requested,
                                      uint64_t stream, uint32_t tag,
                                      uint32_t order, uint32_t site) {
  gpb__ring_slot_t *s = &r->slots[seq & r->mask];
  /* Each event writes a line that left the cache a ring ago: ask for the
   * one a few events on now, so that write does not wait for it. */
  gpb__prefetchw(&r->slots[(seq + 8) & r->mask]);
  atomic_store_explicit(&s->stamp, 0, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  atomic_store_explicit(&s->w[0], time, memory_order_relaxed);
  atomic_store_explicit(&s->w[1], off, memory_order_relaxed);
  atomic_store_explicit(&s->w[2], size, memory_order_relaxed);
  atomic_store_explicit(&s->w[3], requested, memory_order_relaxed);
  atomic_store_explicit(&s->w[4], stream, memory_order_relaxed);
  atomic_store_explicit(&s->w[5], (uint64_t)tag | (uint64_t)type << 32 |
                                      (uint64_t)order << 40 |
                                      (uint64_t)site << 48,
                        memory_order_relaxed);
  atomic_store_explicit(&s->w[6], seq, memory_order_relaxed);
  atomic_store_explicit(&s->stamp, seq, memory_order_release);
  /* Readers read up to head: a site's text goes out before head names
   * the first event with the site. Off, site is 0: never. */
  if (GPB__UNLIKELY(site > r->sites_pub)) {
    gpb__ring_sites(r, site, seq, type);
    return;
  }
  gpb__ring_done(r, seq, type);
}

/* The core's direct sink (gpb__sink_t.put): ctx is the ring. */
GPB__HIDDEN void gpb__ring_sink_put(void *ctx, uint64_t seq, int type,
                                    uint64_t off, uint64_t size,
                                    uint64_t requested, uint64_t stream,
                                    uint32_t tag, uint32_t order,
                                    uint32_t site);

/* A live reader. Transports (shared memory in reader.c, TCP in remote.c)
 * fill `model`, `info` and `sites`; attach.c dispatches the public calls. */
typedef struct gpb__attach_ops {
  int (*poll)(gpb_attach_t *a);  /* as gpb_attach_poll */
  void (*close)(gpb_attach_t *a); /* frees impl, not the model */
  /* NULL, or takes in site texts published since the last poll: what
   * gpb_attach_site asks before it says it has none. */
  void (*sites)(gpb_attach_t *a);
} gpb__attach_ops_t;

struct gpb_attach {
  const gpb__attach_ops_t *ops;
  gpb_model_t *model;
  gpb_pool_info_t info;
  void *impl;
  gpb_attach_hook_fn hook;
  void *hook_user;
  gpb__sitetab_t sites;
};

/* Transports call this after each event the model took (ev), and with NULL
 * after loading a keyframe. */
static inline void gpb__attach_notify(gpb_attach_t *a, const gpb_event_t *ev) {
  if (a->hook) a->hook(ev, a->hook_user);
}

/* Shared-memory transport behind gpb_attach_open (writer.c). */
GPB__HIDDEN int gpb__attach_shm_open(const char *name, gpb_attach_t *a);

#endif /* GPB_LIVE_H */
