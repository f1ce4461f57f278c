/* SPDX-License-Identifier: MIT */
/*
 * kvcache.c: gpubuddy-sample-kvcache, the KV cache of an LLM server.
 *
 * The cache is paged, as in vLLM: a sequence's keys and values live in
 * fixed pages of --page-tokens tokens (--page-size bytes each), one
 * allocation per page. Each step is one decoding iteration:
 *   - with probability --arrival a request arrives with a prompt of
 *     1..--max-prompt tokens: a prefill workspace (tag 0) is allocated, the
 *     prompt's pages are allocated and written, the workspace is freed;
 *   - every running sequence produces one token and, when its last page is
 *     full, allocates the next page;
 *   - each sequence finishes with probability 1/--mean-len per step (so
 *     lengths are geometric), reads a page back and frees all its pages.
 * Pages of sequence id carry tag 1 + id % 63, so the viewer colours them
 * per sequence.
 *
 * ENOMEM is expected once the cache is full: a request that does not fit
 * is rejected, and a running sequence that cannot grow is preempted (its
 * pages are freed, as a server evicts a sequence to recompute it later).
 * Both are counted.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t kv_page_size = 64 << 10;
static uint64_t kv_page_tokens = 16;
static uint64_t kv_max_seqs = 64;
static double kv_arrival = 0.5;
static uint64_t kv_mean_len = 256;
static uint64_t kv_max_prompt = 1024;

static const gpbs_extra_t kv_extras[] = {
    {"--page-size", GPBS_ARG_SIZE, &kv_page_size, "bytes of one KV page"},
    {"--page-tokens", GPBS_ARG_UINT, &kv_page_tokens, "tokens per page"},
    {"--max-seqs", GPBS_ARG_UINT, &kv_max_seqs, "most sequences running at once"},
    {"--arrival", GPBS_ARG_DOUBLE, &kv_arrival,
     "chance that a request arrives in a step (0 to 1)"},
    {"--mean-len", GPBS_ARG_UINT, &kv_mean_len, "mean tokens generated"},
    {"--max-prompt", GPBS_ARG_UINT, &kv_max_prompt, "longest prompt in tokens"},
};

static const char *kv_validate(const gpbs_t *s) {
  (void)s;
  if (kv_page_size < 1) return "--page-size must be at least 1 byte";
  if (kv_page_tokens < 1 || kv_page_tokens > 65536)
    return "--page-tokens must be 1 to 65536";
  if (kv_max_seqs < 1 || kv_max_seqs > 1000000)
    return "--max-seqs must be 1 to 1000000";
  if (!(kv_arrival >= 0 && kv_arrival <= 1)) return "--arrival must be 0 to 1";
  if (kv_mean_len < 1) return "--mean-len must be at least 1";
  if (kv_max_prompt < 1 || kv_max_prompt > 100000000)
    return "--max-prompt must be 1 to 100000000";
  return NULL;
}

static const gpbs_sample_t kv_sample = {
    .prog = "gpubuddy-sample-kvcache",
    .summary = "An LLM server's paged KV cache.",
    .details =
        "Requests arrive (prefill: a workspace and the prompt's pages), each\n"
        "running sequence grows by one token per step and takes a new page\n"
        "when its last one is full, and sequences finish at random times,\n"
        "freeing their pages. ENOMEM is expected when the cache is full: an\n"
        "arriving request is rejected, a growing sequence is preempted\n"
        "(its pages are freed); both are counted.",
    .default_steps = 2000,
    .extras = kv_extras,
    .nextras = sizeof kv_extras / sizeof kv_extras[0],
    .validate = kv_validate,
};

typedef struct kv_seq {
  bool active;
  uint64_t id;
  uint64_t tokens;
  void **pages;
  uint32_t *values;
  uint64_t npages, cap;
} kv_seq_t;

typedef struct kv_counts {
  uint64_t arrived, rejected, preempted, finished, tokens, running;
} kv_counts_t;

static void kv_release(gpbs_t *s, kv_seq_t *q, bool verify) {
  if (verify && q->npages) {
    uint64_t i = gpbs_below(s, q->npages);
    gpbs_verify(s, q->pages[i], kv_page_size, q->values[i]);
  }
  for (uint64_t i = 0; i < q->npages; i++) gpbs_free(s, q->pages[i]);
  q->npages = 0;
  q->active = false;
}

/* Adds one page. 0, GPB_ENOMEM/GPB_ETOOBIG (counted), or another error. */
static int kv_grow(gpbs_t *s, kv_seq_t *q) {
  if (q->npages == q->cap) {
    uint64_t cap = q->cap ? q->cap * 2 : 8;
    void **p = realloc(q->pages, cap * sizeof *p);
    if (!p) return GPB_EHOSTMEM;
    q->pages = p;
    uint32_t *v = realloc(q->values, cap * sizeof *v);
    if (!v) return GPB_EHOSTMEM;
    q->values = v;
    q->cap = cap;
  }
  void *page;
  int rc = gpbs_alloc(s, kv_page_size, (uint32_t)(1 + q->id % 63), &page);
  if (rc) return rc;
  q->values[q->npages] = gpbs_touch(s, page, kv_page_size);
  q->pages[q->npages++] = page;
  return 0;
}

static bool kv_is_room(int rc) { return rc == GPB_ENOMEM || rc == GPB_ETOOBIG; }

/* Prefill of a new request into free slot q. -1 on an unexpected error. */
static int kv_arrive(gpbs_t *s, kv_seq_t *q, uint64_t id, kv_counts_t *c) {
  uint64_t prompt = 1 + gpbs_below(s, kv_max_prompt);
  q->active = true;
  q->id = id;
  q->tokens = prompt;
  q->npages = 0;
  c->arrived++;
  /* Activations of the prompt's forward pass: a few times its KV bytes. */
  double want = 2.0 * (double)prompt * (double)kv_page_size / (double)kv_page_tokens;
  size_t scratch_bytes = want > 1e18 ? (size_t)1e18 : (size_t)want;
  void *scratch = NULL;
  int rc = gpbs_alloc(s, scratch_bytes ? scratch_bytes : 1, 0, &scratch);
  if (rc == 0) gpbs_touch(s, scratch, scratch_bytes);
  uint64_t need = (prompt + kv_page_tokens - 1) / kv_page_tokens;
  while (rc == 0 && q->npages < need) rc = kv_grow(s, q);
  if (scratch) gpbs_free(s, scratch);
  if (rc == 0) {
    c->running++;
    return 0;
  }
  kv_release(s, q, false);
  if (!kv_is_room(rc)) {
    if (rc == GPB_EHOSTMEM) gpbs_error(s, "out of host memory for page lists");
    return -1;
  }
  c->rejected++;
  return 0;
}

int main(int argc, char **argv) {
  gpbs_t s;
  int status;
  if (!gpbs_start(&s, &kv_sample, argc, argv, &status)) return status;

  kv_seq_t *seqs = calloc(kv_max_seqs, sizeof *seqs);
  if (!seqs) {
    gpbs_error(&s, "no host memory for %llu sequences",
               (unsigned long long)kv_max_seqs);
    return gpbs_finish(&s);
  }
  kv_counts_t c;
  memset(&c, 0, sizeof c);
  uint64_t next_id = 0, step = 0;
  bool broken = false;
  double finish_p = 1.0 / (double)kv_mean_len;
  for (; !broken && step < s.steps && gpbs_running(&s); step++) {
    if (gpbs_uniform(&s) < kv_arrival && c.running < kv_max_seqs) {
      uint64_t slot = 0;
      while (seqs[slot].active) slot++;
      if (kv_arrive(&s, &seqs[slot], next_id++, &c) < 0) broken = true;
    }
    for (uint64_t i = 0; !broken && i < kv_max_seqs; i++) {
      kv_seq_t *q = &seqs[i];
      if (!q->active) continue;
      q->tokens++;
      c.tokens++;
      if (q->tokens > q->npages * kv_page_tokens) {
        int rc = kv_grow(&s, q);
        if (kv_is_room(rc)) {
          c.preempted++;
          c.running--;
          kv_release(&s, q, false);
          continue;
        }
        if (rc) {
          if (rc == GPB_EHOSTMEM) gpbs_error(&s, "out of host memory for page lists");
          broken = true;
          break;
        }
      }
      if (gpbs_uniform(&s) < finish_p) {
        c.finished++;
        c.running--;
        kv_release(&s, q, true);
      }
    }
    gpbs_progress(&s, step + 1, "%llu running, %llu finished, %llu preempted",
                  (unsigned long long)c.running, (unsigned long long)c.finished,
                  (unsigned long long)c.preempted);
    gpbs_pace(&s);
  }

  gpbs_say(&s, "%llu requests: %llu finished, %llu still running, %llu "
           "rejected and %llu preempted for lack of room; %llu tokens decoded",
           (unsigned long long)c.arrived, (unsigned long long)c.finished,
           (unsigned long long)c.running, (unsigned long long)c.rejected,
           (unsigned long long)c.preempted, (unsigned long long)c.tokens);
  gpbs_report(&s, "with the running sequences live");
  for (uint64_t i = 0; i < kv_max_seqs; i++) {
    if (seqs[i].active) kv_release(&s, &seqs[i], true);
    free(seqs[i].pages);
    free(seqs[i].values);
  }
  free(seqs);
  return gpbs_finish(&s);
}
