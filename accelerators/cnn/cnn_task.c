/* cnn_task.c - decoding and checking a cnn task (cnn_task.h). */
#include "cnn_task.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "errbuf.h"

static const char *op_name(Ember__Cnn__Op op) {
  switch (op) {
  case EMBER__CNN__OP__INIT: return "INIT";
  case EMBER__CNN__OP__FORWARD: return "FORWARD";
  case EMBER__CNN__OP__BACKWARD: return "BACKWARD";
  case EMBER__CNN__OP__UPDATE: return "UPDATE";
  case EMBER__CNN__OP__GET_PARAMS: return "GET_PARAMS";
  case EMBER__CNN__OP__SET_PARAMS: return "SET_PARAMS";
  default: return "?";
  }
}

/* a * b, saturated (costs only: sizes are bounded before they are used) */
static uint64_t mul_sat(uint64_t a, uint64_t b) {
  return a && b > UINT64_MAX / a ? UINT64_MAX : a * b;
}

static uint64_t add_sat(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* What the cpu back end (cnn_cpu.h) refuses when it builds a stage,
 * refused here before anything runs (a task may run on any back end): a
 * convolution, max-pool or avg-pool after a connected layer in one stage,
 * and a max-pool window wholly in padding. */
static int check_backend(const cnn_layer *layers, uint32_t first,
                         uint32_t end, char *err, size_t err_len) {
  int flat = 0;
  for (uint32_t i = first; i < end; i++) {
    const cnn_layer *l = &layers[i];
    if ((l->kind == CNN_LAYER_CONV || l->kind == CNN_LAYER_MAXPOOL ||
         l->kind == CNN_LAYER_AVGPOOL) && flat)
      return errbuf_printf(err, err_len, EMBER_EPARAM,
                           "layer %u: a %s after a connected layer in one "
                           "stage is not supported",
                           i, cnn_layer_kind_name(l->kind));
    if (l->kind == CNN_LAYER_CONNECTED) flat = 1;
    if (l->kind == CNN_LAYER_MAXPOOL) {
      int64_t before = l->padding / 2, size = l->size;
      int64_t after_h = ((int64_t)l->out.h - 1) * l->stride + size -
                        l->in.h - before;
      int64_t after_w = ((int64_t)l->out.w - 1) * l->stride + size -
                        l->in.w - before;
      if (before >= size || after_h >= size || after_w >= size)
        return errbuf_printf(err, err_len, EMBER_EPARAM,
                             "layer %u: a max-pool window wholly in padding",
                             i);
    }
  }
  return 0;
}

/* An ICP or OCP slice (cnn.proto): both channel fields, one
 * convolutional or connected layer, a non-empty range of its input
 * channels (a connected layer's input elements) or, with split_outputs,
 * of its output channels (outputs). */
static int check_slice(const cnn_task *t, const cnn_layer *layers,
                       const Ember__Cnn__Params *p, char *err,
                       size_t err_len) {
  int ocp = p->has_split_outputs && p->split_outputs;
  const char *kind = ocp ? "an OCP slice" : "an ICP slice";
  if (!p->has_channel_begin || !p->has_channel_end)
    return errbuf_printf(
        err, err_len, EMBER_EPARAM,
        "channel_begin and channel_end (a slice) come together: %s is missing",
        p->has_channel_begin ? "channel_end" : "channel_begin");
  if (t->end != t->first + 1)
    return errbuf_printf(
        err, err_len, EMBER_EPARAM,
        "%s (channel_begin/end) is one layer, not layers [%u, %u)", kind,
        t->first, t->end);
  const cnn_layer *l = &layers[t->first];
  if (l->kind != CNN_LAYER_CONV && l->kind != CNN_LAYER_CONNECTED)
    return errbuf_printf(
        err, err_len, EMBER_EPARAM,
        "%s splits a convolutional or connected layer; layer %u is a %s", kind,
        t->first, cnn_layer_kind_name(l->kind));
  if (l->batch_norm)
    return errbuf_printf(
        err, err_len, EMBER_EPARAM,
        "%s of layer %u: a batch-normalized convolution is not split (its "
        "normalisation needs the whole sum of every output; the partitioner "
        "keeps such a layer whole)",
        kind, t->first);
  uint32_t all = ocp ? cnn_layer_outputs(l) : cnn_layer_channels(l);
  if (p->channel_begin >= p->channel_end || p->channel_end > all)
    return errbuf_printf(
        err, err_len, EMBER_EPARAM,
        "channels [%u, %u) not a non-empty range of layer %u's %u %s %s",
        p->channel_begin, p->channel_end, t->first, all,
        ocp ? "output" : "input",
        l->kind == CNN_LAYER_CONV ? "channels"
        : ocp                     ? "values"
                                  : "elements");
  return 0;
}

/* The SGD settings: the task's, else the network's; NaN fails every
 * comparison and is refused with the rest. */
static int check_sgd(cnn_task *t, const Ember__Cnn__Params *p, char *err,
                     size_t err_len) {
  const cnn_train *tr = cnn_net_train(t->net);
  t->learning_rate = p->has_learning_rate ? p->learning_rate
                                          : tr->learning_rate;
  t->momentum = p->has_momentum ? p->momentum : tr->momentum;
  t->decay = p->has_decay ? p->decay : tr->decay;
  /* 0: a schedule's rate past its end (poly), the gradients dropped */
  if (!(t->learning_rate >= 0 && t->learning_rate <= 10))
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "learning_rate %g out of [0, 10]", t->learning_rate);
  if (!(t->momentum >= 0 && t->momentum < 1))
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "momentum %g out of [0, 1)", t->momentum);
  if (!(t->decay >= 0 && t->decay < 1))
    return errbuf_printf(err, err_len, EMBER_EPARAM, "decay %g out of [0, 1)",
                         t->decay);
  return 0;
}

static int want_inputs(const cnn_task *t, size_t n_inputs, size_t want,
                       char *err, size_t err_len) {
  if (n_inputs == want) return 0;
  if (t->layout.icp || t->layout.ocp)
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "%s of layer %u's %s channels [%u, %u) takes %zu "
                         "input block%s, not %zu",
                         op_name(t->op), t->first,
                         t->layout.ocp ? "output" : "input", t->layout.c0,
                         t->layout.c1, want, want == 1 ? "" : "s", n_inputs);
  return errbuf_printf(err, err_len, EMBER_EPARAM,
                       "%s of layers %u..%u takes %zu input block%s, not %zu",
                       op_name(t->op), t->first, t->end - 1, want,
                       want == 1 ? "" : "s", n_inputs);
}

static int want_size(const acc_block *b, const char *what, uint64_t bytes,
                     char *err, size_t err_len) {
  if (b->size == bytes) return 0;
  return errbuf_printf(err, err_len, EMBER_EPARAM, "%s: %zu bytes, not %llu",
                       what, b->size, (unsigned long long)bytes);
}

/* error_channels (cnn.proto): BACKWARD of a stage taking an output
 * error; 1..CNN_MAX_ERROR_PIECES counts >= 1 whose sum divides the
 * output's floats per sample. */
static int check_pieces(cnn_task *t, const Ember__Cnn__Params *p, char *err,
                        size_t err_len) {
  const cnn_layout *L = &t->layout;
  if (t->op != EMBER__CNN__OP__BACKWARD || L->last ||
      (L->icp && !L->icp_last))
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "error_channels: only for the BACKWARD of a stage "
                         "that takes an output error");
  if (p->n_error_channels > CNN_MAX_ERROR_PIECES)
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "error_channels: %zu pieces, at most %d",
                         p->n_error_channels, CNN_MAX_ERROR_PIECES);
  uint64_t sum = 0, per_sample = L->out_elems / t->batch;
  for (size_t j = 0; j < p->n_error_channels; j++) {
    if (p->error_channels[j] == 0)
      return errbuf_printf(err, err_len, EMBER_EPARAM,
                           "error_channels: piece %zu is empty", j);
    sum += p->error_channels[j];
    t->pieces[j] = p->error_channels[j];
  }
  if (sum > per_sample || per_sample % sum)
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "error_channels: %llu in all does not divide the "
                         "output's %llu floats per sample",
                         (unsigned long long)sum,
                         (unsigned long long)per_sample);
  t->n_pieces = (uint32_t)p->n_error_channels;
  t->piece_unit = per_sample / sum;
  return 0;
}

/* error_addends (cnn.proto): BACKWARD of a stage taking an output error,
 * 2..CNN_MAX_ERROR_PIECES blocks, not with error_channels. */
static int check_addends(cnn_task *t, const Ember__Cnn__Params *p, char *err,
                         size_t err_len) {
  const cnn_layout *L = &t->layout;
  if (t->op != EMBER__CNN__OP__BACKWARD || L->last ||
      (L->icp && !L->icp_last))
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "error_addends: only for the BACKWARD of a stage that "
                         "takes an output error");
  if (p->n_error_channels)
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "error_addends and error_channels: one or the other");
  if (p->error_addends < 2 || p->error_addends > CNN_MAX_ERROR_PIECES)
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "error_addends: %u, must be 2 to %d", p->error_addends,
                         CNN_MAX_ERROR_PIECES);
  t->n_addends = p->error_addends;
  return 0;
}

/* BACKWARD's output error in pieces or addends: their count and sizes
 * (an addend is the whole error). */
static int check_piece_inputs(const cnn_task *t, const acc_block *inputs,
                              size_t n_inputs, char *err, size_t err_len) {
  uint32_t n = t->n_addends ? t->n_addends : t->n_pieces;
  int rc = want_inputs(t, n_inputs, n, err, err_len);
  for (uint32_t j = 0; !rc && j < n; j++) {
    char what[64];
    snprintf(what, sizeof what, "input %u (output error %s %u)", j,
             t->n_addends ? "addend" : "piece", j);
    uint64_t floats = t->n_addends ? t->layout.out_elems
                                   : (uint64_t)t->batch * t->pieces[j] *
                                         t->piece_unit;
    rc = want_size(&inputs[j], what, floats * sizeof(float), err, err_len);
  }
  return rc;
}

/* The blocks each op takes (cnn.proto). */
static int check_inputs(const cnn_task *t, const acc_block *inputs,
                        size_t n_inputs, char *err, size_t err_len) {
  const cnn_layout *L = &t->layout;
  int rc;
  switch (t->op) {
  case EMBER__CNN__OP__FORWARD:
    if (L->icp || L->ocp) {
      rc = want_inputs(t, n_inputs, L->c0 ? 2 : 1, err, err_len);
      if (!rc)
        rc = want_size(&inputs[0], "input 0 (the layer's whole input)",
                       L->in_elems * sizeof(float), err, err_len);
      if (!rc && L->c0)
        rc = want_size(&inputs[1], L->icp ? "input 1 (the previous slice's "
                                            "partial sums)"
                                          : "input 1 (the previous slice's "
                                            "output)",
                       L->out_elems * sizeof(float), err, err_len);
      return rc;
    }
    rc = want_inputs(t, n_inputs, L->last ? 2 : 1, err, err_len);
    if (!rc)
      rc = want_size(&inputs[0], "input 0 (activations)",
                     L->in_elems * sizeof(float), err, err_len);
    if (!rc && L->last)
      rc = want_size(&inputs[1], "input 1 (labels)", t->batch, err, err_len);
    if (!rc && L->last && inputs[1].data) {
      uint32_t classes = cnn_net_classes(t->net);
      for (uint32_t i = 0; i < t->batch; i++)
        if (inputs[1].data[i] >= classes)
          return errbuf_printf(
              err, err_len, EMBER_EFORMAT,
              "input 1: label %u of sample %u is not below %u classes",
              inputs[1].data[i], i, classes);
    }
    return rc;
  case EMBER__CNN__OP__BACKWARD:
    if (t->n_pieces || t->n_addends)
      return check_piece_inputs(t, inputs, n_inputs, err, err_len);
    rc = want_inputs(t, n_inputs, L->last ? 0 : 1, err, err_len);
    if (!rc && !L->last)
      rc = want_size(&inputs[0], !L->icp || L->icp_last
                                     ? "input 0 (output error)"
                                     : "input 0 (the last slice's error "
                                       "before the activation)",
                     L->out_elems * sizeof(float), err, err_len);
    return rc;
  case EMBER__CNN__OP__SET_PARAMS:
    rc = want_inputs(t, n_inputs, 1, err, err_len);
    if (!rc)
      rc = want_size(&inputs[0], "input 0 (parameters)",
                     L->params * sizeof(float), err, err_len);
    return rc;
  default:
    return want_inputs(t, n_inputs, 0, err, err_len);
  }
}

/* The cost (accel.h): operations are flops (2 per multiply-add, plus the
 * element operations); bytes are what crosses the stage's boundary, the
 * activations and errors in and out (FPDeep keeps weights and kept
 * features on chip), and the parameters for the ops that sweep them. */
static void compute_cost(cnn_task *t) {
  size_t n;
  const cnn_layer *layers = cnn_net_layers(t->net, &n);
  uint64_t fp = 0, bp = 0, elem = 0;
  for (uint32_t i = t->first; i < t->end; i++) {
    fp = add_sat(fp, layers[i].fp_macs);
    bp = add_sat(bp, add_sat(layers[i].eb_macs, layers[i].pg_macs));
    elem = add_sat(elem, layers[i].elem_ops);
  }
  const cnn_layout *L = &t->layout;
  if (L->icp) { /* the slice's share of the layer's multiply-adds; the
                   partial sums' adds, and the activation in the last */
    uint32_t all = cnn_layer_channels(&layers[t->first]);
    uint64_t outs = L->out_elems / t->batch;
    fp = mul_sat(fp, L->c1 - L->c0) / all;
    bp = mul_sat(bp, L->c1 - L->c0) / all;
    elem = add_sat(L->icp_last ? elem : 0, L->c0 ? outs : 0);
  }
  if (L->ocp) { /* its outputs' share of everything */
    uint32_t all = cnn_layer_outputs(&layers[t->first]);
    fp = mul_sat(fp, L->c1 - L->c0) / all;
    bp = mul_sat(bp, L->c1 - L->c0) / all;
    elem = mul_sat(elem, L->c1 - L->c0) / all;
  }
  uint64_t pbytes = L->params * sizeof(float);
  uint64_t in = L->in_elems * sizeof(float), out = L->out_elems * sizeof(float);
  acc_cost *c = &t->cost;
  switch (t->op) {
  case EMBER__CNN__OP__INIT:
    c->ops = L->params;
    c->bytes_written = 3 * pbytes;
    break;
  case EMBER__CNN__OP__FORWARD:
    c->ops = mul_sat(t->batch, add_sat(mul_sat(2, fp), elem));
    c->bytes_read = in + (L->last ? t->batch : 0);
    c->bytes_written = out;
    if (L->icp || L->ocp) /* its channels of the input (OCP: all), the
                             previous slice's output */
      c->bytes_read = L->stash_elems * sizeof(float) + (L->c0 ? out : 0);
    break;
  case EMBER__CNN__OP__BACKWARD:
    c->ops = mul_sat(t->batch, add_sat(mul_sat(2, bp), elem));
    c->bytes_read = L->last ? 0 : out;
    c->bytes_written = t->first ? in : 0;
    if (L->icp) /* its channels' error, and dz from the last slice */
      c->bytes_written = L->stash_elems * sizeof(float) +
                         (L->icp_last ? out : 0);
    break;
  case EMBER__CNN__OP__UPDATE:
    c->ops = 5 * L->params;
    c->bytes_read = 3 * pbytes;
    c->bytes_written = 3 * pbytes;
    break;
  default: /* GET_PARAMS, SET_PARAMS */
    c->ops = L->params;
    c->bytes_read = pbytes;
    c->bytes_written = pbytes;
    break;
  }
}

int cnn_task_prepare(const uint8_t *params, size_t params_len,
                     const acc_block *inputs, size_t n_inputs,
                     cnn_task **out, char *err, size_t err_len) {
  *out = NULL;
  Ember__Cnn__Params *p = ember__cnn__params__unpack(NULL, params_len,
                                                     params);
  if (!p)
    return errbuf_printf(err, err_len, EMBER_EPARAM, "cannot decode Params");
  int rc = 0;
  cnn_task *t = calloc(1, sizeof *t);
  if (!t) {
    ember__cnn__params__free_unpacked(p, NULL);
    return errbuf_printf(err, err_len, EMBER_ENOMEM, "out of memory");
  }
  t->op = p->op;
  t->first = p->first;
  t->end = p->end;
  t->batch = p->batch;
  t->seed = p->seed;
  t->slots = p->slots;
  t->slot = p->slot;
  t->accumulated = p->accumulated;
  t->inference = p->has_inference && p->inference;
  t->has_step = p->has_step;
  t->step = p->step;
  t->sample0 = p->sample_offset;
  if (strcmp(op_name(p->op), "?") == 0) {
    rc = errbuf_printf(err, err_len, EMBER_EPARAM, "unknown op %d", (int)p->op);
    goto out;
  }
  if (p->net.len > CNN_CFG_MAX_BYTES) {
    rc = errbuf_printf(err, err_len, EMBER_EPARAM, "net: %zu bytes, over %u",
                       p->net.len, CNN_CFG_MAX_BYTES);
    goto out;
  }
  char cfg_err[256];
  rc = cnn_cfg_parse((const char *)p->net.data, p->net.len, "net", &t->net,
                     cfg_err, sizeof cfg_err);
  if (rc == EMBER_ENOMEM) {
    rc = errbuf_printf(err, err_len, rc, "out of memory");
    goto out;
  }
  if (rc) {
    rc = errbuf_printf(err, err_len, EMBER_EPARAM, "%s", cfg_err);
    goto out;
  }
  size_t n_layers;
  const cnn_layer *layers = cnn_net_layers(t->net, &n_layers);
  if (t->first >= t->end || t->end > n_layers) {
    rc = errbuf_printf(err, err_len, EMBER_EPARAM,
                       "layers [%u, %u) not a range of the network's %zu",
                       t->first, t->end, n_layers);
    goto out;
  }
  if (t->batch < 1 || t->batch > CNN_MAX_BATCH) {
    rc = errbuf_printf(err, err_len, EMBER_EPARAM, "batch %u out of 1..%u",
                       t->batch, CNN_MAX_BATCH);
    goto out;
  }
  if (t->slots < 1 || t->slots > CNN_MAX_SLOTS || t->slot >= t->slots) {
    rc = errbuf_printf(
        err, err_len, EMBER_EPARAM,
        "slot %u of %u slots: slots out of 1..%u or slot not below them",
        t->slot, t->slots, CNN_MAX_SLOTS);
    goto out;
  }
  if (t->accumulated < 1 || t->accumulated > CNN_MAX_BATCH) {
    rc =
        errbuf_printf(err, err_len, EMBER_EPARAM, "accumulated %u out of 1..%u",
                      t->accumulated, CNN_MAX_BATCH);
    goto out;
  }
  if (t->inference && t->op != EMBER__CNN__OP__FORWARD) {
    rc =
        errbuf_printf(err, err_len, EMBER_EPARAM,
                      "inference: only a FORWARD is an evaluation pass, not %s",
                      op_name(t->op));
    goto out;
  }
  if (t->sample0 > CNN_MAX_BATCH - t->batch) {
    rc = errbuf_printf(
        err, err_len, EMBER_EPARAM,
        "sample_offset %u with batch %u: past a mini-batch's %u samples",
        t->sample0, t->batch, CNN_MAX_BATCH);
    goto out;
  }
  uint64_t acts = (uint64_t)layers[t->first].in.h * layers[t->first].in.w *
                  layers[t->first].in.c;
  for (uint32_t i = t->first; i < t->end; i++)
    acts += (uint64_t)layers[i].out.h * layers[i].out.w * layers[i].out.c;
  if (acts * t->batch > CNN_MAX_BATCH_ACTIVATIONS) {
    rc = errbuf_printf(err, err_len, EMBER_EPARAM,
                       "batch %u x %llu activations of the stage is over %llu",
                       t->batch, (unsigned long long)acts,
                       (unsigned long long)CNN_MAX_BATCH_ACTIVATIONS);
    goto out;
  }
  rc = check_backend(layers, t->first, t->end, err, err_len);
  if (rc) goto out;
  for (uint32_t i = t->first; i < t->end; i++) {
    t->dropout |= layers[i].kind == CNN_LAYER_DROPOUT;
    t->batch_norm |= layers[i].batch_norm;
  }
  int ocp = p->has_split_outputs && p->split_outputs;
  if (p->has_channel_begin || p->has_channel_end || ocp) {
    rc = check_slice(t, layers, p, err, err_len);
    if (rc) goto out;
  }
  if (ocp ? cnn_layout_compute_ocp(t->net, t->first, p->channel_begin,
                                   p->channel_end, t->batch, t->slots,
                                   &t->layout)
      : p->has_channel_begin
          ? cnn_layout_compute_slice(t->net, t->first, p->channel_begin,
                                     p->channel_end, t->batch, t->slots,
                                     &t->layout)
          : cnn_layout_compute(t->net, t->first, t->end, t->batch, t->slots,
                               &t->layout)) {
    rc = errbuf_printf(err, err_len, EMBER_EPARAM,
                       "state too large for this host");
    goto out;
  }
  if (t->op == EMBER__CNN__OP__UPDATE) {
    rc = check_sgd(t, p, err, err_len);
    if (rc) goto out;
  }
  if (p->n_error_channels) {
    rc = check_pieces(t, p, err, err_len);
    if (rc) goto out;
  }
  if (p->has_error_addends && p->error_addends) {
    rc = check_addends(t, p, err, err_len);
    if (rc) goto out;
  }
  rc = check_inputs(t, inputs, n_inputs, err, err_len);
  if (rc) goto out;
  if (t->layout.icp)
    t->key = cnn_slice_key(p->net.data, p->net.len, t->first, t->layout.c0,
                           t->layout.c1, t->batch, t->slots);
  else if (t->layout.ocp)
    t->key = cnn_ocp_key(p->net.data, p->net.len, t->first, t->layout.c0,
                         t->layout.c1, t->batch, t->slots);
  else
    t->key = cnn_stage_key(p->net.data, p->net.len, t->first, t->end,
                           t->batch, t->slots);
  t->text = malloc(p->net.len ? p->net.len : 1);
  if (!t->text) {
    rc = errbuf_printf(err, err_len, EMBER_ENOMEM, "out of memory");
    goto out;
  }
  memcpy(t->text, p->net.data, p->net.len);
  t->text_len = p->net.len;
  compute_cost(t);
out:
  ember__cnn__params__free_unpacked(p, NULL);
  if (rc) {
    cnn_task_free(t);
    return rc;
  }
  *out = t;
  return 0;
}

size_t cnn_task_max_outputs(const cnn_task *t) {
  switch (t->op) {
  case EMBER__CNN__OP__FORWARD:
  case EMBER__CNN__OP__GET_PARAMS:
    return 1;
  case EMBER__CNN__OP__BACKWARD:
    if (t->layout.icp) return t->layout.icp_last ? 2 : 1;
    return t->first ? 1 : 0; /* an OCP slice's part of the input error */
  default:
    return 0;
  }
}

uint64_t cnn_task_output_size(const cnn_task *t, size_t i) {
  if (i >= cnn_task_max_outputs(t)) return 0;
  switch (t->op) {
  case EMBER__CNN__OP__FORWARD: return t->layout.out_elems * sizeof(float);
  case EMBER__CNN__OP__BACKWARD: /* a slice's block 1: dz */
    return (i ? t->layout.out_elems : t->layout.stash_elems) * sizeof(float);
  case EMBER__CNN__OP__GET_PARAMS: return t->layout.params * sizeof(float);
  default: return 0;
  }
}

void cnn_task_free(cnn_task *t) {
  if (!t) return;
  cnn_net_destroy(t->net);
  free(t->text);
  free(t);
}
