/*
 * sw_probe.c - the "sw" accelerator's calibration tasks (acc_descriptor's
 * make_probe): synthetic DNA batches of 150-base reads, each cut from a
 * 300-base reference with ~3% substitutions (short-read mapping, the
 * common sw workload), default DNA scoring.
 *
 *   ACC_PROBE_SMALL  one pair (45,000 cells): mostly a launch's fixed cost
 *   ACC_PROBE_LARGE  64 pairs (2.9 M cells, ~1.5 ms on one CPU core):
 *                    mostly the cost per cell
 *
 * The same bytes every time (a fixed seed), so calibrations compare.
 */
#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "sw.h"
#include "sw_internal.h"

#define PROBE_QLEN 150
#define PROBE_RLEN 300
#define PROBE_LARGE_PAIRS 64

static uint64_t next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* A seqset block of count sequences of length len each, from text. */
static int make_block(const char *text, size_t stride, size_t len,
                      size_t count, acc_block *out) {
  const char *res[PROBE_LARGE_PAIRS];
  size_t lens[PROBE_LARGE_PAIRS];
  for (size_t i = 0; i < count; i++) {
    res[i] = text + i * stride;
    lens[i] = len;
  }
  size_t size = acc_seqset_bytes(lens, count);
  uint8_t *data = malloc(size);
  if (!data) return EMBER_ENOMEM;
  acc_seqset_write(data, size, res, lens, count);
  out->data = data;
  out->size = size;
  return 0;
}

int acc_sw_make_probe(unsigned size, acc_probe *probe) {
  if (!probe || size >= ACC_PROBE_SIZES) return EMBER_EINVAL;
  memset(probe, 0, sizeof *probe);
  size_t count = size == ACC_PROBE_SMALL ? 1 : PROBE_LARGE_PAIRS;
  /* references at [i * 2 * RLEN], reads right after each */
  size_t stride = 2 * PROBE_RLEN;
  char *text = malloc(count * stride);
  Ember__Sw__Params p = EMBER__SW__PARAMS__INIT; /* DNA 3/-3, gaps 6/1 */
  probe->params_len = ember__sw__params__get_packed_size(&p);
  probe->params = malloc(probe->params_len + 1);
  if (!text || !probe->params) goto nomem;
  ember__sw__params__pack(&p, probe->params);
  uint64_t seed = 0x5eed;
  for (size_t i = 0; i < count; i++) {
    char *ref = text + i * stride, *read = ref + PROBE_RLEN;
    for (size_t k = 0; k < PROBE_RLEN; k++) ref[k] = "ACGT"[next(&seed) % 4];
    memcpy(read, ref + next(&seed) % (PROBE_RLEN - PROBE_QLEN + 1),
           PROBE_QLEN);
    for (size_t k = 0; k < PROBE_QLEN; k++)
      if (next(&seed) % 100 < 3) read[k] = "ACGT"[next(&seed) % 4];
  }
  if (make_block(text + PROBE_RLEN, stride, PROBE_QLEN, count,
                 &probe->inputs[0]) ||
      make_block(text, stride, PROBE_RLEN, count, &probe->inputs[1]))
    goto nomem;
  probe->n_inputs = 2;
  free(text);
  return 0;

nomem:
  free(text);
  free(probe->params);
  free((void *)probe->inputs[0].data);
  memset(probe, 0, sizeof *probe);
  return EMBER_ENOMEM;
}
