/* SPDX-License-Identifier: MIT */
/*
 * sitename.c: a call site's name and its frames, the user's first
 * (sitename.h says why).
 *
 * A frame's text is parsed into a place (a file or module) and a
 * function: "FILE:LINE NAME", "MODULE+0xOFF [SYMBOL]", or a bare
 * "0xADDRESS" (no module held it: never the user's). A frame is the
 * framework's when its place contains a pattern or its function starts
 * with one. Symbolizing runs addr2line (binutils) on the module, without
 * a shell, once per distinct frame, and keeps the answer; where this
 * machine lacks the module, c++filt demangles the symbol recorded.
 */
#define _POSIX_C_SOURCE 200809L
#include "sitename.h"

#include "gpubuddy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* Built in: PyTorch (Python package, libtorch, c10, ATen), CPython's
 * runtime, the C++ runtime, and gpubuddy itself. The Python packages are
 * matched where they are installed (or in a source checkout), not by a
 * bare "/torch/": a user's own samples/torch/ is the user's code. */
static const char *const sitename_builtin[] = {
    "-packages/torch/", "pytorch/torch/", "torch/csrc/", "c10/", "aten/", "ATen/", "libtorch",
    "libc10", "c10::", "at::", "torch::", "caffe2::", "pybind11::",
    "std::", "__gnu_cxx::", "libstdc++", "libpython", "Python/",
    "Objects/", "Include/", "<frozen ", "_Py", "PyEval_", "PyObject_",
    "libc.so", "libgcc_s", "libgpubuddy", "-packages/gpubuddy/", "python/gpubuddy/", "gpb_", "gpb::", "__libc_", "??",
    "CUDACachingAllocator", "THC", "libcuda", NULL};

/* The place and function of a frame: [*p, *p + *np) and *fn. */
static void sitename_parse(const char *f, const char **p, size_t *np,
                           const char **fn) {
  *p = f;
  *fn = "";
  const char *plus = strstr(f, "+0x");
  const char *sp = strchr(f, ' ');
  if (plus && (!sp || plus < sp)) { /* MODULE+0xOFF [SYMBOL] */
    *np = (size_t)(plus - f);
    if (sp) *fn = sp + 1;
    return;
  }
  /* FILE:LINE NAME: the last ':' before the first space after digits. */
  for (const char *c = f; (c = strchr(c, ':')); c++) {
    size_t d = strspn(c + 1, "0123456789?");
    if (d && (c[1 + d] == ' ' || !c[1 + d])) {
      *np = (size_t)(c - f);
      if (c[1 + d]) *fn = c + 2 + d;
      return;
    }
  }
  *np = sp ? (size_t)(sp - f) : strlen(f);
  if (sp) *fn = sp + 1;
}

/* Whether pattern pat (n bytes) is in the place or starts the function. */
static int sitename_match(const char *pl, size_t npl, const char *fn,
                          const char *pat, size_t n) {
  if (!n) return 0;
  if (!strncmp(fn, pat, n)) return 1;
  for (size_t i = 0; i + n <= npl; i++)
    if (!memcmp(pl + i, pat, n)) return 1;
  return 0;
}

/* Whether a pattern of the comma-separated list s matches. */
static int sitename_list(const char *s, const char *pl, size_t npl,
                         const char *fn) {
  while (s && *s) {
    size_t n = strcspn(s, ",");
    if (sitename_match(pl, npl, fn, s, n)) return 1;
    s += n + (s[n] == ',');
  }
  return 0;
}

void gpbt_sitename_parts(const char *frame, const char **place,
                         size_t *nplace, unsigned long *line,
                         const char **fn) {
  sitename_parse(frame, place, nplace, fn);
  *line = 0;
  const char *c = *place + *nplace;
  if (*c == ':') *line = strtoul(c + 1, NULL, 10);
}

int gpbt_sitename_is_framework(const char *frame, const char *extra) {
  const char *pl, *fn;
  size_t npl;
  sitename_parse(frame, &pl, &npl, &fn);
  if (!strncmp(frame, "0x", 2) || !*frame) return 1;
  /* CPython's own modules, not a package installed beside them (the
   * user's libraries, transformers say, live in site-packages). */
  if (sitename_match(pl, npl, "", "/lib/python3", 12) &&
      !sitename_match(pl, npl, "", "-packages/", 10))
    return 1;
  for (int i = 0; sitename_builtin[i]; i++)
    if (sitename_match(pl, npl, fn, sitename_builtin[i],
                       strlen(sitename_builtin[i])))
      return 1;
  return sitename_list(extra, pl, npl, fn) ||
         sitename_list(getenv("GPB_SITE_FRAMEWORK"), pl, npl, fn);
}

/* ------------------------------------------------------- symbolizing */

typedef struct sym_entry {
  char *frame, *text; /* text: the symbolized frame, or NULL: as it was */
} sym_entry_t;

static sym_entry_t *sym_cache;
static size_t sym_n, sym_cap;

/* A module named without a directory (dladdr gives an executable's as
 * it was run: "gpubuddy-sample-kvcache") found on PATH, into buf. */
static const char *sym_find(const char *module, char *buf, size_t cap) {
  if (strchr(module, '/')) return module;
  const char *path = getenv("PATH");
  while (path && *path) {
    size_t n = strcspn(path, ":");
    if (n && (size_t)snprintf(buf, cap, "%.*s/%s", (int)n, path, module) < cap &&
        !access(buf, R_OK))
      return buf;
    path += n + (path[n] == ':');
  }
  return module;
}

/* Runs argv[0] with argv (no shell) and reads what it prints into buf
 * (NUL-ended, cut at cap - 1 bytes). 0 when it exited with status 0. */
static int sym_run(char *const argv[], char *buf, size_t cap) {
  int fd[2];
  if (pipe(fd)) return -1;
  pid_t pid = fork();
  if (pid < 0) {
    close(fd[0]);
    close(fd[1]);
    return -1;
  }
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    close(fd[1]);
    execvp(argv[0], argv);
    _exit(127);
  }
  close(fd[1]);
  size_t n = 0;
  ssize_t k;
  while (n < cap - 1 && (k = read(fd[0], buf + n, cap - 1 - n)) > 0)
    n += (size_t)k;
  buf[n] = 0;
  close(fd[0]);
  int st;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : -1;
}

/* Runs addr2line -f -C -e MODULE OFF and reads its two lines into out:
 * "FILE:LINE FUNC", or "MODULE+OFF FUNC" for a module with symbols but no
 * line information (a wheel's libtorch). 0, or -1 (no answer worth
 * keeping). */
static int sym_addr2line(const char *named, const char *off, char *out,
                         size_t cap) {
  char found[4096], buf[2048];
  const char *module = sym_find(named, found, sizeof found);
  if (access(module, R_OK)) return -1;
  char *argv[] = {"addr2line", "-f", "-C", "-e", (char *)module, (char *)off, NULL};
  char *nl;
  if (sym_run(argv, buf, sizeof buf) || !(nl = strchr(buf, '\n'))) return -1;
  *nl = 0;
  char *file = nl + 1;
  file[strcspn(file, "\n (")] = 0;
  const char *fn = strcmp(buf, "??") ? buf : NULL;
  if (!file[0] || file[0] == ':' || !strncmp(file, "??", 2)) { /* no lines */
    if (!fn) return -1;
    return (size_t)snprintf(out, cap, "%s+%s %s", named, off, fn) < cap ? 0 : -1;
  }
  /* file is "PATH:LINE"; a cut answer is no answer */
  return (size_t)snprintf(out, cap, "%s %s", file, fn ? fn : "?") < cap ? 0 : -1;
}

/* A frame whose module this machine lacks (a trace read elsewhere): its
 * mangled C++ symbol, as the pool recorded it, demangled by c++filt into
 * out, "MODULE+OFF NAME". 0, or -1. */
static int sym_demangle(const char *named, const char *off, const char *sym,
                        char *out, size_t cap) {
  char buf[2048];
  char *argv[] = {"c++filt", (char *)sym, NULL};
  if (strncmp(sym, "_Z", 2) || sym_run(argv, buf, sizeof buf)) return -1;
  buf[strcspn(buf, "\n")] = 0;
  if (!buf[0] || !strcmp(buf, sym)) return -1;
  return (size_t)snprintf(out, cap, "%s+%s %s", named, off, buf) < cap ? 0 : -1;
}

/* The frame symbolized, or NULL: keep it as it is. */
static const char *sym_lookup(const char *f) {
  for (size_t i = 0; i < sym_n; i++)
    if (!strcmp(sym_cache[i].frame, f)) return sym_cache[i].text;
  const char *plus = strstr(f, "+0x");
  char text[2304], module[1024], off[32];
  int ok = -1;
  if (plus && (size_t)(plus - f) < sizeof module && plus != f) {
    memcpy(module, f, (size_t)(plus - f));
    module[plus - f] = 0;
    size_t n = strspn(plus + 1, "0123456789abcdefxABCDEF");
    if (n < sizeof off) {
      memcpy(off, plus + 1, n);
      off[n] = 0;
      ok = sym_addr2line(module, off, text, sizeof text);
      const char *sym = strchr(plus, ' ');
      if (ok && sym)
        ok = sym_demangle(module, off, sym + 1, text, sizeof text);
    }
  }
  if (sym_n == sym_cap) {
    size_t cap = sym_cap ? sym_cap * 2 : 64;
    sym_entry_t *v = realloc(sym_cache, cap * sizeof *v);
    if (!v) return NULL;
    sym_cache = v;
    sym_cap = cap;
  }
  sym_entry_t *e = &sym_cache[sym_n];
  e->frame = strdup(f);
  e->text = ok ? NULL : strdup(text);
  if (!e->frame) {
    free(e->text);
    return NULL;
  }
  sym_n++;
  return e->text;
}

/* ------------------------------------------------------------ split */

void gpbt_sitename_free(gpbt_sitename_t *s) {
  for (size_t i = 0; s->frames && i < s->nframes; i++) free(s->frames[i]);
  free(s->frames);
  free(s->name);
  memset(s, 0, sizeof *s);
}

/* Frame i of text (k bytes at t) as a new string, symbolized if asked. */
static char *sitename_frame(const char *t, size_t k, unsigned flags) {
  char *f = malloc(k + 1);
  if (!f) return NULL;
  memcpy(f, t, k);
  f[k] = 0;
  const char *s = flags & GPBT_SITENAME_SYMBOLIZE ? sym_lookup(f) : NULL;
  if (s) {
    char *c = strdup(s);
    free(f);
    f = c;
  }
  return f;
}

int gpbt_sitename(const char *text, const char *extra, unsigned flags,
                  gpbt_sitename_t *out) {
  memset(out, 0, sizeof *out);
  size_t n = *text ? 1 : 0;
  for (const char *c = text; *c; c++) n += *c == ';';
  char **all = calloc(n ? n : 1, sizeof *all);
  char *is_fw = calloc(n ? n : 1, 1);
  out->frames = calloc(n ? n : 1, sizeof *out->frames);
  if (!all || !is_fw || !out->frames) goto oom;
  const char *t = text;
  for (size_t i = 0; i < n; i++) {
    size_t k = strcspn(t, ";");
    if (!(all[i] = sitename_frame(t, k, flags))) goto oom;
    is_fw[i] = (char)gpbt_sitename_is_framework(all[i], extra);
    t += k + (t[k] == ';');
  }
  /* The user's frames, then the framework's, each innermost first. */
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = 0; i < n; i++)
      if (flags & GPBT_SITENAME_IN_ORDER ? pass == 0 : is_fw[i] == pass)
        out->frames[out->nframes++] = all[i];
  for (size_t i = 0; i < n; i++) out->nuser += !is_fw[i];
  size_t first = 0; /* the name: the first user frame in text order */
  while (first < n && is_fw[first]) first++;
  out->name = strdup(n ? all[first < n ? first : 0] : "?");
  free(all);
  free(is_fw);
  if (!out->name) {
    gpbt_sitename_free(out);
    return GPB_EHOSTMEM;
  }
  return 0;
oom:
  for (size_t i = 0; all && i < n; i++) free(all[i]);
  free(all);
  free(is_fw);
  free(out->frames);
  memset(out, 0, sizeof *out);
  return GPB_EHOSTMEM;
}

/* ------------------------------------------------------------ labels */

void gpbt_sitename_short(const char *frame, char *buf, size_t cap) {
  const char *pl, *fn;
  size_t npl;
  sitename_parse(frame, &pl, &npl, &fn);
  const char *base = pl;
  for (size_t k = 0; k < npl; k++)
    if (pl[k] == '/') base = pl + k + 1;
  snprintf(buf, cap, "%s", base);
}

/* Whether a's and b's first k user frames are the same. */
static int sitename_same(const gpbt_sitename_t *a, const gpbt_sitename_t *b,
                         size_t k) {
  size_t na = a->nuser ? a->nuser : a->nframes > 0;
  size_t nb = b->nuser ? b->nuser : b->nframes > 0;
  if ((na < k) != (nb < k)) return 0;
  for (size_t x = 0; x < k && x < na && x < nb; x++)
    if (strcmp(a->frames[x], b->frames[x])) return 0;
  return 1;
}

int gpbt_sitename_label(const gpbt_sitename_t *v, size_t n, size_t i,
                        char *buf, size_t cap) {
  const gpbt_sitename_t *s = &v[i];
  size_t nu = s->nuser ? s->nuser : s->nframes > 0;
  char a[512], b[512];
  gpbt_sitename_short(s->name, a, sizeof a);
  /* The fewest leading user frames that no other site shares. */
  size_t k = 1, most = nu ? nu : 1;
  for (; k <= most; k++) {
    size_t j = 0;
    while (j < n && (j == i || !sitename_same(s, &v[j], k))) j++;
    if (j == n) break;
  }
  if (k == 1 || k > most) {
    snprintf(buf, cap, "%s", a);
    return k == 1;
  }
  gpbt_sitename_short(s->frames[k - 1], b, sizeof b);
  snprintf(buf, cap, "%s < %s", a, b);
  return 1;
}
