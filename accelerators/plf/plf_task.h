/*
 * plf_task.h - a plf task decoded and checked (plf.proto): every index,
 * count and input slice of every operation against the instance's shape,
 * before anything runs, so that running it (plf_exec.c) cannot go out of
 * bounds whatever the client sent. Also what the task costs (for plan()
 * and the fpga-emu roofline) and how big its result is.
 */
#ifndef EMBER_PLF_TASK_H
#define EMBER_PLF_TASK_H

#include <stddef.h>
#include <stdint.h>

#include "accel.h"
#include "accelerators/plf/plf.pb-c.h"
#include "plf_layout.h"

/* Operations one task may carry, all kinds together (PartialsOp and
 * LnlTerm entries count one each). */
#define PLF_MAX_OPS (1u << 22)

typedef struct plf_task {
  Ember__Plf__Params *params;   /* unpacked; owned */
  plf_shape shape;
  plf_layout layout;
  acc_cost cost;
  size_t n_lnl;                 /* values in Result.lnl */
  size_t n_site_lnl;            /* values in Result.site_lnl */
  size_t n_values;              /* values in Result.values (Get ops) */
  size_t n_derivatives;         /* pairs in Result.*_derivative */
  size_t n_site_derivatives;    /* values in Result.site_*_derivative */
  unsigned threads;             /* CPU threads over patterns, >= 1 */
} plf_task;

/* plf_term_derivatives - whether an Lnl term asks for an edge's
 * derivatives (checked: then it is its Lnl's one term, an edge). */
static inline int plf_term_derivatives(const Ember__Plf__LnlTerm *t) {
  return t->first_derivative >= 0 || t->second_derivative >= 0;
}

/* plf_task_prepare - unpack params and check them and the input slices
 * they name. Returns 0 with a new task in *out, or EMBER_EPARAM (or
 * EMBER_ENOMEM) with the reason in err. inputs may have data NULL (the
 * block lives on a device): only their sizes are checked. */
int plf_task_prepare(const uint8_t *params, size_t params_len,
                     const acc_block *inputs, size_t n_inputs,
                     plf_task **out, char *err, size_t err_len);

/* Free a task; NULL is a no-op. */
void plf_task_free(plf_task *t);

#endif
