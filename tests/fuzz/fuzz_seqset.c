/*
 * fuzz_seqset.c - libFuzzer target for the sw accelerator's input path:
 * seqset views and the descriptor's validate (params and both blocks), and
 * run_cpu on what validate accepts when it is small.
 *
 * Input: uint16 LE params length P, P bytes of Params, uint32 LE split
 * point, then the two blocks (queries before the split, references after).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sw/sw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_CELLS 2000000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 6) return 0;
  size_t plen = (size_t)data[0] | (size_t)data[1] << 8;
  if (plen > size - 6) plen = size - 6;
  const uint8_t *params = data + 2;
  const uint8_t *p = params + plen;
  uint32_t split;
  memcpy(&split, p, 4);
  p += 4;
  size_t rest = size - 6 - plen;
  split = rest ? split % (uint32_t)(rest + 1) : 0;

  /* copies, so that ASan sees reads past each block */
  uint8_t *b0 = malloc(split ? split : 1);
  uint8_t *b1 = malloc(rest - split ? rest - split : 1);
  memcpy(b0, p, split);
  memcpy(b1, p + split, rest - split);
  acc_block in[2] = {{b0, split}, {b1, rest - split}};

  char err[512] = "";
  acc_seqset v;
  for (int i = 0; i < 2; i++)
    if (acc_seqset_view(&in[i], &v, err, sizeof err) == 0) {
      for (uint32_t k = 0; k < v.count; k++) {
        const uint8_t *res;
        size_t len;
        acc_seqset_get(&v, k, &res, &len);
        if (len && (res < in[i].data || res + len > in[i].data + in[i].size))
          __builtin_trap();
      }
    } else if (!err[0]) {
      __builtin_trap();
    }

  const acc_descriptor *d = &acc_sw_descriptor;
  void *prep = NULL;
  int rc = d->validate(plen ? params : NULL, plen, in, 2, &prep, err,
                       sizeof err);
  if (rc == 0) {
    if (d->work(prep) <= MAX_CELLS) {
      acc_output out = {NULL, 0};
      rc = d->run_cpu(prep, in, 2, NULL, &out, err, sizeof err);
      if (rc != 0) __builtin_trap();
      Ember__Sw__Result *res = ember__sw__result__unpack(NULL, out.size,
                                                         out.data);
      acc_seqset q;
      if (!res || acc_seqset_view(&in[0], &q, NULL, 0) != 0 ||
          res->n_score != q.count)
        __builtin_trap();
      for (size_t k = 0; k < res->n_score; k++)
        if (res->score[k] < 0 ||
            (res->score[k] == 0) != (res->query_end[k] == -1) ||
            res->query_start[k] > res->query_end[k] ||
            res->ref_start[k] > res->ref_end[k])
          __builtin_trap();
      ember__sw__result__free_unpacked(res, NULL);
      free(out.data);
    }
    d->release(prep);
  } else if (!err[0] || prep) {
    __builtin_trap();
  }
  free(b0);
  free(b1);
  return 0;
}
