/* SPDX-License-Identifier: MIT */
/*
 * test_remote_bound.c: a relay cannot make a reader hold a keyframe of
 * any size it announces. A fake relay on loopback answers HELLO with a
 * pool of 8M minimum blocks and a keyframe of all 8M (within the pool, so
 * the protocol itself allows it, and 512 MiB of block records to come);
 * the reader refuses it, naming the limit (GPB_REMOTE_MAX_BLOCKS, 4M by
 * default), instead of waiting to grow that much. With the limit raised
 * it takes the keyframe's start. Before the bound, both were taken.
 */
#include "testutil.h"
#include "live/netproto.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

static int lfd;

static void *fake_relay(void *arg) {
  (void)arg;
  int c = accept(lfd, NULL, NULL);
  if (c < 0) return NULL;
  uint8_t hdr[64];
  if (read(c, hdr, sizeof hdr) <= 0) { /* the HELLO; its content is moot */
    close(c);
    return NULL;
  }
  gpb_pool_info_t info;
  memset(&info, 0, sizeof info);
  info.pool_size = info.managed_size = (uint64_t)1 << 27;
  info.min_block = 16; /* 8M blocks */
  info.num_orders = 24;
  info.num_roots = 1;
  info.backend = GPB_BACKEND_VIRTUAL;
  info.policy = GPB_POLICY_BUDDY;
  gpb_np_buf_t pl = {0}, out = {0};
  gpb__np_info_put(&pl, &info);
  gpb__np_frame(&out, GPB_NP_INFO, pl.p, pl.len, 0);
  pl.len = 0;
  gpb__np_key_begin_put(&pl, 1, (uint64_t)1 << 23);
  gpb__np_frame(&out, GPB_NP_KEY_BEGIN, pl.p, pl.len, 0);
  (void)!write(c, out.p, out.len);
  gpb__np_buf_free(&pl);
  gpb__np_buf_free(&out);
  usleep(500000); /* let the reader read it, then hang up */
  close(c);
  return NULL;
}

/* Connects to a fresh fake relay and polls until it says something. */
static int attempt(char *detail, size_t n) {
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  lfd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT(lfd >= 0);
  ASSERT_EQ(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
  ASSERT_EQ(listen(lfd, 1), 0);
  socklen_t sl = sizeof sa;
  getsockname(lfd, (struct sockaddr *)&sa, &sl);
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, NULL, fake_relay, NULL), 0);
  char hp[64];
  snprintf(hp, sizeof hp, "127.0.0.1:%d", ntohs(sa.sin_port));
  gpb_attach_t *a = NULL;
  int rc = gpb_attach_connect(hp, NULL, &a);
  for (int i = 0; rc >= 0 && a && i < 40; i++) {
    rc = gpb_attach_poll(a);
    if (rc < 0) break;
    usleep(10000);
  }
  snprintf(detail, n, "%s", gpb_last_error_detail());
  if (a) gpb_attach_close(a);
  pthread_join(th, NULL);
  close(lfd);
  return rc;
}

int main(void) {
  char detail[512];
  int rc = attempt(detail, sizeof detail);
  printf("default limit: %s: %s\n", gpb_err_name(rc), detail);
  ASSERT_EQ(rc, GPB_EFORMAT);
  ASSERT(strstr(detail, "announced a keyframe of 8388608 blocks"));
  ASSERT(strstr(detail, "at most 4194304"));
  /* A limit raised on purpose takes it (and the relay then hangs up). */
  setenv("GPB_REMOTE_MAX_BLOCKS", "16777216", 1);
  rc = attempt(detail, sizeof detail);
  printf("raised limit: %s: %s\n", gpb_err_name(rc), detail);
  ASSERT(!strstr(detail, "announced a keyframe"));
  return 0;
}
