/* SPDX-License-Identifier: MIT */
/*
 * opts.h: the programs' command lines, each parsed from one table of
 * options (opts.c), with docs/DESIGN.md's "Programs" messages in one
 * place: --help, --version, "PROG: unknown option 'OPT' (try 'PROG
 * --help')", "PROG: option 'OPT' needs a value (...)", and a refused value
 * as "PROG: OPT 'VALUE': what it takes (...)", each a usage error (2).
 *
 * An entry either stores its value in a field of the program's options
 * struct (a flag, a string, a file name, a whole number in a range) or
 * hands it to a setter that parses it. Long options match exactly or by
 * a unique prefix (as getopt_long's); "--opt=V" and "--opt V" both work;
 * short ones group ("-qv") and take "-oV" or "-o V"; "--" ends the
 * options; operands may come anywhere and keep their order.
 */
#ifndef GPBT_OPTS_H
#define GPBT_OPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum gpbt_optkind {
  GPBT_OPT_FLAG,    /* no value: the int at off becomes val */
  GPBT_OPT_STR,     /* the const char * at off keeps argv's string */
  GPBT_OPT_FILE,    /* the same, refusing an empty one */
  GPBT_OPT_U64,     /* decimal lo..hi into the uint64_t at off */
  GPBT_OPT_INT,     /* decimal lo..hi into the int at off */
  GPBT_OPT_SET,     /* set() parses the value (NULL when none is given) */
  GPBT_OPT_ALIAS,   /* another name (or a short one) of option `to` */
  GPBT_OPT_HELP,    /* --help, -h: the usage on stdout, exit 0 */
  GPBT_OPT_VERSION  /* --version: "PROG VERSION", exit 0 */
} gpbt_optkind_t;

/* Whether an option takes a value. OPTIONAL takes one only as "--opt=V";
 * NUMBER as "--opt=V" or as the next word when that is a number. */
typedef enum gpbt_optarg {
  GPBT_ARG_REQUIRED,
  GPBT_ARG_NONE,
  GPBT_ARG_OPTIONAL,
  GPBT_ARG_NUMBER
} gpbt_optarg_t;

/* A setter: NULL once the value is stored, else what the option takes
 * ("a size > 0"), which the parser reports with the option and value. */
typedef const char *(*gpbt_optset_t)(void *opts, const char *value);

typedef struct gpbt_opt {
  const char *name;     /* long name without "--"; NULL for a short alias */
  char short_name;      /* GPBT_OPT_ALIAS of a short option, or 0 */
  gpbt_optkind_t kind;
  gpbt_optarg_t arg;    /* of GPBT_OPT_SET; the others know theirs */
  size_t off;           /* the field of FLAG, STR, FILE, U64, INT */
  uint64_t lo, hi;      /* U64, INT: the range */
  int val;              /* FLAG: the value set */
  gpbt_optset_t set;    /* SET */
  const char *to;       /* ALIAS: the long name it stands for */
} gpbt_opt_t;

/* Table entries. T is the options struct's type, F a field of it. */
#define GPBT_FLAG(N, T, F, V) {(N), 0, GPBT_OPT_FLAG, GPBT_ARG_NONE, \
    offsetof(T, F), 0, 0, (V), NULL, NULL}
#define GPBT_STR(N, T, F) {(N), 0, GPBT_OPT_STR, GPBT_ARG_REQUIRED, \
    offsetof(T, F), 0, 0, 0, NULL, NULL}
#define GPBT_FILE(N, T, F) {(N), 0, GPBT_OPT_FILE, GPBT_ARG_REQUIRED, \
    offsetof(T, F), 0, 0, 0, NULL, NULL}
#define GPBT_U64(N, T, F, LO, HI) {(N), 0, GPBT_OPT_U64, GPBT_ARG_REQUIRED, \
    offsetof(T, F), (LO), (HI), 0, NULL, NULL}
#define GPBT_INT(N, T, F, LO, HI) {(N), 0, GPBT_OPT_INT, GPBT_ARG_REQUIRED, \
    offsetof(T, F), (LO), (HI), 0, NULL, NULL}
#define GPBT_SET(N, ARG, FN) {(N), 0, GPBT_OPT_SET, (ARG), 0, 0, 0, 0, (FN), \
    NULL}
#define GPBT_ALIAS(N, TO) {(N), 0, GPBT_OPT_ALIAS, GPBT_ARG_NONE, 0, 0, 0, 0, \
    NULL, (TO)}
#define GPBT_SHORT(C, TO) {NULL, (C), GPBT_OPT_ALIAS, GPBT_ARG_NONE, 0, 0, 0, \
    0, NULL, (TO)}
#define GPBT_HELP {"help", 'h', GPBT_OPT_HELP, GPBT_ARG_NONE, 0, 0, 0, 0, \
    NULL, NULL}
#define GPBT_VERSION {"version", 0, GPBT_OPT_VERSION, GPBT_ARG_NONE, 0, 0, 0, \
    0, NULL, NULL}

/* A program's command line: its name, its table, its --help text (to
 * stdout) and what --version adds after "PROG VERSION" (NULL: nothing). */
typedef struct gpbt_optspec {
  const char *prog;
  const gpbt_opt_t *opts;
  size_t nopts;
  void (*usage)(FILE *f);
  const char *version_note;
} gpbt_optspec_t;

/* Parses argv[1..argc-1] into `opts` (the struct the table's offsets and
 * setters refer to; the caller sets its defaults first). The operands end
 * up in argv[1..*nargs], in their order. -1 to go on; else the exit
 * status: 0 after --help or --version, 2 after one line on stderr. */
int gpbt_opts_parse(const gpbt_optspec_t *s, int argc, char **argv,
                    void *opts, int *nargs);

/* A usage error found after parsing: "PROG: MESSAGE (try 'PROG --help')"
 * on stderr. Returns 2, the usage exit status. */
int gpbt_usage_error(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
