/* SPDX-License-Identifier: MIT */
/*
 * test_nvtx_oob.c: a kernel writes one byte just past the end of a
 * gpubuddy block. The byte lies inside the pool (memory cudaMalloc handed
 * out), in a free block, so only the NVTX registration of the pool and its
 * blocks lets compute-sanitizer memcheck see the write as invalid.
 *
 * The test is its own judge: it runs itself twice under `compute-sanitizer
 * --tool memcheck` and fails unless memcheck reports the write past the
 * block ("Invalid __global__ write of size 1", and a failing exit) and
 * passes the control run that writes the block's last byte instead. Those
 * two runs (GPB_OOB_CHILD=past or inside) only do the write.
 *
 * Skipped (exit 77) without a GPU, without NVTX3 at build time, or without
 * compute-sanitizer (GPB_COMPUTE_SANITIZER, PATH, or /usr/local/cuda/bin).
 */
#include "config.h"
#include "testutil.h"
#include "gpu.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#define SAN_ERROR_EXIT 86 /* memcheck's exit status when it found errors */

/* The child: one write, at the block's last byte or just past it. */
static int oob_write(int inside) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.flags = GPB_CFG_NO_ENV;
  cfg.backend = GPB_BACKEND_DEVICE;
  cfg.pool_size = 1 << 20;
  cfg.min_block = 256;
  gpb_pool_t *pool;
  ASSERT_OK(gpb_pool_create(&cfg, &pool));
  void *p;
  ASSERT_OK(gpb_alloc(pool, 1024, &p));
  gpb_pool_info_t info;
  ASSERT_OK(gpb_pool_info(pool, &info));
  size_t usable;
  ASSERT_OK(gpb_usable_size(pool, p, &usable));
  ASSERT_EQ(usable, 1024);
  size_t off = inside ? 1023 : 1024;
  /* The target is in the pool, in free space: its buddy is not allocated. */
  ASSERT((char *)p + off < (char *)info.base + info.pool_size);
  gpb_stats_t st;
  ASSERT_OK(gpb_pool_stats(pool, &st));
  ASSERT_U64_EQ(st.live_allocs, 1);
  printf("writing 1 byte at block + %zu (%s the 1024-byte block, inside the "
         "pool at offset %zu)\n", off, inside ? "inside" : "just past",
         (size_t)((char *)p - (char *)info.base) + off);
  fflush(stdout);
  ASSERT_EQ(gpbt_write_byte(p, off, NULL), 0);
  cudaError_t e = cudaDeviceSynchronize();
  printf("kernel finished: %s\n", cudaGetErrorString(e));
  ASSERT_OK(gpb_free(pool, p));
  gpb_pool_destroy(pool);
  return 0;
}

/* compute-sanitizer's path, or NULL. */
static const char *oob_find_sanitizer(char *buf, size_t len) {
  const char *e = getenv("GPB_COMPUTE_SANITIZER");
  if (e && *e) return access(e, X_OK) == 0 ? e : NULL;
  const char *path = getenv("PATH");
  for (const char *d = path; d && *d;) {
    size_t n = strcspn(d, ":");
    snprintf(buf, len, "%.*s/compute-sanitizer", (int)n, d);
    if (n && access(buf, X_OK) == 0) return buf;
    d += n + (d[n] == ':');
  }
  snprintf(buf, len, "/usr/local/cuda/bin/compute-sanitizer");
  return access(buf, X_OK) == 0 ? buf : NULL;
}

/* Runs this program under memcheck as the child `mode`; its output goes
 * to `log` (and is echoed). Returns its exit status, or -1 on a signal. */
static int oob_run(const char *san, const char *self, const char *mode,
                   const char *log) {
  fflush(stdout);
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) _exit(127);
    setenv("GPB_OOB_CHILD", mode, 1);
    char code[16];
    snprintf(code, sizeof code, "%d", SAN_ERROR_EXIT);
    execl(san, san, "--tool", "memcheck", "--error-exitcode", code, self,
          (char *)NULL);
    fprintf(stderr, "cannot run %s: %s\n", san, strerror(errno));
    _exit(127);
  }
  int st;
  ASSERT(waitpid(pid, &st, 0) == pid);
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "sed 's/^/   | /' '%s'", log);
  if (system(cmd) != 0) printf("   (cannot show %s)\n", log);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Whether file `path` contains `what`. */
static int oob_log_has(const char *path, const char *what) {
  FILE *f = fopen(path, "r");
  ASSERT(f);
  char line[4096];
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, what) != NULL;
  fclose(f);
  return found;
}

int main(void) {
  const char *child = getenv("GPB_OOB_CHILD");
  if (child) return oob_write(strcmp(child, "inside") == 0);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
    SKIP("no CUDA device");
#ifndef GPB_HAVE_NVTX
  SKIP("built without the NVTX3 memory headers: nothing to register");
#endif
  char sbuf[4096], self[4096];
  const char *san = oob_find_sanitizer(sbuf, sizeof sbuf);
  if (!san) SKIP("no compute-sanitizer (set GPB_COMPUTE_SANITIZER)");
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT(n > 0);
  self[n] = '\0';
  char log[64];
  snprintf(log, sizeof log, "test_nvtx_oob.%d.log", (int)getpid());

  printf("-- memcheck must report the write past the block\n");
  int rc = oob_run(san, self, "past", log);
  int seen = oob_log_has(log, "Invalid __global__ write of size 1");
  /* The report decides; the exit must say "errors" too (memcheck's
   * error exit, or the program's own failure after the fault). */
  if (!seen || rc == 0) {
    unlink(log); /* its text was shown above */
    FAILF("memcheck missed the write past the block (exit %d, report %s)",
          rc, seen ? "present" : "absent");
  }
  if (rc != SAN_ERROR_EXIT)
    printf("   (memcheck exited %d, not %d: the program failed after the "
           "reported write)\n", rc, SAN_ERROR_EXIT);
  printf("-- and pass the control, the block's last byte\n");
  rc = oob_run(san, self, "inside", log);
  seen = oob_log_has(log, "Invalid __global__");
  unlink(log);
  if (rc != 0 || seen)
    FAILF("memcheck flagged the write inside the block (exit %d)", rc);
  printf("memcheck saw the write past the gpubuddy block and passed the "
         "control\n");
  return 0;
}
