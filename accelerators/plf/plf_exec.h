/*
 * plf_exec.h - running a checked plf task (plf_task.h) on its state block
 * in host memory with the CPU kernels (plf_kernel.h): the cpu platform's
 * and the fpga-emu boards' implementation.
 */
#ifndef EMBER_PLF_EXEC_H
#define EMBER_PLF_EXEC_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "accel.h"
#include "plf_kernel.h"
#include "plf_task.h"

/* Where a task's answers go: arrays of the sizes the task declared
 * (t->n_lnl, t->n_site_lnl, t->n_values, t->n_derivatives,
 * t->n_site_derivatives), and how many log-likelihoods came out infinite
 * or NaN. */
typedef struct plf_answers {
  double *lnl;
  double *site_lnl;
  double *values;
  double *first, *second;             /* t->n_derivatives each */
  double *site_first, *site_second;   /* t->n_site_derivatives each */
  unsigned non_finite;
} plf_answers;

/* plf_exec_run - run t's operations in order on state (t->layout.total
 * bytes; the app's, updated in place) with kernel variant k (NULL: the
 * default), reading input slices from inputs. Checks cancel (may be NULL)
 * between operations. Returns 0, EMBER_ECANCELED, or EMBER_ENOMEM. */
int plf_exec_run(const plf_task *t, uint8_t *state, const acc_block *inputs,
                 const plf_kernels *k, const atomic_int *cancel,
                 plf_answers *out, char *err, size_t err_len);

#endif
