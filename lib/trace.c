/* trace.c: placeholder until trace files land (issue 3). */
#include "internal.h"

int gpb_trace_open(const char *path, gpb_trace_reader_t **out) { (void)path; *out = NULL; return GPB_ENOTFOUND; }
int gpb_trace_next(gpb_trace_reader_t *r, gpb_trace_op_t *op) { (void)r, (void)op; return 0; }
const char *gpb_trace_error(const gpb_trace_reader_t *r) { (void)r; return ""; }
const char *gpb_trace_format_name(const gpb_trace_reader_t *r) { (void)r; return ""; }
void gpb_trace_close(gpb_trace_reader_t *r) { (void)r; }
int gpb_trace_writer_open(const char *path, gpb_trace_writer_t **out) { (void)path; *out = NULL; return GPB_ENOTFOUND; }
int gpb_trace_write(gpb_trace_writer_t *w, const gpb_trace_op_t *op) { (void)w, (void)op; return 0; }
int gpb_trace_writer_close(gpb_trace_writer_t *w) { (void)w; return 0; }
void gpb__trace_event(gpb_trace_writer_t *w, const gpb_event_t *ev) { (void)w, (void)ev; }
