/* SPDX-License-Identifier: MIT */
/*
 * sites.c: call sites. With GPB_CFG_CALLSITES (or GPB_CALLSITES=DEPTH) a
 * pool records where each allocation came from: the caller's return
 * addresses, innermost first, interned into a small id that the
 * allocation's record, its events, block visits and traces carry.
 *
 * Capture. Depth 1 is the return address the public entry point was
 * called from (__builtin_return_address(0), one load, no unwinding).
 * Deeper stacks come from backtrace(), which unwinds through the
 * library's own frames too: the entry's return address is looked up in
 * what it returns and the stack is taken from there.
 *
 * Interning. The stack is hashed with gpb__hash64, chained over its
 * addresses, and looked up in an allocation table (alloctab.c: open
 * addressing, incremental growth) keyed by the hash, whose record keeps
 * the id. Two stacks with one 64-bit hash would share an id: with the
 * most sites a pool keeps (GPB_MAX_SITES), the chance is below 1e-9.
 * Each thread keeps the last 64 stacks it saw in a direct-mapped cache,
 * so a program allocating from the same few places takes the table's
 * lock only for new stacks.
 *
 * Symbols. A new site's addresses are resolved once, with dladdr(): the
 * module's path, the offset of the call (return address - 1) from its
 * load base (what addr2line takes), and the nearest exported symbol, if
 * any. That is all the
 * hot path pays for symbols; tools and people turn module+offset into
 * file and line (addr2line) later. The site's text, "MODULE+0xOFF
 * SYMBOL;..." (docs/TRACE_FORMAT.md), is made then too, for traces.
 *
 * Readers need no lock: a site is filled before the count that makes its
 * id valid is stored (release), sites live in chunks that never move,
 * and nothing about a site changes after.
 */
#define _GNU_SOURCE /* dladdr, Dl_info */
#include "pool/pool.h"

#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef HAVE_EXECINFO_H
#include <execinfo.h>
#endif

#define SITES_CHUNK 256u /* sites per chunk */
#define SITES_NCHUNK ((GPB_MAX_SITES + SITES_CHUNK) / SITES_CHUNK)
#define SITES_TLS 64u    /* a thread's cache of recent stacks */
#define SITES_SKIP_MAX 16 /* library frames backtrace() may see above ra */

typedef struct sites_site {
  uint32_t n;          /* frames */
  gpb_frame_t *frames; /* n of them, then the text, in one allocation */
  const char *text;
  size_t text_len;
} sites_site_t;

struct gpb__sites {
  pthread_mutex_t lock; /* adding a site; readers take none */
  uint32_t depth;
  uint64_t uid; /* tells tables apart in threads' caches */
  _Atomic uint32_t count; /* ids 1..count are valid */
  sites_site_t *chunk[SITES_NCHUNK];
  gpb__atab_t index; /* stack hash >> 1 -> id (in .units) */
  char **modules;    /* module paths, each once */
  uint32_t nmodules, cap_modules;
};

static _Atomic uint64_t sites_uid;

typedef struct sites_tls {
  uint64_t uid, hash;
  uint32_t id;
} sites_tls_t;
/* A pointer, not the array: the library's TLS is initial-exec (no
 * __tls_get_addr call; clock.c, arena.c), so all of it comes out of the
 * small static block that a dlopen (Python's ctypes) must find room in.
 * The array is the heap's, freed when its thread exits. */
static _Thread_local sites_tls_t *sites_cache
    __attribute__((tls_model("initial-exec")));
static pthread_key_t sites_key;
static pthread_once_t sites_once = PTHREAD_ONCE_INIT;

/* Runs in the exiting thread: a later allocation there (another key's
 * destructor) makes a new cache rather than use a freed one. */
static void sites_tls_free(void *c) {
  sites_cache = NULL;
  free(c);
}

static void sites_key_make(void) {
  pthread_key_create(&sites_key, sites_tls_free);
}

/* This thread's cache, or NULL without memory. */
static sites_tls_t *sites_tls(void) {
  if (GPB__LIKELY(sites_cache != NULL)) return sites_cache;
  pthread_once(&sites_once, sites_key_make);
  sites_tls_t *c = calloc(SITES_TLS, sizeof *c);
  if (c && pthread_setspecific(sites_key, c)) {
    free(c);
    c = NULL;
  }
  return sites_cache = c;
}

int gpb__sites_open(uint32_t depth, gpb__sites_t **out) {
  *out = NULL;
  if (depth == 0) return 0;
  if (depth > GPB_SITE_DEPTH_MAX) depth = GPB_SITE_DEPTH_MAX;
#ifndef HAVE_EXECINFO_H
  depth = 1; /* no unwinder: the caller alone */
#endif
  gpb__sites_t *s = calloc(1, sizeof *s);
  if (!s || gpb__atab_init(&s->index, 64)) {
    free(s);
    return gpb__fail(GPB_EHOSTMEM, "no host memory for the call sites");
  }
  pthread_mutex_init(&s->lock, NULL);
  s->depth = depth;
  s->uid = atomic_fetch_add(&sites_uid, 1) + 1;
#ifdef HAVE_EXECINFO_H
  /* The first backtrace() loads the unwinder (dlopen, malloc): once here
   * rather than inside some allocation. */
  if (depth > 1) {
    void *pc[2];
    backtrace(pc, 2);
  }
#endif
  *out = s;
  return 0;
}

void gpb__sites_close(gpb__sites_t *s) {
  if (!s) return;
  for (uint32_t c = 0; c < SITES_NCHUNK; c++) {
    if (!s->chunk[c]) continue;
    for (uint32_t i = 0; i < SITES_CHUNK; i++) free(s->chunk[c][i].frames);
    free(s->chunk[c]);
  }
  for (uint32_t i = 0; i < s->nmodules; i++) free(s->modules[i]);
  free(s->modules);
  gpb__atab_fini(&s->index);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

static const sites_site_t *sites_get(const gpb__sites_t *s, uint32_t id) {
  if (!s || id == 0 ||
      id > atomic_load_explicit(&s->count, memory_order_acquire))
    return NULL;
  return &s->chunk[(id - 1) / SITES_CHUNK][(id - 1) % SITES_CHUNK];
}

const char *gpb__sites_text(const gpb__sites_t *s, uint32_t id) {
  const sites_site_t *e = sites_get(s, id);
  return e ? e->text : NULL;
}

int gpb__sites_frames(const gpb__sites_t *s, uint32_t id, gpb_frame_t *frames,
                      uint32_t max, uint32_t *n) {
  const sites_site_t *e = sites_get(s, id);
  if (!e) return gpb__fail(GPB_ENOTFOUND, "no call site %u%s", id,
                           s ? "" : " (call sites are off: GPB_CFG_CALLSITES)");
  for (uint32_t i = 0; i < e->n && i < max; i++) frames[i] = e->frames[i];
  if (n) *n = e->n;
  return 0;
}

/* The module path, stored once. Lock held. */
static const char *sites_module(gpb__sites_t *s, const char *path) {
  for (uint32_t i = s->nmodules; i-- > 0;)
    if (!strcmp(s->modules[i], path)) return s->modules[i];
  if (s->nmodules == s->cap_modules) {
    uint32_t c = s->cap_modules ? 2 * s->cap_modules : 16;
    char **m = realloc(s->modules, c * sizeof *m);
    if (!m) return NULL;
    s->modules = m;
    s->cap_modules = c;
  }
  char *d = strdup(path);
  if (d) s->modules[s->nmodules++] = d;
  return d;
}

/* Characters that would break a trace line or a frame list become '?'. */
static void sites_clean(char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)p[i] < 32 || p[i] == ';' || p[i] == 127) p[i] = '?';
}

/* dladdr() for address a: *info filled (zeroed when nothing is known,
 * so dli_fbase 0 makes the offset the address), and the module's path
 * as stored, or NULL. The main program's path, which dladdr gives as
 * the program was invoked (argv[0], maybe relative), comes from
 * /proc/self/exe instead. Lock held. */
static const char *sites_resolve(gpb__sites_t *s, const void *a,
                                 Dl_info *info) {
  memset(info, 0, sizeof *info);
#ifdef RTLD_DL_LINKMAP
  struct link_map *lm = NULL;
  if (!dladdr1(a, info, (void **)&lm, RTLD_DL_LINKMAP)) {
    memset(info, 0, sizeof *info);
    return NULL;
  }
  /* The offset is from the link map's base (l_addr), which is 0 for a
   * program not built as PIE: addr2line takes its addresses as they are,
   * and a PIE's or a library's relative to where it was loaded. */
  if (lm) info->dli_fbase = (void *)lm->l_addr;
  if (lm && lm->l_name && !lm->l_name[0]) {
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
      exe[k] = 0;
      return sites_module(s, exe);
    }
  }
#else
  if (!dladdr(a, info)) {
    memset(info, 0, sizeof *info);
    return NULL;
  }
#endif
  if (!info->dli_fname || !*info->dli_fname) {
    info->dli_fbase = NULL;
    return NULL;
  }
  const char *m = sites_module(s, info->dli_fname);
  if (!m) info->dli_fbase = NULL;
  return m;
}

/* The id the next site gets, its chunk made; 0 when the table is full
 * (later stacks are unknown) or out of memory. Lock held. */
static uint32_t sites_next(gpb__sites_t *s) {
  uint32_t id = atomic_load_explicit(&s->count, memory_order_relaxed) + 1;
  if (id > GPB_MAX_SITES) return 0;
  if (!s->chunk[(id - 1) / SITES_CHUNK] &&
      !(s->chunk[(id - 1) / SITES_CHUNK] = calloc(SITES_CHUNK, sizeof(sites_site_t))))
    return 0;
  return id;
}

/* Makes site id valid for readers, with its n frames and text (one
 * allocation, mem). Lock held. */
static uint32_t sites_publish(gpb__sites_t *s, uint32_t id, uint32_t n,
                              gpb_frame_t *fr, const char *text, size_t len) {
  sites_site_t *e = &s->chunk[(id - 1) / SITES_CHUNK][(id - 1) % SITES_CHUNK];
  e->n = n;
  e->frames = fr;
  e->text = text;
  e->text_len = len;
  atomic_store_explicit(&s->count, id, memory_order_release);
  return id;
}

/* Resolves and stores a new site. Lock held. Its id, or 0. */
static uint32_t sites_add(gpb__sites_t *s, void *const *pc, uint32_t n) {
  uint32_t id = sites_next(s);
  if (!id) return 0;
  Dl_info info[GPB_SITE_DEPTH_MAX];
  const char *mod[GPB_SITE_DEPTH_MAX];
  size_t text_need = 1, sym_need = 0;
  for (uint32_t i = 0; i < n; i++) {
    /* The call, not the return address: a call that ends a function
     * (noreturn) returns into the next one. */
    mod[i] = sites_resolve(s, (const char *)pc[i] - 1, &info[i]);
    size_t sl = info[i].dli_sname ? strlen(info[i].dli_sname) : 0;
    text_need += (mod[i] ? strlen(mod[i]) : 0) + 24 + sl;
    sym_need += sl + 1;
  }
  size_t fb = n * sizeof(gpb_frame_t);
  char *mem = malloc(fb + text_need + sym_need);
  if (!mem) return 0;
  gpb_frame_t *fr = (gpb_frame_t *)(void *)mem;
  char *text = mem + fb, *t = text;
  char *sy = text + text_need; /* the symbols' own copies */
  for (uint32_t i = 0; i < n; i++) {
    uint64_t a = (uint64_t)(uintptr_t)pc[i];
    fr[i].pc = a;
    fr[i].module = mod[i] ? mod[i] : "";
    fr[i].offset = a - 1 - (uint64_t)(uintptr_t)info[i].dli_fbase;
    const char *sn = info[i].dli_sname ? info[i].dli_sname : "";
    size_t sl = strlen(sn);
    memcpy(sy, sn, sl + 1);
    sites_clean(sy, sl);
    fr[i].symbol = sy;
    sy += sl + 1;
    if (i) *t++ = ';';
    char *f0 = t;
    if (mod[i]) {
      size_t ml = strlen(mod[i]);
      memcpy(t, mod[i], ml);
      t += ml;
      t += sprintf(t, "+0x%llx", (unsigned long long)fr[i].offset);
    } else {
      t += sprintf(t, "0x%llx", (unsigned long long)fr[i].offset);
    }
    if (sl) {
      *t++ = ' ';
      memcpy(t, sn, sl);
      t += sl;
    }
    sites_clean(f0, (size_t)(t - f0));
  }
  *t = 0;
  return sites_publish(s, id, n, fr, text, (size_t)(t - text));
}

/* One frame of a text site, split in place: "FILE:LINE NAME" (a Python
 * frame) into file as module, line as offset, name as symbol; "MODULE+
 * 0xOFF [SYMBOL]" (a C frame a framework unwound) into its parts. */
static void sites_text_frame(char *f, gpb_frame_t *fr) {
  char *sp = strrchr(f, ' '), *colon, *plus = NULL, *end;
  fr->pc = 0;
  fr->offset = 0;
  fr->symbol = "";
  fr->module = f;
  if (sp) {
    *sp = 0;
    fr->symbol = sp + 1;
  }
  for (char *q = f; (q = strstr(q, "+0x")) != NULL; q++) plus = q;
  if (plus && plus[3]) {
    unsigned long long off = strtoull(plus + 3, &end, 16);
    if (!*end) {
      *plus = 0;
      fr->offset = off;
      return;
    }
  }
  colon = strrchr(f, ':');
  if (colon && colon[1] >= '0' && colon[1] <= '9') {
    *colon = 0;
    fr->offset = strtoull(colon + 1, NULL, 10);
  }
}

/* Stores a site given as its frames' text, innermost first, ';' between
 * them (at most GPB_SITE_DEPTH_MAX: the rest is dropped). Lock held. Its
 * id, or 0. */
static uint32_t sites_add_text(gpb__sites_t *s, const char *text) {
  uint32_t id = sites_next(s), n = 1;
  if (!id) return 0;
  size_t len = 0;
  for (; text[len]; len++)
    if (text[len] == ';' && n++ == GPB_SITE_DEPTH_MAX) break;
  n = n > GPB_SITE_DEPTH_MAX ? GPB_SITE_DEPTH_MAX : n;
  char *mem = malloc(n * sizeof(gpb_frame_t) + 2 * (len + 1));
  if (!mem) return 0;
  gpb_frame_t *fr = (gpb_frame_t *)(void *)mem;
  char *t = mem + n * sizeof(gpb_frame_t), *w = t + len + 1;
  memcpy(t, text, len);
  t[len] = 0;
  for (size_t i = 0; i < len; i++) /* a trace line's text: no control bytes */
    if ((unsigned char)t[i] < 32 || t[i] == 127) t[i] = '?';
  memcpy(w, t, len + 1);
  for (uint32_t i = 0; i < n; i++) {
    char *end = strchr(w, ';');
    if (end) *end = 0;
    sites_text_frame(w, &fr[i]);
    w = end ? end + 1 : w + strlen(w);
  }
  return sites_publish(s, id, n, fr, t, len);
}

uint32_t gpb__sites_intern(gpb__sites_t *s, uint64_t key, const char *text) {
  /* Salted: a caller's key never meets a stack of addresses' hash. */
  uint64_t h = gpb__hash64(key ^ 0x5157e5ab7e57ULL);
  pthread_mutex_lock(&s->lock);
  const gpb__arec_t *r = gpb__atab_find(&s->index, h >> 1);
  uint32_t id = r ? (uint32_t)r->units : 0;
  if (!r && (id = sites_add_text(s, text)) != 0) {
    gpb__arec_t rec = {.units = id};
    gpb__atab_insert(&s->index, h >> 1, &rec);
  }
  pthread_mutex_unlock(&s->lock);
  return id;
}

uint32_t gpb__sites_here(gpb__sites_t *s, void *ra) {
  void *pc[GPB_SITE_DEPTH_MAX + SITES_SKIP_MAX];
  uint32_t n = 1;
  void *const *st = pc;
  pc[0] = ra;
#ifdef HAVE_EXECINFO_H
  if (s->depth > 1) {
    int m = backtrace(pc, (int)(s->depth + SITES_SKIP_MAX));
    int i = 0;
    while (i < m && i < SITES_SKIP_MAX && pc[i] != ra) i++;
    if (i < m && pc[i] == ra) {
      st = pc + i;
      n = (uint32_t)(m - i) < s->depth ? (uint32_t)(m - i) : s->depth;
    } else { /* not found (an odd unwind): the caller alone */
      pc[0] = ra;
      n = 1;
    }
  }
#endif
  uint64_t h = gpb__hash64((uint64_t)(uintptr_t)st[0]);
  for (uint32_t i = 1; i < n; i++)
    h = gpb__hash64(h ^ (uint64_t)(uintptr_t)st[i]);
  sites_tls_t *c = sites_tls();
  if (c) {
    c += h & (SITES_TLS - 1);
    if (c->uid == s->uid && c->hash == h) return c->id;
  }
  pthread_mutex_lock(&s->lock);
  const gpb__arec_t *r = gpb__atab_find(&s->index, h >> 1);
  uint32_t id = r ? (uint32_t)r->units : 0;
  if (!r && (id = sites_add(s, st, n)) != 0) {
    gpb__arec_t rec = {.units = id};
    gpb__atab_insert(&s->index, h >> 1, &rec); /* lost: found again later
                                                  as a new site, no harm */
  }
  pthread_mutex_unlock(&s->lock);
  if (c) { /* 0 too: a full table need not be asked again */
    c->uid = s->uid;
    c->hash = h;
    c->id = id;
  }
  return id;
}
