/*
 * plf_newick.c - the Newick reader: one tree per line, tips matched by
 * name to a taxon list (plf_tree.h has the accepted syntax).
 *
 * The parser is a loop over tokens with an explicit stack of the open
 * parentheses (each holds the children read so far, at most three), so a
 * caterpillar of PLF_TREE_MAX_TIPS taxa nests that deep without recursion;
 * the stack never grows past the number of taxa, which bounds any input.
 * An internal node is made when its ')' is read, its children's branch
 * lengths being known by then.
 */
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ember/ember_errors.h"
#include "plf_tree_internal.h"

#define MAX_NUMBER 64 /* bytes of a branch length */
#define ROOT_PENDING (-2) /* the node just closed is the root, not made yet */

/* ---- the taxon list: name -> index, open addressing --------------------- */

typedef struct taxa_index {
  const char *const *names;
  size_t *lens;
  int count;
  int *slots; /* taxon index or -1; mask + 1 of them */
  size_t mask;
} taxa_index;

static uint64_t hash_name(const char *s, size_t len) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
  for (size_t i = 0; i < len; i++) {
    h ^= (unsigned char)s[i];
    h *= 0x100000001b3ull;
  }
  return h ^ (h >> 29);
}

static int taxa_find(const taxa_index *ix, const char *s, size_t len) {
  for (size_t i = hash_name(s, len) & ix->mask;; i = (i + 1) & ix->mask) {
    int k = ix->slots[i];
    if (k < 0) return -1;
    if (ix->lens[k] == len && memcmp(ix->names[k], s, len) == 0) return k;
  }
}

static void taxa_free(taxa_index *ix) {
  free(ix->lens);
  free(ix->slots);
}

static int errf(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int errf(char *err, size_t err_len, const char *fmt, ...) {
  if (err && err_len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
  }
  return 0;
}

static int taxa_build(taxa_index *ix, const char *const *names, int count,
                      char *err, size_t err_len) {
  memset(ix, 0, sizeof *ix);
  if (count < 2 || count > PLF_TREE_MAX_TIPS || !names) {
    errf(err, err_len, "taxon list: %d taxa, expected 2 to %d", count,
         PLF_TREE_MAX_TIPS);
    return EMBER_EPARAM;
  }
  size_t cap = 4;
  while (cap < 2 * (size_t)count) cap *= 2;
  ix->names = names;
  ix->count = count;
  ix->mask = cap - 1;
  ix->lens = malloc((size_t)count * sizeof *ix->lens);
  ix->slots = malloc(cap * sizeof *ix->slots);
  if (!ix->lens || !ix->slots) {
    taxa_free(ix);
    errf(err, err_len, "taxon list: out of memory");
    return EMBER_ENOMEM;
  }
  memset(ix->slots, 0xff, cap * sizeof *ix->slots);
  for (int k = 0; k < count; k++) {
    size_t len = names[k] ? strnlen(names[k], PLF_NEWICK_MAX_NAME + 1) : 0;
    if (len == 0 || len > PLF_NEWICK_MAX_NAME) {
      taxa_free(ix);
      errf(err, err_len, "taxon list: taxon %d: %s name", k,
           len ? "too long a" : "empty or missing");
      return EMBER_EPARAM;
    }
    ix->lens[k] = len;
    size_t i = hash_name(names[k], len) & ix->mask;
    for (; ix->slots[i] >= 0; i = (i + 1) & ix->mask) {
      int o = ix->slots[i];
      if (ix->lens[o] == len && memcmp(names[o], names[k], len) == 0) {
        taxa_free(ix);
        errf(err, err_len, "taxon list: '%s' is there twice", names[k]);
        return EMBER_EPARAM;
      }
    }
    ix->slots[i] = k;
  }
  return 0;
}

/* ---- the parser ---------------------------------------------------------- */

typedef struct frame {
  int kid[3];
  double len[3];
  int kids;
} frame;

typedef struct parser {
  const char *source;
  size_t line;
  const char *line_start;
  char *err;
  size_t err_len;
  const taxa_index *taxa;
  unsigned char *seen; /* [taxa], per tree */
  int seen_count;
  frame *stack;
  size_t depth, cap;
  frame root;           /* the root's frame, made into a node at ';' */
  char name[PLF_NEWICK_MAX_NAME + 1];
  size_t name_len;
} parser;

static int fail(const parser *ps, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* fail: "source:line: reason (column N)"; at NULL leaves the column out */
static int fail(const parser *ps, const char *at, const char *fmt, ...) {
  if (ps->err && ps->err_len) {
    int n = snprintf(ps->err, ps->err_len, "%s:%zu: ", ps->source, ps->line);
    if (n >= 0 && (size_t)n < ps->err_len) {
      va_list ap;
      va_start(ap, fmt);
      int m = vsnprintf(ps->err + n, ps->err_len - (size_t)n, fmt, ap);
      va_end(ap);
      if (at && m >= 0 && (size_t)(n + m) < ps->err_len)
        snprintf(ps->err + n + m, ps->err_len - (size_t)(n + m),
                 " (column %zu)", (size_t)(at - ps->line_start) + 1);
    }
  }
  return EMBER_EFORMAT;
}

/* shown: the parser's current name for a message, bytes outside printable
 * ASCII as \xNN, cut after 40 bytes */
static const char *shown(const parser *ps, char *buf, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < ps->name_len && o + 5 < cap; i++) {
    unsigned char c = (unsigned char)ps->name[i];
    if (i == 40) {
      o += (size_t)snprintf(buf + o, cap - o, "...");
      break;
    }
    if (c >= 0x20 && c <= 0x7e)
      buf[o++] = (char)c;
    else
      o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
  }
  buf[o] = '\0';
  return buf;
}

/* show_char: a byte for a message: 'x', or \xNN outside printable ASCII */
static const char *show_char(char c, char buf[8]) {
  unsigned char u = (unsigned char)c;
  if (u >= 0x20 && u <= 0x7e)
    snprintf(buf, 8, "'%c'", c);
  else
    snprintf(buf, 8, "\\x%02x", u);
  return buf;
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* is_delim: ends an unquoted name or a number */
static int is_delim(char c) {
  return is_blank(c) || c == '(' || c == ')' || c == '[' || c == ']' ||
         c == '\'' || c == ':' || c == ';' || c == ',' ||
         (unsigned char)c < 0x20 || c == 0x7f;
}

/* skip: blanks and comments; returns 0 or EMBER_EFORMAT */
static int skip(parser *ps, const char **p, const char *end) {
  const char *s = *p;
  for (;;) {
    while (s < end && is_blank(*s)) s++;
    if (s == end || *s != '[') break;
    const char *close = memchr(s, ']', (size_t)(end - s));
    if (!close) return fail(ps, s, "unterminated comment '['");
    s = close + 1;
  }
  *p = s;
  return 0;
}

/* read_name: an unquoted or quoted name at *p into ps->name */
static int read_name(parser *ps, const char **p, const char *end) {
  const char *s = *p;
  ps->name_len = 0;
  if (*s == '\'') {
    const char *open = s++;
    for (;;) {
      if (s == end) return fail(ps, open, "unterminated quoted name");
      if (*s == '\'') {
        if (s + 1 < end && s[1] == '\'') {
          s++;
        } else {
          s++;
          break;
        }
      }
      if (ps->name_len == PLF_NEWICK_MAX_NAME)
        return fail(ps, open, "name longer than %d bytes",
                    PLF_NEWICK_MAX_NAME);
      if (*s == '\0') return fail(ps, s, "NUL byte in a name");
      ps->name[ps->name_len++] = *s++;
    }
  } else {
    const char *start = s;
    while (s < end && !is_delim(*s)) {
      if (ps->name_len == PLF_NEWICK_MAX_NAME)
        return fail(ps, start, "name longer than %d bytes",
                    PLF_NEWICK_MAX_NAME);
      ps->name[ps->name_len++] = *s++;
    }
  }
  ps->name[ps->name_len] = '\0';
  *p = s;
  return 0;
}

static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale;

static void c_locale_init(void) {
  c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

/* read_length: the number after ':' at *p (finite, >= 0), read in the C
 * locale whatever the program's is */
static int read_length(parser *ps, const char **p, const char *end,
                       double *out) {
  const char *s = *p, *start = s;
  char buf[MAX_NUMBER + 1];
  size_t n = 0;
  while (s < end && !is_delim(*s)) {
    if (n == MAX_NUMBER) return fail(ps, start, "branch length too long");
    buf[n++] = *s++;
  }
  if (n == 0) return fail(ps, start, "':' without a branch length");
  buf[n] = '\0';
  pthread_once(&c_locale_once, c_locale_init);
  char *stop;
  double v = c_locale ? strtod_l(buf, &stop, c_locale) : strtod(buf, &stop);
  if (*stop != '\0' || !isfinite(v))
    return fail(ps, start, "bad branch length '%s'", buf);
  if (v < 0) return fail(ps, start, "negative branch length '%s'", buf);
  *out = v + 0.0; /* -0 reads as 0 */
  *p = s;
  return 0;
}

static int push(parser *ps, const char *at) {
  if (ps->depth == (size_t)ps->taxa->count)
    return fail(ps, at, "parentheses nested deeper than %d taxa allow",
                ps->taxa->count);
  if (ps->depth == ps->cap) {
    size_t cap = ps->cap ? 2 * ps->cap : 64;
    if (cap > (size_t)ps->taxa->count) cap = (size_t)ps->taxa->count;
    frame *s = realloc(ps->stack, cap * sizeof *s);
    if (!s) return EMBER_ENOMEM;
    ps->stack = s;
    ps->cap = cap;
  }
  ps->stack[ps->depth++].kids = 0;
  return 0;
}

/* tip: the taxon named ps->name, checked against the list and the tree */
static int tip(parser *ps, const char *at, int *node) {
  char buf[200];
  if (ps->name_len == 0) return fail(ps, at, "a tip without a name");
  int k = taxa_find(ps->taxa, ps->name, ps->name_len);
  if (k < 0)
    return fail(ps, at, "taxon '%s' is not in the taxon list",
                shown(ps, buf, sizeof buf));
  if (ps->seen[k])
    return fail(ps, at, "taxon '%s' appears twice",
                shown(ps, buf, sizeof buf));
  ps->seen[k] = 1;
  ps->seen_count++;
  *node = k;
  return 0;
}

/* missing_taxon: the complaint for a tree without every taxon */
static int missing_taxon(parser *ps) {
  for (int k = 0; k < ps->taxa->count; k++)
    if (!ps->seen[k])
      return fail(ps, NULL,
                  "taxon '%.200s' of the taxon list is not in the tree (%d "
                  "of %d taxa there)",
                  ps->taxa->names[k], ps->seen_count, ps->taxa->count);
  return EMBER_EINTERNAL;
}

/* close_frame: makes the node of the frame on top. The root's frame is
 * only checked here and kept in ps->root: it is made at ';', after what
 * may follow it on the line has been read (*node = ROOT_PENDING). */
static int close_frame(parser *ps, plf_tree *t, const char *at, int *node) {
  frame *f = &ps->stack[--ps->depth];
  if (ps->depth == 0) {
    if (f->kids != 2 && f->kids != 3)
      return fail(ps, at, "the root has %d child%s, expected 2 (rooted) or "
                          "3 (unrooted)", f->kids, f->kids == 1 ? "" : "ren");
    ps->root = *f;
    *node = ROOT_PENDING;
    return 0;
  }
  if (f->kids != 2)
    return fail(ps, at, "an internal node with %d child%s, expected 2 "
                        "(only the root may have 3)", f->kids,
                f->kids == 1 ? "" : "ren");
  *node = plf_tree_join(t, f->kid[0], f->len[0], f->kid[1], f->len[1]);
  return *node < 0 ? EMBER_EINTERNAL : 0;
}

/* make_root: the root from ps->root, once the tree has every taxon */
static int make_root(parser *ps, plf_tree *t) {
  if (ps->seen_count != ps->taxa->count) return missing_taxon(ps);
  const frame *f = &ps->root;
  int v = f->kids == 2 ? plf_tree_join(t, f->kid[0], f->len[0], f->kid[1],
                                       f->len[1])
                       : plf_tree_join3(t, f->kid[0], f->len[0], f->kid[1],
                                        f->len[1], f->kid[2], f->len[2]);
  return v < 0 ? EMBER_EINTERNAL : 0;
}

/* parse_line: the tree in [s, end), a line without its newline */
static int parse_line(parser *ps, const char *s, const char *end,
                      plf_tree **out) {
  enum { NODE, AFTER_CLOSE, LENGTH, SEP, DONE } state = NODE;
  plf_tree *t = NULL;
  int rc = plf_tree_create(ps->taxa->count, &t);
  if (rc) return rc;
  memset(ps->seen, 0, (size_t)ps->taxa->count);
  ps->seen_count = 0;
  ps->depth = 0;
  int node = PLF_NONE;
  const char *node_at = s;
  double len = 0;
  char buf[200], cbuf[8];
  while (state != DONE) {
    if ((rc = skip(ps, &s, end)) != 0) goto out;
    if (s < end && *s == '\0') {
      rc = fail(ps, s, "NUL byte");
      goto out;
    }
    switch (state) {
    case NODE:
      if (s == end) {
        rc = fail(ps, s, "the line ends inside the tree (one tree per "
                         "line, ending with ';')");
      } else if (*s == '(') {
        rc = push(ps, s++);
      } else if (is_delim(*s) && *s != '\'') {
        rc = fail(ps, s, "%s where a node should start",
                  show_char(*s, cbuf));
      } else {
        node_at = s;
        if ((rc = read_name(ps, &s, end)) == 0 &&
            (rc = tip(ps, node_at, &node)) == 0)
          state = LENGTH;
      }
      break;
    case AFTER_CLOSE: /* an internal node's label, ignored */
      if (s < end && (!is_delim(*s) || *s == '\'') &&
          (rc = read_name(ps, &s, end)) != 0)
        goto out;
      ps->name_len = 0;
      state = LENGTH;
      break;
    case LENGTH:
      len = 0;
      if (s < end && *s == ':') {
        s++;
        if ((rc = skip(ps, &s, end)) != 0 ||
            (rc = read_length(ps, &s, end, &len)) != 0)
          goto out;
      } else if (ps->depth > 0) {
        rc = node < ps->taxa->count
                 ? fail(ps, s, "taxon '%s' has no branch length",
                        shown(ps, buf, sizeof buf))
                 : fail(ps, s, "the subtree closed at column %zu has no "
                               "branch length",
                        (size_t)(node_at - ps->line_start) + 1);
      }
      state = SEP;
      break;
    case SEP:
      if (s == end) {
        rc = fail(ps, s, "missing ';' at the end of the line");
      } else if (*s == ',' || *s == ')') {
        if (ps->depth == 0) {
          rc = fail(ps, s, "'%c' outside parentheses", *s);
          break;
        }
        frame *f = &ps->stack[ps->depth - 1];
        if (f->kids == 3) {
          rc = fail(ps, s, "a node with more than 3 children");
          break;
        }
        f->kid[f->kids] = node;
        f->len[f->kids++] = len;
        if (*s++ == ',') {
          state = NODE;
        } else {
          node_at = s - 1;
          rc = close_frame(ps, t, node_at, &node);
          state = AFTER_CLOSE;
        }
      } else if (*s == ';') {
        if (ps->depth > 0)
          rc = fail(ps, s, "%zu '(' not closed before ';'", ps->depth);
        else if (node != ROOT_PENDING)
          rc = fail(ps, s, "a tree of one taxon ('%s')",
                    shown(ps, buf, sizeof buf));
        else
          rc = make_root(ps, t);
        s++;
        state = DONE;
      } else {
        rc = fail(ps, s, "%s where ',', ')' or ';' should come",
                  show_char(*s, cbuf));
      }
      break;
    case DONE:
      break;
    }
    if (rc) goto out;
  }
  if ((rc = skip(ps, &s, end)) != 0) goto out;
  if (s < end) {
    rc = fail(ps, s, "text after ';' (one tree per line)");
    goto out;
  }
  *out = t;
  return 0;
out:
  plf_tree_destroy(t);
  return rc;
}

/* blank: the line holds nothing but blanks and comments */
static int blank(parser *ps, const char *s, const char *end) {
  return skip(ps, &s, end) == 0 && s == end;
}

void plf_trees_destroy(plf_tree **trees, int count) {
  if (!trees) return;
  for (int i = 0; i < count; i++) plf_tree_destroy(trees[i]);
  free(trees);
}

int plf_newick_parse(const char *text, size_t len, const char *source,
                     const char *const *taxa, int taxon_count,
                     plf_tree ***trees, int *tree_count, char *err,
                     size_t err_len) {
  if (!trees || !tree_count || (!text && len)) return EMBER_EPARAM;
  *trees = NULL;
  *tree_count = 0;
  if (err && err_len) err[0] = '\0';
  parser ps = {.source = source ? source : "newick", .err = err,
               .err_len = err_len};
  taxa_index ix;
  int rc = taxa_build(&ix, taxa, taxon_count, err, err_len);
  if (rc) return rc;
  ps.taxa = &ix;
  ps.seen = malloc((size_t)taxon_count);
  plf_tree **out = NULL;
  int count = 0, cap = 0;
  if (!ps.seen) {
    rc = EMBER_ENOMEM;
    goto done;
  }
  const char *end = text + len;
  for (const char *s = text; s < end;) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    const char *line_end = nl ? nl : end;
    ps.line++;
    ps.line_start = s;
    if (!blank(&ps, s, line_end)) {
      if (count == PLF_NEWICK_MAX_TREES) {
        rc = fail(&ps, NULL, "more than %d trees", PLF_NEWICK_MAX_TREES);
        goto done;
      }
      if (count == cap) {
        int ncap = cap ? 2 * cap : 8;
        plf_tree **n = realloc(out, (size_t)ncap * sizeof *n);
        if (!n) {
          rc = EMBER_ENOMEM;
          goto done;
        }
        out = n;
        cap = ncap;
      }
      if ((rc = parse_line(&ps, s, line_end, &out[count])) != 0) goto done;
      count++;
    }
    s = nl ? nl + 1 : end;
  }
  if (count == 0) {
    errf(err, err_len, "%s: no tree", ps.source);
    rc = EMBER_EFORMAT;
  }
done:
  if (rc == EMBER_ENOMEM) errf(err, err_len, "%s: out of memory", ps.source);
  if (rc == EMBER_EINTERNAL)
    errf(err, err_len, "%s:%zu: internal error", ps.source, ps.line);
  free(ps.seen);
  free(ps.stack);
  taxa_free(&ix);
  if (rc) {
    plf_trees_destroy(out, count);
    return rc;
  }
  *trees = out;
  *tree_count = count;
  return 0;
}

int plf_newick_read_file(const char *path, const char *const *taxa,
                         int taxon_count, plf_tree ***trees, int *tree_count,
                         char *err, size_t err_len) {
  if (!path || !trees || !tree_count) return EMBER_EPARAM;
  *trees = NULL;
  *tree_count = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    errf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
    return EMBER_EIO;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    errf(err, err_len, "%s: not a regular file", path);
    close(fd);
    return EMBER_EIO;
  }
  if ((uint64_t)st.st_size > PLF_NEWICK_MAX_BYTES) {
    errf(err, err_len, "%s: larger than %zu bytes", path,
         PLF_NEWICK_MAX_BYTES);
    close(fd);
    return EMBER_ETOOBIG;
  }
  size_t size = (size_t)st.st_size, got = 0;
  char *buf = malloc(size ? size : 1);
  if (!buf) {
    errf(err, err_len, "%s: out of memory", path);
    close(fd);
    return EMBER_ENOMEM;
  }
  while (got < size) {
    ssize_t n = read(fd, buf + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      errf(err, err_len, "%s: read error", path);
      free(buf);
      close(fd);
      return EMBER_EIO;
    }
    got += (size_t)n;
  }
  close(fd);
  int rc = plf_newick_parse(buf, size, path, taxa, taxon_count, trees,
                            tree_count, err, err_len);
  free(buf);
  return rc;
}
