/*
 * sw_internal.h - helpers shared by the files of the "sw" accelerator; not
 * part of its interface.
 */
#ifndef EMBER_ACC_SW_INTERNAL_H
#define EMBER_ACC_SW_INTERNAL_H

#include <stddef.h>

#include "../accel.h"
#include "errbuf.h" /* errbuf_printf: every reason goes into err through it */

/* acc_sw_residue_text: a residue byte as it should appear in a message:
 * "'Z' (0x5a)" for printable bytes, "0x01" otherwise. buf holds >= 16. */
const char *acc_sw_residue_text(unsigned char c, char *buf, size_t len);

/* acc_sw_make_probe: the descriptor's make_probe (sw_probe.c). */
int acc_sw_make_probe(unsigned size, acc_probe *probe);

#endif
