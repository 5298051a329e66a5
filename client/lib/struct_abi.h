/* struct_abi.h - the size fields of ember.h's public structs (struct_abi.c):
 * what a caller's struct of an older release holds, in and out. */
#ifndef EMBER_STRUCT_ABI_H
#define EMBER_STRUCT_ABI_H

#include <stddef.h>

#include "ember/ember.h"

/* The public structs' sizes in the first release (ember.h "ABI"): what a
 * size field of 0 stands for. A release that adds fields leaves these at
 * the last field of 0.1. */
#define EMBER__V0_SIZE(type, last) \
  (offsetof(type, last) + sizeof(((type *)0)->last))
#define EMBER__OPTIONS_V0 EMBER__V0_SIZE(ember_options, reconnect_window_ms)
#define EMBER__SUBMIT_OPTIONS_V0 EMBER__V0_SIZE(ember_submit_options, n_outputs)
#define EMBER__CLUSTER_OPTIONS_V0 EMBER__V0_SIZE(ember_cluster_options, client)
#define EMBER__SW_PARAMS_V0 EMBER__V0_SIZE(ember_sw_params, pairs_per_task)
#define EMBER__SW_REPORT_V0 EMBER__V0_SIZE(ember_sw_report, pairs_failed)
#define EMBER__CLIENT_STATS_V0 EMBER__V0_SIZE(ember_client_stats, tasks_resubmitted)

/* ember__struct_in - a caller's struct (src, whose first member is its
 * size) as this library's (dst, dst_size bytes): the bytes the caller's
 * size covers, zeros for fields it does not know, dst's size set to
 * dst_size. src NULL: all zeros. Returns EMBER_EINVAL (with the error set,
 * naming what) for a size too small to be the struct. */
int ember__struct_in(void *dst, size_t dst_size, const void *src,
                     size_t v0_size, const char *what);

/* ember__struct_out - fill a caller's struct (dst) from the library's
 * (src, src_size bytes): only the bytes dst's size covers; dst's size then
 * says how many were written. */
void ember__struct_out(void *dst, const void *src, size_t src_size,
                       size_t v0_size);

#endif
