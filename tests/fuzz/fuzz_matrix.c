/* fuzz_matrix.c - libFuzzer target for the NCBI matrix reader
 * (acc_sw_matrix_parse) and scoring from what it accepts. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sw/sw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  acc_sw_matrix m;
  char err[256] = "";
  if (acc_sw_matrix_parse((const char *)data, size, "fuzz", &m, err,
                          sizeof err) != 0) {
    if (strncmp(err, "fuzz:", 5) != 0) __builtin_trap();  /* file:line */
    return 0;
  }
  if (m.size < 1 || m.size > ACC_SW_MAX_ALPHABET ||
      strlen(m.alphabet) != (size_t)m.size)
    __builtin_trap();
  acc_sw_scoring s;
  if (acc_sw_scoring_matrix(&m, 11, 1, &s, err, sizeof err) != 0)
    __builtin_trap();
  return 0;
}
