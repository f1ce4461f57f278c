/* SPDX-License-Identifier: MIT */
/*
 * gpubuddy.h: the one public header of libgpubuddy.
 *
 * libgpubuddy is a power-of-two buddy allocator. A pool reserves one large
 * range up front (device memory through the CUDA runtime, pinned host memory,
 * plain host memory, or bare address space for simulation) and serves every
 * allocation and free from it. The buddy arithmetic runs on host-side
 * metadata only: the allocator never reads or writes the memory it manages.
 *
 * Conventions:
 *   - Calls that can fail return 0 or a negative GPB_E* code; gpb_strerror()
 *     names it and gpb_last_error_detail() gives this thread's last detail.
 *   - No CUDA type crosses this header: streams travel as void *.
 *   - Every change in a pool is one gpb_event_t. Stats, hooks, the live
 *     publisher, trace files and the block-map model all consume events.
 */
#ifndef GPUBUDDY_H
#define GPUBUDDY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPB_VERSION_MAJOR 0
#define GPB_VERSION_MINOR 1
#define GPB_VERSION_PATCH 0
#define GPB_VERSION_STRING "0.1.0"

#if defined(__GNUC__) && defined(GPB_BUILDING_LIBRARY)
#define GPB_API __attribute__((visibility("default")))
#else
#define GPB_API
#endif

/* ------------------------------------------------------------------ errors */

/* One list: code, value, message. gpb_err_name() gives "GPB_E<code>". */
#define GPB_ERRNO_MAP(XX)                                                      \
  XX(EINVAL, -1, "invalid argument")                                           \
  XX(ENOMEM, -2, "pool exhausted: no free block is large enough")              \
  XX(ETOOBIG, -3, "size is larger than the whole pool")                        \
  XX(EDOUBLEFREE, -4, "pointer is not allocated (double free?)")               \
  XX(EFOREIGN, -5, "pointer does not belong to this pool")                     \
  XX(EINTERIOR, -6, "pointer is inside an allocation, not at its start")       \
  XX(EALIGN, -7, "alignment is not a power of two")                            \
  XX(EDEVMEM, -8, "pool is larger than the device's free memory")              \
  XX(EBACKEND, -9, "backend could not reserve or release memory")              \
  XX(ENOCUDA, -10, "CUDA is not available: no device or driver, or built without CUDA") \
  XX(EHOSTMEM, -11, "out of host memory for metadata")                         \
  XX(ECORRUPT, -12, "an invariant does not hold")                              \
  XX(EFORMAT, -13, "malformed input")                                          \
  XX(EIO, -14, "input/output error")                                           \
  XX(ENOTFOUND, -15, "not found")                                              \
  XX(EVERSION, -16, "unsupported format version")                              \
  XX(EAGAIN, -17, "data moved on; resynchronize and try again")                \
  XX(ECLOSED, -18, "the other side is gone")                                   \
  XX(EPERM, -19, "permission denied")                                          \
  XX(EBUSY, -20, "resource busy")

enum {
  GPB_OK = 0,
#define GPB__ERRENUM(code, val, msg) GPB_##code = (val),
  GPB_ERRNO_MAP(GPB__ERRENUM)
#undef GPB__ERRENUM
};

/* Static text for an error code; never NULL (unknown codes get a generic text). */
GPB_API const char *gpb_strerror(int err);
/* "GPB_EINVAL" etc.; never NULL. */
GPB_API const char *gpb_err_name(int err);
/* Detail for the last error this thread saw from the library (names sizes,
 * CUDA's own message, a trace's line number...). Empty string when none.
 * Valid until the thread's next failing call. */
GPB_API const char *gpb_last_error_detail(void);

/* ------------------------------------------------------------------ config */

typedef enum gpb_backend {
  GPB_BACKEND_AUTO = 0, /* device if a CUDA device is usable, else host */
  GPB_BACKEND_DEVICE,   /* cudaMalloc once, cudaFree at destroy */
  GPB_BACKEND_PINNED,   /* cudaMallocHost */
  GPB_BACKEND_HOST,     /* page-aligned host memory (mmap) */
  GPB_BACKEND_VIRTUAL   /* address space only, no memory: replay and simulation */
} gpb_backend_t;

typedef enum gpb_policy {
  GPB_POLICY_BUDDY = 0, /* classic: one block of the next power of two */
  GPB_POLICY_TRIM,      /* take that block, give its unused tail back as
                           smaller buddy blocks: waste < min_block */
  GPB_POLICY_BESTFIT    /* place the request at the start of the best-
                           fitting free run (at its end when it is an
                           eighth of the pool or more), as a run of buddy
                           blocks; an aligned request needs a run of
                           size+align-1 */
} gpb_policy_t;
#define GPB_NUM_POLICIES 3

#define GPB_NAME_MAX 64   /* publish names, including the NUL */
#define GPB_MAX_ORDERS 48 /* orders 0..47 above min_block */
#define GPB_MAX_TAGS 64   /* tags are 0..GPB_MAX_TAGS-1 */
/* The tags the framework front ends give their allocations in a shared
 * device pool (gpb_device_pool), so stats and views tell them apart. */
#define GPB_TAG_TORCH 1
#define GPB_TAG_CUPY 2

typedef struct gpb_config {
  gpb_backend_t backend; /* default GPB_BACKEND_AUTO */
  int device;            /* CUDA device ordinal; default 0 */
  size_t pool_size;      /* bytes to reserve; any size; default 256 MiB */
  size_t min_block;      /* power of two >= 16; default 256 */
  gpb_policy_t policy;   /* default GPB_POLICY_BUDDY */
  const char *name;      /* non-NULL: publish live under this name (copied) */
  const char *trace_path; /* non-NULL: record a trace here (copied) */
  int debug;             /* 0 none; 1 fill host-visible memory (0xA5 on
                            alloc, 0xDD on free); 2 also check all
                            invariants after every call (slow) */
  unsigned flags;        /* GPB_CFG_* */
  /* Per-thread arenas: 1 (the default) is one lock for the whole pool;
   * N up to 64 gives threads N sub-allocators, each with its own lock,
   * fed superblocks by the pool, so threads allocate in parallel; 0 is
   * one per online CPU. They start the first time two threads meet on
   * the pool's lock (GPB_CFG_ARENAS_EAGER: at once), so a program that
   * allocates from one thread at a time keeps the one-lock pool's speed
   * and memory. Every policy; not with GPB_CFG_VMM. Costs some
   * memory (each arena keeps up to one free superblock, and best fit's
   * runs stop at superblock edges). While a hook, publisher or trace
   * listens, calls serialize again so events keep one order.
   * GPB_ARENAS=N sets it when this is 1 (VMM pools ignore it). See
   * docs/DESIGN.md. */
  uint32_t arenas;
} gpb_config_t;

/* Do not read GPB_TRACE / GPB_PUBLISH / GPB_ARENAS / GPB_CALLSITES from
 * the environment. */
#define GPB_CFG_NO_ENV 0x1u
/* Merge every freed block with its free buddy at once. By default a freed
 * single-block allocation whose buddy is free is left unmerged, up to 8
 * such pairs per order, so freeing and re-allocating the same size skips
 * the merge and split cascades; an allocation that would fail merges them
 * first, so no request fails because of it. */
#define GPB_CFG_EAGER_MERGE 0x2u
/* Leave the metadata's pages to be mapped on first use. By default a
 * device, pinned or host pool maps them at creation (0.15% of the pool
 * resident: 122 MiB and about 100 ms for 80 GiB of 256 B blocks), so that
 * no allocation later stalls on a page fault; with this flag, as always
 * for the virtual backend, creation takes under a millisecond. */
#define GPB_CFG_LAZY_META 0x4u
/* Device and pinned pools with one arena: while every allocation and
 * gpb_free_async has named one stream, an async free returns the block at
 * once, with no CUDA event (work queued on that stream later runs after
 * the work before the free; PyTorch's allocator relies on the same).
 * The first call naming a second stream records one event on the first
 * stream, and every other stream waits for it (cudaStreamWaitEvent, no
 * host wait) until it has completed; from then on async frees are
 * stream-ordered as without the flag. The PyTorch entry points set it. */
#define GPB_CFG_SOLO_STREAM 0x8u
/* Device pools: pool_size is the device memory the pool may hold, and
 * blocks are placed in an address range four times larger
 * (cuMemAddressReserve) with memory mapped, 2 MiB at a time, only under
 * live blocks; a range freed keeps its memory until another needs it.
 * Holes left between live blocks then cost no memory. Mapping a new
 * range takes microseconds, and when the budget is spent the pool waits
 * once for the device (cudaDeviceSynchronize) before moving idle memory.
 * No arenas. gpb_pool_memory says what is held. See docs/DESIGN.md. */
#define GPB_CFG_VMM 0x20u
/* Pools with arenas: use them from the first call, not from the first
 * time two threads meet on the pool's lock. Placement then depends on
 * threads from the start, as a test of the arenas wants. */
#define GPB_CFG_ARENAS_EAGER 0x40u
/* Record where each allocation came from: its call site, the caller's
 * return addresses, innermost first, as a small id (gpb_event_t.site,
 * gpb_block_info_t.site, trace ops; gpb_pool_site reads its frames).
 * GPB_CFG_CALLSITES alone records the caller of gpb_alloc* only (one
 * load, no unwinding); GPB_CFG_CALLSITES_DEPTH(n) records n frames (2 to
 * 64, through backtrace(): about 2 us per allocation). GPB_CALLSITES=DEPTH in
 * the environment turns it on for any program. Off by default: a pool
 * then pays one predicted branch per allocation. See docs/DESIGN.md. */
#define GPB_CFG_CALLSITES 0x10u
/* The depth sits in bits 24-31, clear of the other flags' bits. */
#define GPB_CFG_CALLSITES_DEPTH(n) \
  (GPB_CFG_CALLSITES | ((unsigned)(n) & 0xffu) << 24)
/* Call site ids are 1..GPB_MAX_SITES; 0 is "unknown" (not recorded, or
 * past the limit: a pool keeps the first GPB_MAX_SITES stacks it sees). */
#define GPB_MAX_SITES 65535u
#define GPB_SITE_DEPTH_MAX 64u

/* Fills the defaults. Environment is only consulted by gpb_pool_create. */
GPB_API void gpb_config_init(gpb_config_t *cfg);
GPB_API const char *gpb_backend_name(gpb_backend_t b);
GPB_API const char *gpb_policy_name(gpb_policy_t p);
/* Parses "auto", "device", "pinned", "host", "virtual" (GPB_EINVAL if none). */
GPB_API int gpb_backend_parse(const char *s, gpb_backend_t *out);
/* Parses "buddy", "trim", "bestfit". */
GPB_API int gpb_policy_parse(const char *s, gpb_policy_t *out);
/* Parses "64M", "1.5GiB", "4096", "16k" into bytes. */
GPB_API int gpb_size_parse(const char *s, size_t *out);
/* Formats bytes for people: "512 B" below 1 KiB, else one decimal in the
 * largest binary unit up to EiB that keeps the value >= 1 ("1.5 MiB",
 * "4.0 KiB"; 1048575 is "1.0 MiB", not "1024.0 KiB"). Like snprintf: at
 * most n bytes with the NUL, cut short when n is too small; returns the
 * whole text's length, always < GPB_SIZE_FORMAT_MAX. GPB_EINVAL: buf NULL
 * with n > 0. */
#define GPB_SIZE_FORMAT_MAX 16
GPB_API int gpb_size_format(uint64_t bytes, char *buf, size_t n);

/* -------------------------------------------------------------------- pool */

typedef struct gpb_pool gpb_pool_t; /* opaque */

/* Reserves cfg->pool_size from the backend (the only reservation the pool
 * ever makes) and builds the metadata. cfg NULL means defaults. On error
 * *out is NULL and nothing is held. GPB_EDEVMEM names both sizes in the
 * detail. Environment: GPB_TRACE=path records a trace, GPB_PUBLISH=name
 * publishes, GPB_CALLSITES=DEPTH records call sites (GPB_CFG_CALLSITES),
 * unless cfg->flags has GPB_CFG_NO_ENV. */
GPB_API int gpb_pool_create(const gpb_config_t *cfg, gpb_pool_t **out);
/* Releases the reservation and all metadata. Live allocations die with it.
 * NULL is a no-op. No other thread may use the pool during or after. */
GPB_API void gpb_pool_destroy(gpb_pool_t *pool);

/* Size 0 is defined like cudaMalloc: it succeeds with *out = NULL and
 * records nothing; gpb_free(pool, NULL) is likewise a successful no-op.
 * GPB_ETOOBIG: size larger than the pool. GPB_ENOMEM: no block free now.
 * Both leave the pool unchanged and emit a GPB_EV_FAIL event. */
GPB_API int gpb_alloc(gpb_pool_t *pool, size_t size, void **out);
/* align: 0 or a power of two (GPB_EALIGN otherwise); blocks are always
 * aligned to min_block and to their own size. tag < GPB_MAX_TAGS labels the
 * allocation in stats and the viewer. stream: the CUDA stream the block will
 * be used on (NULL = default stream); see gpb_free_async. */
GPB_API int gpb_alloc_ex(gpb_pool_t *pool, size_t size, size_t align,
                         uint32_t tag, void *stream, void **out);
GPB_API int gpb_alloc_aligned(gpb_pool_t *pool, size_t size, size_t align,
                              void **out);
GPB_API int gpb_alloc_tagged(gpb_pool_t *pool, size_t size, uint32_t tag,
                             void **out);
/* Returns the block at once. GPB_EDOUBLEFREE, GPB_EFOREIGN, GPB_EINTERIOR
 * leave the pool unchanged. */
GPB_API int gpb_free(gpb_pool_t *pool, void *ptr);
/* Like cudaFreeAsync: work later queued on the same stream may reuse the
 * block at once; other streams get it only after the work queued on
 * `stream` before this call has completed (a CUDA event, never a device
 * synchronization). Host and virtual backends free at once. */
GPB_API int gpb_free_async(gpb_pool_t *pool, void *ptr, void *stream);
/* Waits for the work behind every pending gpb_free_async and returns
 * those blocks to the pool now (their FREE events go out). A no-op for
 * host and virtual pools. See docs/GPU.md. */
GPB_API int gpb_pool_drain(gpb_pool_t *pool);
/* Merges every free buddy pair left unmerged (see GPB_CFG_EAGER_MERGE),
 * emitting their MERGE events: the map becomes the fully coalesced one. */
GPB_API int gpb_pool_coalesce(gpb_pool_t *pool);
/* Bytes usable at ptr (the allocation's blocks, >= the size asked for). */
GPB_API int gpb_usable_size(const gpb_pool_t *pool, const void *ptr,
                            size_t *out);
/* 0 when every structural invariant holds, else GPB_ECORRUPT with a detail. */
GPB_API int gpb_pool_check(const gpb_pool_t *pool);

typedef struct gpb_pool_info {
  void *base;            /* first byte of the reservation */
  uint64_t pool_size;    /* bytes reserved */
  uint64_t managed_size; /* bytes covered by blocks (pool_size rounded down
                            to min_block) */
  uint64_t min_block;
  uint32_t num_orders;   /* orders 0..num_orders-1 exist */
  uint32_t num_roots;    /* power-of-two roots covering managed_size */
  gpb_backend_t backend; /* the one chosen, never AUTO */
  gpb_policy_t policy;
  int device;
  char name[GPB_NAME_MAX]; /* "" when not published */
  uint32_t num_arenas;     /* 1 without arenas (see gpb_config_t.arenas) */
  int32_t pid;             /* the process that owns the pool (its writer,
                              for a live reader); 0 when unknown (relayed) */
  int32_t rank;            /* its RANK environment variable at creation
                              (torchrun's rank), -1 when unset or unknown */
} gpb_pool_info_t;
GPB_API int gpb_pool_info(const gpb_pool_t *pool, gpb_pool_info_t *out);
/* Bytes of memory the pool holds now and may hold: for a GPB_CFG_VMM pool
 * what is mapped and its budget, for a virtual pool 0, else pool_size. */
GPB_API int gpb_pool_memory(const gpb_pool_t *pool, uint64_t *held,
                            uint64_t *limit);
/* A GPB_CFG_VMM pool gives the device back the memory under no live
 * block (after waiting for the device); a no-op for other pools, whose
 * range is held until gpb_pool_destroy. Takes the pool's lock. */
GPB_API int gpb_pool_trim(gpb_pool_t *pool);

/* ------------------------------------------------------------------- stats */

#define GPB_STATS_VERSION 2 /* 2: last_failed_request */

/* All counters are kept current on every event: reading is a copy plus a
 * pass over the orders. Fragmentation figures are derived on read, on the
 * coalesced map: free buddies that deferred coalescing left unmerged count
 * as their merged parent (recursively), as any request sees them (the
 * pool merges them before it fails one); free_blocks is the map as it is. */
typedef struct gpb_stats {
  uint32_t version;    /* GPB_STATS_VERSION */
  uint32_t num_orders;
  uint64_t managed_bytes, min_block;
  uint64_t seq;        /* sequence number of the last event */
  uint64_t requested_bytes, requested_peak; /* bytes asked for, live */
  uint64_t block_bytes, block_peak;         /* bytes in used blocks */
  uint64_t free_bytes, free_peak;           /* bytes in free blocks */
  uint64_t allocs, frees, failures;         /* counts */
  uint64_t splits, merges;
  uint64_t live_allocs;
  uint64_t free_blocks[GPB_MAX_ORDERS]; /* per order, like /proc/buddyinfo,
                                           deferred pairs unmerged */
  uint64_t largest_free; /* bytes, free buddies merged: the largest free
                            block, which a request that size gets now
                            (best fit serves up to the longest free run,
                            which may be more); 0 when full */
  uint64_t internal_frag_bytes;         /* block_bytes - requested_bytes */
  /* Linux's unusable-free-space index for order j: the share of free bytes
   * in blocks too small to serve a request of order j. 0 when nothing free. */
  double unusable_index[GPB_MAX_ORDERS];
  double external_frag; /* 1 - sqrt(sum f^2)/sum f over free blocks
                           (merged) */
  uint64_t tag_bytes[GPB_MAX_TAGS]; /* block bytes live per tag */
  uint64_t last_failed_request; /* bytes the latest failed allocation asked
                                   for (against largest_free: why it
                                   failed); 0 when none has failed */
} gpb_stats_t;
/* A copy of the pool's counters, under its lock, with no walk of the
 * block map; a best-fit pool with up to 512 free runs counts its free
 * blocks from them here (about 8 ns a run) instead of on every call. */
GPB_API int gpb_pool_stats(const gpb_pool_t *pool, gpb_stats_t *out);
/* Writes s as one JSON object (the keys gpubuddy-stat --json prints) into
 * buf, like snprintf: at most len bytes with the terminating NUL; returns
 * the length the whole object needs (buf NULL and len 0 measure it). */
GPB_API int gpb_stats_json(const gpb_stats_t *s, char *buf, size_t len);
/* Starts the peaks (requested_peak, block_peak, free_peak) again from the
 * current values, as torch.cuda.reset_peak_memory_stats does. */
GPB_API int gpb_pool_reset_peaks(gpb_pool_t *pool);

/* ------------------------------------------------------------------ events */

typedef enum gpb_event_type {
  GPB_EV_ALLOC = 1, /* range [offset, offset+size) of free blocks becomes used */
  GPB_EV_FREE = 2,  /* that range's blocks become free (merges follow) */
  GPB_EV_SPLIT = 3, /* free block of `order` at offset becomes two of order-1 */
  GPB_EV_MERGE = 4, /* two free buddies of order-1 become one of `order` */
  GPB_EV_FAIL = 5   /* an allocation of `requested` bytes failed */
} gpb_event_type_t;

/* An allocation's range is always tiled by its canonical blocks: the
 * maximal aligned power-of-two blocks, left to right. With the buddy
 * policy that is a single block. */
typedef struct gpb_event {
  uint64_t seq;       /* 1, 2, 3... per pool, no gaps */
  uint64_t time_ns;   /* CLOCK_MONOTONIC (gpb_now_ns) with a hook or trace;
                         at tick resolution (1-4 ms) when only the live
                         publisher listens; 0 when nobody listens */
  uint64_t offset;    /* bytes from the pool base */
  uint64_t size;      /* ALLOC/FREE: range bytes; SPLIT/MERGE: 2^order*min */
  uint64_t requested; /* ALLOC/FREE/FAIL: bytes asked for */
  uint64_t stream;    /* the stream as an integer (0 = default) */
  uint32_t tag;
  uint8_t type;       /* gpb_event_type_t */
  uint8_t order;      /* SPLIT: parent's; MERGE: result's; ALLOC/FREE: of
                         the first block; FAIL: order asked for */
  uint16_t site;      /* ALLOC/FAIL: the caller's call site; FREE: the
                         allocation's; 0 unknown (GPB_CFG_CALLSITES) */
} gpb_event_t;

GPB_API const char *gpb_event_type_name(int type);

/* Called for every event, in sequence, with the pool's lock held. The hook
 * must not call back into the same pool. NULL removes it. */
typedef void (*gpb_hook_fn)(const gpb_event_t *ev, void *user);
GPB_API int gpb_pool_set_hook(gpb_pool_t *pool, gpb_hook_fn fn, void *user);

/* One block, as the visitor reports it. */
typedef struct gpb_block_info {
  uint64_t offset;       /* bytes from the base */
  uint64_t size;         /* block bytes: min_block << order */
  uint32_t order;
  uint32_t used;         /* 1 used, 0 free */
  uint64_t alloc_offset; /* used: start of the allocation it belongs to */
  uint64_t alloc_size;   /* used: bytes of the whole allocation's range */
  uint64_t requested;    /* used: bytes asked for (whole allocation) */
  uint64_t time_ns;      /* used: when allocated (0 if not recorded) */
  uint32_t tag;          /* used: the allocation's tag */
  uint32_t site;         /* used: its call site (0 unknown) */
} gpb_block_info_t;

/* Walks every block, free or used, in address order. Stops early and
 * returns fn's value when fn returns nonzero. Takes the pool's lock. */
typedef int (*gpb_visit_fn)(const gpb_block_info_t *b, void *user);
GPB_API int gpb_pool_visit(const gpb_pool_t *pool, gpb_visit_fn fn,
                           void *user);

/* One frame of a call site, as the pool resolved it with dladdr() when
 * the site was first seen. Strings live as long as the pool. */
typedef struct gpb_frame {
  uint64_t pc;        /* the return address */
  uint64_t offset;    /* pc - 1 (the call) from the module's load base:
                         `addr2line -e MODULE OFFSET` names the line */
  const char *module; /* path of the executable or library; "" unknown */
  const char *symbol; /* the nearest exported symbol; "" when none */
} gpb_frame_t;
/* The frames of call site `site` (innermost first): up to max of them in
 * frames, their count in *n (either may be NULL/0 to count). GPB_ENOTFOUND
 * for an id the pool never gave. The text traces carry for it, "MODULE+
 * 0xOFFSET SYMBOL;..." (docs/TRACE_FORMAT.md), comes from
 * gpb_pool_site_text, like snprintf. Both take no lock of the pool's. */
/* Call sites the caller knows better than the pool's unwinding (a
 * framework's own stacks: Python frames through PyTorch's allocator):
 * gpb_pool_site_intern gives the id of the stack the caller names by
 * `key` (its own hash of the stack: one key, one site), keeping `text`
 * (its frames, innermost first, ';' between; a Python frame reads
 * "FILE:LINE NAME") the first time; *site is 0 when the pool records no
 * call sites (GPB_CFG_CALLSITES) or keeps GPB_MAX_SITES already. Such a
 * site's frames have pc 0, the file as module, the line as offset and
 * the function as symbol. Takes the site table's lock, never the pool's:
 * cache the id. gpb_alloc_site is gpb_alloc_ex with that site (0:
 * unknown); GPB_EINVAL for an id the pool never gave. */
GPB_API int gpb_pool_site_intern(gpb_pool_t *pool, uint64_t key,
                                 const char *text, uint32_t *site);
GPB_API int gpb_alloc_site(gpb_pool_t *pool, size_t size, size_t align,
                           uint32_t tag, void *stream, uint32_t site,
                           void **out);
GPB_API int gpb_pool_site(const gpb_pool_t *pool, uint32_t site,
                          gpb_frame_t *frames, uint32_t max, uint32_t *n);
GPB_API int gpb_pool_site_text(const gpb_pool_t *pool, uint32_t site,
                               char *buf, size_t len);

/* ------------------------------------------------------- block-map model */

/* A model rebuilds a pool's exact state from its events, outside the pool:
 * the viewer, gpubuddy-stat, the relay and the tests use it. It validates
 * every event: one that does not fit the current state is refused with
 * GPB_EFORMAT and the model is left as it was. */
typedef struct gpb_model gpb_model_t;
GPB_API int gpb_model_create(uint64_t managed_size, uint64_t min_block,
                             gpb_model_t **out);
GPB_API void gpb_model_destroy(gpb_model_t *m);
/* Back to all roots free, sequence 0. */
GPB_API void gpb_model_reset(gpb_model_t *m);
GPB_API int gpb_model_apply(gpb_model_t *m, const gpb_event_t *ev);
/* Replaces the state with a block list in address order that tiles the
 * pool (a keyframe); `seq` is the last event it includes. Used blocks of
 * one allocation share alloc_offset. On error the model is reset. */
GPB_API int gpb_model_load(gpb_model_t *m, const gpb_block_info_t *blocks,
                           size_t n, uint64_t seq);
GPB_API int gpb_model_stats(const gpb_model_t *m, gpb_stats_t *out);
GPB_API int gpb_model_visit(const gpb_model_t *m, gpb_visit_fn fn, void *user);
GPB_API int gpb_model_check(const gpb_model_t *m);
GPB_API uint64_t gpb_model_seq(const gpb_model_t *m);
/* Finds the block containing byte `offset`: 0, or GPB_ENOTFOUND past the end. */
GPB_API int gpb_model_lookup(const gpb_model_t *m, uint64_t offset,
                             gpb_block_info_t *out);

/* ------------------------------------------------------------- simulator */

/* A simulator allocates by itself: the placements, events and stats of a
 * pool made from the same cfg (pool_size, min_block, policy,
 * GPB_CFG_EAGER_MERGE; one arena), with no memory behind the offsets and
 * no lock. Replay tools use it to get a pool's block map at the cost of
 * one buddy core. */
typedef struct gpb_sim gpb_sim_t;
#define GPB_NO_OFFSET UINT64_MAX
GPB_API int gpb_sim_create(const gpb_config_t *cfg, gpb_sim_t **out);
GPB_API void gpb_sim_destroy(gpb_sim_t *s);
/* Back to an empty pool at sequence 0; the hook stays. */
GPB_API void gpb_sim_reset(gpb_sim_t *s);
/* Its block map, for reading: gpb_model_stats, _visit, _lookup, _check and
 * _seq take it. It stays valid until gpb_sim_destroy. */
GPB_API const gpb_model_t *gpb_sim_model(const gpb_sim_t *s);
/* As gpb_alloc_ex, with the event time given (it is what ages are measured
 * from): *offset is the allocation's byte offset, or GPB_NO_OFFSET for
 * size 0 (success, no event) and on error. Any power-of-two alignment up
 * to the managed size is taken (offsets have no base address; a real pool
 * also refuses one larger than its base's own alignment). */
GPB_API int gpb_sim_alloc(gpb_sim_t *s, uint64_t size, uint64_t align,
                          uint32_t tag, uint64_t time_ns, uint64_t *offset);
/* As gpb_sim_alloc, with call site `site` (0 unknown, else 1 to
 * GPB_MAX_SITES, as a trace op names it) on the allocation, its block
 * infos and its events, as a pool recording call sites keeps them. */
GPB_API int gpb_sim_alloc_site(gpb_sim_t *s, uint64_t size, uint64_t align,
                               uint32_t tag, uint32_t site, uint64_t time_ns,
                               uint64_t *offset);
/* As gpb_free: misuse gets the pool's codes and changes nothing. */
GPB_API int gpb_sim_free(gpb_sim_t *s, uint64_t offset, uint64_t time_ns);
/* Sizes an empty simulator's allocation table for `live` allocations at
 * once (at most one per minimum block), so a replay that reaches them
 * never grows it; a hint, with no effect once allocations are held. */
GPB_API int gpb_sim_reserve(gpb_sim_t *s, uint64_t live);
/* A hint for a replay that reads ahead: starts fetching the record of the
 * allocation at `offset` (a free to come), so that free finds it in cache.
 * Changes nothing; any offset is accepted. */
GPB_API void gpb_sim_prefetch(const gpb_sim_t *s, uint64_t offset);
/* Called for every event the simulator makes, after its stats count it.
 * NULL removes it. */
GPB_API int gpb_sim_set_hook(gpb_sim_t *s, gpb_hook_fn fn, void *user);

/* ------------------------------------------------------------------ plans */

/* A placement plan: an offset for each allocation of a run, in the order
 * the run makes them, laid out offline from a trace of an earlier run of
 * the same program (gpubuddy-replay --plan-out). A plan may end in a
 * periodic part, entries [repeat_from, n), that is followed again and
 * again (a training step). A best-fit pool or simulator that follows a
 * plan places a request at the offset of the first of the plan's next
 * GPB_PLAN_LOOKAHEAD entries of its size (in min_block units), when that
 * range is free, and by best fit otherwise. A run that departs from the
 * plan still works: once more than GPB_PLAN_DEPART_MAX of the last 64
 * requests departed, or a plan with no periodic part has ended, the pool
 * stops following it and places by best fit alone. See docs/DESIGN.md
 * ("Plans"). */
typedef struct gpb_plan gpb_plan_t; /* opaque, immutable once made */
typedef struct gpb_plan_entry {
  uint64_t size;   /* bytes requested */
  uint64_t offset; /* where the plan puts it */
} gpb_plan_entry_t;
#define GPB_PLAN_LOOKAHEAD 64
#define GPB_PLAN_DEPART_MAX 8
/* How far a pool has followed its plan (gpb_pool_plan_info). */
typedef struct gpb_plan_info {
  uint64_t entries; /* in the plan */
  uint64_t next;    /* entries consumed (matched or skipped over) */
  uint64_t placed;  /* requests placed where the plan said */
  uint64_t busy;    /* matched, but the range was taken: best fit instead */
  uint64_t unmatched; /* no entry of that size ahead: best fit instead */
  uint64_t repeat_from; /* the periodic part's first entry (entries: none) */
  uint64_t requests;    /* requests seen while following */
  uint64_t stopped_at;  /* the request at which the pool stopped following
                           (0: it still follows) */
} gpb_plan_info_t;

/* Copies n entries (each size > 0, offset + size < 2^64). */
GPB_API int gpb_plan_create(const gpb_plan_entry_t *entries, size_t n,
                            gpb_plan_t **out);
/* The same, entries [repeat_from, n) followed again and again after the
 * last (repeat_from == n: no periodic part, as gpb_plan_create). */
GPB_API int gpb_plan_create_periodic(const gpb_plan_entry_t *entries,
                                     size_t n, size_t repeat_from,
                                     gpb_plan_t **out);
GPB_API size_t gpb_plan_repeat_from(const gpb_plan_t *plan);
GPB_API void gpb_plan_destroy(gpb_plan_t *plan);
GPB_API size_t gpb_plan_count(const gpb_plan_t *plan);
GPB_API const gpb_plan_entry_t *gpb_plan_entries(const gpb_plan_t *plan);
/* The end of the highest planned range: the pool the plan fits in. */
GPB_API uint64_t gpb_plan_extent(const gpb_plan_t *plan);
/* Plan files are text (docs/TRACE_FORMAT.md, "Plan files"). Load reads
 * regular files only (GPB_EIO for a FIFO, a device or a directory) and
 * fails with GPB_EFORMAT and a message naming the line (a last line with
 * no end of line too: a cut file). Save writes a fresh temporary file in
 * path's directory (O_EXCL: never through a planted link, never shared
 * by two savers) and renames it, so a reader sees the old plan or the
 * new one, and a failed save leaves no partial plan. */
GPB_API int gpb_plan_load(const char *path, gpb_plan_t **out);
GPB_API int gpb_plan_save(const gpb_plan_t *plan, const char *path);
/* One operation of a recorded run, for the planner: an allocation of
 * `size` bytes (> 0) into `slot`, or (alloc 0) the free of what `slot`
 * holds. Slots are below nslots; a slot is allocated at most once. */
typedef struct gpb_plan_op {
  uint64_t size;  /* alloc: bytes */
  uint32_t slot;  /* which allocation */
  uint32_t alloc; /* 1 alloc, 0 free */
} gpb_plan_op_t;
/* Called every 4,096 allocations placed (may be NULL): done of total. A
 * positive return stops the planner, which then returns that value. */
typedef int (*gpb_plan_progress_fn)(void *user, uint64_t done,
                                    uint64_t total);
/* Lays a recorded run out offline, knowing every lifetime, for a pool of
 * min_block-byte units: one entry per alloc op, in order, and the run's
 * repeating step, when it has one, as the periodic part (docs/DESIGN.md,
 * "Plans"). 0 with *out set; GPB_EINVAL (min_block not a power of two, a
 * slot out of range), GPB_EHOSTMEM, or the progress function's code. */
GPB_API int gpb_plan_make(const gpb_plan_op_t *ops, size_t nops,
                          size_t nslots, size_t min_block,
                          gpb_plan_progress_fn progress, void *user,
                          gpb_plan_t **out);
/* gpb_plan_make for the run a trace recorded (any format gpb_trace_open
 * reads; in libgpubuddy-read), as gpubuddy-replay --plan-out reads it:
 * requests that failed when recorded are kept, zero-size requests,
 * frees of unknown ids and allocations of live ids are skipped.
 * *peak_live (may be NULL) gets the most requested bytes live at once. */
GPB_API int gpb_plan_make_trace(const char *trace_path, size_t min_block,
                                gpb_plan_t **out, uint64_t *peak_live);
/* Follow `plan` from the next allocation on, starting at its first entry
 * (NULL: stop following). The pool keeps its own copy. GPB_EINVAL unless
 * the pool's policy is best fit, it has no arenas, and every offset is a
 * multiple of its min_block. A reset pool starts the plan again. */
GPB_API int gpb_pool_set_plan(gpb_pool_t *pool, const gpb_plan_t *plan);
/* gpb_plan_load and gpb_pool_set_plan in one (what GPB_PLAN does). */
GPB_API int gpb_pool_set_plan_file(gpb_pool_t *pool, const char *path);
GPB_API int gpb_pool_plan_info(gpb_pool_t *pool, gpb_plan_info_t *out);
GPB_API int gpb_sim_set_plan(gpb_sim_t *s, const gpb_plan_t *plan);
GPB_API int gpb_sim_plan_info(const gpb_sim_t *s, gpb_plan_info_t *out);

/* ------------------------------------------------------------------ traces */

/* Trace ops: what a program asked for, independent of placement, so that a
 * trace replays through any pool. See docs/TRACE_FORMAT.md. */
typedef enum gpb_trace_opcode { GPB_OP_ALLOC = 1, GPB_OP_FREE = 2 } gpb_trace_opcode_t;
typedef struct gpb_trace_op {
  uint64_t seq;
  uint64_t time_ns;
  uint64_t id;     /* names the allocation; unique among live ones */
  uint64_t size;   /* ALLOC: bytes; FREE: bytes if known, else 0 */
  uint64_t stream;
  uint32_t tag;
  uint16_t op;     /* gpb_trace_opcode_t */
  uint16_t site;   /* call site (gpb_trace_site), 0 unknown; a FREE
                      carries its allocation's */
} gpb_trace_op_t;

typedef struct gpb_trace_reader gpb_trace_reader_t;
/* Opens a native trace (text, or gzip-compressed text) or a RAPIDS RMM
 * log (CSV), detected from the content. "-" reads standard input. */
GPB_API int gpb_trace_open(const char *path, gpb_trace_reader_t **out);
/* 1 with *op filled, 0 at the end, or <0 (GPB_EFORMAT, GPB_EIO...) with
 * gpb_trace_error() naming the line or record. */
GPB_API int gpb_trace_next(gpb_trace_reader_t *r, gpb_trace_op_t *op);
GPB_API const char *gpb_trace_error(const gpb_trace_reader_t *r);
/* "" or a note on input the reader passed over without failing: a last
 * line with no newline (a crashed writer's cut tail) is dropped. */
GPB_API const char *gpb_trace_warning(const gpb_trace_reader_t *r);
GPB_API const char *gpb_trace_format_name(const gpb_trace_reader_t *r);
/* The frames of call site `site` as the trace defined them ("FRAME;FRAME;
 * ...", innermost first: docs/TRACE_FORMAT.md), or NULL when the trace
 * has defined no such site so far (definitions come before the first op
 * that uses them). Valid until gpb_trace_close. */
GPB_API const char *gpb_trace_site(const gpb_trace_reader_t *r, uint32_t site);
GPB_API void gpb_trace_close(gpb_trace_reader_t *r);

typedef struct gpb_trace_writer gpb_trace_writer_t;
/* Writes a native trace; a path ending in .gz is gzip-compressed. */
GPB_API int gpb_trace_writer_open(const char *path, gpb_trace_writer_t **out);
GPB_API int gpb_trace_write(gpb_trace_writer_t *w, const gpb_trace_op_t *op);
/* Defines call site `site` (1..GPB_MAX_SITES) as `frames`: "FRAME;FRAME;
 * ..." with no newline. Call it before the first op that names the site;
 * a site already defined is not written again. A text too long for one
 * line loses its outer frames (";..." marks the cut). */
GPB_API int gpb_trace_write_site(gpb_trace_writer_t *w, uint32_t site,
                                 const char *frames);
GPB_API int gpb_trace_writer_close(gpb_trace_writer_t *w);

/* Starts/stops recording this pool's own trace (as GPB_TRACE does). */
GPB_API int gpb_pool_trace_start(gpb_pool_t *pool, const char *path);
GPB_API int gpb_pool_trace_stop(gpb_pool_t *pool);

/* ----------------------------------------------------------- live attach */

/* A reader of a pool published under a name (gpb_config_t.name). Readers
 * never make the writer wait. */
typedef struct gpb_attach gpb_attach_t;
GPB_API int gpb_attach_open(const char *name, gpb_attach_t **out);
/* Brings the model up to date: >=0 events applied (a resync from a
 * keyframe counts as applied), GPB_ECLOSED when the writer is gone (the
 * model keeps the last state), or another error for a garbled segment. */
GPB_API int gpb_attach_poll(gpb_attach_t *a);
GPB_API const gpb_model_t *gpb_attach_model(const gpb_attach_t *a);
/* Called by gpb_attach_poll for each event it applies, after the model has
 * taken it; after a resync from a keyframe, once with ev == NULL. */
typedef void (*gpb_attach_hook_fn)(const gpb_event_t *ev, void *user);
GPB_API int gpb_attach_set_hook(gpb_attach_t *a, gpb_attach_hook_fn fn,
                                void *user);
/* A reader of a pool served by gpubuddy-relay at "HOST:PORT", or of pool
 * NAME of a relay that serves several (--all) at "HOST:PORT/NAME". token
 * may be NULL for a relay that needs none (loopback); NULL takes
 * $GPB_RELAY_TOKEN. Same calls as above after. A relay that cannot serve
 * the pool says why: GPB_ENOTFOUND (no such pool), GPB_EINVAL (several
 * pools and none named), GPB_EPERM (token). */
GPB_API int gpb_attach_connect(const char *addr, const char *token,
                               gpb_attach_t **out);
/* Calls fn once per pool the relay at "HOST:PORT" serves; returns how
 * many, or a GPB_E* code. */
GPB_API int gpb_attach_list_remote(const char *addr, const char *token,
                                   void (*fn)(const char *name, void *user),
                                   void *user);
GPB_API int gpb_attach_info(const gpb_attach_t *a, gpb_pool_info_t *out);
/* The frames of call site `site` (an event's or block's site) as the
 * pool published them, "FRAME;FRAME;..." innermost first; NULL when not
 * known (0, sites off, or past what the segment or relay could hold).
 * Valid until gpb_attach_close. */
GPB_API const char *gpb_attach_site(const gpb_attach_t *a, uint32_t site);
GPB_API void gpb_attach_close(gpb_attach_t *a);
/* Calls fn once per published pool that can be attached now. */
GPB_API int gpb_list_pools(void (*fn)(const char *name, void *user), void *user);
/* Segments of this user's whose writer is gone without destroying its pool
 * (killed with SIGKILL, say): they hold no live pool, only space in
 * /dev/shm. gpb_remove_stale_pool removes one, after checking again that
 * it is stale (GPB_EBUSY when its writer runs). */
GPB_API int gpb_list_stale_pools(void (*fn)(const char *name, void *user),
                                 void *user);
GPB_API int gpb_remove_stale_pool(const char *name);

/* ----------------------------------------------------------------- PyTorch */

/* The process's shared pool of CUDA device `device`, for the framework
 * front ends (PyTorch's allocator, CuPy's): every caller gets the same
 * pool, made at the first call from the GPB_TORCH_* settings below
 * (GPB_TORCH_VMM: 1, the default, maps memory under live blocks only).
 * A pool that cannot be made is reported once on stderr, and every later
 * call fails at once with the same code. Thread-safe; the pools live
 * until exit. */
GPB_API int gpb_device_pool(int device, gpb_pool_t **out);

/* Entry points for torch.cuda.memory.CUDAPluggableAllocator: ptrdiff_t is
 * ssize_t and void * is cudaStream_t on the ABI, so these match
 * `void *(ssize_t, int, cudaStream_t)` and
 * `void (void *, ssize_t, int, cudaStream_t)`. One pool per device is made
 * at the first call for that device, configured by GPB_TORCH_POOL_SIZE
 * (bytes like "20G", or "90%" of the free memory; default 90%),
 * GPB_TORCH_MIN_BLOCK (default 512), GPB_TORCH_POLICY (default bestfit) and
 * GPB_TORCH_PUBLISH (publish as "NAME.DEVICE"). Frees are gpb_free_async
 * on the given stream. gpb_torch_malloc returns NULL when out of memory
 * (PyTorch then raises OutOfMemoryError). See docs/GPU.md. */
GPB_API void *gpb_torch_malloc(ptrdiff_t size, int device, void *stream);
GPB_API void gpb_torch_free(void *ptr, ptrdiff_t size, int device,
                            void *stream);
/* Stats of the device's pool: GPB_ENOTFOUND when it has no pool yet. */
GPB_API int gpb_torch_stats(int device, gpb_stats_t *out);
/* Calls the entry points received for the device: successful mallocs,
 * failed mallocs, frees (non-NULL). Any out pointer may be NULL. */
GPB_API int gpb_torch_calls(int device, uint64_t *mallocs, uint64_t *failures,
                            uint64_t *frees);
/* gpb_pool_drain on the device's pool. */
GPB_API int gpb_torch_drain(int device);
/* The device's pool (NULL when none yet), for gpb_pool_info/visit. */
GPB_API gpb_pool_t *gpb_torch_pool(int device);
/* Why an allocation of `size` bytes on the device's pool fails, in one
 * line: bytes requested, bytes free, the largest free block, the pool
 * size (the OutOfMemoryError text of the Python package). Like snprintf;
 * GPB_ENOTFOUND when the device has no pool. */
GPB_API int gpb_torch_explain(int device, size_t size, char *buf, size_t len);
/* Starts recording the device's pool to a trace at path (as GPB_TRACE
 * does), or stops with path NULL. GPB_ENOTFOUND when it has no pool. */
GPB_API int gpb_torch_trace(int device, const char *path);

/* ------------------------------------------------------------------ CuPy */

/* Entry points for cupy.cuda.memory.CFunctionAllocator, whose malloc is
 * `void *(void *param, size_t, int device)` and free
 * `void (void *param, void *ptr, int device)`. param is the CUDA stream
 * the block is used on (CuPy's current stream at the malloc): the free is
 * gpb_free_async on that stream. They use the device's shared pool
 * (gpb_device_pool), the one gpb_torch_malloc uses. gpb_cupy_malloc
 * returns NULL when out of memory (gpubuddy.cupy raises CuPy's
 * OutOfMemoryError with gpb_cupy_explain's text). Every block carries
 * GPB_TAG_CUPY, PyTorch's GPB_TAG_TORCH: stats (tag_bytes), the viewer
 * (--color tag) and OOM explanations tell the libraries apart. */
GPB_API void *gpb_cupy_malloc(void *stream, size_t size, int device);
GPB_API void gpb_cupy_free(void *stream, void *ptr, int device);
/* As gpb_torch_calls, for the CuPy entry points. */
GPB_API int gpb_cupy_calls(int device, uint64_t *mallocs, uint64_t *failures,
                           uint64_t *frees);
/* Block bytes live in the device's shared pool per library (tags
 * GPB_TAG_TORCH and GPB_TAG_CUPY). GPB_ENOTFOUND when it has no pool. */
GPB_API int gpb_cupy_bytes(int device, uint64_t *torch, uint64_t *cupy);
/* Why an allocation of `size` bytes for CuPy fails, in one line, with what
 * each library holds. Like snprintf; GPB_ENOTFOUND when no pool. */
GPB_API int gpb_cupy_explain(int device, size_t size, char *buf, size_t len);

/* ------------------------------------------------------------------ misc */

/* Monotonic nanoseconds, the clock events are stamped with: within
 * microseconds of CLOCK_MONOTONIC, never decreasing within a thread (on
 * x86-64 read from the TSC; GPB_CLOCK=monotonic reads the real clock). */
GPB_API uint64_t gpb_now_ns(void);
GPB_API const char *gpb_version(void);

#ifdef __cplusplus
}
#endif
#endif /* GPUBUDDY_H */
