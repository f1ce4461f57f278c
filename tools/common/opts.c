/* SPDX-License-Identifier: MIT */
/*
 * opts.c: the table-driven command-line parser of every program (opts.h).
 *
 * One pass over argv: each word is an operand (moved down to argv[1..],
 * keeping its order), "--" (the rest are operands), a long option, or a
 * group of short ones. An option is looked up in the table (an alias
 * leads to the entry it names), takes its value by its kind, and stores
 * it; the first problem is one line on stderr and the exit status 2.
 */
#include "opts.h"
#include "gpubuddy.h"
#include "replay.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int gpbt_usage_error(const char *prog, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s: ", prog);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " (try '%s --help')\n", prog);
  return 2;
}

/* The entry an alias stands for; d itself otherwise. */
static const gpbt_opt_t *opts_resolve(const gpbt_optspec_t *s,
                                      const gpbt_opt_t *d) {
  for (size_t i = 0; d && d->kind == GPBT_OPT_ALIAS && i < s->nopts; i++)
    if (s->opts[i].name && !strcmp(s->opts[i].name, d->to))
      return &s->opts[i];
  return d && d->kind == GPBT_OPT_ALIAS ? NULL : d;
}

/* The long option named by the n bytes at `name`: exact, else the one it
 * is a prefix of. NULL when none; *ambiguous when several. */
static const gpbt_opt_t *opts_long(const gpbt_optspec_t *s, const char *name,
                                   size_t n, int *ambiguous) {
  const gpbt_opt_t *hit = NULL;
  *ambiguous = 0;
  for (size_t i = 0; i < s->nopts; i++) {
    const gpbt_opt_t *d = &s->opts[i];
    if (!d->name || strncmp(d->name, name, n)) continue;
    if (!d->name[n]) return opts_resolve(s, d);
    if (hit && opts_resolve(s, hit) != opts_resolve(s, d)) *ambiguous = 1;
    hit = d;
  }
  return *ambiguous ? NULL : opts_resolve(s, hit);
}

static const gpbt_opt_t *opts_short(const gpbt_optspec_t *s, char c) {
  for (size_t i = 0; i < s->nopts; i++)
    if (s->opts[i].short_name == c) return opts_resolve(s, &s->opts[i]);
  return NULL;
}

static gpbt_optarg_t opts_arg(const gpbt_opt_t *d) {
  switch (d->kind) {
  case GPBT_OPT_FLAG:
  case GPBT_OPT_HELP:
  case GPBT_OPT_VERSION: return GPBT_ARG_NONE;
  case GPBT_OPT_SET: return d->arg;
  default: return GPBT_ARG_REQUIRED;
  }
}

/* Whether word w is a number, as GPBT_ARG_NUMBER's value after a space. */
static int opts_is_number(const char *w) {
  char *end;
  if (!w || !*w) return 0;
  (void)strtod(w, &end);
  return !*end;
}

/* Stores value v of option d: NULL, or what the option takes. */
static const char *opts_store(const gpbt_opt_t *d, const char *v, void *o) {
  char *field = (char *)o + d->off;
  uint64_t n;
  static char range[96];
  switch (d->kind) {
  case GPBT_OPT_FLAG: *(int *)(void *)field = d->val; return NULL;
  case GPBT_OPT_FILE:
    if (!*v) return "a file name";
    /* fall through */
  case GPBT_OPT_STR: *(const char **)(void *)field = v; return NULL;
  case GPBT_OPT_U64:
  case GPBT_OPT_INT:
    if (gpbt_count_parse(v, d->lo, d->hi, &n)) {
      snprintf(range, sizeof range, "a whole number from %llu to %llu",
               (unsigned long long)d->lo, (unsigned long long)d->hi);
      return range;
    }
    if (d->kind == GPBT_OPT_U64) *(uint64_t *)(void *)field = n;
    else *(int *)(void *)field = (int)n;
    return NULL;
  case GPBT_OPT_SET: return d->set(o, v);
  default: return NULL;
  }
}

/* Runs option d, typed as `shown`, with value v (NULL: none): -1 to go
 * on, else the exit status. */
static int opts_apply(const gpbt_optspec_t *s, const gpbt_opt_t *d,
                      const char *shown, const char *v, void *o) {
  if (d->kind == GPBT_OPT_HELP) {
    s->usage(stdout);
    return 0;
  }
  if (d->kind == GPBT_OPT_VERSION) {
    printf("%s %s%s\n", s->prog, gpb_version(),
           s->version_note ? s->version_note : "");
    return 0;
  }
  const char *takes = opts_store(d, v, o);
  if (!takes) return -1;
  return gpbt_usage_error(s->prog, "%s '%s': expected %s", shown,
                          v ? v : "", takes);
}

/* Long option argv[*i] ("--name" or "--name=value"): -1, or the status. */
static int opts_one_long(const gpbt_optspec_t *s, int argc, char **argv,
                         int *i, void *o) {
  const char *a = argv[*i], *eq = strchr(a, '=');
  size_t n = eq ? (size_t)(eq - a) : strlen(a);
  int amb;
  const gpbt_opt_t *d = opts_long(s, a + 2, n - 2, &amb);
  char shown[128];
  snprintf(shown, sizeof shown, "%.*s", (int)n, a);
  if (amb)
    return gpbt_usage_error(s->prog, "ambiguous option '%s'", shown);
  if (!d) return gpbt_usage_error(s->prog, "unknown option '%s'", shown);
  gpbt_optarg_t arg = opts_arg(d);
  const char *v = eq ? eq + 1 : NULL;
  if (arg == GPBT_ARG_NONE && v)
    return gpbt_usage_error(s->prog, "option '%s' takes no value", shown);
  if (!v && arg == GPBT_ARG_REQUIRED) {
    if (*i + 1 >= argc)
      return gpbt_usage_error(s->prog, "option '%s' needs a value", shown);
    v = argv[++*i];
  } else if (!v && arg == GPBT_ARG_NUMBER && *i + 1 < argc &&
             opts_is_number(argv[*i + 1])) {
    v = argv[++*i];
  }
  return opts_apply(s, d, shown, v, o);
}

/* A group of short options, argv[*i] ("-qv", "-oFILE", "-o FILE"). */
static int opts_one_short(const gpbt_optspec_t *s, int argc, char **argv,
                          int *i, void *o) {
  const char *a = argv[*i];
  for (size_t k = 1; a[k]; k++) {
    char shown[3] = {'-', a[k], 0};
    const gpbt_opt_t *d = opts_short(s, a[k]);
    if (!d) return gpbt_usage_error(s->prog, "unknown option '%s'", shown);
    gpbt_optarg_t arg = opts_arg(d);
    const char *v = NULL;
    if (arg == GPBT_ARG_REQUIRED || (arg == GPBT_ARG_NUMBER && a[k + 1])) {
      if (a[k + 1]) v = a + k + 1;
      else if (*i + 1 < argc) v = argv[++*i];
      else return gpbt_usage_error(s->prog, "option '%s' needs a value", shown);
    } else if (arg == GPBT_ARG_NUMBER && *i + 1 < argc &&
               opts_is_number(argv[*i + 1])) {
      v = argv[++*i];
    }
    int rc = opts_apply(s, d, shown, v, o);
    if (rc >= 0 || v) return rc;
  }
  return -1;
}

int gpbt_opts_parse(const gpbt_optspec_t *s, int argc, char **argv,
                    void *opts, int *nargs) {
  int n = 0, only_operands = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int rc = -1;
    if (only_operands || a[0] != '-' || !a[1])
      argv[1 + n++] = argv[i];
    else if (!strcmp(a, "--"))
      only_operands = 1;
    else if (a[1] == '-')
      rc = opts_one_long(s, argc, argv, &i, opts);
    else
      rc = opts_one_short(s, argc, argv, &i, opts);
    if (rc >= 0) return rc;
  }
  *nargs = n;
  return -1;
}
