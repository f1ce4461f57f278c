/* SPDX-License-Identifier: MIT */
/*
 * kernels.h: the samples' CUDA kernels (kernels.cu), callable from C.
 *
 * Each returns 0 or a cudaError_t as a positive int; gpbs_kern_error()
 * names it. All work goes to the legacy default stream, so a block freed
 * after a launch and handed out again is written in launch order.
 */
#ifndef GPBS_KERNELS_H
#define GPBS_KERNELS_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
/* Writes value ^ i into 32-bit word i of [p, p + bytes) (the tail under
 * four bytes is left alone). Asynchronous. */
int gpbs_kern_fill(void *p, size_t bytes, uint32_t value);
/* XOR of the 32-bit words of [p, p + bytes) into *out. Synchronous. */
int gpbs_kern_xor(const void *p, size_t bytes, uint32_t *out);
/* Waits for all launched work; reports a fault from any of it. */
int gpbs_kern_sync(void);
const char *gpbs_kern_error(int code);
/* Frees the kernels' own scratch memory. */
void gpbs_kern_fini(void);
#ifdef __cplusplus
}
#endif
#endif /* GPBS_KERNELS_H */
