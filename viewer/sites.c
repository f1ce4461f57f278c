/* SPDX-License-Identifier: MIT */
/*
 * sites.c: call sites in the viewer: their text, the hover's lines, the
 * ranking by live bytes the legend, side panel and --json show.
 *
 * The sums are tools/common/topsites.c's, fed by the app's event hook
 * (the bytes of an allocation's blocks go to its site, and come back at
 * its free), so they add up to the used bytes. A live view that loads a
 * keyframe sums its live blocks again. A replay's site texts come from
 * the trace, read by the read-ahead thread; a live view's from the
 * stream (gpb_attach_site), when the pool records call sites.
 */
#include "view.h"
#include "sitename.h"

#include "json.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

const char *vapp_site_text(const vapp_t *a, uint32_t site) {
  if (!site) return NULL;
  if (a->kind == VSRC_REPLAY) return vreplay_site(a->rp, site);
  return a->at ? gpb_attach_site(a->at, site) : NULL;
}

/* Whether a frame (len bytes of a site's text) is the framework's, not
 * the user's code: tools/common's rule (gpbt_sitename_is_framework),
 * the one every tool names sites by. */
int vsite_is_framework(const char *f, size_t len) {
  char frame[1024];
  if (len >= sizeof frame) len = sizeof frame - 1; /* the place comes first */
  memcpy(frame, f, len);
  frame[len] = 0;
  return gpbt_sitename_is_framework(frame, NULL);
}

/* The frame that names a site: its first outside the framework, else
 * its innermost. Its length in *len. */
static const char *site_name_frame(const char *frames, size_t *len) {
  for (const char *f = frames; *f;) {
    size_t n = strcspn(f, ";");
    if (n && !vsite_is_framework(f, n)) return *len = n, f;
    f += n + (f[n] == ';');
  }
  *len = strcspn(frames, ";");
  return frames;
}

const char *vsite_short(const char *frames, char *buf, size_t n) {
  if (!n) return buf;
  buf[0] = 0;
  if (!frames) return buf;
  size_t len;
  const char *f = site_name_frame(frames, &len);
  const char *plus = memchr(f, '+', len), *sp = memchr(f, ' ', len);
  const char *s = f;
  if (plus && sp && plus < sp) {
    s = sp + 1; /* "MODULE+0xOFF SYMBOL": the symbol */
  } else {
    /* "DIR/FILE:LINE NAME": without the directory. */
    const char *end = sp ? sp : f + len;
    for (const char *q = f; q < end; q++)
      if (*q == '/') s = q + 1;
  }
  len -= (size_t)(s - f);
  if (len >= n) len = n - 1;
  memcpy(buf, s, len);
  buf[len] = 0;
  return buf;
}

/* One frame into rows of at most width characters: whole, its start
 * first, continued rows indented. Returns the rows written. */
static int site_wrap(const char *f, size_t len, const char *lead,
                     char (*l)[80], int max, int width) {
  int n = 0, w = width - (int)strlen(lead);
  if (w < 4) w = 4;
  while (n < max) {
    size_t k = len > (size_t)w ? (size_t)w : len;
    snprintf(l[n], 80, "%s%.*s", n ? "     " : lead, (int)k, f);
    n++;
    f += k, len -= k;
    if (!len) break;
    w = width - 5;
  }
  return n;
}

int vsite_hover(const vapp_t *a, uint32_t site, char (*l)[80], int max,
                int width, int skip) {
  if (max < 1) return 0;
  if (width > 79) width = 79;
  if (width < 12) width = 12;
  const char *t = vapp_site_text(a, site);
  int nf = 0, nu = 0;
  for (const char *f = t; f && *f;) {
    size_t k = strcspn(f, ";");
    nf++, nu += !vsite_is_framework(f, k);
    f += k + (f[k] == ';');
  }
  int n = 0;
  if (!site || !t) {
    snprintf(l[n++], 80, "SITE   %u%s", site, !site ? " (UNKNOWN)" : " (NO FRAMES)");
    return n;
  }
  snprintf(l[n++], 80, "SITE   %u: %d FRAMES, %d YOURS FIRST", site, nf, nu);
  /* The user's frames, then the framework's, each innermost first and
   * whole (wrapped); `skip` rows scrolled past (j k). */
  char rows[256][80];
  int nr = 0;
  for (int pass = 0; pass < 2; pass++)
    for (const char *f = t; *f && nr < 256;) {
      size_t k = strcspn(f, ";");
      if (k && vsite_is_framework(f, k) == pass)
        nr += site_wrap(f, k, pass ? "  .  " : "  >  ", rows + nr, 256 - nr,
                        width);
      f += k + (f[k] == ';');
    }
  if (skip > nr - 1) skip = nr > 0 ? nr - 1 : 0;
  if (skip < 0) skip = 0;
  int room = max - n - 1; /* a line for "more" */
  for (int i = skip; i < nr && n < max; i++) {
    if (i - skip >= room && i + 1 < nr) {
      snprintf(l[n++], 80, "  ... %d MORE (J K SCROLL)", nr - i);
      return n;
    }
    memcpy(l[n++], rows[i], 80);
  }
  return n;
}

size_t vsite_top(const vapp_t *a, gpbt_site_row_t *rows, size_t max) {
  return gpbt_sites_top(&a->sites, GPBT_SITES_LIVE, rows, max, NULL);
}

static int site_block(const gpb_block_info_t *b, void *user) {
  if (b->used) gpbt_sites_alloc(user, b->site, b->size);
  return 0;
}

void vsite_resync(vapp_t *a) {
  gpbt_sites_fini(&a->sites);
  gpbt_sites_init(&a->sites);
  if (a->model) gpb_model_visit(a->model, site_block, &a->sites);
}

void vsite_json(const vapp_t *a, FILE *f) {
  gpbt_site_row_t rows[10];
  size_t n = vsite_top(a, rows, 10);
  fputs(",\"top_sites\":[", f);
  for (size_t i = 0; i < n; i++) {
    gpbt_json_t j = {f, ",", 0};
    fputs(i ? ",{" : "{", f);
    gpbt_json_put_u64(&j, "id", rows[i].site);
    gpbt_json_put_u64(&j, "bytes", rows[i].bytes);
    gpbt_json_put_u64(&j, "allocs", rows[i].n);
    const char *t = vapp_site_text(a, rows[i].site);
    if (t) gpbt_json_put_str(&j, "frames", t);
    fputs("}", f);
  }
  fputs("]", f);
}
