/*
 * sw_prepared.h - what the device implementations of "sw" (sw_opencl.c)
 * take from a task the descriptor prepared (sw_accel.c); not part of the
 * accelerator's interface.
 */
#ifndef EMBER_ACC_SW_PREPARED_H
#define EMBER_ACC_SW_PREPARED_H

#include <stddef.h>
#include <stdint.h>

#include "sw.h"

/* acc_sw_prepared_scoring: the scoring of a task acc_sw_descriptor's
 * validate prepared (owned by prepared). */
const acc_sw_scoring *acc_sw_prepared_scoring(const void *prepared);

/* acc_sw_prepared_count: its number of pairs. */
uint32_t acc_sw_prepared_count(const void *prepared);

/* acc_sw_pack_hits: n hits as the packed Result message run_cpu returns
 * (out->data malloc'd, freed by the caller). Returns 0 or EMBER_ENOMEM. */
int acc_sw_pack_hits(const acc_sw_hit *hits, size_t n, acc_output *out);

#endif
