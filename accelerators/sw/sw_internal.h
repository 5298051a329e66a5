/*
 * sw_internal.h - helpers shared by the files of the "sw" accelerator; not
 * part of its interface.
 */
#ifndef EMBER_ACC_SW_INTERNAL_H
#define EMBER_ACC_SW_INTERNAL_H

#include <stddef.h>

#include "../accel.h"

/* acc_sw_errf: format a reason into err (NULL or err_len 0: nothing). */
void acc_sw_errf(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* acc_sw_residue_text: a residue byte as it should appear in a message:
 * "'Z' (0x5a)" for printable bytes, "0x01" otherwise. buf holds >= 16. */
const char *acc_sw_residue_text(unsigned char c, char *buf, size_t len);

/* acc_sw_make_probe: the descriptor's make_probe (sw_probe.c). */
int acc_sw_make_probe(unsigned size, acc_probe *probe);

#endif
