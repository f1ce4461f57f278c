/* SPDX-License-Identifier: MIT */
/*
 * read.c: trace readers. They yield one gpb_trace_op_t stream from a
 * native trace (written by write.c) or from a RAPIDS RMM
 * logging_resource_adaptor CSV; docs/TRACE_FORMAT.md is the reference for
 * both. The bytes come through zin.c, plain or gzip alike. This is
 * libgpubuddy-read: an allocating program does not link it.
 *
 * The reader streams: it keeps one read buffer and one line, never the
 * whole file, so memory is bounded whatever the trace's length. It never
 * trusts its input: every line is length-checked, every number parsed by
 * hand (no sign, no overflow, no trailing junk), and any fault ends the
 * read with GPB_EFORMAT or GPB_EIO and a message naming the line.
 *
 * A failed allocation has no address, so it travels as a "fail" line; the
 * reader expands it into an ALLOC of a synthetic id (GPB__TRACE_FAIL_ID |
 * seq, an id no real offset or pointer uses) immediately followed by the
 * FREE of that id. A replay in the same pool fails that ALLOC as the
 * recording did and skips the FREE; a replay in a larger pool holds the
 * block for no time at all, which is the most a failed request can claim.
 */
#include "trace/trace.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define TRACE_LINE_MAX GPB__TRACE_LINE_MAX
#define RMM_HEADER "Thread,Time,Action,Pointer,Size,Stream"
#define NS_PER_DAY (86400ull * 1000000000ull)

enum { TRACE_FMT_NATIVE = 1, TRACE_FMT_RMM = 2 };
enum { RMM_THREAD, RMM_TIME, RMM_ACTION, RMM_POINTER, RMM_SIZE, RMM_STREAM,
       RMM_NCOLS };

struct gpb_trace_reader {
  gpb__zin_t *z;
  int fmt;
  int version;        /* native: 1, 2 (call sites) or 3 (frame tables) */
  gpb__sitetab_t sites; /* v2: the sites defined so far */
  int err;            /* sticky: once a read failed, every next call fails */
  int eof;            /* the text ended */
  unsigned char *buf; /* text from zio, cut into lines in place */
  size_t len, pos;
  char line[TRACE_LINE_MAX + 1]; /* a line cut by the buffer's end */
  char *ln; /* the current line: in buf (cut in place) or in line */
  uint64_t lineno;
  uint64_t last_seq;
  int have_pending; /* the FREE half of a failed request */
  gpb_trace_op_t pending;
  /* RMM: column order from the header, record count, clock unwrapping. */
  int col[RMM_NCOLS];
  uint64_t records;
  uint64_t day_ns, prev_ns;
  int have_prev;
  char msg[320];
  char warn[400]; /* gpb_trace_warning: a cut file, a dropped last line */
};


/* ------------------------------------------------------------ reading */

/* Records the error in the reader (sticky) and in the thread's detail. */
static int trace_fail(gpb_trace_reader_t *r, int code, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (r->fmt == TRACE_FMT_RMM && r->records)
    snprintf(r->msg, sizeof r->msg, "line %llu (record %llu): %s",
             (unsigned long long)r->lineno, (unsigned long long)r->records, tmp);
  else
    snprintf(r->msg, sizeof r->msg, "line %llu: %s",
             (unsigned long long)r->lineno, tmp);
  r->err = code;
  return gpb__fail(code, "%s", r->msg);
}

static int trace_fill(gpb_trace_reader_t *r) {
  size_t n;
  int rc = gpb__zin_next(r->z, &r->buf, &n);
  if (rc < 0) return trace_fail(r, rc, "%s", gpb_last_error_detail());
  if (rc == 0) {
    r->eof = 1;
    const char *cut = gpb__zin_cut(r->z);
    if (*cut) snprintf(r->warn, sizeof r->warn, "%s", cut);
  }
  r->len = n;
  r->pos = 0;
  return 0;
}

/* Points r->ln at the next line, without its newline (and without a
 * trailing CR). 1 with a line, 0 at the end, <0 on error. */
static int trace_getline(gpb_trace_reader_t *r) {
  size_t n = 0;
  int any = 0;
  r->lineno++;
  /* Most lines lie whole in the buffer: found with memchr and cut there
   * in place, not copied byte by byte (replay speed is parse speed). */
  unsigned char *s = NULL, *nl = NULL;
  if (r->pos < r->len) { /* (before the first fill, buf is NULL) */
    s = r->buf + r->pos;
    nl = memchr(s, '\n', r->len - r->pos);
  }
  /* The limit counts the line without its newline, and without the CR
   * of a CRLF: a CR is not part of the line. */
  if (nl && ((n = (size_t)(nl - s)) <= TRACE_LINE_MAX ||
             (n == TRACE_LINE_MAX + 1 && s[n - 1] == '\r'))) {
    if (memchr(s, 0, n)) return trace_fail(r, GPB_EFORMAT, "binary data (NUL byte)");
    r->pos += n + 1;
    if (n && s[n - 1] == '\r') n--;
    s[n] = 0;
    r->ln = (char *)s;
    return 1;
  }
  n = 0;
  r->ln = r->line;
  for (;;) {
    if (r->pos == r->len) {
      if (r->eof) break;
      int rc = trace_fill(r);
      if (rc) return rc;
      if (r->eof) break;
    }
    unsigned char c = r->buf[r->pos++];
    any = 1;
    if (c == '\n') break;
    if (c == 0) return trace_fail(r, GPB_EFORMAT, "binary data (NUL byte)");
    if (n == TRACE_LINE_MAX + 1 || (n == TRACE_LINE_MAX && c != '\r'))
      return trace_fail(r, GPB_EFORMAT, "line longer than %d bytes",
                        TRACE_LINE_MAX);
    r->line[n++] = (char)c;
  }
  if (!any) {
    r->lineno--;
    return 0;
  }
  if (r->lineno > 1 && r->pos == r->len && r->eof &&
      (r->pos == 0 || r->buf[r->pos - 1] != '\n')) {
    /* The file ends inside this line: a writer that crashed (RMM's docs
     * say its buffered tail is lost then). Its fields may be cut anywhere,
     * so it is dropped, not half read; the rest stays. The first line is
     * kept: it is the header, and a file of one line with no newline
     * ("x", "# gpubuddy-trace v2") is judged by it, not called empty. */
    size_t w = strlen(r->warn); /* after the gzip stream's note */
    if (w)
      snprintf(r->warn + w, sizeof r->warn - w, "; line %llu, cut there, "
               "was dropped", (unsigned long long)r->lineno);
    else
      snprintf(r->warn, sizeof r->warn, "line %llu has no newline: the "
               "file was cut there (a crashed writer?); that line was "
               "dropped", (unsigned long long)r->lineno);
    r->lineno--;
    return 0;
  }
  if (n && r->line[n - 1] == '\r') n--;
  r->line[n] = 0;
  return 1;
}

/* Unsigned number: decimal, or hexadecimal after "0x" (hex_only: hex
 * with an optional "0x", as RMM writes pointers). No sign, no spaces, no
 * overflow. 0 or -1. */
static int trace_u64(const char *s, size_t n, int hex_only, uint64_t *out) {
  int hex = hex_only;
  if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    hex = 1;
    s += 2;
    n -= 2;
  }
  if (n == 0 || n > 64) return -1;
  uint64_t v = 0;
  unsigned base = hex ? 16u : 10u;
  size_t safe = hex ? 15 : 19; /* digits that can never overflow */
  for (size_t i = 0; i < n; i++) {
    unsigned d;
    char c = s[i];
    if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
    else if (hex && c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
    else if (hex && c >= 'A' && c <= 'F') d = (unsigned)(c - 'A' + 10);
    else return -1;
    if (i >= safe && v > (UINT64_MAX - d) / base) return -1;
    v = v * base + d;
  }
  *out = v;
  return 0;
}

/* Describes a bad field for a message: the text, shortened. */
static const char *trace_show(char *dst, size_t cap, const char *s, size_t n) {
  size_t m = n < cap - 4 ? n : cap - 4;
  size_t j = 0;
  for (size_t i = 0; i < m; i++)
    dst[j++] = (s[i] >= 32 && s[i] < 127) ? s[i] : '?';
  if (m < n) dst[j++] = '.', dst[j++] = '.', dst[j++] = '.';
  dst[j] = 0;
  return dst;
}

static int trace_bad_number(gpb_trace_reader_t *r, const char *what,
                            const char *s, size_t n) {
  char tmp[48];
  if (n && s[0] == '-')
    return trace_fail(r, GPB_EFORMAT, "%s '%s' is negative", what,
                      trace_show(tmp, sizeof tmp, s, n));
  return trace_fail(r, GPB_EFORMAT, "%s '%s' is not a valid number", what,
                    trace_show(tmp, sizeof tmp, s, n));
}

/* Queues the FREE half of a failed request and fills the ALLOC half. */
static void trace_expand_fail(gpb_trace_reader_t *r, gpb_trace_op_t *op) {
  op->id = GPB__TRACE_FAIL_ID | op->seq;
  op->op = GPB_OP_ALLOC;
  r->pending = *op;
  r->pending.op = GPB_OP_FREE;
  r->have_pending = 1;
}

/* One number of a well-formed native line, ending at a blank or the end:
 * the pointer past it, or NULL (the slow path then names the fault). */
static inline const char *native_num(const char *p, uint64_t *out) {
  uint64_t v = 0;
  const char *s = p;
  if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    for (s = p += 2;; p++) {
      unsigned c = (unsigned char)*p, d;
      if (c - '0' < 10u) d = c - '0';
      else if ((c | 0x20u) - 'a' < 6u) d = (c | 0x20u) - 'a' + 10;
      else break;
      v = v << 4 | d;
    }
    if (p - s > 16) return NULL; /* may overflow: let trace_u64 judge */
  } else {
    for (; (unsigned)(*p - '0') < 10u; p++) v = v * 10 + (unsigned)(*p - '0');
    if (p - s > 19) return NULL;
  }
  if (p == s || (*p != ' ' && *p != '\t' && *p != 0)) return NULL;
  while (*p == ' ' || *p == '\t') p++;
  *out = v;
  return p;
}

/* The pointer past word w at p when a blank follows it, else NULL. Stops
 * at the first mismatch, so never reads past the line's end. */
static inline const char *native_word(const char *p, const char *w) {
  while (*w && *p == *w) p++, w++;
  return !*w && (*p == ' ' || *p == '\t') ? p : NULL;
}

/* A well-formed native line in one pass: 0 with v[] and the op (1 alloc,
 * 2 free, 3 fail), or -1 for anything else. v[7], the call site, is an
 * optional 8th field (v2); 0 when absent. */
static int native_fast(const char *p, uint64_t v[8], int *kind, int *nf) {
  *nf = 0;
  if (!(p = native_num(p, &v[0])) || !(p = native_num(p, &v[1]))) return -1;
  const char *q;
  if ((q = native_word(p, "alloc"))) *kind = 1;
  else if ((q = native_word(p, "free"))) *kind = 2;
  else if ((q = native_word(p, "fail"))) *kind = 3;
  else return -1;
  for (p = q; *p == ' ' || *p == '\t';) p++;
  for (int i = 3; i < 7; i++)
    if (!(p = native_num(p, &v[i]))) return -1;
  v[7] = 0;
  *nf = 7;
  if (*p) {
    *nf = 8;
    if (!(p = native_num(p, &v[7]))) return -1;
  }
  return *p ? -1 : 0;
}

/* "# site ID FRAMES" (v2), p just past "site": records the site. 0, or
 * <0 (a bad line). */
static int trace_site_line(gpb_trace_reader_t *r, const char *p) {
  while (*p == ' ' || *p == '\t') p++;
  size_t n = strcspn(p, " \t");
  uint64_t id;
  if (trace_u64(p, n, 0, &id) || id == 0 || id > GPB_MAX_SITES) {
    char tmp[48];
    return trace_fail(r, GPB_EFORMAT, "call site id '%s' is not 1 to %u",
                      trace_show(tmp, sizeof tmp, p, n), GPB_MAX_SITES);
  }
  p += n;
  while (*p == ' ' || *p == '\t') p++;
  int rc = gpb__sitetab_set(&r->sites, (uint32_t)id, p, strlen(p));
  return rc ? trace_fail(r, rc, "%s", gpb_last_error_detail()) : 0;
}

/* v3's "frame", "stack" and "stack+" lines (p at the keyword); any other
 * comment is 0. 0, or <0 (a bad line). */
static int trace_frame_line(gpb_trace_reader_t *r, const char *p) {
  static const char *kw[3] = {"frame", "stack", "stack+"};
  for (int k = 2; k >= 0; k--) {
    size_t n = strlen(kw[k]);
    if (strncmp(p, kw[k], n) || (p[n] && p[n] != ' ' && p[n] != '\t'))
      continue;
    int rc = gpb__sitetab_line(&r->sites, k, p + n);
    return rc ? trace_fail(r, rc, "%s", gpb_last_error_detail()) : 0;
  }
  return 0;
}

static int trace_next_native(gpb_trace_reader_t *r, gpb_trace_op_t *op) {
  static const char *names[8] = {"sequence number", "timestamp", "op", "id",
                                 "size", "tag", "stream", "call site"};
  int maxf = r->version >= 2 ? 8 : 7;
  int rc;
  while ((rc = trace_getline(r)) == 1) {
    const char *p = r->ln;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '#') { /* a comment, or (v2) a call site */
      if (r->version < 2) continue;
      for (p++; *p == ' ' || *p == '\t';) p++;
      /* A comment whose first word is "site" defines one; in v3,
       * "frame", "stack" and "stack+" too (sitetab.c). */
      if (!strncmp(p, "site", 4) && (!p[4] || p[4] == ' ' || p[4] == '\t') &&
          (rc = trace_site_line(r, p + 4)))
        return rc;
      if (r->version >= 3 && (rc = trace_frame_line(r, p)))
        return rc;
      continue;
    }
    if (*p == 0) continue; /* blank line */
    uint64_t v[8];
    int kind, nfast;
    if (native_fast(p, v, &kind, &nfast) || nfast > maxf) {
      /* Not well formed: split and parse field by field to say why. */
      const char *f[8];
      size_t fl[8];
      int nf = 0;
      v[7] = 0;
      while (*p) {
        if (nf == maxf)
          return trace_fail(r, GPB_EFORMAT,
                            "too many fields (expected %s)", maxf == 7
                            ? "7: seq time op id size tag stream"
                            : "7 or 8: seq time op id size tag stream [site]");
        f[nf] = p;
        while (*p && *p != ' ' && *p != '\t') p++;
        fl[nf] = (size_t)(p - f[nf]);
        nf++;
        while (*p == ' ' || *p == '\t') p++;
      }
      if (nf < 7)
        return trace_fail(r, GPB_EFORMAT,
                          "%d field%s, expected %s (seq time op id size tag "
                          "stream%s)", nf, nf == 1 ? "" : "s",
                          maxf == 7 ? "7" : "7 or 8",
                          maxf == 7 ? "" : " [site]");
      for (int i = 0; i < nf; i++) {
        if (i == 2) continue;
        if (trace_u64(f[i], fl[i], 0, &v[i]))
          return trace_bad_number(r, names[i], f[i], fl[i]);
      }
      if (fl[2] == 5 && !memcmp(f[2], "alloc", 5)) kind = 1;
      else if (fl[2] == 4 && !memcmp(f[2], "free", 4)) kind = 2;
      else if (fl[2] == 4 && !memcmp(f[2], "fail", 4)) kind = 3;
      else {
        char tmp[48];
        return trace_fail(r, GPB_EFORMAT,
                          "unknown op '%s' (expected alloc, free or fail)",
                          trace_show(tmp, sizeof tmp, f[2], fl[2]));
      }
    }
    memset(op, 0, sizeof *op);
    int fail = kind == 3;
    op->op = kind == 1 ? GPB_OP_ALLOC : kind == 2 ? GPB_OP_FREE : 0;
    if (v[0] == 0 || (r->last_seq && v[0] <= r->last_seq))
      return trace_fail(r, GPB_EFORMAT,
                        "sequence number %llu does not follow %llu",
                        (unsigned long long)v[0],
                        (unsigned long long)r->last_seq);
    if (v[5] >= GPB_MAX_TAGS)
      return trace_fail(r, GPB_EFORMAT, "tag %llu is not below %d",
                        (unsigned long long)v[5], GPB_MAX_TAGS);
    if (v[7] > GPB_MAX_SITES)
      return trace_fail(r, GPB_EFORMAT, "call site %llu is not 0 to %u",
                        (unsigned long long)v[7], GPB_MAX_SITES);
    if (op->op != GPB_OP_FREE && v[4] == 0)
      return trace_fail(r, GPB_EFORMAT, "%s of size 0",
                        fail ? "fail" : "alloc");
    if (op->op == GPB_OP_ALLOC && (v[3] & GPB__TRACE_FAIL_ID))
      return trace_fail(r, GPB_EFORMAT,
                        "id 0x%llx has bit 63 set (reserved for failed "
                        "requests)", (unsigned long long)v[3]);
    r->last_seq = v[0];
    op->seq = v[0];
    op->time_ns = v[1];
    op->id = v[3];
    op->size = v[4];
    op->tag = (uint32_t)v[5];
    op->stream = v[6];
    op->site = (uint16_t)v[7];
    if (fail) trace_expand_fail(r, op);
    return 1;
  }
  return rc;
}

/* Splits a CSV line on commas into exactly RMM_NCOLS trimmed fields. */
static int rmm_split(char *line, char **f, size_t *fl) {
  int nf = 0;
  char *p = line;
  for (;;) {
    char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (nf == RMM_NCOLS) return nf + 1;
    while (n && (*p == ' ' || *p == '\t')) p++, n--;
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
    f[nf] = p;
    fl[nf] = n;
    nf++;
    if (!e) break;
    p = e + 1;
  }
  return nf;
}

/* "HH:MM:SS.ffffff" (spdlog's %H:%M:%S.%f, as RMM writes it) or
 * "SECONDS.ffffff" (seconds since the epoch); up to 9 fraction digits. */
static int rmm_time(const char *s, size_t n, uint64_t *ns) {
  uint64_t part[3] = {0, 0, 0};
  int np = 0;
  size_t i = 0;
  for (;;) {
    size_t st = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    if (i == st || i - st > 12) return -1;
    if (trace_u64(s + st, i - st, 0, &part[np])) return -1;
    np++;
    if (i < n && s[i] == ':' && np < 3) {
      i++;
      continue;
    }
    break;
  }
  if (np == 2) return -1;
  uint64_t secs;
  if (np == 3) {
    if (part[1] >= 60 || part[2] >= 61 || part[0] >= 24) return -1;
    secs = part[0] * 3600 + part[1] * 60 + part[2];
  } else {
    if (part[0] > 10000000000ull) return -1; /* keeps ns in 64 bits */
    secs = part[0];
  }
  uint64_t frac = 0;
  if (i < n && s[i] == '.') {
    i++;
    size_t st = i, digits = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
      if (digits < 9) frac = frac * 10 + (uint64_t)(s[i] - '0'), digits++;
      i++;
    }
    if (i == st) return -1;
    for (; digits < 9; digits++) frac *= 10;
  }
  if (i != n) return -1;
  *ns = secs * 1000000000ull + frac;
  return 0;
}

static int trace_next_rmm(gpb_trace_reader_t *r, gpb_trace_op_t *op) {
  int rc;
  while ((rc = trace_getline(r)) == 1) {
    const char *q = r->ln;
    while (*q == ' ' || *q == '\t') q++;
    if (*q == 0) continue;
    r->records++;
    char *raw[RMM_NCOLS + 1];
    size_t rl[RMM_NCOLS + 1];
    int nf = rmm_split(r->ln, raw, rl);
    if (nf != RMM_NCOLS)
      return trace_fail(r, GPB_EFORMAT, "%s%d field%s, expected 6 (%s)",
                        nf > RMM_NCOLS ? "more than " : "",
                        nf > RMM_NCOLS ? RMM_NCOLS : nf, nf == 1 ? "" : "s",
                        RMM_HEADER);
    char *f[RMM_NCOLS];
    size_t fl[RMM_NCOLS];
    for (int c = 0; c < RMM_NCOLS; c++) {
      f[c] = raw[r->col[c]];
      fl[c] = rl[r->col[c]];
    }
    uint64_t thread, t, ptr, size, stream;
    if (trace_u64(f[RMM_THREAD], fl[RMM_THREAD], 0, &thread))
      return trace_bad_number(r, "thread", f[RMM_THREAD], fl[RMM_THREAD]);
    if (rmm_time(f[RMM_TIME], fl[RMM_TIME], &t)) {
      char tmp[48];
      return trace_fail(r, GPB_EFORMAT,
                        "time '%s' is not HH:MM:SS.ffffff or seconds",
                        trace_show(tmp, sizeof tmp, f[RMM_TIME], fl[RMM_TIME]));
    }
    /* glibc's %p prints a null pointer as "(nil)": RMM writes it for every
     * failed allocation (and zero-byte ones) since its logger's v24.12. */
    if (fl[RMM_POINTER] == 5 && !memcmp(f[RMM_POINTER], "(nil)", 5))
      ptr = 0;
    else if (trace_u64(f[RMM_POINTER], fl[RMM_POINTER], 1, &ptr))
      return trace_bad_number(r, "pointer", f[RMM_POINTER], fl[RMM_POINTER]);
    if (trace_u64(f[RMM_SIZE], fl[RMM_SIZE], 0, &size))
      return trace_bad_number(r, "size", f[RMM_SIZE], fl[RMM_SIZE]);
    if (trace_u64(f[RMM_STREAM], fl[RMM_STREAM], 1, &stream))
      return trace_bad_number(r, "stream", f[RMM_STREAM], fl[RMM_STREAM]);
    const char *a = f[RMM_ACTION];
    size_t al = fl[RMM_ACTION];
    int kind; /* 1 alloc, 2 free, 3 failed alloc, 0 skip */
#define RMM_IS(s) (al == sizeof(s) - 1 && !memcmp(a, s, al))
    if (RMM_IS("allocate")) kind = 1;
    else if (RMM_IS("free") || RMM_IS("deallocate")) kind = 2;
    else if (RMM_IS("allocate failure")) kind = 3;
    else if (RMM_IS("free failure") || RMM_IS("deallocate failure")) kind = 0;
    else {
      char tmp[48];
      return trace_fail(r, GPB_EFORMAT,
                        "unknown action '%s' (expected allocate, free, "
                        "allocate failure)", trace_show(tmp, sizeof tmp, a, al));
    }
#undef RMM_IS
    /* spdlog prints the time of day: unwrap midnight so time only grows
     * (a jump back of more than 12 hours is taken as a new day). */
    if (r->have_prev && t + r->day_ns + NS_PER_DAY / 2 < r->prev_ns &&
        t < NS_PER_DAY)
      r->day_ns += NS_PER_DAY;
    t += r->day_ns;
    r->prev_ns = t;
    r->have_prev = 1;
    /* Zero-byte requests reach no allocator (the pool treats them like
     * cudaMalloc(0)); their null pointers would collide as ids. */
    if (kind == 0 || size == 0) continue;
    memset(op, 0, sizeof *op);
    op->seq = r->records;
    op->time_ns = t;
    op->size = size;
    op->stream = stream;
    op->id = ptr;
    if (kind == 1) {
      if (ptr & GPB__TRACE_FAIL_ID)
        return trace_fail(r, GPB_EFORMAT, "pointer 0x%llx has bit 63 set",
                          (unsigned long long)ptr);
      op->op = GPB_OP_ALLOC;
    } else if (kind == 2) {
      op->op = GPB_OP_FREE;
    } else {
      trace_expand_fail(r, op);
    }
    return 1;
  }
  return rc;
}

/* Maps the header's column names; any order, all six required. */
static int rmm_header(gpb_trace_reader_t *r) {
  static const char *names[RMM_NCOLS] = {"Thread", "Time", "Action",
                                         "Pointer", "Size", "Stream"};
  char *f[RMM_NCOLS + 1];
  size_t fl[RMM_NCOLS + 1];
  char *line = r->ln;
  if (!strncmp(line, "\xEF\xBB\xBF", 3)) line += 3; /* a UTF-8 BOM */
  if (rmm_split(line, f, fl) != RMM_NCOLS) return -1;
  int seen = 0;
  for (int i = 0; i < RMM_NCOLS; i++) {
    int c;
    for (c = 0; c < RMM_NCOLS; c++)
      if (fl[i] == strlen(names[c]) && !strncasecmp(f[i], names[c], fl[i]))
        break;
    if (c == RMM_NCOLS || (seen & (1 << c))) return -1;
    seen |= 1 << c;
    r->col[c] = i;
  }
  return 0;
}

/* Whether the file starts as a pickle of protocol 2 to 5 does (PROTO
 * opcode 0x80, then the version): what torch.cuda.memory._dump_snapshot
 * writes, which people hand to trace readers first. */
static int trace_is_pickle(const gpb_trace_reader_t *r) {
  return r->buf && r->len >= 2 && r->buf[0] == 0x80 && r->buf[1] >= 2 &&
         r->buf[1] <= 5;
}

int gpb_trace_open(const char *path, gpb_trace_reader_t **out) {
  if (!out) return gpb__fail(GPB_EINVAL, "out is NULL");
  *out = NULL;
  if (!path) return gpb__fail(GPB_EINVAL, "path is NULL");
  gpb_trace_reader_t *r = calloc(1, sizeof *r);
  if (!r) return gpb__fail(GPB_EHOSTMEM, "no memory for a trace reader");
  int rc = gpb__zin_open(path, &r->z);
  if (rc) goto fail;
  rc = trace_getline(r);
  if (trace_is_pickle(r)) {
    rc = gpb__fail(GPB_EFORMAT, "a Python pickle (a PyTorch memory "
                   "snapshot?), not a trace: convert it with "
                   "gpubuddy-import-torch '%s' -o OUT.trace", path);
    goto fail;
  }
  if (rc < 0) goto fail;
  if (rc == 0) {
    const char *cut = gpb__zin_cut(r->z);
    rc = *cut ? gpb__fail(GPB_EFORMAT, "trace '%s' has no whole line: %s",
                          path, cut)
              : gpb__fail(GPB_EFORMAT, "trace '%s' is empty", path);
    goto fail;
  }
  if (!strncmp(r->ln, GPB__TRACE_MAGIC, strlen(GPB__TRACE_MAGIC))) {
    const char *v = r->ln + strlen(GPB__TRACE_MAGIC);
    size_t n = strcspn(v, " \t");
    uint64_t ver;
    if (trace_u64(v, n, 0, &ver) || (v[0] == '0' && n > 1)) {
      rc = trace_fail(r, GPB_EFORMAT, "bad version in header '%.64s'", r->ln);
      goto fail;
    }
    if (ver < 1 || ver > GPB__TRACE_VERSION) {
      rc = trace_fail(r, GPB_EVERSION,
                      "trace format version %llu is not supported (this "
                      "reader knows v1 to v%d)", (unsigned long long)ver,
                      GPB__TRACE_VERSION);
      goto fail;
    }
    r->fmt = TRACE_FMT_NATIVE;
    r->version = (int)ver;
  } else if (!rmm_header(r)) {
    r->fmt = TRACE_FMT_RMM;
  } else {
    rc = trace_fail(r, GPB_EFORMAT,
                    "not a trace: expected '%s%d' (gpubuddy) or '%s' (RMM "
                    "log)", GPB__TRACE_MAGIC, GPB__TRACE_VERSION, RMM_HEADER);
    goto fail;
  }
  *out = r;
  return 0;
fail:
  gpb_trace_close(r);
  return rc;
}

int gpb_trace_next(gpb_trace_reader_t *r, gpb_trace_op_t *op) {
  if (!r || !op) return gpb__fail(GPB_EINVAL, "NULL argument");
  if (r->err) return gpb__fail(r->err, "%s", r->msg);
  if (r->have_pending) {
    *op = r->pending;
    r->have_pending = 0;
    return 1;
  }
  return r->fmt == TRACE_FMT_NATIVE ? trace_next_native(r, op)
                                    : trace_next_rmm(r, op);
}

const char *gpb_trace_warning(const gpb_trace_reader_t *r) {
  return r ? r->warn : "";
}

const char *gpb_trace_error(const gpb_trace_reader_t *r) {
  return r ? r->msg : "";
}

const char *gpb_trace_format_name(const gpb_trace_reader_t *r) {
  if (!r) return "";
  if (r->fmt != TRACE_FMT_NATIVE) return "rmm-csv";
  return r->version >= 3   ? "gpubuddy-trace v3"
         : r->version >= 2 ? "gpubuddy-trace v2"
                           : "gpubuddy-trace v1";
}

const char *gpb_trace_site(const gpb_trace_reader_t *r, uint32_t site) {
  return r ? gpb__sitetab_get(&r->sites, site) : NULL;
}

void gpb_trace_close(gpb_trace_reader_t *r) {
  if (!r) return;
  gpb__zin_close(r->z);
  gpb__sitetab_free(&r->sites);
  free(r);
}
