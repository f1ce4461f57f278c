/* SPDX-License-Identifier: MIT */
/* gpu.h: the test kernels in gpu_kernels.cu, callable from C. */
#ifndef GPB_TEST_GPU_H
#define GPB_TEST_GPU_H
#include <stddef.h>
#include <stdint.h>
int gpbt_fill(void *p, size_t bytes, uint32_t v, void *stream);
int gpbt_slow_fill(void *p, size_t bytes, uint32_t v, long long cycles, void *stream);
int gpbt_write_byte(void *p, size_t at, void *stream);
#endif
