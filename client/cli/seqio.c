/*
 * seqio.c - FASTA/FASTQ reading for the `ember` tool. htslib's BGZF layer
 * opens the file and inflates gzip (BGZF or plain gzip) or passes plain
 * text through; the lines are parsed here, so every error can name the
 * line and the record it is about.
 */
#include "seqio.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <htslib/bgzf.h>
#include <htslib/hts.h>
#include <htslib/hts_log.h>
#include <htslib/kstring.h>

#include "ember/ember_errors.h"

/* A record while parsing: offsets into the arenas, which move as they grow. */
typedef struct rec {
  size_t name_off, res_off, length;
  unsigned long line;
} rec;

typedef enum state {
  ST_HEADER, /* before the first record, or between FASTQ records */
  ST_SEQ,    /* in a record's sequence lines */
  ST_QUAL    /* in a FASTQ record's quality lines */
} state;

typedef struct parser {
  const char *source;
  char *err;
  size_t err_len;
  int rc;
  seqio_format format; /* 0 until the first header */
  state st;
  unsigned long line;
  size_t qual_len;     /* quality characters of the open FASTQ record */
  char *names;
  size_t names_len, names_cap;
  char *res;
  size_t res_len, res_cap;
  rec *recs;
  size_t n, recs_cap;
} parser;

static int fail(parser *p, int rc, unsigned long line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(parser *p, int rc, unsigned long line, const char *fmt, ...) {
  if (p->err_len) {
    int n = line ? snprintf(p->err, p->err_len, "%s:%lu: ", p->source, line)
                 : snprintf(p->err, p->err_len, "%s: ", p->source);
    if (n >= 0 && (size_t)n < p->err_len) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(p->err + n, p->err_len - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  p->rc = rc;
  return rc;
}

/* Make room for need more elements of size elem in *buf (holding len of
 * cap); doubles, checking every product and sum for overflow. */
static int reserve(parser *p, void **buf, size_t *cap, size_t len, size_t need,
                   size_t elem) {
  if (need > SIZE_MAX - len) return fail(p, EMBER_ENOMEM, p->line, "out of memory");
  size_t want = len + need;
  if (want <= *cap) return 0;
  size_t c = *cap ? *cap : 64;
  while (c < want) {
    if (c > SIZE_MAX / 2) {
      c = want;
      break;
    }
    c *= 2;
  }
  if (c > SIZE_MAX / elem) return fail(p, EMBER_ENOMEM, p->line, "out of memory");
  void *nb = realloc(*buf, c * elem);
  if (!nb) return fail(p, EMBER_ENOMEM, p->line, "out of memory");
  *buf = nb;
  *cap = c;
  return 0;
}

static rec *current(parser *p) { return &p->recs[p->n - 1]; }

static const char *current_name(parser *p) {
  return p->names + current(p)->name_off;
}

static int is_blank(const char *s, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\v' && s[i] != '\f') return 0;
  return 1;
}

/* The byte as it should appear in a message. */
static const char *byte_text(unsigned char c, char *buf, size_t len) {
  if (c > 0x20 && c < 0x7F) snprintf(buf, len, "'%c'", c);
  else snprintf(buf, len, "byte 0x%02x", c);
  return buf;
}

/* A header line (without its '>' or '@'): the name is its first word. */
static int start_record(parser *p, const char *h, size_t len) {
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)h[i];
    if ((c < 0x20 && c != '\t') || c == 0x7F)
      return fail(p, EMBER_EFORMAT, p->line,
                  "control character 0x%02x in a header line", c);
  }
  size_t b = 0;
  while (b < len && (h[b] == ' ' || h[b] == '\t')) b++;
  size_t e = b;
  while (e < len && h[e] != ' ' && h[e] != '\t') e++;
  size_t name_len = e - b;
  if (name_len == 0)
    return fail(p, EMBER_EFORMAT, p->line, "a record without a name");
  if (name_len > SEQIO_MAX_NAME)
    return fail(p, EMBER_ETOOBIG, p->line,
                "a name of %zu bytes (the limit is %d)", name_len,
                SEQIO_MAX_NAME);
  if (reserve(p, (void **)&p->recs, &p->recs_cap, p->n, 1, sizeof *p->recs) ||
      reserve(p, (void **)&p->names, &p->names_cap, p->names_len, name_len + 1, 1))
    return p->rc;
  rec *r = &p->recs[p->n++];
  r->name_off = p->names_len;
  r->res_off = p->res_len;
  r->length = 0;
  r->line = p->line;
  memcpy(p->names + p->names_len, h + b, name_len);
  p->names[p->names_len + name_len] = '\0';
  p->names_len += name_len + 1;
  p->st = ST_SEQ;
  return 0;
}

/* Close the open record: it needs residues; its residues get a NUL. */
static int end_record(parser *p) {
  rec *r = current(p);
  if (r->length == 0)
    return fail(p, EMBER_EFORMAT, r->line, "sequence '%s' is empty",
                current_name(p));
  if (reserve(p, (void **)&p->res, &p->res_cap, p->res_len, 1, 1)) return p->rc;
  p->res[p->res_len++] = '\0';
  p->st = ST_HEADER;
  return 0;
}

static int sequence_line(parser *p, const char *s, size_t len) {
  rec *r = current(p);
  if (len > SEQIO_MAX_LENGTH - r->length) {
    /* only residues count, so look closer before refusing */
    size_t residues = 0;
    for (size_t i = 0; i < len; i++)
      if (!is_blank(s + i, 1)) residues++;
    if (residues > SEQIO_MAX_LENGTH - r->length)
      return fail(p, EMBER_ETOOBIG, p->line,
                  "sequence '%s' is longer than %zu residues", current_name(p),
                  SEQIO_MAX_LENGTH);
  }
  /* an empty line adds nothing; before the first residue p->res is still
   * NULL, and NULL + 0 is undefined */
  if (len == 0) return 0;
  if (reserve(p, (void **)&p->res, &p->res_cap, p->res_len, len, 1)) return p->rc;
  char *dst = p->res + p->res_len;
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == ' ' || c == '\t' || c == '\v' || c == '\f') continue;
    if (c < 0x21 || c >= 0x7F) {
      char b[16];
      return fail(p, EMBER_EFORMAT, p->line, "%s in sequence '%s'",
                  byte_text(c, b, sizeof b), current_name(p));
    }
    dst[o++] = (char)c;
  }
  p->res_len += o;
  r->length += o;
  return 0;
}

static int quality_mismatch(parser *p, size_t qual_len) {
  return fail(p, EMBER_EFORMAT, p->line,
              "record '%s': its quality has %zu characters, its sequence %zu",
              current_name(p), qual_len, current(p)->length);
}

static int quality_line(parser *p, const char *s, size_t len) {
  size_t want = current(p)->length;
  /* a header after a short quality: the record was cut */
  if (len == 0 || (p->qual_len > 0 && s[0] == '@' && p->qual_len + len != want))
    return quality_mismatch(p, p->qual_len);
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < '!' || c > '~') {
      char b[16];
      return fail(p, EMBER_EFORMAT, p->line, "%s in the quality of record '%s'",
                  byte_text(c, b, sizeof b), current_name(p));
    }
  }
  if (len > want - p->qual_len) return quality_mismatch(p, p->qual_len + len);
  p->qual_len += len;
  return p->qual_len == want ? end_record(p) : 0;
}

static int header_expected(parser *p, const char *s, size_t len) {
  char b[16];
  const char *found = byte_text((unsigned char)s[0], b, sizeof b);
  if (p->format == 0)
    return fail(p, EMBER_EFORMAT, p->line,
                "not FASTA or FASTQ: the first line starts with %s, expected "
                "'>' or '@' (plain or gzip'd text)", found);
  return fail(p, EMBER_EFORMAT, p->line,
              "expected a '@' header line after record '%s', found %s",
              current_name(p), found);
}

static int feed_line(parser *p, const char *s, size_t len) {
  p->line++;
  while (len && s[len - 1] == '\r') len--; /* CRLF; BGZF drops one '\r' */
  switch (p->st) {
  case ST_HEADER:
    if (is_blank(s, len) || (p->format != SEQIO_FASTQ && s[0] == ';')) return 0;
    if (s[0] == '>' && p->format != SEQIO_FASTQ) {
      p->format = SEQIO_FASTA;
      return start_record(p, s + 1, len - 1);
    }
    if (s[0] == '@' && p->format != SEQIO_FASTA) {
      p->format = SEQIO_FASTQ;
      return start_record(p, s + 1, len - 1);
    }
    return header_expected(p, s, len);
  case ST_SEQ:
    if (p->format == SEQIO_FASTA) {
      if (len && s[0] == '>') {
        if (end_record(p)) return p->rc;
        return start_record(p, s + 1, len - 1);
      }
      if (len && s[0] == ';') return 0;
      return sequence_line(p, s, len);
    }
    if (len && s[0] == '+') {
      if (current(p)->length == 0)
        return fail(p, EMBER_EFORMAT, current(p)->line,
                    "sequence '%s' is empty", current_name(p));
      p->st = ST_QUAL;
      p->qual_len = 0;
      return 0;
    }
    if (len && s[0] == '@')
      return fail(p, EMBER_EFORMAT, p->line,
                  "record '%s' is truncated: a new record starts before its "
                  "'+' line", current_name(p));
    return sequence_line(p, s, len);
  case ST_QUAL:
    return quality_line(p, s, len);
  }
  return 0;
}

static int finish(parser *p, seqio_set *out) {
  if (p->st == ST_SEQ && p->format == SEQIO_FASTA) {
    if (end_record(p)) return p->rc;
  } else if (p->st == ST_SEQ) {
    return fail(p, EMBER_EFORMAT, p->line,
                "record '%s' is truncated: the file ends before its '+' line",
                current_name(p));
  } else if (p->st == ST_QUAL) {
    if (p->qual_len == 0)
      return fail(p, EMBER_EFORMAT, p->line,
                  "record '%s' is truncated: the file ends before its quality",
                  current_name(p));
    return fail(p, EMBER_EFORMAT, p->line,
                "record '%s' is truncated: its quality has %zu characters, its "
                "sequence %zu", current_name(p), p->qual_len,
                current(p)->length);
  }
  if (p->n == 0)
    return fail(p, EMBER_EFORMAT, 0, "no sequences in the file");
  seqio_record *recs =
      p->n <= SIZE_MAX / sizeof *recs ? malloc(p->n * sizeof *recs) : NULL;
  if (!recs) return fail(p, EMBER_ENOMEM, 0, "out of memory");
  for (size_t i = 0; i < p->n; i++) {
    recs[i].name = p->names + p->recs[i].name_off;
    recs[i].residues = p->res + p->recs[i].res_off;
    recs[i].length = p->recs[i].length;
    recs[i].line = p->recs[i].line;
  }
  out->records = recs;
  out->n = p->n;
  out->format = p->format;
  out->names_ = p->names;
  out->residues_ = p->res;
  p->names = p->res = NULL;
  return 0;
}

static void parser_init(parser *p, const char *source, char *err,
                        size_t err_len) {
  memset(p, 0, sizeof *p);
  p->source = source ? source : "input";
  p->err = err;
  p->err_len = err_len;
  p->st = ST_HEADER;
  if (err_len) err[0] = '\0';
}

static void parser_free(parser *p) {
  free(p->names);
  free(p->res);
  free(p->recs);
}

int seqio_parse(const void *data, size_t len, const char *source,
                seqio_set *out, char *err, size_t err_len) {
  parser p;
  parser_init(&p, source, err, err_len);
  memset(out, 0, sizeof *out);
  const char *s = data, *end = s + len;
  while (s < end) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
    if (feed_line(&p, s, n)) break;
    s += n + (nl != NULL);
  }
  int rc = p.rc ? p.rc : finish(&p, out);
  parser_free(&p);
  return rc;
}

int seqio_read(const char *path, seqio_set *out, char *err, size_t err_len) {
  parser p;
  parser_init(&p, path, err, err_len);
  memset(out, 0, sizeof *out);
  struct stat st;
  if (strcmp(path, "-") != 0) {
    if (stat(path, &st) != 0)
      return fail(&p, EMBER_EIO, 0, "cannot open: %s", strerror(errno));
    if (S_ISDIR(st.st_mode))
      return fail(&p, EMBER_EIO, 0, "cannot open: it is a directory");
  }
  hts_set_log_level(HTS_LOG_OFF); /* the reasons are reported here */
  errno = 0;
  BGZF *fp = bgzf_open(path, "r");
  if (!fp)
    return fail(&p, EMBER_EIO, 0, "cannot open: %s",
                errno ? strerror(errno) : "unreadable");
  kstring_t line = KS_INITIALIZE;
  int n;
  while ((n = bgzf_getline(fp, '\n', &line)) >= 0)
    if (feed_line(&p, line.s, (size_t)n)) break;
  if (!p.rc && n < -1)
    fail(&p, EMBER_EIO, p.line + 1, "read error%s",
         bgzf_compression(fp) != no_compression
             ? " (a truncated or corrupt gzip file?)" : "");
  ks_free(&line);
  if (bgzf_close(fp) != 0 && !p.rc)
    fail(&p, EMBER_EIO, 0, "read error (a truncated or corrupt gzip file?)");
  int rc = p.rc ? p.rc : finish(&p, out);
  parser_free(&p);
  return rc;
}

void seqio_free(seqio_set *set) {
  if (!set) return;
  free(set->records);
  free(set->names_);
  free(set->residues_);
  memset(set, 0, sizeof *set);
}
