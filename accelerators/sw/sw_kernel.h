/*
 * sw_kernel.h - the interface between the batch driver (sw_batch.c) and the
 * kernel variants (sw_scalar.c, sw_sse41.c, sw_avx2.c, sw_avx512.c);
 * internal to the "sw" accelerator.
 *
 * A kernel runs one local-alignment pass: the best score and the cell
 * where it is first reached, scanning reference columns in order and, in
 * the column, query rows in order (the end rule of sw.h). The batch driver
 * calls it forward for the end and again on the reversed prefixes for the
 * start.
 */
#ifndef EMBER_ACC_SW_KERNEL_H
#define EMBER_ACC_SW_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sw.h"

/* A pass reads residue k of a sequence at seq[k * dir]: dir is 1 for the
 * forward pass and -1 for the reverse one (seq then points at the last
 * residue of the prefix). */
typedef struct sw_seq {
  const uint8_t *res;   /* raw residue bytes, encoded through s->encode */
  int32_t len;          /* >= 1 */
  int dir;              /* 1 or -1 */
} sw_seq;

/* The best cell of a pass: score and its 0-based cell, -1/-1 if score 0. */
typedef struct sw_cell {
  int32_t score, i, j;
} sw_cell;

/* sw_pass_fn: align q against r with s, using mem
 * (acc_sw_kernel_mem_bytes() bytes for q->len, 64-byte aligned). The pass
 * stops at the first column where the best score reaches stop_at
 * (INT32_MAX: never) and reports the first cell of that column holding it;
 * if stop_at is never reached a SIMD pass may report score 0 instead of
 * the best. Returns false if the kernel's lanes may have saturated (the
 * answer is then meaningless and the pair must be redone with the 32-bit
 * kernel). Residues must encode. */
typedef bool (*sw_pass_fn)(void *mem, const acc_sw_scoring *s,
                           const sw_seq *q, const sw_seq *r, int32_t stop_at,
                           sw_cell *out);

typedef struct sw_kernel {
  acc_sw_isa isa;
  const char *name;
  int lanes;              /* 16-bit lanes per vector; 0: scalar 32-bit */
  size_t vec_bytes;
  bool (*cpu_ok)(void);   /* NULL: always usable */
  sw_pass_fn pass;
} sw_kernel;

/* acc_sw_kernel_get: the variant for isa if it is built and this CPU runs
 * it, else NULL. */
const sw_kernel *acc_sw_kernel_get(acc_sw_isa isa);

/* acc_sw_kernel_mem_bytes: workspace a pass needs for queries up to
 * qlen. */
size_t acc_sw_kernel_mem_bytes(const sw_kernel *k, int32_t qlen, int alphabet);

/* The variants (those not built are not declared). */
bool acc_sw_pass_scalar(void *mem, const acc_sw_scoring *s, const sw_seq *q,
                        const sw_seq *r, int32_t stop_at, sw_cell *out);
#ifdef EMBER_SW_HAVE_SSE41
bool acc_sw_pass_sse41(void *mem, const acc_sw_scoring *s, const sw_seq *q,
                       const sw_seq *r, int32_t stop_at, sw_cell *out);
#endif
#ifdef EMBER_SW_HAVE_AVX2
bool acc_sw_pass_avx2(void *mem, const acc_sw_scoring *s, const sw_seq *q,
                      const sw_seq *r, int32_t stop_at, sw_cell *out);
#endif
#ifdef EMBER_SW_HAVE_AVX512
bool acc_sw_pass_avx512(void *mem, const acc_sw_scoring *s, const sw_seq *q,
                        const sw_seq *r, int32_t stop_at, sw_cell *out);
#endif

#endif
