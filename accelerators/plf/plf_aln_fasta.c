/*
 * plf_aln_fasta.c - aligned FASTA: '>' starts a record whose name is the
 * first word of the line (the rest is a description); the lines up to the
 * next '>' are its sequence. Blank lines and ';' comment lines are
 * skipped. The bytes come from plf_alignment_read (htslib's BGZF layer,
 * which inflates gzip) or from memory.
 */
#include <string.h>

#include "plf_aln_internal.h"

int plf_aln_read_fasta(plf_aln_builder *b, const char *data, size_t len,
                       plf_alignment **out) {
  plf_aln_cursor c = {data, data + len, 0};
  const char *s;
  size_t n, taxon = 0;
  int open = 0;
  while (!b->rc && plf_aln_next_line(&c, &s, &n)) {
    if (n >= 3 && c.line == 1 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) {
      s += 3;
      n -= 3;
    }
    if (plf_aln_is_blank(s, n) || s[0] == ';') continue;
    if (s[0] == '>') {
      size_t i = 1;
      while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
      size_t e = i;
      while (e < n && s[e] != ' ' && s[e] != '\t') e++;
      if (e == i)
        return plf_aln_fail(b, EMBER_EFORMAT, c.line,
                            "a '>' line without a name");
      if (plf_aln_add_taxon(b, s + i, e - i, c.line, &taxon)) break;
      open = 1;
      continue;
    }
    if (!open) {
      char bt[16];
      return plf_aln_fail(b, EMBER_EFORMAT, c.line,
                          "expected a '>' line, found %s",
                          plf_aln_byte_text((unsigned char)s[0], bt,
                                            sizeof bt));
    }
    plf_aln_append(b, taxon, s, n, c.line);
  }
  if (b->rc) return b->rc;
  return plf_aln_finish(b, out);
}
