/*
 * plf_alignment.h - multiple sequence alignments for the plf accelerator
 * (phylogenetic likelihood): reading, checking, pattern compression and
 * the tip encodings that likelihood kernels take.
 *
 * Formats: PHYLIP (sequential or interleaved, relaxed names, or strict
 * 10-character names on request), FASTA and NEXUS (DATA or CHARACTERS
 * blocks, with a TAXA block or without). Files may be gzip'd (htslib's BGZF
 * layer inflates them).
 *
 * Data: DNA (4 states, order A C G T; U reads as T) or protein (20 states,
 * order A R N D C Q E G H I L K M F P S T W Y V, PAML's). Ambiguity codes
 * become sets of states: DNA R Y M K S W H B V D N, protein B = D|N,
 * Z = E|Q, J = I|L, X = any. A gap '-' and '?' are missing data (every
 * state possible), as in IQ-TREE, PhyML and BEAGLE. Letters are read
 * without regard to case.
 *
 * Identical columns are compressed into patterns, in the order of their
 * first occurrence, each with its weight (how many sites it stands for).
 *
 * Every parser error reads "source:line: reason" (just "source: reason"
 * where no line applies) in the caller's buffer.
 *
 * An alignment is immutable once built: its functions may be called from
 * any number of threads at once. Create and destroy are not thread-safe on
 * the same object.
 */
#ifndef PLF_ALIGNMENT_H
#define PLF_ALIGNMENT_H

#include <stddef.h>
#include <stdint.h>

#include "ember/ember_errors.h"

/* Hard limits, checked before anything of that size is allocated. */
#define PLF_ALN_MAX_TAXA 100000           /* sequences */
#define PLF_ALN_MAX_SITES 16777216        /* columns (2^24) */
#define PLF_ALN_MAX_CELLS 268435456       /* taxa x sites (2^28) */
#define PLF_ALN_MAX_NAME 256              /* bytes in a taxon name */
#define PLF_ALN_MAX_BYTES 1073741824      /* input, after inflation (1 GiB) */

/* The most states of any data type (protein). */
#define PLF_MAX_STATES 20

typedef enum plf_format {
  PLF_FORMAT_AUTO = 0,     /* from the first non-blank character */
  PLF_FORMAT_PHYLIP,       /* relaxed: the name is the first word */
  PLF_FORMAT_PHYLIP_STRICT, /* the name is the first 10 characters */
  PLF_FORMAT_FASTA,
  PLF_FORMAT_NEXUS
} plf_format;

typedef enum plf_datatype {
  PLF_DATA_AUTO = 0, /* DNA when at least 90% of the letters (gaps and '?'
                        left out) are A, C, G, T, U or N; protein otherwise.
                        A NEXUS DATATYPE= wins over auto. */
  PLF_DATA_DNA,
  PLF_DATA_PROTEIN
} plf_datatype;

typedef struct plf_alignment plf_alignment;

/*
 * plf_alignment_parse - read an alignment from memory.
 *   data, len   the text (not NUL-terminated; len may be 0)
 *   source      name for messages ("input" when NULL)
 *   format      PLF_FORMAT_AUTO, or the format to expect
 *   type        PLF_DATA_AUTO, or the data type to expect
 *   out         receives the alignment (NULL on failure); the caller owns
 *               it and frees it with plf_alignment_destroy()
 *   err         receives "source:line: reason" on failure (may be NULL
 *               when err_len is 0)
 * Returns 0, EMBER_EFORMAT (malformed input: empty input, unequal lengths,
 * unknown characters, duplicate names, bad headers), EMBER_ETOOBIG (over a
 * PLF_ALN_MAX_* limit), EMBER_EINVAL (bad arguments) or EMBER_ENOMEM.
 */
int plf_alignment_parse(const void *data, size_t len, const char *source,
                        plf_format format, plf_datatype type,
                        plf_alignment **out, char *err, size_t err_len);

/*
 * plf_alignment_read - plf_alignment_parse() on a file, plain or gzip'd;
 * the path is the source in messages. Also returns EMBER_EIO when the file
 * cannot be opened or read.
 */
int plf_alignment_read(const char *path, plf_format format, plf_datatype type,
                       plf_alignment **out, char *err, size_t err_len);

/*
 * plf_alignment_from_sequences - an alignment of n named sequences given
 * in memory (NUL-terminated names and residue letters, read as a FASTA
 * record's), with format PLF_FORMAT_FASTA. Messages read
 * "sequences:N: reason", N counting the sequences from 1. Returns as
 * plf_alignment_parse().
 */
int plf_alignment_from_sequences(const char *const *names,
                                 const char *const *seqs, size_t n,
                                 plf_datatype type, plf_alignment **out,
                                 char *err, size_t err_len);

/* plf_alignment_destroy - free an alignment; NULL is a no-op. */
void plf_alignment_destroy(plf_alignment *aln);

/* Sizes: taxa (sequences), sites (columns), patterns (distinct columns). */
size_t plf_alignment_taxa(const plf_alignment *aln);
size_t plf_alignment_sites(const plf_alignment *aln);
size_t plf_alignment_patterns(const plf_alignment *aln);

/* The data type (PLF_DATA_DNA or PLF_DATA_PROTEIN) and its state count
 * (4 or 20). */
plf_datatype plf_alignment_datatype(const plf_alignment *aln);
int plf_alignment_states(const plf_alignment *aln);

/* The format the alignment was read in (never PLF_FORMAT_AUTO). */
plf_format plf_alignment_format(const plf_alignment *aln);

/* The name of taxon i (0-based, in file order), NUL-terminated, owned by
 * the alignment; NULL when i is out of range. */
const char *plf_alignment_name(const plf_alignment *aln, size_t taxon);

/* plf_alignment_find - the index of the taxon called name in *taxon.
 * Returns 0 or EMBER_ENOTFOUND. O(log taxa). */
int plf_alignment_find(const plf_alignment *aln, const char *name,
                       size_t *taxon);

/* Pattern weights: patterns() doubles, each the number of sites the
 * pattern stands for (they sum to sites()); the array BEAGLE's
 * beagleSetPatternWeights takes. Owned by the alignment. */
const double *plf_alignment_weights(const plf_alignment *aln);

/* Site to pattern: sites() indices, site s is pattern site_patterns[s].
 * Owned by the alignment. */
const uint32_t *plf_alignment_site_patterns(const plf_alignment *aln);

/* The states taxon i may be in at pattern p, as a bit set (bit s: state
 * s); all states() bits for missing data. 0 when out of range. */
uint32_t plf_alignment_mask(const plf_alignment *aln, size_t taxon,
                            size_t pattern);

/*
 * plf_alignment_constant_fraction - the fraction of sites that one state
 * could explain in every taxon (the states of its taxa intersect; missing
 * data fits any state), as IQ-TREE counts constant sites.
 */
double plf_alignment_constant_fraction(const plf_alignment *aln);

/*
 * plf_alignment_empirical_freqs - state frequencies counted over the
 * sites (states() values into freqs). Unambiguous characters count one;
 * an ambiguity code is shared among its states in proportion to their
 * frequencies (iterated to a fixed point); missing data counts nothing. As
 * in IQ-TREE, a frequency below 1e-4 is raised to 1e-4 and the largest one
 * pays for it, so that every state has a positive frequency.
 * Returns 0 or EMBER_EINVAL.
 */
int plf_alignment_empirical_freqs(const plf_alignment *aln, double *freqs);

/* ---- tips, as BEAGLE's beagleSetTipStates / beagleSetTipPartials take
 * them (plf_aln_tips.c) --------------------------------------------------- */

/* plf_alignment_tip_ambiguous - 1 when taxon i has a partial ambiguity code
 * (a set of 2 to states()-1 states) at some pattern, so that only partials
 * describe it; 0 when states do; EMBER_EINVAL when i is out of range. */
int plf_alignment_tip_ambiguous(const plf_alignment *aln, size_t taxon);

/*
 * plf_alignment_tip_states - taxon i's compact states: patterns() ints,
 * 0 .. states()-1 for a known state, states() for missing data (a gap,
 * '?', N or X). Returns 0, or EMBER_EINVAL when i is out of range or the
 * taxon has a partial ambiguity code (use plf_alignment_tip_partials()).
 */
int plf_alignment_tip_states(const plf_alignment *aln, size_t taxon,
                             int *states);

/*
 * plf_alignment_tip_partials - taxon i's partials: patterns() x states()
 * doubles, pattern-major (partials[p * states + s]), 1.0 where the taxon
 * may be in state s, 0.0 elsewhere. Returns 0 or EMBER_EINVAL.
 */
int plf_alignment_tip_partials(const plf_alignment *aln, size_t taxon,
                               double *partials);

#endif
