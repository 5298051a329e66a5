/*
 * cnn_task.h - a cnn task decoded and checked (cnn.proto): the network
 * parsed within cnn_net.h's limits, the range, batch and SGD settings in
 * bounds, the input blocks' count and sizes (and labels' values where the
 * host has them) against the stage's shapes, before anything runs; and
 * what the task costs (plan() and the fpga-emu roofline).
 */
#ifndef EMBER_CNN_TASK_H
#define EMBER_CNN_TASK_H

#include <stddef.h>
#include <stdint.h>

#include "accel.h"
#include "accelerators/cnn/cnn.pb-c.h"
#include "cnn_layout.h"
#include "cnn_net.h"
#include "cnn_pass.h"

typedef struct cnn_task {
  Ember__Cnn__Op op;
  cnn_net *net;                 /* owned */
  uint8_t *text;                /* the .cfg text, owned (the stage pool's
                                   key, with the range and batch) */
  size_t text_len;
  uint32_t first, end, batch;  /* an ICP slice: end == first + 1, its
                                   channels in layout (icp, c0, c1) */
  uint32_t slots, slot;         /* kept FORWARDs; FORWARD/BACKWARD's one */
  uint32_t accumulated;         /* UPDATE: BACKWARDs in the gradients */
  uint64_t seed;                /* INIT; FORWARD's dropout key */
  int inference;                /* FORWARD: an evaluation pass */
  int has_step;                 /* FORWARD: step given (else the state's
                                   update count) */
  uint64_t step;
  uint32_t sample0;             /* FORWARD: sample_offset */
  int dropout;                  /* the stage has a dropout layer */
  int batch_norm;               /* ... a batch-normalized convolution */
  double learning_rate, momentum, decay; /* UPDATE */
  uint32_t n_pieces;            /* BACKWARD: output error pieces (cnn.proto
                                   error_channels), 0: one block */
  uint32_t pieces[CNN_MAX_ERROR_PIECES];
  uint64_t piece_unit;          /* floats per error_channels unit */
  uint32_t n_addends;           /* BACKWARD: output error addends (cnn.proto
                                   error_addends), 0: one block */
  uint64_t key;                 /* cnn_stage_key() */
  cnn_layout layout;
  acc_cost cost;
  uint64_t app;                 /* set by run_cpu: the app it runs for
                                   (acc_run_ctx.app), whose stage the
                                   pool's is while lent and after */
} cnn_task;

/* cnn_task_prepare - unpack params and check them and the inputs. Returns
 * 0 with a new task in *out, or EMBER_EPARAM (EMBER_EFORMAT for a bad
 * label byte, EMBER_ENOMEM) with the reason in err. inputs may have data
 * NULL (the block lives on a device): only their sizes are checked then. */
int cnn_task_prepare(const uint8_t *params, size_t params_len,
                     const acc_block *inputs, size_t n_inputs,
                     cnn_task **out, char *err, size_t err_len);

/* cnn_task_outputs - how many out blocks the task may make (at most):
 * FORWARD 1, BACKWARD 1 (0 for a stage starting at layer 0; an ICP slice
 * 1, its last slice 2; an OCP slice of layer 0: 0), GET_PARAMS 1
 * (exactly), others 0; and the size of
 * out block i (0 beyond them). */
size_t cnn_task_max_outputs(const cnn_task *t);
uint64_t cnn_task_output_size(const cnn_task *t, size_t i);

/* Free a task; NULL is a no-op. */
void cnn_task_free(cnn_task *t);

/* cnn_task_run - run a prepared task on its state block (state, of
 * t->layout.total bytes) with its inputs and out blocks (the sizes plan()
 * declared); fills *res. Returns 0, EMBER_ESTATE (the block was not
 * stamped for this stage by INIT or SET_PARAMS, or BACKWARD without a
 * FORWARD), EMBER_ECANCELED, EMBER_ENOMEM or another back end failure,
 * with the reason in err. cnn_exec.c. */
int cnn_task_run(const cnn_task *t, uint8_t *state, const acc_block *inputs,
                 size_t n_inputs, acc_mut_block *outputs, size_t n_outputs,
                 const atomic_int *cancel, Ember__Cnn__Result *res,
                 char *err, size_t err_len);

/* FORWARD and BACKWARD of an ICP slice (t->layout.icp) on the CPU, for
 * cnn_task_run, after the stamp is checked: the same contract
 * (cnn_exec_slice.c). */
int cnn_icp_forward(const cnn_task *t, uint8_t *state,
                    const acc_block *inputs, acc_mut_block *outputs,
                    size_t n_outputs, char *err, size_t err_len);
int cnn_icp_backward(const cnn_task *t, uint8_t *state,
                     const acc_block *inputs, acc_mut_block *outputs,
                     size_t n_outputs, char *err, size_t err_len);

/* FORWARD and BACKWARD of an OCP slice (t->layout.ocp) on the CPU
 * (cnn_exec_slice.c). */
int cnn_ocp_forward(const cnn_task *t, uint8_t *state,
                    const acc_block *inputs, acc_mut_block *outputs,
                    size_t n_outputs, char *err, size_t err_len);
int cnn_ocp_backward(const cnn_task *t, uint8_t *state,
                     const acc_block *inputs, acc_mut_block *outputs,
                     size_t n_outputs, char *err, size_t err_len);

/* Each layer of the stage with parameters (not an ICP slice's: see
 * cnn_layout's weights and biases): its index i and offset off
 * (floats) into the parameter-shaped regions of the state block. */
#define CNN_FOR_PARAM_LAYERS(t, layers, i, off)                               \
  for (uint64_t off = 0, i##_ = 1; i##_; i##_ = 0)                            \
    for (uint32_t i = (t)->first; i < (t)->end;                               \
         off += cnn_layer_params(&(layers)[i]), i++)                          \
      if (cnn_layer_params(&(layers)[i]))

/* The state block's header and INIT, alike on every back end
 * (cnn_state.c). cnn_task_stamp: h (a host copy of the header) zeroed and
 * stamped for t's stage. cnn_task_check_stamp: 0, or EMBER_ESTATE with the
 * reason in err when h holds no stage or another one. cnn_task_init_params:
 * INIT's parameters (seeded He-uniform weights, zero biases) into params,
 * t->layout.params floats. */
void cnn_task_stamp(const cnn_task *t, cnn_state_header *h);
int cnn_task_check_stamp(const cnn_task *t, const cnn_state_header *h,
                         char *err, size_t err_len);
void cnn_task_init_params(const cnn_task *t, float *params);

/* cnn_task_forward_pass - a FORWARD's pass (cnn_pass.h): inference or
 * training, its dropout key from the task (the step, else updates, the
 * state's update count). cnn_task_slot_pass - the pass a BACKWARD
 * re-runs: CNN_MODE_RECOMPUTE with the key its slot's FORWARD kept (sp;
 * NULL for a stage without dropout, whose key does not matter). */
cnn_pass cnn_task_forward_pass(const cnn_task *t, uint64_t updates);
cnn_pass cnn_task_slot_pass(const cnn_slot_pass *sp);

/* cnn_task_score: the last stage's FORWARD result into res: its loss, and
 * how many of the batch's samples the largest of their classes
 * probabilities (probs, batch x classes) labels rightly. */
void cnn_task_score(Ember__Cnn__Result *res, double loss, const float *probs,
                    const uint8_t *labels, uint32_t batch, uint32_t classes);

/* cnn_task_pack_result: res packed into out->data (malloc'd, the caller
 * frees it). Returns 0 or EMBER_ENOMEM (in err). */
int cnn_task_pack_result(const Ember__Cnn__Result *res, acc_output *out,
                         char *err, size_t err_len);

#ifdef EMBER_HAVE_OPENCL
/* The descriptor's OpenCL implementation: every op on the state block in
 * its device buffer (cnn_exec_opencl.c). */
extern const acc_opencl_ops acc_cnn_opencl_ops;
#endif

#endif
