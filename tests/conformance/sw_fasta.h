/*
 * sw_fasta.h - a small FASTA reader and seqset builder shared by the sw
 * test data generator, conformance tests and benchmark (test code only).
 */
#ifndef EMBER_TESTS_SW_FASTA_H
#define EMBER_TESTS_SW_FASTA_H

#include <stddef.h>
#include <stdint.h>

typedef struct swt_fasta {
  size_t n;
  char **names;     /* header up to the first blank, without '>' */
  char **seqs;      /* residues, NUL-terminated, blanks removed */
  size_t *lens;
} swt_fasta;

/* swt_fasta_read: read every record of path. Returns 0, or -1 after
 * printing the reason to stderr. */
int swt_fasta_read(const char *path, swt_fasta *out);

void swt_fasta_free(swt_fasta *f);

/* swt_seqset: a malloc'd seqset block (accelerators/sw/seqset.h) of
 * records first .. first+count-1, its size in *size; NULL on failure. */
uint8_t *swt_seqset(const swt_fasta *f, size_t first, size_t count,
                    size_t *size);

/* swt_seqset_pairs: like swt_seqset for the records listed in idx. */
uint8_t *swt_seqset_list(const swt_fasta *f, const size_t *idx, size_t count,
                         size_t *size);

#endif
