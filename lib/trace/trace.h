/* SPDX-License-Identifier: MIT */
/*
 * trace.h: trace files. The writer (write.c, over zout.c) is in
 * libgpubuddy; the readers of native text and RMM CSV (read.c, over
 * zin.c) are in libgpubuddy-read, with the table of call site texts that
 * live readers share (sitetab.c). zblock.h is the gzip format they share.
 */
#ifndef GPB_TRACE_H
#define GPB_TRACE_H

#include "base/base.h"

#define GPB__TRACE_MAGIC "# gpubuddy-trace v"
#define GPB__TRACE_VERSION 3 /* the newest read: 1 to 3. Pools write v2;
                                 v3 (frame tables) is gpubuddy-import-torch's */
#define GPB__TRACE_LINE_MAX 4096 /* bytes, without the newline */
/* Ids with the top bit set name failed requests (see read.c). */
#define GPB__TRACE_FAIL_ID (1ull << 63)

/* Trace recording: the pool turns ALLOC/FREE events into trace ops. */
GPB__HIDDEN void gpb__trace_event(gpb_trace_writer_t *w, const gpb_event_t *ev);
/* Whether call site `site` has been defined in this trace
 * (gpb_trace_write_site). */
GPB__HIDDEN int gpb__trace_has_site(const gpb_trace_writer_t *w,
                                    uint32_t site);

/* A reader's call site texts by id (sitetab.c): the trace reader's and
 * live readers' (lib/live), filled from data they do not trust. */
typedef struct gpb__sitetab {
  char **text;    /* [id]: "FRAME;...", or NULL */
  uint32_t cap;
  uint64_t bytes; /* held, at most GPB__SITETAB_MAX (frames included) */
  char **frame;   /* v3: [frame id]: one frame's text, or NULL */
  uint32_t fcap;
  uint32_t last;  /* v3: the site the last "stack" line defined, 0 none */
  int full;       /* a frame or site was not kept for the bound */
} gpb__sitetab_t;
#define GPB__FRAME_MAX (1u << 24) /* v3 frame ids are 1 to this */
#define GPB__SITETAB_MAX (64ull << 20)
/* Defines site id (1..GPB_MAX_SITES) as the n bytes at p: 0, also when
 * the table is full (not kept) or it says the same again; GPB_EFORMAT
 * (detail set) for a bad id, a NUL byte or another text for a defined
 * id; GPB_EHOSTMEM. */
GPB__HIDDEN int gpb__sitetab_set(gpb__sitetab_t *t, uint32_t id, const char *p,
                                 size_t n);
/* A v3 frame table line, p just past its keyword: "frame" (kind 0:
 * "FID TEXT"), "stack" (1: "SID FID FID ...", the site's frames by id,
 * innermost first) or "stack+" (2: more frames of the site the last
 * "stack" line defined). 0 (also when the table is full), or GPB_EFORMAT
 * (detail set) for a bad or undefined id, GPB_EHOSTMEM. */
GPB__HIDDEN int gpb__sitetab_line(gpb__sitetab_t *t, int kind, const char *p);
/* Site id's text, or NULL. */
GPB__HIDDEN const char *gpb__sitetab_get(const gpb__sitetab_t *t, uint32_t id);
GPB__HIDDEN void gpb__sitetab_free(gpb__sitetab_t *t);

/* The bytes under trace files: plain text, any gzip stream, or blocked
 * gzip in (zin.c); plain text or blocked gzip out (zout.c). Path "-" is standard
 * input or output. Errors are GPB_E* codes with the detail set. */
typedef struct gpb__zin gpb__zin_t;
typedef struct gpb__zout gpb__zout_t;
GPB__HIDDEN int gpb__zin_open(const char *path, gpb__zin_t **out);
/* Points *p at the next *n bytes of text, valid until the next call and
 * writable. 1 with bytes, 0 at the clean end, <0 on error. */
GPB__HIDDEN int gpb__zin_next(gpb__zin_t *z, unsigned char **p, size_t *n);
GPB__HIDDEN void gpb__zin_close(gpb__zin_t *z);
/* After the end: "" when the file was whole, else a note saying where
 * it was cut short (the text before that was handed out). */
GPB__HIDDEN const char *gpb__zin_cut(const gpb__zin_t *z);
GPB__HIDDEN int gpb__zout_open(const char *path, int compress,
                               gpb__zout_t **out);
GPB__HIDDEN int gpb__zout_write(gpb__zout_t *z, const void *p, size_t n);
/* write_rest 0 drops what is buffered (the writer already failed). */
GPB__HIDDEN int gpb__zout_close(gpb__zout_t *z, int write_rest);

#endif /* GPB_TRACE_H */
