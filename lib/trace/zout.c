/* SPDX-License-Identifier: MIT */
/*
 * zout.c: the bytes under the trace writer: plain text, or blocked gzip
 * (zblock.h) when asked to compress. libdeflate compresses when configure
 * found it, zlib otherwise; this is all the compression an allocating
 * program links.
 */
#include "trace/trace.h"
#include "trace/zblock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define ZOUT_PLAIN_CAP (1u << 17)

struct gpb__zout {
  int fd;
  int compress;
  unsigned char *buf; /* text not yet written (compressed: one member's) */
  size_t len, cap;
  unsigned char *out; /* one member, compressed */
  size_t out_cap;
#ifdef GPB_HAVE_LIBDEFLATE
  struct libdeflate_compressor *lc;
#else
  z_stream zs;
  int zs_live;
#endif
};

/* Whether the file may grow: a write that starts at or past the
 * process's file size limit (ulimit -f) raises SIGXFSZ, which kills the
 * program unless it chose otherwise. One that starts below is cut short
 * at the limit without a signal, so asking before each write (once per
 * block: a getrlimit and an lseek) keeps the trace from ever raising it,
 * and leaves the program's own signal disposition alone. Pipes and
 * terminals have no limit (lseek fails on them). */
static int zout_room(gpb__zout_t *z, size_t n) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return 0;
  off_t at = lseek(z->fd, 0, SEEK_CUR);
  /* A gzip block goes whole or not at all: the file then ends at a block
   * edge. Plain text may stop anywhere (readers drop a cut line). */
  uint64_t need = z->compress ? n : 1;
  if (at < 0 || (uint64_t)at + need <= (uint64_t)rl.rlim_cur) return 0;
  return gpb__fail(GPB_EIO, "trace write failed: the file reached this "
                   "process's size limit (ulimit -f: %llu bytes); tracing "
                   "stopped there", (unsigned long long)rl.rlim_cur);
}

static int zout_write_all(gpb__zout_t *z, const unsigned char *p, size_t n) {
  while (n) {
    int rc = zout_room(z, n);
    if (rc) return rc;
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
#ifdef GPB_HAVE_LIBDEFLATE
  if (z->lc) libdeflate_free_compressor(z->lc);
#else
  if (z->zs_live) deflateEnd(&z->zs);
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
