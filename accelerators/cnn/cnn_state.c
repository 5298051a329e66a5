/*
 * cnn_state.c - what every back end does alike to a cnn state block's
 * header (stamping it for a stage, refusing a block stamped for another),
 * INIT's seeded He-uniform weights, on host memory, and the packed
 * Result (cnn_task.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_task.h"
#include "ember/ember_errors.h"

void cnn_task_stamp(const cnn_task *t, cnn_state_header *h) {
  memset(h, 0, sizeof *h);
  memcpy(h->magic, CNN_STATE_MAGIC, sizeof h->magic);
  h->key = t->key;
  h->first = t->first;
  h->end = t->end;
  h->batch = t->batch;
  h->slots = t->slots;
  h->channel_begin = t->layout.c0;
  h->channel_end = t->layout.c1;
}

int cnn_task_check_stamp(const cnn_task *t, const cnn_state_header *h,
                         char *err, size_t err_len) {
  if (memcmp(h->magic, CNN_STATE_MAGIC, sizeof h->magic) != 0) {
    snprintf(err, err_len, "the state block holds no stage: INIT or "
             "SET_PARAMS it first");
    return EMBER_ESTATE;
  }
  if (h->key != t->key && h->channel_end) {
    snprintf(err, err_len, "the state block holds another stage (layer %u's "
             "channels [%u, %u), batch %u, or another network)", h->first,
             h->channel_begin, h->channel_end, h->batch);
    return EMBER_ESTATE;
  }
  if (h->key != t->key) {
    snprintf(err, err_len, "the state block holds another stage (layers "
             "%u..%u, batch %u, or another network)", h->first,
             h->end ? h->end - 1 : 0, h->batch);
    return EMBER_ESTATE;
  }
  return 0;
}

cnn_pass cnn_task_forward_pass(const cnn_task *t, uint64_t updates) {
  cnn_pass p = {t->inference ? CNN_MODE_INFER : CNN_MODE_TRAIN, t->seed,
                t->has_step ? t->step : updates, t->sample0};
  return p;
}

cnn_pass cnn_task_slot_pass(const cnn_slot_pass *sp) {
  cnn_pass p = {CNN_MODE_RECOMPUTE, 0, 0, 0};
  if (sp) {
    p.seed = sp->seed;
    p.step = sp->step;
    p.sample0 = sp->sample0;
  }
  return p;
}

/* splitmix64 */
static uint64_t next_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* He-uniform weights, U(-sqrt(6 / fan_in), sqrt(6 / fan_in)), from a
 * stream per layer seeded by (seed, the layer's index in the network): a
 * stage draws the same weights whatever range it is part of. Biases 0;
 * a batch-normalized layer's scales 1, rolling means 0 and rolling
 * variances 1, after its biases (cnn_pass.h).
 * Of each row of `row` weights (an output: its input channels' weights in
 * order), only [lo, hi) is kept, packed: an ICP slice's part of the
 * layer's weights (the whole row for a whole layer); and of the rows only
 * [r0, r1): an OCP slice's. */
static void init_layer(const cnn_layer *l, size_t index, uint64_t seed,
                       uint64_t row, uint64_t lo, uint64_t hi, uint64_t r0,
                       uint64_t r1, float *w, float *b, uint64_t biases) {
  uint64_t fan_in = l->weights / (l->kind == CNN_LAYER_CONV
                                      ? l->out.c
                                      : (uint64_t)l->out.h * l->out.w *
                                            l->out.c);
  double a = sqrt(6.0 / (double)(fan_in ? fan_in : 1));
  uint64_t s = seed ^ (0xd1b54a32d192ed03ull * (index + 1));
  for (uint64_t i = 0, k = 0, col = 0, r = 0; i < l->weights; i++) {
    double u = (double)(next_u64(&s) >> 11) * 0x1.0p-53;
    if (col >= lo && col < hi && r >= r0 && r < r1)
      w[k++] = (float)((2 * u - 1) * a);
    if (++col == row) {
      col = 0;
      r++;
    }
  }
  memset(b, 0, biases * sizeof *b);
  for (uint64_t c = 0; c < l->scales; c++) {
    b[biases + c] = 1.0f;                  /* scales */
    b[biases + l->scales + c] = 0.0f;      /* rolling means */
    b[biases + 2 * l->scales + c] = 1.0f;  /* rolling variances */
  }
}

void cnn_task_init_params(const cnn_task *t, float *params) {
  size_t n;
  const cnn_layer *layers = cnn_net_layers(t->net, &n);
  const cnn_layout *L = &t->layout;
  if (L->icp) {
    const cnn_layer *l = &layers[t->first];
    uint64_t per = l->kind == CNN_LAYER_CONV ? (uint64_t)l->size * l->size
                                             : 1;
    uint64_t row = (uint64_t)cnn_layer_channels(l) * per;
    init_layer(l, t->first, t->seed, row, L->c0 * per, L->c1 * per, 0,
               UINT64_MAX, params, params + L->weights, L->biases);
    return;
  }
  if (L->ocp) {
    const cnn_layer *l = &layers[t->first];
    uint64_t row = l->weights / cnn_layer_outputs(l);
    init_layer(l, t->first, t->seed, row, 0, row, L->c0, L->c1, params,
               params + L->weights, L->biases);
    return;
  }
  CNN_FOR_PARAM_LAYERS(t, layers, i, off) {
    uint64_t row = layers[i].weights ? layers[i].weights : 1;
    init_layer(&layers[i], i, t->seed, row, 0, row, 0, UINT64_MAX,
               params + off, params + off + layers[i].weights,
               layers[i].biases);
  }
}

void cnn_task_score(Ember__Cnn__Result *res, double loss, const float *probs,
                    const uint8_t *labels, uint32_t batch, uint32_t classes) {
  uint32_t correct = 0;
  for (uint32_t n = 0; n < batch; n++) {
    const float *p = probs + (size_t)n * classes;
    uint32_t best = 0;
    for (uint32_t k = 1; k < classes; k++)
      if (p[k] > p[best]) best = k;
    correct += best == labels[n];
  }
  res->has_loss = res->has_correct = 1;
  res->loss = loss;
  res->correct = correct;
}

int cnn_task_pack_result(const Ember__Cnn__Result *res, acc_output *out,
                         char *err, size_t err_len) {
  size_t len = ember__cnn__result__get_packed_size(res);
  out->data = malloc(len ? len : 1);
  if (!out->data) {
    snprintf(err, err_len, "out of memory");
    return EMBER_ENOMEM;
  }
  out->size = ember__cnn__result__pack(res, out->data);
  return 0;
}
