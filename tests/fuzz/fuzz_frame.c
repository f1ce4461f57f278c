/* SPDX-License-Identifier: MIT */
/*
 * fuzz_frame.c: libFuzzer target for the relay wire protocol as a reader
 * meets it: frame headers, zlib payloads, INFO, keyframes, event batches,
 * call sites, CLOSED and BYE, all the way into the block-map model.
 *
 * The input is the byte stream a relay would send after HELLO. The first
 * byte picks how it is split into reads (1..255 bytes at a time, or all at
 * once), because the reader must cope with frames arriving in pieces.
 * gpb__remote_feed (lib/live/remote.c) runs it through the same code as a
 * socket's bytes and checks the model afterwards; any result is fine,
 * only a crash, a leak or undefined behaviour is a bug. It also feeds
 * the relay-side HELLO decoder.
 *
 * With GPB_FUZZ_SEEDS=DIR set, initialization writes valid streams (a
 * small pool's INFO, keyframe and events, plain and zlib, the zlib one
 * with call sites and their SITES frame) into DIR as a
 * seed corpus. Built and run by tests/run-fuzzers.sh (clang from the
 * sources).
 */
#include "live/netproto.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static gpb_np_evenc_t seed_enc;

static void seed_hook(const gpb_event_t *ev, void *user) {
  (void)user;
  gpb__np_evenc_add(&seed_enc, ev);
}

static int seed_visit(const gpb_block_info_t *b, void *user) {
  gpb__np_block_put(user, b);
  return 0;
}

static void seed_write(const char *dir, int z) {
  gpb_config_t cfg;
  gpb_config_init(&cfg);
  cfg.backend = GPB_BACKEND_VIRTUAL;
  cfg.pool_size = 1u << 20;
  cfg.policy = z ? GPB_POLICY_TRIM : GPB_POLICY_BUDDY;
  cfg.flags = GPB_CFG_NO_ENV | (z ? GPB_CFG_CALLSITES_DEPTH(4) : 0);
  gpb_pool_t *p;
  if (gpb_pool_create(&cfg, &p)) return;
  gpb_pool_info_t info;
  gpb_pool_info(p, &info);
  gpb_np_buf_t s = {0}, pl = {0}, blk = {0};
  gpb__np_put_u8(&s, (uint8_t)(z ? 7 : 0)); /* the chunking byte */
  gpb__np_info_put(&pl, &info);
  gpb__np_frame(&s, GPB_NP_INFO, pl.p, pl.len, 0);
  gpb__np_put_u32(&blk, 0);
  gpb_pool_visit(p, seed_visit, &blk);
  uint32_t n = 0;
  for (gpb_np_rd_t r = {blk.p, blk.len, 4, 0}; r.off < r.len;) {
    gpb__np_get_u8(&r);
    uint8_t kind = gpb__np_get_u8(&r);
    for (int i = 0; kind >= 2 && i < (kind == 3 ? 5 : 4); i++)
      gpb__np_get_var(&r);
    n++;
  }
  for (int i = 0; i < 4; i++) blk.p[i] = (uint8_t)(n >> (8 * i));
  pl.len = 0;
  gpb__np_key_begin_put(&pl, 0, n);
  gpb__np_frame(&s, GPB_NP_KEY_BEGIN, pl.p, pl.len, 0);
  gpb__np_frame(&s, GPB_NP_KEY_BLOCKS, blk.p, blk.len, z);
  gpb_stats_t st;
  gpb_pool_stats(p, &st);
  pl.len = 0;
  gpb__np_key_end_put(&pl, 0, &st);
  gpb__np_frame(&s, GPB_NP_KEY_END, pl.p, pl.len, 0);
  gpb__np_evenc_init(&seed_enc, (uint32_t)__builtin_ctzll(info.min_block));
  gpb_pool_set_hook(p, seed_hook, NULL);
  void *live[16] = {0};
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 200; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    int k = (int)(x % 16);
    if (live[k]) gpb_free(p, live[k]), live[k] = NULL;
    else gpb_alloc_tagged(p, 300 + (size_t)(x % 20000), (uint32_t)(x % 4), &live[k]);
  }
  pl.len = 0;
  char text[8192];
  for (uint32_t id = 1; gpb_pool_site_text(p, id, text, sizeof text) > 0; id++)
    gpb__np_site_put(&pl, id, text);
  if (pl.len) gpb__np_frame(&s, GPB_NP_SITES, pl.p, pl.len, z);
  pl.len = 0;
  gpb__np_evenc_finish(&seed_enc, &pl);
  gpb__np_frame(&s, GPB_NP_EVENTS, pl.p, pl.len, z);
  gpb__np_frame(&s, GPB_NP_CLOSED, NULL, 0, 0);
  char path[4096];
  snprintf(path, sizeof path, "%s/seed-%d", dir, z);
  FILE *f = fopen(path, "wb");
  if (f) {
    fwrite(s.p, 1, s.len, f);
    fclose(f);
  }
  gpb__np_evenc_free(&seed_enc);
  gpb__np_buf_free(&s);
  gpb__np_buf_free(&pl);
  gpb__np_buf_free(&blk);
  gpb_pool_set_hook(p, NULL, NULL);
  gpb_pool_destroy(p);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  const char *dir = getenv("GPB_FUZZ_SEEDS");
  if (dir) {
    seed_write(dir, 0);
    seed_write(dir, 1);
  }
  return 0;
}

static void fuzz_name(const char *name, void *user) {
  (void)name;
  (void)user;
}

static int fuzz_site(uint32_t id, const char *text, size_t len, void *user) {
  (void)id, (void)text, (void)len, (void)user;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  size_t chunk = data[0] == 0 ? size : (size_t)data[0];
  (void)gpb__remote_feed(data + 1, size - 1, chunk);

  uint32_t version, flags;
  char token[GPB_NP_TOKEN_MAX + 1], pool[GPB_NAME_MAX], err[GPB_NP_ERRLEN];
  size_t tl;
  (void)gpb__np_hello_get(data + 1, size - 1, &version, &flags, token, &tl,
                          pool, err);
  (void)gpb__np_pools_get(data + 1, size - 1, fuzz_name, NULL, err);
  (void)gpb__np_sites_get(data + 1, size - 1, fuzz_site, NULL, err);
  return 0;
}
