/* SPDX-License-Identifier: MIT */
/*
 * test_cupy_fake.c: the CuPy entry points (lib/gpu/cupy.c) against the
 * fake CUDA runtime (fake_cudart.c), on every machine, GPU or not.
 *
 * PyTorch's and CuPy's entry points must share one pool per device, tag
 * their blocks by library, and order CuPy's frees on the stream the block
 * was allocated on (CuPy's param): a block freed while work is queued on
 * that stream is reused at once there, but handed to another stream only
 * after that work is done.
 */
#include "testutil.h"

#include "fake_cudart.h"

#include <stdlib.h>
#include <string.h>

/* One pool per device, whichever library comes first. */
static void test_shared(void) {
  void *s0 = fake_stream_default(0);
  void *c = gpb_cupy_malloc(s0, 3000, 0); /* CuPy first: it makes the pool */
  ASSERT(c != NULL);
  gpb_pool_t *p = gpb_torch_pool(0);
  ASSERT(p != NULL);
  void *t = gpb_torch_malloc(100000, 0, s0);
  ASSERT(t != NULL);
  ASSERT(gpb_torch_pool(0) == p); /* no second pool */
  gpb_stats_t st;
  ASSERT_OK(gpb_pool_stats(p, &st));
  ASSERT_U64_EQ(st.live_allocs, 2);
  uint64_t tb, cb;
  ASSERT_OK(gpb_cupy_bytes(0, &tb, &cb));
  ASSERT_U64_EQ(cb, 4096);   /* 3000 to its power of two (buddy) */
  ASSERT_U64_EQ(tb, 131072); /* 100000 to its power of two (buddy) */
  ASSERT_U64_EQ(st.tag_bytes[GPB_TAG_CUPY], cb);
  ASSERT_U64_EQ(st.tag_bytes[GPB_TAG_TORCH], tb);
  /* The OOM text says what each library holds. */
  char why[512];
  int n = gpb_cupy_explain(0, (size_t)64 << 20, why, sizeof why);
  ASSERT(n > 0 && (size_t)n < sizeof why);
  ASSERT(strstr(why, "CuPy holds 4096 bytes, PyTorch 131072") != NULL);
  ASSERT(strstr(why, "bytes free in the pool of 4194304") != NULL);
  ASSERT(gpb_cupy_malloc(s0, (size_t)64 << 20, 0) == NULL); /* 4 MiB pool */
  gpb_cupy_free(s0, c, 0);
  gpb_torch_free(t, 100000, 0, s0);
  gpb_cupy_free(s0, NULL, 0); /* CuPy never frees NULL; harmless */
  uint64_t m, f, fr;
  ASSERT_OK(gpb_cupy_calls(0, &m, &f, &fr));
  ASSERT_U64_EQ(m, 1);
  ASSERT_U64_EQ(f, 1);
  ASSERT_U64_EQ(fr, 1);
  ASSERT_OK(gpb_torch_calls(0, &m, &f, &fr)); /* CuPy's made no PyTorch call */
  ASSERT_U64_EQ(m, 1);
  ASSERT_U64_EQ(fr, 1);
  gpb_pool_t *q;
  ASSERT_OK(gpb_device_pool(0, &q));
  ASSERT(q == p); /* the registry's pool is the one both used */
  ASSERT_OK(gpb_pool_drain(p));
  ASSERT_OK(gpb_cupy_bytes(0, &tb, &cb));
  ASSERT_U64_EQ(tb + cb, 0);
  ASSERT_OK(gpb_pool_check(p));
}

/* A CuPy free is ordered on the stream of its malloc, not another. With
 * torch_first, PyTorch used the default stream first, so CuPy's stream is
 * a second one and frees take events; else CuPy's stream is the pool's
 * only one until PyTorch's comes, which then waits on a fence. */
static void test_stream(int dev, int torch_first) {
  void *s0 = fake_stream_default(dev), *s1 = fake_stream_create(dev);
  if (torch_first) gpb_torch_free(gpb_torch_malloc(512, dev, s0), 512, dev, s0);
  void *a = gpb_cupy_malloc(s1, 1 << 20, dev);
  ASSERT(a != NULL);
  fake_stream_enqueue(s1); /* a kernel still reads a */
  gpb_cupy_free(s1, a, dev);
  /* Same stream: queued after the kernel, so the block is reused. */
  void *b = gpb_cupy_malloc(s1, 1 << 20, dev);
  ASSERT(b == a);
  uint64_t ticket = fake_stream_enqueue(s1);
  gpb_cupy_free(s1, b, dev);
  /* PyTorch on another stream gets it only once s1's work is done: a
   * different block, or s0 made to wait (on the GPU) for that work. */
  uint64_t waits = fake_counts.waits;
  void *t = gpb_torch_malloc(1 << 20, dev, s0);
  ASSERT(t != NULL);
  if (torch_first) ASSERT(t != a);
  ASSERT(t != a || (fake_counts.waits > waits && fake_counts.wait_stream == s0 &&
                    fake_counts.wait_on == s1 && fake_counts.wait_ticket >= ticket));
  fake_stream_finish(s1);
  gpb_torch_free(t, 1 << 20, dev, s0);
  gpb_pool_t *p;
  ASSERT_OK(gpb_device_pool(dev, &p));
  ASSERT_OK(gpb_pool_drain(p));
  void *u = gpb_torch_malloc(1 << 20, dev, s0); /* all done: a is s0's too */
  ASSERT(u == a);
  gpb_torch_free(u, 1 << 20, dev, s0);
  ASSERT_OK(gpb_pool_drain(p));
  ASSERT_OK(gpb_pool_check(p));
}

/* Bad devices and no pool: NULL and clear codes, never a crash. */
static void test_bad(void) {
  ASSERT(gpb_cupy_malloc(NULL, 512, -1) == NULL);
  ASSERT(gpb_cupy_malloc(NULL, 512, 1000) == NULL);
  ASSERT(gpb_cupy_malloc(NULL, 0, 0) == NULL);
  ASSERT_ERR(gpb_cupy_calls(-1, NULL, NULL, NULL), GPB_EINVAL);
  uint64_t tb, cb;
  ASSERT_ERR(gpb_cupy_bytes(3, &tb, &cb), GPB_ENOTFOUND);
  char why[256];
  ASSERT(gpb_cupy_explain(3, 512, why, sizeof why) > 0);
  ASSERT(strstr(why, "no pool") != NULL);
}

/* A VMM pool (the PyTorch default): the text says what is mapped. */
static void test_vmm_text(void) {
  setenv("GPB_TORCH_VMM", "1", 1);
  void *c = gpb_cupy_malloc(NULL, 3 << 20, 3);
  ASSERT(c != NULL);
  char why[512];
  ASSERT(gpb_cupy_explain(3, (size_t)64 << 20, why, sizeof why) > 0);
  ASSERT(strstr(why, "of the pool's 4194304 bytes of memory are mapped") != NULL);
  gpb_cupy_free(NULL, c, 3);
  setenv("GPB_TORCH_VMM", "0", 1);
}

int main(void) {
  fake_cuda_setup(4, (size_t)64 << 20);
  setenv("GPB_TORCH_POOL_SIZE", "4M", 1);
  setenv("GPB_TORCH_POLICY", "buddy", 1);
  setenv("GPB_TORCH_VMM", "0", 1); /* one plain range: addresses compare */
  test_shared();
  test_stream(1, 0);
  test_stream(2, 1);
  test_bad();
  test_vmm_text();
  printf("cupy: shared pool, tags and stream-ordered frees checked\n");
  return 0;
}
