/* SPDX-License-Identifier: MIT */
/*
 * write.c: the trace writer. It turns a pool's ALLOC/FREE/FAIL events (or
 * ops given through gpb_trace_write) into the native text format of
 * docs/TRACE_FORMAT.md, through zout.c, which compresses when the path
 * ends in ".gz". Nothing is flushed per op: the pool calls
 * gpb__trace_event under its lock, and a buffered copy is all it costs
 * there but once per 64 KiB.
 */
#include "trace/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gpb_trace_writer {
  gpb__zout_t *z;
  uint64_t *sites; /* bit per call site defined so far (allocated at the
                      first one) */
  uint64_t seq;
  uint64_t t0; /* first event's time: event times are written relative */
  int have_t0;
  int err;
  char msg[256];
};

static int trace_put(gpb_trace_writer_t *w, const char *s, size_t n) {
  if (w->err) return w->err;
  int rc = gpb__zout_write(w->z, s, n);
  if (rc) { /* sticky, and kept for gpb_trace_writer_close */
    w->err = rc;
    snprintf(w->msg, sizeof w->msg, "%s", gpb_last_error_detail());
  }
  return rc;
}

int gpb_trace_writer_open(const char *path, gpb_trace_writer_t **out) {
  if (!out) return gpb__fail(GPB_EINVAL, "out is NULL");
  *out = NULL;
  if (!path || !*path) return gpb__fail(GPB_EINVAL, "trace path is empty");
  gpb_trace_writer_t *w = calloc(1, sizeof *w);
  if (!w) return gpb__fail(GPB_EHOSTMEM, "no memory for a trace writer");
  size_t n = strlen(path);
  int rc = gpb__zout_open(path, n > 3 && !strcmp(path + n - 3, ".gz"), &w->z);
  if (rc) {
    free(w);
    return rc;
  }
  static const char hdr[] = "# gpubuddy-trace v2\n"
                            "# seq time_ns op id size tag stream [site]\n";
  rc = trace_put(w, hdr, sizeof hdr - 1);
  if (rc) {
    gpb__zout_close(w->z, 0);
    free(w);
    return rc;
  }
  *out = w;
  return 0;
}

/* Appends v in decimal (hex with "0x" when hex) and a separator. */
static char *trace_fmt_u64(char *p, uint64_t v, int hex, char sep) {
  char tmp[24];
  int n = 0;
  if (hex) {
    do tmp[n++] = "0123456789abcdef"[v & 15]; while (v >>= 4);
    *p++ = '0';
    *p++ = 'x';
  } else {
    do tmp[n++] = (char)('0' + v % 10); while (v /= 10);
  }
  while (n) *p++ = tmp[--n];
  *p++ = sep;
  return p;
}

static int trace_emit(gpb_trace_writer_t *w, const char *opname,
                      uint64_t time_ns, uint64_t id, uint64_t size,
                      uint32_t tag, uint64_t stream, uint32_t site) {
  char line[176];
  char *p = trace_fmt_u64(line, ++w->seq, 0, ' ');
  p = trace_fmt_u64(p, time_ns, 0, ' ');
  size_t on = strlen(opname);
  memcpy(p, opname, on);
  p += on;
  *p++ = ' ';
  p = trace_fmt_u64(p, id, 1, ' ');
  p = trace_fmt_u64(p, size, 0, ' ');
  p = trace_fmt_u64(p, tag, 0, ' ');
  /* The site is an 8th field, left out when unknown: a trace without
   * call sites is as long as a v1 trace. */
  p = trace_fmt_u64(p, stream, 1, site ? ' ' : '\n');
  if (site) p = trace_fmt_u64(p, site, 0, '\n');
  return trace_put(w, line, (size_t)(p - line));
}

int gpb_trace_write(gpb_trace_writer_t *w, const gpb_trace_op_t *op) {
  if (!w || !op) return gpb__fail(GPB_EINVAL, "NULL argument");
  if (w->err) return gpb__fail(w->err, "%s", w->msg);
  if (op->op != GPB_OP_ALLOC && op->op != GPB_OP_FREE)
    return gpb__fail(GPB_EINVAL, "unknown trace op %u", op->op);
  if (op->tag >= GPB_MAX_TAGS)
    return gpb__fail(GPB_EINVAL, "tag %u is not below %d", op->tag,
                     GPB_MAX_TAGS);
  if (op->op == GPB_OP_ALLOC && op->size == 0)
    return gpb__fail(GPB_EINVAL, "alloc of size 0");
  /* Ops read from a trace carry failed requests as an ALLOC of a reserved
   * id and its FREE: write them back as the one "fail" line they came
   * from, so that copying a trace op by op loses nothing. */
  if (op->id & GPB__TRACE_FAIL_ID) {
    if (op->op == GPB_OP_FREE) return 0;
    return trace_emit(w, "fail", op->time_ns, 0, op->size, op->tag,
                      op->stream, op->site);
  }
  /* The writer numbers ops itself so the file's sequence is gap-free. */
  return trace_emit(w, op->op == GPB_OP_ALLOC ? "alloc" : "free", op->time_ns,
                    op->id, op->size, op->tag, op->stream, op->site);
}

int gpb__trace_has_site(const gpb_trace_writer_t *w, uint32_t site) {
  return w->sites && site <= GPB_MAX_SITES &&
         ((w->sites[site >> 6] >> (site & 63)) & 1);
}

int gpb_trace_write_site(gpb_trace_writer_t *w, uint32_t site,
                         const char *frames) {
  if (!w || !frames) return gpb__fail(GPB_EINVAL, "NULL argument");
  if (w->err) return gpb__fail(w->err, "%s", w->msg);
  if (site == 0 || site > GPB_MAX_SITES)
    return gpb__fail(GPB_EINVAL, "call site %u is not 1 to %u", site,
                     GPB_MAX_SITES);
  if (!*frames)
    return gpb__fail(GPB_EINVAL, "call site %u: no frames", site);
  if (frames[strcspn(frames, "\r\n")])
    return gpb__fail(GPB_EINVAL, "call site %u: frames hold a line break",
                     site);
  if (gpb__trace_has_site(w, site)) return 0;
  if (!w->sites &&
      !(w->sites = calloc((GPB_MAX_SITES + 64) / 64, sizeof *w->sites)))
    return gpb__fail(GPB_EHOSTMEM, "no memory for the trace's call sites");
  w->sites[site >> 6] |= 1ull << (site & 63);
  char line[GPB__TRACE_LINE_MAX + 2];
  int k = snprintf(line, sizeof line, "# site %u ", site);
  /* Too long for a line: the inner frames that fit, then ";...". */
  size_t n = gpb__frames_fit(frames, strlen(frames),
                             GPB__TRACE_LINE_MAX - (size_t)k, line + k);
  line[k + n] = '\n';
  return trace_put(w, line, (size_t)k + n + 1);
}

int gpb_trace_writer_close(gpb_trace_writer_t *w) {
  if (!w) return 0;
  int rc = w->err;
  int zrc = gpb__zout_close(w->z, !rc);
  if (rc)
    gpb__fail(rc, "%s", w->msg);
  else
    rc = zrc;
  free(w->sites);
  free(w);
  return rc;
}

/* Caller holds the pool's lock. Errors are kept in the writer and returned
 * by gpb_trace_writer_close: the allocation path cannot report them. */
void gpb__trace_event(gpb_trace_writer_t *w, const gpb_event_t *ev) {
  const char *name;
  uint64_t id = ev->offset;
  switch (ev->type) {
  case GPB_EV_ALLOC: name = "alloc"; break;
  case GPB_EV_FREE: name = "free"; break;
  case GPB_EV_FAIL: name = "fail"; id = 0; break;
  default: return; /* SPLIT/MERGE follow from the allocator, not the program */
  }
  if (w->err) return;
  if (!w->have_t0) {
    w->t0 = ev->time_ns;
    w->have_t0 = 1;
  }
  uint64_t t = ev->time_ns >= w->t0 ? ev->time_ns - w->t0 : 0;
  trace_emit(w, name, t, id, ev->requested, ev->tag, ev->stream, ev->site);
}
