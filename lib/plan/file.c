/* SPDX-License-Identifier: MIT */
/*
 * file.c: the plan object and its text file (plan.h): "gpubuddy-plan 1",
 * then "SIZE OFFSET" per entry in bytes, and at most one "repeat FROM".
 * Loading reads a regular file only, a line at a time with a bounded
 * line, and refuses a last line with no end of line (a cut file). Saving
 * writes a fresh temporary file beside the target (mkstemp: O_EXCL, so
 * no planted link is followed and no two savers share one) and renames
 * it over the target, so a reader sees the old plan or the new one.
 */
#include "plan/plan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PLAN_MAGIC "gpubuddy-plan 1"
#define PLAN_LINE_MAX 256 /* bytes, with its end of line */

/* Why an entry cannot be planned, or NULL. */
static const char *plan_bad(const gpb_plan_entry_t *e) {
  if (e->size == 0) return "size 0";
  if (e->offset > UINT64_MAX - e->size) return "offset + size overflows";
  return NULL;
}

int gpb_plan_create(const gpb_plan_entry_t *entries, size_t n,
                    gpb_plan_t **out) {
  return gpb_plan_create_periodic(entries, n, n, out);
}

int gpb_plan_create_periodic(const gpb_plan_entry_t *entries, size_t n,
                             size_t repeat_from, gpb_plan_t **out) {
  if (!out) return gpb__fail(GPB_EINVAL, "out is NULL");
  *out = NULL;
  if (n && !entries) return gpb__fail(GPB_EINVAL, "entries is NULL");
  if (repeat_from > n)
    return gpb__fail(GPB_EINVAL, "repeat from entry %zu of %zu",
                     repeat_from + 1, n);
  if (n > SIZE_MAX / sizeof *entries)
    return gpb__fail(GPB_EINVAL, "%zu entries are too many", n);
  gpb_plan_t *p = calloc(1, sizeof *p);
  if (!p || (n && !(p->e = malloc(n * sizeof *entries)))) {
    free(p);
    return gpb__fail(GPB_EHOSTMEM, "no host memory for a plan of %zu "
                     "entries", n);
  }
  for (size_t i = 0; i < n; i++) {
    const char *why = plan_bad(&entries[i]);
    if (why) {
      gpb_plan_destroy(p);
      return gpb__fail(GPB_EINVAL, "plan entry %zu: %s", i + 1, why);
    }
    p->e[i] = entries[i];
    uint64_t end = entries[i].offset + entries[i].size;
    if (end > p->extent) p->extent = end;
  }
  p->n = n;
  p->repeat = repeat_from;
  *out = p;
  return 0;
}

void gpb_plan_destroy(gpb_plan_t *plan) {
  if (!plan) return;
  free(plan->e);
  free(plan);
}

size_t gpb_plan_count(const gpb_plan_t *plan) { return plan ? plan->n : 0; }

size_t gpb_plan_repeat_from(const gpb_plan_t *plan) {
  return plan ? plan->repeat : 0;
}

const gpb_plan_entry_t *gpb_plan_entries(const gpb_plan_t *plan) {
  return plan ? plan->e : NULL;
}

uint64_t gpb_plan_extent(const gpb_plan_t *plan) {
  return plan ? plan->extent : 0;
}

/* One decimal field of a plan line; *s moves past it. */
static int plan_field(char **s, uint64_t *v) {
  char *end;
  while (**s == ' ' || **s == '\t') (*s)++;
  if (**s < '0' || **s > '9') return -1;
  errno = 0;
  unsigned long long x = strtoull(*s, &end, 10);
  if (errno) return -1;
  *v = x;
  *s = end;
  return 0;
}

/* Reads one line, its end of line kept, into buf (PLAN_LINE_MAX + 1
 * bytes): its length, 0 at the end of the file, -1 when it is too long,
 * -2 when it holds a NUL byte (what follows one would go unread). A
 * byte at a time, so that no input makes it hold more than a line. */
static long plan_line(FILE *f, char *buf) {
  size_t n = 0;
  int c;
  while ((c = getc(f)) != EOF) {
    if (n == PLAN_LINE_MAX) return -1;
    if (c == 0) return -2;
    buf[n++] = (char)c;
    if (c == '\n') break;
  }
  buf[n] = 0;
  return (long)n;
}

/* Opens path for reading when it is a regular file: a FIFO would block
 * the open, or the read, with no end (O_NONBLOCK keeps the open from
 * waiting for a writer), and a device or directory is no plan. */
static int plan_open(const char *path, FILE **out) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return gpb__fail(GPB_EIO, "%s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    close(fd);
    return gpb__fail(GPB_EIO, "%s: not a regular file", path);
  }
  /* Back to blocking reads (a regular file never blocks anyway). */
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  if (!(*out = fdopen(fd, "r"))) {
    close(fd);
    return gpb__fail(GPB_EHOSTMEM, "%s: no memory to read it", path);
  }
  return 0;
}

int gpb_plan_load(const char *path, gpb_plan_t **out) {
  if (!out) return gpb__fail(GPB_EINVAL, "out is NULL");
  *out = NULL;
  if (!path) return gpb__fail(GPB_EINVAL, "path is NULL");
  FILE *f;
  int rc = plan_open(path, &f);
  if (rc) return rc;
  gpb_plan_entry_t *e = NULL;
  size_t n = 0, cap = 0, line = 0, repeat = SIZE_MAX;
  char buf[PLAN_LINE_MAX + 1];
  long got;
  while ((got = plan_line(f, buf)) != 0) {
    line++;
    size_t len = (size_t)got;
    if (got < 0) {
      rc = gpb__fail(GPB_EFORMAT, "%s:%zu: %s", path, line,
                     got == -1 ? "line too long" : "NUL byte");
      break;
    }
    if (!len || buf[len - 1] != '\n') {
      rc = gpb__fail(GPB_EFORMAT, "%s:%zu: the last line has no end of line "
                     "(a cut file?)", path, line);
      break;
    }
    buf[--len] = 0;
    if (len && buf[len - 1] == '\r') buf[--len] = 0;
    if (line == 1) {
      if (strcmp(buf, PLAN_MAGIC)) {
        rc = gpb__fail(GPB_EFORMAT, "%s: not a plan (the first line is not "
                       "\"" PLAN_MAGIC "\")", path);
        break;
      }
      continue;
    }
    if (!buf[0] || buf[0] == '#') continue;
    gpb_plan_entry_t x;
    char *s = buf;
    if (!strncmp(s, "repeat", 6)) { /* "repeat FROM": the periodic part */
      s += 6;
      uint64_t r;
      if (repeat != SIZE_MAX || plan_field(&s, &r) || *s || r > SIZE_MAX / 2) {
        rc = gpb__fail(GPB_EFORMAT, "%s:%zu: expected one \"repeat FROM\" "
                       "line", path, line);
        break;
      }
      repeat = (size_t)r;
      continue;
    }
    if (plan_field(&s, &x.size) || plan_field(&s, &x.offset) || *s) {
      rc = gpb__fail(GPB_EFORMAT, "%s:%zu: expected \"SIZE OFFSET\" in "
                     "bytes", path, line);
      break;
    }
    const char *why = plan_bad(&x);
    if (why) {
      rc = gpb__fail(GPB_EFORMAT, "%s:%zu: %s", path, line, why);
      break;
    }
    if (n == cap) {
      size_t nc = cap ? cap * 2 : 1024;
      gpb_plan_entry_t *ne = realloc(e, nc * sizeof *e);
      if (!ne) {
        rc = gpb__fail(GPB_EHOSTMEM, "%s: no host memory for %zu entries",
                       path, nc);
        break;
      }
      e = ne;
      cap = nc;
    }
    e[n++] = x;
  }
  if (!rc && ferror(f))
    rc = gpb__fail(GPB_EIO, "%s: read error", path);
  if (!rc && line == 0)
    rc = gpb__fail(GPB_EFORMAT, "%s: empty file, not a plan", path);
  if (!rc && repeat != SIZE_MAX && repeat >= n)
    rc = gpb__fail(GPB_EFORMAT, "%s: repeat from entry %zu, past the last "
                   "(%zu)", path, repeat, n);
  fclose(f);
  if (!rc) rc = gpb_plan_create_periodic(e, n, repeat == SIZE_MAX ? n : repeat,
                                         out);
  free(e);
  return rc;
}

/* Writes the plan's text to f: nonzero on a write error. */
static int plan_write(const gpb_plan_t *plan, FILE *f) {
  int bad = fprintf(f, PLAN_MAGIC "\n# size offset, in bytes, in allocation "
                    "order; %zu entries, extent %llu\n", plan->n,
                    (unsigned long long)plan->extent) < 0;
  if (plan->repeat < plan->n && !bad)
    bad = fprintf(f, "# entries %zu on repeat after the last\nrepeat %zu\n",
                  plan->repeat, plan->repeat) < 0;
  for (size_t i = 0; i < plan->n && !bad; i++)
    bad = fprintf(f, "%llu %llu\n", (unsigned long long)plan->e[i].size,
                  (unsigned long long)plan->e[i].offset) < 0;
  return bad;
}

int gpb_plan_save(const gpb_plan_t *plan, const char *path) {
  if (!plan || !path) return gpb__fail(GPB_EINVAL, "plan or path is NULL");
  /* A fresh name beside the target: mkstemp creates it with O_EXCL, so a
   * link planted at any name is never followed, and two savers of one
   * path never share a file; the rename replaces the target at once. */
  size_t len = strlen(path);
  char *tmp = malloc(len + 8);
  if (!tmp) return gpb__fail(GPB_EHOSTMEM, "no host memory");
  memcpy(tmp, path, len);
  memcpy(tmp + len, ".XXXXXX", 8);
  int fd = mkstemp(tmp);
  if (fd < 0) {
    int rc = gpb__fail(GPB_EIO, "%s: %s", tmp, strerror(errno));
    free(tmp);
    return rc;
  }
  /* mkstemp makes it 0600; a plan is for others to read, as a file made
   * with the usual umask is (reading the umask would race other threads). */
  FILE *f = fdopen(fd, "w");
  int bad = !f || fchmod(fd, 0644) || plan_write(plan, f);
  int err = errno;
  if (f ? fclose(f) : close(fd)) bad = 1, err = errno;
  if (bad || rename(tmp, path)) {
    int rc = gpb__fail(GPB_EIO, "%s: %s", bad ? tmp : path,
                       strerror(bad ? (err ? err : EIO) : errno));
    unlink(tmp);
    free(tmp);
    return rc;
  }
  free(tmp);
  return 0;
}
