/*
 * plf_accel.c - the "plf" accelerator's descriptor: a task is a list of
 * BEAGLE operations (plf.proto) on one state block, the instance, which
 * stays on the platform that holds it across tasks. A task without a state
 * block runs on a zeroed scratch instance: a one-shot computation whose
 * buffers go when it ends (calibration, or a client that keeps nothing).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "plf_exec.h"
#include "plf_probe.h"
#include "plf_result.h"
#include "plf_task.h"

#ifdef EMBER_HAVE_OPENCL
#include "plf_opencl.h"
#endif

#define PLF_VERSION 1

static int plf_validate(const uint8_t *params, size_t params_len,
                        const acc_block *inputs, size_t n_inputs,
                        void **prepared, char *err, size_t err_len) {
  plf_task *t;
  int rc = plf_task_prepare(params, params_len, inputs, n_inputs, &t, err,
                            err_len);
  if (rc) return rc;
  *prepared = t;
  return 0;
}

static int plf_plan(const void *prepared, const acc_task_shape *shape,
                    acc_task_plan *plan, char *err, size_t err_len) {
  const plf_task *t = prepared;
  if (shape->n_outputs) {
    snprintf(err, err_len, "plf makes no out blocks (%zu asked for)",
             shape->n_outputs);
    return EMBER_EPARAM;
  }
  if (shape->n_states > 1) {
    snprintf(err, err_len, "plf takes one state block (the instance), not "
             "%zu", shape->n_states);
    return EMBER_EPARAM;
  }
  if (shape->n_states == 1 && shape->state_sizes[0] != t->layout.total) {
    snprintf(err, err_len, "the state block has %zu bytes; this instance "
             "takes %llu", shape->state_sizes[0],
             (unsigned long long)t->layout.total);
    return EMBER_EPARAM;
  }
  if (shape->n_states == 0) {
    if (t->layout.total > SIZE_MAX) {
      snprintf(err, err_len, "instance too large for this host");
      return EMBER_EPARAM;
    }
    plan->scratch_size = (size_t)t->layout.total;
  }
  plan->cost = t->cost;
  return 0;
}

static int plf_run_cpu(void *prepared, const acc_block *inputs,
                       size_t n_inputs, const acc_run_ctx *ctx,
                       acc_output *out, char *err, size_t err_len) {
  (void)n_inputs;
  const plf_task *t = prepared;
  uint8_t *state;
  if (ctx && ctx->n_states == 1) {
    state = ctx->states[0].data;
  } else if (ctx && ctx->scratch.data &&
             ctx->scratch.size >= t->layout.total) {
    state = ctx->scratch.data;
    memset(state, 0, (size_t)t->layout.total);
  } else {
    snprintf(err, err_len, "no instance to run on");
    return EMBER_EINTERNAL;
  }
  plf_answers a = {0};
  size_t nd = t->n_derivatives ? t->n_derivatives : 1;
  size_t nsd = t->n_site_derivatives ? t->n_site_derivatives : 1;
  a.lnl = calloc(t->n_lnl ? t->n_lnl : 1, sizeof *a.lnl);
  a.site_lnl = calloc(t->n_site_lnl ? t->n_site_lnl : 1, sizeof *a.site_lnl);
  a.values = calloc(t->n_values ? t->n_values : 1, sizeof *a.values);
  a.first = calloc(nd, sizeof *a.first);
  a.second = calloc(nd, sizeof *a.second);
  a.site_first = calloc(nsd, sizeof *a.site_first);
  a.site_second = calloc(nsd, sizeof *a.site_second);
  int rc = EMBER_ENOMEM;
  if (a.lnl && a.site_lnl && a.values && a.first && a.second &&
      a.site_first && a.site_second) {
    rc = plf_exec_run(t, state, inputs, NULL, ctx ? ctx->cancel : NULL, &a,
                      err, err_len);
    if (!rc) rc = plf_pack_result(&a, t, out);
  }
  free(a.lnl);
  free(a.site_lnl);
  free(a.values);
  free(a.first);
  free(a.second);
  free(a.site_first);
  free(a.site_second);
  return rc;
}

static void plf_release(void *prepared) { plf_task_free(prepared); }

static uint64_t plf_work(const void *prepared) {
  return ((const plf_task *)prepared)->cost.ops;
}

/* The BEAGLE multi-FPGA paper's design (Convey HC-1): 32 processing
 * elements at 150 MHz, each taking 4.5 cycles (3 to read its 10 inputs,
 * 1.5 to write 6 outputs over a 128-bit port) per site for 130 flops; the
 * board's four FPGAs share 76.8 GB/s (8 controllers x 2.4 GB/s per FPGA)
 * and the kernel streams at about 50% of it. Set a board's memory_gbps to
 * 76.8 to model the HC-1 itself. */
static const acc_fpga_model plf_fpga_model = {
  .units_per_cycle = 32 * 130 / 4.5,
  .clock_mhz = 150,
  .fixed_ns = 10000,
  .source = "Jin & Bakos, Extending the BEAGLE library to a multi-FPGA "
            "platform (BMC Bioinformatics 2013): 32 PEs at 150 MHz, 130 "
            "flops per 64 bytes, 76.8 GB/s at about 50% memory efficiency",
  .memory_efficiency = 0.5,
};

const acc_descriptor acc_plf_descriptor = {
  .abi_version = ACC_ABI_VERSION,
  .name = "plf",
  .version = PLF_VERSION,
  .summary = "phylogenetic likelihood (BEAGLE's operations on an instance "
             "kept on the device)",
  .params_descriptor = &ember__plf__params__descriptor,
  .result_descriptor = &ember__plf__result__descriptor,
  .validate = plf_validate,
  .run_cpu = plf_run_cpu,
  .release = plf_release,
  .work = plf_work,
  .work_unit = "flops",
#ifdef EMBER_HAVE_OPENCL
  .opencl = &acc_plf_opencl_ops,
#endif
  .fpga = &plf_fpga_model,
  .plan = plf_plan,
  .make_probe = plf_make_probe,
};
