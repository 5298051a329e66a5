/*
 * cnn_cfg.c - darknet .cfg files (cnn_net.h has the sections and keys):
 * libinih parses the key=value lines, fed one line at a time by our own
 * reader, which counts lines and takes the [section] headers itself
 * (darknet repeats them, and libinih tells a handler nothing when a
 * section starts). A section is checked, and its layer added to the
 * network, when the next one starts or the file ends.
 */
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_net_internal.h"

/* ---- sections and their keys ---------------------------------------------- */

typedef enum key_type { K_INT, K_REAL, K_ACT } key_type;

typedef struct key_def {
  const char *name;
  key_type type;
  double lo, hi;        /* the range, inclusive unless open below */
  bool lo_open, hi_open;
} key_def;

enum { SEC_NONE = -1, SEC_NET = 0 }; /* a layer section's kind: its index */

typedef struct section_def {
  const char *name, *alias;  /* darknet's long and short names */
  const key_def *keys;
  size_t nkeys;
} section_def;

enum { NET_HEIGHT, NET_WIDTH, NET_CHANNELS, NET_BATCH, NET_RATE, NET_MOMENTUM,
       NET_DECAY, NET_EPOCHS };
static const key_def net_keys[] = {
    [NET_HEIGHT] = {"height", K_INT, 1, CNN_MAX_SIDE, false, false},
    [NET_WIDTH] = {"width", K_INT, 1, CNN_MAX_SIDE, false, false},
    [NET_CHANNELS] = {"channels", K_INT, 1, CNN_MAX_CHANNELS, false, false},
    [NET_BATCH] = {"batch", K_INT, 1, CNN_MAX_BATCH, false, false},
    [NET_RATE] = {"learning_rate", K_REAL, 0, 10, true, false},
    [NET_MOMENTUM] = {"momentum", K_REAL, 0, 1, false, true},
    [NET_DECAY] = {"decay", K_REAL, 0, 1, false, true},
    [NET_EPOCHS] = {"max_epochs", K_INT, 1, CNN_MAX_EPOCHS, false, false},
};

enum { CONV_FILTERS, CONV_SIZE, CONV_STRIDE, CONV_PAD, CONV_PADDING,
       CONV_ACT };
static const key_def conv_keys[] = {
    [CONV_FILTERS] = {"filters", K_INT, 1, CNN_MAX_CHANNELS, false, false},
    [CONV_SIZE] = {"size", K_INT, 1, CNN_MAX_KERNEL, false, false},
    [CONV_STRIDE] = {"stride", K_INT, 1, CNN_MAX_KERNEL, false, false},
    [CONV_PAD] = {"pad", K_INT, 0, 1, false, false},
    [CONV_PADDING] = {"padding", K_INT, 0, CNN_MAX_KERNEL, false, false},
    [CONV_ACT] = {"activation", K_ACT, 0, 0, false, false},
};

enum { POOL_SIZE, POOL_STRIDE, POOL_PADDING };
static const key_def pool_keys[] = {
    [POOL_SIZE] = {"size", K_INT, 1, CNN_MAX_KERNEL, false, false},
    [POOL_STRIDE] = {"stride", K_INT, 1, CNN_MAX_KERNEL, false, false},
    [POOL_PADDING] = {"padding", K_INT, 0, CNN_MAX_KERNEL, false, false},
};

enum { FC_OUTPUT, FC_ACT };
static const key_def fc_keys[] = {
    [FC_OUTPUT] = {"output", K_INT, 1, CNN_MAX_OUTPUTS, false, false},
    [FC_ACT] = {"activation", K_ACT, 0, 0, false, false},
};

#define KEYS(k) k, sizeof k / sizeof k[0]
static const section_def sections[] = {
    [SEC_NET] = {"net", "network", KEYS(net_keys)},
    [CNN_LAYER_CONV] = {"convolutional", "conv", KEYS(conv_keys)},
    [CNN_LAYER_MAXPOOL] = {"maxpool", "max", KEYS(pool_keys)},
    [CNN_LAYER_CONNECTED] = {"connected", "conn", KEYS(fc_keys)},
    [CNN_LAYER_SOFTMAX] = {"softmax", "soft", NULL, 0},
};
#undef KEYS
#define NSECTIONS ((int)(sizeof sections / sizeof sections[0]))
#define MAX_KEYS 8

/* ---- the reader's state ------------------------------------------------------ */

typedef struct cfg_ctx {
  const char *p, *end;     /* what is left of the text */
  const char *source;
  int line;                /* lines handed to libinih so far */
  int rc;                  /* the first error's code */
  bool failed;             /* an error was reported */
  char *err;
  size_t err_len;
  cnn_net *net;
  int net_line;            /* the [net] header's line, 0: not seen */
  int sec;                 /* the open section, SEC_NONE before any */
  int sec_line;
  double val[MAX_KEYS];    /* its keys' values */
  int set_line[MAX_KEYS];  /* where each was set, 0: not set */
} cfg_ctx;

static void fail_at(cfg_ctx *c, int line, int rc, const char *f, ...)
    __attribute__((format(printf, 4, 5)));

static void fail_at(cfg_ctx *c, int line, int rc, const char *f, ...) {
  char reason[512];
  va_list ap;
  if (c->failed) return;
  va_start(ap, f);
  vsnprintf(reason, sizeof reason, f, ap);
  va_end(ap);
  if (c->err && c->err_len) {
    if (line > 0)
      snprintf(c->err, c->err_len, "%s:%d: %s", c->source, line, reason);
    else
      snprintf(c->err, c->err_len, "%s: %s", c->source, reason);
  }
  c->failed = true;
  c->rc = rc;
}

/* At most 40 printable bytes of text, for messages about what a file says. */
static const char *shown(const char *text, size_t n, char *buf, size_t len) {
  size_t k = 0;
  for (size_t i = 0; i < n && k + 4 < len && i < 40; i++)
    buf[k++] = text[i] >= 0x20 && text[i] < 0x7f ? text[i] : '?';
  if (n > 40 && k + 4 < len) {
    memcpy(buf + k, "...", 3);
    k += 3;
  }
  buf[k] = '\0';
  return buf;
}

/* ---- closing a section ----------------------------------------------------- */

static double value_or(const cfg_ctx *c, int key, double dflt) {
  return c->set_line[key] ? c->val[key] : dflt;
}

static void close_net(cfg_ctx *c) {
  static const int need[] = {NET_HEIGHT, NET_WIDTH, NET_CHANNELS};
  char missing[64] = "", why[512];
  cnn_train t;
  cnn_shape in;
  int rc;
  for (size_t i = 0; i < 3; i++)
    if (!c->set_line[need[i]]) {
      if (missing[0]) strcat(missing, ", ");
      strcat(missing, net_keys[need[i]].name);
    }
  if (missing[0]) {
    fail_at(c, c->sec_line, EMBER_EFORMAT,
            "[net] needs height, width and channels (missing: %s)", missing);
    return;
  }
  in.h = (uint32_t)c->val[NET_HEIGHT];
  in.w = (uint32_t)c->val[NET_WIDTH];
  in.c = (uint32_t)c->val[NET_CHANNELS];
  t.batch = (uint32_t)value_or(c, NET_BATCH, 1);
  t.learning_rate = value_or(c, NET_RATE, 0.001);
  t.momentum = value_or(c, NET_MOMENTUM, 0.9);
  t.decay = value_or(c, NET_DECAY, 0.0001);
  t.max_epochs = (uint32_t)value_or(c, NET_EPOCHS, 10);
  rc = cnn_net_set_input(c->net, in, &t, why, sizeof why);
  if (rc) fail_at(c, c->sec_line, rc, "%s", why);
}

/* The activation a conv or connected layer must name. */
static bool activation(cfg_ctx *c, int key, cnn_activation *act) {
  if (!c->set_line[key]) {
    fail_at(c, c->sec_line, EMBER_EFORMAT,
            "[%s] needs an activation: relu or linear (darknet's default, "
            "logistic, is not supported)", sections[c->sec].name);
    return false;
  }
  *act = (cnn_activation)c->val[key];
  return true;
}

static void close_layer(cfg_ctx *c) {
  cnn_layer_spec s;
  char why[512];
  int rc;
  memset(&s, 0, sizeof s);
  s.kind = (cnn_layer_kind)c->sec;
  switch (s.kind) {
  case CNN_LAYER_CONV:
    if (!activation(c, CONV_ACT, &s.act)) return;
    s.filters = (uint32_t)value_or(c, CONV_FILTERS, 1);
    s.size = (uint32_t)value_or(c, CONV_SIZE, 1);
    s.stride = (uint32_t)value_or(c, CONV_STRIDE, 1);
    s.padding = (uint32_t)value_or(c, CONV_PADDING, 0);
    if (value_or(c, CONV_PAD, 0) == 1) {
      if (c->set_line[CONV_PADDING] && s.padding != s.size / 2) {
        fail_at(c, c->set_line[CONV_PADDING], EMBER_EFORMAT,
                "padding=%u contradicts pad=1 (line %d), which means "
                "size/2 = %u", s.padding, c->set_line[CONV_PAD],
                s.size / 2);
        return;
      }
      s.padding = s.size / 2;
    }
    break;
  case CNN_LAYER_MAXPOOL:
    s.stride = (uint32_t)value_or(c, POOL_STRIDE, 1);
    s.size = (uint32_t)value_or(c, POOL_SIZE, s.stride);
    s.padding = (uint32_t)value_or(c, POOL_PADDING, s.size - 1);
    break;
  case CNN_LAYER_CONNECTED:
    if (!activation(c, FC_ACT, &s.act)) return;
    s.filters = (uint32_t)value_or(c, FC_OUTPUT, 1);
    break;
  case CNN_LAYER_SOFTMAX:
    break;
  }
  rc = cnn_net_add_layer(c->net, &s, c->sec_line, why, sizeof why);
  if (rc) fail_at(c, c->sec_line, rc, "%s", why);
}

static void close_section(cfg_ctx *c) {
  if (c->failed || c->sec == SEC_NONE) return;
  if (c->sec == SEC_NET)
    close_net(c);
  else
    close_layer(c);
}

/* ---- a [section] line -------------------------------------------------------- */

static int find_section(const char *name, size_t n) {
  for (int i = 0; i < NSECTIONS; i++) {
    if (!sections[i].name) continue;
    if ((strlen(sections[i].name) == n &&
         memcmp(sections[i].name, name, n) == 0) ||
        (strlen(sections[i].alias) == n &&
         memcmp(sections[i].alias, name, n) == 0))
      return i;
  }
  return SEC_NONE;
}

static void open_section(cfg_ctx *c, const char *line, size_t n) {
  const char *close = memchr(line, ']', n), *after;
  char show[64];
  size_t name_len;
  int sec;
  if (!close) {
    fail_at(c, c->line, EMBER_EFORMAT, "syntax error: '[' without ']'");
    return;
  }
  for (after = close + 1; after < line + n; after++) {
    if (*after == '#' || *after == ';') break;
    if (*after != ' ' && *after != '\t' && *after != '\r') {
      fail_at(c, c->line, EMBER_EFORMAT,
              "syntax error: '%s' after the section name",
              shown(after, (size_t)(line + n - after), show, sizeof show));
      return;
    }
  }
  name_len = (size_t)(close - line - 1);
  sec = find_section(line + 1, name_len);
  if (sec == SEC_NONE) {
    fail_at(c, c->line, EMBER_EFORMAT,
            "section [%s] not supported (ember's cnn reads [net], "
            "[convolutional], [maxpool], [connected] and [softmax])",
            shown(line + 1, name_len, show, sizeof show));
    return;
  }
  close_section(c);
  if (c->failed) return;
  if (sec == SEC_NET && c->net_line) {
    fail_at(c, c->line, EMBER_EFORMAT, "[net] repeated (first on line %d)",
            c->net_line);
    return;
  }
  if (sec != SEC_NET && !c->net_line) {
    fail_at(c, c->line, EMBER_EFORMAT,
            "[%s] before [net]: a network begins with [net]",
            sections[sec].name);
    return;
  }
  if (sec == SEC_NET) c->net_line = c->line;
  c->sec = sec;
  c->sec_line = c->line;
  memset(c->set_line, 0, sizeof c->set_line);
}

/* ---- libinih's reader and handler ---------------------------------------- */

/* One line at a time: leading blanks removed (so that libinih's multi-line
 * continuation never applies), a UTF-8 byte order mark on the first line
 * dropped, NUL bytes and lines that do not fit refused; [section] lines
 * are ours, libinih sees a blank line. Returns NULL at the end or after an
 * error. */
static char *read_line(char *str, int num, void *stream) {
  cfg_ctx *c = stream;
  size_t cap = num > 2 ? (size_t)num - 2 : 0, n;
  const char *s, *nl;
  if (c->failed || c->p >= c->end) return NULL;
  s = c->p;
  nl = memchr(s, '\n', (size_t)(c->end - s));
  n = nl ? (size_t)(nl - s) : (size_t)(c->end - s);
  c->p = nl ? nl + 1 : c->end;
  c->line++;
  if (memchr(s, '\0', n)) {
    fail_at(c, c->line, EMBER_EFORMAT, "NUL byte in the text");
    return NULL;
  }
  if (c->line == 1 && n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) {
    s += 3;
    n -= 3;
  }
  while (n && (*s == ' ' || *s == '\t')) {
    s++;
    n--;
  }
  if (n > cap) {
    fail_at(c, c->line, EMBER_EFORMAT, "line longer than %zu bytes", cap);
    return NULL;
  }
  if (n && *s == '[') {
    open_section(c, s, n);
    if (c->failed) return NULL;
    n = 0;
  }
  memcpy(str, s, n);
  str[n] = '\n';
  str[n + 1] = '\0';
  return str;
}

/* An integer or real value, or the activation, into c->val[key]. */
static bool parse_value(cfg_ctx *c, const key_def *k, const char *v,
                        double *out) {
  const char *sec = sections[c->sec].name;
  char show[64];
  char *end;
  double x;
  if (k->type == K_ACT) {
    if (strcmp(v, "relu") == 0)
      *out = CNN_ACT_RELU;
    else if (strcmp(v, "linear") == 0)
      *out = CNN_ACT_LINEAR;
    else {
      fail_at(c, c->line, EMBER_EFORMAT,
              "activation '%s' in [%s] not supported (relu or linear)",
              shown(v, strlen(v), show, sizeof show), sec);
      return false;
    }
    return true;
  }
  errno = 0;
  if (k->type == K_INT) {
    long long i;
    const char *d = v + (*v == '-' || *v == '+');
    i = (*d >= '0' && *d <= '9') ? strtoll(v, &end, 10) : 0;
    if (!(*d >= '0' && *d <= '9') || *end || errno) {
      fail_at(c, c->line, EMBER_EFORMAT, "%s in [%s]: '%s' is not an integer",
              k->name, sec, shown(v, strlen(v), show, sizeof show));
      return false;
    }
    if (i < (long long)k->lo || i > (long long)k->hi) {
      /* the upper bounds from 1024 up are cnn_net.h's CNN_MAX_* limits */
      fail_at(c, c->line,
              i > (long long)k->hi && k->hi >= CNN_MAX_KERNEL
                  ? EMBER_ETOOBIG : EMBER_EFORMAT,
              "%s in [%s]: %lld out of range %lld..%lld", k->name, sec, i,
              (long long)k->lo, (long long)k->hi);
      return false;
    }
    *out = (double)i;
    return true;
  }
  x = *v ? strtod(v, &end) : 0;
  if (!*v || *end || errno || !isfinite(x)) {
    fail_at(c, c->line, EMBER_EFORMAT, "%s in [%s]: '%s' is not a number",
            k->name, sec, shown(v, strlen(v), show, sizeof show));
    return false;
  }
  if ((k->lo_open ? x <= k->lo : x < k->lo) ||
      (k->hi_open ? x >= k->hi : x > k->hi)) {
    fail_at(c, c->line, EMBER_EFORMAT, "%s in [%s]: %g out of range %c%g, %g%c",
            k->name, sec, x, k->lo_open ? '(' : '[', k->lo, k->hi,
            k->hi_open ? ')' : ']');
    return false;
  }
  *out = x;
  return true;
}

static int on_key(void *user, const char *section, const char *name,
                  const char *value) {
  cfg_ctx *c = user;
  const section_def *d;
  char show[64];
  (void)section; /* ours is c->sec: libinih never sees a header */
  if (c->failed) return 0;
  if (c->sec == SEC_NONE) {
    fail_at(c, c->line, EMBER_EFORMAT,
            "key '%s' outside a section: a network begins with [net]",
            shown(name, strlen(name), show, sizeof show));
    return 0;
  }
  d = &sections[c->sec];
  for (size_t i = 0; i < d->nkeys; i++) {
    if (strcmp(d->keys[i].name, name) != 0) continue;
    if (c->set_line[i]) {
      fail_at(c, c->line, EMBER_EFORMAT,
              "key '%s' repeated in [%s] (first on line %d)", name, d->name,
              c->set_line[i]);
      return 0;
    }
    if (!parse_value(c, &d->keys[i], value, &c->val[i])) return 0;
    c->set_line[i] = c->line;
    return 1;
  }
  fail_at(c, c->line, EMBER_EFORMAT, "unknown key '%s' in [%s]",
          shown(name, strlen(name), show, sizeof show), d->name);
  return 0;
}

/* ---- entry points ------------------------------------------------------------ */

int cnn_cfg_parse(const char *text, size_t len, const char *source,
                  cnn_net **out, char *err, size_t err_len) {
  cfg_ctx c;
  char why[512];
  int ret, line;
  if (err && err_len) err[0] = '\0';
  if (!out || (!text && len)) {
    if (err && err_len) snprintf(err, err_len, "invalid arguments");
    if (out) *out = NULL;
    return EMBER_EINVAL;
  }
  *out = NULL;
  memset(&c, 0, sizeof c);
  c.p = text;
  c.end = text + len;
  c.source = source ? source : "input";
  c.err = err;
  c.err_len = err_len;
  c.sec = SEC_NONE;
  if (len > CNN_CFG_MAX_BYTES) {
    fail_at(&c, 0, EMBER_ETOOBIG, "larger than %d bytes", CNN_CFG_MAX_BYTES);
    return c.rc;
  }
  c.net = cnn_net_new();
  if (!c.net) {
    fail_at(&c, 0, EMBER_ENOMEM, "out of memory");
    return c.rc;
  }
  ret = ini_parse_stream(read_line, &c, on_key, &c);
  if (!c.failed && ret > 0)
    fail_at(&c, ret, EMBER_EFORMAT,
            "syntax error: expected key=value or [section]");
  else if (!c.failed && ret == -2)
    fail_at(&c, 0, EMBER_ENOMEM, "out of memory");
  else if (!c.failed && ret != 0)
    fail_at(&c, 0, EMBER_EFORMAT, "cannot parse (libinih error %d)", ret);
  close_section(&c);
  if (!c.failed && !c.net_line)
    fail_at(&c, 0, EMBER_EFORMAT, "no [net] section");
  if (!c.failed && cnn_net_finish(c.net, &line, why, sizeof why))
    fail_at(&c, line, EMBER_EFORMAT, "%s", why);
  if (c.failed) {
    cnn_net_destroy(c.net);
    return c.rc;
  }
  *out = c.net;
  return 0;
}

int cnn_cfg_read(const char *path, cnn_net **out, char *err, size_t err_len) {
  FILE *f;
  char *text;
  size_t n;
  int rc;
  if (err && err_len) err[0] = '\0';
  if (!path || !out) {
    if (err && err_len) snprintf(err, err_len, "invalid arguments");
    if (out) *out = NULL;
    return EMBER_EINVAL;
  }
  *out = NULL;
  f = fopen(path, "rb");
  if (!f) {
    if (err && err_len)
      snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
    return EMBER_EIO;
  }
  text = malloc(CNN_CFG_MAX_BYTES + 1);
  if (!text) {
    fclose(f);
    if (err && err_len) snprintf(err, err_len, "%s: out of memory", path);
    return EMBER_ENOMEM;
  }
  n = fread(text, 1, CNN_CFG_MAX_BYTES + 1, f);
  if (ferror(f)) {
    if (err && err_len)
      snprintf(err, err_len, "%s: cannot read: %s", path, strerror(errno));
    rc = EMBER_EIO;
  } else {
    rc = cnn_cfg_parse(text, n, path, out, err, err_len);
  }
  fclose(f);
  free(text);
  return rc;
}
