/* SPDX-License-Identifier: MIT */
/*
 * shm.h: the live segment shared by the writer (writer.c) and the
 * shared-memory reader (reader.c): its layout and the checks both use.
 *
 * A pool created with a name owns the segment /gpubuddy.<name> (mode 0600):
 *
 *   header (4096 bytes) | ring: nslots slots of 64 bytes |
 *   keyframe buffer 0: kf_cap records of 32 bytes | keyframe buffer 1 |
 *   call sites (pools with GPB_CFG_CALLSITES only)
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
 * Call sites. Events and keyframe records carry an allocation's site id
 * (bits the layout had spare), and a pool that records sites publishes
 * each one's frame text once, in an append-only table after the
 * keyframes: entries of {u32 length, u32 id, text}, each made valid by
 * the release store of its length, written in id order before the first
 * event that names the id. The writer keeps its own cursor and never
 * reads the table back; a full table publishes no more (readers get no
 * text for those ids).
 *
 * Cost on the hot path: about ten plain stores plus one load of the
 * request counter per event, no system call, no lock shared with readers;
 * readers write only the request counter and a heartbeat, on a cache line
 * of their own. Sites add one compare of the event's id with the last id
 * published (never true with sites off).
 *
 * Lifetime. gpb_pool_destroy marks the segment closed and unlinks it. A
 * writer that dies without that is noticed by readers (kill(pid, 0) and
 * the process start time in /proc, checked every 250 ms), skipped by
 * gpb_list_pools, and replaced by the next writer of the same name. The
 * reader treats the whole segment as hostile: every size, index and count
 * is checked before use, and a bad one gives GPB_EFORMAT or GPB_EVERSION.
 * docs/LIVE.md describes the layout byte by byte.
 */
#ifndef GPB_LIVE_SHM_H
#define GPB_LIVE_SHM_H

#include "live/live.h"

#include <stdatomic.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#define PUB_MAGIC 0x00314556494c4247ull /* "GBLIVE1\0" little-endian */
/* 2: call sites in events, keyframe records and a site table. A v1
 * segment (an older writer) is a v2 one without sites, so readers take
 * both; older readers refuse 2 (GPB_EVERSION). Bytes 0 to 135 and the
 * words written later at 256 to 279 mean the same in every version. */
#define PUB_VERSION 2u
#define PUB_VERSION_MIN 1u
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
#define PUB_SITES_DEFAULT (4ull << 20) /* bytes of site table */
#define PUB_SITES_MIN 8192ull /* holds the longest entry */
#define PUB_SITES_MAX (64ull << 20)
#define PUB_SITE_HDR 8u          /* u32 length, u32 id */
#define PUB_SITE_TEXT_MAX 4096u  /* bytes of one site's frames */
/* An entry's bytes: header and text, padded to 8. */
#define PUB_SITE_SPAN(len) (PUB_SITE_HDR + (((uint64_t)(len) + 7) & ~7ull))
#define PUB_KF_OVERFLOW UINT64_MAX /* nrec: the map did not fit */
#define PUB_REC_USED (1ull << 63)
#define PUB_MS 1000000ull

/* Counters a keyframe carries (what gpb__model_set_counters restores).
 * KC_LAST_FAIL took a word of the padding: a writer before it left 0
 * there, which reads as "no failure known", so the version stays. */
enum { KC_ALLOCS, KC_FREES, KC_FAILURES, KC_SPLITS, KC_MERGES, KC_REQ_PEAK,
       KC_BLOCK_PEAK, KC_FREE_PEAK, KC_LAST_FAIL, KC_N };

typedef struct pub_kfmeta {
  _Atomic uint64_t gen; /* odd while being written; 0 never written */
  _Atomic uint64_t seq, nrec, time_ns;
  _Atomic uint64_t counters[KC_N];
  uint64_t pad[3];
} pub_kfmeta_t;
_Static_assert(sizeof(pub_kfmeta_t) == 16 * 8, "keyframe meta layout");

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
  int32_t rank1;       /* 132: the writer's RANK + 1 (torchrun); 0 none */
  char name[GPB_NAME_MAX];                           /* 136..199 */
  uint64_t sites_off;  /* 200: the site table (v2; 0: none) */
  uint64_t sites_size; /* 208: its bytes, a multiple of 8 */
  uint64_t pad0[5];                                  /* to 256 */
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
_Static_assert(offsetof(pub_hdr_t, sites_off) == 200, "header layout");
_Static_assert(offsetof(pub_hdr_t, head) == 256, "header layout");
_Static_assert(offsetof(pub_hdr_t, kf_request) == 320, "header layout");
_Static_assert(offsetof(pub_hdr_t, kf) == 384, "header layout");
_Static_assert(sizeof(pub_kfmeta_t) == 128, "keyframe meta layout");

/* The slot (live.h: the writer's side is inline there). */
typedef gpb__ring_slot_t pub_slot_t;
_Static_assert(sizeof(pub_slot_t) == PUB_SLOT_SIZE, "slot layout");

/* r: used ? PUB_REC_USED|units : order; requested; time_ns;
 * tag | site << 32. */
typedef struct pub_rec {
  _Atomic uint64_t r[4];
} pub_rec_t;
_Static_assert(sizeof(pub_rec_t) == PUB_REC_SIZE, "record layout");

#define RLX memory_order_relaxed
#define ACQ memory_order_acquire
#define REL memory_order_release


/* 0 when name is 1 to GPB_NAME_MAX-1 characters of A-Z a-z 0-9 . _ -
 * not starting with '.', else GPB_EINVAL with the detail set. */
GPB__SHARED int gpb__shm_check_name(const char *name);
/* "/gpubuddy.NAME", the shm_open path of a pool's segment. */
GPB__SHARED void gpb__shm_path(char *buf, size_t n, const char *name);
/* Start time of a process from /proc (0 unknown); *zombie for a process
 * that exited but is not reaped. */
GPB__HIDDEN uint64_t gpb__shm_proc_start(pid_t pid, int *zombie);
/* Whether the writer named by a header still runs. */
GPB__SHARED int gpb__shm_alive(int32_t pid, uint64_t start);
/* Bytes of a segment without its site table (where the table starts). */
GPB__HIDDEN uint64_t gpb__shm_layout_total(uint64_t nslots, uint64_t kf_cap);
/* Validates a mapped header against the file size; name NULL skips the
 * name check. Every field a reader later trusts is checked here. */
GPB__SHARED int gpb__shm_check_header(const pub_hdr_t *h, size_t fsize,
                                      const char *name);
/* Maps a segment by path: read-write for readers, read-only to inspect. */
GPB__SHARED int gpb__shm_map(const char *path, int writable, void **map,
                             size_t *size, struct stat *st_out);

/* SIGBUS guard for segment mappings (guard.c): a truncated segment
 * turns the mapping into private zero pages instead of killing. add
 * returns a slot, or -1 when none is free (the mapping is unguarded);
 * msg (NULL: none) is written to stderr once when the guard fires and
 * must live until remove. cut: whether it fired. */
GPB__SHARED int gpb__guard_add(void *map, size_t len, const char *msg);
GPB__SHARED int gpb__guard_cut(int slot);
GPB__SHARED void gpb__guard_remove(int slot);

#endif /* GPB_LIVE_SHM_H */
