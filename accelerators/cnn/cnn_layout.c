/* cnn_layout.c - a cnn stage's state block layout (cnn_layout.h). */
#include "cnn_layout.h"

#include "ember/ember_errors.h"

_Static_assert(sizeof(cnn_state_header) == 64, "the header is 64 bytes");

static uint64_t align64(uint64_t n) { return (n + 63) & ~(uint64_t)63; }

/* The regions after the header, from out's params, stash_elems and last:
 * params, momentum, grads, slots stashes, labels (the last stage), then
 * kept_stride bytes per slot, then pass_stride bytes per slot. */
static int place_regions(cnn_layout *out, uint32_t batch, uint32_t slots,
                         uint64_t kept_stride, uint64_t pass_stride) {
  uint64_t pbytes = align64(out->params * sizeof(float));
  out->params_off = sizeof(cnn_state_header);
  out->momentum_off = out->params_off + pbytes;
  out->grads_off = out->momentum_off + pbytes;
  out->slots = slots;
  out->stash_off = out->grads_off + pbytes;
  out->stash_stride = align64(out->stash_elems * sizeof(float));
  out->labels_off = out->stash_off + slots * out->stash_stride;
  out->labels_stride = out->last ? align64(batch) : 0;
  out->kept_off = out->labels_off + slots * out->labels_stride;
  out->kept_stride = kept_stride;
  out->pass_off = out->kept_off + slots * kept_stride;
  out->pass_stride = pass_stride;
  out->total = out->pass_off + slots * pass_stride;
  return out->total > SIZE_MAX ? EMBER_ETOOBIG : 0;
}

int cnn_layout_compute(const cnn_net *net, uint32_t first, uint32_t end,
                       uint32_t batch, uint32_t slots, cnn_layout *out) {
  size_t n;
  const cnn_layer *layers = cnn_net_layers(net, &n);
  uint64_t params = 0;
  int dropout = 0;
  for (uint32_t i = first; i < end; i++) {
    params += cnn_layer_params(&layers[i]);
    dropout |= layers[i].kind == CNN_LAYER_DROPOUT;
  }
  const cnn_layer *a = &layers[first], *b = &layers[end - 1];
  /* each factor is bounded by cnn_net.h's limits: no overflow in 64 bits
   * (params <= 2^28, elements <= 2^26 per sample, batch <= 2^16) */
  out->params = params;
  out->in_elems = (uint64_t)a->in.h * a->in.w * a->in.c * batch;
  out->out_elems = (uint64_t)b->out.h * b->out.w * b->out.c * batch;
  out->last = b->kind == CNN_LAYER_SOFTMAX;
  out->stash_elems = out->in_elems;
  out->icp = out->icp_last = out->ocp = 0;
  out->c0 = out->c1 = 0;
  out->unit = 0;
  out->weights = out->biases = 0;
  return place_regions(out, batch, slots, 0,
                       dropout ? align64(sizeof(cnn_slot_pass)) : 0);
}

int cnn_layout_compute_slice(const cnn_net *net, uint32_t layer, uint32_t c0,
                             uint32_t c1, uint32_t batch, uint32_t slots,
                             cnn_layout *out) {
  size_t n;
  const cnn_layer *l = &cnn_net_layers(net, &n)[layer];
  uint64_t outs = (uint64_t)l->out.h * l->out.w * l->out.c;
  uint64_t per_out = l->kind == CNN_LAYER_CONV
                         ? (uint64_t)l->size * l->size
                         : 1; /* weights per output row and channel */
  uint64_t rows = l->kind == CNN_LAYER_CONV ? l->out.c : outs;
  out->icp = 1;
  out->ocp = 0;
  out->c0 = c0;
  out->c1 = c1;
  out->icp_last = c1 == cnn_layer_channels(l);
  out->unit = cnn_layer_channel_unit(l);
  out->weights = rows * (c1 - c0) * per_out;
  out->biases = out->icp_last ? l->biases : 0;
  out->params = out->weights + out->biases;
  out->in_elems = (uint64_t)l->in.h * l->in.w * l->in.c * batch;
  out->out_elems = outs * batch;
  out->stash_elems = (uint64_t)(c1 - c0) * out->unit * batch;
  out->last = 0;
  return place_regions(out, batch, slots,
                       out->icp_last && l->act != CNN_ACT_LINEAR
                           ? align64(out->out_elems * sizeof(float))
                           : 0,
                       0);
}

int cnn_layout_compute_ocp(const cnn_net *net, uint32_t layer, uint32_t c0,
                           uint32_t c1, uint32_t batch, uint32_t slots,
                           cnn_layout *out) {
  size_t n;
  const cnn_layer *l = &cnn_net_layers(net, &n)[layer];
  uint64_t row = l->weights / cnn_layer_outputs(l); /* weights per output */
  out->icp = out->icp_last = 0;
  out->ocp = 1;
  out->c0 = c0;
  out->c1 = c1;
  out->unit = cnn_layer_output_unit(l);
  out->weights = row * (c1 - c0);
  out->biases = c1 - c0;
  out->params = out->weights + out->biases;
  out->in_elems = (uint64_t)l->in.h * l->in.w * l->in.c * batch;
  out->out_elems = (uint64_t)l->out.h * l->out.w * l->out.c * batch;
  out->stash_elems = out->in_elems;
  out->last = 0;
  return place_regions(out, batch, slots, 0, 0);
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

static uint64_t tagged_key(const uint8_t *text, size_t len, uint32_t layer,
                           uint32_t tag, uint32_t c0, uint32_t c1,
                           uint32_t batch, uint32_t slots) {
  uint64_t h = cnn_stage_key(text, len, layer, layer + 1, batch, slots);
  uint32_t tail[3] = {tag, c0, c1};
  for (int k = 0; k < 3; k++)
    for (int s = 0; s < 32; s += 8)
      h = (h ^ ((tail[k] >> s) & 0xff)) * 0x100000001b3ull;
  return h;
}

uint64_t cnn_slice_key(const uint8_t *text, size_t len, uint32_t layer,
                       uint32_t c0, uint32_t c1, uint32_t batch,
                       uint32_t slots) {
  return tagged_key(text, len, layer, 0x49435030u /* "ICP0" */, c0, c1,
                    batch, slots);
}

uint64_t cnn_ocp_key(const uint8_t *text, size_t len, uint32_t layer,
                     uint32_t c0, uint32_t c1, uint32_t batch,
                     uint32_t slots) {
  return tagged_key(text, len, layer, 0x4f435030u /* "OCP0" */, c0, c1,
                    batch, slots);
}
