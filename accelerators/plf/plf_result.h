/*
 * plf_result.h - a plf task's answers (plf_exec.h's plf_answers) packed
 * into its Result message (plf.proto): one definition for every platform
 * that runs plf (run_cpu, the OpenCL implementation), so that their
 * outputs have the same shape.
 */
#ifndef EMBER_PLF_RESULT_H
#define EMBER_PLF_RESULT_H

#include "accel.h"
#include "plf_exec.h"
#include "plf_task.h"

/* plf_pack_result - the Result of t from a (arrays of t->n_lnl,
 * t->n_site_lnl and t->n_values values) into out->data (malloc'd, freed by
 * the caller). Returns 0 or EMBER_ENOMEM. */
int plf_pack_result(const plf_answers *a, const plf_task *t,
                    acc_output *out);

#endif
