/*
 * gc_descriptor.c - the example accelerator "gc" as ember sees it: its
 * descriptor and the one symbol a plugin exports (ember/accel.h). All of
 * the plugin's use of the descriptor ABI is in this file.
 *
 * Parameters: none (params must be empty). Inputs: exactly one block in
 * gc.h's format. Result: gc.h's layout (no protobuf message, so
 * params_descriptor and result_descriptor are NULL).
 */
#include <stdlib.h>
#include <stdio.h>

#include <ember/accel.h>
#include <ember/ember_errors.h>

#include "gc.h"

typedef struct gc_prepared {
  size_t n_seqs;
  size_t n_bases;  /* bytes of the block: the work */
} gc_prepared;

static int gc_validate(const uint8_t *params, size_t params_len,
                       const acc_block *inputs, size_t n_inputs,
                       void **prepared, char *err, size_t err_len) {
  if (params_len != 0) {
    snprintf(err, err_len, "gc takes no parameters (%zu bytes given)",
             params_len);
    return EMBER_EPARAM;
  }
  if (n_inputs != 1) {
    snprintf(err, err_len, "gc takes one input block, not %zu", n_inputs);
    return EMBER_EPARAM;
  }
  gc_prepared *p = malloc(sizeof *p);
  if (!p) return EMBER_ENOMEM;
  if (gc_check(inputs[0].data, inputs[0].size, &p->n_seqs, err, err_len)) {
    free(p);
    return EMBER_EFORMAT;
  }
  p->n_bases = inputs[0].size;
  *prepared = p;
  return 0;
}

/* One pass over the block; too short to be worth checking ctx->cancel. */
static int gc_run_cpu(void *prepared, const acc_block *inputs,
                      size_t n_inputs, const acc_run_ctx *ctx,
                      acc_output *out, char *err, size_t err_len) {
  const gc_prepared *p = prepared;
  out->size = 8 * p->n_seqs;
  out->data = malloc(out->size);
  if (!out->data) return EMBER_ENOMEM;
  gc_compute(inputs[0].data, inputs[0].size, out->data);
  return 0;
}

static void gc_release(void *prepared) { free(prepared); }

static uint64_t gc_work(const void *prepared) {
  return ((const gc_prepared *)prepared)->n_bases;
}

static const acc_descriptor gc_descriptor = {
  .abi_version = ACC_ABI_VERSION,
  .name = "gc",
  .version = 1,
  .summary = "GC content of each sequence in a block",
  .validate = gc_validate,
  .run_cpu = gc_run_cpu,
  .release = gc_release,
  .work = gc_work,
  .work_unit = "bases",
};

/* the one exported symbol (the rest is hidden: C_VISIBILITY_PRESET) */
__attribute__((visibility("default")))
const acc_descriptor *ember_accelerator(void) { return &gc_descriptor; }
