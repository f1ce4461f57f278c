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

#include "json.h"

#include <inttypes.h>
#include <string.h>

const char *vapp_site_text(const vapp_t *a, uint32_t site) {
  if (!site) return NULL;
  if (a->kind == VSRC_REPLAY) return vreplay_site(a->rp, site);
  return a->at ? gpb_attach_site(a->at, site) : NULL;
}

const char *vsite_short(const char *frames, char *buf, size_t n) {
  if (!n) return buf;
  buf[0] = 0;
  if (!frames) return buf;
  size_t len = strcspn(frames, ";");
  /* "MODULE+0xOFF SYMBOL": the symbol says most in a few characters. */
  const char *sp = memchr(frames, ' ', len);
  const char *s = sp ? sp + 1 : frames;
  len -= (size_t)(s - frames);
  if (len >= n) len = n - 1;
  memcpy(buf, s, len);
  buf[len] = 0;
  return buf;
}

int vsite_hover(const vapp_t *a, uint32_t site, char (*l)[80], int max,
                int width) {
  if (max < 1) return 0;
  if (width > 79) width = 79;
  if (width < 8) width = 8;
  const char *t = vapp_site_text(a, site);
  int n = 0;
  snprintf(l[n++], 80, "SITE   %u%s", site,
           !site ? " (UNKNOWN)" : t ? "" : " (NO FRAMES)");
  /* Innermost first, as the trace lists them; each frame cut to fit. */
  while (t && *t && n < max) {
    size_t len = strcspn(t, ";");
    char fr[512];
    snprintf(fr, sizeof fr, "%.*s", (int)(len < sizeof fr ? len : sizeof fr - 1),
             t);
    char cut[78];
    vfmt_tail(fr, (size_t)width - 2, cut, sizeof cut);
    snprintf(l[n++], 80, "  %s", cut);
    t += len;
    if (*t == ';') t++;
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
