/*
 * fuzz_plf_task.c - libFuzzer target for the plf accelerator's task path,
 * what ember-nam runs on a client's Submit: the descriptor's validate
 * (unpacking Params, checking every op against the instance), plan (on a
 * state block of the instance's size, or scratch), and run_cpu on what
 * both accept when the instance is small. Whatever the bytes, nothing may
 * read or write outside the state block or the input, and a refusal says
 * why.
 *
 * Input: uint16 LE params length P, P bytes of Params, then the one input
 * block (tip states and partials that ops may slice).
 *
 *   build-fuzz/tests/fuzz/fuzz_plf_task -max_total_time=60 tests/fuzz/corpus/plf_task
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "accel.h"
#include "accelerators/plf/plf.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

extern const acc_descriptor acc_plf_descriptor;

#define MAX_STATE_BYTES (8u << 20)
#define MAX_OPS_COST 50000000u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  size_t plen = (size_t)data[0] | (size_t)data[1] << 8;
  if (plen > size - 2) plen = size - 2;
  /* copies, so that ASan sees reads past each */
  uint8_t *params = malloc(plen ? plen : 1);
  size_t ilen = size - 2 - plen;
  uint8_t *input = malloc(ilen ? ilen : 1);
  memcpy(params, data + 2, plen);
  memcpy(input, data + 2 + plen, ilen);
  acc_block in = {input, ilen};

  const acc_descriptor *d = &acc_plf_descriptor;
  char err[512] = "";
  void *prep = NULL;
  int rc = d->validate(params, plen, &in, 1, &prep, err, sizeof err);
  if (rc != 0) {
    if (!err[0] || prep) __builtin_trap();
    goto out;
  }
  /* the state size plan() wants: ask with none, it says in scratch */
  acc_task_shape none = {0, NULL, 0};
  acc_task_plan plan;
  if (acc_plan_task(d, prep, &none, ilen, &plan, err, sizeof err) != 0)
    __builtin_trap(); /* a valid task runs on scratch */
  size_t state_size = plan.scratch_size;
  if (state_size <= MAX_STATE_BYTES && plan.cost.ops <= MAX_OPS_COST) {
    acc_task_shape one = {0, &state_size, 1};
    if (acc_plan_task(d, prep, &one, ilen, &plan, err, sizeof err) != 0)
      __builtin_trap();
    /* on a state block: zeros, as a client makes it */
    acc_mut_block st = {calloc(1, state_size), state_size};
    acc_run_ctx ctx = {0};
    ctx.states = &st;
    ctx.n_states = 1;
    acc_output res = {0};
    if (st.data) {
      rc = d->run_cpu(prep, &in, 1, &ctx, &res, err, sizeof err);
      if (rc == 0) {
        Ember__Plf__Result *r =
            ember__plf__result__unpack(NULL, res.size, res.data);
        if (!r) __builtin_trap();
        ember__plf__result__free_unpacked(r, NULL);
      } else if (!err[0]) {
        __builtin_trap();
      }
      free(res.data);
      free(st.data);
    }
  }
  d->release(prep);
out:
  free(params);
  free(input);
  return 0;
}
