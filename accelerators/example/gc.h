/*
 * gc.h - the GC content of DNA sequences: the example accelerator's own
 * code, which knows nothing of ember's descriptor (gc_descriptor.c binds
 * the two).
 *
 * Input: one block of sequences, one per line ('\n'); a last '\n' is
 * optional. A sequence is one or more of A, C, G, T in either case;
 * anything else, an empty line or '\r' is malformed.
 * Output: per sequence, in input order, its GC fraction (G + C) / length as
 * an IEEE-754 binary64 in little-endian byte order: 8 bytes a sequence, so
 * the output's size divided by 8 is the number of sequences.
 */
#ifndef GC_H
#define GC_H

#include <stddef.h>
#include <stdint.h>

/* gc_check - check data (size bytes) and count its sequences in *n_seqs.
 * Returns 0, or -1 with the reason ("line 2, column 5: ...") in err. */
int gc_check(const uint8_t *data, size_t size, size_t *n_seqs, char *err,
             size_t err_len);

/* gc_compute - write the 8 * n_seqs bytes of the output of checked data
 * into out. */
void gc_compute(const uint8_t *data, size_t size, uint8_t *out);

#endif
