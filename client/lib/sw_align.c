/*
 * sw_align.c - ember_sw_align(): the typed helper for the sw accelerator.
 * It packs the parameters once, cuts the batch into tasks (query and
 * reference blocks each), keeps them all in flight, and gathers the results
 * in batch order.
 */

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "accelerators/sw/sw.pb-c.h"
#include "clock.h"
#include "last_error.h"
#include "platform_kinds.h"
#include "struct_abi.h"
#include "sw/seqset.h"
#include "sw/sw.h"

/* Tasks of about 32 M cells (~10 ms on one core) keep the per-task costs
 * (blocks, frames, wake-ups) near 1%; a batch is still cut into at least
 * MIN_TASKS so that every worker of a NAM gets a share. */
#define TARGET_CELLS_PER_TASK ((uint64_t)1 << 25)
#define MAX_PAIRS_PER_TASK 8192
#define MIN_TASKS 16

const char *ember_platform_kind(size_t i) {
  return i < PLATFORM_KIND_COUNT ? platform_kinds[i].name : NULL;
}

void ember_sw_params_default(ember_sw_params *p) {
  memset(p, 0, sizeof *p);
  p->size = sizeof *p;
  p->alphabet = EMBER_SW_DNA;
  p->match = 3;
  p->mismatch = -3;
  p->gap_open = 6;
  p->gap_extend = 1;
}

/* Pack the Params message; a matrix that names a file is read here and
 * sent in full, so the NAM never opens the application's files. */
static int pack_params(const ember_sw_params *p, uint8_t **out, size_t *len) {
  Ember__Sw__Params m = EMBER__SW__PARAMS__INIT;
  Ember__Sw__Matrix mx = EMBER__SW__MATRIX__INIT;
  acc_sw_matrix file_matrix;
  char alphabet[ACC_SW_MAX_ALPHABET + 1];
  int32_t scores[ACC_SW_MAX_ALPHABET * ACC_SW_MAX_ALPHABET];
  m.has_alphabet = 1;
  m.alphabet = p->alphabet == EMBER_SW_PROTEIN ? EMBER__SW__ALPHABET__PROTEIN
                                               : EMBER__SW__ALPHABET__DNA;
  if (p->alphabet == EMBER_SW_DNA) {
    m.has_match = m.has_mismatch = 1;
    m.match = p->match;
    m.mismatch = p->mismatch;
  } else {
    const char *name = p->matrix ? p->matrix : "BLOSUM62";
    struct stat st;
    if (strchr(name, '/') || stat(name, &st) == 0) {
      char err[512];
      if (acc_sw_matrix_read_file(name, &file_matrix, err, sizeof err) != 0) {
        ember__client_set_error("%s", err);
        return EMBER_EPARAM;
      }
      int n = file_matrix.size;
      memcpy(alphabet, file_matrix.alphabet, (size_t)n);
      alphabet[n] = '\0';
      for (int i = 0; i < n * n; i++) scores[i] = file_matrix.scores[i];
      mx.alphabet = alphabet;
      mx.n_scores = (size_t)(n * n);
      mx.scores = scores;
      m.matrix = &mx;
    } else {
      m.matrix_name = (char *)name;
    }
  }
  m.has_gap_open = m.has_gap_extend = 1;
  m.gap_open = p->gap_open;
  m.gap_extend = p->gap_extend;
  *len = ember__sw__params__get_packed_size(&m);
  *out = malloc(*len ? *len : 1);
  if (!*out) return EMBER_ENOMEM;
  ember__sw__params__pack(&m, *out);
  return 0;
}

/* One side (queries or references) of pairs [first, first+count) as a
 * sealed seqset block. */
static int make_block(ember_client *c, const ember_seq *seqs, size_t first,
                      size_t count, ember_block **out) {
  const char **res = malloc(count * sizeof *res);
  size_t *lens = malloc(count * sizeof *lens);
  int rc = EMBER_ENOMEM;
  if (res && lens) {
    for (size_t i = 0; i < count; i++) {
      res[i] = seqs[first + i].residues;
      lens[i] = seqs[first + i].length;
    }
    size_t bytes = acc_seqset_bytes(lens, count);
    void *dst;
    if (bytes == 0) {
      ember__client_set_error("sequence batch too large for one block");
      rc = EMBER_ETOOBIG;
    } else if ((rc = ember_block_alloc(c, bytes, 0, &dst, out)) == 0) {
      rc = acc_seqset_write(dst, bytes, res, lens, count);
      if (rc == 0) rc = ember_block_seal(*out);
      if (rc) {
        ember_block_release(*out);
        *out = NULL;
      }
    }
  }
  free(res);
  free(lens);
  return rc;
}

typedef struct align_progress {
  atomic_size_t pairs_done;
} align_progress;

typedef struct chunk {
  ember_task *task;
  size_t first, count;
  align_progress *progress;
} chunk;

static void on_chunk_done(ember_task *t, void *user) {
  chunk *ch = user;
  atomic_fetch_add(&ch->progress->pairs_done, ch->count);
}

static size_t pairs_per_task(const ember_sw_params *p, const ember_seq *q,
                             const ember_seq *r, size_t n) {
  if (p->pairs_per_task) return p->pairs_per_task;
  uint64_t cells = 0;
  size_t sample = n < 1024 ? n : 1024;
  for (size_t i = 0; i < sample; i++) cells += (uint64_t)q[i].length * r[i].length;
  uint64_t avg = sample ? cells / sample : 1;
  uint64_t per = avg ? TARGET_CELLS_PER_TASK / avg : MAX_PAIRS_PER_TASK;
  if (per > (n + MIN_TASKS - 1) / MIN_TASKS) per = (n + MIN_TASKS - 1) / MIN_TASKS;
  if (per > MAX_PAIRS_PER_TASK) per = MAX_PAIRS_PER_TASK;
  if (per < 1) per = 1;
  return (size_t)per;
}

/* The report's counter of tasks run on a platform of this kind (an older
 * NAM that names none ran it on its cpu). */
static size_t *tasks_on(ember_sw_report *report, const char *kind) {
  switch (platform_kind_find(kind)) {
  case PLATFORM_KIND_OPENCL: return &report->tasks_opencl;
  case PLATFORM_KIND_FPGA_EMU: return &report->tasks_fpga_emu;
  default: return &report->tasks_cpu;
  }
}

/* Pairs [first, first+count) gave no result: score -1 marks them (a real
 * one is never negative), and the report counts them. */
static void mark_failed(size_t first, size_t count, ember_sw_result *results,
                        ember_sw_report *report) {
  for (size_t i = first; i < first + count; i++)
    results[i] = (ember_sw_result){-1, -1, -1, -1, -1};
  if (report) {
    report->tasks_failed++;
    report->pairs_failed += count;
  }
}

/* Copy one finished chunk into results and the report (its cells count
 * only when it succeeded). */
static int collect(const chunk *ch, const ember_seq *queries,
                   const ember_seq *refs, ember_sw_result *results,
                   ember_sw_report *report) {
  ember_task *t = ch->task;
  if (ember_task_status(t) != 0) {
    mark_failed(ch->first, ch->count, results, report);
    ember__client_set_error("task of pairs %zu-%zu (sequence numbers below count "
                     "from %zu): %s", ch->first, ch->first + ch->count - 1,
                     ch->first, ember_task_message(t));
    /* the blocks were made here from the caller's sequences: a malformed
     * one (an unknown residue, a length over the limit) is a bad argument
     * of this call, as ember.h says */
    return ember_task_status(t) == EMBER_EFORMAT ? EMBER_EPARAM
                                                 : ember_task_status(t);
  }
  size_t len;
  const void *out = ember_task_output(t, &len);
  Ember__Sw__Result *r = ember__sw__result__unpack(NULL, len, out);
  if (!r || r->n_score != ch->count || r->n_query_start != ch->count ||
      r->n_query_end != ch->count || r->n_ref_start != ch->count ||
      r->n_ref_end != ch->count) {
    ember__client_set_error("pairs %zu-%zu: malformed sw result", ch->first,
                     ch->first + ch->count - 1);
    mark_failed(ch->first, ch->count, results, report);
    if (r) ember__sw__result__free_unpacked(r, NULL);
    return EMBER_EPROTO;
  }
  for (size_t i = 0; i < ch->count; i++) {
    ember_sw_result *o = &results[ch->first + i];
    o->score = r->score[i];
    o->query_start = r->query_start[i];
    o->query_end = r->query_end[i];
    o->ref_start = r->ref_start[i];
    o->ref_end = r->ref_end[i];
  }
  ember__sw__result__free_unpacked(r, NULL);
  if (report) {
    const ember_task_info *info = ember_task_get_info(t);
    report->tasks++;
    for (size_t i = ch->first; i < ch->first + ch->count; i++)
      report->cells += (uint64_t)queries[i].length * refs[i].length;
    if (info->fell_back)
      report->tasks_fallback++;
    else
      (*tasks_on(report, info->platform_kind))++;
    if (info->attempts > 1) report->tasks_retried++;
    report->queue_ns += info->queue_ns;
    report->exec_ns += info->exec_ns;
    report->server_ns += info->server_ns;
    report->round_trip_ns += info->round_trip_ns;
  }
  return 0;
}

/* The work of ember_sw_align, on structs of this library's size. */
static int sw_align(ember_client *c, const ember_sw_params *params,
                    const ember_seq *queries, const ember_seq *refs, size_t n,
                    ember_sw_result *results, ember_sw_report *report,
                    ember_progress_cb progress, void *progress_user) {
  if (n == 0) return 0;
  if (!c || !queries || !refs || !results) {
    ember__client_set_error("ember_sw_align: missing argument");
    return EMBER_EINVAL;
  }
  uint64_t start = clock_now_ns();
  uint8_t *packed = NULL;
  size_t packed_len = 0;
  int rc = pack_params(params, &packed, &packed_len);
  if (rc) return rc;
  size_t per = pairs_per_task(params, queries, refs, n);
  size_t n_chunks = (n + per - 1) / per;
  chunk *chunks = calloc(n_chunks, sizeof *chunks);
  if (!chunks) {
    free(packed);
    return EMBER_ENOMEM;
  }
  align_progress prog;
  atomic_init(&prog.pairs_done, 0);
  ember_submit_options so = {.platform = params->platform,
                             .prefer = params->prefer,
                             .callback = on_chunk_done};
  size_t submitted = 0;
  for (; submitted < n_chunks && rc == 0; submitted++) {
    chunk *ch = &chunks[submitted];
    ch->first = submitted * per;
    ch->count = n - ch->first < per ? n - ch->first : per;
    ch->progress = &prog;
    ember_block *in[2] = {NULL, NULL};
    rc = make_block(c, queries, ch->first, ch->count, &in[0]);
    if (rc == 0) rc = make_block(c, refs, ch->first, ch->count, &in[1]);
    so.user = ch;
    /* one task and no progress to report: ember_run, whose caller reads
     * its own result (one thread wake-up less than a submit and a wait) */
    if (rc == 0)
      rc = (n_chunks == 1 && !progress ? ember_run : ember_submit)(
          c, "sw", packed, packed_len, in, 2, &so, &ch->task);
    ember_block_release(in[0]); /* the task keeps what it needs */
    ember_block_release(in[1]);
    if (progress) progress(atomic_load(&prog.pairs_done), n, progress_user);
  }
  if (rc) submitted--; /* the failed one has no task */
  int first_err = rc;
  char first_msg[512] = "";
  if (rc) snprintf(first_msg, sizeof first_msg, "%s", ember_last_error());
  /* every task that succeeded is collected, whatever failed before it */
  for (size_t i = 0; i < submitted; i++) {
    while (ember_task_wait(chunks[i].task, 200) == EMBER_ETIMEDOUT)
      if (progress) progress(atomic_load(&prog.pairs_done), n, progress_user);
    if (progress) progress(atomic_load(&prog.pairs_done), n, progress_user);
    int crc = collect(&chunks[i], queries, refs, results, report);
    if (crc && first_err == 0) {
      first_err = crc;
      snprintf(first_msg, sizeof first_msg, "%s", ember_last_error());
    }
    ember_task_free(chunks[i].task);
  }
  /* a failed submit left the rest of the batch without a task */
  for (size_t first = submitted * per; first_err && first < n; first += per)
    mark_failed(first, n - first < per ? n - first : per, results, report);
  if (progress && first_err == 0) progress(n, n, progress_user);
  if (report) report->wall_ns = clock_now_ns() - start;
  free(chunks);
  free(packed);
  if (first_err) ember__client_set_error("%s", first_msg);
  return first_err;
}

int ember_sw_align(ember_client *c, const ember_sw_params *params,
                   const ember_seq *queries, const ember_seq *refs, size_t n,
                   ember_sw_result *results, ember_sw_report *report,
                   ember_progress_cb progress, void *progress_user) {
  ember_sw_params p;
  if (params) {
    int rc = ember__struct_in(&p, sizeof p, params, EMBER__SW_PARAMS_V0,
                              "ember_sw_params");
    if (rc) return rc;
  } else {
    ember_sw_params_default(&p);
  }
  ember_sw_report full = {.size = sizeof full};
  int rc = sw_align(c, &p, queries, refs, n, results, report ? &full : NULL,
                    progress, progress_user);
  if (report) ember__struct_out(report, &full, sizeof full, EMBER__SW_REPORT_V0);
  return rc;
}
