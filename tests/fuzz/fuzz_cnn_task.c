/*
 * fuzz_cnn_task.c - libFuzzer target for the cnn accelerator's task path,
 * what ember-nam runs on a client's Submit: the descriptor's validate
 * (unpacking Params, the .cfg network within cnn_net.h's limits, range,
 * batch, SGD settings, input blocks against the stage's shapes) and plan
 * (on a state block of the stage's size, and refusing one a byte short);
 * then run_cpu for the ops that work on the block's floats alone (INIT,
 * UPDATE, GET_PARAMS, SET_PARAMS) when the block is small. A refusal must
 * say why; nothing may read or write outside the blocks.
 *
 * A small stage (its batch's activations, multiply-adds and state within
 * the STAGE_* bounds below) is then run as ember-nam runs it: the task's
 * Params with op INIT on a zeroed state block, then FORWARD, BACKWARD and
 * UPDATE (inputs of the sizes the layout says, every out block the op
 * makes) twice, the second time on another thread, whose FORWARD takes
 * the CPU stage the first round gave back to the pool (cnn_stage_pool.c),
 * and the app then leaves (the descriptor's app_gone) and its stages go.
 * Each op passes validate and plan or says why; each run succeeds or says
 * why, and a Result unpacks. Seeds padding_* are issue 25's convolutions
 * padded by at least their kernel (ember-nam died on their second
 * FORWARD when a stage built on one worker ran on another).
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
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "accel.h"
#include "accelerators/cnn/cnn.pb-c.h"
#include "cnn_stage_pool.h"
#include "cnn_task.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

extern const acc_descriptor acc_cnn_descriptor;

#define MAX_STATE_BYTES (4u << 20)
/* the stages run FORWARD, BACKWARD and UPDATE: bounds that keep an input
 * to milliseconds */
#define STAGE_MAX_STATE (1u << 20)
#define STAGE_MAX_ACTS (1u << 16)      /* batch x the stage's activations */
#define STAGE_MAX_MACS (1u << 22)      /* batch x FP + EB + PG */
#define FUZZ_APP 25

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  setenv("OMP_NUM_THREADS", "1", 1); /* before oneDNN starts OpenMP */
  return 0;
}

/* The stage's tasks: base's Params with an op and that op's fields at
 * their defaults; inputs sized by the layout. */
typedef struct stage_ctx {
  const Ember__Cnn__Params *base;
  const cnn_layout *L;
  uint32_t batch, classes;
  acc_mut_block *state;
  int failed;                        /* an op was refused or failed */
} stage_ctx;

static acc_block fill(size_t bytes, int labels, uint32_t classes) {
  uint8_t *p = malloc(bytes ? bytes : 1);
  if (!p) __builtin_trap();
  if (labels) {
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)(i % classes);
  } else {
    for (size_t i = 0; i < bytes / sizeof(float); i++) {
      float v = (float)(i % 17) / 17.0f - 0.5f;
      memcpy(p + i * sizeof v, &v, sizeof v);
    }
  }
  return (acc_block){p, bytes};
}

/* Run op on the stage's state block; sets c->failed when it does not run
 * through (with a reason, or traps). */
static void run_op(stage_ctx *c, Ember__Cnn__Op op) {
  if (c->failed) return;
  const cnn_layout *L = c->L;
  Ember__Cnn__Params q = *c->base;
  q.op = op;
  q.n_error_channels = 0;
  q.error_channels = NULL;
  q.has_error_addends = 0;
  q.has_inference = 0;
  q.has_slot = 0;
  q.has_accumulated = 0;
  size_t len = ember__cnn__params__get_packed_size(&q);
  uint8_t *params = malloc(len ? len : 1);
  if (!params) __builtin_trap();
  ember__cnn__params__pack(&q, params);
  acc_block in[2];
  size_t n_in = 0;
  int slice = L->icp || L->ocp;
  if (op == EMBER__CNN__OP__FORWARD) {
    in[n_in++] = fill(L->in_elems * sizeof(float), 0, 0);
    if (slice && L->c0)
      in[n_in++] = fill(L->out_elems * sizeof(float), 0, 0);
    else if (!slice && L->last)
      in[n_in++] = fill(c->batch, 1, c->classes);
  } else if (op == EMBER__CNN__OP__BACKWARD && !L->last) {
    in[n_in++] = fill(L->out_elems * sizeof(float), 0, 0);
  }
  const acc_descriptor *d = &acc_cnn_descriptor;
  char err[512] = "";
  void *prep = NULL;
  int rc = d->validate(params, len, in, n_in, &prep, err, sizeof err);
  if (rc) {
    if (!err[0] || prep) __builtin_trap();
    c->failed = 1;
  }
  acc_task_plan plan;
  size_t outs = rc ? 0 : cnn_task_max_outputs(prep);
  acc_task_shape shape = {outs, &c->state->size, 1};
  if (!rc && acc_plan_task(d, prep, &shape, 0, &plan, err, sizeof err)) {
    if (!err[0]) __builtin_trap();
    c->failed = 1;
    rc = 1;
  }
  acc_mut_block ob[ACC_MAX_OUTPUTS];
  for (size_t i = 0; !rc && i < outs; i++) {
    ob[i].size = plan.output_sizes[i];
    ob[i].data = malloc(ob[i].size ? ob[i].size : 1);
    if (!ob[i].data) __builtin_trap();
  }
  if (!rc) {
    acc_run_ctx ctx = {0};
    ctx.states = c->state;
    ctx.n_states = 1;
    ctx.outputs = ob;
    ctx.n_outputs = outs;
    ctx.app = FUZZ_APP;
    acc_output res = {0};
    err[0] = 0;
    if (d->run_cpu(prep, in, n_in, &ctx, &res, err, sizeof err) == 0) {
      Ember__Cnn__Result *r =
          ember__cnn__result__unpack(NULL, res.size, res.data);
      if (!r) __builtin_trap();
      ember__cnn__result__free_unpacked(r, NULL);
    } else {
      if (!err[0]) __builtin_trap();
      c->failed = 1;
    }
    free(res.data);
    for (size_t i = 0; i < outs; i++) free(ob[i].data);
  }
  d->release(prep);
  for (size_t i = 0; i < n_in; i++) free((void *)in[i].data);
  free(params);
}

static void *one_round(void *arg) {
  stage_ctx *c = arg;
  run_op(c, EMBER__CNN__OP__FORWARD);
  run_op(c, EMBER__CNN__OP__BACKWARD);
  run_op(c, EMBER__CNN__OP__UPDATE);
  return NULL;
}

/* INIT, then two rounds (the second on another thread, reusing the
 * pool's stage), then the app leaves. */
static void run_stage(const Ember__Cnn__Params *pm, const cnn_task *t,
                      size_t state_size) {
  size_t n;
  const cnn_layer *l = cnn_net_layers(t->net, &n);
  uint64_t acts = 0, macs = 0;
  for (uint32_t i = t->first; i < t->end; i++) {
    acts += (uint64_t)l[i].out.h * l[i].out.w * l[i].out.c;
    macs += l[i].fp_macs + l[i].eb_macs + l[i].pg_macs;
  }
  if (state_size > STAGE_MAX_STATE || acts * t->batch > STAGE_MAX_ACTS ||
      macs * t->batch > STAGE_MAX_MACS)
    return;
  acc_mut_block st = {calloc(1, state_size), state_size};
  if (!st.data) __builtin_trap();
  stage_ctx c = {pm, &t->layout, t->batch, cnn_net_classes(t->net), &st, 0};
  run_op(&c, EMBER__CNN__OP__INIT);
  one_round(&c);
  cnn_stage_pool_stats before, after;
  cnn_stage_pool_get_stats(&before);
  int ran = !c.failed;
  pthread_t th;
  if (pthread_create(&th, NULL, one_round, &c) || pthread_join(th, NULL))
    __builtin_trap();
  cnn_stage_pool_get_stats(&after);
  /* the first round's stage, kept, served the second round's FORWARD */
  if (ran && before.idle && after.hits <= before.hits) __builtin_trap();
  acc_app_gone(&acc_cnn_descriptor, FUZZ_APP);
  cnn_stage_pool_get_stats(&after);
  if (after.idle || after.lent) __builtin_trap();
  free(st.data);
}

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
  pm = ember__cnn__params__unpack(NULL, plen, params);
  if (!pm) __builtin_trap();
  run_stage(pm, prep, state_size);
  ember__cnn__params__free_unpacked(pm, NULL);
  d->release(prep);
out:
  free(params);
  free((void *)in[0].data);
  free((void *)in[1].data);
  return 0;
}
