/*
 * cnn_net.c - a CNN's layers: shapes chained and checked, parameter and
 * work counts, the limits of cnn_net.h, and the network printed as text.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_net_internal.h"
#include "cnn_text.h"
#include "errbuf.h"

struct cnn_net {
  cnn_shape input;
  cnn_train train;
  cnn_layer *layers;
  size_t count, cap;
  uint64_t params, activations, macs;
};

/* a * b, or false when it would be over limit (no overflow: a, b and
 * limit are below 2^63). */
static bool mul_le(uint64_t a, uint64_t b, uint64_t limit, uint64_t *out) {
  if (b && a > limit / b) return false;
  *out = a * b;
  return true;
}

static uint64_t elements(cnn_shape s) {
  return (uint64_t)s.h * s.w * s.c; /* each < 2^25: no overflow */
}

const char *cnn_layer_kind_name(cnn_layer_kind kind) {
  switch (kind) {
  case CNN_LAYER_CONV: return "convolutional";
  case CNN_LAYER_MAXPOOL: return "maxpool";
  case CNN_LAYER_CONNECTED: return "connected";
  case CNN_LAYER_SOFTMAX: return "softmax";
  case CNN_LAYER_DROPOUT: return "dropout";
  case CNN_LAYER_AVGPOOL: return "avgpool";
  }
  return "?";
}

/* The forward element operations of an activation per output. */
static uint64_t act_ops(cnn_activation act) {
  switch (act) {
  case CNN_ACT_RELU:
  case CNN_ACT_LEAKY: return 1;
  case CNN_ACT_LOGISTIC: return 4;
  case CNN_ACT_LINEAR: return 0;
  }
  return 0;
}

double cnn_train_rate(const cnn_train *t, double base, uint64_t k) {
  double kk = (double)k, r = base;
  if (k < t->burn_in) return base * pow(kk / t->burn_in, t->power);
  switch (t->policy) {
  case CNN_POLICY_CONSTANT: break;
  case CNN_POLICY_STEP:
    r = base * pow(t->scale, (double)(k / t->step));
    break;
  case CNN_POLICY_STEPS:
    for (uint32_t i = 0; i < t->n_steps && t->steps[i] <= k; i++)
      r *= t->scales[i];
    break;
  case CNN_POLICY_EXP:
    r = base * pow(t->gamma, kk);
    break;
  case CNN_POLICY_POLY:
    r = k >= t->max_batches
            ? 0
            : base * pow(1 - kk / t->max_batches, t->power);
    break;
  case CNN_POLICY_SIG:
    r = base / (1 + exp(t->gamma * (kk - t->step)));
    break;
  }
  return isfinite(r) && r > 0 ? r : 0;
}

uint32_t cnn_layer_channels(const cnn_layer *l) {
  if (l->kind == CNN_LAYER_CONV) return l->in.c;
  /* within cnn_net.h's limits: per-sample activations are below 2^26 */
  if (l->kind == CNN_LAYER_CONNECTED) return (uint32_t)elements(l->in);
  return 0;
}

uint64_t cnn_layer_channel_unit(const cnn_layer *l) {
  return l->kind == CNN_LAYER_CONV ? (uint64_t)l->in.h * l->in.w : 1;
}

uint32_t cnn_layer_outputs(const cnn_layer *l) {
  if (l->kind == CNN_LAYER_CONV) return l->out.c;
  if (l->kind == CNN_LAYER_CONNECTED) return (uint32_t)elements(l->out);
  return 0;
}

uint64_t cnn_layer_output_unit(const cnn_layer *l) {
  return l->kind == CNN_LAYER_CONV ? (uint64_t)l->out.h * l->out.w : 1;
}

int cnn_layer_slice(const cnn_layer *l, uint32_t channels, int outputs,
                    cnn_layer *out) {
  uint32_t all = outputs ? cnn_layer_outputs(l) : cnn_layer_channels(l);
  if (all == 0 || channels < 1 || channels > all || l->batch_norm)
    return EMBER_EINVAL;
  cnn_layer s = *l;
  s.weights = l->weights / all * channels;
  if (outputs) {
    s.biases = channels;
    if (l->kind == CNN_LAYER_CONV) s.out.c = channels;
    else s.out = (cnn_shape){1, 1, channels};
  } else {
    if (l->kind == CNN_LAYER_CONV) s.in.c = channels;
    else s.in = (cnn_shape){1, 1, channels};
    s.act = CNN_ACT_LINEAR;
  }
  *out = s;
  return 0;
}

static bool same_shape(cnn_shape a, cnn_shape b) {
  return a.h == b.h && a.w == b.w && a.c == b.c;
}

int cnn_layer_check(const cnn_layer *l, const cnn_shape *prev, char *why,
                    size_t why_len) {
  cnn_shape in = l->in, out = l->out;
  if (in.h < 1 || in.w < 1 || in.c < 1 || out.h < 1 || out.w < 1 ||
      out.c < 1 || in.h > CNN_MAX_SIDE || in.w > CNN_MAX_SIDE ||
      out.h > CNN_MAX_SIDE || out.w > CNN_MAX_SIDE ||
      in.c > CNN_MAX_OUTPUTS || out.c > CNN_MAX_OUTPUTS ||
      elements(in) > CNN_MAX_ACTIVATIONS ||
      elements(out) > CNN_MAX_ACTIVATIONS) {
    return errbuf_printf(why, why_len, EMBER_EPARAM,
                         "shape %ux%ux%u -> %ux%ux%u out of range", in.h, in.w,
                         in.c, out.h, out.w, out.c);
  }
  if (prev && !same_shape(in, *prev)) {
    return errbuf_printf(
        why, why_len, EMBER_EPARAM,
        "input %ux%ux%u is not the previous layer's output %ux%ux%u", in.h,
        in.w, in.c, prev->h, prev->w, prev->c);
  }
  uint64_t pad = l->padding, k = l->size, st = l->stride;
  cnn_shape want = in;
  switch (l->kind) {
  case CNN_LAYER_CONV:
  case CNN_LAYER_MAXPOOL:
    if (l->kind == CNN_LAYER_CONV) pad *= 2;
    if (k < 1 || st < 1 || k > CNN_MAX_KERNEL || st > CNN_MAX_KERNEL ||
        l->padding > CNN_MAX_KERNEL || in.h + pad < k || in.w + pad < k) {
      return errbuf_printf(why, why_len, EMBER_EPARAM,
                           "a %llux%llu window at stride %llu does not fit in "
                           "%ux%u padded by %llu",
                           (unsigned long long)k, (unsigned long long)k,
                           (unsigned long long)st, in.h, in.w,
                           (unsigned long long)pad);
    }
    want.h = (uint32_t)((in.h + pad - k) / st + 1);
    want.w = (uint32_t)((in.w + pad - k) / st + 1);
    if (l->kind == CNN_LAYER_CONV) want.c = out.c;
    break;
  case CNN_LAYER_CONNECTED:
    want = (cnn_shape){1, 1, out.c};
    break;
  case CNN_LAYER_AVGPOOL:
    want = (cnn_shape){1, 1, in.c};
    break;
  case CNN_LAYER_DROPOUT:
  case CNN_LAYER_SOFTMAX:
    break;
  default:
    return errbuf_printf(why, why_len, EMBER_EPARAM, "unknown layer kind %d",
                         (int)l->kind);
  }
  if (!same_shape(out, want)) {
    return errbuf_printf(
        why, why_len, EMBER_EPARAM,
        "output %ux%ux%u, where %ux%ux%u follows from its input %ux%ux%u",
        out.h, out.w, out.c, want.h, want.w, want.c, in.h, in.w, in.c);
  }
  return 0;
}

cnn_net *cnn_net_new(void) {
  return calloc(1, sizeof(cnn_net));
}

void cnn_net_destroy(cnn_net *net) {
  if (!net) return;
  free(net->layers);
  free(net);
}

int cnn_net_set_input(cnn_net *net, cnn_shape in, const cnn_train *train,
                      char *why, size_t why_len) {
  uint64_t n = elements(in), batch_acts;
  if (in.h < 1 || in.w < 1 || in.c < 1) {
    return errbuf_printf(why, why_len, EMBER_EFORMAT,
                         "input %ux%ux%u: every side must be at least 1", in.h,
                         in.w, in.c);
  }
  if (in.h > CNN_MAX_SIDE || in.w > CNN_MAX_SIDE ||
      in.c > CNN_MAX_CHANNELS || n > CNN_MAX_ACTIVATIONS) {
    return errbuf_printf(
        why, why_len, EMBER_ETOOBIG,
        "input %ux%ux%u over the limit (sides %d, channels %d, %d values)",
        in.h, in.w, in.c, CNN_MAX_SIDE, CNN_MAX_CHANNELS, CNN_MAX_ACTIVATIONS);
  }
  if (!mul_le(n, train->batch, CNN_MAX_BATCH_ACTIVATIONS, &batch_acts)) {
    return errbuf_printf(why, why_len, EMBER_ETOOBIG,
                         "batch %u x %llu input values over the limit of %llu",
                         train->batch, (unsigned long long)n,
                         (unsigned long long)CNN_MAX_BATCH_ACTIVATIONS);
  }
  net->input = in;
  net->train = *train;
  net->activations = n;
  return 0;
}

/* The output side of a window of size over in + pad with stride, or 0
 * when the window does not fit. */
static uint32_t out_side(uint32_t in, uint64_t pad, uint32_t size,
                         uint32_t stride) {
  uint64_t padded = in + pad;
  if (padded < size) return 0;
  return (uint32_t)((padded - size) / stride + 1);
}

/* Shapes and counts of a conv or maxpool layer. */
static int window_layer(cnn_layer *l, const cnn_layer_spec *s, char *why,
                        size_t why_len) {
  bool conv = s->kind == CNN_LAYER_CONV;
  uint64_t pad = conv ? 2 * (uint64_t)s->padding : s->padding;
  uint64_t kk = (uint64_t)s->size * s->size, per_out;
  l->out.h = out_side(l->in.h, pad, s->size, s->stride);
  l->out.w = out_side(l->in.w, pad, s->size, s->stride);
  l->out.c = conv ? s->filters : l->in.c;
  if (!l->out.h || !l->out.w) {
    return errbuf_printf(
        why, why_len, EMBER_EFORMAT,
        "[%s] kernel %ux%u larger than its input %ux%ux%u with padding %u%s",
        cnn_layer_kind_name(s->kind), s->size, s->size, l->in.h, l->in.w,
        l->in.c, s->padding, conv ? " on each side" : " in all");
  }
  if (elements(l->out) > CNN_MAX_ACTIVATIONS) {
    return errbuf_printf(why, why_len, EMBER_ETOOBIG,
                         "[%s] output %ux%ux%u over the limit of %d values",
                         cnn_layer_kind_name(s->kind), l->out.h, l->out.w,
                         l->out.c, CNN_MAX_ACTIVATIONS);
  }
  /* from here out elements <= 2^26 and kk <= 2^20: no overflow */
  if (!conv) {
    l->elem_ops = elements(l->out) * kk;
    return 0;
  }
  /* weights = filters x size^2 x in.c: each factor is bounded, the
   * product is checked against the parameter limit */
  if (!mul_le(kk, l->in.c, CNN_MAX_PARAMS, &per_out) ||
      !mul_le(per_out, s->filters, CNN_MAX_PARAMS, &l->weights)) {
    return errbuf_printf(why, why_len, EMBER_ETOOBIG,
                         "[convolutional] %u filters of %ux%ux%u: over the "
                         "limit of %d parameters",
                         s->filters, s->size, s->size, l->in.c, CNN_MAX_PARAMS);
  }
  l->biases = s->filters;
  if (s->batch_norm) {
    l->batch_norm = 1;
    l->scales = s->filters;
    l->rolling = 2 * (uint64_t)s->filters;
  }
  /* out elements <= 2^26 and per_out <= 2^28 */
  l->fp_macs = elements(l->out) * per_out;
  l->pg_macs = l->fp_macs;
  l->eb_macs = l->fp_macs;
  l->elem_ops = elements(l->out) * (act_ops(s->act) + (s->batch_norm ? 8 : 0));
  return 0;
}

static int connected_layer(cnn_layer *l, const cnn_layer_spec *s, char *why,
                           size_t why_len) {
  uint64_t in = elements(l->in);
  l->out = (cnn_shape){1, 1, s->filters};
  if (!mul_le(in, s->filters, CNN_MAX_PARAMS, &l->weights)) {
    return errbuf_printf(
        why, why_len, EMBER_ETOOBIG,
        "[connected] %llu inputs x %u outputs: over the limit of %d parameters",
        (unsigned long long)in, s->filters, CNN_MAX_PARAMS);
  }
  l->biases = s->filters;
  l->fp_macs = l->eb_macs = l->pg_macs = l->weights;
  l->elem_ops = s->filters * act_ops(s->act);
  return 0;
}

int cnn_net_add_layer(cnn_net *net, const cnn_layer_spec *spec, int line,
                      char *why, size_t why_len) {
  cnn_layer l;
  uint64_t params, acts, batch_acts, out_n;
  int rc = 0;
  if (net->count && net->layers[net->count - 1].kind == CNN_LAYER_SOFTMAX) {
    return errbuf_printf(
        why, why_len, EMBER_EFORMAT,
        "[%s] after [softmax] (line %d): [softmax] must be the last layer",
        cnn_layer_kind_name(spec->kind), net->layers[net->count - 1].line);
  }
  if (net->count >= CNN_MAX_LAYERS) {
    return errbuf_printf(why, why_len, EMBER_ETOOBIG, "more than %d layers",
                         CNN_MAX_LAYERS);
  }
  memset(&l, 0, sizeof l);
  l.kind = spec->kind;
  l.line = line;
  l.in = net->count ? net->layers[net->count - 1].out : net->input;
  l.size = spec->size;
  l.stride = spec->stride;
  l.padding = spec->padding;
  l.act = spec->act;
  switch (spec->kind) {
  case CNN_LAYER_CONV:
  case CNN_LAYER_MAXPOOL:
    rc = window_layer(&l, spec, why, why_len);
    break;
  case CNN_LAYER_CONNECTED:
    rc = connected_layer(&l, spec, why, why_len);
    break;
  case CNN_LAYER_SOFTMAX:
    l.out = l.in;
    l.act = CNN_ACT_LINEAR;
    if (elements(l.in) < 2) {
      return errbuf_printf(why, why_len, EMBER_EFORMAT,
                           "[softmax] over %llu value: at least 2 classes",
                           (unsigned long long)elements(l.in));
    }
    l.elem_ops = 3 * elements(l.in);
    break;
  case CNN_LAYER_DROPOUT:
    if (!(spec->probability >= 0 && spec->probability < 1)) {
      return errbuf_printf(why, why_len, EMBER_EFORMAT,
                           "[dropout] probability %g out of [0, 1)",
                           spec->probability);
    }
    l.out = l.in;
    l.act = CNN_ACT_LINEAR;
    l.probability = spec->probability;
    l.elem_ops = 2 * elements(l.in);
    break;
  case CNN_LAYER_AVGPOOL:
    l.out = (cnn_shape){1, 1, l.in.c};
    l.act = CNN_ACT_LINEAR;
    l.elem_ops = elements(l.in);
    break;
  default:
    return errbuf_printf(why, why_len, EMBER_EINVAL, "unknown layer kind %d",
                         (int)spec->kind);
  }
  if (rc) return rc;
  if (net->count == 0) l.eb_macs = 0;
  out_n = elements(l.out);
  params = net->params + cnn_layer_params(&l);
  acts = net->activations + out_n;
  if (l.out.h > CNN_MAX_SIDE || l.out.w > CNN_MAX_SIDE ||
      l.out.c > (spec->kind == CNN_LAYER_CONNECTED ? CNN_MAX_OUTPUTS
                                                   : CNN_MAX_CHANNELS)) {
    return errbuf_printf(
        why, why_len, EMBER_ETOOBIG, "[%s] output %ux%ux%u over the limit",
        cnn_layer_kind_name(l.kind), l.out.h, l.out.w, l.out.c);
  }
  if (params > CNN_MAX_PARAMS) {
    return errbuf_printf(
        why, why_len, EMBER_ETOOBIG,
        "[%s] brings the parameters to %llu, over the limit of %d",
        cnn_layer_kind_name(l.kind), (unsigned long long)params,
        CNN_MAX_PARAMS);
  }
  if (acts > CNN_MAX_ACTIVATIONS ||
      !mul_le(acts, net->train.batch, CNN_MAX_BATCH_ACTIVATIONS,
              &batch_acts)) {
    return errbuf_printf(
        why, why_len, EMBER_ETOOBIG,
        "[%s] output %ux%ux%u brings the activations to %llu per sample (batch "
        "%u), over the limit of %d per sample and %llu per batch",
        cnn_layer_kind_name(l.kind), l.out.h, l.out.w, l.out.c,
        (unsigned long long)acts, net->train.batch, CNN_MAX_ACTIVATIONS,
        (unsigned long long)CNN_MAX_BATCH_ACTIVATIONS);
  }
  if (net->count == net->cap) {
    size_t cap = net->cap ? 2 * net->cap : 8;
    cnn_layer *grown = realloc(net->layers, cap * sizeof *grown);
    if (!grown) {
      return errbuf_printf(why, why_len, EMBER_ENOMEM, "out of memory");
    }
    net->layers = grown;
    net->cap = cap;
  }
  net->layers[net->count++] = l;
  net->params = params;
  net->activations = acts;
  net->macs += l.fp_macs + l.eb_macs + l.pg_macs;
  return 0;
}

int cnn_net_finish(cnn_net *net, int *line, char *why, size_t why_len) {
  const cnn_layer *last;
  *line = 0;
  if (net->count == 0) {
    return errbuf_printf(why, why_len, EMBER_EFORMAT, "no layers after [net]");
  }
  last = &net->layers[net->count - 1];
  if (last->kind != CNN_LAYER_SOFTMAX) {
    *line = last->line;
    return errbuf_printf(why, why_len, EMBER_EFORMAT,
                         "the last layer is [%s]: a network ends in [softmax] "
                         "(its cross-entropy loss is what training minimises)",
                         cnn_layer_kind_name(last->kind));
  }
  return 0;
}

cnn_shape cnn_net_input(const cnn_net *net) { return net->input; }

const cnn_train *cnn_net_train(const cnn_net *net) { return &net->train; }

const cnn_layer *cnn_net_layers(const cnn_net *net, size_t *count) {
  if (count) *count = net->count;
  return net->layers;
}

uint32_t cnn_net_classes(const cnn_net *net) {
  if (!net->count) return 0;
  return (uint32_t)elements(net->layers[net->count - 1].in);
}

uint64_t cnn_net_params(const cnn_net *net) { return net->params; }
uint64_t cnn_net_activations(const cnn_net *net) { return net->activations; }
uint64_t cnn_net_macs(const cnn_net *net) { return net->macs; }

/* ---- printing ------------------------------------------------------------ */

static const char *shape_str(cnn_shape s, char *b, size_t n) {
  snprintf(b, n, "%ux%ux%u", s.h, s.w, s.c);
  return b;
}

size_t cnn_net_format(const cnn_net *net, char *buf, size_t len) {
  cnn_text o = {buf, len, 0};
  char in[48], out[48], kernel[48];
  uint64_t fp = 0;
  if (buf && len) buf[0] = '\0';
  cnn_text_put(&o, "input %s, batch %u, learning_rate %g, momentum %g, decay %g, "
          "max_epochs %u",
      shape_str(net->input, in, sizeof in), net->train.batch,
      net->train.learning_rate, net->train.momentum, net->train.decay,
      net->train.max_epochs);
  if (net->train.subdivisions)
    cnn_text_put(&o, ", subdivisions %u", net->train.subdivisions);
  if (net->train.policy != CNN_POLICY_CONSTANT || net->train.burn_in) {
    static const char *const names[] = {"constant", "step", "steps", "exp",
                                        "poly", "sig"};
    cnn_text_put(&o, ", policy %s", names[net->train.policy]);
    if (net->train.burn_in)
      cnn_text_put(&o, ", burn_in %u", net->train.burn_in);
  }
  cnn_text_put(&o, "\n");
  cnn_text_put(&o, "%5s %-13s %14s    %-14s %-10s %-6s %12s %15s\n", "layer", "kind",
      "input", "output", "kernel", "act", "params", "FP MACs");
  for (size_t i = 0; i < net->count; i++) {
    const cnn_layer *l = &net->layers[i];
    bool window = l->kind == CNN_LAYER_CONV || l->kind == CNN_LAYER_MAXPOOL;
    bool act = l->kind == CNN_LAYER_CONV || l->kind == CNN_LAYER_CONNECTED;
    static const char *const act_names[] = {"linear", "relu", "leaky",
                                            "logistic"};
    if (window)
      snprintf(kernel, sizeof kernel, "%ux%u/%u/%u%s", l->size, l->size,
               l->stride, l->padding, l->batch_norm ? " bn" : "");
    else if (l->kind == CNN_LAYER_DROPOUT)
      snprintf(kernel, sizeof kernel, "p=%g", l->probability);
    else if (l->kind == CNN_LAYER_AVGPOOL)
      snprintf(kernel, sizeof kernel, "global");
    else
      snprintf(kernel, sizeof kernel, "-");
    cnn_text_put(&o, "%5zu %-13s %14s -> %-14s %-10s %-6s %12llu %15llu\n", i,
        cnn_layer_kind_name(l->kind), shape_str(l->in, in, sizeof in),
        shape_str(l->out, out, sizeof out), kernel,
        act ? act_names[l->act] : "-",
        (unsigned long long)cnn_layer_params(l),
        (unsigned long long)l->fp_macs);
    fp += l->fp_macs;
  }
  cnn_text_put(&o, "total: %zu layers, %llu parameters, %llu activations and %llu "
          "FP multiply-adds per sample (%llu with EB and PG), %u classes\n",
      net->count, (unsigned long long)net->params,
      (unsigned long long)net->activations, (unsigned long long)fp,
      (unsigned long long)net->macs, cnn_net_classes(net));
  return o.need;
}
