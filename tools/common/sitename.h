/* SPDX-License-Identifier: MIT */
/*
 * sitename.h: a call site's name and its frames, the user's code first
 * (sitename.c), for --top-sites, the viewer's legends and hover, and
 * --compare.
 *
 * A site's text is "FRAME;FRAME;...", innermost first, as
 * gpb_trace_site, gpb_pool_site_text and the live readers give it.
 * Imported PyTorch frames read "FILE:LINE NAME"; a pool's own read
 * "MODULE+0xOFFSET [SYMBOL]". Most of a PyTorch stack is the framework
 * (the caching allocator, c10, at::, torch's Python modules), so the
 * innermost frame names the same allocator function for every site. A
 * site is named instead by its first frame outside the framework: the
 * user's code that asked for the memory.
 *
 * A frame is the framework's when its file or module (the part before
 * ":LINE" or "+0x") contains one of the patterns, or its function name
 * starts with one. The built-in patterns cover PyTorch (its Python
 * package, libtorch, c10, at::, torch::, aten, the caching allocator),
 * CUDA's libraries, CPython's runtime and standard library (files under
 * /lib/python3 outside a -packages/ directory) and gpubuddy itself. Users add their own (a training library, say) with
 * GPB_SITE_FRAMEWORK="pat,pat,..." or the `extra` argument.
 */
#ifndef GPBT_SITENAME_H
#define GPBT_SITENAME_H

#include <stddef.h>

/* A site split for display. Owns its strings. */
typedef struct gpbt_sitename {
  char *name;     /* the first frame outside the framework; the innermost
                     frame when every frame is the framework's */
  char **frames;  /* nframes whole texts: the user's frames, innermost
                     first, then the framework's, innermost first */
  size_t nframes;
  size_t nuser;   /* frames[0..nuser) are outside the framework */
} gpbt_sitename_t;

/* gpbt_sitename's flags. */
#define GPBT_SITENAME_SYMBOLIZE 1u /* "MODULE+0xOFF" frames become "FUNC
                                      FILE:LINE" where the module has
                                      debug information (addr2line, run
                                      here, never in the workload;
                                      results are cached per process) */

#define GPBT_SITENAME_IN_ORDER 2u  /* frames stay innermost first, as in
                                      text (nuser still counts the user's) */

/* Splits `text` (not NULL; "" gives no frames and the name "?") into
 * *out. extra: more framework patterns, comma-separated, or NULL;
 * GPB_SITE_FRAMEWORK is read too. Returns 0, or GPB_EHOSTMEM with *out
 * empty. Free with gpbt_sitename_free. Not thread-safe with
 * GPBT_SITENAME_SYMBOLIZE (its cache); safe otherwise. */
int gpbt_sitename(const char *text, const char *extra, unsigned flags,
                  gpbt_sitename_t *out);
void gpbt_sitename_free(gpbt_sitename_t *s);

/* A label for v[i] that no other of the n sites in v shares, for rows
 * and legends shown together: its name, then " < CALLER" with the
 * nearest of its user frames that tells it from the others when names
 * repeat. Writes at most cap bytes (always terminated); frames are
 * shortened to "FILE:LINE NAME" with FILE's directory left out. Returns
 * 1 when the label is unique, 0 when v[i]'s user frames equal another's
 * (then the caller adds something else, a site id). */
int gpbt_sitename_label(const gpbt_sitename_t *v, size_t n, size_t i,
                        char *buf, size_t cap);

/* One frame shortened for a legend: its file's directory left out
 * ("/a/b/model.py:12 fwd" -> "model.py:12 fwd"). Writes at most cap
 * bytes, always terminated. */
void gpbt_sitename_short(const char *frame, char *buf, size_t cap);

/* A frame's parts: its place (file or module: *place, *nplace bytes),
 * its line (0 when it has none, as a pool's frames) and its function
 * (*fn, "" when none). */
void gpbt_sitename_parts(const char *frame, const char **place,
                         size_t *nplace, unsigned long *line,
                         const char **fn);

/* Whether one frame's text is the framework's (as above). */
int gpbt_sitename_is_framework(const char *frame, const char *extra);

#endif /* GPBT_SITENAME_H */
