/* cnn_cpu_check.c - the oneDNN stage's calls behind cnn_check_backend's
 * void * signatures. */
#include "cnn_cpu_check.h"

static int fwd(void *s, const float *in, float *out, const uint8_t *labels,
               double *loss, const cnn_pass *pass) {
  return cnn_cpu_stage_forward_pass(s, in, out, labels, loss, pass);
}
static int bwd(void *s, const float *dout, float *din) {
  return cnn_cpu_stage_backward(s, dout, din);
}
static int upd(void *s, double lr, double m, double d) {
  return cnn_cpu_stage_update(s, lr, m, d);
}
static int setp(void *s, size_t l, const float *w, const float *b) {
  return cnn_cpu_stage_set_params(s, l, w, b);
}
static int getp(void *s, size_t l, float *w, float *b) {
  return cnn_cpu_stage_get_params(s, l, w, b);
}
static int getg(void *s, size_t l, float *w, float *b) {
  return cnn_cpu_stage_get_grads(s, l, w, b);
}
static int setn(void *s, size_t l, const float *sc, const float *r) {
  return cnn_cpu_stage_set_norm(s, l, sc, r);
}
static int getn(void *s, size_t l, float *sc, float *r) {
  return cnn_cpu_stage_get_norm(s, l, sc, r);
}
static int getng(void *s, size_t l, float *sc) {
  return cnn_cpu_stage_get_norm_grads(s, l, sc);
}

cnn_check_backend cnn_cpu_check_backend(cnn_cpu_stage *s) {
  cnn_check_backend be = {s,    fwd,  bwd,  upd,  setp,
                          getp, getg, setn, getn, getng};
  return be;
}
