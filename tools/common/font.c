/* SPDX-License-Identifier: MIT */
/*
 * font.c: text for the viewer's frames and the bench's plots, from a 5x7
 * bitmap font drawn by hand (no font files, no SDL2_ttf): every glyph is
 * seven rows of five pixels written as 'X' and '.', so the table can be
 * read and fixed by eye. A fixed bitmap font keeps rendering identical on
 * every machine, which the viewer's pixel tests rely on, and adds no
 * dependency. Lowercase letters have their own glyphs, an eighth row
 * below the line for the descenders of g, j, p, q and y (file and pool
 * names were drawn in capitals, wrongly); characters outside ASCII
 * 32..126 draw as '?'.
 */
#include "raster.h"

#include <string.h>

/* ASCII 32..126: seven rows (35 characters), or eight (40) for the
 * lowercase letters, whose last row holds descenders. */
static const char *const font_src[95] = {
    /*   */ "..................................." ,
    /* ! */ "..X....X....X....X....X.........X..",
    /* " */ ".X.X..X.X.........................." ,
    /* # */ ".X.X..X.X.XXXXX.X.X.XXXXX.X.X..X.X.",
    /* $ */ "..X...XXXXX.X...XXX...X.XXXXX...X..",
    /* % */ "XX..XXX..X...X...X...X...X..XXX..XX",
    /* & */ ".XX..X..X.X.X...X...X.X.XX..X..XX.X",
    /* ' */ "..X....X...........................",
    /* ( */ "...X...X...X....X....X.....X.....X.",
    /* ) */ ".X.....X.....X....X....X...X...X...",
    /* * */ ".......X..X.X.X.XXX.X.X.X..X.......",
    /* + */ ".......X....X..XXXXX..X....X.......",
    /* , */ "....................XX....X...X....",
    /* - */ "...............XXXXX...............",
    /* . */ ".........................XX...XX...",
    /* / */ "....X....X...X...X...X...X....X....",
    /* 0 */ ".XXX.X...XX..XXX.X.XXX..XX...X.XXX.",
    /* 1 */ "..X...XX....X....X....X....X...XXX.",
    /* 2 */ ".XXX.X...X....X...X...X...X...XXXXX",
    /* 3 */ "XXXXX...X...X.....X.....XX...X.XXX.",
    /* 4 */ "...X...XX..X.X.X..X.XXXXX...X....X.",
    /* 5 */ "XXXXXX....XXXX.....X....XX...X.XXX.",
    /* 6 */ "..XX..X...X....XXXX.X...XX...X.XXX.",
    /* 7 */ "XXXXX....X...X...X...X....X....X...",
    /* 8 */ ".XXX.X...XX...X.XXX.X...XX...X.XXX.",
    /* 9 */ ".XXX.X...XX...X.XXXX....X...X..XX..",
    /* : */ "......XX...XX........XX...XX.......",
    /* ; */ "......XX...XX........XX....X...X...",
    /* < */ "...X...X...X...X.....X.....X.....X.",
    /* = */ "..........XXXXX.....XXXXX..........",
    /* > */ ".X.....X.....X.....X...X...X...X...",
    /* ? */ ".XXX.X...X....X...X...X.........X..",
    /* @ */ ".XXX.X...XX.XXXX.X.XX.XXXX.....XXXX",
    /* A */ ".XXX.X...XX...XXXXXXX...XX...XX...X",
    /* B */ "XXXX.X...XX...XXXXX.X...XX...XXXXX.",
    /* C */ ".XXX.X...XX....X....X....X...X.XXX.",
    /* D */ "XXX..X..X.X...XX...XX...XX..X.XXX..",
    /* E */ "XXXXXX....X....XXXX.X....X....XXXXX",
    /* F */ "XXXXXX....X....XXXX.X....X....X....",
    /* G */ ".XXX.X...XX....X.XXXX...XX...X.XXXX",
    /* H */ "X...XX...XX...XXXXXXX...XX...XX...X",
    /* I */ ".XXX...X....X....X....X....X...XXX.",
    /* J */ "..XXX...X....X....X....X.X..X..XX..",
    /* K */ "X...XX..X.X.X..XX...X.X..X..X.X...X",
    /* L */ "X....X....X....X....X....X....XXXXX",
    /* M */ "X...XXX.XXX.X.XX.X.XX...XX...XX...X",
    /* N */ "X...XX...XXX..XX.X.XX..XXX...XX...X",
    /* O */ ".XXX.X...XX...XX...XX...XX...X.XXX.",
    /* P */ "XXXX.X...XX...XXXXX.X....X....X....",
    /* Q */ ".XXX.X...XX...XX...XX.X.XX..X..XX.X",
    /* R */ "XXXX.X...XX...XXXXX.X.X..X..X.X...X",
    /* S */ ".XXXXX....X.....XXX.....X....XXXXX.",
    /* T */ "XXXXX..X....X....X....X....X....X..",
    /* U */ "X...XX...XX...XX...XX...XX...X.XXX.",
    /* V */ "X...XX...XX...XX...XX...X.X.X...X..",
    /* W */ "X...XX...XX...XX.X.XX.X.XX.X.X.X.X.",
    /* X */ "X...XX...X.X.X...X...X.X.X...XX...X",
    /* Y */ "X...XX...X.X.X...X....X....X....X..",
    /* Z */ "XXXXX....X...X...X...X...X....XXXXX",
    /* [ */ ".XXX..X....X....X....X....X....XXX.",
    /* \ */ "X....X.....X.....X.....X.....X....X",
    /* ] */ ".XXX....X....X....X....X....X..XXX.",
    /* ^ */ "..X...X.X.X...X....................",
    /* _ */ "..............................XXXXX",
    /* ` */ ".X.....X...........................",
    /* a */ "...........XXX.....X.XXXXX...X.XXXX.....",
    /* b */ "X....X....XXXX.X...XX...XX...XXXXX......",
    /* c */ "...........XXX.X....X....X.....XXX......",
    /* d */ "....X....X.XXXXX...XX...XX...X.XXXX.....",
    /* e */ "...........XXX.X...XXXXXXX.....XXX......",
    /* f */ "..XX..X...XXXX..X....X....X....X........",
    /* g */ "...........XXXXX...XX...X.XXXX....X.XXX.",
    /* h */ "X....X....XXXX.X...XX...XX...XX...X.....",
    /* i */ "..X........XX....X....X....X...XXX......",
    /* j */ "...X........XX....X....X....X.X..X..XX..",
    /* k */ "X....X....X..X.X.X..XX...X.X..X..X......",
    /* l */ ".XX....X....X....X....X....X...XXX......",
    /* m */ "..........XX.X.X.X.XX.X.XX.X.XX...X.....",
    /* n */ "..........XXXX.X...XX...XX...XX...X.....",
    /* o */ "...........XXX.X...XX...XX...X.XXX......",
    /* p */ "..........XXXX.X...XX...XXXXX.X....X....",
    /* q */ "...........XXXXX...XX...X.XXXX....X....X",
    /* r */ "..........X.XX.XX..XX....X....X.........",
    /* s */ "...........XXXXX.....XXX.....XXXXX......",
    /* t */ ".X....X...XXXX..X....X....X..X..XX......",
    /* u */ "..........X...XX...XX...XX..XX.XX.X.....",
    /* v */ "..........X...XX...XX...X.X.X...X.......",
    /* w */ "..........X...XX...XX.X.XX.X.X.X.X......",
    /* x */ "..........X...X.X.X...X...X.X.X...X.....",
    /* y */ "..........X...XX...XX...X.XXXX....X.XXX.",
    /* z */ "..........XXXXX...X...X...X...XXXXX.....",
    /* { */ "...X...X....X...X......X....X.....X",
    /* | */ "..X....X....X....X....X....X....X..",
    /* } */ ".X.....X....X.....X...X....X...X...",
    /* ~ */ "...........X...X.X.X...X...........",
};

#define FONT_ROWS 8
static uint8_t font_rows[95][FONT_ROWS];
static int font_ready;

/* Parses the table once. A string shorter than its rows (a typo) leaves
 * the rest blank rather than reading past it. */
static void font_init(void) {
  for (int g = 0; g < 95; g++) {
    const char *s = font_src[g];
    size_t len = strlen(s);
    for (int r = 0; r < FONT_ROWS; r++) {
      uint8_t bits = 0;
      for (int c = 0; c < 5; c++) {
        size_t i = (size_t)(r * 5 + c);
        if (i < len && s[i] == 'X') bits |= (uint8_t)(1u << (4 - c));
      }
      font_rows[g][r] = bits;
    }
  }
  font_ready = 1;
}

int gpbt_font_draw(gpbt_fb_t *fb, int x, int y, int scale, uint32_t color,
                   const char *text) {
  if (!font_ready) font_init();
  if (scale < 1) scale = 1;
  for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
    int g = (*p >= 32 && *p <= 126) ? *p - 32 : '?' - 32;
    for (int r = 0; r < FONT_ROWS; r++) {
      uint8_t bits = font_rows[g][r];
      if (!bits) continue;
      for (int c = 0; c < 5; c++)
        if (bits & (1u << (4 - c)))
          gpbt_fb_fill(fb, x + c * scale, y + (r + 1) * scale, scale, scale,
                       color);
    }
    x += GPBT_FONT_W * scale;
  }
  return x;
}

int gpbt_font_width(int scale, const char *text) {
  return (int)strlen(text) * GPBT_FONT_W * (scale < 1 ? 1 : scale);
}
