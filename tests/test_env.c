/* SPDX-License-Identifier: MIT */
/*
 * test_env.c: GPB_PUBLISH and GPB_TRACE in a program with several pools,
 * and a trace the environment asked for that cannot be written.
 *
 *   - Two pools under one GPB_PUBLISH and GPB_TRACE: both are made (the
 *     second used to fail with EBUSY), published as NAME and NAME.1, and
 *     record PATH and PATH with .1 before the first dot, each readable
 *     with its own ops (both used to truncate the same file).
 *   - GPB_TRACE=/dev/full: gpb_pool_destroy says on stderr that the trace
 *     is incomplete (the program used to stay silent and exit 0).
 */
#include "testutil.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

static int listed[2];
static char names[2][64];
static void list_cb(const char *name, void *user) {
  (void)user;
  for (int i = 0; i < 2; i++)
    if (!strcmp(name, names[i])) listed[i] = 1;
}

static gpb_pool_t *make(void) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = 1 << 20;
  gpb_pool_t *p;
  ASSERT_OK(gpb_pool_create(&cfg, &p));
  return p;
}

static uint64_t count_allocs(const char *path) {
  gpb_trace_reader_t *r;
  ASSERT_OK(gpb_trace_open(path, &r));
  gpb_trace_op_t op;
  uint64_t n = 0;
  int rc;
  while ((rc = gpb_trace_next(r, &op)) == 1) n += op.op == GPB_OP_ALLOC;
  ASSERT_EQ(rc, 0);
  gpb_trace_close(r);
  return n;
}

int main(void) {
  char dir[] = "/tmp/gpb-env-XXXXXX";
  ASSERT(mkdtemp(dir));
  /* A trace that cannot be written: the warning on stderr. In a child,
   * so that its pool is the first to read the environment there. */
  fflush(stdout);
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    unsetenv("GPB_PUBLISH");
    setenv("GPB_TRACE", "/dev/full", 1);
    gpb_pool_t *c = make();
    for (int i = 0; i < 100; i++) {
      void *x;
      ASSERT_OK(gpb_alloc(c, 4096, &x));
      ASSERT_OK(gpb_free(c, x));
    }
    char errf[128];
    snprintf(errf, sizeof errf, "%s/stderr", dir);
    int fd = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT(fd >= 0);
    dup2(fd, 2);
    gpb_pool_destroy(c);
    _exit(0);
  }
  int st;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  char errf[128];
  snprintf(errf, sizeof errf, "%s/stderr", dir);
  FILE *f = fopen(errf, "r");
  ASSERT(f);
  char line[512] = "";
  ASSERT(fgets(line, sizeof line, f));
  fclose(f);
  unlink(errf);
  ASSERT(strstr(line, "gpubuddy: the trace GPB_TRACE asked for (/dev/full) is "
                "incomplete"));
  printf("unwritable trace: %s", line);

  char trace[128], trace1[128];
  snprintf(trace, sizeof trace, "%s/run.trace", dir);
  snprintf(trace1, sizeof trace1, "%s/run.1.trace", dir);
  snprintf(names[0], sizeof names[0], "envtest-%d", (int)getpid());
  snprintf(names[1], sizeof names[1], "envtest-%d.1", (int)getpid());
  setenv("GPB_PUBLISH", names[0], 1);
  setenv("GPB_TRACE", trace, 1);
  gpb_pool_t *a = make(), *b = make();
  ASSERT_OK(gpb_list_pools(list_cb, NULL));
  ASSERT(listed[0] && listed[1]);
  void *x;
  for (int i = 0; i < 3; i++) {
    ASSERT_OK(gpb_alloc(a, 4096, &x));
    ASSERT_OK(gpb_free(a, x));
  }
  ASSERT_OK(gpb_alloc(b, 4096, &x));
  ASSERT_OK(gpb_free(b, x));
  gpb_pool_destroy(a);
  gpb_pool_destroy(b);
  ASSERT_U64_EQ(count_allocs(trace), 3);
  ASSERT_U64_EQ(count_allocs(trace1), 1);
  unlink(trace);
  unlink(trace1);
  rmdir(dir);
  printf("two pools: published as %s and %s, traced to run.trace and "
         "run.1.trace\n", names[0], names[1]);

  return 0;
}
