/* cnn_test_task.c - see cnn_test_task.h. */
#include "cnn_test_task.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>

#include <cmocka.h>

static const acc_descriptor *cnn(void) {
  const acc_descriptor *d = acc_registry_find("cnn");
  assert_non_null(d);
  return d;
}

int cnn_test_prepare(const uint8_t *p, size_t len, const acc_block *in,
                     size_t n_in, size_t state_size, acc_mut_block *outs,
                     size_t n_out, void **prep, char *err, size_t err_len) {
  const acc_descriptor *d = cnn();
  *prep = NULL;
  int rc = d->validate(p, len, in, n_in, prep, err, err_len);
  if (rc) return rc;
  acc_task_shape shape = {n_out, &state_size, 1};
  acc_task_plan plan;
  rc = acc_plan_task(d, *prep, &shape, 0, &plan, err, err_len);
  if (rc) fail_msg("plan: %s", err);
  for (size_t i = 0; i < n_out; i++) {
    outs[i].size = plan.output_sizes[i];
    outs[i].data = calloc(outs[i].size ? outs[i].size : 1, 1);
    assert_non_null(outs[i].data);
  }
  return 0;
}

int cnn_test_run(void *prep, const acc_block *in, size_t n_in,
                 acc_mut_block *state, acc_mut_block *outs, size_t n_out,
                 Ember__Cnn__Result *res, char *err, size_t err_len) {
  const acc_descriptor *d = cnn();
  acc_run_ctx ctx = {0};
  ctx.states = state;
  ctx.n_states = 1;
  ctx.outputs = outs;
  ctx.n_outputs = n_out;
  acc_output out = {0};
  int rc = d->run_cpu(prep, in, n_in, &ctx, &out, err, err_len);
  if (!rc) {
    Ember__Cnn__Result *r =
        ember__cnn__result__unpack(NULL, out.size, out.data);
    assert_non_null(r);
    if (res) *res = *r;
    ember__cnn__result__free_unpacked(r, NULL);
  }
  free(out.data);
  d->release(prep);
  return rc;
}
