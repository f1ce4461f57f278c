/* SPDX-License-Identifier: MIT */
/*
 * test_opts.c: the programs' option parser (tools/common/opts.c): each
 * kind of entry, "--opt=V" and "--opt V", unique prefixes and aliases,
 * short groups, optional and number values, operands in order around
 * options and after "--", and the exit status of each usage error (the
 * messages themselves are test_conventions.sh's).
 */
#include "opts.h"
#include "testutil.h"

#include <string.h>

typedef struct t_opts {
  int flag, quiet, n;
  const char *str, *file;
  uint64_t u;
  double hold;
  int held;
  const char *opt;
} t_opts_t;

static const char *t_hold(void *ov, const char *v) {
  t_opts_t *o = ov;
  o->held = 1;
  if (v) o->hold = atof(v);
  return v && o->hold <= 0 ? "a number > 0" : NULL;
}

static const char *t_opt(void *ov, const char *v) {
  ((t_opts_t *)ov)->opt = v ? v : "(none)";
  return NULL;
}

static void t_usage(FILE *f) { fprintf(f, "Usage: t\n"); }

static const gpbt_opt_t t_defs[] = {
    GPBT_FLAG("flag", t_opts_t, flag, 7),
    GPBT_FLAG("quiet", t_opts_t, quiet, 1),
    GPBT_SHORT('q', "quiet"),
    GPBT_STR("string", t_opts_t, str),
    GPBT_ALIAS("strung", "string"),
    GPBT_FILE("file", t_opts_t, file),
    GPBT_SHORT('f', "file"),
    GPBT_U64("unsigned", t_opts_t, u, 1, 1000),
    GPBT_INT("number", t_opts_t, n, 0, 9),
    GPBT_SET("hold", GPBT_ARG_NUMBER, t_hold),
    GPBT_SET("optional", GPBT_ARG_OPTIONAL, t_opt),
    GPBT_HELP,
    GPBT_VERSION,
};
static const gpbt_optspec_t t_spec = {"t", t_defs,
                                      sizeof t_defs / sizeof t_defs[0],
                                      t_usage, NULL};

/* Parses the words of line (space-separated, at most 15) into o; the
 * status, with the operands joined by ',' into ops. */
static int t_parse(const char *line, t_opts_t *o, char *ops) {
  static char buf[256];
  char *argv[16] = {"t"};
  int argc = 1, n = 0;
  snprintf(buf, sizeof buf, "%s", line);
  for (char *w = strtok(buf, " "); w && argc < 16; w = strtok(NULL, " "))
    argv[argc++] = w;
  memset(o, 0, sizeof *o);
  int rc = gpbt_opts_parse(&t_spec, argc, argv, o, &n);
  ops[0] = 0;
  for (int i = 1; rc < 0 && i <= n; i++)
    strcat(strcat(ops, i > 1 ? "," : ""), argv[i]);
  return rc;
}

int main(void) {
  t_opts_t o;
  char ops[256];
  ASSERT_EQ(t_parse("a --flag b -q --string=s --file f c", &o, ops), -1);
  ASSERT(!strcmp(ops, "a,b,c"));
  ASSERT_EQ(o.flag, 7);
  ASSERT_EQ(o.quiet, 1);
  ASSERT(!strcmp(o.str, "s") && !strcmp(o.file, "f"));
  /* Prefixes, aliases, short groups and attached values. */
  ASSERT_EQ(t_parse("--str x --uns 12 --strung y -qfF", &o, ops), -1);
  ASSERT(!strcmp(o.str, "y") && o.u == 12 && o.quiet && !strcmp(o.file, "F"));
  ASSERT_EQ(t_parse("--st x", &o, ops), -1); /* string or strung: the same */
  ASSERT(!strcmp(o.str, "x"));
  ASSERT_EQ(t_parse("--f x", &o, ops), 2); /* flag or file */
  ASSERT_EQ(t_parse("--fl", &o, ops), -1);
  ASSERT_EQ(o.flag, 7);
  /* NUMBER: the next word when it is a number; OPTIONAL: only with '='. */
  ASSERT_EQ(t_parse("--hold NAME", &o, ops), -1);
  ASSERT(o.held && o.hold == 0 && !strcmp(ops, "NAME"));
  ASSERT_EQ(t_parse("--hold 2.5 NAME", &o, ops), -1);
  ASSERT(o.hold == 2.5 && !strcmp(ops, "NAME"));
  ASSERT_EQ(t_parse("--hold=3 NAME", &o, ops), -1);
  ASSERT(o.hold == 3);
  ASSERT_EQ(t_parse("--hold 0", &o, ops), 2);
  ASSERT_EQ(t_parse("--optional 5", &o, ops), -1);
  ASSERT(!strcmp(o.opt, "(none)") && !strcmp(ops, "5"));
  ASSERT_EQ(t_parse("--optional=5", &o, ops), -1);
  ASSERT(!strcmp(o.opt, "5"));
  /* "--" and "-": operands. */
  ASSERT_EQ(t_parse("- -- --flag -q", &o, ops), -1);
  ASSERT(!strcmp(ops, "-,--flag,-q") && !o.flag);
  /* Usage errors: 2; --help and --version: 0. */
  ASSERT_EQ(t_parse("--nope", &o, ops), 2);
  ASSERT_EQ(t_parse("-x", &o, ops), 2);
  ASSERT_EQ(t_parse("--string", &o, ops), 2);
  ASSERT_EQ(t_parse("-f", &o, ops), 2);
  ASSERT_EQ(t_parse("--flag=1", &o, ops), 2);
  ASSERT_EQ(t_parse("--file=", &o, ops), 2);
  ASSERT_EQ(t_parse("--unsigned 0", &o, ops), 2);
  ASSERT_EQ(t_parse("--unsigned 1001", &o, ops), 2);
  ASSERT_EQ(t_parse("--number -1", &o, ops), 2);
  ASSERT_EQ(t_parse("--number 9", &o, ops), -1);
  ASSERT_EQ(o.n, 9);
  ASSERT_EQ(t_parse("--help", &o, ops), 0);
  ASSERT_EQ(t_parse("-h", &o, ops), 0);
  ASSERT_EQ(t_parse("--version", &o, ops), 0);
  printf("ok\n");
  return 0;
}
