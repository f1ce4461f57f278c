/* SPDX-License-Identifier: MIT */
/*
 * reader.c: the shared-memory transport behind gpb_attach_open(). It
 * treats the whole segment as hostile: every size, index and count is
 * checked before use (shm.h gives the layout and the protocol).
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


typedef struct shm_reader {
  void *map;
  size_t size;
  pub_hdr_t *h;
  pub_slot_t *ring;
  pub_rec_t *kf[2];
  uint64_t mask, nslots, kf_cap;
  int have_state; /* the model is the state after some seq */
  int need_kf;    /* ...but the ring no longer holds what follows it */
  int pending;    /* a sync done in open, reported by the first poll */
  int gone;       /* 0, or the code every later poll returns */
  char gone_msg[256];
  uint64_t ticket;   /* kf_request value our last request made */
  uint64_t kf_tried; /* kf_count of the last keyframe we judged */
  uint64_t last_beat, last_alive;
  uint64_t *kbuf; /* copy of a keyframe's records */
  size_t kbuf_cap;
  gpb_block_info_t *blocks;
  size_t blocks_cap;
  char name[GPB_NAME_MAX];
  int guard; /* SIGBUS guard slot (guard.c), -1 none */
  int cut_seen; /* the guard fired, and we said so */
  /* The pool's geometry as validated at open: the segment can change
   * under us, so these are never read from it again. */
  uint64_t min_block, managed;
  uint32_t norders;
  /* The site table (v2): where it is, how far we have read it, and the
   * last id taken in (ids only grow). Ours, never read back. */
  const char *sites;
  uint64_t sites_size, sites_pos;
  uint32_t sites_last;
} shm_reader_t;

static void shm_request(shm_reader_t *r) {
  uint64_t served = atomic_load_explicit(&r->h->kf_served, ACQ);
  if (served >= r->ticket)
    r->ticket = atomic_fetch_add_explicit(&r->h->kf_request, 1, RLX) + 1;
}

/* Applies ring events after the model's seq up to H. 0: reached H;
 * 1: an event was overwritten (fell behind); <0: a garbled event. */
static int shm_drain(gpb_attach_t *a, shm_reader_t *r, uint64_t H,
                     int *applied) {
  for (uint64_t s = gpb_model_seq(a->model) + 1; s <= H; s++) {
    pub_slot_t *sl = &r->ring[s & r->mask];
    uint64_t w[7];
    if (atomic_load_explicit(&sl->stamp, ACQ) != s) return 1;
    for (int i = 0; i < 7; i++) w[i] = atomic_load_explicit(&sl->w[i], RLX);
    atomic_thread_fence(ACQ);
    if (atomic_load_explicit(&sl->stamp, RLX) != s) return 1;
    if (w[6] != s)
      return gpb__fail(GPB_EFORMAT, "live segment: slot of event %llu says "
                       "%llu", (unsigned long long)s, (unsigned long long)w[6]);
    gpb_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.seq = s;
    ev.time_ns = w[0];
    ev.offset = w[1];
    ev.size = w[2];
    ev.requested = w[3];
    ev.stream = w[4];
    ev.tag = (uint32_t)w[5];
    ev.type = (uint8_t)(w[5] >> 32);
    ev.order = (uint8_t)(w[5] >> 40);
    ev.site = (uint16_t)(w[5] >> 48); /* v1 wrote 0: no site */
    int rc = gpb_model_apply(a->model, &ev);
    if (rc) {
      char why[256];
      snprintf(why, sizeof why, "%s", gpb_last_error_detail());
      return gpb__fail(GPB_EFORMAT, "live segment: event %llu (%s at offset "
                       "%llu) does not fit the block map: %s",
                       (unsigned long long)s, gpb_event_type_name(ev.type),
                       (unsigned long long)ev.offset, why);
    }
    (*applied)++;
    gpb__attach_notify(a, &ev);
  }
  return 0;
}

static int shm_grow(void **buf, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap : 1024;
  while (n < need) n *= 2;
  void *b = realloc(*buf, n * elem);
  if (!b) return gpb__fail(GPB_EHOSTMEM, "no host memory for a keyframe of "
                           "%zu records", need);
  *buf = b;
  *cap = n;
  return 0;
}

/* Expands keyframe records into the block list gpb_model_load takes,
 * checking every record against the pool's geometry. */
static int shm_expand(shm_reader_t *r, uint64_t nrec, size_t *nblocks) {
  uint32_t shift = (uint32_t)__builtin_ctzll(r->min_block);
  uint64_t nunits = r->managed >> shift, u = 0;
  size_t nb = 0;
  for (uint64_t x = 0; x < nrec; x++) {
    const uint64_t *rec = &r->kbuf[4 * x];
    uint64_t len;
    if (rec[0] & PUB_REC_USED) {
      len = rec[0] & ~PUB_REC_USED;
      if ((uint32_t)rec[3] >= GPB_MAX_TAGS || rec[3] >> 32 > GPB_MAX_SITES ||
          rec[1] > (len << shift))
        return gpb__fail(GPB_EFORMAT, "keyframe record %llu: bad tag, call "
                         "site or request", (unsigned long long)x);
    } else {
      if (rec[0] >= r->norders)
        return gpb__fail(GPB_EFORMAT, "keyframe record %llu: order %llu",
                         (unsigned long long)x, (unsigned long long)rec[0]);
      len = 1ull << rec[0];
    }
    if (len == 0 || len > nunits - u)
      return gpb__fail(GPB_EFORMAT, "keyframe record %llu: %llu blocks at "
                       "block %llu run past the pool's %llu",
                       (unsigned long long)x, (unsigned long long)len,
                       (unsigned long long)u, (unsigned long long)nunits);
    /* A used run is tiled by its canonical blocks: at most 64 of them. */
    int rc = shm_grow((void **)&r->blocks, &r->blocks_cap, nb + 64,
                      sizeof *r->blocks);
    if (rc) return rc;
    uint64_t start = u;
    for (uint64_t m = len; m;) {
      uint32_t k = rec[0] & PUB_REC_USED ? gpb__canon_order(u, m)
                                         : (uint32_t)rec[0];
      gpb_block_info_t *b = &r->blocks[nb++];
      memset(b, 0, sizeof *b);
      b->offset = u << shift;
      b->size = (1ull << k) << shift;
      b->order = k;
      if (rec[0] & PUB_REC_USED) {
        b->used = 1;
        b->alloc_offset = start << shift;
        b->alloc_size = len << shift;
        b->requested = rec[1];
        b->time_ns = rec[2];
        b->tag = (uint32_t)rec[3];
        b->site = (uint32_t)(rec[3] >> 32);
      }
      u += 1ull << k;
      m -= 1ull << k;
    }
  }
  *nblocks = nb;
  return 0;
}

/* Tries to load the latest keyframe. 1: loaded; 0: none usable now (a
 * request was made where that helps); <0: a garbled keyframe. */
static int shm_keyframe(gpb_attach_t *a, shm_reader_t *r, uint64_t H,
                        int *applied) {
  pub_hdr_t *h = r->h;
  uint64_t n = atomic_load_explicit(&h->kf_count, ACQ);
  if (n == 0 || n == r->kf_tried) {
    shm_request(r);
    return 0;
  }
  pub_kfmeta_t *meta = &h->kf[(n - 1) & 1];
  uint64_t g1 = atomic_load_explicit(&meta->gen, ACQ);
  if (g1 == 0 || (g1 & 1)) return 0; /* being rewritten: look again later */
  uint64_t seq = atomic_load_explicit(&meta->seq, RLX);
  uint64_t nrec = atomic_load_explicit(&meta->nrec, RLX);
  uint64_t cnt[KC_N];
  for (int i = 0; i < KC_N; i++)
    cnt[i] = atomic_load_explicit(&meta->counters[i], RLX);
  uint64_t m = gpb_model_seq(a->model);
  if (r->have_state && seq <= m) {
    /* Not newer than what we hold. (One the ring has moved past is still
     * loaded: a state a little old beats none for a slow reader; the drain
     * after it then asks for the next.) */
    r->kf_tried = n;
    shm_request(r);
    return 0;
  }
  if (nrec == PUB_KF_OVERFLOW || nrec > r->kf_cap) {
    atomic_thread_fence(ACQ);
    if (atomic_load_explicit(&meta->gen, RLX) != g1) return 0;
    r->kf_tried = n;
    if (nrec == PUB_KF_OVERFLOW)
      return gpb__fail(GPB_EHOSTMEM, "the pool has more blocks than its live "
                       "segment's keyframe holds (%llu); the writer can raise "
                       "it with GPB_PUBLISH_KEYFRAME",
                       (unsigned long long)r->kf_cap);
    return gpb__fail(GPB_EFORMAT, "live segment: keyframe of %llu records; "
                     "the segment holds %llu", (unsigned long long)nrec,
                     (unsigned long long)r->kf_cap);
  }
  int rc = shm_grow((void **)&r->kbuf, &r->kbuf_cap, (size_t)nrec * 4 + 4,
                    sizeof *r->kbuf);
  if (rc) return rc;
  const pub_rec_t *src = r->kf[(n - 1) & 1];
  for (uint64_t x = 0; x < nrec; x++)
    for (int i = 0; i < 4; i++)
      r->kbuf[4 * x + i] = atomic_load_explicit(&src[x].r[i], RLX);
  atomic_thread_fence(ACQ);
  if (atomic_load_explicit(&meta->gen, RLX) != g1) return 0; /* torn copy */
  r->kf_tried = n;

  size_t nb = 0;
  rc = shm_expand(r, nrec, &nb);
  if (rc == 0) rc = gpb_model_load(a->model, r->blocks, nb, seq);
  if (rc) {
    r->have_state = 0;
    if (rc == GPB_EHOSTMEM) return rc;
    char why[256];
    snprintf(why, sizeof why, "%s", gpb_last_error_detail());
    return gpb__fail(GPB_EFORMAT, "live segment: keyframe at event %llu is "
                     "garbled: %s", (unsigned long long)seq, why);
  }
  gpb_stats_t s;
  memset(&s, 0, sizeof s);
  s.allocs = cnt[KC_ALLOCS];
  s.frees = cnt[KC_FREES];
  s.failures = cnt[KC_FAILURES];
  s.splits = cnt[KC_SPLITS];
  s.merges = cnt[KC_MERGES];
  s.requested_peak = cnt[KC_REQ_PEAK];
  s.block_peak = cnt[KC_BLOCK_PEAK];
  s.free_peak = cnt[KC_FREE_PEAK];
  s.last_failed_request = cnt[KC_LAST_FAIL];
  gpb__model_set_counters(a->model, &s);
  r->have_state = 1;
  r->need_kf = 0;
  (*applied)++;
  gpb__attach_notify(a, NULL);
  return 1;
}

static int shm_gone(shm_reader_t *r, int code, const char *msg) {
  r->gone = code;
  snprintf(r->gone_msg, sizeof r->gone_msg, "%s", msg);
  return gpb__fail(code, "%s", msg);
}

/* Takes in the site texts published since the last call: entries of
 * {u32 length, u32 id, text} whose length the writer stores last, with
 * release (shm.h). The text is copied once, then checked in the copy
 * (another process may write the segment under us). A bad entry stops
 * the reader: GPB_EFORMAT, as a garbled event does. */
static int shm_sites(gpb_attach_t *a, shm_reader_t *r) {
  char text[PUB_SITE_TEXT_MAX];
  while (r->sites && r->sites_size - r->sites_pos >= PUB_SITE_HDR) {
    const char *e = r->sites + r->sites_pos;
    uint32_t n = atomic_load_explicit((_Atomic uint32_t *)(void *)e, ACQ);
    if (n == 0) return 0; /* not written yet */
    uint32_t id;
    memcpy(&id, e + 4, sizeof id);
    char msg[200];
    if (n > PUB_SITE_TEXT_MAX || PUB_SITE_SPAN(n) > r->sites_size - r->sites_pos)
      snprintf(msg, sizeof msg, "live segment: call site entry at %llu of "
               "%u bytes runs past the table's %llu (longest %u)",
               (unsigned long long)r->sites_pos, n,
               (unsigned long long)r->sites_size, PUB_SITE_TEXT_MAX);
    else if (id <= r->sites_last || id > GPB_MAX_SITES)
      snprintf(msg, sizeof msg, "live segment: call site %u follows site %u "
               "(ids must grow, up to %u)", id, r->sites_last, GPB_MAX_SITES);
    else
      msg[0] = 0;
    if (!msg[0]) {
      memcpy(text, e + PUB_SITE_HDR, n);
      int rc = gpb__sitetab_set(&a->sites, id, text, n);
      if (rc == GPB_EHOSTMEM) return rc;
      if (rc) snprintf(msg, sizeof msg, "live segment: %s",
                       gpb_last_error_detail());
    }
    if (msg[0]) {
      r->sites = NULL; /* read no more of it */
      return shm_gone(r, GPB_EFORMAT, msg);
    }
    r->sites_last = id;
    r->sites_pos += PUB_SITE_SPAN(n);
  }
  return 0;
}

static void shm_sites_hook(gpb_attach_t *a) {
  shm_reader_t *r = a->impl;
  if (r && !r->gone) (void)shm_sites(a, r);
}

/* Brings the model up to the head read at entry. */
static int shm_sync(gpb_attach_t *a, shm_reader_t *r, uint64_t H,
                    int *applied) {
  for (int round = 0; round < 4; round++) {
    if (r->have_state && !r->need_kf) {
      if (H < gpb_model_seq(a->model))
        return gpb__fail(GPB_EFORMAT, "live segment: head %llu is behind "
                         "event %llu already read", (unsigned long long)H,
                         (unsigned long long)gpb_model_seq(a->model));
      if (H - gpb_model_seq(a->model) >= r->nslots) {
        r->need_kf = 1;
        continue;
      }
      int rc = shm_drain(a, r, H, applied);
      if (rc < 0) return rc;
      if (rc == 0) return 0;
      r->need_kf = 1;
      continue;
    }
    if (!r->have_state && H < r->nslots) {
      /* The ring still holds the whole history: start from the empty
       * pool, which is the keyframe at seq 0. */
      gpb_model_reset(a->model);
      r->have_state = 1;
      r->need_kf = 0;
      (*applied)++;
      gpb__attach_notify(a, NULL);
      continue;
    }
    int rc = shm_keyframe(a, r, H, applied);
    if (rc <= 0) return rc;
    /* A keyframe may be newer than the head we read. */
    uint64_t h2 = atomic_load_explicit(&r->h->head, ACQ);
    if (h2 > H) H = h2;
  }
  return 0;
}

/* Whether the segment was truncated: the guard fired (a page we touched
 * was gone), or the file is now shorter than what we mapped (looked at
 * with the liveness check, as pages we have not touched yet may be gone
 * too). Then the reader drops the pool: GPB_EFORMAT from now on. */
static int shm_truncated(shm_reader_t *r, int look) {
  int cut = gpb__guard_cut(r->guard);
  if (!cut && !look) return 0;
  char path[GPB_NAME_MAX + 32];
  snprintf(path, sizeof path, "/dev/shm/" PUB_PREFIX "%s", r->name);
  struct stat st;
  long long has = stat(path, &st) == 0 ? (long long)st.st_size : -1;
  if (!cut && (has < 0 || (uint64_t)has >= r->size)) return 0;
  char msg[256];
  if (has >= 0)
    snprintf(msg, sizeof msg, "live segment header says %zu bytes; the file "
             "has %lld (truncated?)", r->size, has);
  else
    snprintf(msg, sizeof msg, "live segment header says %zu bytes; the file "
             "was cut short and is gone (truncated?)", r->size);
  return shm_gone(r, GPB_EFORMAT, msg);
}

static int shm_poll_once(gpb_attach_t *a) {
  shm_reader_t *r = a->impl;
  int applied = 0;
  if (r->pending) {
    r->pending = 0;
    applied = 1;
    gpb__attach_notify(a, NULL);
  }
  if (r->gone) return applied ? applied : gpb__fail(r->gone, "%s", r->gone_msg);
  uint64_t now = gpb_now_ns();
  int look = now - r->last_alive >= 250 * PUB_MS;
  int rc = shm_truncated(r, look);
  if (rc < 0) return rc;
  if (now - r->last_beat >= 100 * PUB_MS) {
    r->last_beat = now;
    atomic_store_explicit(&r->h->reader_seen_ns, now, RLX);
  }
  /* Closed is read before head: once closed, head is final. */
  uint64_t closed = atomic_load_explicit(&r->h->closed, ACQ);
  uint64_t H = atomic_load_explicit(&r->h->head, ACQ);
  /* Texts go out before the events that name them: what head covers,
   * this finds. */
  rc = shm_sites(a, r);
  if (rc < 0) return rc;
  rc = shm_sync(a, r, H, &applied);
  if (rc < 0) return rc;
  /* A keyframe newer than H names sites published before it. */
  if ((rc = shm_sites(a, r)) < 0) return rc;
  char msg[256];
  if (closed) {
    snprintf(msg, sizeof msg, "pool '%s' was destroyed by its writer (pid %d);"
             " the model keeps its last state (event %llu)", r->name,
             r->h->pid, (unsigned long long)gpb_model_seq(a->model));
    if (applied) {
      r->gone = GPB_ECLOSED;
      snprintf(r->gone_msg, sizeof r->gone_msg, "%s", msg);
      return applied;
    }
    return shm_gone(r, GPB_ECLOSED, msg);
  }
  if (now - r->last_alive >= 250 * PUB_MS) {
    r->last_alive = now;
    if (!gpb__shm_alive(r->h->pid, r->h->pid_start)) {
      /* Nothing more will come: take what the ring holds, then stop. */
      H = atomic_load_explicit(&r->h->head, ACQ);
      if ((rc = shm_sync(a, r, H, &applied)) < 0) return rc;
      snprintf(msg, sizeof msg, "the writer of pool '%s' (pid %d) is gone "
               "without closing it (killed?); the model keeps its last state "
               "(event %llu)", r->name, r->h->pid,
               (unsigned long long)gpb_model_seq(a->model));
      if (applied) {
        r->gone = GPB_ECLOSED;
        snprintf(r->gone_msg, sizeof r->gone_msg, "%s", msg);
        return applied;
      }
      return shm_gone(r, GPB_ECLOSED, msg);
    }
  }
  return applied;
}

/* The pages may go while we read them: then what we read was zeros, and
 * whatever that made of the poll, the cut is what to report. */
static int shm_poll(gpb_attach_t *a) {
  shm_reader_t *r = a->impl;
  int rc = shm_poll_once(a);
  if (gpb__guard_cut(r->guard) && !r->cut_seen) {
    r->cut_seen = 1;
    return shm_truncated(r, 0);
  }
  return rc;
}

static void shm_close(gpb_attach_t *a) {
  shm_reader_t *r = a->impl;
  if (!r) return;
  gpb__guard_remove(r->guard);
  munmap(r->map, r->size);
  free(r->kbuf);
  free(r->blocks);
  free(r);
  a->impl = NULL;
}

static const gpb__attach_ops_t shm_ops = {shm_poll, shm_close,
                                          shm_sites_hook};

int gpb__attach_shm_open(const char *name, gpb_attach_t *a) {
  int rc = gpb__shm_check_name(name);
  if (rc) return rc;
  char path[GPB_NAME_MAX + 16];
  gpb__shm_path(path, sizeof path, name);
  shm_reader_t *r = calloc(1, sizeof *r);
  if (!r) return gpb__fail(GPB_EHOSTMEM, "no host memory for a reader");
  snprintf(r->name, sizeof r->name, "%s", name);
  if ((rc = gpb__shm_map(path, 1, &r->map, &r->size, NULL))) {
    free(r);
    return rc;
  }
  r->h = r->map;
  r->guard = gpb__guard_add(r->map, r->size, NULL);
  if ((rc = gpb__shm_check_header(r->h, r->size, name)) ||
      (rc = shm_truncated(r, 0))) {
    gpb__guard_remove(r->guard);
    munmap(r->map, r->size);
    free(r);
    return rc;
  }
  pub_hdr_t *h = r->h;
  r->min_block = h->min_block;
  r->managed = h->managed_size;
  r->norders = h->num_orders;
  r->nslots = h->nslots;
  r->mask = r->nslots - 1;
  r->kf_cap = h->kf_cap;
  r->ring = (pub_slot_t *)((char *)r->map + h->ring_off);
  r->kf[0] = (pub_rec_t *)((char *)r->map + h->kf_off[0]);
  r->kf[1] = (pub_rec_t *)((char *)r->map + h->kf_off[1]);
  r->sites_size = h->sites_size; /* checked with the header */
  r->sites = r->sites_size ? (char *)r->map + h->sites_off : NULL;
  if ((rc = gpb_model_create(r->managed, r->min_block, &a->model))) {
    gpb__guard_remove(r->guard);
    munmap(r->map, r->size);
    free(r);
    return rc;
  }
  memset(&a->info, 0, sizeof a->info);
  a->info.base = (void *)(uintptr_t)h->base;
  a->info.pool_size = h->pool_size;
  a->info.managed_size = r->managed;
  a->info.min_block = r->min_block;
  a->info.num_orders = r->norders;
  a->info.num_roots = h->num_roots;
  a->info.backend = (gpb_backend_t)h->backend;
  a->info.policy = (gpb_policy_t)h->policy;
  a->info.device = h->device;
  a->info.pid = h->pid; /* > 0: checked with the header */
  a->info.rank = h->rank1 > 0 ? h->rank1 - 1 : -1;
  snprintf(a->info.name, sizeof a->info.name, "%.*s",
           (int)sizeof a->info.name - 1, h->name);
  a->impl = r;
  a->ops = &shm_ops;
  /* Sync now so the model holds the current state when open returns; the
   * first poll reports it (the hook is not set yet). */
  gpb_attach_hook_fn hook = a->hook;
  a->hook = NULL;
  rc = shm_poll(a);
  a->hook = hook;
  if (rc < 0 && rc != GPB_ECLOSED) {
    shm_close(a);
    gpb_model_destroy(a->model);
    a->model = NULL;
    return rc;
  }
  if (rc > 0) r->pending = 1;
  return 0;
}

