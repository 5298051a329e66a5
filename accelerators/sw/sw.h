/*
 * sw.h - batched Smith-Waterman: the accelerator descriptor, scoring,
 * substitution matrices and the batch kernel.
 *
 * Inputs of the "sw" accelerator are two sequence-set blocks (seqset.h):
 * queries and references; query i is aligned with reference i (local
 * alignment, affine gaps) and each pair yields a score and the 0-based,
 * inclusive start and end of the best alignment in both sequences.
 *
 * Scoring follows parasail: a gap of length k costs gap_open +
 * (k-1) * gap_extend (both given as non-negative penalties). DNA scores
 * A/C/G/T (any case) with match/mismatch; any other IUPAC letter scores 0
 * against everything, as parasail_matrix_create() does.
 *
 * Which alignment is reported when several score the same (checked against
 * parasail 2.6 and SSW 1.1 by tests/conformance/test_sw_conformance.c):
 *
 *  - End: the end cell (query i, reference j) holding the best score with
 *    the smallest j, and among those the smallest i - parasail's rule, the
 *    same in parasail_sw, parasail_sw_striped_16/32 and the _trace variants
 *    (scan the DP matrix column by column along the reference and keep the
 *    first cell that strictly beats the best so far).
 *  - Start: found by reverse scoring (ADEPT): q[0..qend] and r[0..rend] are
 *    reversed and scored again with the same kernel and the same end rule,
 *    stopping at the first reversed column that reaches the best score.
 *    Among the alignments of best score ending at (qend, rend) this picks
 *    the largest reference start, then the largest query start. That is
 *    SSW's rule (ssw_align with flag 0x08: read_begin1, ref_begin1), which
 *    gives it on every pair tested. parasail's traceback
 *    (parasail_result_get_cigar) follows its own move priorities and
 *    differs on repetitive sequence.
 *    Given the end rule, every cell of the reversed matrix that reaches the
 *    best score lies on an alignment anchored at (qend, rend), so the
 *    reverse pass needs no special anchoring.
 *  - A pair with no positive-scoring alignment (or an empty sequence) has
 *    score 0 and all four coordinates -1.
 *
 * The SIMD kernels are striped (Farrar) with 16-bit lanes; a pair whose
 * score could reach INT16_MAX - max_score is recomputed with the 32-bit
 * scalar kernel, so results never depend on the kernel chosen.
 */
#ifndef EMBER_ACC_SW_H
#define EMBER_ACC_SW_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../accel.h"
#include "accelerators/sw/sw.pb-c.h"
#include "seqset.h"

extern const acc_descriptor acc_sw_descriptor;

#define ACC_SW_MAX_ALPHABET 32
#define ACC_SW_MAX_QUERY_LEN (1u << 20)   /* residues; bounds kernel memory */
#define ACC_SW_MAX_REF_LEN (1u << 30)
#define ACC_SW_MAX_GAP (1 << 20)          /* gap_open and gap_extend */

/* Scoring as the kernels use it: residues encoded to 0..size-1. Build it
 * with acc_sw_scoring_from_params/_dna/_matrix; kernels check it again. */
typedef struct acc_sw_scoring {
  int size;                                  /* alphabet size */
  int8_t encode[256];                        /* byte -> index, -1 invalid */
  int32_t matrix[ACC_SW_MAX_ALPHABET * ACC_SW_MAX_ALPHABET]; /* [q*size+r] */
  int32_t max_score, min_score;              /* over the matrix */
  int32_t gap_open, gap_extend;              /* penalties, >= 0 */
} acc_sw_scoring;

/* One pair's answer; coordinates 0-based, inclusive; -1 when score is 0. */
typedef struct acc_sw_hit {
  int32_t score;
  int32_t query_start, query_end;
  int32_t ref_start, ref_end;
} acc_sw_hit;

/* ---- substitution matrices ------------------------------------------- */

/* A square substitution matrix: alphabet letters (printable, distinct
 * ignoring case) and size x size scores, row = query residue. */
typedef struct acc_sw_matrix {
  int size;
  char alphabet[ACC_SW_MAX_ALPHABET + 1];
  int32_t scores[ACC_SW_MAX_ALPHABET * ACC_SW_MAX_ALPHABET];
} acc_sw_matrix;

/* acc_sw_matrix_parse: read an NCBI-format matrix from text (len bytes, no
 * terminator needed): '#' comment lines, a header line of single letters,
 * then one row per letter: the letter and one integer in [-128, 127] per
 * column. Rows may come in any order; each letter needs exactly one.
 * source names the text in messages ("EBLOSUM62:12: row 'Q' has 23 scores,
 * expected 24"); NULL reads as "matrix". Returns 0 or EMBER_EFORMAT.
 * Thread-safe. */
int acc_sw_matrix_parse(const char *text, size_t len, const char *source,
                        acc_sw_matrix *out, char *err, size_t err_len);

/* acc_sw_matrix_read_file: acc_sw_matrix_parse on a file (at most 1 MiB),
 * messages prefixed with path. Returns 0, EMBER_EIO (cannot read),
 * EMBER_ETOOBIG or EMBER_EFORMAT. Thread-safe. */
int acc_sw_matrix_read_file(const char *path, acc_sw_matrix *out, char *err,
                            size_t err_len);

/* acc_sw_matrix_builtin: copy the built-in matrix named name (BLOSUM45,
 * BLOSUM50, BLOSUM62, BLOSUM80, PAM250; any case) into *out. The tables are
 * kept as NCBI text and parsed by acc_sw_matrix_parse on first use.
 * Returns 0, EMBER_ENOTFOUND, or EMBER_EINTERNAL if a table is corrupt.
 * Thread-safe. */
int acc_sw_matrix_builtin(const char *name, acc_sw_matrix *out);

/* acc_sw_matrix_builtin_names: "BLOSUM45, BLOSUM50, ..." (static). */
const char *acc_sw_matrix_builtin_names(void);

/* ---- scoring ------------------------------------------------------------ */

/* acc_sw_scoring_dna: alphabet ACGT plus one "unknown" index scoring 0
 * against everything (parasail_matrix_create("ACGT", match, mismatch)).
 * Accepts the IUPAC nucleotide letters ACGTUNRYKMSWBDHV in any case; all but
 * A/C/G/T map to the unknown index; other bytes are invalid. match in
 * [1, 127], mismatch in [-128, -1], gaps in [0, ACC_SW_MAX_GAP].
 * Returns 0 or EMBER_EPARAM with the reason in err. */
int acc_sw_scoring_dna(int32_t match, int32_t mismatch, int32_t gap_open,
                       int32_t gap_extend, acc_sw_scoring *out, char *err,
                       size_t err_len);

/* acc_sw_scoring_matrix: score with matrix m. Letters of m's alphabet map to
 * their index in either case; other letters A-Z/a-z and '*' map to the
 * last index (as parasail's mappers do); other bytes are invalid.
 * Returns 0 or EMBER_EPARAM. */
int acc_sw_scoring_matrix(const acc_sw_matrix *m, int32_t gap_open,
                          int32_t gap_extend, acc_sw_scoring *out, char *err,
                          size_t err_len);

/* acc_sw_scoring_from_params: scoring from decoded Params (NULL: all
 * defaults). DNA uses match/mismatch (defaults 3/-3) and rejects a matrix;
 * PROTEIN uses matrix_name or matrix (default BLOSUM62), rejects
 * match/mismatch, and defaults its gaps to 11/1 when they are unset; DNA
 * gaps default to 6/1. Returns 0 or EMBER_EPARAM with the reason in err
 * ("gap_open must be a non-negative penalty, got -6"). */
int acc_sw_scoring_from_params(const Ember__Sw__Params *p,
                               acc_sw_scoring *out, char *err, size_t err_len);

/* ---- kernels ----------------------------------------------------------- */

/* Kernel variants. Each SIMD one is compiled with its own flags and used only
 * when the CPU has the instructions. */
typedef enum acc_sw_isa {
  ACC_SW_ISA_SCALAR = 0,  /* 32-bit reference, always built */
  ACC_SW_ISA_SSE41,       /* striped, 8 x 16-bit */
  ACC_SW_ISA_AVX2,        /* striped, 16 x 16-bit */
  ACC_SW_ISA_AVX512,      /* striped, 32 x 16-bit (AVX-512BW) */
  ACC_SW_ISA_COUNT
} acc_sw_isa;

/* acc_sw_isa_name: "scalar", "sse41", "avx2", "avx512"; NULL if out of
 * range. */
const char *acc_sw_isa_name(acc_sw_isa isa);

/* acc_sw_isa_parse: name -> isa. Returns 0 or EMBER_EINVAL. */
int acc_sw_isa_parse(const char *name, acc_sw_isa *out);

/* acc_sw_isa_supported: compiled in and usable on this CPU. Thread-safe. */
bool acc_sw_isa_supported(acc_sw_isa isa);

/* acc_sw_isa_selected: the variant acc_sw_run_batch uses, chosen once per
 * process: EMBER_SW_ISA=scalar|sse41|avx2|avx512 when set and supported,
 * otherwise the widest supported. Callers may report it. Thread-safe. */
acc_sw_isa acc_sw_isa_selected(void);

/* acc_sw_run_batch: align pairs first .. first+count-1 of (q, r), writing
 * out[0 .. count-1], with the selected kernel. Allocates one workspace per
 * call (none per pair). cancel may be NULL; it is read between pairs.
 * Returns 0, EMBER_EINVAL (range outside the sets, invalid scoring, a
 * residue the scoring does not encode, a query longer than
 * ACC_SW_MAX_QUERY_LEN or a reference longer than ACC_SW_MAX_REF_LEN),
 * EMBER_ENOMEM or EMBER_ECANCELED (out then partly written). Thread-safe;
 * run slices of one batch on several threads to use several cores. */
int acc_sw_run_batch(const acc_sw_scoring *s, const acc_seqset *q,
                     const acc_seqset *r, size_t first, size_t count,
                     acc_sw_hit *out, const atomic_int *cancel);

/* acc_sw_run_batch_isa: acc_sw_run_batch with a given variant (tests,
 * benchmarks). n_redone, if not NULL, receives how many pairs saturated the
 * 16-bit lanes and were recomputed with the 32-bit kernel. Returns
 * EMBER_EINVAL also when isa is not supported here. */
int acc_sw_run_batch_isa(acc_sw_isa isa, const acc_sw_scoring *s,
                         const acc_seqset *q, const acc_seqset *r,
                         size_t first, size_t count, acc_sw_hit *out,
                         const atomic_int *cancel, size_t *n_redone);

#endif
