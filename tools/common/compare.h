/* SPDX-License-Identifier: MIT */
/*
 * compare.h: two runs side by side (compare.c), for gpubuddy-replay
 * --compare A B: peak live bytes, the bytes each call site held at the
 * peak with the differences, fragmentation and the smallest pool per
 * policy; as text, JSON and a PNG picture.
 *
 * Call site ids are a run's own, so sites are matched across runs by
 * their frames' text and shown by gpbt_sitename_label over both runs'
 * sites together.
 */
#ifndef GPBT_COMPARE_H
#define GPBT_COMPARE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define GPBT_CMP_POLICIES 8

/* One policy's replay of one run. */
typedef struct gpbt_cmp_pol {
  const char *policy;          /* its name */
  uint64_t min_pool;           /* the smallest pool that fits, 0 unknown */
  uint64_t peak_blocks;        /* bytes in blocks at most */
  double int_frag, ext_frag;   /* at the peak: internal share of block
                                  bytes, the library's external index */
  uint64_t oom;                /* failed allocations in the replay */
} gpbt_cmp_pol_t;

/* What one run gives to the comparison; the caller owns every pointer. */
typedef struct gpbt_cmp_run {
  const char *path;
  uint64_t peak_live;          /* bytes */
  uint64_t ops;
  int npol;
  gpbt_cmp_pol_t pol[GPBT_CMP_POLICIES];
  size_t nsites;
  const char *const *site_text; /* nsites: frames, NULL for no call site */
  const uint64_t *site_bytes;   /* nsites: bytes held at the peak */
} gpbt_cmp_run_t;

/* One site in either run. */
typedef struct gpbt_cmp_row {
  const char *text; /* the frames (a run's string), NULL: no call site */
  char *label;      /* shown */
  uint64_t a, b;    /* bytes at each run's peak */
} gpbt_cmp_row_t;

typedef struct gpbt_cmp {
  gpbt_cmp_row_t *rows; /* largest change first, then larger, then label */
  size_t n;
} gpbt_cmp_t;

/* Matches a's and b's sites by text into out. 0, or GPB_EHOSTMEM. */
int gpbt_cmp_sites(const gpbt_cmp_run_t *a, const gpbt_cmp_run_t *b,
                   gpbt_cmp_t *out);
void gpbt_cmp_free(gpbt_cmp_t *c);

/* The report, the first `rows` sites (0: all) in text and the picture;
 * JSON has every site. The policies of a and b must be the same list. */
void gpbt_cmp_text(FILE *f, const gpbt_cmp_run_t *a, const gpbt_cmp_run_t *b,
                   const gpbt_cmp_t *c, size_t rows);
void gpbt_cmp_json(FILE *f, const gpbt_cmp_run_t *a, const gpbt_cmp_run_t *b,
                   const gpbt_cmp_t *c);
/* 0, or GPB_EIO/GPB_EHOSTMEM with errno saying why. */
int gpbt_cmp_png(const char *path, const gpbt_cmp_run_t *a,
                 const gpbt_cmp_run_t *b, const gpbt_cmp_t *c, size_t rows);

#endif /* GPBT_COMPARE_H */
