/* SPDX-License-Identifier: MIT */
/*
 * raster.c: the pixel buffer of raster.h and its two drawing primitives,
 * a filled rectangle and an outline; the font and every shape the viewer
 * and the bench draw are built from them.
 */
#include "raster.h"

#include "gpubuddy.h"

#include <stdlib.h>

int gpbt_fb_init(gpbt_fb_t *fb, int w, int h) {
  fb->px = NULL;
  fb->w = fb->h = 0;
  if (w <= 0 || h <= 0 || w > 16384 || h > 16384)
    return GPB_EINVAL;
  fb->px = malloc((size_t)w * (size_t)h * sizeof *fb->px);
  if (!fb->px) return GPB_EHOSTMEM;
  fb->w = w;
  fb->h = h;
  return 0;
}

void gpbt_fb_free(gpbt_fb_t *fb) {
  free(fb->px);
  fb->px = NULL;
  fb->w = fb->h = 0;
}

void gpbt_fb_fill(gpbt_fb_t *fb, int x, int y, int w, int h, uint32_t c) {
  int x0 = x < 0 ? 0 : x, y0 = y < 0 ? 0 : y;
  int x1 = x + w > fb->w ? fb->w : x + w, y1 = y + h > fb->h ? fb->h : y + h;
  for (int yy = y0; yy < y1; yy++) {
    uint32_t *row = fb->px + (size_t)yy * (size_t)fb->w;
    for (int xx = x0; xx < x1; xx++) row[xx] = c;
  }
}

void gpbt_fb_rect(gpbt_fb_t *fb, int x, int y, int w, int h, uint32_t c) {
  gpbt_fb_fill(fb, x, y, w, 1, c);
  gpbt_fb_fill(fb, x, y + h - 1, w, 1, c);
  gpbt_fb_fill(fb, x, y, 1, h, c);
  gpbt_fb_fill(fb, x + w - 1, y, 1, h, c);
}
