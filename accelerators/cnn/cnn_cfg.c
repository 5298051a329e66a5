/*
 * cnn_cfg.c - darknet .cfg files (cnn_net.h has the sections and keys):
 * libinih parses the key=value lines, fed one line at a time by our own
 * reader, which counts lines and takes the [section] headers itself
 * (darknet repeats them, and libinih tells a handler nothing when a
 * section starts). Each section's keys are a table: type, range, and for
 * a key ember runs at one value only, that value and why another is
 * refused (checked as the key is read, so the refusal names its line). A
 * section is checked, and its layer added to the network, when the next
 * one starts or the file ends.
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

/* K_INT, K_REAL: a number in [lo, hi] (open where said); K_ACT an
 * activation's name; K_POLICY a learning-rate policy's; K_INTS, K_REALS a
 * comma list of numbers (steps, scales); K_TEXT any text. */
typedef enum key_type {
  K_INT, K_REAL, K_ACT, K_POLICY, K_INTS, K_REALS, K_TEXT
} key_type;

/* A key: its type and range (darknet's: any value darknet reads without
 * failing, within cnn_net.h's limits), and where ember runs one value
 * only, that value and why another is refused (refuse_all: every value,
 * for a key whose mere presence asks for what ember does not run). */
typedef struct key_def {
  const char *name;
  key_type type;
  double lo, hi;        /* the range, inclusive unless open */
  bool lo_open, hi_open;
  const char *refuse;   /* non-NULL: values other than only are refused */
  double only;
  bool refuse_all;
} key_def;

#define I32_MIN -2147483648.0
#define I32_MAX 2147483647.0
#define INT_KEY(n, lo, hi) {n, K_INT, lo, hi, false, false, NULL, 0, false}
#define REAL_ANY(n)                                                          \
  {n, K_REAL, -HUGE_VAL, HUGE_VAL, false, false, NULL, 0, false}
#define FLAG_ONLY(n, why, v)                                                 \
  {n, K_INT, I32_MIN, I32_MAX, false, false, why, v, false}
#define REAL_ONLY(n, why, v)                                                 \
  {n, K_REAL, -HUGE_VAL, HUGE_VAL, false, false, why, v, false}

enum { SEC_NONE = -1, SEC_NET = 0 }; /* a layer section's kind: its index */

typedef struct section_def {
  const char *name, *alias;  /* darknet's long and short names */
  const key_def *keys;
  size_t nkeys;
} section_def;

enum { NET_HEIGHT, NET_WIDTH, NET_CHANNELS, NET_INPUTS, NET_BATCH,
       NET_SUBDIVISIONS, NET_RATE, NET_MOMENTUM, NET_DECAY, NET_EPOCHS,
       NET_POLICY, NET_BURN_IN, NET_POWER, NET_STEP, NET_SCALE, NET_STEPS,
       NET_SCALES, NET_GAMMA, NET_MAX_BATCHES, NET_ADAM, NET_B1, NET_B2,
       NET_EPS, NET_TIME_STEPS, NET_CLIP, NET_NOTRUTH, NET_RANDOM,
       NET_MAX_CROP, NET_MIN_CROP, NET_MAX_RATIO, NET_MIN_RATIO, NET_CENTER,
       NET_ANGLE, NET_ASPECT, NET_SATURATION, NET_EXPOSURE, NET_HUE };
static const key_def net_keys[] = {
    [NET_HEIGHT] = INT_KEY("height", 1, CNN_MAX_SIDE),
    [NET_WIDTH] = INT_KEY("width", 1, CNN_MAX_SIDE),
    [NET_CHANNELS] = INT_KEY("channels", 1, CNN_MAX_CHANNELS),
    [NET_INPUTS] = INT_KEY("inputs", 1, CNN_MAX_ACTIVATIONS),
    [NET_BATCH] = INT_KEY("batch", 1, CNN_MAX_BATCH),
    [NET_SUBDIVISIONS] = INT_KEY("subdivisions", 1, CNN_MAX_BATCH),
    [NET_RATE] = {"learning_rate", K_REAL, 0, 10, true, false, NULL, 0,
                  false},
    [NET_MOMENTUM] = {"momentum", K_REAL, 0, 1, false, true, NULL, 0, false},
    [NET_DECAY] = {"decay", K_REAL, 0, 1, false, true, NULL, 0, false},
    [NET_EPOCHS] = INT_KEY("max_epochs", 1, CNN_MAX_EPOCHS),
    [NET_POLICY] = {"policy", K_POLICY, 0, 0, false, false, NULL, 0, false},
    [NET_BURN_IN] = INT_KEY("burn_in", 0, I32_MAX),
    [NET_POWER] = REAL_ANY("power"),
    [NET_STEP] = INT_KEY("step", 1, I32_MAX),
    [NET_SCALE] = REAL_ANY("scale"),
    [NET_STEPS] = {"steps", K_INTS, 0, I32_MAX, false, false, NULL, 0, false},
    [NET_SCALES] = {"scales", K_REALS, -HUGE_VAL, HUGE_VAL, false, false,
                    NULL, 0, false},
    [NET_GAMMA] = REAL_ANY("gamma"),
    [NET_MAX_BATCHES] = INT_KEY("max_batches", 0, I32_MAX),
    [NET_ADAM] = FLAG_ONLY("adam", "Adam is not implemented: ember trains "
                           "by SGD with momentum", 0),
    [NET_B1] = REAL_ANY("B1"),
    [NET_B2] = REAL_ANY("B2"),
    [NET_EPS] = REAL_ANY("eps"),
    [NET_TIME_STEPS] = FLAG_ONLY("time_steps", "time steps are for darknet's "
                                 "recurrent layers, which ember does not "
                                 "have", 1),
    [NET_CLIP] = REAL_ONLY("clip", "weight clipping is not implemented", 0),
    [NET_NOTRUTH] = INT_KEY("notruth", I32_MIN, I32_MAX),
    [NET_RANDOM] = INT_KEY("random", I32_MIN, I32_MAX),
    [NET_MAX_CROP] = INT_KEY("max_crop", I32_MIN, I32_MAX),
    [NET_MIN_CROP] = INT_KEY("min_crop", I32_MIN, I32_MAX),
    [NET_MAX_RATIO] = REAL_ANY("max_ratio"),
    [NET_MIN_RATIO] = REAL_ANY("min_ratio"),
    [NET_CENTER] = INT_KEY("center", I32_MIN, I32_MAX),
    [NET_ANGLE] = REAL_ANY("angle"),
    [NET_ASPECT] = REAL_ANY("aspect"),
    [NET_SATURATION] = REAL_ANY("saturation"),
    [NET_EXPOSURE] = REAL_ANY("exposure"),
    [NET_HUE] = REAL_ANY("hue"),
};

enum { CONV_FILTERS, CONV_SIZE, CONV_STRIDE, CONV_PAD, CONV_PADDING,
       CONV_ACT, CONV_BN, CONV_GROUPS, CONV_BINARY, CONV_XNOR, CONV_FLIPPED,
       CONV_DOT };
static const key_def conv_keys[] = {
    [CONV_FILTERS] = INT_KEY("filters", 1, CNN_MAX_CHANNELS),
    [CONV_SIZE] = INT_KEY("size", 1, CNN_MAX_KERNEL),
    [CONV_STRIDE] = INT_KEY("stride", 1, CNN_MAX_KERNEL),
    [CONV_PAD] = INT_KEY("pad", I32_MIN, I32_MAX),
    [CONV_PADDING] = INT_KEY("padding", 0, CNN_MAX_KERNEL),
    [CONV_ACT] = {"activation", K_ACT, 0, 0, false, false, NULL, 0, false},
    [CONV_BN] = INT_KEY("batch_normalize", I32_MIN, I32_MAX),
    [CONV_GROUPS] = FLAG_ONLY("groups", "grouped convolutions are not "
                              "implemented", 1),
    [CONV_BINARY] = FLAG_ONLY("binary", "binary weights are not "
                              "implemented", 0),
    [CONV_XNOR] = FLAG_ONLY("xnor", "XNOR convolutions are not implemented",
                            0),
    [CONV_FLIPPED] = FLAG_ONLY("flipped", "flipped weights (darknet's "
                               "weights files) are not implemented", 0),
    [CONV_DOT] = REAL_ONLY("dot", "darknet's filter-similarity penalty is "
                           "not implemented", 0),
};

enum { POOL_SIZE, POOL_STRIDE, POOL_PADDING };
static const key_def pool_keys[] = {
    [POOL_SIZE] = INT_KEY("size", 1, CNN_MAX_KERNEL),
    [POOL_STRIDE] = INT_KEY("stride", 1, CNN_MAX_KERNEL),
    [POOL_PADDING] = INT_KEY("padding", 0, CNN_MAX_KERNEL),
};

enum { FC_OUTPUT, FC_ACT, FC_BN };
static const key_def fc_keys[] = {
    [FC_OUTPUT] = INT_KEY("output", 1, CNN_MAX_OUTPUTS),
    [FC_ACT] = {"activation", K_ACT, 0, 0, false, false, NULL, 0, false},
    [FC_BN] = FLAG_ONLY("batch_normalize", "batch normalisation of a "
                        "connected layer is not implemented (of a "
                        "convolutional layer it is)", 0),
};

enum { SOFT_GROUPS, SOFT_TEMPERATURE, SOFT_TREE, SOFT_SPATIAL,
       SOFT_NOLOSS };
static const key_def soft_keys[] = {
    [SOFT_GROUPS] = FLAG_ONLY("groups", "a softmax over groups is not "
                              "implemented", 1),
    [SOFT_TEMPERATURE] = REAL_ONLY("temperature", "a softmax temperature is "
                                   "not implemented", 1),
    [SOFT_TREE] = {"tree", K_TEXT, 0, 0, false, false, "a hierarchical "
                   "softmax (darknet's tree files) is not implemented", 0,
                   true},
    [SOFT_SPATIAL] = REAL_ONLY("spatial", "a spatial softmax is not "
                               "implemented", 0),
    [SOFT_NOLOSS] = FLAG_ONLY("noloss", "a softmax without its loss is not "
                              "implemented", 0),
};

enum { DROP_PROBABILITY };
static const key_def drop_keys[] = {
    [DROP_PROBABILITY] = {"probability", K_REAL, 0, 1, false, true, NULL, 0,
                          false},
};

/* darknet's keys of every layer section (parse_network_cfg), after the
 * section's own: each only at its default */
static const key_def layer_keys[] = {
    FLAG_ONLY("truth", "a layer's output as the truth is not implemented",
              0),
    FLAG_ONLY("onlyforward", "frozen layers are not implemented", 0),
    FLAG_ONLY("stopbackward", "stopping back-propagation is not "
              "implemented", 0),
    FLAG_ONLY("dontsave", "ember's weights files hold every layer", 0),
    FLAG_ONLY("dontload", "ember's weights files hold every layer", 0),
    FLAG_ONLY("numload", "ember's weights files hold every layer", 0),
    FLAG_ONLY("dontloadscales", "ember's weights files hold every layer",
              0),
    REAL_ONLY("learning_rate", "a layer's own learning-rate scale is not "
              "implemented", 1),
    REAL_ONLY("smooth", "darknet's output smoothing is not implemented", 0),
};
#define N_LAYER_KEYS (sizeof layer_keys / sizeof layer_keys[0])

#define KEYS(k) k, sizeof k / sizeof k[0]
static const section_def sections[] = {
    [SEC_NET] = {"net", "network", KEYS(net_keys)},
    [CNN_LAYER_CONV] = {"convolutional", "conv", KEYS(conv_keys)},
    [CNN_LAYER_MAXPOOL] = {"maxpool", "max", KEYS(pool_keys)},
    [CNN_LAYER_CONNECTED] = {"connected", "conn", KEYS(fc_keys)},
    [CNN_LAYER_SOFTMAX] = {"softmax", "soft", KEYS(soft_keys)},
    [CNN_LAYER_DROPOUT] = {"dropout", "dropout", KEYS(drop_keys)},
    [CNN_LAYER_AVGPOOL] = {"avgpool", "avg", NULL, 0},
};
#undef KEYS
#define NSECTIONS ((int)(sizeof sections / sizeof sections[0]))
#define MAX_KEYS 48
_Static_assert(sizeof net_keys / sizeof net_keys[0] <= MAX_KEYS &&
                   sizeof conv_keys / sizeof conv_keys[0] + N_LAYER_KEYS <=
                       MAX_KEYS,
               "a section's keys fit cfg_ctx's arrays");

/* The key_def of index i of section sec: its own keys, then (layers)
 * the common ones. */
static const key_def *key_at(int sec, size_t i) {
  const section_def *d = &sections[sec];
  return i < d->nkeys ? &d->keys[i] : &layer_keys[i - d->nkeys];
}

static size_t keys_of(int sec) {
  return sections[sec].nkeys + (sec == SEC_NET ? 0 : N_LAYER_KEYS);
}

/* darknet's activations (activations.c), in its order, and what ember
 * runs of them */
static const struct {
  const char *name;
  int act;             /* a cnn_activation, -1: not implemented */
} activations[] = {
    {"logistic", CNN_ACT_LOGISTIC}, {"loggy", -1}, {"relu", CNN_ACT_RELU},
    {"elu", -1}, {"selu", -1}, {"relie", -1}, {"plse", -1}, {"hardtan", -1},
    {"lhtan", -1}, {"linear", CNN_ACT_LINEAR}, {"ramp", -1},
    {"leaky", CNN_ACT_LEAKY}, {"tanh", -1}, {"stair", -1},
};

/* darknet's learning-rate policies (get_policy), -1: not implemented */
static const struct {
  const char *name;
  int policy;
} policies[] = {
    {"constant", CNN_POLICY_CONSTANT}, {"step", CNN_POLICY_STEP},
    {"steps", CNN_POLICY_STEPS}, {"exp", CNN_POLICY_EXP},
    {"poly", CNN_POLICY_POLY}, {"sig", CNN_POLICY_SIG}, {"random", -1},
};

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
  uint32_t steps[CNN_MAX_STEPS];   /* [net] steps= */
  double scales[CNN_MAX_STEPS];    /* [net] scales= */
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
  memset(&t, 0, sizeof t);
  in.h = (uint32_t)c->val[NET_HEIGHT];
  in.w = (uint32_t)c->val[NET_WIDTH];
  in.c = (uint32_t)c->val[NET_CHANNELS];
  if (c->set_line[NET_INPUTS] &&
      c->val[NET_INPUTS] != (double)in.h * in.w * in.c) {
    fail_at(c, c->set_line[NET_INPUTS], EMBER_EFORMAT,
            "inputs=%.0f in [net] is not height x width x channels = %llu",
            c->val[NET_INPUTS], (unsigned long long)in.h * in.w * in.c);
    return;
  }
  t.batch = (uint32_t)value_or(c, NET_BATCH, 1);
  t.subdivisions = (uint32_t)value_or(c, NET_SUBDIVISIONS, 0);
  if (t.subdivisions > t.batch) {
    fail_at(c, c->set_line[NET_SUBDIVISIONS], EMBER_EFORMAT,
            "subdivisions=%u in [net] is more than batch=%u: darknet would "
            "run forward passes of batch/subdivisions = 0 samples",
            t.subdivisions, t.batch);
    return;
  }
  t.learning_rate = value_or(c, NET_RATE, 0.001);
  t.momentum = value_or(c, NET_MOMENTUM, 0.9);
  t.decay = value_or(c, NET_DECAY, 0.0001);
  t.max_epochs = (uint32_t)value_or(c, NET_EPOCHS, 10);
  t.policy = (cnn_policy)value_or(c, NET_POLICY, CNN_POLICY_CONSTANT);
  t.burn_in = (uint32_t)value_or(c, NET_BURN_IN, 0);
  t.power = value_or(c, NET_POWER, 4);
  t.step = (uint32_t)value_or(c, NET_STEP, 1);
  t.scale = value_or(c, NET_SCALE, 1);
  t.gamma = value_or(c, NET_GAMMA, 1);
  t.max_batches = (uint32_t)value_or(c, NET_MAX_BATCHES, 0);
  t.n_steps = (uint32_t)value_or(c, NET_STEPS, 0);
  memcpy(t.steps, c->steps, sizeof t.steps);
  memcpy(t.scales, c->scales, sizeof t.scales);
  if (t.policy == CNN_POLICY_STEPS &&
      (!t.n_steps || value_or(c, NET_SCALES, 0) != t.n_steps)) {
    fail_at(c, c->set_line[NET_POLICY], EMBER_EFORMAT,
            "policy=steps in [net] needs steps and as many scales (%u "
            "steps, %.0f scales)", t.n_steps, value_or(c, NET_SCALES, 0));
    return;
  }
  if (t.policy == CNN_POLICY_POLY && !t.max_batches) {
    fail_at(c, c->set_line[NET_POLICY], EMBER_EFORMAT,
            "policy=poly in [net] needs max_batches > 0 (its length in "
            "updates)");
    return;
  }
  rc = cnn_net_set_input(c->net, in, &t, why, sizeof why);
  if (rc) fail_at(c, c->sec_line, rc, "%s", why);
}

static void close_layer(cfg_ctx *c) {
  cnn_layer_spec s;
  char why[512];
  int rc;
  memset(&s, 0, sizeof s);
  s.kind = (cnn_layer_kind)c->sec;
  switch (s.kind) {
  case CNN_LAYER_CONV:
    s.act = (cnn_activation)value_or(c, CONV_ACT, CNN_ACT_LOGISTIC);
    s.filters = (uint32_t)value_or(c, CONV_FILTERS, 1);
    s.size = (uint32_t)value_or(c, CONV_SIZE, 1);
    s.stride = (uint32_t)value_or(c, CONV_STRIDE, 1);
    s.padding = (uint32_t)value_or(c, CONV_PADDING, 0);
    if (value_or(c, CONV_PAD, 0) != 0) s.padding = s.size / 2;
    s.batch_norm = value_or(c, CONV_BN, 0) != 0;
    break;
  case CNN_LAYER_MAXPOOL:
    s.stride = (uint32_t)value_or(c, POOL_STRIDE, 1);
    s.size = (uint32_t)value_or(c, POOL_SIZE, s.stride);
    s.padding = (uint32_t)value_or(c, POOL_PADDING, s.size - 1);
    break;
  case CNN_LAYER_CONNECTED:
    s.act = (cnn_activation)value_or(c, FC_ACT, CNN_ACT_LOGISTIC);
    s.filters = (uint32_t)value_or(c, FC_OUTPUT, 1);
    break;
  case CNN_LAYER_DROPOUT:
    s.probability = value_or(c, DROP_PROBABILITY, 0.5);
    break;
  case CNN_LAYER_SOFTMAX:
  case CNN_LAYER_AVGPOOL:
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
            "[convolutional], [maxpool], [avgpool], [connected], "
            "[dropout] and [softmax])",
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

/* One number of a K_INTS or K_REALS list, v[0..n) without blanks
 * around it, into *out; false when it is not one. */
static bool list_number(const char *v, size_t n, bool integer, double *out) {
  char buf[64], *end;
  while (n && (*v == ' ' || *v == '\t')) v++, n--;
  while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
  if (!n || n >= sizeof buf) return false;
  memcpy(buf, v, n);
  buf[n] = '\0';
  errno = 0;
  if (integer) {
    const char *d = buf + (*buf == '-' || *buf == '+');
    if (!(*d >= '0' && *d <= '9')) return false;
    *out = (double)strtoll(buf, &end, 10);
  } else {
    *out = strtod(buf, &end);
  }
  return !*end && !errno && isfinite(*out);
}

/* A comma list into c->steps or c->scales; *out its length. */
static bool parse_list(cfg_ctx *c, const key_def *k, const char *v,
                       double *out) {
  const char *sec = sections[c->sec].name;
  bool integer = k->type == K_INTS;
  char show[64];
  size_t n = 0;
  for (const char *p = v;; n++) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    double x;
    if (n == CNN_MAX_STEPS) {
      fail_at(c, c->line, EMBER_ETOOBIG, "%s in [%s]: more than %d values",
              k->name, sec, CNN_MAX_STEPS);
      return false;
    }
    if (!list_number(p, len, integer, &x) || x < k->lo || x > k->hi) {
      fail_at(c, c->line, EMBER_EFORMAT,
              "%s in [%s]: '%s' is not a list of %s", k->name, sec,
              shown(v, strlen(v), show, sizeof show),
              integer ? "update counts (integers >= 0)" : "numbers");
      return false;
    }
    if (integer)
      c->steps[n] = (uint32_t)x;
    else
      c->scales[n] = x;
    if (!comma) break;
    p = comma + 1;
  }
  *out = (double)(n + 1);
  return true;
}

/* A name out of a table (activations, policies) into *out; -1 entries
 * are darknet's but not ember's. */
static bool parse_name(cfg_ctx *c, const key_def *k, const char *v,
                       double *out) {
  const char *sec = sections[c->sec].name;
  bool act = k->type == K_ACT;
  size_t n = act ? sizeof activations / sizeof activations[0]
                 : sizeof policies / sizeof policies[0];
  char show[64];
  shown(v, strlen(v), show, sizeof show);
  for (size_t i = 0; i < n; i++) {
    const char *name = act ? activations[i].name : policies[i].name;
    int value = act ? activations[i].act : policies[i].policy;
    if (strcmp(v, name) != 0) continue;
    if (value >= 0) {
      *out = value;
      return true;
    }
    if (act)
      fail_at(c, c->line, EMBER_EFORMAT,
              "activation=%s in [%s]: darknet's %s is not implemented "
              "(linear, relu, leaky and logistic are)", show, sec, show);
    else
      fail_at(c, c->line, EMBER_EFORMAT,
              "policy=random in [net]: a learning rate drawn at random is "
              "not implemented (constant, step, steps, exp, poly and sig "
              "are)");
    return false;
  }
  fail_at(c, c->line, EMBER_EFORMAT, "%s '%s' in [%s] is not one of "
          "darknet's (%s)", k->name, show, sec,
          act ? "linear, relu, leaky, logistic, tanh, ..."
              : "constant, step, steps, exp, poly, sig, random");
  return false;
}

/* A key's value into *out: a number, a name's enum, a list's length. */
static bool parse_value(cfg_ctx *c, const key_def *k, const char *v,
                        double *out) {
  const char *sec = sections[c->sec].name;
  char show[64];
  char *end;
  double x;
  switch (k->type) {
  case K_ACT:
  case K_POLICY:
    return parse_name(c, k, v, out);
  case K_INTS:
  case K_REALS:
    return parse_list(c, k, v, out);
  case K_TEXT:
    *out = 0;
    return true;
  case K_INT:
  case K_REAL:
    break;
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
      /* the upper bounds from 1024 to 2^26 are cnn_net.h's CNN_MAX_*
       * limits */
      fail_at(c, c->line,
              i > (long long)k->hi && k->hi >= CNN_MAX_KERNEL &&
                      k->hi <= CNN_MAX_ACTIVATIONS
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
  char show[64], vshow[64];
  (void)section; /* ours is c->sec: libinih never sees a header */
  if (c->failed) return 0;
  if (c->sec == SEC_NONE) {
    fail_at(c, c->line, EMBER_EFORMAT,
            "key '%s' outside a section: a network begins with [net]",
            shown(name, strlen(name), show, sizeof show));
    return 0;
  }
  const char *sec = sections[c->sec].name;
  for (size_t i = 0; i < keys_of(c->sec); i++) {
    const key_def *k = key_at(c->sec, i);
    if (strcmp(k->name, name) != 0) continue;
    if (c->set_line[i]) {
      fail_at(c, c->line, EMBER_EFORMAT,
              "key '%s' repeated in [%s] (first on line %d)", name, sec,
              c->set_line[i]);
      return 0;
    }
    if (!parse_value(c, k, value, &c->val[i])) return 0;
    if (k->refuse && (k->refuse_all || c->val[i] != k->only)) {
      shown(value, strlen(value), vshow, sizeof vshow);
      if (k->refuse_all)
        fail_at(c, c->line, EMBER_EFORMAT, "%s=%s in [%s]: %s", name, vshow,
                sec, k->refuse);
      else
        fail_at(c, c->line, EMBER_EFORMAT, "%s=%s in [%s]: %s (only "
                "%s=%g, darknet's default, is)", name, vshow, sec,
                k->refuse, name, k->only);
      return 0;
    }
    c->set_line[i] = c->line;
    return 1;
  }
  fail_at(c, c->line, EMBER_EFORMAT, "unknown key '%s' in [%s]",
          shown(name, strlen(name), show, sizeof show), sec);
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
