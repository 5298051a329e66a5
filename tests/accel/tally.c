/* tally.c - the "tally" test accelerator (tally.h). */
#include "tally.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"

#define TALLY_MAX_BYTES (64u << 20)

typedef struct tally_prepared {
  uint64_t k;
  size_t n_inputs;
  size_t elements;     /* per input block */
} tally_prepared;

static uint64_t get_u64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, sizeof v); }

static int tally_validate(const uint8_t *params, size_t params_len,
                          const acc_block *inputs, size_t n_inputs,
                          void **prepared, char *err, size_t err_len) {
  *prepared = NULL;
  if (params_len != 8 || !params) {
    snprintf(err, err_len, "params: 8 bytes (k), got %zu", params_len);
    return EMBER_EPARAM;
  }
  size_t size = n_inputs ? inputs[0].size : 0;
  for (size_t i = 0; i < n_inputs; i++)
    if (inputs[i].size != size || size % 8 || size > TALLY_MAX_BYTES) {
      snprintf(err, err_len, "input %zu: %zu bytes (equal sizes, a multiple "
               "of 8, at most 64 MiB)", i, inputs[i].size);
      return EMBER_EFORMAT;
    }
  tally_prepared *tp = malloc(sizeof *tp);
  if (!tp) return EMBER_ENOMEM;
  tp->k = get_u64(params);
  tp->n_inputs = n_inputs;
  tp->elements = size / 8;
  *prepared = tp;
  return 0;
}

static int tally_plan(const void *prepared, const acc_task_shape *shape,
                      acc_task_plan *plan, char *err, size_t err_len) {
  const tally_prepared *tp = prepared;
  size_t n = tp->elements;
  if (shape->n_states > 1 || shape->n_outputs > 1) {
    snprintf(err, err_len, "at most one state and one out block");
    return EMBER_EPARAM;
  }
  if (shape->n_states) {
    size_t s = shape->state_sizes[0];
    if (s % 8 || s == 0 || (tp->n_inputs && s != n * 8)) {
      snprintf(err, err_len, "state of %zu bytes: a multiple of 8, the "
               "inputs' size", s);
      return EMBER_EPARAM;
    }
    n = s / 8;
  } else if (tp->n_inputs != 1 || shape->n_outputs != 1) {
    snprintf(err, err_len, "without state: one input and one out block");
    return EMBER_EPARAM;
  }
  if (shape->n_outputs) plan->output_sizes[0] = n * 8;
  plan->scratch_size = n * 8;
  plan->cost.ops = n * (tp->n_inputs + 2);
  plan->cost.bytes_read = n * 8 * (tp->n_inputs + shape->n_states);
  plan->cost.bytes_written = n * 8 * (shape->n_states + shape->n_outputs);
  return 0;
}

static int tally_run_cpu(void *prepared, const acc_block *inputs,
                         size_t n_inputs, const acc_run_ctx *ctx,
                         acc_output *out, char *err, size_t err_len) {
  const tally_prepared *tp = prepared;
  if (!ctx || !ctx->scratch.data) {
    snprintf(err, err_len, "tally: no scratch");
    return EMBER_EINVAL;
  }
  acc_mut_block *target = ctx->n_states ? &ctx->states[0] : &ctx->outputs[0];
  size_t n = target->size / 8;
  uint8_t *tmp = ctx->scratch.data;
  uint64_t sum = 0;
  for (size_t i = 0; i < n; i++) {
    if (ctx->cancel && atomic_load(ctx->cancel)) return EMBER_ECANCELED;
    uint64_t add = 0, base;
    if (ctx->n_states) {
      base = get_u64(target->data + 8 * i);
      for (size_t j = 0; j < n_inputs; j++) add += get_u64(inputs[j].data + 8 * i);
    } else {
      base = get_u64(inputs[0].data + 8 * i);
    }
    uint64_t v = tally_step(base, tp->k, add);
    put_u64(tmp + 8 * i, v);
    sum += v;
  }
  memcpy(target->data, tmp, n * 8);
  if (ctx->n_states && ctx->n_outputs)
    memcpy(ctx->outputs[0].data, tmp, n * 8);
  out->data = malloc(8);
  if (!out->data) return EMBER_ENOMEM;
  put_u64(out->data, sum);
  out->size = 8;
  return 0;
}

static void tally_release(void *prepared) { free(prepared); }

static uint64_t tally_work(const void *prepared) {
  const tally_prepared *tp = prepared;
  return tp ? tp->elements * (tp->n_inputs + 2) : 0;
}

/* A made-up board: one element per cycle at 100 MHz, 1 us a task. */
static const acc_fpga_model tally_fpga = {
  .units_per_cycle = 1, .clock_mhz = 100, .fixed_ns = 1000,
  .source = "test accelerator: one element per cycle at 100 MHz"};

const acc_descriptor acc_tally_descriptor = {
  .abi_version = ACC_ABI_VERSION,
  .name = "tally",
  .version = 1,
  .summary = "test accelerator: order-sensitive updates of state and out "
             "blocks",
  .validate = tally_validate,
  .run_cpu = tally_run_cpu,
  .release = tally_release,
  .work = tally_work,
  .work_unit = "elements",
  .fpga = &tally_fpga,
  .plan = tally_plan,
};
