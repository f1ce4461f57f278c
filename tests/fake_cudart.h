/* SPDX-License-Identifier: MIT */
/*
 * fake_cudart.h: a CUDA runtime double for tests on machines without a
 * GPU. fake_cudart.c defines the cuda* functions libgpubuddy calls; a test
 * program linked with -export-dynamic interposes them on libcudart.
 *
 * Streams are counters: work queued and work done. An event recorded on a
 * stream captures the work queued so far and is complete once that much
 * is done; the test decides when work finishes. The fake is stricter than
 * CUDA: every event call must run with the event's device current, which
 * checks that the library switches devices.
 */
#ifndef GPB_FAKE_CUDART_H
#define GPB_FAKE_CUDART_H
#include <stddef.h>
#include <stdint.h>

typedef struct fake_counts {
  uint64_t event_creates, event_destroys, records, queries, syncs;
  uint64_t wrong_device; /* event used with another device current */
  uint64_t set_device;
  uint64_t waits;        /* cudaStreamWaitEvent */
  uint64_t stream_syncs; /* cudaStreamSynchronize */
  /* The last cudaStreamWaitEvent: the waiting stream, and the stream and
   * work ticket of the event it waits for. */
  void *wait_stream, *wait_on;
  uint64_t wait_ticket;
  /* Driver VMM: pages made and live, maps, unmaps, unmaps made while some
   * stream still had work queued (a bug), cudaDeviceSynchronize calls. */
  uint64_t vmm_creates, vmm_pages, vmm_maps, vmm_unmaps, vmm_unsafe_unmaps;
  uint64_t device_syncs;
} fake_counts_t;

void fake_cuda_setup(int ndev, size_t free_bytes);
extern fake_counts_t fake_counts;
/* A new stream on `device` (never freed: tests are short). */
void *fake_stream_create(int device);
/* The default stream of `device` (what NULL means there). */
void *fake_stream_default(int device);
/* Queues one piece of work; returns its ticket. */
uint64_t fake_stream_enqueue(void *stream);
/* Completes all work queued so far on the stream. */
void fake_stream_finish(void *stream);
uint64_t fake_stream_done(void *stream);
int fake_current_device(void);
void fake_set_device(int device);
/* VMM: 1 when every byte of [addr, addr+len) is mapped; bytes mapped. */
int fake_vmm_mapped(uint64_t addr, uint64_t len);
uint64_t fake_vmm_mapped_bytes(void);
#endif
