/* SPDX-License-Identifier: MIT */
/*
 * test_trace_bad.c: malformed input for every trace parser.
 *
 * Each case is a file's content, the code the reader must return (at open
 * or from gpb_trace_next) and the line its message must name. Then gzip
 * streams cut short or corrupted (the writer's blocked gzip: at every
 * block edge, in headers, after the end; foreign gzip from zlib: one
 * stream, several, trailing junk), and random junk, which must end in an
 * error and never a crash (the sanitizer builds check the "never").
 */
#include "testutil.h"

#include <unistd.h>
#include <zlib.h>

static char dir[] = "/tmp/gpb-test-trace-bad-XXXXXX";
static char path[300];

#define H "# gpubuddy-trace v1\n"
#define H2 "# gpubuddy-trace v2\n"
#define H3 "# gpubuddy-trace v3\n"
#define R "Thread,Time,Action,Pointer,Size,Stream\n"
#define OK1 "1 0 alloc 0x100 64 0 0\n"

typedef struct tcase {
  const char *name;
  const char *text;
  size_t len; /* 0: strlen(text) */
  int code;
  int line; /* the line the message names */
  const char *word; /* a word the message must contain, or NULL */
} tcase_t;

static const tcase_t cases[] = {
  /* native: header */
  {"empty", "", 0, GPB_EFORMAT, 0, "empty"},
  {"no header", "1 0 alloc 0x100 64 0 0\n", 0, GPB_EFORMAT, 1, "not a trace"},
  {"future version", "# gpubuddy-trace v4\n" OK1, 0, GPB_EVERSION, 1, "version"},
  {"version 0", "# gpubuddy-trace v0\n" OK1, 0, GPB_EVERSION, 1, "version"},
  {"bad version", "# gpubuddy-trace vx\n" OK1, 0, GPB_EFORMAT, 1, "version"},
  /* native: records */
  {"few fields", H OK1 "2 0 free 0x100\n", 0, GPB_EFORMAT, 3, "expected 7"},
  {"many fields", H OK1 "2 0 free 0x100 64 0 0 9\n", 0, GPB_EFORMAT, 3, "too many"},
  {"bad number", H "1 0 alloc 0x100 6x4 0 0\n", 0, GPB_EFORMAT, 2, "size"},
  {"negative size", H OK1 "# c\n\n2 5 alloc 0x200 -64 0 0\n", 0, GPB_EFORMAT, 5, "negative"},
  {"plus sign", H "1 0 alloc 0x100 +64 0 0\n", 0, GPB_EFORMAT, 2, "size"},
  {"overflow", H "1 0 alloc 0x100 18446744073709551616 0 0\n", 0, GPB_EFORMAT, 2, "size"},
  {"empty hex", H "1 0 alloc 0x 64 0 0\n", 0, GPB_EFORMAT, 2, "id"},
  {"bad time", H OK1 "2 1.5 free 0x100 64 0 0\n", 0, GPB_EFORMAT, 3, "timestamp"},
  {"unknown op", H OK1 "2 0 realloc 0x100 64 0 0\n", 0, GPB_EFORMAT, 3, "unknown op"},
  {"seq backwards", H OK1 "1 0 free 0x100 64 0 0\n", 0, GPB_EFORMAT, 3, "sequence"},
  {"seq zero", H "0 0 alloc 0x100 64 0 0\n", 0, GPB_EFORMAT, 2, "sequence"},
  {"tag too big", H "1 0 alloc 0x100 64 64 0\n", 0, GPB_EFORMAT, 2, "tag"},
  {"alloc size 0", H "1 0 alloc 0x100 0 0 0\n", 0, GPB_EFORMAT, 2, "size 0"},
  {"reserved id", H "1 0 alloc 0x8000000000000001 64 0 0\n", 0, GPB_EFORMAT, 2, "bit 63"},
  /* native v2: call sites */
  {"v2 nine fields", H2 "1 0 alloc 0x100 64 0 0 1 2\n", 0, GPB_EFORMAT, 2, "too many"},
  {"v2 few fields", H2 "1 0 alloc 0x100 64 0\n", 0, GPB_EFORMAT, 2, "7 or 8"},
  {"v2 site too big", H2 "1 0 alloc 0x100 64 0 0 65536\n", 0, GPB_EFORMAT, 2, "call site"},
  {"v2 site number", H2 OK1 "2 0 free 0x100 64 0 0 x\n", 0, GPB_EFORMAT, 3, "call site"},
  {"v2 site id 0", H2 "# site 0 /bin/app+0x10\n", 0, GPB_EFORMAT, 2, "call site"},
  {"v2 site id word", H2 OK1 "# site one /bin/app+0x10\n", 0, GPB_EFORMAT, 3, "call site"},
  {"v2 site no frames", H2 "# site 3 \t\n", 0, GPB_EFORMAT, 2, "no frames"},
  {"v2 site id only", H2 OK1 "# site 3\n", 0, GPB_EFORMAT, 3, "no frames"},
  {"v2 site id huge", H2 "# site 99999999999999999999999 x\n", 0, GPB_EFORMAT, 2, "call site"},
  {"v2 site negative", H2 "# site -1 x\n", 0, GPB_EFORMAT, 2, "call site"},
  {"v2 site twice", H2 "# site 1 a+0x1\n# site 1 a+0x1\n# site 1 b+0x2\n", 0,
   GPB_EFORMAT, 4, "defined twice"},
  /* native v3: frame tables */
  {"v3 frame id 0", H3 "# frame 0 a.py:1 f\n", 0, GPB_EFORMAT, 2, "frame id"},
  {"v3 frame id huge", H3 "# frame 16777217 a.py:1 f\n", 0, GPB_EFORMAT, 2, "frame id"},
  {"v3 frame empty", H3 "# frame 1\n", 0, GPB_EFORMAT, 2, "empty"},
  {"v3 frame semicolon", H3 "# frame 1 a;b\n", 0, GPB_EFORMAT, 2, "';'"},
  {"v3 frame twice", H3 "# frame 1 a\n# frame 1 a\n# frame 1 b\n", 0,
   GPB_EFORMAT, 4, "defined twice"},
  {"v3 stack undefined frame", H3 "# frame 1 a\n# stack 1 1 2\n", 0,
   GPB_EFORMAT, 3, "frame 2 is not defined"},
  {"v3 stack no frames", H3 "# stack 1\n", 0, GPB_EFORMAT, 2, "no frames"},
  {"v3 stack id", H3 "# frame 1 a\n# stack 65536 1\n", 0, GPB_EFORMAT, 3, "call site"},
  {"v3 stack word", H3 "# frame 1 a\n# stack 1 one\n", 0, GPB_EFORMAT, 3, "frame id"},
  {"v3 stack+ alone", H3 "# frame 1 a\n# stack+ 1\n", 0, GPB_EFORMAT, 3, "stack+"},
  {"v3 stack twice", H3 "# frame 1 a\n# frame 2 b\n# stack 1 1\n# stack 1 2\n",
   0, GPB_EFORMAT, 5, "defined twice"},
  {"nul byte", H OK1 "2 0 fr\0ee 0x100 64 0 0\n", sizeof(H OK1 "2 0 fr\0ee 0x100 64 0 0\n") - 1,
   GPB_EFORMAT, 3, "NUL"},
  /* RMM CSV */
  {"rmm bad header", "Thread,Time,Action,Pointer,Size\n", 0, GPB_EFORMAT, 1, "not a trace"},
  {"rmm dup column", "Thread,Time,Action,Pointer,Size,Size\n", 0, GPB_EFORMAT, 1, "not a trace"},
  {"rmm few fields", R "1,10:00:00.000001,allocate,0x10,64\n", 0, GPB_EFORMAT, 2, "record 1"},
  {"rmm many fields", R "1,10:00:00.000001,allocate,0x10,64,0x0,7\n", 0, GPB_EFORMAT, 2, "more than 6"},
  {"rmm action", R "1,10:00:00.000001,allocate,0x10,64,0x0\n"
   "1,10:00:00.000002,reallocate,0x10,64,0x0\n", 0, GPB_EFORMAT, 3, "unknown action"},
  {"rmm hour", R "1,25:00:00.000001,allocate,0x10,64,0x0\n", 0, GPB_EFORMAT, 2, "time"},
  {"rmm time", R "1,10:00,allocate,0x10,64,0x0\n", 0, GPB_EFORMAT, 2, "time"},
  {"rmm pointer", R "1,10:00:00.5,allocate,0xZZ,64,0x0\n", 0, GPB_EFORMAT, 2, "pointer"},
  {"rmm negative", R "\n1,10:00:00.5,allocate,0x10,-64,0x0\n", 0, GPB_EFORMAT, 3, "negative"},
  {"rmm thread", R "t1,10:00:00.5,allocate,0x10,64,0x0\n", 0, GPB_EFORMAT, 2, "thread"},
  {"rmm stream", R "1,10:00:00.5,allocate,0x10,64,stream\n", 0, GPB_EFORMAT, 2, "stream"},
};

static void write_file(const char *p, const void *data, size_t n) {
  FILE *f = fopen(p, "wb");
  ASSERT(f);
  ASSERT_EQ(fwrite(data, 1, n, f), n);
  ASSERT_EQ(fclose(f), 0);
}

/* Reads the whole trace; returns the first error (0 if none) and copies the
 * message. */
static int read_all(const char *p, char *msg, size_t cap, uint64_t *nops) {
  gpb_trace_reader_t *r;
  int rc = gpb_trace_open(p, &r);
  *nops = 0;
  if (rc) {
    ASSERT(r == NULL);
    snprintf(msg, cap, "%s", gpb_last_error_detail());
    return rc;
  }
  gpb_trace_op_t op;
  while ((rc = gpb_trace_next(r, &op)) == 1) (*nops)++;
  if (rc < 0) {
    snprintf(msg, cap, "%s", gpb_trace_error(r));
    ASSERT(strstr(gpb_last_error_detail(), msg) != NULL);
    /* The error sticks. */
    ASSERT_EQ(gpb_trace_next(r, &op), rc);
  } else {
    snprintf(msg, cap, "%s", gpb_trace_warning(r)); /* "" when whole */
  }
  gpb_trace_close(r);
  return rc;
}

static void check_line(const char *name, const char *msg, int line) {
  char want[32];
  snprintf(want, sizeof want, "line %d", line);
  const char *at = strstr(msg, want);
  /* "line 1" must not match "line 12". */
  if (!at || (at[strlen(want)] >= '0' && at[strlen(want)] <= '9'))
    FAILF("%s: message '%s' does not name %s", name, msg, want);
}

static void test_cases(void) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const tcase_t *c = &cases[i];
    size_t n = c->len ? c->len : strlen(c->text);
    write_file(path, c->text, n);
    char msg[512];
    uint64_t nops;
    int rc = read_all(path, msg, sizeof msg, &nops);
    printf("%-16s -> %s: %s\n", c->name, gpb_err_name(rc), msg);
    if (rc != c->code)
      FAILF("%s: got %s, expected %s", c->name, gpb_err_name(rc),
            gpb_err_name(c->code));
    if (c->line) check_line(c->name, msg, c->line);
    if (c->word && !strstr(msg, c->word))
      FAILF("%s: message '%s' lacks '%s'", c->name, msg, c->word);
  }
}

/* Good inputs that look unusual still parse: comments, blank lines, CRLF,
 * tabs; a final line without newline is a cut tail: dropped, with a
 * warning, the lines before it kept; RMM with both pointer styles, a
 * failure, a zero-byte request (skipped) and midnight. */
/* What RMM really writes (logging_resource_adaptor_impl.cpp, every
 * release since v24.12): "%p" of a null pointer is "(nil)" on failures
 * and zero-byte requests, the default stream is "0"; and a log cut by a
 * crash ends inside a line. 533 good records, then a line cut inside
 * the size field, then (another file) inside the stream field: every
 * good record is kept and the cut line dropped with a warning, never
 * read with a wrong stream. */
static void test_rmm_real(void) {
  char *buf = malloc(1 << 20);
  ASSERT(buf);
  for (int cut = 0; cut < 2; cut++) {
    size_t n = (size_t)sprintf(buf, "Thread,Time,Action,Pointer,Size,Stream\n");
    for (int i = 0; i < 533; i++) {
      unsigned long long p = 0x7f0000000000ull + (unsigned long long)i * 4096;
      n += (size_t)sprintf(buf + n, "140000000000001,10:00:%02d.%06d,%s,0x%llx,%d,%s\n",
                           i / 1000, i % 1000, i % 2 ? "free" : "allocate",
                           i % 2 ? p - 4096 : p, 512, i % 3 ? "0" : "0x55aa00");
    }
    n += (size_t)sprintf(buf + n, "140000000000001,10:00:01.000000,allocate "
                         "failure,(nil),1048576,0\n");
    n += (size_t)sprintf(buf + n, "140000000000001,10:00:01.000001,allocate,"
                         "(nil),0,0\n");
    /* The cut tail: in the size field, or in the stream field. */
    n += (size_t)sprintf(buf + n, cut ? "140000000000001,10:00:01.5,allocate,"
                         "0x7f00ffff0000,4096,0x55a" : "140000000000001,10:00:0"
                         "1.5,allocate,0x7f00ffff0000,40");
    write_file(path, buf, n);
    gpb_trace_reader_t *r;
    ASSERT_OK(gpb_trace_open(path, &r));
    gpb_trace_op_t o;
    int k = 0, rc, fails = 0;
    while ((rc = gpb_trace_next(r, &o)) == 1) {
      if (o.id >> 63) fails++;
      else if (k < 533) {
        ASSERT_EQ(o.op, k % 2 ? GPB_OP_FREE : GPB_OP_ALLOC);
        ASSERT_U64_EQ(o.stream, k % 3 ? 0 : 0x55aa00);
        k++;
      } else {
        FAILF("an op from the cut line: id 0x%llx stream 0x%llx",
              (unsigned long long)o.id, (unsigned long long)o.stream);
      }
    }
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(k, 533);
    ASSERT_EQ(fails, 2); /* the failure: its alloc and its free */
    ASSERT(strstr(gpb_trace_warning(r), "has no newline"));
    gpb_trace_close(r);
  }
  free(buf);
  printf("RMM as written: (nil), stream 0, a cut tail dropped, 533 kept\n");
}

static void test_good(void) {
  static const char native[] =
      H "# comment\r\n\r\n1\t0 alloc 0x100 64 3 0\r\n"
      "  2 10 fail 0 128 0 0x7\n3 20 free 256 0 0 0";
  write_file(path, native, sizeof native - 1);
  gpb_trace_reader_t *r;
  ASSERT_OK(gpb_trace_open(path, &r));
  gpb_trace_op_t o;
  ASSERT_EQ(gpb_trace_next(r, &o), 1);
  ASSERT(o.op == GPB_OP_ALLOC && o.id == 0x100 && o.size == 64 && o.tag == 3);
  ASSERT_EQ(gpb_trace_next(r, &o), 1); /* fail: alloc of a reserved id... */
  ASSERT(o.op == GPB_OP_ALLOC && (o.id >> 63) && o.size == 128 && o.stream == 7);
  uint64_t fid = o.id;
  ASSERT_EQ(gpb_trace_next(r, &o), 1); /* ...freed at once */
  ASSERT(o.op == GPB_OP_FREE && o.id == fid && o.seq == 2);
  ASSERT_EQ(*gpb_trace_warning(r), 0);
  ASSERT_EQ(gpb_trace_next(r, &o), 0); /* "3 20 free..." has no newline */
  ASSERT(strstr(gpb_trace_warning(r), "has no newline"));
  ASSERT(o.site == 0 && gpb_trace_site(r, 1) == NULL);
  gpb_trace_close(r);

  /* v2: call sites, defined before use (a tab, blanks around the id);
   * in v1, "# site" is a comment like any other. */
  static const char v2[] =
      H2 "#\tsite  7 \t/bin/app+0x10 main;libc.so+0x20\n"
      "1 0 alloc 0x100 64 3 0 7\n2 5 alloc 0x200 64 3 0\n"
      "3 6 fail 0 128 0 0 7\n# site 9 x+0x1\n4 9 free 0x100 64 3 0 7\n";
  write_file(path, v2, sizeof v2 - 1);
  ASSERT_OK(gpb_trace_open(path, &r));
  ASSERT(!strcmp(gpb_trace_format_name(r), "gpubuddy-trace v2"));
  ASSERT_EQ(gpb_trace_next(r, &o), 1);
  ASSERT_EQ(o.site, 7);
  ASSERT(!strcmp(gpb_trace_site(r, 7), "/bin/app+0x10 main;libc.so+0x20"));
  ASSERT_EQ(gpb_trace_next(r, &o), 1);
  ASSERT_EQ(o.site, 0);
  ASSERT_EQ(gpb_trace_next(r, &o), 1); /* the fail's two halves */
  ASSERT(o.op == GPB_OP_ALLOC && o.site == 7);
  ASSERT_EQ(gpb_trace_next(r, &o), 1);
  ASSERT(o.op == GPB_OP_FREE && o.site == 7);
  ASSERT(gpb_trace_site(r, 9) == NULL); /* not read yet */
  ASSERT_EQ(gpb_trace_next(r, &o), 1);
  ASSERT(o.op == GPB_OP_FREE && o.site == 7);
  ASSERT(!strcmp(gpb_trace_site(r, 9), "x+0x1"));
  ASSERT_EQ(gpb_trace_next(r, &o), 0);
  gpb_trace_close(r);
  static const char v1[] = H "# site 1 x\n" OK1;
  write_file(path, v1, sizeof v1 - 1);
  ASSERT_OK(gpb_trace_open(path, &r));
  ASSERT_EQ(gpb_trace_next(r, &o), 1);
  ASSERT(gpb_trace_site(r, 1) == NULL);
  gpb_trace_close(r);

  static const char rmm[] =
      "\xEF\xBB\xBFThread,Time,Action,Pointer,Size,Stream\n"
      "140573312345856,23:59:59.999999,allocate,0x7f8a40000000,1024,0x0\n"
      "140573312345856,23:59:59.999999,allocate,7f8a40000400,2048,7f00aa\n"
      "140573312345856,00:00:00.000001,allocate failure,0x0,4096,0x0\n"
      "140573312345856,00:00:00.000002,allocate,0x0,0,0x0\n"
      "140573312345856,00:00:00.000003,free,0x7f8a40000000,1024,0x0\n";
  write_file(path, rmm, sizeof rmm - 1);
  ASSERT_OK(gpb_trace_open(path, &r));
  ASSERT(!strcmp(gpb_trace_format_name(r), "rmm-csv"));
  ASSERT_EQ(gpb_trace_next(r, &o), 1);
  ASSERT(o.op == GPB_OP_ALLOC && o.id == 0x7f8a40000000ull && o.size == 1024);
  uint64_t t0 = o.time_ns;
  ASSERT_EQ(gpb_trace_next(r, &o), 1);
  ASSERT(o.id == 0x7f8a40000400ull && o.stream == 0x7f00aa);
  ASSERT_EQ(gpb_trace_next(r, &o), 1);
  ASSERT(o.op == GPB_OP_ALLOC && (o.id >> 63) && o.size == 4096);
  ASSERT(o.time_ns == t0 + 2000); /* across midnight, time still grows */
  ASSERT_EQ(gpb_trace_next(r, &o), 1);
  ASSERT(o.op == GPB_OP_FREE && (o.id >> 63));
  ASSERT_EQ(gpb_trace_next(r, &o), 1); /* the zero-byte request was skipped */
  ASSERT(o.op == GPB_OP_FREE && o.id == 0x7f8a40000000ull && o.seq == 5);
  ASSERT_EQ(gpb_trace_next(r, &o), 0);
  gpb_trace_close(r);
}

static void test_long_line(void) {
  size_t n = 10000;
  char *buf = malloc(n + 64);
  ASSERT(buf);
  strcpy(buf, H OK1 "2 0 free 0x100 64 0 ");
  size_t k = strlen(buf);
  memset(buf + k, '0', n - k);
  buf[n] = '\n';
  write_file(path, buf, n + 1);
  free(buf);
  char msg[512];
  uint64_t nops;
  ASSERT_EQ(read_all(path, msg, sizeof msg, &nops), GPB_EFORMAT);
  check_line("long line", msg, 3);
  ASSERT(strstr(msg, "longer"));
  ASSERT_EQ(nops, 1);
}

/* A compressed trace of many ops, then cut or damaged. */
/* read_all on one inflate thread and on three (lib/trace/zin.c's workers):
 * the same ops, the same fault and message, the same count before it. */
static int read_both(const char *p, char *msg, size_t cap, uint64_t *nops) {
  char msg3[512];
  uint64_t n3;
  setenv("GPB_INFLATE_THREADS", "3", 1);
  int rc3 = read_all(p, msg3, sizeof msg3, &n3);
  setenv("GPB_INFLATE_THREADS", "0", 1);
  int rc = read_all(p, msg, cap, nops);
  unsetenv("GPB_INFLATE_THREADS");
  ASSERT_EQ(rc3, rc);
  ASSERT_U64_EQ(n3, *nops);
  if (strcmp(msg3, msg) != 0)
    FAILF("one thread says '%s', three say '%s'", msg, msg3);
  return rc;
}

static void test_gzip(void) {
  char gz[320];
  snprintf(gz, sizeof gz, "%s/t.trace.gz", dir);
  gpb_trace_writer_t *w;
  ASSERT_OK(gpb_trace_writer_open(gz, &w));
  uint64_t seed = 12345;
  enum { N = 20000 };
  for (int i = 0; i < N; i++) {
    gpb_trace_op_t o = {0};
    o.op = (i & 1) ? GPB_OP_FREE : GPB_OP_ALLOC;
    o.id = (uint64_t)(i / 2) * 256;
    o.size = 1 + rng_below(&seed, 1u << 20);
    o.time_ns = (uint64_t)i * 777;
    ASSERT_OK(gpb_trace_write(w, &o));
  }
  ASSERT_OK(gpb_trace_writer_close(w));
  FILE *f = fopen(gz, "rb");
  ASSERT(f);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *data = malloc((size_t)size);
  ASSERT(data);
  ASSERT_EQ(fread(data, 1, (size_t)size, f), size);
  fclose(f);
  char msg[512];
  uint64_t nops;
  ASSERT_EQ(read_both(gz, msg, sizeof msg, &nops), 0);
  ASSERT_EQ(nops, N);
  /* Closed early, with members still being inflated: workers stop. */
  for (int k = 1; k <= 4; k++) {
    setenv("GPB_INFLATE_THREADS", k % 2 ? "3" : "8", 1);
    gpb_trace_reader_t *r;
    ASSERT_OK(gpb_trace_open(gz, &r));
    gpb_trace_op_t op;
    for (int i = 0; i < k * 3000; i++) ASSERT_EQ(gpb_trace_next(r, &op), 1);
    gpb_trace_close(r);
  }
  unsetenv("GPB_INFLATE_THREADS");

  /* Cut at several points (a writer killed before it closed the trace):
   * the ops before the cut, then the end, with a warning saying where.
   * Cut inside the first block's header, nothing is left: an error. */
  long cuts[] = {size / 2, size - 1, size - 5, 20, 10};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    write_file(path, data, (size_t)cuts[i]);
    int rc = read_both(path, msg, sizeof msg, &nops);
    printf("gzip cut at %ld/%ld -> %s after %llu ops: %s\n", cuts[i], size,
           rc ? gpb_err_name(rc) : "end", (unsigned long long)nops, msg);
    ASSERT(strstr(msg, "cut short"));
    if (cuts[i] <= 20) {
      ASSERT_EQ(rc, GPB_EFORMAT);
      continue;
    }
    ASSERT_EQ(rc, 0);
    /* A cut inside the 8-byte trailer loses no data, only the check. */
    ASSERT(nops <= N);
    if (cuts[i] < size - 8) ASSERT(nops < N && nops > 0);
  }
  /* Cut at every block edge: the blocks before it read whole, and the
   * missing last block is named in the warning. A block gives its length
   * at byte 16 of its header. */
  long at = 0, edges = 0, ops_before = -1;
  while (at < size) {
    ASSERT(at + 20 <= size && data[at] == 0x1f && data[at + 1] == 0x8b);
    long len = (long)(data[at + 16] | data[at + 17] << 8 |
                      data[at + 18] << 16 | (long)data[at + 19] << 24);
    ASSERT(len >= 30 && at + len <= size);
    if (at) {
      write_file(path, data, (size_t)at);
      int rc = read_both(path, msg, sizeof msg, &nops);
      ASSERT_EQ(rc, 0);
      ASSERT(strstr(msg, "cut short") && strstr(msg, "last block"));
      ASSERT((long)nops > ops_before);
      ops_before = (long)nops;
      edges++;
    }
    at += len;
  }
  ASSERT_EQ(at, size);
  ASSERT(edges >= 3);
  ASSERT_EQ(ops_before, N); /* cut before the empty last block only */
  printf("gzip cut at each of %ld block edges: ops before it, a warning\n",
         edges);

  /* Anything after the last block. */
  unsigned char *more = malloc((size_t)size * 2);
  ASSERT(more);
  memcpy(more, data, (size_t)size);
  memcpy(more + size, data, (size_t)size); /* a second whole trace */
  write_file(path, more, (size_t)size * 2);
  int rc = read_both(path, msg, sizeof msg, &nops);
  ASSERT_EQ(rc, GPB_EFORMAT);
  ASSERT(strstr(msg, "after the last block"));
  ASSERT_EQ(nops, N);
  free(more);

  /* A block length pointing past the file, and one below the minimum. */
  unsigned char save = data[19];
  data[19] = 0x40;
  write_file(path, data, (size_t)size);
  ASSERT_EQ(read_both(path, msg, sizeof msg, &nops), GPB_EFORMAT);
  ASSERT(strstr(msg, "out of range"));
  data[19] = save;
  save = data[16];
  unsigned char save17 = data[17], save18 = data[18];
  data[16] = 3;
  data[17] = data[18] = 0;
  write_file(path, data, (size_t)size);
  ASSERT_EQ(read_both(path, msg, sizeof msg, &nops), GPB_EFORMAT);
  ASSERT(strstr(msg, "out of range"));
  data[16] = save;
  data[17] = save17;
  data[18] = save18;
  /* The text's CRC (last 8 bytes of the first block: CRC, length). */
  long first = (long)(data[16] | data[17] << 8 | data[18] << 16);
  data[first - 8] ^= 1;
  write_file(path, data, (size_t)size);
  ASSERT_EQ(read_both(path, msg, sizeof msg, &nops), GPB_EFORMAT);
  ASSERT(strstr(msg, "CRC"));
  data[first - 8] ^= 1;

  /* Damage inside the deflate data. */
  data[size / 2] ^= 0x55;
  data[size / 2 + 1] ^= 0xff;
  write_file(path, data, (size_t)size);
  rc = read_both(path, msg, sizeof msg, &nops);
  printf("gzip damaged -> %s after %llu ops: %s\n", gpb_err_name(rc),
         (unsigned long long)nops, msg);
  ASSERT(rc == GPB_EFORMAT || rc == GPB_EIO);
  free(data);
}

/* gzip from elsewhere (gzip, Python, zlib): read through zlib, members one
 * after another, and junk after the last one is an error. */
static void test_foreign_gzip(void) {
  char text[4096];
  size_t len = 0;
  len += (size_t)snprintf(text + len, sizeof text - len, H);
  for (int i = 1; i <= 60; i++)
    len += (size_t)snprintf(text + len, sizeof text - len,
                            "%d %d %s 0x%x 4096 0 0\n", i, i * 10,
                            i & 1 ? "alloc" : "free", (i - 1) / 2 * 4096);
  char gz[320];
  snprintf(gz, sizeof gz, "%s/foreign.trace.gz", dir);
  for (int members = 1; members <= 3; members++) {
    gzFile f = gzopen(gz, "wb6");
    ASSERT(f);
    /* Each gzopen/gzclose makes one member: append the rest as more. */
    size_t part = len / (size_t)members, done = 0;
    for (int m = 0; m < members; m++) {
      size_t k = m == members - 1 ? len - done : part;
      if (m) {
        ASSERT_EQ(gzclose(f), Z_OK);
        ASSERT((f = gzopen(gz, "ab6")));
      }
      ASSERT_EQ(gzwrite(f, text + done, (unsigned)k), (int)k);
      done += k;
    }
    ASSERT_EQ(gzclose(f), Z_OK);
    char msg[512];
    uint64_t nops;
    ASSERT_EQ(read_all(gz, msg, sizeof msg, &nops), 0);
    ASSERT_EQ(nops, 60);
  }
  /* Cut short: the ops before the cut, then the end with a warning. */
  FILE *f = fopen(gz, "rb");
  ASSERT(f);
  unsigned char whole[4096];
  size_t zn = fread(whole, 1, sizeof whole, f);
  ASSERT(zn > 100 && zn < sizeof whole);
  ASSERT_EQ(fclose(f), 0);
  {
    char msg[512];
    uint64_t nops;
    write_file(path, whole, zn - 12); /* inside the last member's data */
    ASSERT_EQ(read_all(path, msg, sizeof msg, &nops), 0);
    ASSERT(strstr(msg, "cut short"));
    ASSERT(nops > 0 && nops < 60);
  }
  f = fopen(gz, "ab");
  ASSERT(f);
  fputs("junk", f);
  ASSERT_EQ(fclose(f), 0);
  char msg[512];
  uint64_t nops;
  ASSERT_EQ(read_all(gz, msg, sizeof msg, &nops), GPB_EFORMAT);
  ASSERT(strstr(msg, "after its end"));
  ASSERT_EQ(nops, 60);
  printf("foreign gzip: 1 to 3 members read, trailing junk named\n");
}

/* Random junk, raw and after a valid header: an error, never a crash. */
static void test_junk(void) {
  uint64_t seed = test_seed();
  int rounds = (int)(300 * test_scale()) + 10;
  unsigned char buf[3000];
  for (int i = 0; i < rounds; i++) {
    size_t n = (size_t)rng_below(&seed, sizeof buf);
    size_t k = 0;
    if (i & 1) {
      memcpy(buf, i & 2 ? H : R, i & 2 ? strlen(H) : strlen(R));
      k = i & 2 ? strlen(H) : strlen(R);
      if (n < k) n = k;
    }
    for (size_t j = k; j < n; j++) {
      /* Mostly characters the parsers look at, so junk gets past the
       * first check often enough to reach the deeper ones. */
      static const char alpha[] = "0123456789x,: \n\t-.#allocfreefailocate";
      buf[j] = rng_below(&seed, 4) ? (unsigned char)alpha[rng_below(&seed, sizeof alpha - 1)]
                                   : (unsigned char)rng_next(&seed);
    }
    write_file(path, buf, n);
    char msg[512];
    uint64_t nops;
    int rc = read_all(path, msg, sizeof msg, &nops);
    ASSERT(rc == 0 || rc == GPB_EFORMAT || rc == GPB_EIO || rc == GPB_EVERSION);
    if (rc) ASSERT(strstr(msg, "line ") || strstr(msg, "empty"));
  }
}

/* A file of one line with no newline is judged by that line, as the same
 * line with a newline is: "x" is not a trace, "# gpubuddy-trace v9" an
 * unsupported version, a bare header an empty trace (all were "empty"). */
static void test_one_line(void) {
  static const char *const lines[] = {
      "x", "#", "# gpubuddy-trace v2", "# gpubuddy-trace v1",
      "# gpubuddy-trace v9", "# gpubuddy-trace vx", "# gpubuddy-trace v",
      "Thread,Time,Action,Pointer,Size,Stream", "x\r"};
  for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
    char text[128], want[512] = "", got[512] = "";
    uint64_t n1, n2;
    snprintf(text, sizeof text, "%s\n", lines[i]);
    write_file(path, text, strlen(text));
    int rc1 = read_all(path, want, sizeof want, &n1);
    write_file(path, lines[i], strlen(lines[i]));
    int rc2 = read_all(path, got, sizeof got, &n2);
    printf("one line '%s', no newline -> %s: %s\n", lines[i],
           gpb_err_name(rc2), got);
    if (rc1 != rc2 || strcmp(want, got) || n1 != n2)
      FAILF("'%s' without a newline: %s '%s', with one: %s '%s'", lines[i],
            gpb_err_name(rc2), got, gpb_err_name(rc1), want);
    if (strstr(got, "empty")) FAILF("'%s' called empty: %s", lines[i], got);
  }
  /* Cut data lines are still dropped with a warning (test_good too). */
  write_file(path, H OK1 "2 0 free 0x1", strlen(H OK1 "2 0 free 0x1"));
  gpb_trace_reader_t *r;
  gpb_trace_op_t op;
  ASSERT_OK(gpb_trace_open(path, &r));
  ASSERT_EQ(gpb_trace_next(r, &op), 1);
  ASSERT_EQ(gpb_trace_next(r, &op), 0);
  ASSERT(strstr(gpb_trace_warning(r), "has no newline"));
  gpb_trace_close(r);
}

int main(void) {
  if (!mkdtemp(dir)) FAILF("mkdtemp failed");
  snprintf(path, sizeof path, "%s/case.trace", dir);
  test_cases();
  test_one_line();
  test_good();
  test_rmm_real();
  test_long_line();
  test_gzip();
  test_foreign_gzip();
  test_junk();
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  printf("ok\n");
  return 0;
}
