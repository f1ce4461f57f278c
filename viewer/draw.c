/* SPDX-License-Identifier: MIT */
/*
 * draw.c: the palette every frame is drawn in.
 *
 * The viewer never draws through SDL: it fills its own pixel buffer
 * (gpbt_fb_t, tools/common/raster.h), so a window (which uploads it to a
 * texture) and headless mode (which writes it as PNG) show the very same
 * pixels, and tests can read them back.
 */
#include "view.h"

#include <math.h>

uint32_t vc_mix(uint32_t a, uint32_t b, double t) {
  if (t <= 0) return a;
  if (t >= 1) return b;
  uint32_t out = 0xFF000000u;
  for (int s = 0; s < 24; s += 8) {
    double ca = (a >> s) & 0xFF, cb = (b >> s) & 0xFF;
    out |= (uint32_t)(ca + (cb - ca) * t + 0.5) << s;
  }
  return out;
}

uint32_t vc_scale(uint32_t c, double f) {
  uint32_t out = 0xFF000000u;
  for (int s = 0; s < 24; s += 8) {
    double v = ((c >> s) & 0xFF) * f;
    out |= (uint32_t)(v > 255 ? 255 : v) << s;
  }
  return out;
}

/* Dark blue through teal and green to yellow: readable on the dark
 * background at both ends. */
uint32_t vc_ramp(double t) {
  static const uint32_t stops[] = {0xFF253494u, 0xFF2C7FB8u, 0xFF41B6C4u,
                                   0xFF7FCDBBu, 0xFFC7E9B4u, 0xFFFFFFB0u};
  const int n = (int)(sizeof stops / sizeof stops[0]) - 1;
  if (!(t > 0)) return stops[0];
  if (t >= 1) return stops[n];
  double x = t * n;
  int i = (int)x;
  return vc_mix(stops[i], stops[i + 1], x - i);
}

uint32_t vc_free_of(uint32_t c) {
  /* Darkening (vc_scale) took the dark end of the ramp into the
   * background; mixing toward a mid grey keeps it well above it. */
  return vc_mix(c, 0xFF6B7280u, 0.6);
}

/* All GPB_MAX_TAGS tags apart (they shared 16 colours): the first 16
 * as before, the other 48 picked farthest first from the colours already
 * taken, the background, the free green, white and the timeline's grey,
 * so any two differ by at least 40 in summed RGB (82 for the 48) and
 * stand off free blocks. */
uint32_t vc_tag(uint32_t tag) {
  static const uint32_t pal[64] = {
      0xFF3B82F6u, 0xFFEF4444u, 0xFF10B981u, 0xFFF59E0Bu,
      0xFF8B5CF6u, 0xFFEC4899u, 0xFF06B6D4u, 0xFF84CC16u,
      0xFFF97316u, 0xFF6366F1u, 0xFF14B8A6u, 0xFFE11D48u,
      0xFFA3E635u, 0xFFFACC15u, 0xFF94A3B8u, 0xFFD946EFu,
      0xFF00FF00u, 0xFF66FFDDu, 0xFF884400u, 0xFF44FF55u,
      0xFFAA11BBu, 0xFFBB8866u, 0xFFEEFF66u, 0xFF77DD88u,
      0xFFFFAA88u, 0xFFFF00DDu, 0xFF00FFFFu, 0xFF77BBFFu,
      0xFFCCFF00u, 0xFFFF77CCu, 0xFFFF1100u, 0xFF0066BBu,
      0xFF00FF99u, 0xFF33DDEEu, 0xFF44DD00u, 0xFF44EEAAu,
      0xFF7722DDu, 0xFF99FFAAu, 0xFFAA6622u, 0xFFBB00FFu,
      0xFFBB3377u, 0xFFBB66BBu, 0xFFCCCC77u, 0xFFFF0077u,
      0xFFBB88FFu, 0xFFCC3311u, 0xFF00DD55u, 0xFF1155FFu,
      0xFF999900u, 0xFFCCAA33u, 0xFF4499BBu, 0xFF00AA00u,
      0xFF22EE22u, 0xFF22FFCCu, 0xFF55CCCCu, 0xFF66FF11u,
      0xFF8833AAu, 0xFF88BB66u, 0xFFCC9999u, 0xFFDD00AAu,
      0xFFEE9955u, 0xFF66AA99u, 0xFFFF6666u, 0xFFDDDD44u};
  return pal[tag % 64];
}

uint32_t vc_site(uint32_t site) {
  if (!site) return 0xFF94A3B8u; /* unknown: slate, as tag 14 */
  /* Hues a golden ratio apart, so ids side by side differ most; bright,
   * so every one stands off the dark free green and the background. */
  double h = fmod((double)site * 0.6180339887498949, 1.0) * 6.0;
  double v = 0.95, s = 0.62, c = v * s;
  double x = c * (1.0 - fabs(fmod(h, 2.0) - 1.0)), m = v - c;
  double r = 0, g = 0, b = 0;
  switch ((int)h) {
  case 0: r = c, g = x; break;
  case 1: r = x, g = c; break;
  case 2: g = c, b = x; break;
  case 3: g = x, b = c; break;
  case 4: r = x, b = c; break;
  default: r = c, b = x; break;
  }
  return 0xFF000000u | (uint32_t)((r + m) * 255 + 0.5) << 16 |
         (uint32_t)((g + m) * 255 + 0.5) << 8 | (uint32_t)((b + m) * 255 + 0.5);
}
