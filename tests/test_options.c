/* SPDX-License-Identifier: MIT */
/*
 * test_options.c: lib/pool/options.c, white-box (linked statically, so
 * its hidden calls are reachable):
 *   - gpb__options_size: sizes and percentages, GPB_TORCH_POOL_SIZE's
 *     form, and one-line errors for the rest ("abc", "-1G", "0%", "150%");
 *   - gpb__options_output: a FIFO or a directory is refused, a regular or
 *     missing file, "-" and a character device are not;
 *   - gpb__options_pool: the checks, GPB_ARENAS, GPB_CALLSITES, GPB_TRACE
 *     at a FIFO, and GPB_PLAN implying best fit without arenas; none of
 *     them with GPB_CFG_NO_ENV.
 */
#include "testutil.h"
#include "pool/pool.h"

#include <sys/stat.h>
#include <unistd.h>

static void size_ok(const char *s, double share, size_t bytes) {
  double sh;
  size_t b;
  ASSERT_OK(gpb__options_size("V", s, &sh, &b));
  if (sh != share || b != bytes)
    FAILF("'%s': share %g bytes %zu, expected %g and %zu", s, sh, b, share,
          bytes);
}

static void size_bad(const char *s) {
  double sh;
  size_t b;
  ASSERT_ERR(gpb__options_size("V", s, &sh, &b), GPB_EINVAL);
  const char *d = gpb_last_error_detail();
  if (strncmp(d, "V=", 2) || strchr(d, '\n')) FAILF("'%s': says '%s'", s, d);
}

static void sizes(void) {
  size_ok("90%", 0.9, 0);
  size_ok("100%", 1.0, 0);
  size_ok("0.5%", 0.005, 0);
  size_ok("512M", 0, (size_t)512 << 20);
  size_ok("4096", 0, 4096);
  size_bad("abc");
  size_bad("-1G");
  size_bad("0%");
  size_bad("150%");
  size_bad("%");
  size_bad("");
  size_bad("0");
}

static void outputs(const char *dir) {
  char path[512];
  ASSERT_OK(gpb__options_output("V", "-"));
  ASSERT_OK(gpb__options_output("V", "/dev/null"));
  snprintf(path, sizeof path, "%s/none.trace", dir);
  ASSERT_OK(gpb__options_output("V", path));
  ASSERT_ERR(gpb__options_output("V", dir), GPB_EINVAL);
  snprintf(path, sizeof path, "%s/fifo", dir);
  ASSERT(mkfifo(path, 0600) == 0);
  ASSERT_ERR(gpb__options_output("V", path), GPB_EINVAL);
  ASSERT(strstr(gpb_last_error_detail(), "V=") &&
         strstr(gpb_last_error_detail(), "not a regular file"));
  ASSERT_ERR(gpb__options_output(NULL, path), GPB_EINVAL);
}

static void pools(const char *dir) {
  gpb_config_t in, cfg;
  gpb__options_t o;
  gpb_config_init(&in);
  in.backend = GPB_BACKEND_VIRTUAL;
  in.min_block = 8;
  ASSERT_ERR(gpb__options_pool(&in, &cfg, &o), GPB_EINVAL);
  in.min_block = 256;
  in.pool_size = 100;
  ASSERT_ERR(gpb__options_pool(&in, &cfg, &o), GPB_EINVAL);
  in.pool_size = 64 << 20;
  char fifo[512], plan[512];
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  snprintf(plan, sizeof plan, "%s/x.plan", dir);
  setenv("GPB_ARENAS", "4", 1);
  setenv("GPB_CALLSITES", "3", 1);
  setenv("GPB_TRACE", fifo, 1);
  setenv("GPB_PLAN", plan, 1);
  in.flags = GPB_CFG_NO_ENV; /* none of them */
  ASSERT_OK(gpb__options_pool(&in, &cfg, &o));
  ASSERT(cfg.arenas == 1 && !(cfg.flags & GPB_CFG_CALLSITES) &&
         !cfg.trace_path && !o.plan && cfg.policy == GPB_POLICY_BUDDY);
  in.flags = 0;
  ASSERT_ERR(gpb__options_pool(&in, &cfg, &o), GPB_EINVAL); /* the FIFO */
  ASSERT(strstr(gpb_last_error_detail(), "GPB_TRACE="));
  unsetenv("GPB_TRACE");
  ASSERT_OK(gpb__options_pool(&in, &cfg, &o));
  ASSERT(cfg.flags & GPB_CFG_CALLSITES);
  ASSERT(((cfg.flags >> 24) & 0xff) == 3);
  /* The plan takes the pool to best fit without arenas. */
  ASSERT(o.plan && !strcmp(o.plan, plan));
  ASSERT(cfg.policy == GPB_POLICY_BESTFIT && cfg.arenas == 1);
  unsetenv("GPB_PLAN");
  ASSERT_OK(gpb__options_pool(&in, &cfg, &o));
  ASSERT(cfg.policy == GPB_POLICY_BUDDY && cfg.arenas == 4 && !o.plan);
  setenv("GPB_ARENAS", "65", 1);
  ASSERT_ERR(gpb__options_pool(&in, &cfg, &o), GPB_EINVAL);
  unsetenv("GPB_ARENAS");
  unsetenv("GPB_CALLSITES");
}

int main(void) {
  char dir[] = "/tmp/gpb-options-XXXXXX";
  ASSERT(mkdtemp(dir));
  sizes();
  outputs(dir);
  pools(dir);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  ASSERT(system(cmd) == 0);
  printf("test_options: ok\n");
  return 0;
}
