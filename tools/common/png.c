/* SPDX-License-Identifier: MIT */
/*
 * png.c: writes a pixel buffer as an 8-bit RGB PNG (viewer screenshots
 * and headless frames, the bench's plots).
 *
 * A PNG is a signature and three chunks (IHDR, one IDAT holding the
 * zlib-compressed scanlines, each led by filter byte 0, and IEND), each
 * with a CRC-32. zlib, which the library needs anyway, does the deflate
 * and the CRC, so no program needs libpng.
 */
#include "raster.h"

#include "gpubuddy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static void png_be32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

static int png_chunk(FILE *f, const char *type, const unsigned char *data,
                     uint32_t len) {
  unsigned char hdr[8];
  png_be32(hdr, len);
  memcpy(hdr + 4, type, 4);
  uLong crc = crc32(0L, (const Bytef *)type, 4);
  if (len) crc = crc32(crc, data, len);
  unsigned char tail[4];
  png_be32(tail, (uint32_t)crc);
  if (fwrite(hdr, 1, 8, f) != 8) return -1;
  if (len && fwrite(data, 1, len, f) != len) return -1;
  if (fwrite(tail, 1, 4, f) != 4) return -1;
  return 0;
}

int gpbt_png_write(const char *path, const gpbt_fb_t *fb) {
  size_t stride = (size_t)fb->w * 3 + 1;
  size_t rawn = stride * (size_t)fb->h;
  unsigned char *raw = malloc(rawn);
  uLongf zn = compressBound((uLong)rawn);
  unsigned char *z = malloc(zn);
  if (!raw || !z) {
    free(raw);
    free(z);
    errno = ENOMEM;
    return GPB_EHOSTMEM;
  }
  for (int y = 0; y < fb->h; y++) {
    unsigned char *row = raw + stride * (size_t)y;
    const uint32_t *src = fb->px + (size_t)y * (size_t)fb->w;
    row[0] = 0;
    for (int x = 0; x < fb->w; x++) {
      row[1 + 3 * x] = (unsigned char)(src[x] >> 16);
      row[2 + 3 * x] = (unsigned char)(src[x] >> 8);
      row[3 + 3 * x] = (unsigned char)src[x];
    }
  }
  int rc = compress2(z, &zn, raw, (uLong)rawn, 6);
  free(raw);
  if (rc != Z_OK) {
    free(z);
    errno = ENOMEM; /* compress2's only failure with a compressBound buffer */
    return GPB_EHOSTMEM;
  }
  FILE *f = fopen(path, "wb");
  if (!f) {
    free(z);
    return GPB_EIO;
  }
  static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  unsigned char ihdr[13];
  png_be32(ihdr, (uint32_t)fb->w);
  png_be32(ihdr + 4, (uint32_t)fb->h);
  ihdr[8] = 8;  /* bit depth */
  ihdr[9] = 2;  /* truecolor RGB */
  ihdr[10] = ihdr[11] = ihdr[12] = 0;
  int bad = fwrite(sig, 1, 8, f) != 8 || png_chunk(f, "IHDR", ihdr, 13) ||
            png_chunk(f, "IDAT", z, (uint32_t)zn) ||
            png_chunk(f, "IEND", NULL, 0);
  int err = bad ? errno : 0;
  free(z);
  /* fclose flushes: a full disk may only show here. */
  if (fclose(f) != 0 && !bad) {
    bad = 1;
    err = errno;
  }
  if (bad) {
    errno = err ? err : EIO;
    return GPB_EIO;
  }
  return 0;
}
