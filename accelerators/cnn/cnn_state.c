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
}

int cnn_task_check_stamp(const cnn_task *t, const cnn_state_header *h,
                         char *err, size_t err_len) {
  if (memcmp(h->magic, CNN_STATE_MAGIC, sizeof h->magic) != 0) {
    snprintf(err, err_len, "the state block holds no stage: INIT or "
             "SET_PARAMS it first");
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

/* splitmix64 */
static uint64_t next_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* He-uniform weights, U(-sqrt(6 / fan_in), sqrt(6 / fan_in)), from a
 * stream per layer seeded by (seed, the layer's index in the network): a
 * stage draws the same weights whatever range it is part of. Biases 0. */
static void init_layer(const cnn_layer *l, size_t index, uint64_t seed,
                       float *w, float *b) {
  uint64_t fan_in = l->weights / (l->kind == CNN_LAYER_CONV
                                      ? l->out.c
                                      : (uint64_t)l->out.h * l->out.w *
                                            l->out.c);
  double a = sqrt(6.0 / (double)(fan_in ? fan_in : 1));
  uint64_t s = seed ^ (0xd1b54a32d192ed03ull * (index + 1));
  for (uint64_t i = 0; i < l->weights; i++) {
    double u = (double)(next_u64(&s) >> 11) * 0x1.0p-53;
    w[i] = (float)((2 * u - 1) * a);
  }
  memset(b, 0, l->biases * sizeof *b);
}

void cnn_task_init_params(const cnn_task *t, float *params) {
  size_t n;
  const cnn_layer *layers = cnn_net_layers(t->net, &n);
  CNN_FOR_PARAM_LAYERS(t, layers, i, off)
    init_layer(&layers[i], i, t->seed, params + off,
               params + off + layers[i].weights);
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
