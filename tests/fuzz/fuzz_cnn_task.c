/*
 * fuzz_cnn_task.c - libFuzzer target for the cnn accelerator's task path,
 * what ember-nam runs on a client's Submit: the descriptor's validate
 * (unpacking Params, the .cfg network within cnn_net.h's limits, range,
 * batch, SGD settings, input blocks against the stage's shapes) and plan
 * (on a state block of the stage's size, and refusing one a byte short);
 * then run_cpu for the ops that work on the block's floats alone (INIT,
 * UPDATE, GET_PARAMS, SET_PARAMS; FORWARD and BACKWARD go to oneDNN, too
 * slow here) when the block is small. A refusal must say why; nothing may
 * read or write outside the blocks.
 *
 * Seeds in corpus/cnn_task/ include ICP slices (channel_begin/end:
 * init_slice, init_conv_slice, update_slice, forward_slice).
 *
 * Input: uint16 LE params length P, P bytes of Params, a byte whose value
 * mod 3 is the number of input blocks, uint16 LE length of input 0, its
 * bytes, and the rest as input 1.
 *
 *   build-fuzz/tests/fuzz/fuzz_cnn_task -max_total_time=60 tests/fuzz/corpus/cnn_task
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "accel.h"
#include "accelerators/cnn/cnn.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

extern const acc_descriptor acc_cnn_descriptor;

#define MAX_STATE_BYTES (4u << 20)

/* the next n bytes as a malloc'd copy (so that ASan sees reads past it) */
static uint8_t *take(const uint8_t **p, size_t *left, size_t n) {
  if (n > *left) n = *left;
  uint8_t *c = malloc(n ? n : 1);
  memcpy(c, *p, n);
  *p += n;
  *left -= n;
  return c;
}

static size_t take_u16(const uint8_t **p, size_t *left) {
  size_t v = 0;
  for (int i = 0; i < 2 && *left; i++, (*p)++, (*left)--)
    v |= (size_t)**p << (8 * i);
  return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *p = data;
  size_t left = size;
  size_t plen = take_u16(&p, &left);
  if (plen > left) plen = left;
  uint8_t *params = take(&p, &left, plen);
  size_t n_inputs = left ? *p % 3 : 0;
  if (left) p++, left--;
  size_t l0 = take_u16(&p, &left);
  acc_block in[2];
  in[0].size = l0 < left ? l0 : left;
  in[0].data = take(&p, &left, in[0].size);
  in[1].size = left;
  in[1].data = take(&p, &left, left);

  const acc_descriptor *d = &acc_cnn_descriptor;
  char err[512] = "";
  void *prep = NULL;
  int rc = d->validate(params, plen, in, n_inputs, &prep, err, sizeof err);
  if (rc != 0) {
    if (!err[0] || prep) __builtin_trap();
    goto out;
  }
  /* the state size: plan says it when refusing none */
  acc_task_shape none = {0, NULL, 0};
  acc_task_plan plan;
  err[0] = 0;
  if (acc_plan_task(d, prep, &none, 0, &plan, err, sizeof err) == 0 ||
      !err[0])
    __builtin_trap();
  Ember__Cnn__Params *pm = ember__cnn__params__unpack(NULL, plen, params);
  if (!pm) __builtin_trap(); /* validate accepted it */
  Ember__Cnn__Op op = pm->op;
  ember__cnn__params__free_unpacked(pm, NULL);
  /* plan names the size it wants when it refuses a 1-byte state */
  size_t outs = op == EMBER__CNN__OP__GET_PARAMS, tiny = 1;
  acc_task_shape probe = {outs, &tiny, 1};
  err[0] = 0;
  if (acc_plan_task(d, prep, &probe, 0, &plan, err, sizeof err) == 0)
    __builtin_trap();
  const char *at = strstr(err, " take ");
  if (!at) __builtin_trap();
  size_t state_size = strtoull(at + 6, NULL, 10);
  acc_task_shape one = {outs, &state_size, 1};
  size_t short_size = state_size - 1;
  acc_task_shape short_one = {outs, &short_size, 1};
  if (acc_plan_task(d, prep, &short_one, 0, &plan, err, sizeof err) == 0)
    __builtin_trap();
  if (acc_plan_task(d, prep, &one, 0, &plan, err, sizeof err) != 0)
    __builtin_trap();
  if (state_size <= MAX_STATE_BYTES && op != EMBER__CNN__OP__FORWARD &&
      op != EMBER__CNN__OP__BACKWARD) {
    acc_mut_block st = {calloc(1, state_size), state_size};
    acc_mut_block ob = {NULL, 0};
    if (outs) {
      ob.size = plan.output_sizes[0];
      ob.data = ob.size <= MAX_STATE_BYTES ? malloc(ob.size ? ob.size : 1)
                                           : NULL;
    }
    acc_run_ctx ctx = {0};
    ctx.states = &st;
    ctx.n_states = 1;
    ctx.outputs = &ob;
    ctx.n_outputs = outs;
    acc_output res = {0};
    if (st.data && (!outs || ob.data)) {
      err[0] = 0;
      rc = d->run_cpu(prep, in, n_inputs, &ctx, &res, err, sizeof err);
      if (rc == 0) {
        Ember__Cnn__Result *r =
            ember__cnn__result__unpack(NULL, res.size, res.data);
        if (!r) __builtin_trap();
        ember__cnn__result__free_unpacked(r, NULL);
      } else if (!err[0]) {
        __builtin_trap();
      }
      free(res.data);
    }
    free(ob.data);
    free(st.data);
  }
  d->release(prep);
out:
  free(params);
  free((void *)in[0].data);
  free((void *)in[1].data);
  return 0;
}
