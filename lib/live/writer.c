/* SPDX-License-Identifier: MIT */
/*
 * writer.c: a pool's live publisher: it creates the segment, puts every
 * event into the ring (gpb__ring_put in live.h is the inline fast path),
 * writes keyframes when readers ask or the ring is about to lose the
 * events after the last one, and appends each call site's text to the
 * site table before the first event that names it. shm.h describes the
 * segment and its protocol.
 */
#include "live/shm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>


struct gpb__pub {
  /* The hot path's part, with writer-private copies (served, kf_seq), so
   * it reads no shared line but the request word. */
  gpb__ring_t ring;
  pub_hdr_t *h;
  pub_rec_t *kf[2];
  void *map;
  size_t size;
  uint64_t nslots, kf_cap;
  uint64_t kf_count;
  uint64_t kf_time;     /* when it was finished */
  uint64_t kf_interval; /* rate limit */
  uint64_t kf_cost;     /* what one costs: the least recent cost, allowed
                           to double per keyframe so a real rise shows */
  pid_t pid;
  dev_t dev;
  ino_t ino;
  unsigned tick_gen; /* our hold on the millisecond ticker (clock.c) */
  char *sites;          /* the site table; NULL when the pool has none */
  uint64_t sites_size, sites_pos; /* its bytes; where the next entry goes
                                     (ours: never read from the segment) */
  int guard;            /* SIGBUS guard slot (guard.c), -1 none */
  char path[GPB_NAME_MAX + 16];
  char cut_msg[GPB_NAME_MAX * 2 + 160]; /* said once if it is truncated */
};

/* Called when the name is taken. 0: the old segment was stale and is gone
 * (try again); GPB_EBUSY: a live writer (or one being born) holds it. */
static int pub_take_over(const char *path, const char *name) {
  void *map = NULL;
  size_t size = 0;
  struct stat st;
  int rc = gpb__shm_map(path, 0, &map, &size, &st);
  if (rc == GPB_ENOTFOUND) return 0; /* gone meanwhile: just retry */
  if (rc == 0) {
    const pub_hdr_t *h = map;
    /* Its header is read under the guard: the file may be cut short
     * (then it reads as zeros, a bad magic). */
    int g = gpb__guard_add(map, size, NULL);
    rc = gpb__shm_check_header(h, size, NULL);
    if (rc == 0 && !atomic_load_explicit(&h->closed, ACQ) &&
        gpb__shm_alive(h->pid, h->pid_start)) {
      int pid = h->pid;
      gpb__guard_remove(g);
      munmap(map, size);
      return gpb__fail(GPB_EBUSY, "pool name '%s' is published by a live "
                       "process (pid %d)", name, pid);
    }
    if (rc == GPB_EVERSION) {
      /* Another version's segment: its pid, start time and closed flag
       * are where ours are (shm.h), so a live writer of an older or
       * newer gpubuddy keeps its name too. */
      int pid = h->pid;
      uint32_t v = h->version;
      if (!atomic_load_explicit(&h->closed, ACQ) &&
          gpb__shm_alive(h->pid, h->pid_start)) {
        gpb__guard_remove(g);
        munmap(map, size);
        return gpb__fail(GPB_EBUSY, "pool name '%s' is published by a live "
                         "process (pid %d) of another gpubuddy version "
                         "(live segment version %u)", name, pid, v);
      }
      rc = 0; /* a dead writer's: replaced as any stale segment is */
    }
    gpb__guard_remove(g);
    munmap(map, size);
  } else if (rc != GPB_EFORMAT && rc != GPB_EVERSION) {
    return rc;
  }
  if (rc != 0) {
    /* Unreadable: perhaps another writer is filling it in right now. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (now.tv_sec - st.st_mtim.tv_sec < 2)
      return gpb__fail(GPB_EBUSY, "pool name '%s': /dev/shm%s is being "
                       "created by another process (or is garbled); try "
                       "again", name, path);
  }
  if (shm_unlink(path) != 0 && errno != ENOENT)
    return gpb__fail(errno == EACCES || errno == EPERM ? GPB_EPERM : GPB_EIO,
                     "cannot remove the stale segment /dev/shm%s: %s", path,
                     strerror(errno));
  return 0;
}

static int pub_env_u64(const char *var, uint64_t lo, uint64_t hi, int pow2,
                       uint64_t *out) {
  const char *s = getenv(var);
  if (!s || !*s) return 0;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || *end || v < lo || v > hi || (pow2 && (v & (v - 1))))
    return gpb__fail(GPB_EINVAL, "%s=%s: want %s from %llu to %llu", var, s,
                     pow2 ? "a power of two" : "a number",
                     (unsigned long long)lo, (unsigned long long)hi);
  *out = v;
  return 0;
}

/* The segment's sizes: ring slots, keyframe records and site-table
 * bytes (GPB_PUBLISH_* may change the defaults), and the whole. */
static int pub_sizes(const gpb_pool_info_t *info, int callsites,
                     uint64_t *nslots, uint64_t *kf_cap, uint64_t *sites,
                     uint64_t *total) {
  uint64_t kf_max = PUB_KF_DEFAULT;
  int rc;
  *nslots = PUB_SLOTS_DEFAULT;
  *sites = PUB_SITES_DEFAULT;
  if ((rc = pub_env_u64("GPB_PUBLISH_RING", PUB_SLOTS_MIN, PUB_SLOTS_MAX, 1,
                        nslots)) ||
      (rc = pub_env_u64("GPB_PUBLISH_KEYFRAME", 1, PUB_KF_MAX, 0, &kf_max)) ||
      (rc = pub_env_u64("GPB_PUBLISH_SITES", 0, PUB_SITES_MAX, 0, sites)))
    return rc;
  /* 0 turns the table off; any other size holds the longest entry. */
  if (!callsites) *sites = 0;
  if (*sites && *sites < PUB_SITES_MIN) *sites = PUB_SITES_MIN;
  *sites = (*sites + 7) & ~7ull;
  uint64_t units = info->managed_size / info->min_block;
  *kf_cap = units < kf_max ? units : kf_max;
  *total = gpb__shm_layout_total(*nslots, *kf_cap) + *sites;
  return 0;
}

/* Creates /dev/shm<p->path> (taking over a dead writer's), reserves every
 * page and maps it into p->map, its identity into p->dev and p->ino. */
static int pub_create(gpb__pub_t *p, const char *name, uint64_t total) {
  int fd = -1, rc;
  for (int attempt = 0; fd < 0; attempt++) {
    fd = shm_open(p->path, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) break;
    int e = errno;
    if (e != EEXIST || attempt == 3)
      return gpb__fail(e == EACCES ? GPB_EPERM : GPB_EIO, "cannot create "
                       "/dev/shm%s: %s", p->path, strerror(e));
    if ((rc = pub_take_over(p->path, name))) return rc;
  }
  struct stat st;
  /* Reserve every page now: a full /dev/shm must fail here, not raise
   * SIGBUS in the allocating program later. */
  rc = 0;
  if (fstat(fd, &st) != 0 || ftruncate(fd, (off_t)total) != 0 ||
      (rc = posix_fallocate(fd, 0, (off_t)total)) != 0) {
    int e = rc ? rc : errno;
    close(fd);
    shm_unlink(p->path);
    return gpb__fail(GPB_EIO, "no room in /dev/shm for the %llu-byte live "
                     "segment of pool '%s': %s", (unsigned long long)total,
                     name, strerror(e));
  }
  void *m = mmap(NULL, (size_t)total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (m == MAP_FAILED) {
    shm_unlink(p->path);
    return gpb__fail(GPB_EIO, "cannot map /dev/shm%s: %s", p->path,
                     strerror(e));
  }
  p->map = m;
  p->size = (size_t)total;
  p->dev = st.st_dev;
  p->ino = st.st_ino;
  return 0;
}

/* The ring and keyframe pointers into the mapped segment, and the guard
 * that keeps a truncated segment from raising SIGBUS. */
static void pub_wire(gpb__pub_t *p, const char *name, uint64_t nslots,
                     uint64_t kf_cap, uint64_t sites) {
  char *m = p->map;
  p->h = (pub_hdr_t *)(void *)m;
  p->ring.slots = (pub_slot_t *)(void *)(m + PUB_HDR_SIZE);
  p->ring.mask = nslots - 1;
  p->ring.head = &p->h->head;
  p->ring.kf_request = &p->h->kf_request;
  p->ring.half = nslots / 2;
  p->ring.pub = p;
  p->kf[0] = (pub_rec_t *)(void *)(m + PUB_HDR_SIZE + nslots * PUB_SLOT_SIZE);
  p->kf[1] = p->kf[0] + kf_cap;
  /* Without a table no site is ever published: the test in the ring's
   * put never fires. */
  p->ring.sites_pub = sites ? 0 : UINT32_MAX;
  p->sites = sites ? m + (p->size - sites) : NULL;
  p->sites_size = sites;
  p->nslots = nslots;
  p->kf_cap = kf_cap;
  p->pid = getpid();
  p->kf_interval = PUB_MS;
  /* Another process may truncate the file under us: the guard keeps the
   * stores that follow from raising SIGBUS, and says so once. */
  snprintf(p->cut_msg, sizeof p->cut_msg, "gpubuddy: pool '%s': its live "
           "segment /dev/shm%s was truncated by another process; publishing "
           "stopped, the pool carries on\n", name, p->path);
  p->guard = gpb__guard_add(p->map, p->size, p->cut_msg);
}

/* The header readers check, the magic stored last (release). */
static void pub_header(gpb__pub_t *p, const char *name,
                       const gpb_pool_info_t *info) {
  pub_hdr_t *h = p->h; /* fallocate gave zeroed pages */
  uint64_t total = p->size, sites = p->sites_size;
  h->version = PUB_VERSION;
  h->header_size = PUB_HDR_SIZE;
  h->slot_size = PUB_SLOT_SIZE;
  h->nslots = (uint32_t)p->nslots;
  h->rec_size = PUB_REC_SIZE;
  h->pid = (int32_t)p->pid;
  h->ring_off = PUB_HDR_SIZE;
  h->kf_cap = p->kf_cap;
  h->kf_off[0] = PUB_HDR_SIZE + p->nslots * PUB_SLOT_SIZE;
  h->kf_off[1] = h->kf_off[0] + p->kf_cap * PUB_REC_SIZE;
  h->total_size = total;
  h->sites_off = sites ? total - sites : 0;
  h->sites_size = sites;
  int zombie;
  h->pid_start = gpb__shm_proc_start(p->pid, &zombie);
  h->base = (uint64_t)(uintptr_t)info->base;
  h->pool_size = info->pool_size;
  h->managed_size = info->managed_size;
  h->min_block = info->min_block;
  h->num_orders = info->num_orders;
  h->num_roots = info->num_roots;
  h->backend = (int32_t)info->backend;
  h->policy = (int32_t)info->policy;
  h->device = info->device;
  h->rank1 = info->rank >= 0 ? info->rank + 1 : 0;
  snprintf(h->name, sizeof h->name, "%s", name);
  atomic_store_explicit(&h->magic, PUB_MAGIC, REL);
}

int gpb__pub_open(const char *name, const gpb_pool_info_t *info,
                  int callsites, gpb__pub_t **out) {
  *out = NULL;
  uint64_t nslots, kf_cap, sites, total;
  int rc = gpb__shm_check_name(name);
  if (rc || (rc = pub_sizes(info, callsites, &nslots, &kf_cap, &sites, &total)))
    return rc;
  gpb__pub_t *p = calloc(1, sizeof *p);
  if (!p) return gpb__fail(GPB_EHOSTMEM, "no host memory for the publisher");
  gpb__shm_path(p->path, sizeof p->path, name);
  if ((rc = pub_create(p, name, total))) {
    free(p); /* after the message, which names p->path */
    return rc;
  }
  pub_wire(p, name, nslots, kf_cap, sites);
  pub_header(p, name, info);
  p->tick_gen = gpb__tick_hold();
  *out = p;
  return 0;
}

typedef struct pub_kfctx {
  pub_rec_t *out;
  uint64_t n, cap;
} pub_kfctx_t;

static int pub_kf_block(const gpb_block_info_t *b, void *user) {
  pub_kfctx_t *c = user;
  if (b->used && b->offset != b->alloc_offset) return 0; /* same allocation */
  if (c->n == c->cap) return 1;
  pub_rec_t *r = &c->out[c->n++];
  uint64_t shift = (uint64_t)__builtin_ctzll(b->size) - b->order;
  if (b->used) {
    atomic_store_explicit(&r->r[0], PUB_REC_USED | (b->alloc_size >> shift), RLX);
    atomic_store_explicit(&r->r[1], b->requested, RLX);
    atomic_store_explicit(&r->r[2], b->time_ns, RLX);
    atomic_store_explicit(&r->r[3], b->tag | (uint64_t)b->site << 32, RLX);
  } else {
    atomic_store_explicit(&r->r[0], b->order, RLX);
    atomic_store_explicit(&r->r[1], 0, RLX);
    atomic_store_explicit(&r->r[2], 0, RLX);
    atomic_store_explicit(&r->r[3], 0, RLX);
  }
  return 0;
}

/* Writes a keyframe of the state after event `seq` into the buffer that
 * does not hold the latest one. Caller holds the pool's lock, at an event
 * after which the core is consistent. */
static void pub_keyframe(gpb__pub_t *p, uint64_t seq, const gpb__ring_t *src,
                         uint64_t req) {
  uint64_t t0 = gpb_now_ns();
  uint64_t b = p->kf_count & 1;
  pub_kfmeta_t *meta = &p->h->kf[b];
  uint64_t gen = atomic_load_explicit(&meta->gen, RLX);
  atomic_store_explicit(&meta->gen, gen + 1, RLX);
  atomic_thread_fence(REL);
  pub_kfctx_t c = {p->kf[b], 0, p->kf_cap};
  int rc = src->visit(src->src, pub_kf_block, &c);
  const gpb_stats_t *s = src->counters(src->src);
  uint64_t cnt[KC_N] = {s->allocs, s->frees, s->failures, s->splits,
                        s->merges, s->requested_peak, s->block_peak,
                        s->free_peak, s->last_failed_request};
  atomic_store_explicit(&meta->seq, seq, RLX);
  atomic_store_explicit(&meta->nrec, rc ? PUB_KF_OVERFLOW : c.n, RLX);
  atomic_store_explicit(&meta->time_ns, t0, RLX);
  for (int i = 0; i < KC_N; i++)
    atomic_store_explicit(&meta->counters[i], cnt[i], RLX);
  atomic_store_explicit(&meta->gen, gen + 2, REL);
  p->kf_count++;
  atomic_store_explicit(&p->h->kf_count, p->kf_count, REL);
  atomic_store_explicit(&p->h->kf_served, req, REL);
  p->ring.served = req;
  p->ring.kf_seq = seq;
  p->kf_time = gpb_now_ns();
  uint64_t cost = p->kf_time - t0;
  /* One keyframe stretched by preemption must not silence the periodic
   * ones for 50 times its length (that lost a late reader its state). */
  if (p->kf_cost && cost > 2 * p->kf_cost) cost = 2 * p->kf_cost;
  p->kf_cost = cost;
  p->kf_interval = cost * 50 > PUB_MS ? cost * 50 : PUB_MS;
}

gpb__ring_t *gpb__pub_ring(gpb__pub_t *p) { return &p->ring; }

void gpb__ring_sink_put(void *ctx, uint64_t seq, int type, uint64_t off,
                        uint64_t size, uint64_t requested, uint64_t stream,
                        uint32_t tag, uint32_t order, uint32_t site) {
  gpb__ring_t *r = ctx;
  gpb__ring_put(r, seq, *r->now, type, off, size, requested, stream, tag,
                order, site);
}

/* Appends sites sites_pub+1 to site to the table, in id order (ids are
 * given in order, so each below `site` exists). Caller holds the pool's
 * lock. Each entry's bytes are stored before its length, which is
 * stored with release; a reader that loads the length with acquire sees
 * the text. A table that is full stays so: later sites get no text. */
static void pub_sites(gpb__ring_t *r, uint32_t site) {
  gpb__pub_t *p = r->pub;
  if (site > GPB_MAX_SITES) site = GPB_MAX_SITES;
  for (uint32_t id = r->sites_pub + 1; id <= site; id++) {
    const char *t = r->site_text ? r->site_text(r->src, id) : NULL;
    r->sites_pub = id;
    if (!t || !*t) continue; /* none to give: readers get NULL */
    char *e = p->sites + p->sites_pos;
    /* The text may have what the table has left after the entry's
     * header and padding, up to PUB_SITE_TEXT_MAX: a longer one is cut
     * there, as a trace line is. One that does not fit what is left is
     * not cut short for want of room: the table is full. */
    uint64_t left = p->sites_size - p->sites_pos;
    uint64_t room = left > PUB_SITE_HDR ? (left - PUB_SITE_HDR) & ~7ull : 0;
    if (room > PUB_SITE_TEXT_MAX) room = PUB_SITE_TEXT_MAX;
    size_t n = strlen(t);
    if (n > room && room < PUB_SITE_TEXT_MAX) {
      r->sites_pub = UINT32_MAX;
      return;
    }
    n = gpb__frames_fit(t, n, (size_t)room, e + PUB_SITE_HDR);
    uint32_t id32 = id;
    memcpy(e + 4, &id32, sizeof id32);
    p->sites_pos += PUB_SITE_SPAN(n);
    atomic_store_explicit((_Atomic uint32_t *)(void *)e, (uint32_t)n, REL);
  }
}

/* The put's end follows the texts: head names the event after them. */
void gpb__ring_sites(gpb__ring_t *r, uint32_t site, uint64_t seq, int type) {
  pub_sites(r, site);
  gpb__ring_done(r, seq, type);
}

void gpb__ring_keyframe(gpb__ring_t *r, uint64_t seq, uint64_t req) {
  gpb__pub_t *p = r->pub;
  if (gpb__guard_cut(p->guard)) {
    /* The segment was truncated: the mapping is private zeros now, and
     * a keyframe there would reach no one. */
    r->served = req;
    r->kf_seq = seq;
    return;
  }
  /* Asked for, or every half ring, reader or not: a reader that attaches
   * later, even to a writer that has gone idle, then finds a keyframe
   * whose following events the ring still holds. Event times may come
   * from the ticker; pacing needs the fine clock (this path is rare). */
  uint64_t now = gpb_now_ns();
  int64_t since = (int64_t)(now - p->kf_time);
  /* The rate limit yields when the ring is about to overwrite the events
   * after the last keyframe, as long as keyframes stay cheap next to the
   * events between them (at most a fifth of the writer's time): only a
   * huge map under heavy churn can then leave a late reader waiting. */
  int losing = seq - r->kf_seq >= p->nslots - p->nslots / 8 &&
               since >= (int64_t)(4 * p->kf_cost);
  if (p->kf_count && since < (int64_t)p->kf_interval && !losing) return;
  pub_keyframe(p, seq, r, req);
}

void gpb__pub_event(gpb__pub_t *p, const gpb_event_t *ev) {
  if (!p) return;
  gpb__ring_put(&p->ring, ev->seq, ev->time_ns, ev->type, ev->offset,
                ev->size, ev->requested, ev->stream, ev->tag, ev->order,
                ev->site);
}

void gpb__pub_close(gpb__pub_t *p) {
  if (!p) return;
  /* A forked child that destroys its copy of the pool must not close the
   * parent's segment. */
  if (getpid() == p->pid) {
    atomic_store_explicit(&p->h->closed, 1, REL);
    int fd = shm_open(p->path, O_RDONLY, 0);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == p->dev &&
        st.st_ino == p->ino)
      shm_unlink(p->path); /* only our own: a successor may hold the name */
    if (fd >= 0) close(fd);
  }
  gpb__guard_remove(p->guard);
  munmap(p->map, p->size);
  gpb__tick_drop(p->tick_gen);
  free(p);
}

