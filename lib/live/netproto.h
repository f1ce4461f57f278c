/* SPDX-License-Identifier: MIT */
/*
 * netproto.h: the gpubuddy-relay wire protocol (docs/PROTOCOL.md).
 *
 * Every message is a frame: a fixed 16-byte little-endian header (magic,
 * version, type, flags, wire length, raw length) and a payload that may be
 * zlib-compressed. This file encodes and decodes frames and payloads and
 * validates everything it decodes; the relay (tools/gpubuddy-relay.c) and
 * the TCP reader (lib/live/remote.c) share it. It depends on the public header,
 * base.h's inline helpers and zlib only, so it is compiled both into the
 * library and into the relay, tests and fuzz target. Decoders never trust a length or a count:
 * each is checked against the bytes that are actually there, and errors
 * come back as GPB_EFORMAT / GPB_EVERSION with a message in `err`.
 */
#ifndef GPB_NETPROTO_H
#define GPB_NETPROTO_H

#include "gpubuddy.h"

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define GPB__NP_HIDDEN __attribute__((visibility("hidden")))
#else
#define GPB__NP_HIDDEN
#endif

#define GPB_NP_MAGIC 0x52425047u /* "GPBR" as bytes on the wire */
#define GPB_NP_VERSION 1
#define GPB_NP_HDR 16
#define GPB_NP_MAX_RAW (1u << 20) /* payload bytes after decompression */
#define GPB_NP_MAX_WIRE GPB_NP_MAX_RAW /* compressed only when smaller */
#define GPB_NP_FLAG_ZLIB 0x0001u
#define GPB_NP_TOKEN_MAX 256
#define GPB_NP_MSG_MAX 256
#define GPB_NP_DEFAULT_PORT 7461
#define GPB_NP_KEY_CHUNK (64u * 1024u) /* keyframe block bytes per frame */
#define GPB_NP_BATCH_MAX 8192u         /* events per EVENTS frame */
#define GPB_NP_COMPRESS_MIN 128u       /* smaller payloads go plain */
#define GPB_NP_ERRLEN 192
#define GPB_NP_SITE_TEXT_MAX 4096u /* bytes of one site's frames */

/* HELLO flags. A relay ignores flags it does not know, so a reader that
 * names a pool still works with a one-pool relay of an older version. */
#define GPB_NP_HELLO_ZLIB 0x1u
#define GPB_NP_HELLO_POOL 0x2u /* a pool name follows the token */
#define GPB_NP_HELLO_LIST 0x4u /* send POOLS, then BYE: no pool is served */
/* Takes call sites: SITES frames, and site fields in events and blocks.
 * A relay sends them only to readers that set it, so old readers and
 * old relays (which send none) keep working. */
#define GPB_NP_HELLO_SITES 0x8u
#define GPB_NP_POOLS_MAX 4096  /* names in one POOLS frame */

enum gpb_np_type {
  GPB_NP_HELLO = 1,     /* client -> relay: version, flags, token */
  GPB_NP_INFO = 2,      /* relay -> client: the pool's gpb_pool_info_t */
  GPB_NP_KEY_BEGIN = 3, /* keyframe: seq it includes, block count */
  GPB_NP_KEY_BLOCKS = 4,/* keyframe: a run of blocks in address order */
  GPB_NP_KEY_END = 5,   /* keyframe: seq again, counters */
  GPB_NP_EVENTS = 6,    /* a batch of consecutive events */
  GPB_NP_CLOSED = 7,    /* the pool is gone; the state sent is the last */
  GPB_NP_BYE = 8,       /* relay -> client: refusal or shutdown, with text */
  GPB_NP_POOLS = 9,     /* relay -> client: the names of the pools it serves */
  GPB_NP_SITES = 10,    /* relay -> client: call sites' frames (HELLO_SITES) */
  GPB_NP_TYPE_MAX = 10
};

typedef struct gpb_np_hdr {
  uint8_t version, type;
  uint16_t flags;
  uint32_t len;     /* payload bytes on the wire */
  uint32_t raw_len; /* payload bytes after decompression */
} gpb_np_hdr_t;

/* A growable output buffer; `oom` sticks once an append failed, so a run of
 * puts is checked once at the end. */
typedef struct gpb_np_buf {
  uint8_t *p;
  size_t len, cap;
  int oom;
} gpb_np_buf_t;

GPB__NP_HIDDEN void gpb__np_buf_free(gpb_np_buf_t *b);
GPB__NP_HIDDEN int gpb__np_buf_reserve(gpb_np_buf_t *b, size_t extra);
GPB__NP_HIDDEN void gpb__np_put(gpb_np_buf_t *b, const void *p, size_t n);
GPB__NP_HIDDEN void gpb__np_put_u8(gpb_np_buf_t *b, uint8_t v);
GPB__NP_HIDDEN void gpb__np_put_u16(gpb_np_buf_t *b, uint16_t v);
GPB__NP_HIDDEN void gpb__np_put_u32(gpb_np_buf_t *b, uint32_t v);
GPB__NP_HIDDEN void gpb__np_put_u64(gpb_np_buf_t *b, uint64_t v);
GPB__NP_HIDDEN void gpb__np_put_var(gpb_np_buf_t *b, uint64_t v);

/* A bounds-checked reader: reading past the end sets `bad` and yields 0. */
typedef struct gpb_np_rd {
  const uint8_t *p;
  size_t len, off;
  int bad;
} gpb_np_rd_t;

GPB__NP_HIDDEN uint8_t gpb__np_get_u8(gpb_np_rd_t *r);
GPB__NP_HIDDEN uint16_t gpb__np_get_u16(gpb_np_rd_t *r);
GPB__NP_HIDDEN uint32_t gpb__np_get_u32(gpb_np_rd_t *r);
GPB__NP_HIDDEN uint64_t gpb__np_get_u64(gpb_np_rd_t *r);
GPB__NP_HIDDEN uint64_t gpb__np_get_var(gpb_np_rd_t *r);

static inline uint32_t gpb__np_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

/* ----------------------------------------------------------------- frames */

/* Checks a header: magic, version, known type, known flags, bounded and
 * consistent lengths. 0, GPB_EFORMAT or GPB_EVERSION. */
GPB__NP_HIDDEN int gpb__np_hdr_parse(const uint8_t *p, gpb_np_hdr_t *h,
                                     char *err);
/* Gives the raw payload of a frame whose header parsed: `wire` itself, or
 * its decompression into `scratch` (GPB_NP_MAX_RAW bytes), which must come
 * out exactly h->raw_len long. */
GPB__NP_HIDDEN int gpb__np_payload(const gpb_np_hdr_t *h, const uint8_t *wire,
                                   uint8_t *scratch, const uint8_t **raw,
                                   char *err);
/* Appends one frame carrying `raw` (n <= GPB_NP_MAX_RAW). zlevel 1..9
 * compresses payloads of GPB_NP_COMPRESS_MIN bytes or more when that makes
 * them smaller; 0 never compresses. 0 or GPB_EHOSTMEM / GPB_EINVAL. */
GPB__NP_HIDDEN int gpb__np_frame(gpb_np_buf_t *out, int type,
                                 const uint8_t *raw, size_t n, int zlevel);

/* --------------------------------------------------------------- payloads */

/* pool: NULL, or the name to serve (sets GPB_NP_HELLO_POOL). */
GPB__NP_HIDDEN void gpb__np_hello_put(gpb_np_buf_t *b, uint32_t flags,
                                      const char *token, const char *pool);
/* token: GPB_NP_TOKEN_MAX + 1 bytes, NUL-terminated on return; pool:
 * GPB_NAME_MAX bytes, "" unless GPB_NP_HELLO_POOL named one (1 to
 * GPB_NAME_MAX-1 bytes, no NUL). */
GPB__NP_HIDDEN int gpb__np_hello_get(const uint8_t *raw, size_t n,
                                     uint32_t *version, uint32_t *flags,
                                     char *token, size_t *toklen, char *pool,
                                     char *err);

/* POOLS: u32 count, then count names (u16 length, 1 to GPB_NAME_MAX-1
 * bytes of A-Z a-z 0-9 . _ -). get calls fn for each name once the whole
 * payload checked out. */
GPB__NP_HIDDEN void gpb__np_pools_put(gpb_np_buf_t *b, const char *const *names,
                                      size_t n);
GPB__NP_HIDDEN int gpb__np_pools_get(const uint8_t *raw, size_t n,
                                     void (*fn)(const char *name, void *user),
                                     void *user, char *err);

GPB__NP_HIDDEN void gpb__np_info_put(gpb_np_buf_t *b,
                                     const gpb_pool_info_t *info);
/* Also checks that the geometry is one a model can be built for. */
GPB__NP_HIDDEN int gpb__np_info_get(const uint8_t *raw, size_t n,
                                    gpb_pool_info_t *info, char *err);

GPB__NP_HIDDEN void gpb__np_key_begin_put(gpb_np_buf_t *b, uint64_t seq,
                                          uint64_t nblocks);
GPB__NP_HIDDEN int gpb__np_key_begin_get(const uint8_t *raw, size_t n,
                                         uint64_t *seq, uint64_t *nblocks,
                                         char *err);

/* One keyframe block: offsets are implied by the running sum of sizes and
 * a used block that continues an allocation repeats nothing. */
GPB__NP_HIDDEN void gpb__np_block_put(gpb_np_buf_t *b,
                                      const gpb_block_info_t *bl);

/* Decoding state carried across the KEY_BLOCKS frames of one keyframe. */
typedef struct gpb_np_keydec {
  uint32_t min_shift, norders;
  uint64_t managed;  /* bytes */
  uint64_t next_off; /* bytes: where the next block starts */
  int in_alloc;
  gpb_block_info_t alloc; /* first block of the current allocation */
} gpb_np_keydec_t;

GPB__NP_HIDDEN void gpb__np_keydec_init(gpb_np_keydec_t *d,
                                        const gpb_pool_info_t *info);
/* Decodes a KEY_BLOCKS payload (u32 count, then records) into out[0..max).
 * The blocks must continue the map and stay inside the pool; the model
 * checks the rest when the keyframe is loaded. */
GPB__NP_HIDDEN int gpb__np_key_blocks_get(gpb_np_keydec_t *d,
                                          const uint8_t *raw, size_t n,
                                          gpb_block_info_t *out, size_t max,
                                          size_t *nout, char *err);

/* SITES: entries of u16 id (1..GPB_MAX_SITES, growing within a frame),
 * u16 length (1..GPB_NP_SITE_TEXT_MAX), text (no NUL), to the end of the
 * payload. put appends one, its text cut as gpb__frames_fit cuts; get
 * calls fn for each once the whole payload checked out, and stops at
 * the first nonzero fn returns (that code, err untouched). */
GPB__NP_HIDDEN void gpb__np_site_put(gpb_np_buf_t *b, uint32_t id,
                                     const char *text);
GPB__NP_HIDDEN int gpb__np_sites_get(const uint8_t *raw, size_t n,
                                     int (*fn)(uint32_t id, const char *text,
                                               size_t len, void *user),
                                     void *user, char *err);

/* The counters a keyframe carries (gpb_stats_t fields that events alone
 * cannot rebuild for a reader that joined late). */
GPB__NP_HIDDEN void gpb__np_key_end_put(gpb_np_buf_t *b, uint64_t seq,
                                        const gpb_stats_t *s);
GPB__NP_HIDDEN int gpb__np_key_end_get(const uint8_t *raw, size_t n,
                                       uint64_t *seq, gpb_stats_t *s,
                                       char *err);

/* Events are batched: the encoder keeps the records, finish() writes the
 * payload (first seq, base time, count, records). */
typedef struct gpb_np_evenc {
  gpb_np_buf_t recs;
  uint64_t first_seq, base_time, prev_time;
  uint32_t count, min_shift;
} gpb_np_evenc_t;

GPB__NP_HIDDEN void gpb__np_evenc_init(gpb_np_evenc_t *e, uint32_t min_shift);
GPB__NP_HIDDEN void gpb__np_evenc_free(gpb_np_evenc_t *e);
/* Appends one event; it must follow the previous one (seq + 1). */
GPB__NP_HIDDEN void gpb__np_evenc_add(gpb_np_evenc_t *e, const gpb_event_t *ev);
/* Writes the batch's payload into `out` (cleared first) and empties the
 * batch. 0 or GPB_EHOSTMEM. */
GPB__NP_HIDDEN int gpb__np_evenc_finish(gpb_np_evenc_t *e, gpb_np_buf_t *out);
/* Decodes an EVENTS payload into out[0..max). */
GPB__NP_HIDDEN int gpb__np_events_get(const uint8_t *raw, size_t n,
                                      uint32_t min_shift, gpb_event_t *out,
                                      size_t max, size_t *nout, char *err);

GPB__NP_HIDDEN void gpb__np_bye_put(gpb_np_buf_t *b, int32_t code,
                                    const char *msg);
/* msg: GPB_NP_MSG_MAX + 1 bytes; control characters are replaced. */
GPB__NP_HIDDEN int gpb__np_bye_get(const uint8_t *raw, size_t n, int32_t *code,
                                   char *msg, char *err);

/* Compares two tokens in time that depends only on GPB_NP_TOKEN_MAX, never
 * on where they differ. 1 when equal. */
GPB__NP_HIDDEN int gpb__np_token_eq(const char *a, const char *b);

GPB__NP_HIDDEN const char *gpb__np_type_name(int type);

/* ------------------------------------------------------------ TCP reader */

/* remote.c: runs bytes through a reader's frame handling as if a relay had
 * sent them, `chunk` bytes at a time (fuzzing). 0 or the error the reader
 * dropped the stream with. */
GPB__NP_HIDDEN int gpb__remote_feed(const uint8_t *data, size_t n,
                                    size_t chunk);

#endif /* GPB_NETPROTO_H */
