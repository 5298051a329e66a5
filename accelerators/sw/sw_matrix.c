/*
 * sw_matrix.c - the NCBI-format substitution matrix reader, used for
 * matrix files and for the built-in tables alike.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ember/ember_errors.h"
#include "sw.h"
#include "sw_internal.h"
#include "sw_matrices.h"

#define MATRIX_FILE_LIMIT (1u << 20)
#define SCORE_MIN (-128)
#define SCORE_MAX 127

typedef struct parser {
  const char *source;
  size_t line;
  char *err;
  size_t err_len;
} parser;

static int fail(const parser *ps, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int fail(const parser *ps, const char *fmt, ...) {
  if (ps->err && ps->err_len) {
    int n = snprintf(ps->err, ps->err_len, "%s:%zu: ", ps->source, ps->line);
    if (n >= 0 && (size_t)n < ps->err_len) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(ps->err + n, ps->err_len - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return EMBER_EFORMAT;
}

static bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* next_token: the next run of non-blank bytes in [*p, end), or NULL. */
static const char *next_token(const char **p, const char *end, size_t *len) {
  const char *s = *p;
  while (s < end && is_blank(*s)) s++;
  if (s == end) {
    *p = s;
    return NULL;
  }
  const char *t = s;
  while (t < end && !is_blank(*t)) t++;
  *p = t;
  *len = (size_t)(t - s);
  return s;
}

/* show: a token as text for a message, non-printable bytes as \xNN. */
static const char *show(const char *tok, size_t len, char *buf, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < len && o + 5 < cap; i++) {
    unsigned char c = (unsigned char)tok[i];
    if (i == 16) {
      o += (size_t)snprintf(buf + o, cap - o, "...");
      break;
    }
    if (c >= 0x20 && c <= 0x7e)
      buf[o++] = (char)c;
    else
      o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
  }
  buf[o] = '\0';
  return buf;
}

static char fold(char c) {
  return (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c;
}

/* letter_index: position of c in the alphabet ignoring case, or -1. */
static int letter_index(const acc_sw_matrix *m, char c) {
  for (int i = 0; i < m->size; i++)
    if (fold(m->alphabet[i]) == fold(c)) return i;
  return -1;
}

/* parse_score: a decimal integer with an optional sign; magnitudes past
 * 100000 stop growing (they are out of range anyway). */
static int parse_score(const char *tok, size_t len, int32_t *out) {
  size_t i = 0;
  bool neg = false;
  if (i < len && (tok[i] == '-' || tok[i] == '+')) neg = tok[i++] == '-';
  if (i == len) return -1;
  int32_t v = 0;
  for (; i < len; i++) {
    if (tok[i] < '0' || tok[i] > '9') return -1;
    if (v < 100000) v = v * 10 + (tok[i] - '0');
  }
  *out = neg ? -v : v;
  return 0;
}

static int parse_header(parser *ps, const char *p, const char *end,
                        acc_sw_matrix *m) {
  size_t len;
  const char *tok;
  char buf[96];
  while ((tok = next_token(&p, end, &len))) {
    unsigned char c = (unsigned char)tok[0];
    if (len != 1)
      return fail(ps, "header entry '%s' is not a single letter",
                  show(tok, len, buf, sizeof buf));
    if (c < 0x21 || c > 0x7e)
      return fail(ps, "non-printable letter 0x%02x in the header", c);
    if (letter_index(m, (char)c) >= 0)
      return fail(ps, "letter '%c' appears twice in the header", c);
    if (m->size == ACC_SW_MAX_ALPHABET)
      return fail(ps, "more than %d letters in the header",
                  ACC_SW_MAX_ALPHABET);
    m->alphabet[m->size++] = (char)c;
    m->alphabet[m->size] = '\0';
  }
  return 0;
}

static int parse_row(parser *ps, const char *p, const char *end,
                     acc_sw_matrix *m, bool *seen) {
  size_t len;
  char buf[96];
  const char *tok = next_token(&p, end, &len);
  unsigned char c = (unsigned char)tok[0];
  if (len != 1)
    return fail(ps, "row label '%s' is not a single letter",
                show(tok, len, buf, sizeof buf));
  if (c < 0x21 || c > 0x7e)
    return fail(ps, "non-printable row letter 0x%02x", c);
  int row = letter_index(m, (char)c);
  if (row < 0)
    return fail(ps, "row '%c' is not a letter of the header", c);
  if (seen[row]) return fail(ps, "row '%c' appears twice", c);
  seen[row] = true;

  const char *values = p;
  int n = 0;
  while (next_token(&p, end, &len)) n++;
  if (n != m->size)
    return fail(ps, "row '%c' has %d scores, expected %d", c, n, m->size);
  p = values;
  for (int col = 0; col < m->size; col++) {
    int32_t v;
    tok = next_token(&p, end, &len);
    if (parse_score(tok, len, &v) != 0)
      return fail(ps, "row '%c', column '%c': '%s' is not an integer", c,
                  m->alphabet[col], show(tok, len, buf, sizeof buf));
    if (v < SCORE_MIN || v > SCORE_MAX)
      return fail(ps, "row '%c', column '%c': score %s is out of range "
                  "[%d, %d]", c, m->alphabet[col],
                  show(tok, len, buf, sizeof buf), SCORE_MIN, SCORE_MAX);
    m->scores[row * m->size + col] = v;
  }
  return 0;
}

int acc_sw_matrix_parse(const char *text, size_t len, const char *source,
                        acc_sw_matrix *out, char *err, size_t err_len) {
  parser ps = {source ? source : "matrix", 0, err, err_len};
  if (!out || (!text && len)) return fail(&ps, "no matrix");
  acc_sw_matrix m;
  memset(&m, 0, sizeof m);
  bool seen[ACC_SW_MAX_ALPHABET] = {false};
  bool have_header = false;
  int rows = 0;
  const char *p = text, *end = text + len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    ps.line++;
    const char *s = p;
    p = nl ? nl + 1 : end;
    while (s < le && is_blank(*s)) s++;
    if (s == le || *s == '#') continue;
    int rc;
    if (!have_header) {
      rc = parse_header(&ps, s, le, &m);
      have_header = true;
    } else {
      rc = parse_row(&ps, s, le, &m, seen);
      rows++;
    }
    if (rc != 0) return rc;
  }
  if (!have_header || m.size == 0) {
    if (ps.line == 0) ps.line = 1;
    return fail(&ps, "no header line (the matrix letters)");
  }
  if (rows != m.size) {
    int missing = 0;
    while (missing < m.size && seen[missing]) missing++;
    return fail(&ps, "not square: %d rows for %d letters, no row for '%c'",
                rows, m.size, m.alphabet[missing]);
  }
  *out = m;
  return 0;
}

int acc_sw_matrix_read_file(const char *path, acc_sw_matrix *out, char *err,
                            size_t err_len) {
  if (!path || !out) {
    return errbuf_printf(err, err_len, EMBER_EINVAL, "no matrix file");
  }
  FILE *f = fopen(path, "rb");
  if (!f) {
    return errbuf_printf(err, err_len, EMBER_EIO, "%s: cannot open: %s", path,
                         strerror(errno));
  }
  char *buf = malloc(MATRIX_FILE_LIMIT + 1);
  if (!buf) {
    fclose(f);
    return errbuf_printf(err, err_len, EMBER_ENOMEM, "%s: out of memory", path);
  }
  size_t n = fread(buf, 1, MATRIX_FILE_LIMIT + 1, f);
  int failed = ferror(f);
  fclose(f);
  int rc;
  if (failed) {
    errbuf_printf(err, err_len, 0, "%s: read error", path);
    rc = EMBER_EIO;
  } else if (n > MATRIX_FILE_LIMIT) {
    errbuf_printf(err, err_len, 0, "%s: larger than %u bytes, not a matrix",
                  path, MATRIX_FILE_LIMIT);
    rc = EMBER_ETOOBIG;
  } else {
    rc = acc_sw_matrix_parse(buf, n, path, out, err, err_len);
  }
  free(buf);
  return rc;
}

/* The built-in tables, parsed once. */
#define BUILTIN_MAX 8
static acc_sw_matrix builtin[BUILTIN_MAX];
static int builtin_rc;
static pthread_once_t builtin_once = PTHREAD_ONCE_INIT;

static void builtin_init(void) {
  if (acc_sw_matrix_text_count > BUILTIN_MAX) {
    builtin_rc = EMBER_EINTERNAL;
    return;
  }
  for (size_t i = 0; i < acc_sw_matrix_text_count; i++) {
    const acc_sw_matrix_text *t = &acc_sw_matrix_texts[i];
    if (acc_sw_matrix_parse(t->text, t->len, t->name, &builtin[i], NULL, 0))
      builtin_rc = EMBER_EINTERNAL;
  }
}

int acc_sw_matrix_builtin(const char *name, acc_sw_matrix *out) {
  if (!name || !out) return EMBER_EINVAL;
  pthread_once(&builtin_once, builtin_init);
  if (builtin_rc) return builtin_rc;
  for (size_t i = 0; i < acc_sw_matrix_text_count; i++)
    if (strcasecmp(acc_sw_matrix_texts[i].name, name) == 0) {
      *out = builtin[i];
      return 0;
    }
  return EMBER_ENOTFOUND;
}

const char *acc_sw_matrix_builtin_names(void) {
  return "BLOSUM45, BLOSUM50, BLOSUM62, BLOSUM80, PAM250";
}
