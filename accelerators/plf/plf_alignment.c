/*
 * plf_alignment.c - the alignment API: format detection, reading files
 * (htslib's BGZF layer opens them and inflates gzip), and the accessors of
 * a built alignment. The readers are plf_aln_phylip.c, plf_aln_fasta.c and
 * plf_aln_nexus.c; the checks they share, plf_aln_builder.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <htslib/bgzf.h>
#include <htslib/hts.h>

#include "plf_aln_internal.h"

/* The format from the first non-blank character (a UTF-8 BOM skipped):
 * '>' or ';' (a comment) FASTA, "#NEXUS" NEXUS, a digit PHYLIP. */
static int detect_format(plf_aln_builder *b, const char *s, size_t len,
                         plf_format *format) {
  size_t i = 0;
  unsigned long line = 1;
  if (len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) i = 3;
  for (; i < len; i++) {
    if (s[i] == '\n') line++;
    else if (!(s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\v' ||
               s[i] == '\f'))
      break;
  }
  if (i == len)
    return plf_aln_fail(b, EMBER_EFORMAT, 0, "empty input: no sequences");
  if (s[i] == '>' || s[i] == ';') *format = PLF_FORMAT_FASTA;
  else if (len - i >= 6 && strncasecmp(s + i, "#NEXUS", 6) == 0)
    *format = PLF_FORMAT_NEXUS;
  else if (s[i] >= '0' && s[i] <= '9') *format = PLF_FORMAT_PHYLIP;
  else {
    char bt[16];
    return plf_aln_fail(b, EMBER_EFORMAT, line,
                        "cannot tell the format: the text starts with %s, "
                        "expected '>' (FASTA), '#NEXUS' or a PHYLIP header "
                        "'ntaxa nsites'",
                        plf_aln_byte_text((unsigned char)s[i], bt, sizeof bt));
  }
  return 0;
}

int plf_alignment_parse(const void *data, size_t len, const char *source,
                        plf_format format, plf_datatype type,
                        plf_alignment **out, char *err, size_t err_len) {
  if (out) *out = NULL;
  if (err && err_len) err[0] = '\0';
  if (!out || (!data && len) || format < PLF_FORMAT_AUTO ||
      format > PLF_FORMAT_NEXUS || type < PLF_DATA_AUTO ||
      type > PLF_DATA_PROTEIN) {
    if (err && err_len) snprintf(err, err_len, "invalid arguments");
    return EMBER_EINVAL;
  }
  plf_aln_builder b;
  plf_aln_builder_init(&b, source, err, err_len, format, type);
  const char *s = data ? data : "";
  if (len > PLF_ALN_MAX_BYTES) {
    plf_aln_fail(&b, EMBER_ETOOBIG, 0, "more than %d bytes of input",
                 PLF_ALN_MAX_BYTES);
  } else if (format != PLF_FORMAT_AUTO ||
             detect_format(&b, s, len, &b.format) == 0) {
    switch (b.format) {
    case PLF_FORMAT_PHYLIP:
    case PLF_FORMAT_PHYLIP_STRICT:
      plf_aln_read_phylip(&b, s, len, b.format == PLF_FORMAT_PHYLIP_STRICT,
                          out);
      break;
    case PLF_FORMAT_FASTA: plf_aln_read_fasta(&b, s, len, out); break;
    case PLF_FORMAT_NEXUS: plf_aln_read_nexus(&b, s, len, out); break;
    case PLF_FORMAT_AUTO: break;
    }
  }
  int rc = b.rc;
  plf_aln_builder_free(&b);
  return rc;
}

int plf_alignment_from_sequences(const char *const *names,
                                 const char *const *seqs, size_t n,
                                 plf_datatype type, plf_alignment **out,
                                 char *err, size_t err_len) {
  if (out) *out = NULL;
  if (err && err_len) err[0] = '\0';
  if (!out || (n && (!names || !seqs)) || type < PLF_DATA_AUTO ||
      type > PLF_DATA_PROTEIN) {
    if (err && err_len) snprintf(err, err_len, "invalid arguments");
    return EMBER_EINVAL;
  }
  plf_aln_builder b;
  plf_aln_builder_init(&b, "sequences", err, err_len, PLF_FORMAT_FASTA, type);
  for (size_t i = 0; i < n && !b.rc; i++) {
    unsigned long line = (unsigned long)i + 1;
    size_t taxon;
    if (!names[i] || !seqs[i])
      plf_aln_fail(&b, EMBER_EINVAL, line, "a NULL name or sequence");
    else if (plf_aln_add_taxon(&b, names[i], strlen(names[i]), line,
                               &taxon) == 0)
      plf_aln_append(&b, taxon, seqs[i], strlen(seqs[i]), line);
  }
  if (!b.rc) plf_aln_finish(&b, out);
  int rc = b.rc;
  plf_aln_builder_free(&b);
  return rc;
}

/* The whole file, inflated, in *buf (NUL-terminated; *len without it). */
static int slurp(plf_aln_builder *b, const char *path, char **buf,
                 size_t *len) {
  struct stat st;
  if (stat(path, &st) != 0)
    return plf_aln_fail(b, EMBER_EIO, 0, "cannot open: %s", strerror(errno));
  if (S_ISDIR(st.st_mode))
    return plf_aln_fail(b, EMBER_EIO, 0, "cannot open: it is a directory");
  hts_set_log_level(HTS_LOG_OFF); /* the reasons are reported here */
  errno = 0;
  BGZF *fp = bgzf_open(path, "r");
  if (!fp)
    return plf_aln_fail(b, EMBER_EIO, 0, "cannot open: %s",
                        errno ? strerror(errno) : "unreadable");
  size_t cap = 1 << 16, n = 0;
  char *data = malloc(cap);
  int rc = data ? 0 : plf_aln_fail(b, EMBER_ENOMEM, 0, "out of memory");
  while (!rc) {
    if (cap - n < 4096) {
      if (cap > PLF_ALN_MAX_BYTES) {
        rc = plf_aln_fail(b, EMBER_ETOOBIG, 0, "more than %d bytes of input",
                          PLF_ALN_MAX_BYTES);
        break;
      }
      char *nd = realloc(data, cap * 2);
      if (!nd) {
        rc = plf_aln_fail(b, EMBER_ENOMEM, 0, "out of memory");
        break;
      }
      data = nd;
      cap *= 2;
    }
    ssize_t got = bgzf_read(fp, data + n, cap - n - 1);
    if (got < 0) {
      rc = plf_aln_fail(b, EMBER_EIO, 0, "read error%s",
                        bgzf_compression(fp) != no_compression
                            ? " (a truncated or corrupt gzip file?)" : "");
    } else if (got == 0) {
      break;
    } else {
      n += (size_t)got;
      if (n > PLF_ALN_MAX_BYTES)
        rc = plf_aln_fail(b, EMBER_ETOOBIG, 0, "more than %d bytes of input",
                          PLF_ALN_MAX_BYTES);
    }
  }
  if (bgzf_close(fp) != 0 && !rc)
    rc = plf_aln_fail(b, EMBER_EIO, 0,
                      "read error (a truncated or corrupt gzip file?)");
  if (rc) {
    free(data);
    return rc;
  }
  data[n] = '\0';
  *buf = data;
  *len = n;
  return 0;
}

int plf_alignment_read(const char *path, plf_format format, plf_datatype type,
                       plf_alignment **out, char *err, size_t err_len) {
  if (out) *out = NULL;
  if (!path || !out) {
    if (err && err_len) snprintf(err, err_len, "invalid arguments");
    return EMBER_EINVAL;
  }
  plf_aln_builder b;
  plf_aln_builder_init(&b, path, err, err_len, format, type);
  char *data = NULL;
  size_t len = 0;
  int rc = slurp(&b, path, &data, &len);
  plf_aln_builder_free(&b);
  if (rc) return rc;
  rc = plf_alignment_parse(data, len, path, format, type, out, err, err_len);
  free(data);
  return rc;
}

void plf_alignment_destroy(plf_alignment *aln) {
  if (!aln) return;
  free(aln->names);
  free(aln->name_off);
  free(aln->sorted);
  free(aln->codes);
  free(aln->weights);
  free(aln->site_pattern);
  free(aln);
}

size_t plf_alignment_taxa(const plf_alignment *aln) { return aln->ntaxa; }
size_t plf_alignment_sites(const plf_alignment *aln) { return aln->nsites; }
size_t plf_alignment_patterns(const plf_alignment *aln) {
  return aln->npatterns;
}
plf_datatype plf_alignment_datatype(const plf_alignment *aln) {
  return aln->type;
}
int plf_alignment_states(const plf_alignment *aln) { return aln->states; }
plf_format plf_alignment_format(const plf_alignment *aln) {
  return aln->format;
}

const char *plf_alignment_name(const plf_alignment *aln, size_t taxon) {
  return taxon < aln->ntaxa ? aln->names + aln->name_off[taxon] : NULL;
}

int plf_alignment_find(const plf_alignment *aln, const char *name,
                       size_t *taxon) {
  if (!name) return EMBER_ENOTFOUND;
  size_t lo = 0, hi = aln->ntaxa;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    size_t t = aln->sorted[mid];
    int c = strcmp(name, aln->names + aln->name_off[t]);
    if (c == 0) {
      if (taxon) *taxon = t;
      return 0;
    }
    if (c < 0) hi = mid;
    else lo = mid + 1;
  }
  return EMBER_ENOTFOUND;
}

const double *plf_alignment_weights(const plf_alignment *aln) {
  return aln->weights;
}

const uint32_t *plf_alignment_site_patterns(const plf_alignment *aln) {
  return aln->site_pattern;
}

uint32_t plf_alignment_mask(const plf_alignment *aln, size_t taxon,
                            size_t pattern) {
  if (taxon >= aln->ntaxa || pattern >= aln->npatterns) return 0;
  return aln->code_mask[aln->codes[pattern * aln->ntaxa + taxon]];
}

double plf_alignment_constant_fraction(const plf_alignment *aln) {
  double constant = 0;
  for (size_t p = 0; p < aln->npatterns; p++) {
    const uint8_t *col = aln->codes + p * aln->ntaxa;
    uint32_t common = ~0u;
    for (size_t t = 0; t < aln->ntaxa && common; t++)
      common &= aln->code_mask[col[t]];
    if (common) constant += aln->weights[p];
  }
  return constant / (double)aln->nsites;
}
