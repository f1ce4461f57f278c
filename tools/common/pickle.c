/* SPDX-License-Identifier: MIT */
/*
 * pickle.c: protocol 2 opcodes, written straight to a FILE (pickle.h).
 *
 * Integers that fit 32 signed bits are BININT; others LONG1, the
 * smallest two's-complement little-endian form (a 64-bit address with
 * bit 63 set takes 9 bytes). Strings are BINUNICODE. Memo indexes are
 * LONG_BINPUT/LONG_BINGET (4 bytes), so there is no limit on how many.
 */
#include "pickle.h"

#include <string.h>

static void pk_bytes(gpbt_pk_t *p, const void *b, size_t n) {
  if (!p->err && fwrite(b, 1, n, p->f) != n) p->err = 1;
}

static void pk_op(gpbt_pk_t *p, char op) { pk_bytes(p, &op, 1); }

static void pk_u32(gpbt_pk_t *p, uint32_t v) {
  unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8),
                        (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
  pk_bytes(p, b, 4);
}

void gpbt_pk_begin(gpbt_pk_t *p, FILE *f) {
  memset(p, 0, sizeof *p);
  p->f = f;
  pk_bytes(p, "\x80\x02", 2);
}

int gpbt_pk_end(gpbt_pk_t *p) {
  pk_op(p, '.');
  if (!p->err && fflush(p->f)) p->err = 1;
  return p->err ? -1 : 0;
}

void gpbt_pk_dict(gpbt_pk_t *p) { pk_op(p, '}'); }
void gpbt_pk_setitem(gpbt_pk_t *p) { pk_op(p, 's'); }
void gpbt_pk_list(gpbt_pk_t *p) { pk_op(p, ']'); }
void gpbt_pk_append(gpbt_pk_t *p) { pk_op(p, 'a'); }
void gpbt_pk_tuple2(gpbt_pk_t *p) { pk_op(p, '\x86'); }
void gpbt_pk_none(gpbt_pk_t *p) { pk_op(p, 'N'); }
void gpbt_pk_bool(gpbt_pk_t *p, int v) { pk_op(p, v ? '\x88' : '\x89'); }

void gpbt_pk_strn(gpbt_pk_t *p, const char *s, size_t n) {
  pk_op(p, 'X');
  pk_u32(p, (uint32_t)n);
  pk_bytes(p, s, n);
}

void gpbt_pk_str(gpbt_pk_t *p, const char *s) { gpbt_pk_strn(p, s, strlen(s)); }

void gpbt_pk_int(gpbt_pk_t *p, int64_t v) {
  if (v >= INT32_MIN && v <= INT32_MAX) {
    pk_op(p, 'J');
    pk_u32(p, (uint32_t)(int32_t)v);
    return;
  }
  unsigned char b[8];
  uint64_t u = (uint64_t)v;
  int n = 8;
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(u >> (8 * i));
  /* Drop bytes that only repeat the sign. */
  while (n > 1 && ((b[n - 1] == 0 && !(b[n - 2] & 0x80)) ||
                   (b[n - 1] == 0xff && (b[n - 2] & 0x80))))
    n--;
  unsigned char head[2] = {0x8a, (unsigned char)n};
  pk_bytes(p, head, 2);
  pk_bytes(p, b, (size_t)n);
}

void gpbt_pk_uint(gpbt_pk_t *p, uint64_t v) {
  if (v <= INT64_MAX) {
    gpbt_pk_int(p, (int64_t)v);
    return;
  }
  unsigned char b[11] = {0x8a, 9};
  for (int i = 0; i < 8; i++) b[2 + i] = (unsigned char)(v >> (8 * i));
  b[10] = 0; /* positive */
  pk_bytes(p, b, 11);
}

uint32_t gpbt_pk_put(gpbt_pk_t *p) {
  pk_op(p, 'r');
  pk_u32(p, p->memo);
  return p->memo++;
}

void gpbt_pk_get(gpbt_pk_t *p, uint32_t index) {
  pk_op(p, 'j');
  pk_u32(p, index);
}

void gpbt_pk_key(gpbt_pk_t *p, const char *key) { gpbt_pk_str(p, key); }

void gpbt_pk_kv_str(gpbt_pk_t *p, const char *key, const char *v) {
  gpbt_pk_str(p, key);
  gpbt_pk_str(p, v);
  gpbt_pk_setitem(p);
}

void gpbt_pk_kv_uint(gpbt_pk_t *p, const char *key, uint64_t v) {
  gpbt_pk_str(p, key);
  gpbt_pk_uint(p, v);
  gpbt_pk_setitem(p);
}
