/* cnn_test_task.h - the cnn descriptor driven as a platform drives it, for
 * the descriptor's tests (test_cnn_task, test_cnn_task_layers): validate
 * and plan of packed Params, then run_cpu on a host state block, failing
 * the test (cmocka) where the step must pass. */
#ifndef CNN_TEST_TASK_H
#define CNN_TEST_TASK_H

#include <stddef.h>
#include <stdint.h>

#include "accel.h"
#include "accelerators/cnn/cnn.pb-c.h"

/* cnn_test_prepare - validate the packed Params p (len bytes) with the
 * inputs in, then plan it for a state block of state_size bytes and n_out
 * out blocks (a refused plan fails the test); the out blocks of the plan's
 * sizes are made in outs (zeroed, malloc'd: the caller frees them).
 * Returns 0 with the prepared task in *prep, or validate's code with the
 * reason in err. */
int cnn_test_prepare(const uint8_t *p, size_t len, const acc_block *in,
                     size_t n_in, size_t state_size, acc_mut_block *outs,
                     size_t n_out, void **prep, char *err, size_t err_len);

/* cnn_test_run - run_cpu of prep on state with the out blocks outs; the
 * Result into *res when res is not NULL; prep is released. Returns
 * run_cpu's code, with the reason in err. */
int cnn_test_run(void *prep, const acc_block *in, size_t n_in,
                 acc_mut_block *state, acc_mut_block *outs, size_t n_out,
                 Ember__Cnn__Result *res, char *err, size_t err_len);

#endif
