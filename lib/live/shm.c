/* SPDX-License-Identifier: MIT */
/*
 * shm.c: the live segment's names, paths, liveness and header checks,
 * shared by the writer and the reader, and the listing of published
 * pools (gpb_list_pools). shm.h gives the layout.
 */
#include "live/shm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>


int gpb__shm_check_name(const char *name) {
  size_t n = name ? strlen(name) : 0;
  if (n == 0 || n >= GPB_NAME_MAX)
    return gpb__fail(GPB_EINVAL, "pool name must be 1 to %d characters",
                     GPB_NAME_MAX - 1);
  if (name[0] == '.')
    return gpb__fail(GPB_EINVAL, "pool name '%s' starts with '.'", name);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
      return gpb__fail(GPB_EINVAL, "pool name '%s': character %zu is not one "
                       "of A-Z a-z 0-9 . _ -", name, i + 1);
  }
  return 0;
}

void gpb__shm_path(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "/" PUB_PREFIX "%s", name);
}

/* Start time of a process (field 22 of /proc/PID/stat), or 0 when it
 * cannot be read; *zombie is set for a process that has exited but not
 * been reaped (it still answers kill(pid, 0)). */
uint64_t gpb__shm_proc_start(pid_t pid, int *zombie) {
  char path[64], buf[1024];
  *zombie = 0;
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')'); /* the command name may hold spaces */
  if (!p || p[1] != ' ') return 0;
  p += 2;
  if (*p == 'Z' || *p == 'X') *zombie = 1;
  for (int field = 3; field < 22; field++) {
    p = strchr(p, ' ');
    if (!p) return 0;
    p++;
  }
  return strtoull(p, NULL, 10);
}

/* Whether the process that wrote a header still runs. A pid reused by
 * another process is caught by the start time where /proc is readable. */
int gpb__shm_alive(int32_t pid, uint64_t start) {
  if (pid <= 0) return 0;
  if (kill((pid_t)pid, 0) == -1 && errno == ESRCH) return 0;
  int zombie;
  uint64_t s = gpb__shm_proc_start((pid_t)pid, &zombie);
  if (zombie) return 0;
  if (start && s && s != start) return 0;
  return 1;
}

uint64_t gpb__shm_layout_total(uint64_t nslots, uint64_t kf_cap) {
  return PUB_HDR_SIZE + nslots * PUB_SLOT_SIZE + 2 * kf_cap * PUB_REC_SIZE;
}

/* Validates a mapped header against the file size. name NULL skips the
 * name check. Every field the reader later trusts is checked here. */
int gpb__shm_check_header(const pub_hdr_t *h, size_t fsize, const char *name) {
  if (fsize < PUB_HDR_SIZE)
    return gpb__fail(GPB_EFORMAT, "live segment is %zu bytes; its header "
                     "alone needs %u (truncated?)", fsize, PUB_HDR_SIZE);
  uint64_t magic = atomic_load_explicit(&h->magic, ACQ);
  if (magic != PUB_MAGIC)
    return gpb__fail(GPB_EFORMAT, "bad magic 0x%016llx: not a gpubuddy live "
                     "segment (or still being created)",
                     (unsigned long long)magic);
  if (h->version < PUB_VERSION_MIN || h->version > PUB_VERSION)
    return gpb__fail(GPB_EVERSION, "live segment has version %u; this library "
                     "reads versions %u to %u (a newer gpubuddy wrote it?)",
                     h->version, PUB_VERSION_MIN, PUB_VERSION);
  if (h->header_size != PUB_HDR_SIZE || h->slot_size != PUB_SLOT_SIZE ||
      h->rec_size != PUB_REC_SIZE)
    return gpb__fail(GPB_EFORMAT, "live segment sizes: header %u, slot %u, "
                     "record %u; expected %u, %u, %u", h->header_size,
                     h->slot_size, h->rec_size, PUB_HDR_SIZE, PUB_SLOT_SIZE,
                     PUB_REC_SIZE);
  uint32_t ns = h->nslots;
  if (ns < PUB_SLOTS_MIN || ns > PUB_SLOTS_MAX || (ns & (ns - 1)))
    return gpb__fail(GPB_EFORMAT, "live segment: ring of %u slots is not a "
                     "power of two from %u to %u", ns, PUB_SLOTS_MIN,
                     PUB_SLOTS_MAX);
  if (h->kf_cap == 0 || h->kf_cap > PUB_KF_MAX)
    return gpb__fail(GPB_EFORMAT, "live segment: keyframe capacity %llu is "
                     "not from 1 to %llu", (unsigned long long)h->kf_cap,
                     (unsigned long long)PUB_KF_MAX);
  uint64_t total = gpb__shm_layout_total(ns, h->kf_cap);
  /* The site table, when there is one, ends the segment (version 1 had
   * none: its words were padding, written as zeros). */
  uint64_t ss = h->sites_size;
  if ((ss == 0) != (h->sites_off == 0) || (h->version < 2 && ss) ||
      (ss && (h->sites_off != total || ss > PUB_SITES_MAX || ss % 8 ||
              ss < PUB_SITES_MIN)))
    return gpb__fail(GPB_EFORMAT, "live segment: site table of %llu bytes at "
                     "%llu; expected none, or 8 KiB to 64 MiB (a multiple "
                     "of 8) after the keyframes at %llu",
                     (unsigned long long)ss,
                     (unsigned long long)h->sites_off,
                     (unsigned long long)total);
  if (h->ring_off != PUB_HDR_SIZE ||
      h->kf_off[0] != PUB_HDR_SIZE + (uint64_t)ns * PUB_SLOT_SIZE ||
      h->kf_off[1] != h->kf_off[0] + h->kf_cap * PUB_REC_SIZE ||
      h->total_size != total + ss)
    return gpb__fail(GPB_EFORMAT, "live segment: section offsets do not "
                     "match a ring of %u slots, keyframes of %llu records "
                     "and %llu bytes of call sites", ns,
                     (unsigned long long)h->kf_cap, (unsigned long long)ss);
  total += ss;
  if (total > fsize)
    return gpb__fail(GPB_EFORMAT, "live segment header says %llu bytes; the "
                     "file has %zu (truncated?)", (unsigned long long)total,
                     fsize);
  uint64_t mb = h->min_block;
  if (mb < 16 || (mb & (mb - 1)) || mb > (1ull << 40))
    return gpb__fail(GPB_EFORMAT, "live segment: min block %llu is not a "
                     "power of two from 16 to 2^40", (unsigned long long)mb);
  uint64_t units = h->managed_size / mb;
  if (h->managed_size % mb || units == 0 || units > PUB_MAX_UNITS ||
      h->pool_size < h->managed_size)
    return gpb__fail(GPB_EFORMAT, "live segment: managed size %llu (pool "
                     "%llu) does not fit min block %llu (at most 2^36 blocks)",
                     (unsigned long long)h->managed_size,
                     (unsigned long long)h->pool_size, (unsigned long long)mb);
  if (h->num_orders != 64u - (uint32_t)__builtin_clzll(units) ||
      h->num_roots != (uint32_t)__builtin_popcountll(units))
    return gpb__fail(GPB_EFORMAT, "live segment: %u orders and %u roots do "
                     "not match %llu blocks", h->num_orders, h->num_roots,
                     (unsigned long long)units);
  if (h->backend <= GPB_BACKEND_AUTO || h->backend > GPB_BACKEND_VIRTUAL ||
      h->policy < 0 || h->policy >= GPB_NUM_POLICIES)
    return gpb__fail(GPB_EFORMAT, "live segment: backend %d or policy %d "
                     "unknown", h->backend, h->policy);
  if (h->pid <= 0)
    return gpb__fail(GPB_EFORMAT, "live segment: writer pid %d", h->pid);
  if (memchr(h->name, '\0', sizeof h->name) == NULL)
    return gpb__fail(GPB_EFORMAT, "live segment: name is not terminated");
  if (name && strcmp(h->name, name) != 0)
    return gpb__fail(GPB_EFORMAT, "live segment for '%s' names itself '%.63s'",
                     name, h->name);
  return 0;
}

/* Maps a segment by path: read-write for readers, read-only to inspect. */
int gpb__shm_map(const char *path, int writable, void **map, size_t *size,
                   struct stat *st_out) {
  /* O_NONBLOCK: a FIFO planted under the name must not block the open
   * (anyone can create one in /dev/shm); it is refused below. */
  int fd = shm_open(path, (writable ? O_RDWR : O_RDONLY) | O_NONBLOCK, 0);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT)
      return gpb__fail(GPB_ENOTFOUND, "no pool is published as '%s' "
                       "(/dev/shm%s does not exist)", path + 1 + strlen(PUB_PREFIX),
                       path);
    if (e == EACCES || e == EPERM)
      return gpb__fail(GPB_EPERM, "cannot open /dev/shm%s: %s", path,
                       strerror(e));
    return gpb__fail(GPB_EIO, "cannot open /dev/shm%s: %s", path, strerror(e));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return gpb__fail(GPB_EIO, "cannot stat /dev/shm%s: %s", path, strerror(e));
  }
  if (st_out) *st_out = st;
  /* Another user's file under our name is neither read nor replaced: its
   * contents are theirs to garble, and its mode may let us attach. */
  if (st.st_uid != geteuid()) {
    close(fd);
    return gpb__fail(GPB_EPERM, "/dev/shm%s belongs to uid %u, not to this "
                     "user (uid %u): not a segment of ours", path,
                     (unsigned)st.st_uid, (unsigned)geteuid());
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return gpb__fail(GPB_EFORMAT, "/dev/shm%s is not a regular file (a FIFO "
                     "or device?): not a live segment", path);
  }
  if (st.st_size < (off_t)PUB_HDR_SIZE) {
    close(fd);
    return gpb__fail(GPB_EFORMAT, "/dev/shm%s is %lld bytes; a live segment "
                     "header alone needs %u (truncated?)", path,
                     (long long)st.st_size, PUB_HDR_SIZE);
  }
  if ((uint64_t)st.st_size > ((uint64_t)1 << 40)) {
    close(fd);
    return gpb__fail(GPB_EFORMAT, "/dev/shm%s is %lld bytes: too large for a "
                     "live segment", path, (long long)st.st_size);
  }
  size_t n = (size_t)st.st_size;
  void *m = mmap(NULL, n, writable ? PROT_READ | PROT_WRITE : PROT_READ,
                 MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (m == MAP_FAILED)
    return gpb__fail(GPB_EIO, "cannot map /dev/shm%s: %s", path, strerror(e));
  *map = m;
  *size = n;
  return 0;
}


/* Whether the segment published as name is live (1), a stale one of ours
 * whose writer is gone or which it closed (0), or neither: not ours, not
 * a segment, or unreadable (-1). */
static int shm_state(const char *name) {
  char path[GPB_NAME_MAX + 16];
  if (strlen(name) >= GPB_NAME_MAX || gpb__shm_check_name(name)) return -1;
  gpb__shm_path(path, sizeof path, name);
  void *map;
  size_t size;
  if (gpb__shm_map(path, 0, &map, &size, NULL)) return -1;
  const pub_hdr_t *h = map;
  int st = -1;
  /* The file may be cut short while we read its header. */
  int g = gpb__guard_add(map, size, NULL);
  if (gpb__shm_check_header(h, size, name) == 0)
    st = !atomic_load_explicit(&h->closed, ACQ) &&
         gpb__shm_alive(h->pid, h->pid_start);
  if (gpb__guard_cut(g)) st = -1;
  gpb__guard_remove(g);
  munmap(map, size);
  return st;
}

/* Calls fn for every segment name whose state is `want`. */
static int shm_each(int want, void (*fn)(const char *name, void *user),
                    void *user) {
  if (!fn) return gpb__fail(GPB_EINVAL, "fn is NULL");
  DIR *d = opendir("/dev/shm");
  if (!d) return 0; /* no POSIX shared memory here: nothing published */
  struct dirent *e;
  size_t plen = strlen(PUB_PREFIX);
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, PUB_PREFIX, plen) != 0) continue;
    const char *name = e->d_name + plen;
    if (shm_state(name) == want) fn(name, user);
  }
  closedir(d);
  return 0;
}

int gpb_list_pools(void (*fn)(const char *name, void *user), void *user) {
  return shm_each(1, fn, user);
}

int gpb_list_stale_pools(void (*fn)(const char *name, void *user), void *user) {
  return shm_each(0, fn, user);
}

int gpb_remove_stale_pool(const char *name) {
  int st = name ? shm_state(name) : -1;
  if (st != 0)
    return gpb__fail(st == 1 ? GPB_EBUSY : GPB_ENOTFOUND,
                     st == 1 ? "pool '%s' is live: its writer still runs"
                             : "'%s' is not a stale segment of this user's",
                     name ? name : "(null)");
  char path[GPB_NAME_MAX + 16];
  gpb__shm_path(path, sizeof path, name);
  if (shm_unlink(path) != 0 && errno != ENOENT)
    return gpb__fail(GPB_EIO, "cannot remove /dev/shm%s: %s", path,
                     strerror(errno));
  return 0;
}
