/* SPDX-License-Identifier: MIT */
/*
 * netproto.c: encoding, decoding and validation of relay frames (see
 * netproto.h for the layering and docs/PROTOCOL.md for the format).
 *
 * Integers are little-endian, fixed-size in headers and fixed records,
 * LEB128 varints inside event and keyframe records (most values are small
 * once offsets are counted in minimum blocks and times as deltas). Every
 * decoder works through a gpb_np_rd_t, which refuses to read past the end,
 * checks counts against the bytes left before looping, and insists that a
 * payload is consumed exactly: trailing bytes are an error too, so a frame
 * has one meaning only.
 */
#include "live/netproto.h"
#include "base/base.h" /* gpb__frames_fit, inline */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static int np_err(char *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int np_err(char *err, int code, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, GPB_NP_ERRLEN, fmt, ap);
    va_end(ap);
  }
  return code;
}

const char *gpb__np_type_name(int type) {
  static const char *const names[] = {"?",         "HELLO",      "INFO",
                                      "KEY_BEGIN", "KEY_BLOCKS", "KEY_END",
                                      "EVENTS",    "CLOSED",     "BYE",
                                      "POOLS",     "SITES"};
  return type > 0 && type <= GPB_NP_TYPE_MAX ? names[type] : "unknown";
}

/* ---------------------------------------------------------------- buffers */

void gpb__np_buf_free(gpb_np_buf_t *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

int gpb__np_buf_reserve(gpb_np_buf_t *b, size_t extra) {
  if (b->oom) return GPB_EHOSTMEM;
  if (extra <= b->cap - b->len) return 0;
  size_t want = b->cap ? b->cap : 256;
  while (want - b->len < extra) {
    if (want > SIZE_MAX / 2) return b->oom = 1, GPB_EHOSTMEM;
    want *= 2;
  }
  uint8_t *p = realloc(b->p, want);
  if (!p) return b->oom = 1, GPB_EHOSTMEM;
  b->p = p;
  b->cap = want;
  return 0;
}

void gpb__np_put(gpb_np_buf_t *b, const void *p, size_t n) {
  if (n == 0 || gpb__np_buf_reserve(b, n)) return;
  memcpy(b->p + b->len, p, n);
  b->len += n;
}

void gpb__np_put_u8(gpb_np_buf_t *b, uint8_t v) { gpb__np_put(b, &v, 1); }

void gpb__np_put_u16(gpb_np_buf_t *b, uint16_t v) {
  uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
  gpb__np_put(b, x, 2);
}

void gpb__np_put_u32(gpb_np_buf_t *b, uint32_t v) {
  uint8_t x[4];
  for (int i = 0; i < 4; i++) x[i] = (uint8_t)(v >> (8 * i));
  gpb__np_put(b, x, 4);
}

void gpb__np_put_u64(gpb_np_buf_t *b, uint64_t v) {
  uint8_t x[8];
  for (int i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (8 * i));
  gpb__np_put(b, x, 8);
}

void gpb__np_put_var(gpb_np_buf_t *b, uint64_t v) {
  uint8_t x[10];
  size_t n = 0;
  while (v >= 0x80) {
    x[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  x[n++] = (uint8_t)v;
  gpb__np_put(b, x, n);
}

/* ---------------------------------------------------------------- readers */

static const uint8_t *np_take(gpb_np_rd_t *r, size_t n) {
  if (r->bad || n > r->len - r->off) {
    r->bad = 1;
    return NULL;
  }
  const uint8_t *p = r->p + r->off;
  r->off += n;
  return p;
}

uint8_t gpb__np_get_u8(gpb_np_rd_t *r) {
  const uint8_t *p = np_take(r, 1);
  return p ? p[0] : 0;
}

uint16_t gpb__np_get_u16(gpb_np_rd_t *r) {
  const uint8_t *p = np_take(r, 2);
  return p ? (uint16_t)(p[0] | p[1] << 8) : 0;
}

uint32_t gpb__np_get_u32(gpb_np_rd_t *r) {
  const uint8_t *p = np_take(r, 4);
  return p ? gpb__np_le32(p) : 0;
}

uint64_t gpb__np_get_u64(gpb_np_rd_t *r) {
  const uint8_t *p = np_take(r, 8);
  if (!p) return 0;
  return (uint64_t)gpb__np_le32(p) | (uint64_t)gpb__np_le32(p + 4) << 32;
}

/* At most 10 bytes, and the tenth may only hold the top bit: anything
 * longer or larger does not fit 64 bits and is refused, not wrapped. */
uint64_t gpb__np_get_var(gpb_np_rd_t *r) {
  uint64_t v = 0;
  for (int i = 0; i < 10; i++) {
    const uint8_t *p = np_take(r, 1);
    if (!p) return 0;
    if (i == 9 && *p > 1) break;
    v |= (uint64_t)(*p & 0x7f) << (7 * i);
    if (!(*p & 0x80)) return v;
  }
  r->bad = 1;
  return 0;
}

/* ----------------------------------------------------------------- frames */

int gpb__np_hdr_parse(const uint8_t *p, gpb_np_hdr_t *h, char *err) {
  uint32_t magic = gpb__np_le32(p);
  if (magic != GPB_NP_MAGIC)
    return np_err(err, GPB_EFORMAT,
                  "bad magic 0x%08x: not a gpubuddy relay stream", magic);
  h->version = p[4];
  h->type = p[5];
  h->flags = (uint16_t)(p[6] | p[7] << 8);
  h->len = gpb__np_le32(p + 8);
  h->raw_len = gpb__np_le32(p + 12);
  if (h->version != GPB_NP_VERSION)
    return np_err(err, GPB_EVERSION, "protocol version %u, this side speaks %u",
                  h->version, GPB_NP_VERSION);
  if (h->type == 0 || h->type > GPB_NP_TYPE_MAX)
    return np_err(err, GPB_EFORMAT, "unknown frame type %u", h->type);
  if (h->flags & ~GPB_NP_FLAG_ZLIB)
    return np_err(err, GPB_EFORMAT, "%s frame: unknown flags 0x%04x",
                  gpb__np_type_name(h->type), h->flags);
  if (h->len > GPB_NP_MAX_WIRE || h->raw_len > GPB_NP_MAX_RAW)
    return np_err(err, GPB_EFORMAT,
                  "%s frame: length %u (raw %u) exceeds the limit of %u",
                  gpb__np_type_name(h->type), h->len, h->raw_len,
                  GPB_NP_MAX_RAW);
  if (!(h->flags & GPB_NP_FLAG_ZLIB) && h->len != h->raw_len)
    return np_err(err, GPB_EFORMAT,
                  "%s frame: uncompressed but lengths differ (%u, %u)",
                  gpb__np_type_name(h->type), h->len, h->raw_len);
  if ((h->flags & GPB_NP_FLAG_ZLIB) && (h->len == 0 || h->raw_len == 0))
    return np_err(err, GPB_EFORMAT, "%s frame: empty compressed payload",
                  gpb__np_type_name(h->type));
  return 0;
}

int gpb__np_payload(const gpb_np_hdr_t *h, const uint8_t *wire,
                    uint8_t *scratch, const uint8_t **raw, char *err) {
  if (!(h->flags & GPB_NP_FLAG_ZLIB)) {
    *raw = wire;
    return 0;
  }
  uLongf out = h->raw_len;
  int z = uncompress(scratch, &out, wire, h->len);
  if (z != Z_OK || out != h->raw_len)
    return np_err(err, GPB_EFORMAT,
                  "%s frame: zlib payload does not inflate to %u bytes (%s)",
                  gpb__np_type_name(h->type), h->raw_len,
                  z == Z_OK ? "length differs" : zError(z));
  *raw = scratch;
  return 0;
}

static void np_put_hdr(uint8_t *p, int type, uint16_t flags, uint32_t len,
                       uint32_t raw_len) {
  uint32_t v[4] = {GPB_NP_MAGIC, 0, len, raw_len};
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) p[4 * i + j] = (uint8_t)(v[i] >> (8 * j));
  p[4] = GPB_NP_VERSION;
  p[5] = (uint8_t)type;
  p[6] = (uint8_t)flags;
  p[7] = (uint8_t)(flags >> 8);
}

int gpb__np_frame(gpb_np_buf_t *out, int type, const uint8_t *raw, size_t n,
                  int zlevel) {
  if (n > GPB_NP_MAX_RAW || type <= 0 || type > GPB_NP_TYPE_MAX)
    return GPB_EINVAL;
  size_t room = n;
  int try_z = zlevel > 0 && n >= GPB_NP_COMPRESS_MIN;
  if (try_z && compressBound(n) > room) room = compressBound(n);
  if (gpb__np_buf_reserve(out, GPB_NP_HDR + room)) return GPB_EHOSTMEM;
  uint8_t *h = out->p + out->len;
  if (try_z) {
    uLongf zl = room;
    if (compress2(h + GPB_NP_HDR, &zl, raw, n, zlevel > 9 ? 9 : zlevel) ==
            Z_OK &&
        zl < n) {
      np_put_hdr(h, type, GPB_NP_FLAG_ZLIB, (uint32_t)zl, (uint32_t)n);
      out->len += GPB_NP_HDR + zl;
      return 0;
    }
  }
  np_put_hdr(h, type, 0, (uint32_t)n, (uint32_t)n);
  if (n) memcpy(h + GPB_NP_HDR, raw, n);
  out->len += GPB_NP_HDR + n;
  return 0;
}

/* Every decoder ends here: the reader must have stayed in bounds and used
 * the payload up exactly. */
static int np_done(const gpb_np_rd_t *r, int type, char *err) {
  if (r->bad)
    return np_err(err, GPB_EFORMAT, "%s payload: truncated or bad field",
                  gpb__np_type_name(type));
  if (r->off != r->len)
    return np_err(err, GPB_EFORMAT, "%s payload: %zu trailing bytes",
                  gpb__np_type_name(type), r->len - r->off);
  return 0;
}

/* --------------------------------------------------------------- payloads */

void gpb__np_hello_put(gpb_np_buf_t *b, uint32_t flags, const char *token,
                       const char *pool) {
  size_t tl = token ? strlen(token) : 0;
  if (tl > GPB_NP_TOKEN_MAX) tl = GPB_NP_TOKEN_MAX; /* caller checks */
  size_t pl = pool ? strnlen(pool, GPB_NAME_MAX - 1) : 0;
  flags = pl ? flags | GPB_NP_HELLO_POOL : flags & ~GPB_NP_HELLO_POOL;
  gpb__np_put_u32(b, GPB_NP_VERSION);
  gpb__np_put_u32(b, flags);
  gpb__np_put_u16(b, (uint16_t)tl);
  gpb__np_put(b, token, tl);
  if (pl) {
    gpb__np_put_u16(b, (uint16_t)pl);
    gpb__np_put(b, pool, pl);
  }
}

/* A pool name as the wire may carry it: what gpb__shm_check_name takes. */
static int np_name_ok(const uint8_t *p, size_t n) {
  if (n == 0 || n >= GPB_NAME_MAX || p[0] == '.') return 0;
  for (size_t i = 0; i < n; i++) {
    uint8_t c = p[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
      return 0;
  }
  return 1;
}

void gpb__np_pools_put(gpb_np_buf_t *b, const char *const *names, size_t n) {
  if (n > GPB_NP_POOLS_MAX) n = GPB_NP_POOLS_MAX;
  gpb__np_put_u32(b, (uint32_t)n);
  for (size_t i = 0; i < n; i++) {
    size_t l = strnlen(names[i], GPB_NAME_MAX - 1);
    gpb__np_put_u16(b, (uint16_t)l);
    gpb__np_put(b, names[i], l);
  }
}

int gpb__np_pools_get(const uint8_t *raw, size_t n,
                      void (*fn)(const char *name, void *user), void *user,
                      char *err) {
  /* Two passes: a frame that turns out bad half way calls fn for none. */
  for (int pass = 0; pass < 2; pass++) {
    gpb_np_rd_t r = {raw, n, 0, 0};
    uint32_t count = gpb__np_get_u32(&r);
    if (count > GPB_NP_POOLS_MAX)
      return np_err(err, GPB_EFORMAT, "POOLS: %u names (max %d)", count,
                    GPB_NP_POOLS_MAX);
    for (uint32_t i = 0; i < count && !r.bad; i++) {
      uint16_t l = gpb__np_get_u16(&r);
      const uint8_t *p = np_take(&r, l);
      if (!p) break;
      if (!np_name_ok(p, l))
        return np_err(err, GPB_EFORMAT, "POOLS: name %u is not a pool name", i);
      if (pass == 1) {
        char name[GPB_NAME_MAX];
        memcpy(name, p, l);
        name[l] = 0;
        fn(name, user);
      }
    }
    int rc = np_done(&r, GPB_NP_POOLS, err);
    if (rc) return rc;
  }
  return 0;
}

int gpb__np_hello_get(const uint8_t *raw, size_t n, uint32_t *version,
                      uint32_t *flags, char *token, size_t *toklen, char *pool,
                      char *err) {
  gpb_np_rd_t r = {raw, n, 0, 0};
  *version = gpb__np_get_u32(&r);
  *flags = gpb__np_get_u32(&r);
  uint16_t tl = gpb__np_get_u16(&r);
  if (tl > GPB_NP_TOKEN_MAX)
    return np_err(err, GPB_EFORMAT, "HELLO: token of %u bytes (max %d)", tl,
                  GPB_NP_TOKEN_MAX);
  const uint8_t *t = np_take(&r, tl);
  const uint8_t *pn = NULL;
  uint16_t pl = 0;
  if (*flags & GPB_NP_HELLO_POOL) {
    pl = gpb__np_get_u16(&r);
    pn = np_take(&r, pl);
  }
  int rc = np_done(&r, GPB_NP_HELLO, err);
  if (rc) return rc;
  if (memchr(t ? (const void *)t : "", 0, tl))
    return np_err(err, GPB_EFORMAT, "HELLO: token holds a NUL byte");
  if ((*flags & GPB_NP_HELLO_POOL) && !np_name_ok(pn, pl))
    return np_err(err, GPB_EFORMAT, "HELLO: a pool name of %u bytes that is "
                  "not 1 to %d of A-Z a-z 0-9 . _ -", pl, GPB_NAME_MAX - 1);
  pool[0] = 0;
  if (pl) {
    memcpy(pool, pn, pl);
    pool[pl] = 0;
  }
  if (tl) memcpy(token, t, tl);
  token[tl] = 0;
  *toklen = tl;
  return 0;
}

void gpb__np_info_put(gpb_np_buf_t *b, const gpb_pool_info_t *in) {
  gpb__np_put_u64(b, in->pool_size);
  gpb__np_put_u64(b, in->managed_size);
  gpb__np_put_u64(b, in->min_block);
  gpb__np_put_u32(b, in->num_orders);
  gpb__np_put_u32(b, in->num_roots);
  gpb__np_put_u32(b, (uint32_t)in->backend);
  gpb__np_put_u32(b, (uint32_t)in->policy);
  gpb__np_put_u32(b, (uint32_t)in->device);
  gpb__np_put_u32(b, 0);
  gpb__np_put_u64(b, (uint64_t)(uintptr_t)in->base);
  char name[GPB_NAME_MAX] = {0};
  snprintf(name, sizeof name, "%s", in->name);
  gpb__np_put(b, name, sizeof name);
}

/* A reader builds a model of 2^30 minimum blocks at most (a few hundred
 * MB of metadata): a relay cannot make a client reserve unbounded memory
 * by announcing a huge pool. */
#define NP_MAX_UNITS (1ull << 30)

int gpb__np_info_get(const uint8_t *raw, size_t n, gpb_pool_info_t *in,
                     char *err) {
  gpb_np_rd_t r = {raw, n, 0, 0};
  memset(in, 0, sizeof *in);
  in->pool_size = gpb__np_get_u64(&r);
  in->managed_size = gpb__np_get_u64(&r);
  in->min_block = gpb__np_get_u64(&r);
  in->num_orders = gpb__np_get_u32(&r);
  in->num_roots = gpb__np_get_u32(&r);
  uint32_t backend = gpb__np_get_u32(&r);
  uint32_t policy = gpb__np_get_u32(&r);
  in->device = (int)gpb__np_get_u32(&r);
  (void)gpb__np_get_u32(&r);
  in->base = (void *)(uintptr_t)gpb__np_get_u64(&r);
  const uint8_t *name = np_take(&r, GPB_NAME_MAX);
  int rc = np_done(&r, GPB_NP_INFO, err);
  if (rc) return rc;
  uint64_t mb = in->min_block;
  if (mb < 16 || (mb & (mb - 1)) || mb > (1ull << 40))
    return np_err(err, GPB_EFORMAT, "INFO: min_block %llu is not a power of "
                  "two in [16, 2^40]", (unsigned long long)mb);
  if (in->managed_size == 0 || in->managed_size % mb ||
      in->managed_size > in->pool_size || in->managed_size / mb > NP_MAX_UNITS)
    return np_err(err, GPB_EFORMAT,
                  "INFO: managed size %llu does not fit pool %llu in blocks "
                  "of %llu (at most 2^30 blocks)",
                  (unsigned long long)in->managed_size,
                  (unsigned long long)in->pool_size, (unsigned long long)mb);
  if (in->num_orders == 0 || in->num_orders > GPB_MAX_ORDERS ||
      in->num_roots == 0 || backend > GPB_BACKEND_VIRTUAL || policy > 255)
    return np_err(err, GPB_EFORMAT,
                  "INFO: %u orders, %u roots, backend %u, policy %u",
                  in->num_orders, in->num_roots, backend, policy);
  if (!memchr(name, 0, GPB_NAME_MAX))
    return np_err(err, GPB_EFORMAT, "INFO: pool name is not terminated");
  in->backend = (gpb_backend_t)backend;
  in->policy = (gpb_policy_t)policy;
  memcpy(in->name, name, GPB_NAME_MAX);
  return 0;
}

void gpb__np_key_begin_put(gpb_np_buf_t *b, uint64_t seq, uint64_t nblocks) {
  gpb__np_put_u64(b, seq);
  gpb__np_put_u64(b, nblocks);
}

int gpb__np_key_begin_get(const uint8_t *raw, size_t n, uint64_t *seq,
                          uint64_t *nblocks, char *err) {
  gpb_np_rd_t r = {raw, n, 0, 0};
  *seq = gpb__np_get_u64(&r);
  *nblocks = gpb__np_get_u64(&r);
  return np_done(&r, GPB_NP_KEY_BEGIN, err);
}

/* FIRST_SITE: FIRST with a call site; sent only for a site, and only to
 * readers that take sites (the relay gives the others blocks without). */
enum { NP_BLK_FREE = 0, NP_BLK_CONT = 1, NP_BLK_FIRST = 2, NP_BLK_FIRST_SITE = 3 };

void gpb__np_block_put(gpb_np_buf_t *b, const gpb_block_info_t *bl) {
  gpb__np_put_u8(b, (uint8_t)bl->order);
  if (!bl->used) {
    gpb__np_put_u8(b, NP_BLK_FREE);
  } else if (bl->alloc_offset != bl->offset) {
    gpb__np_put_u8(b, NP_BLK_CONT);
  } else {
    gpb__np_put_u8(b, bl->site ? NP_BLK_FIRST_SITE : NP_BLK_FIRST);
    gpb__np_put_var(b, bl->tag);
    gpb__np_put_var(b, bl->alloc_size);
    gpb__np_put_var(b, bl->requested);
    gpb__np_put_var(b, bl->time_ns);
    if (bl->site) gpb__np_put_var(b, bl->site);
  }
}

void gpb__np_keydec_init(gpb_np_keydec_t *d, const gpb_pool_info_t *info) {
  memset(d, 0, sizeof *d);
  d->min_shift = (uint32_t)__builtin_ctzll(info->min_block);
  d->norders = info->num_orders;
  d->managed = info->managed_size;
}

int gpb__np_key_blocks_get(gpb_np_keydec_t *d, const uint8_t *raw, size_t n,
                           gpb_block_info_t *out, size_t max, size_t *nout,
                           char *err) {
  gpb_np_rd_t r = {raw, n, 0, 0};
  uint32_t count = gpb__np_get_u32(&r);
  *nout = 0;
  if (r.bad || count > max || (uint64_t)count * 2 > n - r.off)
    return np_err(err, GPB_EFORMAT,
                  "KEY_BLOCKS: %u blocks do not fit %zu bytes (max %zu)",
                  count, n, max);
  for (uint32_t x = 0; x < count; x++) {
    gpb_block_info_t *bl = &out[x];
    memset(bl, 0, sizeof *bl);
    uint32_t order = gpb__np_get_u8(&r);
    uint8_t kind = gpb__np_get_u8(&r);
    if (r.bad) break;
    if (order >= d->norders || order + d->min_shift >= 63)
      return np_err(err, GPB_EFORMAT, "KEY_BLOCKS: block of order %u (pool "
                    "has %u orders)", order, d->norders);
    uint64_t size = (1ull << order) << d->min_shift;
    if (size > d->managed - d->next_off)
      return np_err(err, GPB_EFORMAT,
                    "KEY_BLOCKS: block at %llu of %llu bytes runs past the "
                    "pool's %llu bytes",
                    (unsigned long long)d->next_off, (unsigned long long)size,
                    (unsigned long long)d->managed);
    bl->offset = d->next_off;
    bl->size = size;
    bl->order = order;
    switch (kind) {
    case NP_BLK_FREE:
      if (d->in_alloc)
        return np_err(err, GPB_EFORMAT, "KEY_BLOCKS: free block at %llu "
                      "inside an allocation", (unsigned long long)bl->offset);
      break;
    case NP_BLK_FIRST:
    case NP_BLK_FIRST_SITE: {
      uint64_t tag = gpb__np_get_var(&r);
      uint64_t asz = gpb__np_get_var(&r);
      uint64_t req = gpb__np_get_var(&r);
      uint64_t t = gpb__np_get_var(&r);
      uint64_t site = kind == NP_BLK_FIRST_SITE ? gpb__np_get_var(&r) : 0;
      if (r.bad) break;
      if (site > GPB_MAX_SITES)
        return np_err(err, GPB_EFORMAT, "KEY_BLOCKS: allocation at %llu has "
                      "call site %llu (max %u)", (unsigned long long)bl->offset,
                      (unsigned long long)site, GPB_MAX_SITES);
      if (d->in_alloc || tag >= GPB_MAX_TAGS || asz < size ||
          asz > d->managed - bl->offset || (asz & ((1ull << d->min_shift) - 1)) ||
          req > asz)
        return np_err(err, GPB_EFORMAT,
                      "KEY_BLOCKS: bad allocation at %llu (%llu bytes, "
                      "requested %llu, tag %llu)",
                      (unsigned long long)bl->offset, (unsigned long long)asz,
                      (unsigned long long)req, (unsigned long long)tag);
      bl->used = 1;
      bl->alloc_offset = bl->offset;
      bl->alloc_size = asz;
      bl->requested = req;
      bl->time_ns = t;
      bl->tag = (uint32_t)tag;
      bl->site = (uint32_t)site;
      d->alloc = *bl;
      d->in_alloc = 1;
      break;
    }
    case NP_BLK_CONT:
      if (!d->in_alloc)
        return np_err(err, GPB_EFORMAT, "KEY_BLOCKS: continuation block at "
                      "%llu outside an allocation",
                      (unsigned long long)bl->offset);
      bl->used = 1;
      bl->alloc_offset = d->alloc.alloc_offset;
      bl->alloc_size = d->alloc.alloc_size;
      bl->requested = d->alloc.requested;
      bl->time_ns = d->alloc.time_ns;
      bl->tag = d->alloc.tag;
      bl->site = d->alloc.site;
      break;
    default:
      return np_err(err, GPB_EFORMAT, "KEY_BLOCKS: unknown block kind %u",
                    kind);
    }
    if (d->in_alloc) {
      uint64_t end = d->alloc.alloc_offset + d->alloc.alloc_size;
      if (bl->offset + size > end)
        return np_err(err, GPB_EFORMAT, "KEY_BLOCKS: block at %llu runs past "
                      "its allocation", (unsigned long long)bl->offset);
      if (bl->offset + size == end) d->in_alloc = 0;
    }
    d->next_off += size;
    *nout = x + 1;
  }
  return np_done(&r, GPB_NP_KEY_BLOCKS, err);
}

void gpb__np_key_end_put(gpb_np_buf_t *b, uint64_t seq, const gpb_stats_t *s) {
  gpb__np_put_u64(b, seq);
  gpb__np_put_u64(b, s->allocs);
  gpb__np_put_u64(b, s->frees);
  gpb__np_put_u64(b, s->failures);
  gpb__np_put_u64(b, s->splits);
  gpb__np_put_u64(b, s->merges);
  gpb__np_put_u64(b, s->requested_peak);
  gpb__np_put_u64(b, s->block_peak);
  gpb__np_put_u64(b, s->free_peak);
}

int gpb__np_key_end_get(const uint8_t *raw, size_t n, uint64_t *seq,
                        gpb_stats_t *s, char *err) {
  gpb_np_rd_t r = {raw, n, 0, 0};
  memset(s, 0, sizeof *s);
  *seq = gpb__np_get_u64(&r);
  s->allocs = gpb__np_get_u64(&r);
  s->frees = gpb__np_get_u64(&r);
  s->failures = gpb__np_get_u64(&r);
  s->splits = gpb__np_get_u64(&r);
  s->merges = gpb__np_get_u64(&r);
  s->requested_peak = gpb__np_get_u64(&r);
  s->block_peak = gpb__np_get_u64(&r);
  s->free_peak = gpb__np_get_u64(&r);
  return np_done(&r, GPB_NP_KEY_END, err);
}

/* ----------------------------------------------------------------- events */

/* Event record fields that are sent only when they differ from the
 * default (offset in minimum blocks; size of the order's block; 0). */
enum {
  NP_EV_OFFRAW = 0x01,
  NP_EV_SIZE = 0x02,
  NP_EV_REQ = 0x04,
  NP_EV_STREAM = 0x08,
  NP_EV_TAG = 0x10,
  NP_EV_SITE = 0x20, /* only to readers that take sites */
  NP_EV_ALL = 0x3f
};
#define NP_EV_MIN_BYTES 5 /* type, order, mask, time, offset */

static uint64_t np_default_size(uint32_t order, uint32_t min_shift) {
  return order + min_shift < 64 ? (1ull << order) << min_shift : 0;
}

void gpb__np_evenc_init(gpb_np_evenc_t *e, uint32_t min_shift) {
  memset(e, 0, sizeof *e);
  e->min_shift = min_shift;
}

void gpb__np_evenc_free(gpb_np_evenc_t *e) { gpb__np_buf_free(&e->recs); }

void gpb__np_evenc_add(gpb_np_evenc_t *e, const gpb_event_t *ev) {
  if (e->count == 0) {
    e->first_seq = ev->seq;
    e->base_time = e->prev_time = ev->time_ns;
    e->recs.len = 0;
  }
  uint64_t mask1 = (1ull << e->min_shift) - 1;
  uint8_t mask = 0;
  if (ev->offset & mask1) mask |= NP_EV_OFFRAW;
  if (ev->size != np_default_size(ev->order, e->min_shift)) mask |= NP_EV_SIZE;
  if (ev->requested) mask |= NP_EV_REQ;
  if (ev->stream) mask |= NP_EV_STREAM;
  if (ev->tag) mask |= NP_EV_TAG;
  if (ev->site) mask |= NP_EV_SITE;
  gpb_np_buf_t *b = &e->recs;
  gpb__np_put_u8(b, ev->type);
  gpb__np_put_u8(b, ev->order);
  gpb__np_put_u8(b, mask);
  int64_t dt = (int64_t)(ev->time_ns - e->prev_time);
  gpb__np_put_var(b, ((uint64_t)dt << 1) ^ (uint64_t)(dt >> 63));
  e->prev_time = ev->time_ns;
  gpb__np_put_var(b, (mask & NP_EV_OFFRAW) ? ev->offset
                                           : ev->offset >> e->min_shift);
  if (mask & NP_EV_SIZE) gpb__np_put_var(b, ev->size);
  if (mask & NP_EV_REQ) gpb__np_put_var(b, ev->requested);
  if (mask & NP_EV_STREAM) gpb__np_put_var(b, ev->stream);
  if (mask & NP_EV_TAG) gpb__np_put_var(b, ev->tag);
  if (mask & NP_EV_SITE) gpb__np_put_var(b, ev->site);
  e->count++;
}

int gpb__np_evenc_finish(gpb_np_evenc_t *e, gpb_np_buf_t *out) {
  out->len = 0;
  gpb__np_put_u64(out, e->first_seq);
  gpb__np_put_u64(out, e->base_time);
  gpb__np_put_u32(out, e->count);
  gpb__np_put(out, e->recs.p, e->recs.len);
  int oom = out->oom || e->recs.oom;
  e->count = 0;
  e->recs.len = 0;
  e->recs.oom = 0;
  return oom ? GPB_EHOSTMEM : 0;
}

int gpb__np_events_get(const uint8_t *raw, size_t n, uint32_t min_shift,
                       gpb_event_t *out, size_t max, size_t *nout, char *err) {
  gpb_np_rd_t r = {raw, n, 0, 0};
  uint64_t seq = gpb__np_get_u64(&r);
  uint64_t t = gpb__np_get_u64(&r);
  uint32_t count = gpb__np_get_u32(&r);
  *nout = 0;
  if (r.bad || count == 0 || count > max || count > GPB_NP_BATCH_MAX ||
      (uint64_t)count * NP_EV_MIN_BYTES > n - r.off)
    return np_err(err, GPB_EFORMAT,
                  "EVENTS: %u events do not fit %zu bytes (1..%u per batch)",
                  count, n, GPB_NP_BATCH_MAX);
  if (seq == 0 || seq > UINT64_MAX - count)
    return np_err(err, GPB_EFORMAT, "EVENTS: first sequence number %llu",
                  (unsigned long long)seq);
  if (min_shift >= 64) return np_err(err, GPB_EINVAL, "min_shift %u", min_shift);
  for (uint32_t x = 0; x < count && !r.bad; x++) {
    gpb_event_t *ev = &out[x];
    memset(ev, 0, sizeof *ev);
    ev->seq = seq + x;
    ev->type = gpb__np_get_u8(&r);
    ev->order = gpb__np_get_u8(&r);
    uint8_t mask = gpb__np_get_u8(&r);
    uint64_t zz = gpb__np_get_var(&r);
    t += (zz >> 1) ^ (0 - (zz & 1));
    ev->time_ns = t;
    uint64_t off = gpb__np_get_var(&r);
    if (r.bad) break;
    if (ev->type < GPB_EV_ALLOC || ev->type > GPB_EV_FAIL || (mask & ~NP_EV_ALL))
      return np_err(err, GPB_EFORMAT, "EVENTS: event %llu has type %u, "
                    "field mask 0x%02x", (unsigned long long)ev->seq, ev->type,
                    mask);
    if (!(mask & NP_EV_OFFRAW)) {
      if (off > (UINT64_MAX >> min_shift))
        return np_err(err, GPB_EFORMAT, "EVENTS: event %llu: offset overflows",
                      (unsigned long long)ev->seq);
      off <<= min_shift;
    }
    ev->offset = off;
    ev->size = (mask & NP_EV_SIZE) ? gpb__np_get_var(&r)
                                   : np_default_size(ev->order, min_shift);
    if (mask & NP_EV_REQ) ev->requested = gpb__np_get_var(&r);
    if (mask & NP_EV_STREAM) ev->stream = gpb__np_get_var(&r);
    if (mask & NP_EV_TAG) {
      uint64_t tag = gpb__np_get_var(&r);
      if (tag > UINT32_MAX)
        return np_err(err, GPB_EFORMAT, "EVENTS: event %llu: tag %llu",
                      (unsigned long long)ev->seq, (unsigned long long)tag);
      ev->tag = (uint32_t)tag;
    }
    if (mask & NP_EV_SITE) {
      uint64_t site = gpb__np_get_var(&r);
      if (site == 0 || site > GPB_MAX_SITES)
        return np_err(err, GPB_EFORMAT, "EVENTS: event %llu: call site %llu "
                      "(1 to %u)", (unsigned long long)ev->seq,
                      (unsigned long long)site, GPB_MAX_SITES);
      ev->site = (uint16_t)site;
    }
    if (!r.bad) *nout = x + 1;
  }
  return np_done(&r, GPB_NP_EVENTS, err);
}

/* ------------------------------------------------------------------ sites */

_Static_assert(GPB_MAX_SITES <= 0xffff, "site ids are u16 in SITES");

void gpb__np_site_put(gpb_np_buf_t *b, uint32_t id, const char *text) {
  char cut[GPB_NP_SITE_TEXT_MAX];
  size_t n = gpb__frames_fit(text, strlen(text), sizeof cut, cut);
  gpb__np_put_u16(b, (uint16_t)id);
  gpb__np_put_u16(b, (uint16_t)n);
  gpb__np_put(b, cut, n);
}

int gpb__np_sites_get(const uint8_t *raw, size_t n,
                      int (*fn)(uint32_t id, const char *text, size_t len,
                                void *user),
                      void *user, char *err) {
  if (n == 0) return np_err(err, GPB_EFORMAT, "SITES: no entries");
  /* Two passes: a frame that turns out bad half way defines none. */
  for (int pass = 0; pass < 2; pass++) {
    gpb_np_rd_t r = {raw, n, 0, 0};
    uint32_t last = 0;
    while (r.off < r.len && !r.bad) {
      uint16_t id = gpb__np_get_u16(&r);
      uint16_t len = gpb__np_get_u16(&r);
      const uint8_t *t = np_take(&r, len);
      if (!t) break;
      /* u16 holds no id above GPB_MAX_SITES. */
      if (id <= last || len == 0 || len > GPB_NP_SITE_TEXT_MAX)
        return np_err(err, GPB_EFORMAT, "SITES: call site %u of %u bytes "
                      "after site %u (ids grow; 1 to %u bytes)", id, len,
                      last, GPB_NP_SITE_TEXT_MAX);
      if (memchr(t, 0, len))
        return np_err(err, GPB_EFORMAT, "SITES: call site %u holds a NUL "
                      "byte", id);
      last = id;
      int rc = pass ? fn(id, (const char *)t, len, user) : 0;
      if (rc) return rc;
    }
    int rc = np_done(&r, GPB_NP_SITES, err);
    if (rc) return rc;
  }
  return 0;
}

/* -------------------------------------------------------------------- bye */

void gpb__np_bye_put(gpb_np_buf_t *b, int32_t code, const char *msg) {
  size_t ml = msg ? strlen(msg) : 0;
  if (ml > GPB_NP_MSG_MAX) ml = GPB_NP_MSG_MAX;
  gpb__np_put_u32(b, (uint32_t)code);
  gpb__np_put_u16(b, (uint16_t)ml);
  gpb__np_put(b, msg, ml);
}

int gpb__np_bye_get(const uint8_t *raw, size_t n, int32_t *code, char *msg,
                    char *err) {
  gpb_np_rd_t r = {raw, n, 0, 0};
  *code = (int32_t)gpb__np_get_u32(&r);
  uint16_t ml = gpb__np_get_u16(&r);
  if (ml > GPB_NP_MSG_MAX)
    return np_err(err, GPB_EFORMAT, "BYE: message of %u bytes", ml);
  const uint8_t *m = np_take(&r, ml);
  int rc = np_done(&r, GPB_NP_BYE, err);
  if (rc) return rc;
  /* The text ends up in error details and logs: no control characters. */
  for (uint16_t i = 0; i < ml; i++)
    msg[i] = (m[i] < 0x20 || m[i] == 0x7f) ? '?' : (char)m[i];
  msg[ml] = 0;
  return 0;
}

int gpb__np_token_eq(const char *a, const char *b) {
  /* Both are read as fixed-size, zero-padded fields; the lengths join the
   * difference so "ab" never equals "ab\0". */
  size_t la = a ? strnlen(a, GPB_NP_TOKEN_MAX + 1) : 0;
  size_t lb = b ? strnlen(b, GPB_NP_TOKEN_MAX + 1) : 0;
  volatile unsigned diff = (unsigned)(la ^ lb);
  for (size_t i = 0; i < GPB_NP_TOKEN_MAX; i++) {
    unsigned ca = i < la ? (unsigned char)a[i] : 0;
    unsigned cb = i < lb ? (unsigned char)b[i] : 0;
    diff |= ca ^ cb;
  }
  return diff == 0;
}
