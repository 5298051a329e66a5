/*
 * cnn_exec_opencl.c - acc_cnn_opencl_ops: the cnn descriptor's OpenCL
 * implementation (accel.h's acc_opencl_ops). Every op runs on the state
 * block in its device buffer (ctx->dev_states[0], cnn_layout.h's layout),
 * with the inputs and out blocks in device buffers too: nothing of a
 * stage's state crosses to the host but its 64-byte header (read at the
 * start, written back when it changed) and what the Result needs.
 *
 *   INIT        the buffer zero-filled; the header and the parameters
 *               (cnn_task_init_params on the host, as the CPU path draws
 *               them) written.
 *   SET_PARAMS  zero-filled; the header written, the parameters copied
 *               from input 0.
 *   GET_PARAMS  the parameters copied to out block 0.
 *   UPDATE      cnn.cl's cnn_sgd on the block's regions in place, per
 *               layer (weights with decay, biases without), with the
 *               gradients scaled by 1 / accumulated: cnn_exec.c's sgd().
 *   FORWARD     input 0 copied into the slot's stash (and input 1, the
 *               labels, into the slot's labels); a cnn_opencl stage built,
 *               its parameters copied from the block, run from the stash
 *               (its output copied to out block 0; the probabilities and
 *               per-sample losses read back for the Result); the rolling
 *               statistics it moved copied back, its dropout key written
 *               with the slot. An inference runs from the input blocks
 *               and keeps nothing.
 *   BACKWARD    a stage built, its parameters and the accumulated
 *               gradients copied from the block, the forward pass re-run
 *               from the slot's stash and labels with its FORWARD's
 *               dropout key (the inner activations are not kept, as on
 *               the CPU), EB and PG from input 0 (the
 *               softmax's own error on the last stage), the input error
 *               copied to out block 0, the gradients copied back.
 *
 * ICP and OCP slices' FORWARD and BACKWARD, and the joining of an output
 * error given in pieces, are cnn_exec_opencl_slice.c's.
 *
 * The stage's buffers are allocated per FORWARD and BACKWARD and hold no
 * truth between tasks (README.md has the cost). Commands go on the
 * platform's compute queue, in order, after a barrier on the uploads'
 * events; run() blocks until they are done. Labels are checked on the
 * host: from the input's host bytes, or read back when it has none (an
 * earlier task's out block).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_exec_opencl.h"
#include "ember/ember_errors.h"

typedef cnn_ocl_run run;

int cnn_ocl_run_fail(run *r, const char *what, cl_int rc) {
  snprintf(r->err, r->err_len, "cnn opencl: %s failed (%d)", what, (int)rc);
  return EMBER_EPLATFORM;
}

int cnn_ocl_run_no_memory(run *r) {
  snprintf(r->err, r->err_len, "cnn opencl: out of memory");
  return EMBER_ENOMEM;
}

int cnn_ocl_run_stage_fail(run *r, const cnn_ocl_stage *s, const char *what,
                           int rc) {
  const char *why = s ? cnn_ocl_stage_error(s) : "";
  snprintf(r->err, r->err_len, "cnn opencl: %s failed (%s%s%s)", what,
           ember_errname(rc), *why ? ": " : "", why);
  return rc;
}

int cnn_ocl_run_write_header(run *r) {
  cl_int rc = clEnqueueWriteBuffer(r->q, r->st, CL_TRUE, 0, sizeof r->h,
                                   &r->h, 0, NULL, NULL);
  return rc == CL_SUCCESS ? 0 : cnn_ocl_run_fail(r, "writing the header", rc);
}

int cnn_ocl_run_copy(run *r, cl_mem src, size_t src_off, cl_mem dst,
                     size_t dst_off, size_t bytes) {
  if (!bytes) return 0;
  cl_int rc = clEnqueueCopyBuffer(r->q, src, dst, src_off, dst_off, bytes, 0,
                                  NULL, NULL);
  return rc == CL_SUCCESS ? 0
                          : cnn_ocl_run_fail(r, "clEnqueueCopyBuffer", rc);
}

/* restart: the whole block zeroed, the header stamped for the task. */
static int restart(run *r) {
  const cl_uint zero = 0;
  cl_int rc = clEnqueueFillBuffer(r->q, r->st, &zero, sizeof zero, 0,
                                  (size_t)r->t->layout.total, 0, NULL, NULL);
  if (rc != CL_SUCCESS) return cnn_ocl_run_fail(r, "clEnqueueFillBuffer", rc);
  cnn_task_stamp(r->t, &r->h);
  return cnn_ocl_run_write_header(r);
}

static int op_init(run *r) {
  const cnn_layout *L = &r->t->layout;
  float *p = malloc((size_t)(L->params ? L->params : 1) * sizeof *p);
  if (!p) return cnn_ocl_run_no_memory(r);
  cnn_task_init_params(r->t, p);
  int rc = restart(r);
  if (!rc) {
    cl_int crc = clEnqueueWriteBuffer(r->q, r->st, CL_TRUE,
                                      (size_t)L->params_off,
                                      (size_t)L->params * sizeof *p, p, 0,
                                      NULL, NULL);
    if (crc != CL_SUCCESS)
      rc = cnn_ocl_run_fail(r, "writing the parameters", crc);
  }
  free(p);
  return rc;
}

static int op_update(run *r) {
  const cnn_task *t = r->t;
  const cnn_layout *L = &t->layout;
  size_t n;
  const cnn_layer *layers = cnn_net_layers(t->net, &n);
  /* float indices of the regions (64-byte aligned byte offsets) */
  uint64_t p = L->params_off / sizeof(float);
  uint64_t v = L->momentum_off / sizeof(float);
  uint64_t g = L->grads_off / sizeof(float);
  float scale = 1.0f / (float)t->accumulated;
  int rc = 0;
  if (L->icp || L->ocp) { /* a slice: its weights, then its biases */
    rc = cnn_ocl_sgd(r->o, r->q, r->st, p, v, g, L->weights, scale,
                     (float)t->learning_rate, (float)t->momentum,
                     (float)t->decay, r->err, r->err_len);
    if (!rc && L->biases)
      rc = cnn_ocl_sgd(r->o, r->q, r->st, p + L->weights, v + L->weights,
                       g + L->weights, L->biases, scale,
                       (float)t->learning_rate, (float)t->momentum, 0.0f,
                       r->err, r->err_len);
    if (rc) return rc;
  } else CNN_FOR_PARAM_LAYERS(t, layers, i, off) {
    uint64_t w = layers[i].weights;
    rc = cnn_ocl_sgd(r->o, r->q, r->st, p + off, v + off, g + off, w, scale,
                     (float)t->learning_rate, (float)t->momentum,
                     (float)t->decay, r->err, r->err_len);
    /* biases and scales without decay; not the rolling statistics */
    if (!rc)
      rc = cnn_ocl_sgd(r->o, r->q, r->st, p + off + w, v + off + w,
                       g + off + w, layers[i].biases + layers[i].scales,
                       scale, (float)t->learning_rate, (float)t->momentum,
                       0.0f, r->err, r->err_len);
    if (rc) return rc;
  }
  r->h.updates++;
  return cnn_ocl_run_write_header(r);
}

/* new_stage: a stage of the task's range holding the block's parameters
 * (and its accumulated gradients when grads). */
static int new_stage(run *r, bool grads, cnn_ocl_stage **out) {
  const cnn_task *t = r->t;
  const cnn_layout *L = &t->layout;
  char why[256] = "";
  int rc = cnn_ocl_stage_create(r->o, r->q, t->net, t->first, t->end,
                                t->batch, out, why, sizeof why);
  if (rc) {
    snprintf(r->err, r->err_len, "cnn opencl: %s", why);
    return rc;
  }
  size_t n;
  const cnn_layer *layers = cnn_net_layers(t->net, &n);
  CNN_FOR_PARAM_LAYERS(t, layers, i, off) {
    size_t at = (size_t)off * sizeof(float);
    rc = cnn_ocl_stage_load(*out, i, CNN_OCL_PARAMS, r->st,
                            (size_t)L->params_off + at);
    if (!rc && grads)
      rc = cnn_ocl_stage_load(*out, i, CNN_OCL_GRADS, r->st,
                              (size_t)L->grads_off + at);
    if (rc)
      return cnn_ocl_run_stage_fail(r, *out, "loading the parameters", rc);
  }
  return 0;
}

/* labels_of: FORWARD's labels in *out (malloc'd), from the input's host
 * bytes or read back from the device, checked below the classes. */
static int labels_of(run *r, const acc_block *in, cl_mem mem, uint8_t **out) {
  const cnn_task *t = r->t;
  uint32_t classes = cnn_net_classes(t->net);
  uint8_t *labels = malloc(t->batch);
  if (!labels) return cnn_ocl_run_no_memory(r);
  *out = labels;
  if (in->data) {
    memcpy(labels, in->data, t->batch);
  } else {
    cl_int crc = clEnqueueReadBuffer(r->q, mem, CL_TRUE, 0, t->batch, labels,
                                     0, NULL, NULL);
    if (crc != CL_SUCCESS)
      return cnn_ocl_run_fail(r, "reading the labels", crc);
  }
  for (uint32_t i = 0; i < t->batch; i++)
    if (labels[i] >= classes) {
      snprintf(r->err, r->err_len, "label %u of sample %u is not below %u",
               labels[i], i, classes);
      return EMBER_EFORMAT;
    }
  return 0;
}

/* The slot's dropout key record (a stage with dropout): its offset. */
static size_t slot_pass_at(const cnn_task *t) {
  const cnn_layout *L = &t->layout;
  return (size_t)(L->pass_off + t->slot * L->pass_stride);
}

static int op_forward(run *r, const acc_block *inputs, cl_mem const *dev_in,
                      const acc_run_ctx *ctx, Ember__Cnn__Result *res) {
  const cnn_task *t = r->t;
  const cnn_layout *L = &t->layout;
  size_t stash = (size_t)(L->stash_off + t->slot * L->stash_stride);
  size_t labels = (size_t)(L->labels_off + t->slot * L->labels_stride);
  /* a training FORWARD keeps its input and labels in the slot and runs
   * from there; an inference runs from the input blocks */
  cl_mem in = r->st, lab_mem = r->st;
  size_t in_off = stash, lab_off = labels;
  if (t->inference) {
    in = dev_in[0];
    in_off = 0;
    lab_mem = L->last ? dev_in[1] : NULL;
    lab_off = 0;
  }
  uint8_t *lab = NULL;
  float *probs = NULL;
  int rc = L->last ? labels_of(r, &inputs[1], dev_in[1], &lab) : 0;
  if (!rc && !t->inference)
    rc = cnn_ocl_run_copy(r, dev_in[0], 0, r->st, stash,
              (size_t)L->in_elems * sizeof(float));
  if (!rc && L->last && !t->inference)
    rc = cnn_ocl_run_copy(r, dev_in[1], 0, r->st, labels, t->batch);
  if (!rc && L->last &&
      !(probs = malloc((size_t)L->out_elems * sizeof *probs)))
    rc = cnn_ocl_run_no_memory(r);
  cnn_ocl_stage *s = NULL;
  double loss = 0;
  cnn_pass pass = cnn_task_forward_pass(t, r->h.updates);
  if (!rc) rc = new_stage(r, false, &s);
  if (!rc) {
    cl_mem out = ctx->n_outputs ? (cl_mem)ctx->dev_outputs[0] : NULL;
    cnn_ocl_stage_set_pass(s, &pass);
    rc = cnn_ocl_stage_forward_mem(s, in, in_off, L->last ? lab_mem : NULL,
                                   lab_off, out, probs,
                                   L->last ? &loss : NULL);
    if (rc) cnn_ocl_run_stage_fail(r, s, "forward", rc);
  }
  /* the rolling statistics a training FORWARD moved, back into the block */
  size_t n;
  const cnn_layer *layers = cnn_net_layers(t->net, &n);
  if (!rc && pass.mode == CNN_MODE_TRAIN && t->batch_norm)
    CNN_FOR_PARAM_LAYERS(t, layers, i, off) {
      if (!layers[i].batch_norm) continue;
      rc = cnn_ocl_stage_store(s, i, CNN_OCL_ROLLING, r->st,
                               (size_t)L->params_off +
                                   (size_t)off * sizeof(float));
      if (rc) {
        cnn_ocl_run_stage_fail(r, s, "storing the rolling statistics", rc);
        break;
      }
    }
  if (!rc && !t->inference && L->pass_stride) {
    cnn_slot_pass sp = {pass.seed, pass.step, pass.sample0, 0};
    cl_int crc = clEnqueueWriteBuffer(r->q, r->st, CL_TRUE, slot_pass_at(t),
                                      sizeof sp, &sp, 0, NULL, NULL);
    if (crc != CL_SUCCESS)
      rc = cnn_ocl_run_fail(r, "writing the dropout key", crc);
  }
  if (!rc) {
    cl_int crc = clFinish(r->q);
    if (crc != CL_SUCCESS) rc = cnn_ocl_run_fail(r, "clFinish", crc);
  }
  cnn_ocl_stage_destroy(s);
  if (!rc && L->last)
    cnn_task_score(res, loss, probs, lab, t->batch, cnn_net_classes(t->net));
  free(lab);
  free(probs);
  if (rc || t->inference) return rc;
  r->h.flags |= 1u << t->slot;
  return cnn_ocl_run_write_header(r);
}

static int op_backward(run *r, cl_mem dy, const acc_run_ctx *ctx) {
  const cnn_task *t = r->t;
  const cnn_layout *L = &t->layout;
  if (!(r->h.flags & (1u << t->slot))) {
    snprintf(r->err, r->err_len, "BACKWARD on slot %u without a FORWARD "
             "there since INIT, SET_PARAMS or its last BACKWARD", t->slot);
    return EMBER_ESTATE;
  }
  size_t stash = (size_t)(L->stash_off + t->slot * L->stash_stride);
  size_t labels = (size_t)(L->labels_off + t->slot * L->labels_stride);
  /* the pass to re-run: its FORWARD's dropout key, kept with the slot */
  cnn_slot_pass sp;
  int have_key = L->pass_stride != 0, rc = 0;
  if (have_key) {
    cl_int crc = clEnqueueReadBuffer(r->q, r->st, CL_TRUE, slot_pass_at(t),
                                     sizeof sp, &sp, 0, NULL, NULL);
    if (crc != CL_SUCCESS)
      rc = cnn_ocl_run_fail(r, "reading the dropout key", crc);
  }
  cnn_pass pass = cnn_task_slot_pass(have_key ? &sp : NULL);
  cnn_ocl_stage *s = NULL;
  if (!rc) rc = new_stage(r, true, &s);
  if (!rc) {
    cnn_ocl_stage_set_pass(s, &pass);
    rc = cnn_ocl_stage_forward_mem(s, r->st, stash, L->last ? r->st : NULL,
                                   labels, NULL, NULL, NULL);
    if (!rc)
      rc = cnn_ocl_stage_backward_mem(
          s, L->last ? NULL : dy,
          ctx->n_outputs ? (cl_mem)ctx->dev_outputs[0] : NULL);
    if (rc) cnn_ocl_run_stage_fail(r, s, "backward", rc);
  }
  size_t n;
  const cnn_layer *layers = cnn_net_layers(t->net, &n);
  if (!rc) CNN_FOR_PARAM_LAYERS(t, layers, i, off) {
    rc = cnn_ocl_stage_store(s, i, CNN_OCL_GRADS, r->st,
                             (size_t)L->grads_off + (size_t)off *
                                                        sizeof(float));
    if (rc) {
      cnn_ocl_run_stage_fail(r, s, "storing the gradients", rc);
      break;
    }
  }
  if (!rc) {
    cl_int crc = clFinish(r->q);
    if (crc != CL_SUCCESS) rc = cnn_ocl_run_fail(r, "clFinish", crc);
  }
  cnn_ocl_stage_destroy(s);
  if (rc) return rc;
  r->h.flags &= ~(1u << t->slot);
  return cnn_ocl_run_write_header(r);
}

/* start: the state buffer checked, the uploads waited for, the header
 * read back (not for INIT and SET_PARAMS, which write it) and checked. */
static int start(run *r, const acc_run_ctx *ctx, unsigned n_wait,
                 const cl_event *wait) {
  const cnn_task *t = r->t;
  size_t size = 0;
  if (!ctx || ctx->n_states != 1 || !ctx->dev_states ||
      !(r->st = (cl_mem)ctx->dev_states[0])) {
    snprintf(r->err, r->err_len, "cnn opencl: no state block to run on");
    return EMBER_EINTERNAL;
  }
  if (clGetMemObjectInfo(r->st, CL_MEM_SIZE, sizeof size, &size, NULL) !=
          CL_SUCCESS ||
      size < t->layout.total) {
    snprintf(r->err, r->err_len, "cnn opencl: the state buffer is smaller "
             "than the stage's %llu bytes",
             (unsigned long long)t->layout.total);
    return EMBER_EINVAL;
  }
  if (ctx->n_outputs && (!ctx->dev_outputs || !ctx->dev_outputs[0])) {
    snprintf(r->err, r->err_len, "cnn opencl: out block not on the device");
    return EMBER_EINVAL;
  }
  cl_command_queue_properties props = 0;
  cl_int crc = clGetCommandQueueInfo(r->q, CL_QUEUE_PROPERTIES, sizeof props,
                                     &props, NULL);
  if (crc != CL_SUCCESS)
    return cnn_ocl_run_fail(r, "clGetCommandQueueInfo", crc);
  if (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) {
    snprintf(r->err, r->err_len, "cnn opencl: needs an in-order queue");
    return EMBER_EINVAL;
  }
  if (n_wait &&
      (crc = clEnqueueBarrierWithWaitList(r->q, n_wait, wait, NULL)) !=
          CL_SUCCESS)
    return cnn_ocl_run_fail(r, "clEnqueueBarrierWithWaitList", crc);
  if (t->op == EMBER__CNN__OP__INIT || t->op == EMBER__CNN__OP__SET_PARAMS)
    return 0;
  crc = clEnqueueReadBuffer(r->q, r->st, CL_TRUE, 0, sizeof r->h, &r->h, 0,
                            NULL, NULL);
  if (crc != CL_SUCCESS) return cnn_ocl_run_fail(r, "reading the header", crc);
  return cnn_task_check_stamp(t, &r->h, r->err, r->err_len);
}

static int run_op(run *r, const acc_block *inputs, cl_mem const *dev_in,
                  const acc_run_ctx *ctx, Ember__Cnn__Result *res) {
  const cnn_layout *L = &r->t->layout;
  size_t pbytes = (size_t)L->params * sizeof(float);
  int rc;
  switch (r->t->op) {
  case EMBER__CNN__OP__INIT:
    return op_init(r);
  case EMBER__CNN__OP__SET_PARAMS:
    rc = restart(r);
    return rc ? rc : cnn_ocl_run_copy(r, dev_in[0], 0, r->st,
                                      (size_t)L->params_off, pbytes);
  case EMBER__CNN__OP__GET_PARAMS:
    if (!ctx->n_outputs) return 0;
    return cnn_ocl_run_copy(r, r->st, (size_t)L->params_off,
                            (cl_mem)ctx->dev_outputs[0], 0, pbytes);
  case EMBER__CNN__OP__UPDATE:
    return op_update(r);
  case EMBER__CNN__OP__FORWARD:
    if (L->icp || L->ocp) return cnn_ocl_slice_forward(r, dev_in, ctx);
    return op_forward(r, inputs, dev_in, ctx, res);
  case EMBER__CNN__OP__BACKWARD: {
    cl_mem joined = NULL;
    rc = r->t->n_pieces || r->t->n_addends
             ? cnn_ocl_join_error(r, dev_in, &joined) : 0;
    cl_mem dy = joined ? joined : L->last ? NULL : dev_in[0];
    if (!rc)
      rc = L->icp || L->ocp ? cnn_ocl_slice_backward(r, dy, ctx)
                            : op_backward(r, dy, ctx);
    if (joined) {
      clFinish(r->q);
      clReleaseMemObject(joined);
    }
    return rc;
  }
  default:
    snprintf(r->err, r->err_len, "unknown op %d", (int)r->t->op);
    return EMBER_EINTERNAL;
  }
}

static int ops_run(void *state, void *queue, void *prepared,
                   const acc_block *inputs, void *const *dev_inputs,
                   size_t n_inputs, void *const *wait_events, unsigned n_wait,
                   const acc_run_ctx *ctx, acc_output *out, char *err,
                   size_t err_len) {
  run r = {.o = state, .q = (cl_command_queue)queue, .t = prepared,
           .err = err, .err_len = err_len};
  if (!r.o || !r.q || !r.t || !out || (n_wait && !wait_events) ||
      (n_inputs && (!inputs || !dev_inputs))) {
    snprintf(err, err_len, "cnn opencl: invalid arguments");
    return EMBER_EINVAL;
  }
  for (size_t i = 0; i < n_inputs; i++)
    if (!dev_inputs[i]) {
      snprintf(err, err_len, "cnn opencl: input %zu not on the device", i);
      return EMBER_EINVAL;
    }
  if (ctx && ctx->cancel && atomic_load(ctx->cancel)) {
    snprintf(err, err_len, "canceled");
    return EMBER_ECANCELED;
  }
  Ember__Cnn__Result res = EMBER__CNN__RESULT__INIT;
  int rc = start(&r, ctx, n_wait, (const cl_event *)wait_events);
  if (!rc) rc = run_op(&r, inputs, (cl_mem const *)dev_inputs, ctx, &res);
  /* nothing queued may outlive the run (the host copies it reads) */
  cl_int crc = clFinish(r.q);
  if (!rc && crc != CL_SUCCESS)
    rc = cnn_ocl_run_fail(&r, "the task's commands", crc);
  if (rc) return rc;
  res.has_updates = 1;
  res.updates = r.h.updates;
  return cnn_task_pack_result(&res, out, err, err_len);
}

static int ops_create(void *context, void *device, const char *cache_dir,
                      void **state, char *err, size_t err_len) {
  if (!state) return EMBER_EINVAL;
  cnn_ocl *o = NULL;
  int rc = cnn_ocl_create((cl_context)context, (cl_device_id)device,
                          cache_dir, &o, err, err_len);
  *state = o;
  return rc;
}

static void ops_destroy(void *state) { cnn_ocl_destroy(state); }

const acc_opencl_ops acc_cnn_opencl_ops = {
  .create = ops_create,
  .destroy = ops_destroy,
  .run = ops_run,
};
