/*
 * cnn_accel.c - the "cnn" accelerator's descriptor: one operation of CNN
 * training (cnn.proto) on one stage of a network, whose parameters,
 * momentum, gradients and kept activations are one app-owned state block
 * (cnn_layout.h) on the platform that runs the stage. Activations and
 * errors pass from stage to stage as out blocks, which stay on the device
 * when both stages run there. README.md has the design.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_stage_pool.h"
#include "cnn_task.h"
#include "ember/ember_errors.h"

#define CNN_VERSION 1

static int cnn_validate(const uint8_t *params, size_t params_len,
                        const acc_block *inputs, size_t n_inputs,
                        void **prepared, char *err, size_t err_len) {
  cnn_task *t;
  int rc = cnn_task_prepare(params, params_len, inputs, n_inputs, &t, err,
                            err_len);
  if (rc) return rc;
  *prepared = t;
  return 0;
}

static int cnn_plan(const void *prepared, const acc_task_shape *shape,
                    acc_task_plan *plan, char *err, size_t err_len) {
  const cnn_task *t = prepared;
  if (shape->n_states != 1) {
    snprintf(err, err_len, "cnn takes one state block (the stage), not %zu",
             shape->n_states);
    return EMBER_EPARAM;
  }
  if (shape->state_sizes[0] != t->layout.total &&
      (t->layout.icp || t->layout.ocp)) {
    snprintf(err, err_len, "the state block has %zu bytes; layer %u's "
             "channels [%u, %u) at batch %u take %llu",
             shape->state_sizes[0], t->first, t->layout.c0, t->layout.c1,
             t->batch, (unsigned long long)t->layout.total);
    return EMBER_EPARAM;
  }
  if (shape->state_sizes[0] != t->layout.total) {
    snprintf(err, err_len, "the state block has %zu bytes; layers %u..%u "
             "at batch %u take %llu", shape->state_sizes[0], t->first,
             t->end - 1, t->batch, (unsigned long long)t->layout.total);
    return EMBER_EPARAM;
  }
  size_t most = cnn_task_max_outputs(t);
  int exact = t->op == EMBER__CNN__OP__GET_PARAMS;
  if (shape->n_outputs > most || (exact && shape->n_outputs != most)) {
    snprintf(err, err_len, "this cnn op makes %s%zu out block%s (%zu asked "
             "for)", exact ? "" : "at most ", most, most == 1 ? "" : "s",
             shape->n_outputs);
    return EMBER_EPARAM;
  }
  for (size_t i = 0; i < shape->n_outputs; i++)
    plan->output_sizes[i] = cnn_task_output_size(t, i);
  plan->cost = t->cost;
  return 0;
}

static int cnn_run_cpu(void *prepared, const acc_block *inputs,
                       size_t n_inputs, const acc_run_ctx *ctx,
                       acc_output *out, char *err, size_t err_len) {
  cnn_task *t = prepared;
  if (!ctx || ctx->n_states != 1 ||
      ctx->states[0].size != t->layout.total) {
    snprintf(err, err_len, "no state block to run on");
    return EMBER_EINTERNAL;
  }
  t->app = ctx->app; /* the CPU stage the run takes is this app's */
  Ember__Cnn__Result res = EMBER__CNN__RESULT__INIT;
  int rc = cnn_task_run(t, ctx->states[0].data, inputs, n_inputs,
                        ctx->outputs, ctx->n_outputs, ctx->cancel, &res, err,
                        err_len);
  if (rc) return rc;
  return cnn_task_pack_result(&res, out, err, err_len);
}

static void cnn_release(void *prepared) { cnn_task_free(prepared); }

/* The CPU stages kept between tasks (cnn_stage_pool.h). */
static void cnn_app_gone(uint64_t app) { cnn_stage_pool_app_gone(app); }

static void cnn_cache_budget(uint64_t bytes) {
  cnn_stage_pool_set_budget(bytes);
}

static uint64_t cnn_work(const void *prepared) {
  return ((const cnn_task *)prepared)->cost.ops;
}

/* FPDeep's design on Xilinx XC7VX690T FPGAs (VC709 boards; the default
 * fpga-emu board is the same chip): 1157 GOPS per FPGA training AlexNet on
 * 15 FPGAs (Table 6; 1197 for VGG-16, 1220 for VGG-19; "around 1 TOPS"
 * each at about 80% of the DSP slices), as 5785 operations per cycle at a
 * nominal 200 MHz (the paper gives no clock; only the product counts).
 * Stages pass activations and errors over the inter-FPGA links, the
 * binding constraint of its roofline: 150 Gb/s per FPGA (six 28 Gb/s
 * transceivers, Section 6.3.3), 18.75 GB/s, which is 0.879 of the default
 * board's 21.333 GB/s; the task's bytes are that boundary traffic
 * (cnn_task.c), since FPDeep keeps weights and kept features on chip. */
static const acc_fpga_model cnn_fpga_model = {
  .units_per_cycle = 1157e3 / 200,
  .clock_mhz = 200,
  .fixed_ns = 10000,
  .source = "Wang, Geng et al., FPDeep: Scalable Acceleration of CNN Training on "
            "Deeply-Pipelined FPGA Clusters: 1157 GOPS per "
            "XC7VX690T (AlexNet, 15 FPGAs), 150 Gb/s inter-FPGA links",
  .memory_efficiency = 18.75 / 21.333,
};

const acc_descriptor acc_cnn_descriptor = {
  .abi_version = ACC_ABI_VERSION,
  .name = "cnn",
  .version = CNN_VERSION,
  .summary = "CNN training stage (FPDeep: forward, backward, SGD on a "
             "stage's state kept on the device)",
  .params_descriptor = &ember__cnn__params__descriptor,
  .result_descriptor = &ember__cnn__result__descriptor,
  .validate = cnn_validate,
  .run_cpu = cnn_run_cpu,
  .release = cnn_release,
  .work = cnn_work,
  .work_unit = "flops",
#ifdef EMBER_HAVE_OPENCL
  .opencl = &acc_cnn_opencl_ops,
#endif
  .fpga = &cnn_fpga_model,
  .plan = cnn_plan,
  .app_gone = cnn_app_gone,
  .cache_budget = cnn_cache_budget,
};
