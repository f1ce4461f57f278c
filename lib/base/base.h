/* SPDX-License-Identifier: MIT */
/*
 * base.h: what every layer of the library uses: visibility and branch
 * hints, assertions, the error detail (error.c), the clocks (clock.c),
 * the one hash function, a write prefetch, and the rule that cuts a
 * call site's frame list to a length.
 *
 * The library's layers, bottom up; each has one header and includes only
 * the ones below it:
 *   base/   errors, clocks, parsers, hashing           base.h
 *   core/   buddy arithmetic and placement on offsets  core.h
 *           (bitsets, allocation table, free runs, the checker, the
 *           counters, the model and the simulator); events
 *           leave through one sink (gpb__sink_t)
 *   trace/  trace files: writer, readers, gzip blocks   trace.h
 *   live/   shm writer (a sink), readers, relay frames  live.h, shm.h,
 *                                                       netproto.h
 *   gpu/    CUDA backends, stream-ordered frees, NVTX  gpu.h
 *   pool/   the public pool: locks, arenas, pointers,  pool.h
 *           consumers wired to the core's sink
 *   torch/  PyTorch's entry points (public API only)
 */
#ifndef GPB_BASE_H
#define GPB_BASE_H

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include "gpubuddy.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
#define GPB__HIDDEN __attribute__((visibility("hidden")))
/* Internal, yet exported: the few gpb__ calls libgpubuddy-read makes into
 * libgpubuddy (errors, model counters, segment checks). Not API. */
#define GPB__SHARED __attribute__((visibility("default")))
#define GPB__LIKELY(x) __builtin_expect(!!(x), 1)
#define GPB__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define GPB__INLINE inline __attribute__((always_inline))
#else
#define GPB__HIDDEN
#define GPB__SHARED
#define GPB__LIKELY(x) (x)
#define GPB__UNLIKELY(x) (x)
#define GPB__INLINE inline
#endif

/* Debug assertions. --enable-debug sets GPB_DEBUG to 1: gpb_assert checks
 * cheap preconditions, as mem5.c asserts them. --enable-debug=full sets 2:
 * gpb_assert_expensive also runs whole-structure checks (the invariant
 * checker after every operation). Release builds compile both out. */
#if defined(GPB_DEBUG) && GPB_DEBUG >= 1
#undef NDEBUG
#include <assert.h>
#define gpb_assert(x) assert(x)
#else
#define gpb_assert(x) ((void)0)
#endif
#if defined(GPB_DEBUG) && GPB_DEBUG >= 2
#define gpb_assert_expensive(x) assert(x)
#else
#define gpb_assert_expensive(x) ((void)0)
#endif

/* ----------------------------------------------------------------- clock */

/* CLOCK_MONOTONIC at the kernel's tick resolution (1 to 4 ms): a few
 * nanoseconds to read, for times that only people look at. */
GPB__HIDDEN uint64_t gpb__now_coarse_ns(void);

/* CLOCK_MONOTONIC as of the last millisecond, kept by a thread while any
 * publisher holds it (clock.c); 0 when there is none. */
GPB__HIDDEN extern _Atomic uint64_t gpb__tick_ns;
/* Hold and drop the ticker; drop takes what hold returned. */
GPB__HIDDEN unsigned gpb__tick_hold(void);
GPB__HIDDEN void gpb__tick_drop(unsigned gen);

/* ---------------------------------------------------------------- errors */

/* Parses a small count from environment variable `var` (value s): 0 to
 * max in decimal, else GPB_EINVAL naming the variable and what it wants
 * ("0 (one arena per CPU) to 64"). */
GPB__HIDDEN int gpb__parse_env_u32(const char *var, const char *s,
                                   uint32_t max, const char *want,
                                   uint32_t *out);
/* The process's rank under torchrun (and launchers that set RANK): the
 * RANK environment variable, 0 to INT32_MAX, else -1. */
GPB__HIDDEN int32_t gpb__env_rank(void);
/* An arena count (GPB_ARENAS, GPB_TORCH_ARENAS): 0 to 64. */
static inline int gpb__parse_arenas(const char *var, const char *s,
                                    uint32_t *out) {
  return gpb__parse_env_u32(var, s, 64, "0 (one arena per CPU) to 64", out);
}

/* Records a printf-style detail for gpb_last_error_detail() and returns err,
 * so a failing path reads `return gpb__fail(GPB_EINVAL, "...", ...)`. */
GPB__SHARED int gpb__fail(int err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefetch for writing: the line arrives owned, so the store after it
 * does not wait for other cores (a reader) to give it up. On x86-64 this
 * is PREFETCHW, which CPUs older than Broadwell execute as a NOP; GCC's
 * __builtin_prefetch(p, 1) emits a plain read prefetch there unless
 * -march says otherwise. */
static inline void gpb__prefetchw(const void *p) {
#if defined(__x86_64__) && defined(__GNUC__)
  __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
  __builtin_prefetch(p, 1);
#endif
}

/* The hash function of the project's tables (here and in the tools):
 * MurmurHash3's 64-bit finalizer, both rounds. One round left the low
 * bits (the slot) of structured keys clustered: blocks of one size sit at
 * multiples of a power of two, and 500 keys 4096 units apart took 3.3
 * probes each to insert at load 1/2, against 1.5 with both. */
static inline uint64_t gpb__hash64(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  key *= 0xc4ceb9fe1a85ec53ull;
  key ^= key >> 33;
  return key;
}

/* ------------------------------------------------------------ arithmetic */

/* The least k with 2^k >= n (0 for n <= 1): the order of the block a
 * request of n units needs. */
static inline uint32_t gpb__ceil_log2(uint64_t n) {
  return n <= 1 ? 0 : 64u - (uint32_t)__builtin_clzll(n - 1);
}

/* Bytes to whole units of 2^shift bytes, rounding up; 0 when bytes is
 * more than `limit` (the pool's managed bytes: such a request cannot be
 * placed, and the sum could overflow). */
static inline uint64_t gpb__units(uint64_t bytes, uint32_t shift,
                                  uint64_t limit) {
  return bytes > limit ? 0 : (bytes + (1ull << shift) - 1) >> shift;
}

/* The slot of `key` in a direct-mapped cache of 2^bits slots (0 < bits
 * < 64), one that may drop entries: Fibonacci hashing, one multiply whose
 * top bits depend on every bit of the key. Where a miss costs less than
 * gpb__hash64's two rounds would. */
static inline uint64_t gpb__hash_slot(uint64_t key, unsigned bits) {
  return (key * 0x9e3779b97f4a7c15ull) >> (64 - bits);
}

/* A call site's frame list ("FRAME;FRAME;...", innermost first:
 * docs/TRACE_FORMAT.md) as it fits `room` bytes (room >= 4): all of it,
 * or the inner whole frames that fit, then ";...", or "..." alone when
 * not even the innermost does. Copies into out (no NUL) and returns the
 * length. One rule for trace lines, the live segment and the relay. */
static inline size_t gpb__frames_fit(const char *f, size_t n, size_t room,
                                     char *out) {
  if (n <= room) {
    memcpy(out, f, n);
    return n;
  }
  size_t cut = room - 4;
  while (cut && f[cut] != ';') cut--;
  memcpy(out, f, cut);
  memcpy(out + cut, cut ? ";..." : "...", cut ? 4 : 3);
  return cut + (cut ? 4 : 3);
}

#endif /* GPB_BASE_H */
