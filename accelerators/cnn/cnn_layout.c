/* cnn_layout.c - a cnn stage's state block layout (cnn_layout.h). */
#include "cnn_layout.h"

#include "ember/ember_errors.h"

_Static_assert(sizeof(cnn_state_header) == 64, "the header is 64 bytes");

static uint64_t align64(uint64_t n) { return (n + 63) & ~(uint64_t)63; }

int cnn_layout_compute(const cnn_net *net, uint32_t first, uint32_t end,
                       uint32_t batch, uint32_t slots, cnn_layout *out) {
  size_t n;
  const cnn_layer *layers = cnn_net_layers(net, &n);
  uint64_t params = 0;
  for (uint32_t i = first; i < end; i++)
    params += layers[i].weights + layers[i].biases;
  const cnn_layer *a = &layers[first], *b = &layers[end - 1];
  /* each factor is bounded by cnn_net.h's limits: no overflow in 64 bits
   * (params <= 2^28, elements <= 2^26 per sample, batch <= 2^16) */
  out->params = params;
  out->in_elems = (uint64_t)a->in.h * a->in.w * a->in.c * batch;
  out->out_elems = (uint64_t)b->out.h * b->out.w * b->out.c * batch;
  out->last = b->kind == CNN_LAYER_SOFTMAX;
  uint64_t pbytes = align64(params * sizeof(float));
  out->params_off = sizeof(cnn_state_header);
  out->momentum_off = out->params_off + pbytes;
  out->grads_off = out->momentum_off + pbytes;
  out->slots = slots;
  out->stash_off = out->grads_off + pbytes;
  out->stash_stride = align64(out->in_elems * sizeof(float));
  out->labels_off = out->stash_off + slots * out->stash_stride;
  out->labels_stride = out->last ? align64(batch) : 0;
  out->total = out->labels_off + slots * out->labels_stride;
  if (out->total > SIZE_MAX) return EMBER_ETOOBIG;
  return 0;
}

uint64_t cnn_stage_key(const uint8_t *text, size_t len, uint32_t first,
                       uint32_t end, uint32_t batch, uint32_t slots) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < len; i++) h = (h ^ text[i]) * 0x100000001b3ull;
  /* slots only when more than one: one-slot keys stay what they were */
  uint32_t tail[4] = {first, end, batch, slots};
  for (int k = 0; k < (slots > 1 ? 4 : 3); k++)
    for (int s = 0; s < 32; s += 8)
      h = (h ^ ((tail[k] >> s) & 0xff)) * 0x100000001b3ull;
  return h;
}
