/*
 * sw_accel.c - the "sw" accelerator's descriptor: decode and check
 * parameters and the two sequence-set blocks, run the batch on the CPU,
 * pack the Result message.
 */
#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "sw.h"
#include "sw_internal.h"
#include "sw_prepared.h"
#ifdef EMBER_HAVE_OPENCL
#include "sw_opencl.h"
#endif

#define SW_VERSION 1

static const char *const block_names[2] = {"queries", "references"};
static const char *const seq_names[2] = {"query", "reference"};

typedef struct sw_prepared {
  acc_sw_scoring scoring;
  uint32_t count;
  uint64_t cells;
  uint64_t input_bytes;   /* both sequence sets, as the kernel reads them */
} sw_prepared;

static int view_inputs(const acc_block *inputs, size_t n_inputs,
                       acc_seqset sets[2], char *err, size_t err_len) {
  if (n_inputs != 2 || !inputs) {
    return errbuf_printf(err, err_len, EMBER_EFORMAT,
                         "expected 2 input blocks (queries, "
                         "references), got %zu",
                         inputs ? n_inputs : 0);
  }
  for (int b = 0; b < 2; b++) {
    char why[160];
    if (acc_seqset_view(&inputs[b], &sets[b], why, sizeof why) != 0) {
      return errbuf_printf(err, err_len, EMBER_EFORMAT, "block %d (%s): %s", b,
                           block_names[b], why);
    }
  }
  return 0;
}

/* check_sequences: lengths and residues of every sequence; sums the cells. */
static int check_sequences(const acc_sw_scoring *s, const acc_seqset sets[2],
                           uint64_t *cells, char *err, size_t err_len) {
  static const size_t limits[2] = {ACC_SW_MAX_QUERY_LEN, ACC_SW_MAX_REF_LEN};
  uint64_t total = 0;
  for (uint32_t i = 0; i < sets[0].count; i++) {
    size_t len[2];
    for (int b = 0; b < 2; b++) {
      const uint8_t *res;
      acc_seqset_get(&sets[b], i, &res, &len[b]);
      if (len[b] == 0) {
        return errbuf_printf(err, err_len, EMBER_EFORMAT, "%s %u is empty",
                             seq_names[b], i);
      }
      if (len[b] > limits[b]) {
        return errbuf_printf(err, err_len, EMBER_EFORMAT,
                             "%s %u has %zu residues, the limit is %zu",
                             seq_names[b], i, len[b], limits[b]);
      }
      for (size_t k = 0; k < len[b]; k++)
        if (s->encode[res[k]] < 0) {
          char txt[16];
          return errbuf_printf(err, err_len, EMBER_EFORMAT,
                               "unknown residue %s in %s %u at "
                               "position %zu",
                               acc_sw_residue_text(res[k], txt, sizeof txt),
                               seq_names[b], i, k);
        }
    }
    uint64_t c = (uint64_t)len[0] * len[1];
    total = (total > UINT64_MAX - c) ? UINT64_MAX : total + c;
  }
  *cells = total;
  return 0;
}

static int sw_validate(const uint8_t *params, size_t params_len,
                       const acc_block *inputs, size_t n_inputs,
                       void **prepared, char *err, size_t err_len) {
  if (!prepared || (!params && params_len)) {
    return errbuf_printf(err, err_len, EMBER_EINVAL, "invalid arguments");
  }
  *prepared = NULL;
  Ember__Sw__Params *p = NULL;
  if (params_len) {
    p = ember__sw__params__unpack(NULL, params_len, params);
    if (!p) {
      return errbuf_printf(err, err_len, EMBER_EPARAM,
                           "params: not a valid ember.sw.Params "
                           "message (%zu bytes)",
                           params_len);
    }
  }
  sw_prepared *sp = malloc(sizeof *sp);
  if (!sp) {
    ember__sw__params__free_unpacked(p, NULL);
    return errbuf_printf(err, err_len, EMBER_ENOMEM, "out of memory");
  }
  char why[200];
  int rc = acc_sw_scoring_from_params(p, &sp->scoring, why, sizeof why);
  ember__sw__params__free_unpacked(p, NULL);
  if (rc) {
    errbuf_printf(err, err_len, 0, "params: %s", why);
    free(sp);
    return EMBER_EPARAM;
  }

  acc_seqset sets[2];
  rc = view_inputs(inputs, n_inputs, sets, err, err_len);
  if (!rc && sets[0].count != sets[1].count) {
    errbuf_printf(err, err_len, 0,
                  "mismatched batch sizes: %u queries, %u "
                  "references",
                  sets[0].count, sets[1].count);
    rc = EMBER_EFORMAT;
  }
  if (!rc && sets[0].count == 0) {
    errbuf_printf(err, err_len, 0, "empty batch: no sequence pairs");
    rc = EMBER_EFORMAT;
  }
  if (!rc) rc = check_sequences(&sp->scoring, sets, &sp->cells, err, err_len);
  if (rc) {
    free(sp);
    return rc;
  }
  sp->count = sets[0].count;
  sp->input_bytes = inputs[0].size + inputs[1].size;
  *prepared = sp;
  return 0;
}

static int pack_result(const acc_sw_hit *hits, size_t n, acc_output *out) {
  int32_t *cols = malloc(5 * n * sizeof *cols);
  if (!cols) return EMBER_ENOMEM;
  Ember__Sw__Result res = EMBER__SW__RESULT__INIT;
  res.n_score = res.n_query_start = res.n_query_end = n;
  res.n_ref_start = res.n_ref_end = n;
  res.score = cols;
  res.query_start = cols + n;
  res.query_end = cols + 2 * n;
  res.ref_start = cols + 3 * n;
  res.ref_end = cols + 4 * n;
  for (size_t i = 0; i < n; i++) {
    res.score[i] = hits[i].score;
    res.query_start[i] = hits[i].query_start;
    res.query_end[i] = hits[i].query_end;
    res.ref_start[i] = hits[i].ref_start;
    res.ref_end[i] = hits[i].ref_end;
  }
  size_t size = ember__sw__result__get_packed_size(&res);
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) {
    free(cols);
    return EMBER_ENOMEM;
  }
  ember__sw__result__pack(&res, buf);
  free(cols);
  out->data = buf;
  out->size = size;
  return 0;
}

static int sw_run_cpu(void *prepared, const acc_block *inputs,
                      size_t n_inputs, const acc_run_ctx *ctx,
                      acc_output *out, char *err, size_t err_len) {
  sw_prepared *sp = prepared;
  if (!sp || !out) {
    return errbuf_printf(err, err_len, EMBER_EINVAL, "invalid arguments");
  }
  acc_seqset sets[2];
  int rc = view_inputs(inputs, n_inputs, sets, err, err_len);
  if (rc) return rc;
  if (sets[0].count != sp->count || sets[1].count != sp->count) {
    return errbuf_printf(err, err_len, EMBER_EINVAL,
                         "inputs differ from the validated ones");
  }
  acc_sw_hit *hits = malloc(sp->count * sizeof *hits);
  if (!hits) {
    return errbuf_printf(err, err_len, EMBER_ENOMEM,
                         "out of memory for %u results", sp->count);
  }
  rc = acc_sw_run_batch(&sp->scoring, &sets[0], &sets[1], 0, sp->count, hits,
                        ctx ? ctx->cancel : NULL);
  if (!rc) rc = pack_result(hits, sp->count, out);
  free(hits);
  if (rc) errbuf_printf(err, err_len, 0, "sw: %s", ember_strerror(rc));
  return rc;
}

static void sw_release(void *prepared) { free(prepared); }

static uint64_t sw_work(const void *prepared) {
  return prepared ? ((const sw_prepared *)prepared)->cells : 0;
}

/* sw makes no out or state blocks; each pair's five int32 answers are the
 * kernel's only writes. */
static int sw_plan(const void *prepared, const acc_task_shape *shape,
                   acc_task_plan *plan, char *err, size_t err_len) {
  const sw_prepared *sp = prepared;
  if (shape->n_outputs || shape->n_states) {
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "sw takes no out or state blocks (got %zu "
                         "and %zu)",
                         shape->n_outputs, shape->n_states);
  }
  plan->cost.ops = sp->cells;
  plan->cost.bytes_read = sp->input_bytes;
  plan->cost.bytes_written = (uint64_t)sp->count * 5 * sizeof(int32_t);
  return 0;
}

const acc_sw_scoring *acc_sw_prepared_scoring(const void *prepared) {
  return &((const sw_prepared *)prepared)->scoring;
}

uint32_t acc_sw_prepared_count(const void *prepared) {
  return ((const sw_prepared *)prepared)->count;
}

int acc_sw_pack_hits(const acc_sw_hit *hits, size_t n, acc_output *out) {
  return pack_result(hits, n, out);
}

/*
 * Timing on an emulated FPGA board (the fpga-emu platform): a linear
 * systolic array of processing elements, each updating one DP cell per
 * clock cycle - the usual FPGA Smith-Waterman design, one PE per query
 * position with the reference streamed through. The Blaze paper's SW
 * accelerator (its reference [16], Chen et al., FCCM 2015) gives no PE
 * count or clock in that paper, so the figures are assumptions: 128 PEs at
 * 200 MHz (25.6 GCUPS peak) fit a Virtex-7 XC7VX690T, the chip of Blaze's
 * board (section 6.1), where systolic SW arrays of a few hundred PEs at
 * about 200 MHz are typical. fixed_ns: 5 us per task to launch the kernel
 * and fill and drain the array. Peak rate only: PEs left idle by queries
 * shorter than the array are not modelled. A board's config can override
 * the two rates.
 */
static const acc_fpga_model sw_fpga_model = {
  .units_per_cycle = 128,
  .clock_mhz = 200,
  .fixed_ns = 5000,
  .source = "assumed: 128-PE systolic array at 200 MHz (Virtex-7 class), "
            "one cell per PE per cycle, 5 us launch and drain",
};

const acc_descriptor acc_sw_descriptor = {
  .abi_version = ACC_ABI_VERSION,
  .name = "sw",
  .version = SW_VERSION,
  .summary = "batched Smith-Waterman local alignment: score, start and end "
             "of each query/reference pair",
  .params_descriptor = &ember__sw__params__descriptor,
  .result_descriptor = &ember__sw__result__descriptor,
  .validate = sw_validate,
  .run_cpu = sw_run_cpu,
  .release = sw_release,
  .work = sw_work,
  .work_unit = "cells",
#ifdef EMBER_HAVE_OPENCL
  .opencl = &acc_sw_opencl_ops,
#endif
  .fpga = &sw_fpga_model,
  .plan = sw_plan,
  .make_probe = acc_sw_make_probe,
};
