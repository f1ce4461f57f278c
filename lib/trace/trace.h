/* SPDX-License-Identifier: MIT */
/*
 * trace.h: trace files. The writer and the readers (native text and RMM
 * CSV) are in trace.c; the bytes under them, plain or gzip, in zio.c.
 */
#ifndef GPB_TRACE_H
#define GPB_TRACE_H

#include "base/base.h"

/* Trace recording: the pool turns ALLOC/FREE events into trace ops. */
GPB__HIDDEN void gpb__trace_event(gpb_trace_writer_t *w, const gpb_event_t *ev);

/* The bytes under trace files (zio.c): plain text, any gzip stream, or
 * blocked gzip in; plain text or blocked gzip out. Path "-" is standard
 * input or output. Errors are GPB_E* codes with the detail set. */
typedef struct gpb__zin gpb__zin_t;
typedef struct gpb__zout gpb__zout_t;
GPB__HIDDEN int gpb__zin_open(const char *path, gpb__zin_t **out);
/* Points *p at the next *n bytes of text, valid until the next call and
 * writable. 1 with bytes, 0 at the clean end, <0 on error. */
GPB__HIDDEN int gpb__zin_next(gpb__zin_t *z, unsigned char **p, size_t *n);
GPB__HIDDEN void gpb__zin_close(gpb__zin_t *z);
GPB__HIDDEN int gpb__zout_open(const char *path, int compress,
                               gpb__zout_t **out);
GPB__HIDDEN int gpb__zout_write(gpb__zout_t *z, const void *p, size_t n);
/* write_rest 0 drops what is buffered (the writer already failed). */
GPB__HIDDEN int gpb__zout_close(gpb__zout_t *z, int write_rest);

#endif /* GPB_TRACE_H */
