/* cnn_stage_check.c - see cnn_stage_check.h. */
#include "cnn_stage_check.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_ref.h"
#include "cnn_test_util.h"

#define LR 0.05
#define MOMENTUM 0.9
#define DECAY 0.01

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    abort();
  }
  return p;
}

/* splitmix64, uniform in [lo, hi) */
static double unif(uint64_t *s, double lo, double hi) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return lo + (hi - lo) * (double)(z >> 11) * 0x1p-53;
}

/* The reference stage: per layer its parameters, their momentum and
 * gradients, and the activations and errors. */
typedef struct ref {
  const cnn_layer *layers;
  size_t first, L;
  uint32_t batch, classes;
  double **w, **b, **s, **roll, **vw, **vb, **vs, **gw, **gb, **gs;
  double **act, **err;
} ref;

static size_t n_in(const ref *r, size_t j) {
  return r->batch * cnn_ref_elems(r->layers[r->first + j].in);
}

static size_t n_out(const ref *r, size_t j) {
  return r->batch * cnn_ref_elems(r->layers[r->first + j].out);
}

static double **per_layer(const ref *r, int what) {
  double **a = xcalloc(r->L, sizeof *a);
  for (size_t j = 0; j < r->L; j++) {
    const cnn_layer *l = &r->layers[r->first + j];
    uint64_t n = what == 0 ? l->weights : what == 1 ? l->biases
                 : what == 2 ? l->scales : l->rolling;
    a[j] = xcalloc(n, sizeof(double));
  }
  return a;
}

static void free_layers(double **a, size_t L) {
  for (size_t j = 0; j < L; j++) free(a[j]);
  free(a);
}

static ref *ref_create(const cnn_net *net, size_t first, size_t end,
                       uint32_t batch) {
  ref *r = xcalloc(1, sizeof *r);
  size_t nl;
  r->layers = cnn_net_layers(net, &nl);
  r->first = first;
  r->L = end - first;
  r->batch = batch;
  r->classes = cnn_net_classes(net);
  r->w = per_layer(r, 0), r->vw = per_layer(r, 0), r->gw = per_layer(r, 0);
  r->b = per_layer(r, 1), r->vb = per_layer(r, 1), r->gb = per_layer(r, 1);
  r->s = per_layer(r, 2), r->vs = per_layer(r, 2), r->gs = per_layer(r, 2);
  r->roll = per_layer(r, 3);
  r->act = xcalloc(r->L + 1, sizeof *r->act);
  r->err = xcalloc(r->L + 1, sizeof *r->err);
  for (size_t j = 0; j <= r->L; j++) {
    size_t n = j < r->L ? n_in(r, j) : n_out(r, r->L - 1);
    r->act[j] = xcalloc(n, sizeof(double));
    r->err[j] = xcalloc(n, sizeof(double));
  }
  return r;
}

static void ref_destroy(ref *r) {
  double **arrs[] = {r->w, r->vw, r->gw, r->b, r->vb, r->gb,
                     r->s, r->vs, r->gs, r->roll};
  for (size_t k = 0; k < sizeof arrs / sizeof arrs[0]; k++)
    free_layers(arrs[k], r->L);
  for (size_t j = 0; j <= r->L; j++) free(r->act[j]), free(r->err[j]);
  free(r->act), free(r->err), free(r);
}

static cnn_ref_params params_of(const ref *r, size_t j) {
  return (cnn_ref_params){r->w[j], r->b[j], r->s[j], r->roll[j]};
}

static void ref_forward(ref *r, const float *in, const cnn_pass *pass) {
  for (size_t i = 0; i < n_in(r, 0); i++) r->act[0][i] = in[i];
  for (size_t j = 0; j < r->L; j++) {
    cnn_ref_params p = params_of(r, j);
    cnn_ref_forward_pass(&r->layers[r->first + j], r->first + j, r->batch,
                         pass, r->act[j], &p, r->act[j + 1]);
  }
}

static void ref_backward(ref *r, const float *dout, const uint8_t *labels,
                         const cnn_pass *pass) {
  const cnn_layer *last = &r->layers[r->first + r->L - 1];
  size_t j = r->L;
  if (last->kind == CNN_LAYER_SOFTMAX) {
    j = r->L - 1;
    cnn_ref_xent_grad(r->batch, r->classes, r->act[r->L], labels, r->err[j]);
  } else {
    for (size_t i = 0; i < n_out(r, r->L - 1); i++) r->err[r->L][i] = dout[i];
  }
  while (j-- > 0) {
    const cnn_layer *l = &r->layers[r->first + j];
    cnn_ref_params p = params_of(r, j);
    cnn_ref_backward_pass(l, r->first + j, r->batch, pass, r->act[j],
                          r->act[j + 1], &p, r->err[j + 1], r->err[j],
                          l->weights ? r->gw[j] : NULL,
                          l->biases ? r->gb[j] : NULL,
                          l->scales ? r->gs[j] : NULL);
  }
}

static void ref_update(ref *r) {
  for (size_t j = 0; j < r->L; j++) {
    const cnn_layer *l = &r->layers[r->first + j];
    cnn_ref_sgd(l->weights, r->w[j], r->vw[j], r->gw[j], LR, MOMENTUM, DECAY);
    cnn_ref_sgd(l->biases, r->b[j], r->vb[j], r->gb[j], LR, MOMENTUM, 0);
    cnn_ref_sgd(l->scales, r->s[j], r->vs[j], r->gs[j], LR, MOMENTUM, 0);
  }
}

typedef struct checker {
  const char *name;
  int failures;
} checker;

static void check(checker *c, const char *what, size_t layer, const float *a,
                  const double *b, size_t n, double tol) {
  if (!n) return;
  double e = cnn_test_rel_err_f(a, b, n);
  if (e <= tol) return;
  size_t worst = cnn_test_worst_f(a, b, n);
  printf("FAIL %s, layer %zu: %s relative error %.3g > %.1g (worst [%zu]: "
         "%.9g vs %.9g)\n", c->name, layer, what, e, tol, worst, a[worst],
         b[worst]);
  c->failures++;
}

static void call(checker *c, const char *what, int rc) {
  if (!rc) return;
  printf("FAIL %s: %s returned %d\n", c->name, what, rc);
  c->failures++;
}

/* Every layer's parameters (grads: their gradients; the rolling
 * statistics alone when rolling) against the reference's. */
static void check_params(checker *c, const ref *r,
                         const cnn_check_backend *be, int grads, double tol) {
  for (size_t j = 0; j < r->L; j++) {
    const cnn_layer *l = &r->layers[r->first + j];
    size_t k = r->first + j;
    if (!l->weights) continue;
    float *w = xcalloc(l->weights, 4), *b = xcalloc(l->biases, 4);
    float *s = xcalloc(l->scales, 4), *roll = xcalloc(l->rolling, 4);
    if (grads) {
      call(c, "get_grads", be->get_grads(be->stage, k, w, b));
      check(c, "weight gradients", k, w, r->gw[j], l->weights, tol);
      check(c, "bias gradients", k, b, r->gb[j], l->biases, tol);
      if (l->scales) {
        call(c, "get_norm_grads", be->get_norm_grads(be->stage, k, s));
        check(c, "scale gradients", k, s, r->gs[j], l->scales, tol);
      }
    } else {
      call(c, "get_params", be->get_params(be->stage, k, w, b));
      check(c, "weights", k, w, r->w[j], l->weights, tol);
      check(c, "biases", k, b, r->b[j], l->biases, tol);
      if (l->scales) {
        call(c, "get_norm", be->get_norm(be->stage, k, s, roll));
        check(c, "scales", k, s, r->s[j], l->scales, tol);
        check(c, "rolling statistics", k, roll, r->roll[j], l->rolling, tol);
      }
    }
    free(w), free(b), free(s), free(roll);
  }
}

/* Random parameters in both: weights of scale 1/sqrt(fan-in), biases
 * near 0, scales near 1, rolling means near 0 and variances near 1. */
static void init_params(checker *c, ref *r, const cnn_check_backend *be,
                        uint64_t *rng) {
  for (size_t j = 0; j < r->L; j++) {
    const cnn_layer *l = &r->layers[r->first + j];
    if (!l->weights) continue;
    float *w = xcalloc(l->weights, 4), *b = xcalloc(l->biases, 4);
    float *s = xcalloc(l->scales, 4), *roll = xcalloc(l->rolling, 4);
    double scale = 1 / sqrt((double)l->weights / l->biases);
    for (size_t i = 0; i < l->weights; i++)
      r->w[j][i] = w[i] = (float)unif(rng, -scale, scale);
    for (size_t i = 0; i < l->biases; i++)
      r->b[j][i] = b[i] = (float)unif(rng, -0.1, 0.1);
    for (size_t i = 0; i < l->scales; i++) {
      r->s[j][i] = s[i] = (float)unif(rng, 0.8, 1.2);
      r->roll[j][i] = roll[i] = (float)unif(rng, -0.1, 0.1);
      r->roll[j][l->scales + i] = roll[l->scales + i] =
          (float)unif(rng, 0.5, 1.5);
    }
    call(c, "set_params", be->set_params(be->stage, r->first + j, w, b));
    if (l->scales)
      call(c, "set_norm", be->set_norm(be->stage, r->first + j, s, roll));
    free(w), free(b), free(s), free(roll);
  }
}

int cnn_check_stage(const char *name, const cnn_net *net, size_t first,
                    size_t end, uint32_t batch, uint64_t seed,
                    const cnn_check_backend *be, double tol_fp,
                    double tol_grad) {
  checker c = {name, 0};
  ref *r = ref_create(net, first, end, batch);
  uint64_t rng = seed;
  init_params(&c, r, be, &rng);
  size_t nin = n_in(r, 0), nout = n_out(r, r->L - 1);
  bool softmax = r->layers[end - 1].kind == CNN_LAYER_SOFTMAX;
  float *in = xcalloc(nin, 4), *out = xcalloc(nout, 4);
  float *dout = xcalloc(nout, 4), *din = xcalloc(nin, 4);
  uint8_t *labels = xcalloc(batch, 1);
  for (int round = 0; round < 2 && !c.failures; round++) {
    for (size_t i = 0; i < nin; i++) in[i] = (float)unif(&rng, -1, 1);
    for (size_t i = 0; i < nout; i++) dout[i] = (float)unif(&rng, -1, 1);
    for (size_t n = 0; n < batch; n++)
      labels[n] = (uint8_t)unif(&rng, 0, r->classes);
    cnn_pass pass = {CNN_MODE_TRAIN, seed, (uint64_t)round, 3};
    double loss = 0;
    call(&c, "training forward",
         be->forward(be->stage, in, out, softmax ? labels : NULL, &loss,
                     &pass));
    ref_forward(r, in, &pass);
    check(&c, "training output", end - 1, out, r->act[r->L], nout, tol_fp);
    if (softmax) {
      double want = cnn_ref_xent_loss(batch, r->classes, r->act[r->L],
                                      labels);
      if (fabs(loss - want) > tol_fp * fmax(1, want)) {
        printf("FAIL %s: loss %.9g, reference %.9g\n", name, loss, want);
        c.failures++;
      }
    }
    check_params(&c, r, be, 0, tol_fp); /* the rolling statistics moved */
    pass.mode = CNN_MODE_RECOMPUTE;
    call(&c, "recomputed forward",
         be->forward(be->stage, in, out, softmax ? labels : NULL, NULL,
                     &pass));
    check(&c, "recomputed output", end - 1, out, r->act[r->L], nout, tol_fp);
    check_params(&c, r, be, 0, tol_fp); /* and did not move again */
    for (int k = 0; k < 1 + round; k++) { /* gradients accumulate */
      call(&c, "backward", be->backward(be->stage, dout,
                                        first > 0 ? din : NULL));
      ref_backward(r, dout, labels, &pass);
    }
    if (first > 0)
      check(&c, "input error", first, din, r->err[0], nin, tol_grad);
    check_params(&c, r, be, 1, tol_grad);
    call(&c, "update", be->update(be->stage, LR, MOMENTUM, DECAY));
    ref_update(r);
    check_params(&c, r, be, 0, tol_fp);
    pass.mode = CNN_MODE_INFER;
    call(&c, "evaluation forward",
         be->forward(be->stage, in, out, NULL, NULL, &pass));
    ref_forward(r, in, &pass);
    check(&c, "evaluation output", end - 1, out, r->act[r->L], nout,
          tol_fp);
    check_params(&c, r, be, 0, tol_fp);
  }
  free(in), free(out), free(dout), free(din), free(labels);
  ref_destroy(r);
  return c.failures;
}
