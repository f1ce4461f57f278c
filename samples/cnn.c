/* SPDX-License-Identifier: MIT */
/*
 * cnn.c: gpubuddy-sample-cnn, a CNN-style inference loop.
 *
 * The model is --layers convolutions in stages of three: each stage halves
 * the image side and doubles the channels, like a ResNet. Its weights
 * (fp16, 3x3 kernels) are allocated once and stay live for the whole run.
 * Each step is one inference on a batch whose size is drawn uniformly from
 * 1..--max-batch, so the activation sizes change from step to step:
 *   - the input batch is allocated and written;
 *   - per layer: the output activation is allocated, a convolution
 *     workspace is allocated on even layers and freed after the layer, the
 *     layer "computes" (writes its output) and its input is freed;
 *   - a stage's input is kept live until the stage ends (the residual), so
 *     frees are not simply last-in first-out;
 *   - the last activation (the logits) is read back and freed.
 * Tags: 1 weights, 2 activations, 3 workspace.
 *
 * ENOMEM while the weights load is an error (the pool cannot hold the
 * model). ENOMEM during a batch is expected when the batch does not fit:
 * the batch is dropped, its memory freed, and the run goes on.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CNN_TAG_WEIGHTS = 1, CNN_TAG_ACT = 2, CNN_TAG_WORKSPACE = 3 };
#define CNN_MAX_LAYERS 64

static uint64_t cnn_layers = 12;
static uint64_t cnn_max_batch = 32;
static uint64_t cnn_image = 64;
static uint64_t cnn_channels = 32;

static const gpbs_extra_t cnn_extras[] = {
    {"--layers", GPBS_ARG_UINT, &cnn_layers, "convolution layers (1 to 64)"},
    {"--max-batch", GPBS_ARG_UINT, &cnn_max_batch,
     "largest batch; each step draws 1..N"},
    {"--image", GPBS_ARG_UINT, &cnn_image, "input image side in pixels"},
    {"--channels", GPBS_ARG_UINT, &cnn_channels, "channels of the first stage"},
};

static const char *cnn_validate(const gpbs_t *s) {
  (void)s;
  if (cnn_layers < 1 || cnn_layers > CNN_MAX_LAYERS)
    return "--layers must be 1 to 64";
  if (cnn_max_batch < 1 || cnn_max_batch > 65536)
    return "--max-batch must be 1 to 65536";
  if (cnn_image < 1 || cnn_image > 16384) return "--image must be 1 to 16384";
  if (cnn_channels < 1 || cnn_channels > 65536)
    return "--channels must be 1 to 65536";
  return NULL;
}

static const gpbs_sample_t cnn_sample = {
    .prog = "gpubuddy-sample-cnn",
    .summary = "A CNN-style inference loop whose batch size varies.",
    .details =
        "The weights of --layers convolutions stay live; each step runs one\n"
        "batch of 1..--max-batch images: activations are allocated layer by\n"
        "layer, a stage's input is kept for its residual, workspaces come\n"
        "and go, and the logits are read back. ENOMEM while loading weights\n"
        "is an error; ENOMEM during a batch is expected when it does not\n"
        "fit: the batch is dropped and counted.",
    .default_steps = 500,
    .extras = cnn_extras,
    .nextras = sizeof cnn_extras / sizeof cnn_extras[0],
    .validate = cnn_validate,
};

typedef struct cnn_model {
  size_t act[CNN_MAX_LAYERS + 1]; /* bytes per image: [0] the input */
  size_t weights[CNN_MAX_LAYERS];
  void *w[CNN_MAX_LAYERS];
  uint32_t wval[CNN_MAX_LAYERS];
} cnn_model_t;

/* An activation or workspace held during one batch. */
typedef struct cnn_buf {
  void *p;
  size_t size;
  uint32_t value;
} cnn_buf_t;

static void cnn_shape(cnn_model_t *m) {
  uint64_t side = cnn_image, ch = cnn_channels, prev_ch = 3;
  m->act[0] = (size_t)(cnn_image * cnn_image * 3 * 2);
  for (uint64_t l = 0; l < cnn_layers; l++) {
    if (l > 0 && l % 3 == 0) {
      side = side > 1 ? side / 2 : 1;
      ch = ch < 8192 ? ch * 2 : ch;
    }
    m->act[l + 1] = (size_t)(side * side * ch * 2);
    m->weights[l] = (size_t)(prev_ch * ch * 9 * 2 + ch * 2);
    prev_ch = ch;
  }
}

static void cnn_drop(gpbs_t *s, cnn_buf_t *b) {
  if (b->p) gpbs_free(s, b->p);
  b->p = NULL;
}

/* Allocates and writes b; 0, or the error (already counted). */
static int cnn_take(gpbs_t *s, cnn_buf_t *b, size_t size, uint32_t tag) {
  int rc = gpbs_alloc(s, size, tag, &b->p);
  if (rc) {
    b->p = NULL;
    return rc;
  }
  b->size = size;
  b->value = gpbs_touch(s, b->p, size);
  return 0;
}

/* One inference. Returns 1 done, 0 dropped for lack of room, -1 error. */
static int cnn_batch(gpbs_t *s, const cnn_model_t *m, size_t batch) {
  cnn_buf_t in = {0}, out = {0}, skip = {0}, ws = {0};
  int rc = cnn_take(s, &in, m->act[0] * batch, CNN_TAG_ACT);
  for (uint64_t l = 0; rc == 0 && l < cnn_layers; l++) {
    if (l % 3 == 0 && l > 0) { /* a new stage keeps its input */
      skip = in;
      in.p = NULL;
    }
    const cnn_buf_t *src = in.p ? &in : &skip;
    if ((rc = cnn_take(s, &out, m->act[l + 1] * batch, CNN_TAG_ACT))) break;
    if (l % 2 == 0 &&
        (rc = cnn_take(s, &ws, (m->act[l + 1] * batch) / 2 + 256,
                       CNN_TAG_WORKSPACE)))
      break;
    /* The layer has read its input: on the device, prove it was intact. */
    if (l == 0) gpbs_verify(s, src->p, src->size, src->value);
    cnn_drop(s, &ws);
    cnn_drop(s, &in);
    if (l % 3 == 2) cnn_drop(s, &skip); /* the residual add is done */
    in = out;
    out.p = NULL;
  }
  if (rc == 0) gpbs_verify(s, in.p, in.size, in.value); /* read the logits */
  cnn_drop(s, &in);
  cnn_drop(s, &out);
  cnn_drop(s, &skip);
  cnn_drop(s, &ws);
  if (rc == GPB_ENOMEM || rc == GPB_ETOOBIG) return 0;
  return rc ? -1 : 1;
}

int main(int argc, char **argv) {
  gpbs_t s;
  int status;
  if (!gpbs_start(&s, &cnn_sample, argc, argv, &status)) return status;

  cnn_model_t m;
  memset(&m, 0, sizeof m);
  cnn_shape(&m);
  size_t wtotal = 0;
  char b1[32], b2[32];
  bool ok = true;
  for (uint64_t l = 0; l < cnn_layers && ok; l++) {
    int rc = gpbs_alloc(&s, m.weights[l], CNN_TAG_WEIGHTS, &m.w[l]);
    if (rc == GPB_ENOMEM || rc == GPB_ETOOBIG)
      gpbs_error(&s, "the weights do not fit the pool (layer %llu, %s): use a "
                 "larger --pool-size", (unsigned long long)l,
                 gpbs_fmt_size(m.weights[l], b1));
    if (rc) {
      m.w[l] = NULL;
      ok = false;
      break;
    }
    m.wval[l] = gpbs_touch(&s, m.w[l], m.weights[l]);
    wtotal += m.weights[l];
  }
  if (ok)
    gpbs_say(&s, "model: %llu layers, %s of weights, %s of activations per "
             "image at the input, batches of 1..%llu",
             (unsigned long long)cnn_layers, gpbs_fmt_size(wtotal, b1),
             gpbs_fmt_size(m.act[1], b2), (unsigned long long)cnn_max_batch);

  uint64_t done = 0, dropped = 0, images = 0, step = 0;
  for (; ok && step < s.steps && gpbs_running(&s); step++) {
    size_t batch = 1 + (size_t)gpbs_below(&s, cnn_max_batch);
    int r = cnn_batch(&s, &m, batch);
    if (r < 0) break;
    if (r) {
      done++;
      images += batch;
    } else {
      dropped++;
    }
    gpbs_progress(&s, step + 1, "%llu batches run, %llu dropped",
                  (unsigned long long)done, (unsigned long long)dropped);
    gpbs_pace(&s);
  }
  gpbs_say(&s, "%llu batches run (%llu images), %llu dropped for lack of room",
           (unsigned long long)done, (unsigned long long)images,
           (unsigned long long)dropped);
  gpbs_report(&s, "with the weights live");
  for (uint64_t l = 0; l < cnn_layers; l++)
    if (m.w[l]) {
      gpbs_verify(&s, m.w[l], m.weights[l], m.wval[l]);
      gpbs_free(&s, m.w[l]);
    }
  return gpbs_finish(&s);
}
