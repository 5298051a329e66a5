/*
 * plf_aln_nexus.c - NEXUS alignments (Maddison, Swofford & Maddison 1997):
 * "#NEXUS", then blocks. A DATA block, or a CHARACTERS block with the taxa
 * of a TAXA block, gives the alignment:
 *   DIMENSIONS NTAX=n NCHAR=m;
 *   FORMAT DATATYPE=DNA|RNA|NUCLEOTIDE|PROTEIN [INTERLEAVE[=YES|NO]]
 *          [GAP=c] [MISSING=c] [MATCHCHAR=c];
 *   MATRIX name chars ... ;
 * Comments [...] (nested) may stand anywhere; names may be 'quoted' (''
 * for a quote). Other blocks (TREES, MRBAYES, ASSUMPTIONS, ...) and other
 * commands are skipped. Not supported, and refused with a message:
 * TRANSPOSE, TOKENS, DATATYPE=STANDARD and the others, and polymorphic or
 * uncertain states written ( ) or { }.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plf_aln_internal.h"

#define TOKEN_KEEP PLF_ALN_MAX_NAME

typedef struct nexus {
  plf_aln_builder *b;
  const char *p, *end;
  unsigned long line;
  /* the current token: its first TOKEN_KEEP bytes, its length, its line */
  char tok[TOKEN_KEEP + 1];
  size_t tok_len;
  int quoted;
  unsigned long tok_line;
  /* what the DATA / CHARACTERS block declared */
  size_t ntax, nchar;
  int interleave;
  int taxa_block;   /* the taxa came from a TAXA block */
  int have_matrix;
} nexus;

static int is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
         c == '\f';
}

static int is_punct(char c) { return c == ';' || c == '=' || c == ','; }

/* Skip a comment; p is on its '['. Comments nest. */
static int skip_comment(nexus *x) {
  unsigned long start = x->line;
  int depth = 0;
  for (; x->p < x->end; x->p++) {
    char c = *x->p;
    if (c == '\n') x->line++;
    else if (c == '[') depth++;
    else if (c == ']' && --depth == 0) {
      x->p++;
      return 0;
    }
  }
  return plf_aln_fail(x->b, EMBER_EFORMAT, start,
                      "a comment '[' that is never closed");
}

/* Skip blanks, newlines and comments; stop_at_newline: stop on '\n'
 * (not consumed). Returns 0, or an error. */
static int skip_space(nexus *x, int stop_at_newline) {
  while (x->p < x->end) {
    char c = *x->p;
    if (c == '\n') {
      if (stop_at_newline) return 0;
      x->line++;
      x->p++;
    } else if (is_space(c)) {
      x->p++;
    } else if (c == '[') {
      if (skip_comment(x)) return x->b->rc;
    } else {
      break;
    }
  }
  return 0;
}

static void keep(nexus *x, char c) {
  if (x->tok_len < TOKEN_KEEP) x->tok[x->tok_len] = c;
  x->tok_len++;
}

/* The next token into x->tok; 0 at the end of the input (x->tok_len 0),
 * 1 when there is one, negative on an error. */
static int next_token(nexus *x) {
  x->tok_len = 0;
  x->quoted = 0;
  x->tok[0] = '\0';
  if (skip_space(x, 0)) return x->b->rc;
  if (x->p >= x->end) return 0;
  x->tok_line = x->line;
  char c = *x->p;
  if (is_punct(c)) {
    keep(x, c);
    x->p++;
  } else if (c == '\'') {
    x->quoted = 1;
    x->p++;
    for (;;) {
      if (x->p >= x->end)
        return plf_aln_fail(x->b, EMBER_EFORMAT, x->tok_line,
                            "a quoted word that is never closed");
      c = *x->p++;
      if (c == '\'') {
        if (x->p < x->end && *x->p == '\'') {
          x->p++;
        } else {
          break;
        }
      }
      if (c == '\n') x->line++;
      keep(x, c);
    }
  } else {
    while (x->p < x->end && !is_space(*x->p) && !is_punct(*x->p) &&
           *x->p != '[')
      keep(x, *x->p++);
  }
  x->tok[x->tok_len < TOKEN_KEEP ? x->tok_len : TOKEN_KEEP] = '\0';
  return 1;
}

static int is(const nexus *x, const char *word) {
  return !x->quoted && x->tok_len == strlen(word) &&
         strcasecmp(x->tok, word) == 0;
}

static const char *shown(const nexus *x) {
  return x->tok_len ? x->tok : "the end of the file";
}

static int expect(nexus *x, const char *what) {
  int r = next_token(x);
  if (r < 0) return r;
  if (r == 0 || !is(x, what))
    return plf_aln_fail(x->b, EMBER_EFORMAT, x->tok_len ? x->tok_line : x->line,
                        "expected '%s', found '%s'", what, shown(x));
  return 0;
}

/* Skip to the ';' that ends the current command. */
static int skip_command(nexus *x) {
  unsigned long start = x->tok_line;
  int r;
  while ((r = next_token(x)) > 0)
    if (is(x, ";")) return 0;
  if (r < 0) return r;
  return plf_aln_fail(x->b, EMBER_EFORMAT, start,
                      "a command that never ends (no ';')");
}

/* "= value" after an option keyword: the value token. */
static int option_value(nexus *x, const char *option) {
  int r = next_token(x);
  if (r > 0 && is(x, "=")) r = next_token(x);
  else if (r > 0) r = -1;
  if (r < 0 && x->b->rc) return x->b->rc;
  if (r <= 0 || is(x, ";"))
    return plf_aln_fail(x->b, EMBER_EFORMAT, x->tok_line,
                        "expected '%s=value'", option);
  return 0;
}

static int count_value(nexus *x, const char *option, size_t limit,
                       size_t *out) {
  if (option_value(x, option)) return x->b->rc;
  size_t v = 0;
  for (size_t i = 0; i < x->tok_len; i++) {
    char c = i < TOKEN_KEEP ? x->tok[i] : 'x';
    if (c < '0' || c > '9' || x->tok_len > 12)
      return plf_aln_fail(x->b, EMBER_EFORMAT, x->tok_line,
                          "%s=%s is not a count", option, x->tok);
    v = v * 10 + (size_t)(c - '0');
  }
  if (v == 0)
    return plf_aln_fail(x->b, EMBER_EFORMAT, x->tok_line, "%s=0", option);
  if (v > limit)
    return plf_aln_fail(x->b, EMBER_ETOOBIG, x->tok_line,
                        "%s=%zu (the limit is %zu)", option, v, limit);
  *out = v;
  return 0;
}

static int symbol_value(nexus *x, const char *option, char *out) {
  if (option_value(x, option)) return x->b->rc;
  if (x->tok_len != 1 || is_space(x->tok[0]))
    return plf_aln_fail(x->b, EMBER_EFORMAT, x->tok_line,
                        "%s=%s: expected one character", option, x->tok);
  *out = x->tok[0];
  return 0;
}

static int dimensions(nexus *x) {
  int r;
  while ((r = next_token(x)) > 0 && !is(x, ";")) {
    if (is(x, "NTAX")) {
      size_t before = x->ntax;
      if (count_value(x, "NTAX", PLF_ALN_MAX_TAXA, &x->ntax)) return x->b->rc;
      if (x->taxa_block && x->ntax != before)
        return plf_aln_fail(x->b, EMBER_EFORMAT, x->tok_line,
                            "NTAX=%zu, but the TAXA block has %zu taxa",
                            x->ntax, before);
    } else if (is(x, "NCHAR")) {
      if (count_value(x, "NCHAR", PLF_ALN_MAX_SITES, &x->nchar))
        return x->b->rc;
    } else if (!is(x, "NEWTAXA")) {
      return plf_aln_fail(x->b, EMBER_EFORMAT, x->tok_line,
                          "unknown DIMENSIONS option '%s'", x->tok);
    }
  }
  if (r < 0) return r;
  if (r == 0)
    return plf_aln_fail(x->b, EMBER_EFORMAT, x->line,
                        "DIMENSIONS never ends (no ';')");
  return 0;
}

static int datatype(nexus *x) {
  if (option_value(x, "DATATYPE")) return x->b->rc;
  plf_datatype t;
  if (is(x, "DNA") || is(x, "RNA") || is(x, "NUCLEOTIDE")) t = PLF_DATA_DNA;
  else if (is(x, "PROTEIN")) t = PLF_DATA_PROTEIN;
  else
    return plf_aln_fail(x->b, EMBER_EFORMAT, x->tok_line,
                        "DATATYPE=%.*s is not supported (DNA, RNA, "
                        "NUCLEOTIDE or PROTEIN)", (int)strcspn(x->tok, "("),
                        x->tok);
  if (x->b->type != PLF_DATA_AUTO && x->b->type != t)
    return plf_aln_fail(x->b, EMBER_EFORMAT, x->tok_line,
                        "DATATYPE=%s, but %s data was asked for", x->tok,
                        x->b->type == PLF_DATA_DNA ? "DNA" : "protein");
  x->b->type = t;
  return 0;
}

static int format(nexus *x) {
  int r;
  plf_aln_builder *b = x->b;
  while ((r = next_token(x)) > 0 && !is(x, ";")) {
    if (is(x, "DATATYPE")) {
      if (datatype(x)) return b->rc;
    } else if (is(x, "INTERLEAVE")) {
      /* INTERLEAVE alone, or INTERLEAVE=YES|NO */
      const char *save = x->p;
      unsigned long line = x->line;
      x->interleave = 1;
      if ((r = next_token(x)) < 0) return r;
      if (r > 0 && is(x, "=")) {
        if ((r = next_token(x)) < 0) return r;
        if (is(x, "NO")) x->interleave = 0;
        else if (!is(x, "YES"))
          return plf_aln_fail(b, EMBER_EFORMAT, x->tok_line,
                              "INTERLEAVE=%s: expected YES or NO", shown(x));
      } else {
        x->p = save;
        x->line = line;
      }
    } else if (is(x, "GAP")) {
      if (symbol_value(x, "GAP", &b->gap)) return b->rc;
    } else if (is(x, "MISSING")) {
      if (symbol_value(x, "MISSING", &b->missing)) return b->rc;
    } else if (is(x, "MATCHCHAR")) {
      if (symbol_value(x, "MATCHCHAR", &b->match)) return b->rc;
    } else if (is(x, "TRANSPOSE") || is(x, "TOKENS") || is(x, "EQUATE")) {
      return plf_aln_fail(b, EMBER_EFORMAT, x->tok_line,
                          "FORMAT %s is not supported", x->tok);
    } else {
      /* RESPECTCASE, LABELS, SYMBOLS="...", ...: skip, with any value */
      const char *save = x->p;
      unsigned long line = x->line;
      if ((r = next_token(x)) < 0) return r;
      if (r > 0 && is(x, "=")) {
        if ((r = next_token(x)) < 0) return r;
      } else {
        x->p = save;
        x->line = line;
      }
    }
  }
  if (r < 0) return r;
  if (r == 0)
    return plf_aln_fail(b, EMBER_EFORMAT, x->line,
                        "FORMAT never ends (no ';')");
  return 0;
}

/* The taxon a MATRIX row names: the expected one, any known one, or a new
 * one while the taxa are still being declared. */
static int row_taxon(nexus *x, size_t row, size_t *taxon) {
  plf_aln_builder *b = x->b;
  size_t n = x->tok_len;
  if (n > TOKEN_KEEP)
    return plf_aln_fail(b, EMBER_ETOOBIG, x->tok_line,
                        "a taxon name of %zu bytes (the limit is %d)", n,
                        PLF_ALN_MAX_NAME);
  size_t guess = row % x->ntax;
  if (guess < b->ntaxa && strcmp(plf_aln_taxon_name(b, guess), x->tok) == 0) {
    *taxon = guess;
    return 0;
  }
  for (size_t t = 0; t < b->ntaxa; t++)
    if (strcmp(plf_aln_taxon_name(b, t), x->tok) == 0) {
      *taxon = t;
      return 0;
    }
  if (x->taxa_block)
    return plf_aln_fail(b, EMBER_EFORMAT, x->tok_line,
                        "taxon '%s' is not in the TAXA block", x->tok);
  if (b->ntaxa >= x->ntax)
    return plf_aln_fail(b, EMBER_EFORMAT, x->tok_line,
                        "taxon '%s' is one more than NTAX=%zu", x->tok,
                        x->ntax);
  return plf_aln_add_taxon(b, x->tok, n, x->tok_line, taxon);
}

/* The characters of one row: up to the end of the line (interleaved) or
 * until the taxon has all its sites. */
static int row_chars(nexus *x, size_t taxon) {
  plf_aln_builder *b = x->b;
  for (;;) {
    if (skip_space(x, x->interleave)) return b->rc;
    if (x->p >= x->end || *x->p == ';' || *x->p == '\n') return 0;
    if (!x->interleave && b->taxa[taxon].len >= x->nchar) return 0;
    char c = *x->p;
    if (c == '(' || c == '{')
      return plf_aln_fail(b, EMBER_EFORMAT, x->line,
                          "taxon '%s' (site %zu): polymorphic or uncertain "
                          "states %c...%c are not supported",
                          plf_aln_taxon_name(b, taxon),
                          b->taxa[taxon].len + 1, c, c == '(' ? ')' : '}');
    const char *s = x->p;
    size_t room = x->interleave ? SIZE_MAX
                                : x->nchar - b->taxa[taxon].len;
    while (x->p < x->end && (size_t)(x->p - s) < room && !is_space(*x->p) &&
           *x->p != ';' && *x->p != '[' && *x->p != '(' && *x->p != '{')
      x->p++;
    if (plf_aln_append(b, taxon, s, (size_t)(x->p - s), x->line))
      return b->rc;
  }
}

static int matrix(nexus *x) {
  plf_aln_builder *b = x->b;
  unsigned long start = x->tok_line;
  if (x->have_matrix)
    return plf_aln_fail(b, EMBER_EFORMAT, start,
                        "a second MATRIX: only one alignment per file");
  x->have_matrix = 1;
  if (!x->nchar)
    return plf_aln_fail(b, EMBER_EFORMAT, start,
                        "MATRIX before DIMENSIONS NCHAR=");
  if (!x->ntax)
    return plf_aln_fail(b, EMBER_EFORMAT, start,
                        "MATRIX before NTAX= (in DIMENSIONS or a TAXA "
                        "block)");
  if ((uint64_t)x->ntax * x->nchar > PLF_ALN_MAX_CELLS)
    return plf_aln_fail(b, EMBER_ETOOBIG, start,
                        "NTAX=%zu x NCHAR=%zu characters (the limit is %d)",
                        x->ntax, x->nchar, PLF_ALN_MAX_CELLS);
  b->expect_sites = x->nchar;
  for (size_t row = 0;; row++) {
    if (skip_space(x, 0)) return b->rc;
    if (x->p >= x->end)
      return plf_aln_fail(b, EMBER_EFORMAT, start,
                          "MATRIX never ends (no ';')");
    if (*x->p == ';') {
      x->p++;
      break;
    }
    int r = next_token(x);
    if (r < 0) return r;
    if (is(x, "=") || is(x, ","))
      return plf_aln_fail(b, EMBER_EFORMAT, x->tok_line,
                          "expected a taxon name, found '%s'", x->tok);
    size_t taxon;
    if (row_taxon(x, row, &taxon)) return b->rc;
    if (!x->interleave && b->taxa[taxon].len > 0)
      return plf_aln_fail(b, EMBER_EFORMAT, x->tok_line,
                          "taxon '%s' appears twice in the MATRIX (also at "
                          "line %lu)", x->tok, b->taxa[taxon].line);
    if (row_chars(x, taxon)) return b->rc;
  }
  if (b->ntaxa != x->ntax)
    return plf_aln_fail(b, EMBER_EFORMAT, start,
                        "the MATRIX has %zu taxa, NTAX=%zu", b->ntaxa,
                        x->ntax);
  return 0;
}

static int block_end(nexus *x, const char *name, unsigned long start) {
  return plf_aln_fail(x->b, EMBER_EFORMAT, start,
                      "block %s never ends (no END;)", name);
}

static int data_block(nexus *x, const char *name, unsigned long start) {
  int r;
  while ((r = next_token(x)) > 0) {
    if (is(x, "END") || is(x, "ENDBLOCK")) return expect(x, ";");
    if (is(x, "DIMENSIONS")) r = dimensions(x);
    else if (is(x, "FORMAT")) r = format(x);
    else if (is(x, "MATRIX")) r = matrix(x);
    else r = skip_command(x);
    if (r) return r;
  }
  return r < 0 ? r : block_end(x, name, start);
}

static int taxa_block(nexus *x, unsigned long start) {
  plf_aln_builder *b = x->b;
  int r;
  if (b->ntaxa)
    return plf_aln_fail(b, EMBER_EFORMAT, start,
                        "a TAXA block after the taxa were declared");
  while ((r = next_token(x)) > 0) {
    if (is(x, "END") || is(x, "ENDBLOCK")) {
      if (b->ntaxa != x->ntax)
        return plf_aln_fail(b, EMBER_EFORMAT, start,
                            "the TAXA block lists %zu taxa, NTAX=%zu",
                            b->ntaxa, x->ntax);
      x->taxa_block = 1;
      return expect(x, ";");
    }
    if (is(x, "DIMENSIONS")) {
      r = dimensions(x);
    } else if (is(x, "TAXLABELS")) {
      if (!x->ntax)
        return plf_aln_fail(b, EMBER_EFORMAT, x->tok_line,
                            "TAXLABELS before DIMENSIONS NTAX=");
      size_t t;
      while ((r = next_token(x)) > 0 && !is(x, ";")) {
        if (b->ntaxa >= x->ntax)
          return plf_aln_fail(b, EMBER_EFORMAT, x->tok_line,
                              "taxon '%s' is one more than NTAX=%zu", x->tok,
                              x->ntax);
        if (x->tok_len > TOKEN_KEEP)
          return plf_aln_fail(b, EMBER_ETOOBIG, x->tok_line,
                              "a taxon name of %zu bytes (the limit is %d)",
                              x->tok_len, PLF_ALN_MAX_NAME);
        if (plf_aln_add_taxon(b, x->tok, x->tok_len, x->tok_line, &t))
          return b->rc;
      }
      if (r == 0) return block_end(x, "TAXA", start);
    } else {
      r = skip_command(x);
    }
    if (r < 0) return r;
  }
  return r < 0 ? r : block_end(x, "TAXA", start);
}

static int skip_block(nexus *x, const char *name, unsigned long start) {
  int r;
  while ((r = next_token(x)) > 0)
    if (is(x, "END") || is(x, "ENDBLOCK")) return expect(x, ";");
  return r < 0 ? r : block_end(x, name, start);
}

int plf_aln_read_nexus(plf_aln_builder *b, const char *data, size_t len,
                       plf_alignment **out) {
  nexus x;
  memset(&x, 0, sizeof x);
  x.b = b;
  x.p = data;
  x.end = data + len;
  x.line = 1;
  if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0) x.p += 3;
  int r = next_token(&x);
  if (r < 0) return b->rc;
  if (r == 0) return plf_aln_fail(b, EMBER_EFORMAT, 0, "empty input");
  if (!is(&x, "#NEXUS"))
    return plf_aln_fail(b, EMBER_EFORMAT, x.tok_line,
                        "expected '#NEXUS', found '%s'", x.tok);
  while ((r = next_token(&x)) > 0) {
    if (!is(&x, "BEGIN"))
      return plf_aln_fail(b, EMBER_EFORMAT, x.tok_line,
                          "expected BEGIN, found '%s'", x.tok);
    unsigned long start = x.tok_line;
    if ((r = next_token(&x)) < 0) return b->rc;
    if (r == 0 || is(&x, ";"))
      return plf_aln_fail(b, EMBER_EFORMAT, start,
                          "BEGIN without a block name");
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)sizeof name - 1, x.tok);
    if (expect(&x, ";")) return b->rc;
    if (strcasecmp(name, "DATA") == 0 || strcasecmp(name, "CHARACTERS") == 0)
      r = data_block(&x, name, start);
    else if (strcasecmp(name, "TAXA") == 0)
      r = taxa_block(&x, start);
    else
      r = skip_block(&x, name, start);
    if (r) return b->rc;
  }
  if (b->rc) return b->rc;
  if (!x.have_matrix)
    return plf_aln_fail(b, EMBER_EFORMAT, 0,
                        "no DATA or CHARACTERS block with a MATRIX");
  return plf_aln_finish(b, out);
}
