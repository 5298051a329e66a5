/*
 * plf_aln_builder.c - what every alignment reader feeds: taxa, their
 * characters and where they came from; the checks that need the whole
 * alignment (lengths, duplicates, data type, characters valid for it); the
 * state codes handed to pattern compression.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plf_aln_internal.h"

/* ---- state codes --------------------------------------------------------
 * DNA: the code is the bit set itself (A 1, C 2, G 4, T 8), 1..15.
 * Protein: 0..19 the states, 20 B (D|N), 21 Z (E|Q), 22 J (I|L), 23 any. */
enum { CODE_BAD = 0xFF, PROT_B = 20, PROT_Z, PROT_J, PROT_ANY, PROT_CODES };

static const char protein_order[] = "ARNDCQEGHILKMFPSTWYV";

static const uint32_t dna_masks[16] = {0, 1, 2, 3, 4, 5, 6, 7,
                                       8, 9, 10, 11, 12, 13, 14, 15};
/* bits in protein_order: N 2, D 3, Q 5, E 6, I 9, L 10 */
#define BIT(i) (1u << (i))
static const uint32_t protein_masks[PROT_CODES] = {
    BIT(0),  BIT(1),  BIT(2),  BIT(3),  BIT(4),  BIT(5),  BIT(6),
    BIT(7),  BIT(8),  BIT(9),  BIT(10), BIT(11), BIT(12), BIT(13),
    BIT(14), BIT(15), BIT(16), BIT(17), BIT(18), BIT(19),
    BIT(3) | BIT(2),  /* B = D|N */
    BIT(6) | BIT(5),  /* Z = E|Q */
    BIT(9) | BIT(10), /* J = I|L */
    BIT(20) - 1};     /* X, gap, missing */
#undef BIT

static uint8_t dna_code(char c) {
  switch (c) {
  case 'A': return 1;
  case 'C': return 2;
  case 'G': return 4;
  case 'T': case 'U': return 8;
  case 'R': return 1 | 4;
  case 'Y': return 2 | 8;
  case 'M': return 1 | 2;
  case 'K': return 4 | 8;
  case 'S': return 2 | 4;
  case 'W': return 1 | 8;
  case 'H': return 1 | 2 | 8;
  case 'B': return 2 | 4 | 8;
  case 'V': return 1 | 2 | 4;
  case 'D': return 1 | 4 | 8;
  case 'N': case '-': case '?': return 15;
  default: return CODE_BAD;
  }
}

static uint8_t protein_code(char c) {
  switch (c) {
  case 'B': return PROT_B;
  case 'Z': return PROT_Z;
  case 'J': return PROT_J;
  case 'X': case '-': case '?': return PROT_ANY;
  default: {
    const char *p = c ? strchr(protein_order, c) : NULL;
    return p ? (uint8_t)(p - protein_order) : CODE_BAD;
  }
  }
}

/* ---- builder ------------------------------------------------------------- */
void plf_aln_builder_init(plf_aln_builder *b, const char *source, char *err,
                          size_t err_len, plf_format format,
                          plf_datatype type) {
  memset(b, 0, sizeof *b);
  b->source = source ? source : "input";
  b->err = err;
  b->err_len = err ? err_len : 0;
  b->format = format;
  b->type = type;
  if (b->err_len) b->err[0] = '\0';
}

void plf_aln_builder_free(plf_aln_builder *b) {
  for (size_t i = 0; i < b->ntaxa; i++) free(b->taxa[i].seq);
  free(b->taxa);
  free(b->names);
  free(b->segs);
  b->taxa = NULL;
  b->names = NULL;
  b->segs = NULL;
  b->ntaxa = b->nsegs = 0;
}

int plf_aln_fail(plf_aln_builder *b, int rc, unsigned long line,
                 const char *fmt, ...) {
  if (b->rc) return b->rc;
  b->rc = rc;
  b->err_line = line;
  if (b->err_len) {
    int n = line ? snprintf(b->err, b->err_len, "%s:%lu: ", b->source, line)
                 : snprintf(b->err, b->err_len, "%s: ", b->source);
    if (n >= 0 && (size_t)n < b->err_len) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(b->err + n, b->err_len - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return rc;
}

const char *plf_aln_byte_text(unsigned char c, char *buf, size_t len) {
  if (c > 0x20 && c < 0x7F) snprintf(buf, len, "'%c'", c);
  else snprintf(buf, len, "byte 0x%02x", c);
  return buf;
}

/* Room for need more elements of size elem in *buf (holding len of cap). */
static int reserve(plf_aln_builder *b, void **buf, size_t *cap, size_t len,
                   size_t need, size_t elem) {
  if (need > SIZE_MAX / elem - len)
    return plf_aln_fail(b, EMBER_ENOMEM, 0, "out of memory");
  size_t want = len + need;
  if (want <= *cap) return 0;
  size_t c = *cap ? *cap : 16;
  while (c < want) c = c > SIZE_MAX / elem / 2 ? want : c * 2;
  void *nb = realloc(*buf, c * elem);
  if (!nb) return plf_aln_fail(b, EMBER_ENOMEM, 0, "out of memory");
  *buf = nb;
  *cap = c;
  return 0;
}

const char *plf_aln_taxon_name(const plf_aln_builder *b, size_t taxon) {
  return b->names + b->taxa[taxon].name_off;
}

int plf_aln_add_taxon(plf_aln_builder *b, const char *name, size_t len,
                      unsigned long line, size_t *taxon) {
  if (b->rc) return b->rc;
  if (len == 0)
    return plf_aln_fail(b, EMBER_EFORMAT, line, "a taxon without a name");
  if (len > PLF_ALN_MAX_NAME)
    return plf_aln_fail(b, EMBER_ETOOBIG, line,
                        "a taxon name of %zu bytes (the limit is %d)", len,
                        PLF_ALN_MAX_NAME);
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)name[i];
    if (c < 0x20 || c == 0x7F)
      return plf_aln_fail(b, EMBER_EFORMAT, line,
                          "control byte 0x%02x in a taxon name", c);
  }
  if (b->ntaxa >= PLF_ALN_MAX_TAXA)
    return plf_aln_fail(b, EMBER_ETOOBIG, line,
                        "more than %d taxa", PLF_ALN_MAX_TAXA);
  if (reserve(b, (void **)&b->taxa, &b->taxa_cap, b->ntaxa, 1,
              sizeof *b->taxa) ||
      reserve(b, (void **)&b->names, &b->names_cap, b->names_len, len + 1, 1))
    return b->rc;
  plf_aln_taxon *t = &b->taxa[b->ntaxa];
  memset(t, 0, sizeof *t);
  t->name_off = b->names_len;
  t->line = line;
  memcpy(b->names + b->names_len, name, len);
  b->names[b->names_len + len] = '\0';
  b->names_len += len + 1;
  *taxon = b->ntaxa++;
  return 0;
}

static int add_segment(plf_aln_builder *b, size_t taxon, size_t start,
                       unsigned long line) {
  if (b->nsegs) {
    const plf_aln_segment *last = &b->segs[b->nsegs - 1];
    if (last->taxon == taxon && last->line == line) return 0;
  }
  if (reserve(b, (void **)&b->segs, &b->segs_cap, b->nsegs, 1,
              sizeof *b->segs))
    return b->rc;
  b->segs[b->nsegs++] = (plf_aln_segment){taxon, start, line};
  return 0;
}

static int is_blank_byte(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r';
}

int plf_aln_append(plf_aln_builder *b, size_t taxon, const char *s,
                   size_t len, unsigned long line) {
  if (b->rc) return b->rc;
  plf_aln_taxon *t = &b->taxa[taxon];
  size_t start = t->len;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (is_blank_byte(c)) continue;
    char out;
    if (b->match && c == (unsigned char)b->match) {
      if (taxon == 0 || b->taxa[0].len <= t->len)
        return plf_aln_fail(b, EMBER_EFORMAT, line,
                            "match character '%c' in taxon '%s' (site %zu) "
                            "has no first-taxon character to copy",
                            c, plf_aln_taxon_name(b, taxon), t->len + 1);
      out = b->taxa[0].seq[t->len];
    } else if (b->gap && c == (unsigned char)b->gap) {
      out = '-';
    } else if (b->missing && c == (unsigned char)b->missing) {
      out = '?';
    } else if (c == '-' || c == '?') {
      out = (char)c;
    } else if (isascii(c) && isalpha(c) && toupper(c) != 'O') {
      out = (char)toupper(c);
    } else {
      char bt[16];
      return plf_aln_fail(b, EMBER_EFORMAT, line,
                          "unknown character %s in taxon '%s' (site %zu)",
                          plf_aln_byte_text(c, bt, sizeof bt),
                          plf_aln_taxon_name(b, taxon), t->len + 1);
    }
    if (b->expect_sites && t->len >= b->expect_sites)
      return plf_aln_fail(b, EMBER_EFORMAT, line,
                          "taxon '%s' has more than the %zu sites declared",
                          plf_aln_taxon_name(b, taxon), b->expect_sites);
    if (t->len >= PLF_ALN_MAX_SITES)
      return plf_aln_fail(b, EMBER_ETOOBIG, line,
                          "taxon '%s' has more than %d sites",
                          plf_aln_taxon_name(b, taxon), PLF_ALN_MAX_SITES);
    if (b->cells >= PLF_ALN_MAX_CELLS)
      return plf_aln_fail(b, EMBER_ETOOBIG, line,
                          "more than %d characters in all (taxa x sites)",
                          PLF_ALN_MAX_CELLS);
    if (t->len == t->cap &&
        reserve(b, (void **)&t->seq, &t->cap, t->len, 1, 1))
      return b->rc;
    t->seq[t->len++] = out;
    b->cells++;
  }
  if (t->len > start) return add_segment(b, taxon, start, line);
  return 0;
}

/* ---- lines --------------------------------------------------------------- */
int plf_aln_next_line(plf_aln_cursor *c, const char **s, size_t *len) {
  if (c->p >= c->end) return 0;
  const char *nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
  size_t n = nl ? (size_t)(nl - c->p) : (size_t)(c->end - c->p);
  *s = c->p;
  c->p += n + (nl != NULL);
  while (n && (*s)[n - 1] == '\r') n--;
  *len = n;
  c->line++;
  return 1;
}

int plf_aln_is_blank(const char *s, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (!is_blank_byte((unsigned char)s[i])) return 0;
  return 1;
}

/* ---- finish -------------------------------------------------------------- */
static int cmp_names(const void *a, const void *b, void *ctx) {
  const plf_aln_builder *bld = ctx;
  size_t i = *(const size_t *)a, j = *(const size_t *)b;
  int c = strcmp(plf_aln_taxon_name(bld, i), plf_aln_taxon_name(bld, j));
  if (c) return c;
  return i < j ? -1 : i > j;
}

/* The line that holds site `site` of taxon `taxon`. */
static unsigned long line_of(const plf_aln_builder *b, size_t taxon,
                             size_t site) {
  unsigned long line = b->taxa[taxon].line;
  for (size_t i = 0; i < b->nsegs; i++)
    if (b->segs[i].taxon == taxon && b->segs[i].start <= site)
      line = b->segs[i].line;
  return line;
}

static plf_datatype detect_type(const plf_aln_builder *b) {
  size_t letters = 0, nuc = 0;
  for (size_t t = 0; t < b->ntaxa; t++)
    for (size_t s = 0; s < b->taxa[t].len; s++) {
      char c = b->taxa[t].seq[s];
      if (c == '-' || c == '?') continue;
      letters++;
      if (strchr("ACGTUN", c)) nuc++;
    }
  return (letters == 0 || nuc >= 0.9 * (double)letters) ? PLF_DATA_DNA
                                                        : PLF_DATA_PROTEIN;
}

static int finish_fail(plf_aln_builder *b, int rc, unsigned long line,
                       const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int finish_fail(plf_aln_builder *b, int rc, unsigned long line,
                       const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  b->after_structure = 1;
  return plf_aln_fail(b, rc, line, "%s", msg);
}

static int check_shape(plf_aln_builder *b) {
  size_t want = b->expect_sites ? b->expect_sites : b->taxa[0].len;
  for (size_t t = 0; t < b->ntaxa; t++) {
    if (b->taxa[t].len == want) continue;
    if (b->expect_sites)
      return finish_fail(b, EMBER_EFORMAT, b->taxa[t].line,
                         "taxon '%s' has %zu sites, %zu were declared",
                         plf_aln_taxon_name(b, t), b->taxa[t].len, want);
    return finish_fail(b, EMBER_EFORMAT, b->taxa[t].line,
                       "unequal lengths: sequence '%s' has %zu sites, the "
                       "first one ('%s', line %lu) has %zu",
                       plf_aln_taxon_name(b, t), b->taxa[t].len,
                       plf_aln_taxon_name(b, 0), b->taxa[0].line, want);
  }
  if (want == 0)
    return finish_fail(b, EMBER_EFORMAT, b->taxa[0].line,
                       "the sequences have no sites");
  return 0;
}

static int check_duplicates(plf_aln_builder *b, size_t *sorted) {
  for (size_t i = 0; i < b->ntaxa; i++) sorted[i] = i;
  qsort_r(sorted, b->ntaxa, sizeof *sorted, cmp_names, b);
  for (size_t i = 1; i < b->ntaxa; i++) {
    size_t x = sorted[i - 1], y = sorted[i];
    if (strcmp(plf_aln_taxon_name(b, x), plf_aln_taxon_name(b, y)) == 0)
      return finish_fail(b, EMBER_EFORMAT, b->taxa[y].line,
                         "duplicate taxon name '%s' (also at line %lu)",
                         plf_aln_taxon_name(b, y), b->taxa[x].line);
  }
  return 0;
}

/* Characters to codes, in place. */
static int encode(plf_aln_builder *b, plf_datatype type) {
  const char *what = type == PLF_DATA_DNA ? "DNA" : "protein";
  for (size_t t = 0; t < b->ntaxa; t++) {
    char *seq = b->taxa[t].seq;
    for (size_t s = 0; s < b->taxa[t].len; s++) {
      uint8_t code = type == PLF_DATA_DNA ? dna_code(seq[s])
                                          : protein_code(seq[s]);
      if (code == CODE_BAD)
        return finish_fail(b, EMBER_EFORMAT, line_of(b, t, s),
                           "unknown character '%c' in taxon '%s' (site %zu): "
                           "not a %s code", seq[s], plf_aln_taxon_name(b, t),
                           s + 1, what);
      seq[s] = (char)code;
    }
  }
  return 0;
}

int plf_aln_finish(plf_aln_builder *b, plf_alignment **out) {
  *out = NULL;
  if (b->rc) return b->rc;
  if (b->ntaxa == 0)
    return finish_fail(b, EMBER_EFORMAT, 0, "empty input: no sequences");
  plf_alignment *aln = calloc(1, sizeof *aln);
  if (!aln) return plf_aln_fail(b, EMBER_ENOMEM, 0, "out of memory");
  aln->ntaxa = b->ntaxa;
  aln->nsites = b->taxa[0].len;
  aln->sorted = malloc(b->ntaxa * sizeof *aln->sorted);
  aln->name_off = malloc(b->ntaxa * sizeof *aln->name_off);
  uint8_t **rows = malloc(b->ntaxa * sizeof *rows);
  if (!aln->sorted || !aln->name_off || !rows) {
    plf_aln_fail(b, EMBER_ENOMEM, 0, "out of memory");
    goto fail;
  }
  /* names first: a repeated name explains a short taxon better */
  if (check_duplicates(b, aln->sorted) || check_shape(b)) goto fail;
  aln->type = b->type != PLF_DATA_AUTO ? b->type : detect_type(b);
  if (encode(b, aln->type)) goto fail;
  aln->format = b->format;
  aln->states = aln->type == PLF_DATA_DNA ? 4 : 20;
  aln->code_mask = aln->type == PLF_DATA_DNA ? dna_masks : protein_masks;
  for (size_t t = 0; t < b->ntaxa; t++) {
    aln->name_off[t] = b->taxa[t].name_off;
    rows[t] = (uint8_t *)b->taxa[t].seq;
  }
  int rc = plf_aln_compress(aln, rows);
  if (rc) {
    plf_aln_fail(b, rc, 0, "out of memory");
    goto fail;
  }
  aln->names = b->names;
  b->names = NULL;
  free(rows);
  *out = aln;
  return 0;
fail:
  free(rows);
  plf_alignment_destroy(aln);
  return b->rc;
}
