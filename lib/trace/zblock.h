/* SPDX-License-Identifier: MIT */
/*
 * zblock.h: blocked gzip, the compressed trace format both zin.c (reading)
 * and zout.c (writing) speak.
 *
 * Blocked gzip is a run of ordinary gzip members (RFC 1952), each holding
 * at most 64 KiB of text and giving its own length in a header extra
 * field, and an empty member last. gzip -dc, zcat and Python read it as
 * one stream. A reader can take each member whole and inflate it in one
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
#ifndef GPB_TRACE_ZBLOCK_H
#define GPB_TRACE_ZBLOCK_H

#include <stddef.h>
#include <stdint.h>
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

static inline uint32_t zb_get32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static inline void zb_put32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
  p[2] = (unsigned char)(v >> 16);
  p[3] = (unsigned char)(v >> 24);
}

/* Only the fields this writer sets are checked; mtime, xfl and os are
 * free, as RFC 1952 has them. */
static inline int zb_is_header(const unsigned char *h) {
  return h[0] == 0x1f && h[1] == 0x8b && h[2] == 8 && h[3] == 4 &&
         h[10] == 8 && h[11] == 0 && h[12] == 'G' && h[13] == 'B' &&
         h[14] == 4 && h[15] == 0;
}

static inline uint32_t zb_crc(const unsigned char *p, size_t n) {
#ifdef GPB_HAVE_LIBDEFLATE
  return libdeflate_crc32(0, p, n);
#else
  return (uint32_t)crc32(0L, p, (uInt)n);
#endif
}

#endif /* GPB_TRACE_ZBLOCK_H */
