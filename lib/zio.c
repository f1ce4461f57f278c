/*
 * zio.c: the bytes under trace files. The reader takes plain text, any
 * gzip stream, or gpubuddy's blocked gzip; the writer makes plain text or
 * blocked gzip.
 *
 * Blocked gzip is a run of ordinary gzip members (RFC 1952), each holding
 * at most 64 KiB of text and giving its own length in a header extra
 * field, and an empty member last. gzip -dc, zcat and Python read it as
 * one stream. This reader takes each member whole and inflates it in one
 * call, which is what libdeflate needs: on this project's traces it
 * inflates about four times as fast as zlib's streaming inflate, and the
 * viewer's replay of a .gz trace is bound by inflate. The empty last
 * member tells a file cut at a member's edge from a whole one.
 *
 * Member layout (little-endian):
 *   1f 8b 08 04 | mtime 0 (4) | xfl 0 | os ff | xlen 8 (2)
 *   'G' 'B' | 4 (2) | member length in bytes, header to trailer (4)
 *   raw deflate data | CRC-32 of the text (4) | text length (4)
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#ifdef GPB_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#define ZB_HDR 20
#define ZB_TRL 8
#define ZB_TEXT_MAX 65536u
/* A member of at most 64 KiB of text deflates to far less than this
 * (stored blocks add 5 bytes per 64 KiB); a longer one is corrupt. */
#define ZB_MEMBER_MAX (2 * ZB_TEXT_MAX)
#define ZIN_CAP (4 * ZB_MEMBER_MAX) /* compressed bytes read at a time */
#define ZOUT_PLAIN_CAP (1u << 17)

enum { ZIN_PLAIN, ZIN_STREAM, ZIN_BLOCKED };

struct gpb__zin {
  int fd;
  int mode;
  int eof;       /* read() returned 0 */
  int done;      /* the clean end was seen; next returns 0 */
  int seen_last; /* blocked: the empty last member was read */
  int err;       /* a stream error held back behind the text before it */
  char msg[256];
  unsigned char *in; /* bytes as read from the file */
  size_t in_len, in_pos;
  uint64_t base; /* file offset of in[0], for messages */
  unsigned char *out; /* inflated text handed out by gpb__zin_next */
  z_stream zs;
  int zs_live;
#ifdef GPB_HAVE_LIBDEFLATE
  struct libdeflate_decompressor *ld;
#endif
};

struct gpb__zout {
  int fd;
  int compress;
  unsigned char *buf; /* text not yet written (compressed: one member's) */
  size_t len, cap;
  unsigned char *out; /* one member, compressed */
  size_t out_cap;
  z_stream zs;
  int zs_live;
#ifdef GPB_HAVE_LIBDEFLATE
  struct libdeflate_compressor *lc;
#endif
};

static uint32_t zb_get32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static void zb_put32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
  p[2] = (unsigned char)(v >> 16);
  p[3] = (unsigned char)(v >> 24);
}

/* Only the fields this writer sets are checked; mtime, xfl and os are
 * free, as RFC 1952 has them. */
static int zb_is_header(const unsigned char *h) {
  return h[0] == 0x1f && h[1] == 0x8b && h[2] == 8 && h[3] == 4 &&
         h[10] == 8 && h[11] == 0 && h[12] == 'G' && h[13] == 'B' &&
         h[14] == 4 && h[15] == 0;
}

static uint32_t zb_crc(const unsigned char *p, size_t n) {
#ifdef GPB_HAVE_LIBDEFLATE
  return libdeflate_crc32(0, p, n);
#else
  return (uint32_t)crc32(0L, p, (uInt)n);
#endif
}

/* ------------------------------------------------------------ reading */

/* Makes at least want bytes available at in[in_pos] unless the file ends
 * first. The number available, or <0 on a read error. */
static long zin_fill(gpb__zin_t *z, size_t want) {
  if (z->in_len - z->in_pos >= want || z->eof) return (long)(z->in_len - z->in_pos);
  if (z->in_pos) {
    memmove(z->in, z->in + z->in_pos, z->in_len - z->in_pos);
    z->base += z->in_pos;
    z->in_len -= z->in_pos;
    z->in_pos = 0;
  }
  while (z->in_len < want && !z->eof) {
    ssize_t n = read(z->fd, z->in + z->in_len, ZIN_CAP - z->in_len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return gpb__fail(GPB_EIO, "read error: %s", strerror(errno));
    }
    if (n == 0) z->eof = 1;
    z->in_len += (size_t)n;
  }
  return (long)(z->in_len - z->in_pos);
}

static int zin_corrupt(gpb__zin_t *z, const char *why) {
  return gpb__fail(GPB_EFORMAT,
                   "corrupt or truncated gzip stream (block at byte %llu: %s)",
                   (unsigned long long)(z->base + z->in_pos), why);
}

static int zin_next_blocked(gpb__zin_t *z, unsigned char **p, size_t *n) {
  for (;;) {
    long have = zin_fill(z, ZB_HDR);
    if (have < 0) return (int)have;
    if (have == 0) {
      if (!z->seen_last)
        return gpb__fail(GPB_EFORMAT,
                         "corrupt or truncated gzip stream (it ends at byte "
                         "%llu without its last block: cut short, or the "
                         "writer was not closed)",
                         (unsigned long long)(z->base + z->in_pos));
      z->done = 1;
      return 0;
    }
    if (z->seen_last) return zin_corrupt(z, "data after the last block");
    if (have < ZB_HDR) return zin_corrupt(z, "cut short inside its header");
    const unsigned char *h = z->in + z->in_pos;
    if (!zb_is_header(h)) return zin_corrupt(z, "not a gpubuddy gzip block");
    uint32_t msize = zb_get32(h + 16);
    if (msize < ZB_HDR + ZB_TRL + 2 || msize > ZB_MEMBER_MAX)
      return zin_corrupt(z, "block length out of range");
    have = zin_fill(z, msize);
    if (have < 0) return (int)have;
    if ((size_t)have < msize) return zin_corrupt(z, "cut short");
    h = z->in + z->in_pos;
    uint32_t crc = zb_get32(h + msize - 8), tlen = zb_get32(h + msize - 4);
    if (tlen > ZB_TEXT_MAX) return zin_corrupt(z, "text length out of range");
    const unsigned char *src = h + ZB_HDR;
    size_t slen = msize - ZB_HDR - ZB_TRL, got = 0;
    int ok;
#ifdef GPB_HAVE_LIBDEFLATE
    size_t used = 0;
    ok = libdeflate_deflate_decompress_ex(z->ld, src, slen, z->out, tlen, &used,
                                          &got) == LIBDEFLATE_SUCCESS &&
         used == slen;
#else
    inflateReset(&z->zs);
    z->zs.next_in = (unsigned char *)src;
    z->zs.avail_in = (uInt)slen;
    z->zs.next_out = z->out;
    z->zs.avail_out = ZB_TEXT_MAX;
    ok = inflate(&z->zs, Z_FINISH) == Z_STREAM_END && z->zs.avail_in == 0;
    got = ZB_TEXT_MAX - z->zs.avail_out;
#endif
    if (!ok || got != tlen) return zin_corrupt(z, "damaged deflate data");
    if (zb_crc(z->out, tlen) != crc) return zin_corrupt(z, "CRC mismatch");
    z->in_pos += msize;
    if (tlen == 0) {
      z->seen_last = 1;
      continue;
    }
    *p = z->out;
    *n = tlen;
    return 1;
  }
}

/* Hands out the text inflated so far; an error found after it waits for
 * the next call, so no line before a fault is lost. */
static int zin_stream_fault(gpb__zin_t *z, int rc, unsigned char **p,
                            size_t *n) {
  size_t got = ZB_TEXT_MAX - z->zs.avail_out;
  if (!got) return rc;
  z->err = rc;
  snprintf(z->msg, sizeof z->msg, "%s", gpb_last_error_detail());
  *p = z->out;
  *n = got;
  return 1;
}

/* Any gzip stream, members one after another, through zlib. */
static int zin_next_stream(gpb__zin_t *z, unsigned char **p, size_t *n) {
  z_stream *s = &z->zs;
  s->next_out = z->out;
  s->avail_out = ZB_TEXT_MAX;
  int rc = 0;
  while (s->avail_out) {
    long have = zin_fill(z, 1);
    if (have < 0) return zin_stream_fault(z, (int)have, p, n);
    if (have == 0) {
      rc = gpb__fail(GPB_EFORMAT, "corrupt or truncated gzip stream "
                                  "(unexpected end of file)");
      return zin_stream_fault(z, rc, p, n);
    }
    s->next_in = z->in + z->in_pos;
    s->avail_in = (uInt)have;
    int zrc = inflate(s, Z_NO_FLUSH);
    z->in_pos += (size_t)have - s->avail_in;
    if (zrc == Z_STREAM_END) {
      /* Another member may follow; anything else after one is an error
       * (gzip only warns, but then bytes of the trace could be lost). */
      have = zin_fill(z, 2);
      if (have < 0) return zin_stream_fault(z, (int)have, p, n);
      if (have == 0) {
        z->done = 1;
        break;
      }
      const unsigned char *m = z->in + z->in_pos;
      if (have < 2 || m[0] != 0x1f || m[1] != 0x8b) {
        rc = gpb__fail(GPB_EFORMAT,
                       "corrupt or truncated gzip stream (data after its "
                       "end at byte %llu)",
                       (unsigned long long)(z->base + z->in_pos));
        return zin_stream_fault(z, rc, p, n);
      }
      inflateReset(s);
    } else if (zrc != Z_OK && zrc != Z_BUF_ERROR) {
      rc = gpb__fail(zrc == Z_MEM_ERROR ? GPB_EHOSTMEM : GPB_EFORMAT,
                     "corrupt or truncated gzip stream (%s)",
                     s->msg ? s->msg : "zlib error");
      return zin_stream_fault(z, rc, p, n);
    }
  }
  *p = z->out;
  *n = ZB_TEXT_MAX - s->avail_out;
  return *n ? 1 : 0;
}

int gpb__zin_next(gpb__zin_t *z, unsigned char **p, size_t *n) {
  *p = NULL;
  *n = 0;
  if (z->err) return gpb__fail(z->err, "%s", z->msg);
  if (z->done) return 0;
  if (z->mode == ZIN_BLOCKED) return zin_next_blocked(z, p, n);
  if (z->mode == ZIN_STREAM) return zin_next_stream(z, p, n);
  long have = zin_fill(z, 1);
  if (have < 0) return (int)have;
  if (have == 0) {
    z->done = 1;
    return 0;
  }
  /* Plain text is handed out in place; the next call reads past it. */
  *p = z->in + z->in_pos;
  *n = (size_t)have;
  z->in_pos = z->in_len;
  return 1;
}

void gpb__zin_close(gpb__zin_t *z) {
  if (!z) return;
  if (z->zs_live) inflateEnd(&z->zs);
#ifdef GPB_HAVE_LIBDEFLATE
  if (z->ld) libdeflate_free_decompressor(z->ld);
#endif
  if (z->fd >= 0) close(z->fd);
  free(z->in);
  free(z->out);
  free(z);
}

int gpb__zin_open(const char *path, gpb__zin_t **out) {
  *out = NULL;
  gpb__zin_t *z = calloc(1, sizeof *z);
  if (!z) return gpb__fail(GPB_EHOSTMEM, "no memory for a trace reader");
  z->fd = -1;
  if (!(z->in = malloc(ZIN_CAP)) || !(z->out = malloc(ZB_TEXT_MAX))) {
    gpb__zin_close(z);
    return gpb__fail(GPB_EHOSTMEM, "no memory for a trace reader");
  }
  z->fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : dup(0);
  if (z->fd < 0) {
    int e = errno;
    gpb__zin_close(z);
    return gpb__fail(e == ENOENT ? GPB_ENOTFOUND : GPB_EIO,
                     "cannot open trace '%s': %s", path, strerror(e));
  }
  long have = zin_fill(z, ZB_HDR);
  if (have < 0) {
    gpb__zin_close(z);
    return (int)have;
  }
  const unsigned char *h = z->in;
  if (have >= ZB_HDR && zb_is_header(h)) {
    z->mode = ZIN_BLOCKED;
  } else if (have >= 2 && h[0] == 0x1f && h[1] == 0x8b) {
    z->mode = ZIN_STREAM;
  } else {
    z->mode = ZIN_PLAIN;
    *out = z;
    return 0;
  }
#ifdef GPB_HAVE_LIBDEFLATE
  if (z->mode == ZIN_BLOCKED && !(z->ld = libdeflate_alloc_decompressor())) {
    gpb__zin_close(z);
    return gpb__fail(GPB_EHOSTMEM, "no memory for a trace reader");
  }
  if (z->mode == ZIN_STREAM)
#endif
  {
    /* Blocked members are raw deflate between headers this file parses;
     * a foreign stream is parsed by zlib (15 + 16: gzip wrapper). */
    int wbits = z->mode == ZIN_BLOCKED ? -15 : 15 + 16;
    if (inflateInit2(&z->zs, wbits) != Z_OK) {
      gpb__zin_close(z);
      return gpb__fail(GPB_EHOSTMEM, "no memory for a trace reader");
    }
    z->zs_live = 1;
  }
  *out = z;
  return 0;
}

/* ------------------------------------------------------------ writing */

static int zout_write_all(gpb__zout_t *z, const unsigned char *p, size_t n) {
  while (n) {
    ssize_t k = write(z->fd, p, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      return gpb__fail(GPB_EIO, "trace write failed: %s", strerror(errno));
    }
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/* Writes buf as one member (an empty buf makes the last member). */
static int zout_member(gpb__zout_t *z) {
  unsigned char *o = z->out;
  size_t room = z->out_cap - ZB_HDR - ZB_TRL, clen;
#ifdef GPB_HAVE_LIBDEFLATE
  clen = libdeflate_deflate_compress(z->lc, z->buf, z->len, o + ZB_HDR, room);
  if (!clen) return gpb__fail(GPB_EIO, "trace write failed: deflate overflow");
#else
  deflateReset(&z->zs);
  z->zs.next_in = z->buf;
  z->zs.avail_in = (uInt)z->len;
  z->zs.next_out = o + ZB_HDR;
  z->zs.avail_out = (uInt)room;
  if (deflate(&z->zs, Z_FINISH) != Z_STREAM_END)
    return gpb__fail(GPB_EIO, "trace write failed: deflate overflow");
  clen = room - z->zs.avail_out;
#endif
  size_t msize = ZB_HDR + clen + ZB_TRL;
  static const unsigned char hdr[16] = {0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 0xff,
                                        8, 0, 'G', 'B', 4, 0};
  memcpy(o, hdr, sizeof hdr);
  zb_put32(o + 16, (uint32_t)msize);
  zb_put32(o + ZB_HDR + clen, zb_crc(z->buf, z->len));
  zb_put32(o + ZB_HDR + clen + 4, (uint32_t)z->len);
  z->len = 0;
  return zout_write_all(z, o, msize);
}

static int zout_flush(gpb__zout_t *z) {
  if (!z->len) return 0;
  if (z->compress) return zout_member(z);
  size_t n = z->len;
  z->len = 0;
  return zout_write_all(z, z->buf, n);
}

int gpb__zout_write(gpb__zout_t *z, const void *p, size_t n) {
  const unsigned char *s = p;
  while (n) {
    size_t k = z->cap - z->len;
    if (k > n) k = n;
    memcpy(z->buf + z->len, s, k);
    z->len += k;
    s += k;
    n -= k;
    if (z->len == z->cap) {
      int rc = zout_flush(z);
      if (rc) return rc;
    }
  }
  return 0;
}

static void zout_free(gpb__zout_t *z) {
  if (z->zs_live) deflateEnd(&z->zs);
#ifdef GPB_HAVE_LIBDEFLATE
  if (z->lc) libdeflate_free_compressor(z->lc);
#endif
  free(z->buf);
  free(z->out);
  free(z);
}

int gpb__zout_close(gpb__zout_t *z, int write_rest) {
  if (!z) return 0;
  int rc = 0;
  if (write_rest) {
    rc = zout_flush(z);
    if (!rc && z->compress) rc = zout_member(z); /* the empty last member */
  }
  if (z->fd >= 0 && close(z->fd) && !rc && write_rest)
    rc = gpb__fail(GPB_EIO, "closing the trace failed: %s", strerror(errno));
  zout_free(z);
  return rc;
}

int gpb__zout_open(const char *path, int compress, gpb__zout_t **out) {
  *out = NULL;
  gpb__zout_t *z = calloc(1, sizeof *z);
  if (!z) return gpb__fail(GPB_EHOSTMEM, "no memory for a trace writer");
  z->fd = -1;
  z->compress = compress;
  z->cap = compress ? ZB_TEXT_MAX : ZOUT_PLAIN_CAP;
  z->out_cap = compress ? ZB_MEMBER_MAX : 0;
  if (!(z->buf = malloc(z->cap)) ||
      (compress && !(z->out = malloc(z->out_cap))))
    goto nomem;
  if (compress) {
    /* Level 1: the pool writes its trace under its lock, and zlib's level
     * 6 cost 4.8 times as long for a file 15% smaller. */
#ifdef GPB_HAVE_LIBDEFLATE
    if (!(z->lc = libdeflate_alloc_compressor(1))) goto nomem;
#else
    if (deflateInit2(&z->zs, 1, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      goto nomem;
    z->zs_live = 1;
#endif
  }
  z->fd = strcmp(path, "-")
              ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666)
              : dup(1);
  if (z->fd < 0) {
    int e = errno;
    zout_free(z);
    return gpb__fail(GPB_EIO, "cannot create trace '%s': %s", path,
                     strerror(e));
  }
  *out = z;
  return 0;
nomem:
  zout_free(z);
  return gpb__fail(GPB_EHOSTMEM, "no memory for a trace writer");
}
