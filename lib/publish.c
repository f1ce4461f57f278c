/*
 * publish.c: live publishing of a pool's events through POSIX shared
 * memory, and the shared-memory reader behind gpb_attach_open().
 *
 * A pool created with a name owns the segment /gpubuddy.<name> (mode 0600):
 *
 *   header (4096 bytes) | ring: nslots slots of 64 bytes |
 *   keyframe buffer 0: kf_cap records of 32 bytes | keyframe buffer 1
 *
 * Ring. Event `seq` goes to slot seq & (nslots-1). Each slot is a small
 * seqlock: the writer stores stamp = 0, a release fence, the payload words,
 * then stamp = seq with release, then head = seq. A reader loads the stamp
 * (acquire), copies the payload, issues an acquire fence and loads the
 * stamp again; the copy is good only when both loads read the seq it
 * wanted. So a reader never applies a torn event, and it learns that it
 * fell behind when a stamp is newer than the event it expects. All shared
 * words are C11 atomics (relaxed where the fences order them), so the
 * protocol holds between threads as between processes.
 *
 * Keyframes. A late or lagging reader needs the whole state: the block map
 * (one record per free block or allocation, in address order), the
 * counters, and the seq it includes. Writing one is O(blocks), so the
 * writer does it only (a) when a reader asks, by incrementing a request
 * counter in the header, or (b) every nslots/2 events, so that a reader
 * attaching at any time, even after the writer went idle, finds a keyframe
 * and the events after it in the ring. Both are rate-limited:
 * at least 1 ms apart and 50 times a keyframe's cost apart, which bounds
 * the writer's keyframe work to about 2% of its time, except that (c) when
 * the ring is about to lose the events after the last keyframe, one is
 * written anyway if that keeps keyframes under a fifth of the writer's
 * time. The pool
 * calls us from inside the buddy core, where only ALLOC and FAIL events
 * leave the map consistent (a FREE is followed by its MERGEs, and an
 * ALLOC's record is inserted before its SPLITs), so keyframes are taken at
 * those. Two buffers alternate, each under a generation seqlock, so a
 * reader copying one is not disturbed by the next.
 *
 * Cost on the hot path: about ten plain stores plus one load of the
 * request counter per event, no system call, no lock shared with readers;
 * readers write only the request counter and a heartbeat, on a cache line
 * of their own.
 *
 * Lifetime. gpb_pool_destroy marks the segment closed and unlinks it. A
 * writer that dies without that is noticed by readers (kill(pid, 0) and
 * the process start time in /proc, checked every 250 ms), skipped by
 * gpb_list_pools, and replaced by the next writer of the same name. The
 * reader treats the whole segment as hostile: every size, index and count
 * is checked before use, and a bad one gives GPB_EFORMAT or GPB_EVERSION.
 * docs/LIVE.md describes the layout byte by byte.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PUB_MAGIC 0x00314556494c4247ull /* "GBLIVE1\0" little-endian */
#define PUB_VERSION 1u
#define PUB_HDR_SIZE 4096u
#define PUB_SLOT_SIZE 64u
#define PUB_REC_SIZE 32u
#define PUB_PREFIX "gpubuddy."
#define PUB_SLOTS_DEFAULT 16384u
#define PUB_SLOTS_MIN 16u
#define PUB_SLOTS_MAX (1u << 22)
#define PUB_KF_DEFAULT (1ull << 18)
#define PUB_KF_MAX (1ull << 24)
#define PUB_MAX_UNITS (1ull << 36) /* a reader refuses larger pools */
#define PUB_KF_OVERFLOW UINT64_MAX /* nrec: the map did not fit */
#define PUB_REC_USED (1ull << 63)
#define PUB_MS 1000000ull

/* Counters a keyframe carries (what gpb__model_set_counters restores). */
enum { KC_ALLOCS, KC_FREES, KC_FAILURES, KC_SPLITS, KC_MERGES, KC_REQ_PEAK,
       KC_BLOCK_PEAK, KC_FREE_PEAK, KC_N };

typedef struct pub_kfmeta {
  _Atomic uint64_t gen; /* odd while being written; 0 never written */
  _Atomic uint64_t seq, nrec, time_ns;
  _Atomic uint64_t counters[KC_N];
  uint64_t pad[4];
} pub_kfmeta_t;

typedef struct pub_hdr {
  /* Identity: written once, before magic is stored with release. */
  _Atomic uint64_t magic; /* 0 */
  uint32_t version;       /* 8 */
  uint32_t header_size;   /* 12 */
  uint32_t slot_size;     /* 16 */
  uint32_t nslots;        /* 20 */
  uint32_t rec_size;      /* 24 */
  int32_t pid;            /* 28 */
  uint64_t ring_off;      /* 32 */
  uint64_t kf_cap;        /* 40: records per keyframe buffer */
  uint64_t kf_off[2];     /* 48, 56 */
  uint64_t total_size;    /* 64 */
  uint64_t pid_start;     /* 72: start time in clock ticks, 0 unknown */
  uint64_t base, pool_size, managed_size, min_block; /* 80..111 */
  uint32_t num_orders, num_roots;                    /* 112, 116 */
  int32_t backend, policy, device;                   /* 120, 124, 128 */
  uint32_t reserved0;                                /* 132 */
  char name[GPB_NAME_MAX];                           /* 136..199 */
  uint64_t pad0[7];                                  /* to 256 */
  /* Written by the writer. */
  _Atomic uint64_t head;      /* 256: seq of the last published event */
  _Atomic uint64_t closed;    /* 264: 1 after gpb_pool_destroy */
  _Atomic uint64_t kf_count;  /* 272: keyframes written; latest in (n-1)&1 */
  _Atomic uint64_t kf_served; /* 280: request count the latest one answered */
  uint64_t pad1[4];
  /* Written by readers. */
  _Atomic uint64_t kf_request;     /* 320 */
  _Atomic uint64_t reader_seen_ns; /* 328: a reader's last poll */
  uint64_t pad2[6];
  pub_kfmeta_t kf[2]; /* 384, 512 */
} pub_hdr_t;

_Static_assert(sizeof(pub_hdr_t) <= PUB_HDR_SIZE, "header too large");
_Static_assert(offsetof(pub_hdr_t, head) == 256, "header layout");
_Static_assert(offsetof(pub_hdr_t, kf_request) == 320, "header layout");
_Static_assert(offsetof(pub_hdr_t, kf) == 384, "header layout");
_Static_assert(sizeof(pub_kfmeta_t) == 128, "keyframe meta layout");

/* The slot (internal.h: the writer's side is inline there, so the buddy
 * core can publish without a call). */
typedef gpb__ring_slot_t pub_slot_t;
_Static_assert(sizeof(pub_slot_t) == PUB_SLOT_SIZE, "slot layout");

/* r: used ? PUB_REC_USED|units : order; requested; time_ns; tag. */
typedef struct pub_rec {
  _Atomic uint64_t r[4];
} pub_rec_t;
_Static_assert(sizeof(pub_rec_t) == PUB_REC_SIZE, "record layout");

#define RLX memory_order_relaxed
#define ACQ memory_order_acquire
#define REL memory_order_release

/* ------------------------------------------------------------- helpers */

static int pub_check_name(const char *name) {
  size_t n = name ? strlen(name) : 0;
  if (n == 0 || n >= GPB_NAME_MAX)
    return gpb__fail(GPB_EINVAL, "pool name must be 1 to %d characters",
                     GPB_NAME_MAX - 1);
  if (name[0] == '.')
    return gpb__fail(GPB_EINVAL, "pool name '%s' starts with '.'", name);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
      return gpb__fail(GPB_EINVAL, "pool name '%s': character %zu is not one "
                       "of A-Z a-z 0-9 . _ -", name, i + 1);
  }
  return 0;
}

static void pub_path(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "/" PUB_PREFIX "%s", name);
}

/* Start time of a process (field 22 of /proc/PID/stat), or 0 when it
 * cannot be read; *zombie is set for a process that has exited but not
 * been reaped (it still answers kill(pid, 0)). */
static uint64_t pub_proc_start(pid_t pid, int *zombie) {
  char path[64], buf[1024];
  *zombie = 0;
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')'); /* the command name may hold spaces */
  if (!p || p[1] != ' ') return 0;
  p += 2;
  if (*p == 'Z' || *p == 'X') *zombie = 1;
  for (int field = 3; field < 22; field++) {
    p = strchr(p, ' ');
    if (!p) return 0;
    p++;
  }
  return strtoull(p, NULL, 10);
}

/* Whether the process that wrote a header still runs. A pid reused by
 * another process is caught by the start time where /proc is readable. */
static int pub_alive(int32_t pid, uint64_t start) {
  if (pid <= 0) return 0;
  if (kill((pid_t)pid, 0) == -1 && errno == ESRCH) return 0;
  int zombie;
  uint64_t s = pub_proc_start((pid_t)pid, &zombie);
  if (zombie) return 0;
  if (start && s && s != start) return 0;
  return 1;
}

static uint64_t pub_layout_total(uint64_t nslots, uint64_t kf_cap) {
  return PUB_HDR_SIZE + nslots * PUB_SLOT_SIZE + 2 * kf_cap * PUB_REC_SIZE;
}

/* Validates a mapped header against the file size. name NULL skips the
 * name check. Every field the reader later trusts is checked here. */
static int pub_check_header(const pub_hdr_t *h, size_t fsize, const char *name) {
  if (fsize < PUB_HDR_SIZE)
    return gpb__fail(GPB_EFORMAT, "live segment is %zu bytes; its header "
                     "alone needs %u (truncated?)", fsize, PUB_HDR_SIZE);
  uint64_t magic = atomic_load_explicit(&h->magic, ACQ);
  if (magic != PUB_MAGIC)
    return gpb__fail(GPB_EFORMAT, "bad magic 0x%016llx: not a gpubuddy live "
                     "segment (or still being created)",
                     (unsigned long long)magic);
  if (h->version != PUB_VERSION)
    return gpb__fail(GPB_EVERSION, "live segment has version %u; this library "
                     "reads version %u", h->version, PUB_VERSION);
  if (h->header_size != PUB_HDR_SIZE || h->slot_size != PUB_SLOT_SIZE ||
      h->rec_size != PUB_REC_SIZE)
    return gpb__fail(GPB_EFORMAT, "live segment sizes: header %u, slot %u, "
                     "record %u; expected %u, %u, %u", h->header_size,
                     h->slot_size, h->rec_size, PUB_HDR_SIZE, PUB_SLOT_SIZE,
                     PUB_REC_SIZE);
  uint32_t ns = h->nslots;
  if (ns < PUB_SLOTS_MIN || ns > PUB_SLOTS_MAX || (ns & (ns - 1)))
    return gpb__fail(GPB_EFORMAT, "live segment: ring of %u slots is not a "
                     "power of two from %u to %u", ns, PUB_SLOTS_MIN,
                     PUB_SLOTS_MAX);
  if (h->kf_cap == 0 || h->kf_cap > PUB_KF_MAX)
    return gpb__fail(GPB_EFORMAT, "live segment: keyframe capacity %llu is "
                     "not from 1 to %llu", (unsigned long long)h->kf_cap,
                     (unsigned long long)PUB_KF_MAX);
  uint64_t total = pub_layout_total(ns, h->kf_cap);
  if (h->ring_off != PUB_HDR_SIZE ||
      h->kf_off[0] != PUB_HDR_SIZE + (uint64_t)ns * PUB_SLOT_SIZE ||
      h->kf_off[1] != h->kf_off[0] + h->kf_cap * PUB_REC_SIZE ||
      h->total_size != total)
    return gpb__fail(GPB_EFORMAT, "live segment: section offsets do not "
                     "match a ring of %u slots and keyframes of %llu records",
                     ns, (unsigned long long)h->kf_cap);
  if (total > fsize)
    return gpb__fail(GPB_EFORMAT, "live segment header says %llu bytes; the "
                     "file has %zu (truncated?)", (unsigned long long)total,
                     fsize);
  uint64_t mb = h->min_block;
  if (mb < 16 || (mb & (mb - 1)) || mb > (1ull << 40))
    return gpb__fail(GPB_EFORMAT, "live segment: min block %llu is not a "
                     "power of two from 16 to 2^40", (unsigned long long)mb);
  uint64_t units = h->managed_size / mb;
  if (h->managed_size % mb || units == 0 || units > PUB_MAX_UNITS ||
      h->pool_size < h->managed_size)
    return gpb__fail(GPB_EFORMAT, "live segment: managed size %llu (pool "
                     "%llu) does not fit min block %llu (at most 2^36 blocks)",
                     (unsigned long long)h->managed_size,
                     (unsigned long long)h->pool_size, (unsigned long long)mb);
  if (h->num_orders != 64u - (uint32_t)__builtin_clzll(units) ||
      h->num_roots != (uint32_t)__builtin_popcountll(units))
    return gpb__fail(GPB_EFORMAT, "live segment: %u orders and %u roots do "
                     "not match %llu blocks", h->num_orders, h->num_roots,
                     (unsigned long long)units);
  if (h->backend <= GPB_BACKEND_AUTO || h->backend > GPB_BACKEND_VIRTUAL ||
      h->policy < 0 || h->policy >= GPB_NUM_POLICIES)
    return gpb__fail(GPB_EFORMAT, "live segment: backend %d or policy %d "
                     "unknown", h->backend, h->policy);
  if (h->pid <= 0)
    return gpb__fail(GPB_EFORMAT, "live segment: writer pid %d", h->pid);
  if (memchr(h->name, '\0', sizeof h->name) == NULL)
    return gpb__fail(GPB_EFORMAT, "live segment: name is not terminated");
  if (name && strcmp(h->name, name) != 0)
    return gpb__fail(GPB_EFORMAT, "live segment for '%s' names itself '%.63s'",
                     name, h->name);
  return 0;
}

/* Maps a segment by path: read-write for readers, read-only to inspect. */
static int pub_map(const char *path, int writable, void **map, size_t *size,
                   struct stat *st_out) {
  int fd = shm_open(path, writable ? O_RDWR : O_RDONLY, 0);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT)
      return gpb__fail(GPB_ENOTFOUND, "no pool is published as '%s' "
                       "(/dev/shm%s does not exist)", path + 1 + strlen(PUB_PREFIX),
                       path);
    if (e == EACCES || e == EPERM)
      return gpb__fail(GPB_EPERM, "cannot open /dev/shm%s: %s", path,
                       strerror(e));
    return gpb__fail(GPB_EIO, "cannot open /dev/shm%s: %s", path, strerror(e));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return gpb__fail(GPB_EIO, "cannot stat /dev/shm%s: %s", path, strerror(e));
  }
  if (st_out) *st_out = st;
  if (st.st_size < (off_t)PUB_HDR_SIZE) {
    close(fd);
    return gpb__fail(GPB_EFORMAT, "/dev/shm%s is %lld bytes; a live segment "
                     "header alone needs %u (truncated?)", path,
                     (long long)st.st_size, PUB_HDR_SIZE);
  }
  if ((uint64_t)st.st_size > ((uint64_t)1 << 40)) {
    close(fd);
    return gpb__fail(GPB_EFORMAT, "/dev/shm%s is %lld bytes: too large for a "
                     "live segment", path, (long long)st.st_size);
  }
  size_t n = (size_t)st.st_size;
  void *m = mmap(NULL, n, writable ? PROT_READ | PROT_WRITE : PROT_READ,
                 MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (m == MAP_FAILED)
    return gpb__fail(GPB_EIO, "cannot map /dev/shm%s: %s", path, strerror(e));
  *map = m;
  *size = n;
  return 0;
}

/* ---------------------------------------------------------------- writer */

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
  char path[GPB_NAME_MAX + 16];
};

/* Called when the name is taken. 0: the old segment was stale and is gone
 * (try again); GPB_EBUSY: a live writer (or one being born) holds it. */
static int pub_take_over(const char *path, const char *name) {
  void *map = NULL;
  size_t size = 0;
  struct stat st;
  int rc = pub_map(path, 0, &map, &size, &st);
  if (rc == GPB_ENOTFOUND) return 0; /* gone meanwhile: just retry */
  if (rc == 0) {
    const pub_hdr_t *h = map;
    rc = pub_check_header(h, size, NULL);
    if (rc == 0 && !atomic_load_explicit(&h->closed, ACQ) &&
        pub_alive(h->pid, h->pid_start)) {
      int pid = h->pid;
      munmap(map, size);
      return gpb__fail(GPB_EBUSY, "pool name '%s' is published by a live "
                       "process (pid %d)", name, pid);
    }
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

int gpb__pub_open(const char *name, const gpb_pool_info_t *info,
                  gpb__pub_t **out) {
  *out = NULL;
  int rc = pub_check_name(name);
  if (rc) return rc;
  uint64_t nslots = PUB_SLOTS_DEFAULT, kf_max = PUB_KF_DEFAULT;
  if ((rc = pub_env_u64("GPB_PUBLISH_RING", PUB_SLOTS_MIN, PUB_SLOTS_MAX, 1,
                        &nslots)) ||
      (rc = pub_env_u64("GPB_PUBLISH_KEYFRAME", 1, PUB_KF_MAX, 0, &kf_max)))
    return rc;
  uint64_t units = info->managed_size / info->min_block;
  uint64_t kf_cap = units < kf_max ? units : kf_max;
  uint64_t total = pub_layout_total(nslots, kf_cap);

  gpb__pub_t *p = calloc(1, sizeof *p);
  if (!p) return gpb__fail(GPB_EHOSTMEM, "no host memory for the publisher");
  pub_path(p->path, sizeof p->path, name);
  int fd = -1;
  for (int attempt = 0; fd < 0; attempt++) {
    fd = shm_open(p->path, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) break;
    int e = errno;
    if (e != EEXIST || attempt == 3) {
      rc = gpb__fail(e == EACCES ? GPB_EPERM : GPB_EIO, "cannot create "
                     "/dev/shm%s: %s", p->path, strerror(e));
      free(p); /* after the message, which names p->path */
      return rc;
    }
    if ((rc = pub_take_over(p->path, name))) {
      free(p);
      return rc;
    }
  }
  struct stat st;
  /* Reserve every page now: a full /dev/shm must fail here, not raise
   * SIGBUS in the allocating program later. */
  if (fstat(fd, &st) != 0 || ftruncate(fd, (off_t)total) != 0 ||
      (rc = posix_fallocate(fd, 0, (off_t)total)) != 0) {
    int e = rc ? rc : errno;
    close(fd);
    shm_unlink(p->path);
    free(p);
    return gpb__fail(GPB_EIO, "no room in /dev/shm for the %llu-byte live "
                     "segment of pool '%s': %s", (unsigned long long)total,
                     name, strerror(e));
  }
  void *m = mmap(NULL, (size_t)total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (m == MAP_FAILED) {
    shm_unlink(p->path);
    rc = gpb__fail(GPB_EIO, "cannot map /dev/shm%s: %s", p->path,
                   strerror(e));
    free(p);
    return rc;
  }
  p->map = m;
  p->size = (size_t)total;
  p->h = m;
  p->ring.slots = (pub_slot_t *)((char *)m + PUB_HDR_SIZE);
  p->ring.mask = nslots - 1;
  p->ring.head = &p->h->head;
  p->ring.kf_request = &p->h->kf_request;
  p->ring.half = nslots / 2;
  p->ring.pub = p;
  p->kf[0] = (pub_rec_t *)((char *)m + PUB_HDR_SIZE + nslots * PUB_SLOT_SIZE);
  p->kf[1] = p->kf[0] + kf_cap;
  p->nslots = nslots;
  p->kf_cap = kf_cap;
  p->pid = getpid();
  p->dev = st.st_dev;
  p->ino = st.st_ino;
  p->kf_interval = PUB_MS;

  pub_hdr_t *h = p->h; /* fallocate gave zeroed pages */
  h->version = PUB_VERSION;
  h->header_size = PUB_HDR_SIZE;
  h->slot_size = PUB_SLOT_SIZE;
  h->nslots = (uint32_t)nslots;
  h->rec_size = PUB_REC_SIZE;
  h->pid = (int32_t)p->pid;
  h->ring_off = PUB_HDR_SIZE;
  h->kf_cap = kf_cap;
  h->kf_off[0] = PUB_HDR_SIZE + nslots * PUB_SLOT_SIZE;
  h->kf_off[1] = h->kf_off[0] + kf_cap * PUB_REC_SIZE;
  h->total_size = total;
  int zombie;
  h->pid_start = pub_proc_start(p->pid, &zombie);
  h->base = (uint64_t)(uintptr_t)info->base;
  h->pool_size = info->pool_size;
  h->managed_size = info->managed_size;
  h->min_block = info->min_block;
  h->num_orders = info->num_orders;
  h->num_roots = info->num_roots;
  h->backend = (int32_t)info->backend;
  h->policy = (int32_t)info->policy;
  h->device = info->device;
  snprintf(h->name, sizeof h->name, "%s", name);
  atomic_store_explicit(&h->magic, PUB_MAGIC, REL);
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
    atomic_store_explicit(&r->r[3], b->tag, RLX);
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
static void pub_keyframe(gpb__pub_t *p, uint64_t seq, const gpb_pool_t *pool,
                         uint64_t req) {
  uint64_t t0 = gpb_now_ns();
  uint64_t b = p->kf_count & 1;
  pub_kfmeta_t *meta = &p->h->kf[b];
  uint64_t gen = atomic_load_explicit(&meta->gen, RLX);
  atomic_store_explicit(&meta->gen, gen + 1, RLX);
  atomic_thread_fence(REL);
  pub_kfctx_t c = {p->kf[b], 0, p->kf_cap};
  int rc = gpb__pool_visit_locked(pool, pub_kf_block, &c);
  const gpb_stats_t *s = gpb__pool_counters(pool);
  uint64_t cnt[KC_N] = {s->allocs, s->frees, s->failures, s->splits,
                        s->merges, s->requested_peak, s->block_peak,
                        s->free_peak};
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

void gpb__ring_keyframe(gpb__ring_t *r, uint64_t seq, uint64_t req) {
  gpb__pub_t *p = r->pub;
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
  pub_keyframe(p, seq, r->pool, req);
}

void gpb__pub_event(gpb__pub_t *p, const gpb_event_t *ev) {
  if (!p) return;
  gpb__ring_put(&p->ring, ev->seq, ev->time_ns, ev->type, ev->offset,
                ev->size, ev->requested, ev->stream, ev->tag, ev->order);
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
  munmap(p->map, p->size);
  gpb__tick_drop(p->tick_gen);
  free(p);
}

/* ---------------------------------------------------------------- reader */

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
    if (w[5] >> 48)
      return gpb__fail(GPB_EFORMAT, "live segment: event %llu has stray bits",
                       (unsigned long long)s);
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
  const pub_hdr_t *h = r->h;
  uint32_t shift = (uint32_t)__builtin_ctzll(h->min_block);
  uint64_t nunits = h->managed_size >> shift, u = 0;
  size_t nb = 0;
  for (uint64_t x = 0; x < nrec; x++) {
    const uint64_t *rec = &r->kbuf[4 * x];
    uint64_t len;
    if (rec[0] & PUB_REC_USED) {
      len = rec[0] & ~PUB_REC_USED;
      if (rec[3] >= GPB_MAX_TAGS || rec[1] > (len << shift))
        return gpb__fail(GPB_EFORMAT, "keyframe record %llu: bad tag or "
                         "request", (unsigned long long)x);
    } else {
      if (rec[0] >= h->num_orders)
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

static int shm_poll(gpb_attach_t *a) {
  shm_reader_t *r = a->impl;
  int applied = 0;
  if (r->pending) {
    r->pending = 0;
    applied = 1;
    gpb__attach_notify(a, NULL);
  }
  if (r->gone) return applied ? applied : gpb__fail(r->gone, "%s", r->gone_msg);
  uint64_t now = gpb_now_ns();
  if (now - r->last_beat >= 100 * PUB_MS) {
    r->last_beat = now;
    atomic_store_explicit(&r->h->reader_seen_ns, now, RLX);
  }
  /* Closed is read before head: once closed, head is final. */
  uint64_t closed = atomic_load_explicit(&r->h->closed, ACQ);
  uint64_t H = atomic_load_explicit(&r->h->head, ACQ);
  int rc = shm_sync(a, r, H, &applied);
  if (rc < 0) return rc;
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
    if (!pub_alive(r->h->pid, r->h->pid_start)) {
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

static void shm_close(gpb_attach_t *a) {
  shm_reader_t *r = a->impl;
  if (!r) return;
  munmap(r->map, r->size);
  free(r->kbuf);
  free(r->blocks);
  free(r);
  a->impl = NULL;
}

static const gpb__attach_ops_t shm_ops = {shm_poll, shm_close};

int gpb__attach_shm_open(const char *name, gpb_attach_t *a) {
  int rc = pub_check_name(name);
  if (rc) return rc;
  char path[GPB_NAME_MAX + 16];
  pub_path(path, sizeof path, name);
  shm_reader_t *r = calloc(1, sizeof *r);
  if (!r) return gpb__fail(GPB_EHOSTMEM, "no host memory for a reader");
  snprintf(r->name, sizeof r->name, "%s", name);
  if ((rc = pub_map(path, 1, &r->map, &r->size, NULL))) {
    free(r);
    return rc;
  }
  r->h = r->map;
  if ((rc = pub_check_header(r->h, r->size, name))) {
    munmap(r->map, r->size);
    free(r);
    return rc;
  }
  pub_hdr_t *h = r->h;
  r->nslots = h->nslots;
  r->mask = r->nslots - 1;
  r->kf_cap = h->kf_cap;
  r->ring = (pub_slot_t *)((char *)r->map + h->ring_off);
  r->kf[0] = (pub_rec_t *)((char *)r->map + h->kf_off[0]);
  r->kf[1] = (pub_rec_t *)((char *)r->map + h->kf_off[1]);
  if ((rc = gpb_model_create(h->managed_size, h->min_block, &a->model))) {
    munmap(r->map, r->size);
    free(r);
    return rc;
  }
  memset(&a->info, 0, sizeof a->info);
  a->info.base = (void *)(uintptr_t)h->base;
  a->info.pool_size = h->pool_size;
  a->info.managed_size = h->managed_size;
  a->info.min_block = h->min_block;
  a->info.num_orders = h->num_orders;
  a->info.num_roots = h->num_roots;
  a->info.backend = (gpb_backend_t)h->backend;
  a->info.policy = (gpb_policy_t)h->policy;
  a->info.device = h->device;
  snprintf(a->info.name, sizeof a->info.name, "%s", h->name);
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

int gpb_list_pools(void (*fn)(const char *name, void *user), void *user) {
  if (!fn) return gpb__fail(GPB_EINVAL, "fn is NULL");
  DIR *d = opendir("/dev/shm");
  if (!d) return 0; /* no POSIX shared memory here: nothing published */
  struct dirent *e;
  size_t plen = strlen(PUB_PREFIX);
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, PUB_PREFIX, plen) != 0) continue;
    const char *name = e->d_name + plen;
    char path[GPB_NAME_MAX + 16];
    if (strlen(name) >= GPB_NAME_MAX || pub_check_name(name)) continue;
    pub_path(path, sizeof path, name);
    void *map;
    size_t size;
    if (pub_map(path, 0, &map, &size, NULL)) continue;
    const pub_hdr_t *h = map;
    int ok = pub_check_header(h, size, name) == 0 &&
             !atomic_load_explicit(&h->closed, ACQ) &&
             pub_alive(h->pid, h->pid_start);
    munmap(map, size);
    if (ok) fn(name, user);
  }
  closedir(d);
  return 0;
}
