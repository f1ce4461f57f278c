/* SPDX-License-Identifier: MIT */
/*
 * test_sitename.c: naming call sites by the user's code (gpbt_sitename)
 * and reading v3 frame tables (docs/TRACE_FORMAT.md).
 *
 * A PyTorch stack (allocator, c10, torch's Python modules, then the
 * user's model) must be named by the user's frame and list it first; a
 * pool's stack by its first frame outside gpubuddy; GPB_SITE_FRAMEWORK
 * and `extra` must move a library into the framework. Symbolizing must
 * turn this program's own MODULE+0xOFF frame into a function name (it is
 * built with -g) and leave an unknown module alone. A v3 trace whose
 * stacks share frames and run over several "stack+" lines must read as
 * the whole "FRAME;FRAME" text of each site, with no cut.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "sitename.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *torch_stack =
    "??:0 c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc;"
    "/pytorch/c10/cuda/CUDACachingAllocator.cpp:1234 c10::cuda::alloc;"
    "/pytorch/aten/src/ATen/native/TensorFactories.cpp:99 at::native::empty;"
    "/usr/lib/python3.11/site-packages/torch/nn/modules/linear.py:116 forward;"
    "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py:1501 _call_impl;"
    "/srv/transformers/models/llama/modeling_llama.py:216 forward;"
    "/srv/train.py:40 step";

static void test_torch(void) {
  gpbt_sitename_t s;
  ASSERT_OK(gpbt_sitename(torch_stack, NULL, 0, &s));
  ASSERT_EQ(s.nframes, 7);
  ASSERT_EQ(s.nuser, 2);
  ASSERT(!strcmp(s.name,
                 "/srv/transformers/models/llama/modeling_llama.py:216 forward"));
  ASSERT(!strcmp(s.frames[0], s.name));
  ASSERT(!strcmp(s.frames[1], "/srv/train.py:40 step"));
  ASSERT(!strncmp(s.frames[2], "??:0 c10::cuda::", 16)); /* innermost fw */
  ASSERT(strstr(s.frames[6], "module.py:1501"));
  gpbt_sitename_free(&s);
  /* A user who counts transformers as framework, by argument or env. */
  ASSERT_OK(gpbt_sitename(torch_stack, "/transformers/", 0, &s));
  ASSERT_EQ(s.nuser, 1);
  ASSERT(!strcmp(s.name, "/srv/train.py:40 step"));
  gpbt_sitename_free(&s);
  setenv("GPB_SITE_FRAMEWORK", "nothing,/transformers/", 1);
  ASSERT_OK(gpbt_sitename(torch_stack, NULL, 0, &s));
  ASSERT(!strcmp(s.name, "/srv/train.py:40 step"));
  gpbt_sitename_free(&s);
  unsetenv("GPB_SITE_FRAMEWORK");
  /* Framework only: named by the innermost frame. */
  ASSERT_OK(gpbt_sitename("/v/dist-packages/torch/a.py:1 f;??:0 c10::g", NULL, 0, &s));
  ASSERT_EQ(s.nuser, 0);
  ASSERT(!strcmp(s.name, "/v/dist-packages/torch/a.py:1 f"));
  gpbt_sitename_free(&s);
  ASSERT_OK(gpbt_sitename("", NULL, 0, &s));
  ASSERT_EQ(s.nframes, 0);
  ASSERT(!strcmp(s.name, "?"));
  gpbt_sitename_free(&s);
}

/* CPython's standard library is the framework; a package installed
 * beside it (site-packages) is the user's. */
static void test_stdlib(void) {
  ASSERT(gpbt_sitename_is_framework("/usr/lib/python3.11/contextlib.py:81 inner", NULL));
  ASSERT(!gpbt_sitename_is_framework(
      "/usr/lib/python3.11/site-packages/transformers/models/llama/modeling_llama.py:216 forward",
      NULL));
  ASSERT(!gpbt_sitename_is_framework("/venv/lib/python3.11/dist-packages/app/m.py:3 f", NULL));
  ASSERT(gpbt_sitename_is_framework("/usr/lib/python3.11/site-packages/torch/nn/modules/module.py:1 f", NULL));
  ASSERT(gpbt_sitename_is_framework("/home/u/pytorch/torch/nn/modules/module.py:1 f", NULL));
  ASSERT(gpbt_sitename_is_framework("/v/lib/python3.12/site-packages/gpubuddy/torch.py:9 enable", NULL));
  /* A user's folder named torch or gpubuddy is the user's (the sample
   * traces' own script, samples/torch/record_traces.py, was framework). */
  ASSERT(!gpbt_sitename_is_framework("/tmp/gpubuddy-0.1.0/samples/torch/record_traces.py:59 forward", NULL));
  ASSERT(!gpbt_sitename_is_framework("/work/gpubuddy/samples/torch/train.py:5 step", NULL));
}

static void test_pool_stack(void) {
  gpbt_sitename_t s;
  ASSERT_OK(gpbt_sitename("/usr/lib/libgpubuddy.so.0+0x41d8 gpb_alloc;"
                          "0x7fff0000;/srv/app+0x1a2f3 load_weights;"
                          "/srv/app+0x2b10 main",
                          NULL, 0, &s));
  ASSERT_EQ(s.nuser, 2);
  ASSERT(!strcmp(s.name, "/srv/app+0x1a2f3 load_weights"));
  ASSERT(gpbt_sitename_is_framework("0x7fff0000", NULL));
  ASSERT(!gpbt_sitename_is_framework("/srv/app+0x2b10 main", NULL));
  gpbt_sitename_free(&s);
}

__attribute__((noinline)) int test_sitename_marker(void) { return 42; }

/* A module with symbols and no line information, as a wheel's libtorch:
 * its function named, its module kept as the place (what the framework
 * patterns match), not "??:0" or ":?". dir/exe is this program. */
static void test_symbolize_no_lines(const char *dir, const char *exe,
                                    unsigned long off) {
  char copy[] = "/tmp/gpb-sitename-XXXXXX", cmd[8192], text[4200];
  int fd = mkstemp(copy);
  ASSERT(fd >= 0);
  close(fd);
  snprintf(cmd, sizeof cmd, "objcopy --strip-debug '%s/%s' '%s' 2>/dev/null",
           dir, exe, copy);
  if (system(cmd)) {
    printf("symbolize without lines: no objcopy, skipped\n");
    unlink(copy);
    return;
  }
  snprintf(text, sizeof text, "%s+0x%lx", copy, off);
  gpbt_sitename_t s;
  ASSERT_OK(gpbt_sitename(text, NULL, GPBT_SITENAME_SYMBOLIZE, &s));
  printf("symbolized without lines: %s\n", s.frames[0]);
  char want[4300];
  snprintf(want, sizeof want, "%s+0x%lx test_sitename_marker", copy, off);
  ASSERT(!strcmp(s.frames[0], want));
  gpbt_sitename_free(&s);
  unlink(copy);
}

/* This program's own frame, MODULE+0xOFFSET as a pool records it. */
static void test_symbolize(void) {
  if (system("addr2line --version > /dev/null 2>&1")) {
    printf("symbolize: no addr2line, skipped\n");
    return;
  }
  Dl_info di;
  void *fn = (void *)(uintptr_t)test_sitename_marker;
  ASSERT(dladdr(fn, &di) && di.dli_fname);
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  ASSERT(n > 0);
  path[n] = 0;
  char text[8192];
  snprintf(text, sizeof text, "%s+0x%lx;/nonexistent/lib.so+0x10 f", path,
           (unsigned long)((char *)fn - (char *)di.dli_fbase));
  gpbt_sitename_t s;
  ASSERT_OK(gpbt_sitename(text, NULL, GPBT_SITENAME_SYMBOLIZE, &s));
  ASSERT_EQ(s.nframes, 2);
  printf("symbolized: %s\n", s.frames[0]);
  ASSERT(strstr(s.frames[0], "test_sitename.c:"));
  ASSERT(strstr(s.frames[0], "test_sitename_marker"));
  ASSERT(!strcmp(s.frames[1], "/nonexistent/lib.so+0x10 f"));
  gpbt_sitename_free(&s);
  /* A module this machine lacks: its mangled symbol demangled. */
  if (!system("c++filt --version > /dev/null 2>&1")) {
    ASSERT_OK(gpbt_sitename("/nonexistent/libx.so+0x20 _ZN2at6detail3fooEv",
                            NULL, GPBT_SITENAME_SYMBOLIZE, &s));
    ASSERT(!strcmp(s.frames[0], "/nonexistent/libx.so+0x20 at::detail::foo()"));
    gpbt_sitename_free(&s);
  }
  /* An executable named as it was run, without its directory: found on
   * PATH, as a live pool's sites name it. */
  char *slash = strrchr(path, '/'), search[8192];
  *slash = 0;
  snprintf(search, sizeof search, "/nonexistent:%s:%s", path,
           getenv("PATH") ? getenv("PATH") : "/usr/bin");
  setenv("PATH", search, 1);
  snprintf(text, sizeof text, "%s+0x%lx", slash + 1,
           (unsigned long)((char *)fn - (char *)di.dli_fbase));
  ASSERT_OK(gpbt_sitename(text, NULL, GPBT_SITENAME_SYMBOLIZE, &s));
  ASSERT(strstr(s.frames[0], "test_sitename_marker"));
  gpbt_sitename_free(&s);
  test_symbolize_no_lines(path, slash + 1,
                          (unsigned long)((char *)fn - (char *)di.dli_fbase));
}

/* Labels of sites shown together: unique by the nearest caller. */
static void test_labels(void) {
  gpbt_sitename_t v[3];
  ASSERT_OK(gpbt_sitename("??:0 c10::a;/w/m.py:5 fwd;/w/t.py:1 train;/w/t.py:9 main", NULL, 0, &v[0]));
  ASSERT_OK(gpbt_sitename("??:0 c10::a;/w/m.py:5 fwd;/w/t.py:2 eval;/w/t.py:9 main", NULL, 0, &v[1]));
  ASSERT_OK(gpbt_sitename("??:0 c10::b;/w/o.py:7 opt", NULL, 0, &v[2]));
  char b[256];
  ASSERT_EQ(gpbt_sitename_label(v, 3, 0, b, sizeof b), 1);
  ASSERT(!strcmp(b, "m.py:5 fwd < t.py:1 train"));
  ASSERT_EQ(gpbt_sitename_label(v, 3, 1, b, sizeof b), 1);
  ASSERT(!strcmp(b, "m.py:5 fwd < t.py:2 eval"));
  ASSERT_EQ(gpbt_sitename_label(v, 3, 2, b, sizeof b), 1);
  ASSERT(!strcmp(b, "o.py:7 opt"));
  /* The same user frames (framework differs): not unique. */
  gpbt_sitename_free(&v[2]);
  ASSERT_OK(gpbt_sitename("??:0 c10::z;/w/m.py:5 fwd;/w/t.py:1 train;/w/t.py:9 main", NULL, 0, &v[2]));
  ASSERT_EQ(gpbt_sitename_label(v, 3, 0, b, sizeof b), 0);
  ASSERT(!strcmp(b, "m.py:5 fwd"));
  gpbt_sitename_short("/a/b/c.py:3 f", b, 5);
  ASSERT(!strcmp(b, "c.py"));
  for (int i = 0; i < 3; i++) gpbt_sitename_free(&v[i]);
}

/* A v3 trace: shared frames, a stack over three lines, a v2 site too. */
static void test_v3_read(void) {
  char path[] = "/tmp/gpb-test-sitename-XXXXXX";
  int fd = mkstemp(path);
  ASSERT(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fprintf(f, "# gpubuddy-trace v3\n# seq time_ns op id size tag stream [site]\n");
  fprintf(f, "# frame 1 ??:0 c10::alloc\n# frame 2 m.py:5 fwd\n");
  fprintf(f, "# frame 3 t.py:9 main\n# stack 1 1 2 3\n");
  fprintf(f, "# stack 2 1\n# stack+ 3\n# stack+ 2 2\n");
  fprintf(f, "# site 3 a+0x1 f\n");
  fprintf(f, "1 0 alloc 0x100 64 0 0 1\n2 1 alloc 0x200 64 0 0 2\n");
  fprintf(f, "3 2 free 0x100 64 0 0 1\n4 3 alloc 0x300 64 0 0 3\n");
  fclose(f);
  gpb_trace_reader_t *r;
  ASSERT_OK(gpb_trace_open(path, &r));
  gpb_trace_op_t op;
  int n = 0;
  while (gpb_trace_next(r, &op) == 1) n++;
  ASSERT_EQ(n, 4);
  ASSERT(!strcmp(gpb_trace_site(r, 1), "??:0 c10::alloc;m.py:5 fwd;t.py:9 main"));
  ASSERT(!strcmp(gpb_trace_site(r, 2),
                 "??:0 c10::alloc;t.py:9 main;m.py:5 fwd;m.py:5 fwd"));
  ASSERT(!strcmp(gpb_trace_site(r, 3), "a+0x1 f"));
  ASSERT(!strcmp(gpb_trace_format_name(r), "gpubuddy-trace v3"));
  gpb_trace_close(r);
  unlink(path);
}

int main(void) {
  test_torch();
  test_pool_stack();
  test_stdlib();
  test_symbolize();
  test_labels();
  test_v3_read();
  printf("test_sitename: ok\n");
  return 0;
}
