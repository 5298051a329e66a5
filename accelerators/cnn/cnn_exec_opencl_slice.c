/*
 * cnn_exec_opencl_slice.c - ICP and OCP slices (cnn.proto) and error
 * pieces on an OpenCL device: cnn_exec_slice.c's work on the state block's
 * device buffer. A slice runs as a one-layer cnn_opencl stage
 * (cnn_ocl_slice_create) built per task, as whole stages are; channels are
 * picked and laid out with rectangular buffer copies (one row per sample)
 * and the partial sums, the last ICP slice's activation and its
 * derivative are cnn.cl kernels. Nothing crosses to the host. An
 * inference FORWARD runs from scratch and leaves the slot alone.
 */
#include <stdio.h>

#include "cnn_exec_opencl.h"
#include "ember/ember_errors.h"

typedef cnn_ocl_run run;

/* rows of row bytes, each from src at src_off + k src_pitch to dst at
 * dst_off + k dst_pitch: one row per sample. */
static int copy_rows(run *r, cl_mem src, size_t src_off, size_t src_pitch,
                     cl_mem dst, size_t dst_off, size_t dst_pitch,
                     size_t row, size_t rows) {
  if (!row || !rows) return 0;
  const size_t so[3] = {src_off, 0, 0}, dso[3] = {dst_off, 0, 0};
  const size_t region[3] = {row, rows, 1};
  cl_int rc = clEnqueueCopyBufferRect(r->q, src, dst, so, dso, region,
                                      src_pitch, 0, dst_pitch, 0, 0, NULL,
                                      NULL);
  return rc == CL_SUCCESS ? 0 : cnn_ocl_run_fail(r, "clEnqueueCopyBufferRect",
                                                 rc);
}

/* A device buffer of bytes in the queue's context; NULL with *rc set. */
static cl_mem scratch(run *r, size_t bytes, int *rc) {
  if (*rc) return NULL;
  cl_context ctx;
  cl_int crc = clGetCommandQueueInfo(r->q, CL_QUEUE_CONTEXT, sizeof ctx,
                                     &ctx, NULL);
  cl_mem m = NULL;
  if (crc == CL_SUCCESS)
    m = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes ? bytes : 1, NULL, &crc);
  if (crc != CL_SUCCESS) {
    *rc = cnn_ocl_run_fail(r, "a scratch buffer", crc);
    return NULL;
  }
  return m;
}

static void release(cl_mem m) {
  if (m) clReleaseMemObject(m);
}

/* The slice's stage holding the block's parameters (and its accumulated
 * gradients when grads). */
static int slice_stage(run *r, bool grads, cnn_ocl_stage **out) {
  const cnn_task *t = r->t;
  const cnn_layout *L = &t->layout;
  char why[256] = "";
  int rc = cnn_ocl_slice_create(r->o, r->q, t->net, t->first, L->c1 - L->c0,
                                L->ocp, L->ocp || L->icp_last, t->batch, out,
                                why, sizeof why);
  if (rc) {
    snprintf(r->err, r->err_len, "cnn opencl: %s", why);
    return rc;
  }
  rc = cnn_ocl_stage_load(*out, t->first, CNN_OCL_PARAMS, r->st,
                          (size_t)L->params_off);
  if (!rc && grads)
    rc = cnn_ocl_stage_load(*out, t->first, CNN_OCL_GRADS, r->st,
                            (size_t)L->grads_off);
  if (rc) return cnn_ocl_run_stage_fail(r, *out, "loading the parameters", rc);
  return 0;
}

static int finish(run *r) {
  cl_int crc = clFinish(r->q);
  return crc == CL_SUCCESS ? 0 : cnn_ocl_run_fail(r, "clFinish", crc);
}

/* Per-sample sizes in bytes: the layer's input and output, the slice's
 * channels before it and its own (ICP: of the input; OCP: of the
 * output). */
typedef struct sizes {
  size_t in, out, before, own;
} sizes;

static sizes sizes_of(const cnn_task *t) {
  const cnn_layout *L = &t->layout;
  size_t fb = sizeof(float);
  return (sizes){(size_t)(L->in_elems / t->batch) * fb,
                 (size_t)(L->out_elems / t->batch) * fb,
                 (size_t)(L->c0 * L->unit) * fb,
                 (size_t)((L->c1 - L->c0) * L->unit) * fb};
}

int cnn_ocl_slice_forward(run *r, cl_mem const *dev_in,
                          const acc_run_ctx *ctx) {
  const cnn_task *t = r->t;
  const cnn_layout *L = &t->layout;
  const cnn_layer *layers = cnn_net_layers(t->net, &(size_t){0});
  sizes z = sizes_of(t);
  size_t B = t->batch, fb = sizeof(float);
  size_t stash = (size_t)(L->stash_off + t->slot * L->stash_stride);
  cl_mem out = ctx->n_outputs ? (cl_mem)ctx->dev_outputs[0] : NULL;
  /* the slice's input into the slot's stash, an inference's into scratch
   * (the slot is left alone) */
  int rc = 0;
  cl_mem in = r->st, in_tmp = NULL;
  if (t->inference) {
    in = in_tmp = scratch(r, (size_t)L->stash_elems * fb, &rc);
    stash = 0;
  }
  if (!rc)
    rc = L->icp ? copy_rows(r, dev_in[0], z.before, z.in, in, stash, z.own,
                            z.own, B)
                : cnn_ocl_run_copy(r, dev_in[0], 0, in, stash, B * z.in);
  /* the stage's output: the layer's partial sums (ICP, into the out
   * block when there is one) or the slice's channels (OCP) */
  cl_mem tmp = NULL, y = out;
  if (L->ocp || !out) y = tmp = scratch(r, L->ocp ? B * z.own : B * z.out,
                                        &rc);
  cnn_ocl_stage *s = NULL;
  if (!rc) rc = slice_stage(r, false, &s);
  if (!rc) {
    rc = cnn_ocl_stage_forward_mem(s, in, stash, NULL, 0, y, NULL, NULL);
    if (rc) cnn_ocl_run_stage_fail(r, s, "forward", rc);
  }
  if (!rc && L->icp && L->c0)
    rc = cnn_ocl_add(r->o, r->q, dev_in[1], 0, y, 0, L->out_elems, r->err,
                     r->err_len);
  if (!rc && L->icp_last && layers[t->first].act != CNN_ACT_LINEAR)
    rc = cnn_ocl_act_keep(r->o, r->q, y, r->st,
                          (L->kept_off + t->slot * L->kept_stride) / fb,
                          L->out_elems, layers[t->first].act, !t->inference,
                          r->err, r->err_len);
  if (!rc && L->ocp && out) {
    /* per sample: the previous slices' channels, its own, zeros after */
    const cl_uint zero = 0;
    cl_int crc = clEnqueueFillBuffer(r->q, out, &zero, sizeof zero, 0,
                                     B * z.out, 0, NULL, NULL);
    if (crc != CL_SUCCESS) rc = cnn_ocl_run_fail(r, "clEnqueueFillBuffer",
                                                 crc);
    if (!rc && L->c0)
      rc = copy_rows(r, dev_in[1], 0, z.out, out, 0, z.out, z.before, B);
    if (!rc) rc = copy_rows(r, y, 0, z.own, out, z.before, z.out, z.own, B);
  }
  if (!rc) rc = finish(r);
  cnn_ocl_stage_destroy(s);
  release(tmp);
  release(in_tmp);
  if (rc || t->inference) return rc;
  r->h.flags |= 1u << t->slot;
  return cnn_ocl_run_write_header(r);
}

int cnn_ocl_slice_backward(run *r, cl_mem dy, const acc_run_ctx *ctx) {
  const cnn_task *t = r->t;
  const cnn_layout *L = &t->layout;
  const cnn_layer *layers = cnn_net_layers(t->net, &(size_t){0});
  if (!(r->h.flags & (1u << t->slot))) {
    snprintf(r->err, r->err_len, "BACKWARD on slot %u without a FORWARD "
             "there since INIT, SET_PARAMS or its last BACKWARD", t->slot);
    return EMBER_ESTATE;
  }
  sizes z = sizes_of(t);
  size_t B = t->batch, fb = sizeof(float);
  size_t stash = (size_t)(L->stash_off + t->slot * L->stash_stride);
  cl_mem din = ctx->n_outputs ? (cl_mem)ctx->dev_outputs[0] : NULL;
  cl_mem dz_out = ctx->n_outputs > 1 ? (cl_mem)ctx->dev_outputs[1] : NULL;
  cl_mem dz = dy, tmp = NULL;
  int rc = 0;
  if (L->ocp) { /* its channels of the output error */
    dz = tmp = scratch(r, B * z.own, &rc);
    if (!rc) rc = copy_rows(r, dy, z.before, z.out, dz, 0, z.own, z.own, B);
  } else if (L->icp_last && layers[t->first].act != CNN_ACT_LINEAR) {
    /* dz: the output error through the activation, from the kept output */
    dz = dz_out ? dz_out : (tmp = scratch(r, B * z.out, &rc));
    if (!rc) rc = cnn_ocl_run_copy(r, dy, 0, dz, 0, B * z.out);
    if (!rc)
      rc = cnn_ocl_act_mask(r->o, r->q, r->st,
                            (L->kept_off + t->slot * L->kept_stride) / fb,
                            dz, L->out_elems, layers[t->first].act, r->err,
                            r->err_len);
  } else if (dz_out) {
    rc = cnn_ocl_run_copy(r, dy, 0, dz_out, 0, B * z.out);
  }
  cnn_ocl_stage *s = NULL;
  if (!rc) rc = slice_stage(r, true, &s);
  if (!rc) {
    rc = cnn_ocl_stage_forward_mem(s, r->st, stash, NULL, 0, NULL, NULL,
                                   NULL);
    if (!rc) rc = cnn_ocl_stage_backward_mem(s, dz, din);
    if (rc) cnn_ocl_run_stage_fail(r, s, "backward", rc);
  }
  if (!rc) {
    rc = cnn_ocl_stage_store(s, t->first, CNN_OCL_GRADS, r->st,
                             (size_t)L->grads_off);
    if (rc) cnn_ocl_run_stage_fail(r, s, "storing the gradients", rc);
  }
  if (!rc) rc = finish(r);
  cnn_ocl_stage_destroy(s);
  release(tmp);
  if (rc) return rc;
  r->h.flags &= ~(1u << t->slot);
  return cnn_ocl_run_write_header(r);
}

int cnn_ocl_join_error(run *r, cl_mem const *dev_in, cl_mem *joined) {
  const cnn_task *t = r->t;
  size_t fb = sizeof(float), per = (size_t)(t->layout.out_elems / t->batch);
  int rc = 0;
  *joined = scratch(r, (size_t)t->layout.out_elems * fb, &rc);
  if (t->n_addends) {
    if (!rc) rc = cnn_ocl_run_copy(r, dev_in[0], 0, *joined, 0,
                                   (size_t)t->layout.out_elems * fb);
    for (uint32_t j = 1; !rc && j < t->n_addends; j++)
      rc = cnn_ocl_add(r->o, r->q, dev_in[j], 0, *joined, 0,
                       t->layout.out_elems, r->err, r->err_len);
    return rc;
  }
  size_t at = 0;
  for (uint32_t j = 0; !rc && j < t->n_pieces; j++) {
    size_t run_len = (size_t)(t->pieces[j] * t->piece_unit) * fb;
    rc = copy_rows(r, dev_in[j], 0, run_len, *joined, at, per * fb, run_len,
                   t->batch);
    at += run_len;
  }
  return rc;
}
