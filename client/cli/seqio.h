/*
 * seqio.h - read FASTA and FASTQ files, plain or gzip-compressed, into
 * memory: one (name, residues, length) record per sequence.
 *
 * FASTA: '>' header lines; the name is the header's first word; sequence
 * lines follow, blank lines and ';' comment lines are skipped. FASTQ: '@'
 * header, sequence lines up to a '+' line, then quality lines until they
 * hold as many characters as the sequence ('!' to '~'). The format is taken
 * from the first non-blank line. Whitespace inside sequence lines and
 * trailing '\r's on any line are dropped.
 *
 * Errors are EMBER_* codes (ember_errors.h) with a "source:line: reason"
 * text in err: a file that cannot be opened or read (EMBER_EIO), one that
 * is neither FASTA nor FASTQ, a record without a name, an empty sequence
 * (named), a truncated FASTQ record, a quality length that differs from the
 * sequence length, a control byte, a file without sequences
 * (EMBER_EFORMAT), a name or sequence over the limits below (EMBER_ETOOBIG),
 * or EMBER_ENOMEM.
 */
#ifndef EMBER_CLI_SEQIO_H
#define EMBER_CLI_SEQIO_H

#include <stddef.h>

#define SEQIO_MAX_NAME 4096             /* bytes of a record's name */
#define SEQIO_MAX_LENGTH ((size_t)1 << 30) /* residues of one sequence */

typedef enum seqio_format { SEQIO_FASTA = 1, SEQIO_FASTQ = 2 } seqio_format;

typedef struct seqio_record {
  const char *name;      /* NUL-terminated, never empty */
  const char *residues;  /* length bytes, NUL-terminated as well */
  size_t length;         /* > 0 */
  unsigned long line;    /* line of the record's header */
} seqio_record;

/* A file's records. Everything is owned by the set; free it with
 * seqio_free(). Zero-initialise before use. */
typedef struct seqio_set {
  seqio_record *records;
  size_t n;
  seqio_format format;
  char *names_;     /* private: the arenas the records point into */
  char *residues_;
} seqio_set;

/* seqio_read - read path ("-" is standard input), plain or gzip'd. On
 * success *out holds at least one record; on failure it is left empty.
 * Returns 0 or a negative EMBER_E* code with the reason in err. */
int seqio_read(const char *path, seqio_set *out, char *err, size_t err_len);

/* seqio_parse - the same on uncompressed bytes in memory (len bytes, no
 * terminator needed); source names them in messages (NULL: "input"). */
int seqio_parse(const void *data, size_t len, const char *source,
                seqio_set *out, char *err, size_t err_len);

/* seqio_free - free what the set holds and zero it. NULL is a no-op. */
void seqio_free(seqio_set *set);

#endif
