/*
 * sw_opencl_ops.c - acc_sw_opencl_ops: the "sw" descriptor's OpenCL
 * implementation (accel.h's acc_opencl_ops) on top of sw_opencl.h: a
 * validated task whose two blocks are already in device buffers runs on
 * them in place (acc_sw_ocl_run_resident) and its hits are packed as
 * run_cpu packs them.
 */
#include <stdlib.h>

#include "ember/ember_errors.h"
#include "sw_internal.h"
#include "sw_opencl.h"
#include "sw_prepared.h"

static int ops_create(void *context, void *device, const char *cache_dir,
                      void **state, char *err, size_t err_len) {
  if (!state) return EMBER_EINVAL;
  acc_sw_ocl *o = NULL;
  int rc = acc_sw_ocl_create((cl_context)context, (cl_device_id)device,
                             cache_dir, &o, err, err_len);
  *state = o;
  return rc;
}

static void ops_destroy(void *state) { acc_sw_ocl_destroy(state); }

static int ops_run(void *state, void *queue, void *prepared,
                   const acc_block *inputs, void *const *dev_inputs,
                   size_t n_inputs, void *const *wait_events, unsigned n_wait,
                   const acc_run_ctx *ctx, acc_output *out, char *err,
                   size_t err_len) {
  if (!state || !queue || !prepared || !inputs || !dev_inputs || !out ||
      (n_wait && !wait_events)) {
    return errbuf_printf(err, err_len, EMBER_EINVAL,
                         "sw opencl: invalid arguments");
  }
  if (n_inputs != 2 || !dev_inputs[0] || !dev_inputs[1]) {
    return errbuf_printf(err, err_len, EMBER_EINVAL,
                         "sw opencl: expected 2 input blocks in device "
                         "buffers, got %zu",
                         n_inputs);
  }
  /* the host copies give the plan; validate checked them already, so a
   * failure here means the inputs are not the validated ones */
  const uint32_t count = acc_sw_prepared_count(prepared);
  acc_seqset sets[2];
  for (int b = 0; b < 2; b++) {
    char why[160];
    if (acc_seqset_view(&inputs[b], &sets[b], why, sizeof why) != 0 ||
        sets[b].count != count) {
      return errbuf_printf(err, err_len, EMBER_EINVAL,
                           "sw opencl: inputs differ from the "
                           "validated ones");
    }
  }
  acc_sw_hit *hits = malloc((size_t)count * sizeof *hits);
  if (!hits) {
    return errbuf_printf(err, err_len, EMBER_ENOMEM,
                         "sw opencl: out of memory for %u results", count);
  }
  int rc = acc_sw_ocl_run_resident(
      state, (cl_command_queue)queue, acc_sw_prepared_scoring(prepared),
      &sets[0], &sets[1], (cl_mem)dev_inputs[0], (cl_mem)dev_inputs[1],
      (cl_uint)n_wait, (const cl_event *)wait_events,
      ctx ? ctx->cancel : NULL, hits, err, err_len);
  if (rc == 0 && (rc = acc_sw_pack_hits(hits, count, out)) != 0)
    errbuf_printf(err, err_len, 0,
                  "sw opencl: out of memory packing %u results", count);
  free(hits);
  return rc;
}

const acc_opencl_ops acc_sw_opencl_ops = {
  .create = ops_create,
  .destroy = ops_destroy,
  .run = ops_run,
};
