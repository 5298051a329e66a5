/*
 * train_internal.h - what ember_train's files share: the training data
 * (train_data.c), the stages and the pipeline that drives them
 * (train_pipeline.c), the weights file (train_weights.c); train.c ties
 * them together behind ember.h's ember_train.
 */
#ifndef EMBER_TRAIN_INTERNAL_H
#define EMBER_TRAIN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "cnn_idx.h"
#include "cnn_layout.h"
#include "cnn_net.h"
#include "ember/ember.h"

/* ---- data (train_data.c) ------------------------------------------------ */

/* Labelled samples of the network's input shape: an idx data set's bytes
 * (scaled by 1/255 when gathered) or the caller's floats. */
typedef struct train_samples {
  cnn_data *idx;             /* owned, or NULL */
  const float *floats;       /* the caller's, or NULL */
  const uint8_t *labels;
  size_t n;
  size_t elems;              /* floats per sample */
} train_samples;

/* ember__train_samples_load - the training and test samples of p for net:
 * p->data_dir's idx files, or p's arrays; limits applied; shapes and
 * labels checked against the network. 0, or an error with
 * ember_last_error() set. */
int ember__train_samples_load(const ember_train_params *p, const cnn_net *net,
                       train_samples *train, train_samples *test);
void ember__train_samples_free(train_samples *s);

/* ember__train_samples_gather - samples order[0 .. n-1] (indices) as
 * floats into x (n x elems) and their labels into y. */
void ember__train_samples_gather(const train_samples *s, const size_t *order,
                          size_t n, float *x, uint8_t *y);

/* ember__train_shuffle - order[0 .. n-1] = a permutation of 0 .. n-1 drawn from
 * (seed, epoch). */
void ember__train_shuffle(size_t *order, size_t n, uint64_t seed,
                          unsigned epoch);

/* ---- stages and the pipeline (train_pipeline.c) ------------------------- */

/* A unit: what one state block holds, run as one task per op. A plan
 * stage is one or more units in a row on its platform: a slice it begins
 * inside (FPDeep's input-channel partition, ICP, or for a first layer
 * with few input channels its output-channel partition, OCP), its whole
 * layers, a slice it ends inside. The pipeline schedules units, one task
 * at a time per plan stage. */
typedef struct train_stage {
  uint32_t first, end;       /* the network's layers [first, end); a slice:
                                its layer, end = first + 1 */
  size_t plan_stage;         /* the plan stage it belongs to */
  int slice;                 /* a slice of layer first ... */
  uint32_t c0, c1;           /* ... over input channels [c0, c1) (ICP) */
  int ocp;                   /* ... or output channels (OCP) */
  int slice_last;            /* the slice holding the last channel */
  size_t base, last;         /* a slice: its layer's first and last slice
                                units */
  ember_client *client;
  size_t client_index;
  char platform[64];         /* the platform it is pinned to */
  double speed;              /* its operations per second (plan) */
  int in_order;              /* its platform runs one task at a time, in
                                the order they came */
  ember_block *state;        /* the stage's state block */
  cnn_layout layout;
  uint64_t exec_ns;          /* its tasks' time on the platform, this pass */
  size_t tasks;
} train_stage;

typedef struct train_run {
  const char *text;          /* the .cfg text every task carries */
  size_t text_len;
  const cnn_net *net;
  train_stage *stages;       /* the units, in the network's order */
  size_t n_stages;           /* units */
  size_t n_plan_stages;      /* plan stages (units' plan_stage < it) */
  uint32_t micro;            /* samples per task */
  uint32_t slots;            /* FORWARDs each stage keeps */
  uint32_t per_batch;        /* micro-batches per mini-batch */
  double lr, momentum, decay; /* lr: the base rate of the schedule */
  const cnn_train *schedule; /* the .cfg's [net]: its learning-rate policy */
  int sync;
  uint64_t seed;             /* INIT's weights and dropout's masks */
  uint64_t updates;          /* mini-batches trained before this pass, from
                                the start of training (a loaded weights
                                file's epochs counted): the first one's
                                number, which keys dropout's masks, and
                                the rate's schedule */
} train_run;

/* What one pass over samples gave. */
typedef struct train_pass {
  double loss_sum;           /* of the micro-batches' mean losses */
  size_t micro_batches;
  size_t correct;
  size_t samples;
  uint64_t wall_ns;
} train_pass;

typedef void (*train_pass_progress)(size_t done, size_t total, void *user);

/* ember__train_stages_init - INIT every stage (seeded) or, with params (the
 * network's, in order), SET_PARAMS. 0 or an error (ember_last_error()). */
int ember__train_stages_init(train_run *r, const float *params);

/* ember__train_pass_run - one epoch's training (order: sample indices, a whole
 * number of mini-batches of them) through the pipeline, or with
 * order == NULL and train == 0 an evaluation of every sample of s
 * (forward only). 0 or an error (ember_last_error()). */
int ember__train_pass_run(train_run *r, const train_samples *s,
                          const size_t *order,
                   size_t n, int train, train_pass *out,
                   train_pass_progress progress, void *user);

/* ember__train_stages_params - GET_PARAMS of every stage: the network's
 * parameters (cnn_net_params floats) into params. */
int ember__train_stages_params(train_run *r, float *params);

/* ---- weights files (train_weights.c) ------------------------------------ */

/* ember__train_weights_save - the network's parameters and epochs trained, to
 * path (written whole to a temporary name, then renamed). */
int ember__train_weights_save(const char *path, const cnn_net *net,
                       const float *params, unsigned epochs);

/* ember__train_weights_load - read path's parameters for net into params
 * (cnn_net_params floats) and *epochs. EMBER_EFORMAT for a broken file,
 * EMBER_EPARAM for another network's, EMBER_EIO. */
int ember__train_weights_load(const char *path, const cnn_net *net,
                              float *params,
                       unsigned *epochs);

#endif
