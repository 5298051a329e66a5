/*
 * plf_aln_phylip.c - PHYLIP alignments: a header "ntaxa nsites", then the
 * taxa, each a name followed by its characters (blanks ignored).
 *
 * Names: relaxed (the first word of the line, as RAxML, IQ-TREE and PhyML
 * read them) or strict (the first 10 characters, blanks trimmed).
 *
 * Layout: sequential (each taxon's characters run on over as many lines as
 * it takes) or interleaved (a first block of named lines, one per taxon,
 * then blocks of unnamed lines in the same order). The file does not say
 * which, so both readings are tried: sequential first, interleaved when it
 * fails. When both fail, the message of the reading that got further is
 * reported: one that reached the whole-alignment checks, else the one that
 * failed on the later line.
 */
#include <stdio.h>
#include <string.h>

#include "plf_aln_internal.h"

static int next_data_line(plf_aln_cursor *c, const char **s, size_t *n) {
  while (plf_aln_next_line(c, s, n))
    if (!plf_aln_is_blank(*s, *n)) return 1;
  return 0;
}

static int read_count(const char *s, size_t n, size_t *i, size_t *value) {
  size_t v = 0, start = *i;
  while (*i < n && s[*i] >= '0' && s[*i] <= '9') {
    if (v < 100000000000ull) v = v * 10 + (size_t)(s[*i] - '0');
    (*i)++;
  }
  *value = v;
  return *i > start;
}

static int read_header(plf_aln_builder *b, plf_aln_cursor *c, size_t *ntax,
                       size_t *nchar) {
  const char *s;
  size_t n, i = 0;
  if (!next_data_line(c, &s, &n))
    return plf_aln_fail(b, EMBER_EFORMAT, 0, "empty input: no sequences");
  if (n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) i = 3;
  while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
  int ok = read_count(s, n, &i, ntax);
  size_t gap = i;
  while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
  ok = ok && i > gap && read_count(s, n, &i, nchar);
  while (ok && i < n && (s[i] == ' ' || s[i] == '\t')) i++;
  if (!ok || i != n)
    return plf_aln_fail(b, EMBER_EFORMAT, c->line,
                        "expected a PHYLIP header 'ntaxa nsites'");
  if (*ntax == 0 || *nchar == 0)
    return plf_aln_fail(b, EMBER_EFORMAT, c->line,
                        "the header declares %zu taxa and %zu sites", *ntax,
                        *nchar);
  if (*ntax > PLF_ALN_MAX_TAXA)
    return plf_aln_fail(b, EMBER_ETOOBIG, c->line,
                        "the header declares %zu taxa (the limit is %d)",
                        *ntax, PLF_ALN_MAX_TAXA);
  if (*nchar > PLF_ALN_MAX_SITES)
    return plf_aln_fail(b, EMBER_ETOOBIG, c->line,
                        "the header declares %zu sites (the limit is %d)",
                        *nchar, PLF_ALN_MAX_SITES);
  if ((uint64_t)*ntax * *nchar > PLF_ALN_MAX_CELLS)
    return plf_aln_fail(b, EMBER_ETOOBIG, c->line,
                        "the header declares %zu x %zu characters (the "
                        "limit is %d)", *ntax, *nchar, PLF_ALN_MAX_CELLS);
  return 0;
}

/* A named line: add its taxon, append the rest. */
static int named_line(plf_aln_builder *b, const char *s, size_t n,
                      unsigned long line, int strict, size_t *taxon) {
  size_t nb, ne, rest;
  if (strict) {
    nb = 0;
    ne = n < 10 ? n : 10;
    rest = ne;
    while (nb < ne && (s[nb] == ' ' || s[nb] == '\t')) nb++;
    while (ne > nb && (s[ne - 1] == ' ' || s[ne - 1] == '\t')) ne--;
  } else {
    nb = 0;
    while (nb < n && (s[nb] == ' ' || s[nb] == '\t')) nb++;
    ne = nb;
    while (ne < n && s[ne] != ' ' && s[ne] != '\t') ne++;
    rest = ne;
  }
  if (plf_aln_add_taxon(b, s + nb, ne - nb, line, taxon)) return b->rc;
  return plf_aln_append(b, *taxon, s + rest, n - rest, line);
}

static int ends_early(plf_aln_builder *b, const plf_aln_cursor *c,
                      size_t have, size_t ntax) {
  return plf_aln_fail(b, EMBER_EFORMAT, c->line,
                      "the file ends after %zu of the %zu taxa declared",
                      have, ntax);
}

static int sequential(plf_aln_builder *b, plf_aln_cursor c, size_t ntax,
                      size_t nchar, int strict) {
  const char *s;
  size_t n, taxon;
  for (size_t i = 0; i < ntax; i++) {
    if (!next_data_line(&c, &s, &n)) return ends_early(b, &c, i, ntax);
    if (named_line(b, s, n, c.line, strict, &taxon)) return b->rc;
    while (b->taxa[taxon].len < nchar) {
      if (!next_data_line(&c, &s, &n))
        return plf_aln_fail(b, EMBER_EFORMAT, c.line,
                            "the file ends inside taxon '%s' (%zu of %zu "
                            "sites)", plf_aln_taxon_name(b, taxon),
                            b->taxa[taxon].len, nchar);
      if (plf_aln_append(b, taxon, s, n, c.line)) return b->rc;
    }
  }
  if (next_data_line(&c, &s, &n))
    return plf_aln_fail(b, EMBER_EFORMAT, c.line,
                        "text after the last of the %zu taxa declared", ntax);
  return 0;
}

/* After a block: every taxon as long as the first. */
static int block_even(plf_aln_builder *b, unsigned long line) {
  for (size_t t = 1; t < b->ntaxa; t++)
    if (b->taxa[t].len != b->taxa[0].len)
      return plf_aln_fail(b, EMBER_EFORMAT, line,
                          "interleaved block ending here: taxon '%s' has "
                          "%zu sites so far, '%s' has %zu",
                          plf_aln_taxon_name(b, t), b->taxa[t].len,
                          plf_aln_taxon_name(b, 0), b->taxa[0].len);
  return 0;
}

static int interleaved(plf_aln_builder *b, plf_aln_cursor c, size_t ntax,
                       int strict) {
  const char *s;
  size_t n, taxon;
  for (size_t i = 0; i < ntax; i++) {
    if (!next_data_line(&c, &s, &n)) return ends_early(b, &c, i, ntax);
    if (named_line(b, s, n, c.line, strict, &taxon)) return b->rc;
  }
  if (block_even(b, c.line)) return b->rc;
  size_t k = 0;
  while (next_data_line(&c, &s, &n)) {
    if (plf_aln_append(b, k % ntax, s, n, c.line)) return b->rc;
    if (++k % ntax == 0 && block_even(b, c.line)) return b->rc;
  }
  if (k % ntax)
    return plf_aln_fail(b, EMBER_EFORMAT, c.line,
                        "the file ends inside an interleaved block (%zu of "
                        "its %zu lines)", k % ntax, ntax);
  return 0;
}

int plf_aln_read_phylip(plf_aln_builder *b, const char *data, size_t len,
                        int strict, plf_alignment **out) {
  plf_aln_cursor c = {data, data + len, 0};
  size_t ntax = 0, nchar = 0;
  if (read_header(b, &c, &ntax, &nchar)) return b->rc;
  b->expect_sites = nchar;

  if (sequential(b, c, ntax, nchar, strict) == 0 &&
      plf_aln_finish(b, out) == 0)
    return 0;
  if (b->rc != EMBER_EFORMAT) return b->rc; /* no memory, over a limit */
  plf_aln_builder_free(b); /* its data; its error stays */

  char err2[1024];
  plf_aln_builder b2;
  plf_aln_builder_init(&b2, b->source, err2, sizeof err2, b->format, b->type);
  b2.expect_sites = nchar;
  if (interleaved(&b2, c, ntax, strict) == 0) plf_aln_finish(&b2, out);
  int take2 = b2.rc != EMBER_EFORMAT || /* success, no memory, a limit */
              (b2.after_structure && !b->after_structure) ||
              (b2.after_structure == b->after_structure &&
               b2.err_line > b->err_line);
  if (take2) {
    b->rc = b2.rc;
    if (b->err_len)
      snprintf(b->err, b->err_len, "%s", b2.rc ? err2 : "");
  }
  plf_aln_builder_free(&b2);
  return b->rc;
}
