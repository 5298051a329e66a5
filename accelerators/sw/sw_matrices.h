/* sw_matrices.h - the built-in matrix texts (sw_matrices.c); internal. */
#ifndef EMBER_ACC_SW_MATRICES_H
#define EMBER_ACC_SW_MATRICES_H

#include <stddef.h>

typedef struct acc_sw_matrix_text {
  const char *name;      /* upper case */
  const char *text;      /* NCBI format */
  size_t len;
} acc_sw_matrix_text;

extern const acc_sw_matrix_text acc_sw_matrix_texts[];
extern const size_t acc_sw_matrix_text_count;

#endif
