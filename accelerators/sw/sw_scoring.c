/* sw_scoring.c - scoring schemes from parameters (see sw.h). */
#include <string.h>

#include "ember/ember_errors.h"
#include "sw.h"
#include "sw_internal.h"

#define DNA_DEFAULT_OPEN 6
#define DNA_DEFAULT_EXTEND 1
#define PROTEIN_DEFAULT_OPEN 11
#define PROTEIN_DEFAULT_EXTEND 1
#define PROTEIN_DEFAULT_MATRIX "BLOSUM62"

static int check_gap(const char *name, int32_t v, char *err, size_t err_len) {
  if (v < 0) {
    return errbuf_printf(
        err, err_len, EMBER_EPARAM,
        "%s must be a non-negative penalty, got %d (a penalty of the "
        "wrong sign: gaps cost gap_open + (k-1) * gap_extend, so "
        "pass %lld)",
        name, v, -(long long)v);
  }
  if (v > ACC_SW_MAX_GAP) {
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "%s must be at most %d, got %d", name, ACC_SW_MAX_GAP,
                         v);
  }
  return 0;
}

static void finish(acc_sw_scoring *s, int32_t gap_open, int32_t gap_extend) {
  s->max_score = INT32_MIN;
  s->min_score = INT32_MAX;
  for (int i = 0; i < s->size * s->size; i++) {
    if (s->matrix[i] > s->max_score) s->max_score = s->matrix[i];
    if (s->matrix[i] < s->min_score) s->min_score = s->matrix[i];
  }
  s->gap_open = gap_open;
  s->gap_extend = gap_extend;
}

int acc_sw_scoring_dna(int32_t match, int32_t mismatch, int32_t gap_open,
                       int32_t gap_extend, acc_sw_scoring *out, char *err,
                       size_t err_len) {
  if (match <= 0 || match > 127) {
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "match must be in [1, 127], got %d%s", match,
                         match <= 0 ? " (a match is a reward, > 0)" : "");
  }
  if (mismatch >= 0 || mismatch < -128) {
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "mismatch must be in [-128, -1], got %d%s", mismatch,
                         mismatch >= 0 ? " (a mismatch is a cost, < 0)" : "");
  }
  int rc = check_gap("gap_open", gap_open, err, err_len);
  if (!rc) rc = check_gap("gap_extend", gap_extend, err, err_len);
  if (rc) return rc;

  acc_sw_scoring s;
  memset(&s, 0, sizeof s);
  s.size = 5;                            /* A C G T + unknown */
  memset(s.encode, -1, sizeof s.encode);
  static const char acgt[] = "ACGT";
  static const char other[] = "UNRYKMSWBDHV";
  for (int i = 0; i < 4; i++) {
    s.encode[(unsigned char)acgt[i]] = (int8_t)i;
    s.encode[(unsigned char)acgt[i] + 32] = (int8_t)i;
  }
  for (const char *c = other; *c; c++) {
    s.encode[(unsigned char)*c] = 4;
    s.encode[(unsigned char)*c + 32] = 4;
  }
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 5; j++)
      s.matrix[i * 5 + j] = (i == 4 || j == 4) ? 0 : i == j ? match : mismatch;
  finish(&s, gap_open, gap_extend);
  *out = s;
  return 0;
}

int acc_sw_scoring_matrix(const acc_sw_matrix *m, int32_t gap_open,
                          int32_t gap_extend, acc_sw_scoring *out, char *err,
                          size_t err_len) {
  if (!m || m->size < 1 || m->size > ACC_SW_MAX_ALPHABET) {
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "matrix must have 1 to %d letters",
                         ACC_SW_MAX_ALPHABET);
  }
  int rc = check_gap("gap_open", gap_open, err, err_len);
  if (!rc) rc = check_gap("gap_extend", gap_extend, err, err_len);
  if (rc) return rc;

  acc_sw_scoring s;
  memset(&s, 0, sizeof s);
  s.size = m->size;
  memset(s.encode, -1, sizeof s.encode);
  /* letters outside the alphabet score as its last letter, as parasail's
   * mappers do ('*' in the NCBI tables) */
  int8_t last = (int8_t)(m->size - 1);
  for (int c = 'A'; c <= 'Z'; c++) {
    s.encode[c] = last;
    s.encode[c + 32] = last;
  }
  s.encode['*'] = last;
  for (int i = 0; i < m->size; i++) {
    unsigned char c = (unsigned char)m->alphabet[i];
    if (c < 0x21 || c > 0x7e) {
      return errbuf_printf(err, err_len, EMBER_EPARAM,
                           "matrix letter %d is not printable (0x%02x)", i, c);
    }
    s.encode[c] = (int8_t)i;
    if (c >= 'A' && c <= 'Z') s.encode[c + 32] = (int8_t)i;
    if (c >= 'a' && c <= 'z') s.encode[c - 32] = (int8_t)i;
  }
  for (int i = 0; i < m->size * m->size; i++) {
    if (m->scores[i] < -128 || m->scores[i] > 127) {
      return errbuf_printf(err, err_len, EMBER_EPARAM,
                           "matrix score %d ('%c' vs '%c') is out of "
                           "range [-128, 127]",
                           m->scores[i], m->alphabet[i / m->size],
                           m->alphabet[i % m->size]);
    }
    s.matrix[i] = m->scores[i];
  }
  finish(&s, gap_open, gap_extend);
  *out = s;
  return 0;
}

/* matrix_from_message: an explicit Matrix message, checked. */
static int matrix_from_message(const Ember__Sw__Matrix *msg, acc_sw_matrix *m,
                               char *err, size_t err_len) {
  const char *a = msg->alphabet ? msg->alphabet : "";
  size_t n = strlen(a);
  if (n == 0 || n > ACC_SW_MAX_ALPHABET) {
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "matrix.alphabet must have 1 to %d letters, "
                         "got %zu",
                         ACC_SW_MAX_ALPHABET, n);
  }
  memset(m, 0, sizeof *m);
  m->size = (int)n;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)a[i];
    if (c < 0x21 || c > 0x7e) {
      return errbuf_printf(err, err_len, EMBER_EPARAM,
                           "matrix.alphabet: letter %zu is not a "
                           "printable character (0x%02x)",
                           i, c);
    }
    for (size_t j = 0; j < i; j++) {
      unsigned char d = (unsigned char)a[j];
      int fc = (c >= 'a' && c <= 'z') ? c - 32 : c;
      int fd = (d >= 'a' && d <= 'z') ? d - 32 : d;
      if (fc == fd) {
        return errbuf_printf(err, err_len, EMBER_EPARAM,
                             "matrix.alphabet: letter '%c' appears "
                             "twice",
                             c);
      }
    }
    m->alphabet[i] = (char)c;
  }
  if (msg->n_scores != n * n) {
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "matrix.scores has %zu values, expected %zu "
                         "(%zu letters squared)",
                         msg->n_scores, n * n, n);
  }
  for (size_t i = 0; i < n * n; i++) m->scores[i] = msg->scores[i];
  return 0;
}

int acc_sw_scoring_from_params(const Ember__Sw__Params *p,
                               acc_sw_scoring *out, char *err,
                               size_t err_len) {
  Ember__Sw__Params defaults = EMBER__SW__PARAMS__INIT;
  if (!p) p = &defaults;
  if (!out) return EMBER_EINVAL;

  if (p->alphabet == EMBER__SW__ALPHABET__DNA) {
    if (p->matrix_name || p->matrix) {
      return errbuf_printf(err, err_len, EMBER_EPARAM,
                           "DNA scores with match/mismatch; matrix_name "
                           "and matrix are for the PROTEIN alphabet");
    }
    return acc_sw_scoring_dna(p->match, p->mismatch,
                              p->has_gap_open ? p->gap_open : DNA_DEFAULT_OPEN,
                              p->has_gap_extend ? p->gap_extend
                                                : DNA_DEFAULT_EXTEND,
                              out, err, err_len);
  }
  if (p->alphabet != EMBER__SW__ALPHABET__PROTEIN) {
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "unknown alphabet %d (DNA = 0, PROTEIN = 1)",
                         (int)p->alphabet);
  }
  if (p->has_match || p->has_mismatch) {
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "match/mismatch are for the DNA alphabet; "
                         "PROTEIN scores with a substitution matrix");
  }
  if (p->matrix_name && p->matrix) {
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "give matrix_name or matrix, not both");
  }
  acc_sw_matrix m;
  if (p->matrix) {
    int rc = matrix_from_message(p->matrix, &m, err, err_len);
    if (rc) return rc;
  } else {
    const char *name = p->matrix_name ? p->matrix_name
                                      : PROTEIN_DEFAULT_MATRIX;
    int rc = acc_sw_matrix_builtin(name, &m);
    if (rc == EMBER_ENOTFOUND) {
      return errbuf_printf(err, err_len, EMBER_EPARAM,
                           "unknown matrix '%.64s' (built-in: %s)", name,
                           acc_sw_matrix_builtin_names());
    }
    if (rc) {
      return errbuf_printf(err, err_len, rc, "built-in matrix '%s' is corrupt",
                           name);
    }
  }
  return acc_sw_scoring_matrix(&m,
                               p->has_gap_open ? p->gap_open
                                               : PROTEIN_DEFAULT_OPEN,
                               p->has_gap_extend ? p->gap_extend
                                                 : PROTEIN_DEFAULT_EXTEND,
                               out, err, err_len);
}
