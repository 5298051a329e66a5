/*
 * plf_aln_internal.h - what the alignment readers share: the builder they
 * feed (plf_aln_builder.c), the line cursor, and the alignment itself.
 * Not installed; not for other parts.
 */
#ifndef PLF_ALN_INTERNAL_H
#define PLF_ALN_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "plf_alignment.h"

struct plf_alignment {
  plf_format format;
  plf_datatype type;
  int states;
  size_t ntaxa, nsites, npatterns;
  char *names;          /* arena of NUL-terminated names */
  size_t *name_off;     /* ntaxa offsets into names */
  size_t *sorted;       /* ntaxa taxon indices, by name */
  uint8_t *codes;       /* npatterns x ntaxa state codes, pattern-major */
  const uint32_t *code_mask; /* code -> bit set of states (static table) */
  double *weights;      /* npatterns */
  uint32_t *site_pattern; /* nsites */
};

/* One taxon while reading: its characters (upper case, gap '-', missing
 * '?') and the line that named it. */
typedef struct plf_aln_taxon {
  size_t name_off;
  unsigned long line;
  char *seq;
  size_t len, cap;
} plf_aln_taxon;

/* Where the characters of a line went: taxon, first site, line. Found
 * again when a character is refused after the data type is known. */
typedef struct plf_aln_segment {
  size_t taxon, start;
  unsigned long line;
} plf_aln_segment;

typedef struct plf_aln_builder {
  const char *source;
  char *err;
  size_t err_len;
  int rc;
  unsigned long err_line; /* line of the first error, 0 if none or none */
  int after_structure;    /* the error came from plf_aln_finish */
  plf_format format;
  plf_datatype type;      /* declared, or PLF_DATA_AUTO */
  char gap, missing, match; /* extra symbols (NEXUS FORMAT); 0 = none */
  size_t expect_sites;    /* from a header, 0 = not declared */
  char *names;
  size_t names_len, names_cap;
  plf_aln_taxon *taxa;
  size_t ntaxa, taxa_cap;
  size_t cells;           /* characters so far, all taxa */
  plf_aln_segment *segs;
  size_t nsegs, segs_cap;
  unsigned long last_line; /* the input's last line, for end-of-file errors */
} plf_aln_builder;

void plf_aln_builder_init(plf_aln_builder *b, const char *source, char *err,
                          size_t err_len, plf_format format,
                          plf_datatype type);
void plf_aln_builder_free(plf_aln_builder *b);

/* Record an error "source:line: reason" (line 0: "source: reason"); the
 * first error wins. Returns rc. */
int plf_aln_fail(plf_aln_builder *b, int rc, unsigned long line,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A new taxon called name[0..len) declared at line; its index in *taxon.
 * Checks the name (length, control bytes) and the taxon limit. */
int plf_aln_add_taxon(plf_aln_builder *b, const char *name, size_t len,
                      unsigned long line, size_t *taxon);

/* Append the characters of s[0..len) to taxon, skipping blanks: letters
 * (any case), '-', '?' and the builder's gap/missing/match symbols. Checks
 * the site and cell limits and, when expect_sites is set, that the taxon
 * does not grow beyond it. */
int plf_aln_append(plf_aln_builder *b, size_t taxon, const char *s,
                   size_t len, unsigned long line);

/* The taxon's name. */
const char *plf_aln_taxon_name(const plf_aln_builder *b, size_t taxon);

/* Check what was read and build the alignment: at least one taxon, equal
 * lengths (expect_sites when set), at least one site, no duplicate names,
 * the data type, every character valid for it; then compress. */
int plf_aln_finish(plf_aln_builder *b, plf_alignment **out);

/* The printable form of a byte for messages: 'x' or byte 0xNN. */
const char *plf_aln_byte_text(unsigned char c, char *buf, size_t len);

/* ---- lines --------------------------------------------------------------- */
typedef struct plf_aln_cursor {
  const char *p, *end;
  unsigned long line; /* of the line last returned */
} plf_aln_cursor;

/* The next line (without its '\n' and trailing '\r'), or 0 at the end. */
int plf_aln_next_line(plf_aln_cursor *c, const char **s, size_t *len);

int plf_aln_is_blank(const char *s, size_t len);

/* The readers: each reads data[0..len) through the builder (initialised
 * by the caller, freed by the caller) and finishes it into *out. */
int plf_aln_read_phylip(plf_aln_builder *b, const char *data, size_t len,
                        int strict, plf_alignment **out);
int plf_aln_read_fasta(plf_aln_builder *b, const char *data, size_t len,
                       plf_alignment **out);
int plf_aln_read_nexus(plf_aln_builder *b, const char *data, size_t len,
                       plf_alignment **out);

/* Pattern compression (plf_aln_patterns.c): codes is ntaxa rows of nsites
 * state codes; fills aln's patterns, weights and site map. */
int plf_aln_compress(plf_alignment *aln, uint8_t *const *codes);

#endif
