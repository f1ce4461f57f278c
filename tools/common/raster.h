/* SPDX-License-Identifier: MIT */
/*
 * raster.h: a 32-bit pixel buffer, text in a 5x7 bitmap font, and a PNG
 * writer: what the viewer's frames and the bench's plots are drawn with.
 *
 * Pixels are 0xAARRGGBB (SDL_PIXELFORMAT_ARGB8888, which the viewer's
 * window uploads as is). Drawing clips to the buffer, so callers may draw
 * partly off it. The PNG writer keeps RGB and drops alpha.
 */
#ifndef GPBT_RASTER_H
#define GPBT_RASTER_H

#include <stddef.h>
#include <stdint.h>

typedef struct gpbt_fb {
  uint32_t *px; /* w * h, row by row */
  int w, h;
} gpbt_fb_t;

/* raster.c. Allocates w x h pixels (not cleared), each side 1..16384:
 * 0, GPB_EINVAL or GPB_EHOSTMEM; on error fb is empty. */
int gpbt_fb_init(gpbt_fb_t *fb, int w, int h);
void gpbt_fb_free(gpbt_fb_t *fb);
void gpbt_fb_fill(gpbt_fb_t *fb, int x, int y, int w, int h, uint32_t c);
void gpbt_fb_rect(gpbt_fb_t *fb, int x, int y, int w, int h, uint32_t c); /* outline */
static inline void gpbt_fb_put(gpbt_fb_t *fb, int x, int y, uint32_t c) {
  if ((unsigned)x < (unsigned)fb->w && (unsigned)y < (unsigned)fb->h)
    fb->px[(size_t)y * (size_t)fb->w + (size_t)x] = c;
}

/* font.c: a 5x7 bitmap font drawn by hand. A glyph's cell is 6x9 pixels
 * at scale 1, the glyph in rows 1..7 of it (descenders of lowercase
 * letters in row 8), so (x, y) is the cell's top left. Bytes outside
 * ASCII 32..126 draw as '?'. Returns the x after the text. */
#define GPBT_FONT_W 6
#define GPBT_FONT_H 9
int gpbt_font_draw(gpbt_fb_t *fb, int x, int y, int scale, uint32_t color,
                   const char *text);
int gpbt_font_width(int scale, const char *text);

/* png.c: writes fb to path as an 8-bit RGB PNG through zlib. 0, or
 * GPB_EIO or GPB_EHOSTMEM with errno saying why; prints nothing. */
int gpbt_png_write(const char *path, const gpbt_fb_t *fb);

#endif /* GPBT_RASTER_H */
