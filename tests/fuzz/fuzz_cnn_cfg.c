/*
 * fuzz_cnn_cfg.c - libFuzzer target for the cnn accelerator's darknet
 * .cfg reader (accelerators/cnn: cnn_cfg.c with libinih, cnn_net.c).
 *
 * The input is the file. A failure must leave no network, say
 * "fuzz:..." why and be a format, limit or memory error; a success must
 * keep cnn_net.h's promises: 1 to CNN_MAX_LAYERS layers, the last a
 * softmax over at least 2 classes and no softmax before it, each layer's
 * input the previous one's output (the first's the network's input),
 * every side and count within the limits, the totals the sums of the
 * layers', shapes as darknet's arithmetic gives them (dropout keeping its
 * input's, avgpool 1 x 1 x channels), batch normalisation's scales and
 * rolling statistics on convolutions only, a dropout probability in
 * [0, 1), the training settings within their ranges (subdivisions at
 * most the batch, steps within CNN_MAX_STEPS), lines increasing, and
 * cnn_net_format's text as long as it says.
 *
 * A small network (issue 25: seeds padding_*) is then built into CPU
 * stages through the accelerator's pool (cnn_stage_pool.c) as ember-nam
 * builds them, the whole network and, past its first layer, its tail:
 * FORWARD, BACKWARD and UPDATE on each, twice, the second time on another
 * thread with the stage the first gave back (a hit in the pool), then the
 * app leaves and its stages go. A stage the CPU back end refuses must say
 * why; every call that ran must succeed and give finite numbers.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_net.h"
#include "cnn_stage_pool.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  setenv("OMP_NUM_THREADS", "1", 1); /* before oneDNN starts OpenMP */
  return 0;
}

static int same(cnn_shape a, cnn_shape b) {
  return a.h == b.h && a.w == b.w && a.c == b.c;
}

static uint64_t n_of(cnn_shape s) { return (uint64_t)s.h * s.w * s.c; }

static void check(const cnn_net *net) {
  size_t count;
  const cnn_layer *l = cnn_net_layers(net, &count);
  const cnn_train *t = cnn_net_train(net);
  cnn_shape in = cnn_net_input(net);
  uint64_t params = 0, acts = n_of(in), macs = 0;
  if (count < 1 || count > CNN_MAX_LAYERS) abort();
  if (t->batch < 1 || t->batch > CNN_MAX_BATCH || !(t->learning_rate > 0) ||
      !(t->momentum >= 0 && t->momentum < 1) ||
      !(t->decay >= 0 && t->decay < 1) || t->max_epochs < 1 ||
      t->subdivisions > t->batch || t->n_steps > CNN_MAX_STEPS ||
      t->policy > CNN_POLICY_SIG || t->step < 1 ||
      (t->policy == CNN_POLICY_POLY && t->max_batches < 1))
    abort();
  /* the schedule never gives a negative or non-finite rate */
  for (uint64_t k = 0; k < 3; k++) {
    double r = cnn_train_rate(t, t->learning_rate, k * 1000 + 1);
    if (!(r >= 0) || r != r || r > 1e308) abort();
  }
  if (in.h < 1 || in.w < 1 || in.c < 1) abort();
  for (size_t i = 0; i < count; i++) {
    cnn_shape prev = i ? l[i - 1].out : in;
    if (!same(l[i].in, prev)) abort();
    if (i && l[i].line <= l[i - 1].line) abort();
    if ((l[i].kind == CNN_LAYER_SOFTMAX) != (i == count - 1)) abort();
    if (l[i].out.h < 1 || l[i].out.w < 1 || l[i].out.c < 1 ||
        l[i].out.h > CNN_MAX_SIDE || l[i].out.w > CNN_MAX_SIDE)
      abort();
    switch (l[i].kind) {
    case CNN_LAYER_CONV:
    case CNN_LAYER_MAXPOOL: {
      uint64_t pad = l[i].kind == CNN_LAYER_CONV ? 2ull * l[i].padding
                                                 : l[i].padding;
      if (l[i].size < 1 || l[i].stride < 1 ||
          l[i].in.h + pad < l[i].size || l[i].in.w + pad < l[i].size ||
          l[i].out.h != (l[i].in.h + pad - l[i].size) / l[i].stride + 1 ||
          l[i].out.w != (l[i].in.w + pad - l[i].size) / l[i].stride + 1)
        abort();
      if (l[i].kind == CNN_LAYER_MAXPOOL &&
          (l[i].out.c != l[i].in.c || l[i].weights || l[i].fp_macs ||
           l[i].batch_norm))
        abort();
      if (l[i].kind == CNN_LAYER_CONV &&
          (l[i].weights != (uint64_t)l[i].out.c * l[i].size * l[i].size *
                               l[i].in.c ||
           l[i].fp_macs != n_of(l[i].out) * l[i].size * l[i].size *
                               l[i].in.c))
        abort();
      break;
    }
    case CNN_LAYER_CONNECTED:
      if (l[i].out.h != 1 || l[i].out.w != 1 ||
          l[i].weights != n_of(l[i].in) * l[i].out.c ||
          l[i].fp_macs != l[i].weights)
        abort();
      break;
    case CNN_LAYER_SOFTMAX:
      if (!same(l[i].out, l[i].in) || n_of(l[i].in) < 2) abort();
      break;
    case CNN_LAYER_DROPOUT:
      if (!same(l[i].out, l[i].in) || !(l[i].probability >= 0) ||
          !(l[i].probability < 1) || l[i].weights || l[i].fp_macs)
        abort();
      break;
    case CNN_LAYER_AVGPOOL:
      if (l[i].out.h != 1 || l[i].out.w != 1 || l[i].out.c != l[i].in.c ||
          l[i].weights || l[i].fp_macs)
        abort();
      break;
    default:
      abort();
    }
    if (l[i].act > CNN_ACT_LOGISTIC) abort();
    if (l[i].batch_norm
            ? l[i].kind != CNN_LAYER_CONV || l[i].scales != l[i].out.c ||
                  l[i].rolling != 2ull * l[i].out.c
            : l[i].scales || l[i].rolling)
      abort();
    if (l[i].pg_macs != l[i].fp_macs ||
        l[i].eb_macs != (i ? l[i].fp_macs : 0))
      abort();
    params += cnn_layer_params(&l[i]);
    acts += n_of(l[i].out);
    macs += l[i].fp_macs + l[i].eb_macs + l[i].pg_macs;
  }
  if (params != cnn_net_params(net) || params > CNN_MAX_PARAMS ||
      acts != cnn_net_activations(net) || acts > CNN_MAX_ACTIVATIONS ||
      acts * t->batch > CNN_MAX_BATCH_ACTIVATIONS ||
      macs != cnn_net_macs(net) ||
      cnn_net_classes(net) != n_of(l[count - 1].in))
    abort();
  size_t need = cnn_net_format(net, NULL, 0);
  char *text = malloc(need + 1);
  if (!text) abort();
  if (cnn_net_format(net, text, need + 1) != need || strlen(text) != need ||
      text[need - 1] != '\n')
    abort();
  free(text);
}

/* Stages are built for networks up to these (per stage run: the batch's
 * activations, multiply-adds and parameters), so that an input runs in
 * milliseconds. */
#define STAGE_BATCH 3
#define STAGE_MAX_ACTS (1u << 16)
#define STAGE_MAX_MACS (1u << 22)
#define STAGE_MAX_PARAMS (1u << 18)
#define FUZZ_APP 7

typedef struct stage_run {
  const cnn_net *net;
  const uint8_t *text;
  size_t len;
  uint32_t first, end, batch;
} stage_run;

/* One FORWARD, BACKWARD and UPDATE on the pool's stage for r. */
static void *run_once(void *arg) {
  const stage_run *r = arg;
  size_t n;
  const cnn_layer *l = cnn_net_layers(r->net, &n);
  cnn_pool_key k = {r->text, r->len, r->first, r->end, r->batch, 0, 0};
  cnn_cpu_stage *s = NULL;
  char err[512] = "";
  int rc = cnn_stage_pool_take(r->net, &k, FUZZ_APP, &s, err, sizeof err);
  if (rc) {
    /* the CPU back end's refusals (a convolution after a connected layer,
     * a max-pool window wholly in padding, scratch over the limit) */
    if (s || !err[0]) abort();
    return NULL;
  }
  cnn_shape in = l[r->first].in;
  size_t in_n = (size_t)in.h * in.w * in.c * r->batch;
  size_t out_n = (size_t)cnn_net_classes(r->net) * r->batch;
  float *x = malloc(in_n * sizeof *x), *y = malloc(out_n * sizeof *y);
  float *din = r->first ? malloc(in_n * sizeof *din) : NULL;
  uint8_t labels[STAGE_BATCH];
  if (!x || !y || (r->first && !din)) abort();
  for (size_t i = 0; i < in_n; i++) x[i] = (float)(i % 13) / 13.0f - 0.4f;
  for (uint32_t i = 0; i < r->batch; i++)
    labels[i] = (uint8_t)(i % cnn_net_classes(r->net));
  double loss = NAN;
  if (cnn_cpu_stage_forward(s, x, y, labels, &loss) ||
      cnn_cpu_stage_backward(s, NULL, din) ||
      cnn_cpu_stage_update(s, 0.01, 0.9, 0.0005))
    abort();
  if (!(loss >= 0) || isinf(loss)) abort();
  for (size_t i = 0; i < out_n; i++)
    if (!(y[i] >= 0 && y[i] <= 1)) abort(); /* probabilities */
  cnn_stage_pool_give(&k, s);
  free(x);
  free(y);
  free(din);
  return NULL;
}

/* r twice: here, then on another thread with the stage from the pool. */
static void run_twice(stage_run *r) {
  cnn_stage_pool_stats before, after;
  run_once(r);
  cnn_stage_pool_get_stats(&before);
  pthread_t t;
  if (pthread_create(&t, NULL, run_once, r) || pthread_join(t, NULL))
    abort();
  cnn_stage_pool_get_stats(&after);
  /* a stage kept the first time is reused the second */
  if (before.idle && after.hits != before.hits + 1) abort();
}

static void run_stages(const cnn_net *net, const uint8_t *text, size_t len) {
  size_t n;
  const cnn_layer *l = cnn_net_layers(net, &n);
  uint32_t batch = cnn_net_train(net)->batch;
  if (batch > STAGE_BATCH) batch = STAGE_BATCH;
  if (cnn_net_activations(net) * batch > STAGE_MAX_ACTS ||
      cnn_net_macs(net) * batch > STAGE_MAX_MACS ||
      cnn_net_params(net) > STAGE_MAX_PARAMS)
    return;
  stage_run whole = {net, text, len, 0, (uint32_t)n, batch};
  run_twice(&whole);
  if (n > 1 && l[0].kind != CNN_LAYER_SOFTMAX) {
    stage_run tail = {net, text, len, 1, (uint32_t)n, batch};
    run_twice(&tail);
  }
  cnn_stage_pool_app_gone(FUZZ_APP);
  cnn_stage_pool_stats st;
  cnn_stage_pool_get_stats(&st);
  if (st.idle || st.lent) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cnn_net *net = NULL;
  char err[512] = "";
  int rc = cnn_cfg_parse((const char *)data, size, "fuzz", &net, err,
                         sizeof err);
  if (rc != 0) {
    if (net != NULL || strncmp(err, "fuzz", 4) != 0) abort();
    if (rc != EMBER_EFORMAT && rc != EMBER_ETOOBIG && rc != EMBER_ENOMEM)
      abort();
    return 0;
  }
  if (!net) abort();
  check(net);
  run_stages(net, data, size);
  cnn_net_destroy(net);
  return 0;
}
