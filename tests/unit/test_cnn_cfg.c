/* test_cnn_cfg.c - darknet .cfg networks for the cnn accelerator
 * (accelerators/cnn: cnn_cfg.c, cnn_net.c): the shipped LeNet with its
 * shapes, parameters and multiply-adds; darknet's defaults and short
 * names; every key darknet reads for the implemented sections, written at
 * its default, against none written; what the keys mean (pad,
 * batch_normalize, leaky, dropout, avgpool, subdivisions, the learning-
 * rate policies); every value ember does not run refused by key, value
 * and file:line; every error with its file:line; the limits; the printed
 * plan; allocation failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <math.h>
#include <stdbool.h>

#include "alloc_fail.h"
#include "cnn_net.h"

#define LENET EMBER_SOURCE_DIR "/accelerators/cnn/nets/lenet.cfg"

#define assert_contains(text, needle)                                        \
  do {                                                                       \
    if (!strstr((text), (needle)))                                           \
      fail_msg("\"%s\" does not contain \"%s\"", (text), (needle));          \
  } while (0)

#define assert_shape(s, H, W, C)                                             \
  do {                                                                       \
    cnn_shape s_ = (s);                                                      \
    if (s_.h != (H) || s_.w != (W) || s_.c != (C))                           \
      fail_msg("%s = %ux%ux%u, expected %ux%ux%u", #s, s_.h, s_.w, s_.c,     \
               (unsigned)(H), (unsigned)(W), (unsigned)(C));                 \
  } while (0)

#define assert_u64(a, b)                                                     \
  do {                                                                       \
    unsigned long long a_ = (a), b_ = (b);                                   \
    if (a_ != b_) fail_msg("%s = %llu, expected %llu", #a, a_, b_);          \
  } while (0)

static cnn_net *parse_ok(const char *text) {
  cnn_net *n = NULL;
  char err[512];
  int rc = cnn_cfg_parse(text, strlen(text), "t.cfg", &n, err, sizeof err);
  if (rc) fail_msg("parse failed: %d %s\n%s", rc, err, text);
  assert_non_null(n);
  return n;
}

/* text must fail with rc and a message starting "t.cfg:LINE: " (or
 * "t.cfg: " for line 0) that contains want. */
static void parse_fails(const char *text, int rc, int line,
                        const char *want) {
  cnn_net *n = (cnn_net *)1;
  char err[512], prefix[64];
  int got = cnn_cfg_parse(text, strlen(text), "t.cfg", &n, err, sizeof err);
  if (got != rc)
    fail_msg("rc %d (%s), expected %d, for:\n%s", got, err, rc, text);
  assert_null(n);
  if (line > 0)
    snprintf(prefix, sizeof prefix, "t.cfg:%d: ", line);
  else
    snprintf(prefix, sizeof prefix, "t.cfg: ");
  if (strncmp(err, prefix, strlen(prefix)) != 0)
    fail_msg("\"%s\" does not start with \"%s\"", err, prefix);
  assert_contains(err, want);
}

#define NET "[net]\nheight=28\nwidth=28\nchannels=1\n" /* lines 1-4 */

/* ---- the shipped network ----------------------------------------------- */
static void test_lenet(void **state) {
  (void)state;
  cnn_net *n = NULL;
  char err[512];
  size_t count;
  int rc = cnn_cfg_read(LENET, &n, err, sizeof err);
  if (rc) fail_msg("%s", err);
  const cnn_layer *l = cnn_net_layers(n, &count);
  const cnn_train *t = cnn_net_train(n);
  assert_shape(cnn_net_input(n), 28, 28, 1);
  assert_int_equal(t->batch, 64);
  assert_true(t->learning_rate == 0.01 && t->momentum == 0.9 &&
              t->decay == 0.0005);
  assert_int_equal(t->max_epochs, 10);
  assert_int_equal(count, 7);
  static const cnn_layer_kind kinds[] = {
      CNN_LAYER_CONV, CNN_LAYER_MAXPOOL, CNN_LAYER_CONV, CNN_LAYER_MAXPOOL,
      CNN_LAYER_CONNECTED, CNN_LAYER_CONNECTED, CNN_LAYER_SOFTMAX};
  static const uint32_t out[7][3] = {{24, 24, 20}, {12, 12, 20}, {8, 8, 50},
                                     {4, 4, 50},   {1, 1, 500},  {1, 1, 10},
                                     {1, 1, 10}};
  static const uint64_t params[7] = {520, 0, 25050, 0, 400500, 5010, 0};
  static const uint64_t macs[7] = {24 * 24 * 20 * 25, 0, 8 * 8 * 50 * 500,
                                   0, 800 * 500, 500 * 10, 0};
  for (size_t i = 0; i < count; i++) {
    assert_int_equal(l[i].kind, kinds[i]);
    assert_shape(l[i].out, out[i][0], out[i][1], out[i][2]);
    if (i) assert_shape(l[i].in, l[i - 1].out.h, l[i - 1].out.w,
                        l[i - 1].out.c);
    assert_u64(l[i].weights + l[i].biases, params[i]);
    assert_u64(l[i].fp_macs, macs[i]);
    assert_u64(l[i].pg_macs, macs[i]);
    assert_u64(l[i].eb_macs, i == 0 ? 0 : macs[i]);
  }
  assert_int_equal(l[0].act, CNN_ACT_RELU);
  assert_int_equal(l[4].act, CNN_ACT_RELU);
  assert_int_equal(l[5].act, CNN_ACT_LINEAR);
  assert_int_equal(l[0].size, 5);
  assert_int_equal(l[1].stride, 2);
  assert_u64(l[1].elem_ops, 12 * 12 * 20 * 4);
  assert_u64(l[6].elem_ops, 30);
  assert_u64(cnn_net_params(n), 431080);
  assert_u64(cnn_net_activations(n),
             784 + 11520 + 2880 + 3200 + 800 + 500 + 10 + 10);
  assert_u64(cnn_net_macs(n), 3 * 2293000 - 288000);
  assert_int_equal(cnn_net_classes(n), 10);
  /* its line numbers, as a partitioner's messages would quote them */
  for (size_t i = 0; i < count; i++) assert_true(l[i].line > 10);
  cnn_net_destroy(n);
  cnn_net_destroy(NULL);
}

/* ---- darknet's meaning of keys ------------------------------------------- */
static void test_defaults(void **state) {
  (void)state;
  size_t count;
  /* [net] defaults; conv defaults (1 filter, 1x1, stride 1, no padding);
   * maxpool's padding defaults to size-1 in all (7 -> 4, not 3); size
   * defaults to stride; connected output defaults to 1, which a softmax
   * refuses, so it is written */
  cnn_net *n = parse_ok("[net]\nheight=7\nwidth=9\nchannels=3\n"
                        "[convolutional]\nactivation=linear\n"
                        "[maxpool]\nsize=2\nstride=2\n"
                        "[maxpool]\nstride=1\n"
                        "[connected]\noutput=4\nactivation=relu\n"
                        "[softmax]\n");
  const cnn_layer *l = cnn_net_layers(n, &count);
  const cnn_train *t = cnn_net_train(n);
  assert_int_equal(t->batch, 1);
  assert_true(t->learning_rate == 0.001 && t->momentum == 0.9 &&
              t->decay == 0.0001);
  assert_int_equal(t->max_epochs, 10);
  assert_int_equal(count, 5);
  assert_shape(l[0].out, 7, 9, 1);
  assert_int_equal(l[0].size, 1);
  assert_int_equal(l[0].padding, 0);
  assert_u64(l[0].weights, 3);
  assert_int_equal(l[1].padding, 1);
  assert_shape(l[1].out, 4, 5, 1);
  assert_int_equal(l[2].size, 1);
  assert_int_equal(l[2].padding, 0);
  assert_shape(l[2].out, 4, 5, 1);
  assert_shape(l[3].out, 1, 1, 4);
  assert_u64(l[3].weights, 80);
  assert_int_equal(cnn_net_classes(n), 4);
  cnn_net_destroy(n);

  /* pad=1 is size/2 on each side; padding=N; stride; the short names;
   * comments, blank and indented lines, CRLF, a byte order mark */
  n = parse_ok("\xEF\xBB\xBF# a comment\r\n[network]\r\n"
               "  height = 32\nwidth=32\nchannels=3 ; inline\n\n"
               "; another comment\n"
               "[conv]\nfilters=16\nsize=3\npad=1\nactivation=relu\n"
               "[conv]\nfilters=8\nsize=5\nstride=2\npadding=1\n"
               "activation=linear\n"
               "[conv]\nfilters=4\nsize=3\npad=1\npadding=1\n"
               "activation=linear\n"
               "[max]\nsize=3\nstride=3\npadding=0\n"
               "[conn]\noutput=10\nactivation=linear\n[soft]\n");
  l = cnn_net_layers(n, &count);
  assert_int_equal(count, 6);
  assert_shape(l[0].out, 32, 32, 16);
  assert_int_equal(l[0].padding, 1);
  assert_u64(l[0].weights, 16 * 9 * 3);
  assert_shape(l[1].out, 15, 15, 8); /* (32 + 2 - 5) / 2 + 1 */
  assert_shape(l[2].out, 15, 15, 4);
  assert_shape(l[3].out, 5, 5, 4);
  assert_u64(l[3].elem_ops, 5 * 5 * 4 * 9);
  assert_u64(l[4].weights, 100 * 10);
  cnn_net_destroy(n);

  /* a file without a final newline; keys with ':' as libinih reads them */
  n = parse_ok(NET "[connected]\noutput: 3\nactivation=linear\n[softmax]");
  assert_int_equal(cnn_net_classes(n), 3);
  cnn_net_destroy(n);
}

/* ---- errors, each with its line -------------------------------------------- */
static void test_errors(void **state) {
  (void)state;
  const int F = EMBER_EFORMAT;
  /* values */
  parse_fails("[net]\nheight=2x8\n", F, 2,
              "height in [net]: '2x8' is not an integer");
  parse_fails("[net]\nheight=\n", F, 2, "'' is not an integer");
  parse_fails(NET "learning_rate=fast\n", F, 5,
              "learning_rate in [net]: 'fast' is not a number");
  parse_fails(NET "learning_rate=nan\n", F, 5, "'nan' is not a number");
  parse_fails(NET "momentum=1\n", F, 5,
              "momentum in [net]: 1 out of range [0, 1)");
  parse_fails(NET "learning_rate=0\n", F, 5, "out of range (0, 10]");
  parse_fails(NET "[convolutional]\nsize=0\n", F, 6,
              "size in [convolutional]: 0 out of range 1..1024");
  parse_fails(NET "[convolutional]\nfilters=-3\n", F, 6,
              "-3 out of range 1..65536");
  parse_fails(NET "[convolutional]\nactivation=leakyy\n", F, 6,
              "activation 'leakyy' in [convolutional] is not one of "
              "darknet's");
  /* keys and sections */
  parse_fails(NET "[convolutional]\nbias=1\n", F, 6,
              "unknown key 'bias' in [convolutional]");
  parse_fails(NET "batch_normalize=1\n", F, 5,
              "unknown key 'batch_normalize' in [net]");
  parse_fails(NET "[softmax]\nsubdivisions=1\n", F, 6,
              "unknown key 'subdivisions' in [softmax]");
  parse_fails(NET "[convolutional]\nsize=3\nsize=5\n", F, 7,
              "key 'size' repeated in [convolutional] (first on line 6)");
  parse_fails(NET "[convolutional]\nsize=3\nactivation=relu\n[route]\n"
                  "layers=-1\n", F, 8,
              "section [route] not supported (ember's cnn reads [net], "
              "[convolutional], [maxpool], [avgpool], [connected], "
              "[dropout] and [softmax])");
  parse_fails(NET "[Convolutional]\n", F, 5, "section [Convolutional] not");
  parse_fails(NET "[convolutional\n", F, 5, "'[' without ']'");
  parse_fails(NET "[softmax] x\n", F, 5, "'x' after the section name");
  parse_fails(NET "[convolutional]\nsize 3\n", F, 6,
              "syntax error: expected key=value or [section]");
  parse_fails("height=28\n[net]\n", F, 1,
              "key 'height' outside a section: a network begins with [net]");
  /* structure */
  parse_fails("# nothing\n\n", F, 0, "no [net] section");
  parse_fails("", F, 0, "no [net] section");
  parse_fails("[convolutional]\nsize=3\n" NET, F, 1,
              "[convolutional] before [net]: a network begins with [net]");
  parse_fails(NET "[softmax]\n[net]\n", F, 6, "[net] repeated (first on "
                                              "line 1)");
  parse_fails("[net]\nheight=28\nchannels=1\n[softmax]\n", F, 1,
              "[net] needs height, width and channels (missing: width)");
  parse_fails("[net]\n[softmax]\n", F, 1,
              "(missing: height, width, channels)");
  parse_fails(NET, F, 0, "no layers after [net]");
  parse_fails(NET "[softmax]\n[connected]\noutput=2\nactivation=relu\n", F,
              6, "[connected] after [softmax] (line 5): [softmax] must be "
                 "the last layer");
  parse_fails(NET "[connected]\noutput=10\nactivation=relu\n", F, 5,
              "the last layer is [connected]: a network ends in [softmax]");
  parse_fails(NET "[connected]\nactivation=linear\n[softmax]\n", F, 7,
              "[softmax] over 1 value: at least 2 classes");
  /* shapes: a kernel larger than its input, a chain that does not */
  parse_fails(NET "[convolutional]\nsize=29\nactivation=relu\n", F, 5,
              "[convolutional] kernel 29x29 larger than its input 28x28x1 "
              "with padding 0 on each side");
  parse_fails(NET "[maxpool]\nsize=30\npadding=1\n", F, 5,
              "[maxpool] kernel 30x30 larger than its input 28x28x1 with "
              "padding 1 in all");
  parse_fails(NET "[connected]\noutput=10\nactivation=relu\n"
                  "[convolutional]\nsize=3\nactivation=relu\n[softmax]\n",
              F, 8, "[convolutional] kernel 3x3 larger than its input "
                    "1x1x10");
  /* bytes */
  {
    static const char nul[] = "[net]\nheight=28\0\n";
    cnn_net *n = NULL;
    char err[256];
    assert_int_equal(cnn_cfg_parse(nul, sizeof nul - 1, "t.cfg", &n, err,
                                   sizeof err),
                     F);
    assert_string_equal(err, "t.cfg:2: NUL byte in the text");
    assert_null(n);
  }
  {
    char line[400];
    memset(line, 'x', sizeof line);
    memcpy(line, "[net]\nheight=", 13);
    line[sizeof line - 1] = '\0';
    parse_fails(line, F, 2, "line longer than");
  }
}

/* The same kernel of 29 fits 28 with padding 1 on each side. */
static void test_padding_fits(void **state) {
  (void)state;
  cnn_net *n = parse_ok(NET "[convolutional]\nsize=29\npadding=1\n"
                            "activation=relu\n[softmax]\n");
  size_t count;
  const cnn_layer *l = cnn_net_layers(n, &count);
  assert_shape(l[0].out, 2, 2, 1);
  assert_int_equal(cnn_net_classes(n), 4);
  cnn_net_destroy(n);
}

/* cnn_layer_check: every layer a network is read into passes, padding
 * at least the kernel's size included (issue 25: windows wholly in
 * padding); one whose shapes do not follow, or chain, is refused with its
 * numbers. */
static void test_layer_check(void **state) {
  (void)state;
  cnn_net *n = parse_ok("[net]\nheight=5\nwidth=4\nchannels=2\n"
                        "[convolutional]\nfilters=3\nsize=1\npadding=2\n"
                        "[convolutional]\nfilters=4\nsize=3\npadding=3\n"
                        "stride=2\n"
                        "[maxpool]\nsize=2\nstride=2\n"
                        "[dropout]\n[avgpool]\n"
                        "[connected]\noutput=3\n[softmax]\n");
  size_t count;
  const cnn_layer *l = cnn_net_layers(n, &count);
  char why[200];
  assert_shape(l[0].out, 9, 8, 3);
  assert_shape(l[1].out, 7, 6, 4);
  for (size_t i = 0; i < count; i++)
    if (cnn_layer_check(&l[i], i ? &l[i - 1].out : NULL, why, sizeof why))
      fail_msg("layer %zu refused: %s", i, why);
  cnn_layer bad = l[1];
  bad.out.h++;
  assert_int_equal(cnn_layer_check(&bad, NULL, why, sizeof why),
                   EMBER_EPARAM);
  assert_contains(why, "output 8x6x4, where 7x6x4 follows from its input "
                       "9x8x3");
  assert_int_equal(cnn_layer_check(&l[2], &l[0].out, why, sizeof why),
                   EMBER_EPARAM);
  assert_contains(why, "input 7x6x4 is not the previous layer's output "
                       "9x8x3");
  bad = l[0];
  bad.size = 14;
  assert_int_equal(cnn_layer_check(&bad, NULL, why, sizeof why),
                   EMBER_EPARAM);
  assert_contains(why, "a 14x14 window at stride 1 does not fit in 5x4 "
                       "padded by 4");
  bad = l[5];
  bad.out.w = 2;
  assert_int_equal(cnn_layer_check(&bad, NULL, why, sizeof why),
                   EMBER_EPARAM);
  bad = l[3];
  bad.out.c = 0;
  assert_int_equal(cnn_layer_check(&bad, NULL, why, sizeof why),
                   EMBER_EPARAM);
  assert_contains(why, "out of range");
  cnn_net_destroy(n);
}

/* ---- limits ------------------------------------------------------------------ */
static void test_limits(void **state) {
  (void)state;
  const int B = EMBER_ETOOBIG;
  parse_fails("[net]\nheight=65537\n", B, 2,
              "height in [net]: 65537 out of range 1..65536");
  parse_fails(NET "batch=100000\n", B, 5, "out of range 1..65536");
  parse_fails(NET "[connected]\noutput=16777217\n", B, 6,
              "out of range 1..16777216");
  parse_fails(NET "[convolutional]\nsize=99999999999999999999\n", EMBER_EFORMAT,
              6, "is not an integer");
  /* parameters: 4096 x 4096 inputs x 100 outputs */
  parse_fails("[net]\nheight=4096\nwidth=4096\nchannels=1\n"
              "[connected]\noutput=100\nactivation=relu\n[softmax]\n",
              B, 5, "[connected] 16777216 inputs x 100 outputs: over the "
                    "limit of 268435456 parameters");
  /* parameters summed over layers */
  parse_fails("[net]\nheight=1\nwidth=1\nchannels=16384\n"
              "[connected]\noutput=10000\nactivation=relu\n"
              "[connected]\noutput=16384\nactivation=relu\n"
              "[connected]\noutput=10000\nactivation=relu\n[softmax]\n",
              B, 8, "brings the parameters to 327706384, over the limit");
  /* activations per sample: 1024 x 1024 x 65536 */
  parse_fails("[net]\nheight=1024\nwidth=1024\nchannels=1\n"
              "[convolutional]\nfilters=65536\nactivation=relu\n",
              B, 5, "[convolutional] output 1024x1024x65536 over the limit "
                    "of 67108864 values");
  parse_fails("[net]\nheight=4096\nwidth=4096\nchannels=8\n", B, 1,
              "input 4096x4096x8 over the limit");
  /* batch x activations */
  parse_fails("[net]\nheight=1024\nwidth=1024\nchannels=3\nbatch=1024\n"
              "[softmax]\n", B, 1, "batch 1024 x 3145728 input values over "
                                   "the limit of 2147483648");
  parse_fails("[net]\nheight=1024\nwidth=1024\nchannels=1\nbatch=512\n"
              "[convolutional]\nfilters=4\nactivation=relu\n",
              B, 6, "brings the activations to 5242880 per sample "
                    "(batch 512)");
  /* layers */
  {
    size_t cap = 64 + (CNN_MAX_LAYERS + 2) * 40;
    char *text = malloc(cap), *p = text;
    assert_non_null(text);
    p += sprintf(p, "[net]\nheight=1\nwidth=1\nchannels=2\n");
    for (int i = 0; i <= CNN_MAX_LAYERS; i++)
      p += sprintf(p, "[maxpool]\n");
    parse_fails(text, B, 5 + CNN_MAX_LAYERS, "more than 1024 layers");
    free(text);
  }
  /* the file */
  {
    char *big = malloc(CNN_CFG_MAX_BYTES + 2);
    cnn_net *n = NULL;
    char err[256];
    assert_non_null(big);
    memset(big, '\n', CNN_CFG_MAX_BYTES + 1);
    assert_int_equal(cnn_cfg_parse(big, CNN_CFG_MAX_BYTES + 1, "t.cfg", &n,
                                   err, sizeof err),
                     B);
    assert_string_equal(err, "t.cfg: larger than 1048576 bytes");
    free(big);
  }
}

/* ---- files, arguments, the printed plan ------------------------------------- */
static void test_files(void **state) {
  (void)state;
  cnn_net *n = (cnn_net *)1;
  char err[512], path[] = "/tmp/test_cnn_cfg_XXXXXX";
  assert_int_equal(cnn_cfg_read("/nonexistent/x.cfg", &n, err, sizeof err),
                   EMBER_EIO);
  assert_null(n);
  assert_contains(err, "/nonexistent/x.cfg: cannot open: ");
  assert_int_equal(cnn_cfg_read("/tmp", &n, err, sizeof err), EMBER_EIO);
  assert_contains(err, "/tmp: cannot read: ");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const char *bad = NET "[convolutional]\nsize=3\nactivation=tanh\n";
  assert_int_equal(write(fd, bad, strlen(bad)), (ssize_t)strlen(bad));
  close(fd);
  assert_int_equal(cnn_cfg_read(path, &n, err, sizeof err), EMBER_EFORMAT);
  char want[128];
  snprintf(want, sizeof want, "%s:7: activation=tanh", path);
  assert_contains(err, want);
  unlink(path);
  assert_int_equal(cnn_cfg_parse(NULL, 3, "t", &n, err, sizeof err),
                   EMBER_EINVAL);
  assert_int_equal(cnn_cfg_parse("", 0, "t", NULL, err, sizeof err),
                   EMBER_EINVAL);
  assert_int_equal(cnn_cfg_parse("[x]", 3, NULL, &n, err, sizeof err),
                   EMBER_EFORMAT);
  assert_contains(err, "input:1: ");
  assert_int_equal(cnn_cfg_parse("[x]", 3, "t", &n, NULL, 0), EMBER_EFORMAT);
}

static void test_format(void **state) {
  (void)state;
  cnn_net *n = NULL;
  char err[512];
  if (cnn_cfg_read(LENET, &n, err, sizeof err)) fail_msg("%s", err);
  size_t need = cnn_net_format(n, NULL, 0);
  char *text = malloc(need + 1);
  assert_non_null(text);
  assert_int_equal(cnn_net_format(n, text, need + 1), need);
  assert_int_equal(strlen(text), need);
  assert_contains(text, "input 28x28x1, batch 64, learning_rate 0.01");
  assert_contains(text, "convolutional        28x28x1 -> 24x24x20       "
                        "5x5/1/0    relu            520          288000\n");
  assert_contains(text, "maxpool             24x24x20 -> 12x12x20");
  assert_contains(text, "connected             4x4x50 -> 1x1x500");
  assert_contains(text, "softmax               1x1x10 -> 1x1x10");
  assert_contains(text, "total: 7 layers, 431080 parameters, 19704 "
                        "activations and 2293000 FP multiply-adds per "
                        "sample (6591000 with EB and PG), 10 classes\n");
  int lines = 0;
  for (const char *p = text; *p; p++) lines += *p == '\n';
  assert_int_equal(lines, 2 + 7 + 1);
  /* a short buffer gets a NUL-terminated prefix and the same answer */
  char small[40];
  assert_int_equal(cnn_net_format(n, small, sizeof small), need);
  assert_int_equal(strlen(small), sizeof small - 1);
  assert_memory_equal(small, text, sizeof small - 1);
  free(text);
  assert_string_equal(cnn_layer_kind_name(CNN_LAYER_MAXPOOL), "maxpool");
  assert_string_equal(cnn_layer_kind_name((cnn_layer_kind)0), "?");
  cnn_net_destroy(n);
}

/* ---- darknet's keys (parser.c) ------------------------------------------- */

/* Two networks read alike: every layer's shapes, settings and counts, and
 * the training settings. */
static void assert_same_net(const cnn_net *a, const cnn_net *b) {
  size_t na, nb;
  const cnn_layer *la = cnn_net_layers(a, &na), *lb = cnn_net_layers(b, &nb);
  assert_int_equal(na, nb);
  for (size_t i = 0; i < na; i++) {
    const cnn_layer *x = &la[i], *y = &lb[i];
    if (x->kind != y->kind || x->size != y->size ||
        x->stride != y->stride || x->padding != y->padding ||
        x->act != y->act || x->batch_norm != y->batch_norm ||
        x->probability != y->probability || x->weights != y->weights ||
        x->biases != y->biases || x->scales != y->scales ||
        x->rolling != y->rolling || x->fp_macs != y->fp_macs ||
        x->elem_ops != y->elem_ops || x->out.h != y->out.h ||
        x->out.w != y->out.w || x->out.c != y->out.c)
      fail_msg("layer %zu (%s) differs: act %d/%d bn %d/%d p %g/%g "
               "size %u/%u padding %u/%u", i, cnn_layer_kind_name(x->kind),
               x->act, y->act, x->batch_norm, y->batch_norm, x->probability,
               y->probability, x->size, y->size, x->padding, y->padding);
  }
  const cnn_train *p = cnn_net_train(a), *q = cnn_net_train(b);
  assert_int_equal(p->batch, q->batch);
  assert_true(p->learning_rate == q->learning_rate &&
              p->momentum == q->momentum && p->decay == q->decay);
  assert_int_equal(p->max_epochs, q->max_epochs);
  assert_int_equal(p->policy, q->policy);
  assert_int_equal(p->burn_in, q->burn_in);
  assert_true(p->power == q->power && p->scale == q->scale &&
              p->gamma == q->gamma);
  assert_int_equal(p->step, q->step);
  assert_int_equal(p->max_batches, q->max_batches);
  assert_int_equal(p->n_steps, q->n_steps);
}

/* darknet's per-layer keys, at their defaults */
#define LAYER_DEFAULTS                                                       \
  "truth=0\nonlyforward=0\nstopbackward=0\ndontsave=0\ndontload=0\n"       \
  "numload=0\ndontloadscales=0\nlearning_rate=1\nsmooth=0\n"

/* Every key darknet reads for the sections ember implements, written at
 * darknet's default, reads as the same network as none written; and
 * darknet's defaults where nothing is written (logistic activations, a
 * dropout probability of 0.5, an avg-pool over the whole plane). */
static void test_darknet_defaults(void **state) {
  (void)state;
  static const char bare[] =
      "[net]\nheight=12\nwidth=10\nchannels=2\n"
      "[convolutional]\n"
      "[convolutional]\nfilters=4\nsize=3\n"
      "[maxpool]\nstride=2\n"
      "[dropout]\n"
      "[avgpool]\n"
      "[connected]\noutput=6\n"
      "[softmax]\n";
  static const char all[] =
      "[network]\nheight=12\nwidth=10\nchannels=2\ninputs=240\n"
      "batch=1\nlearning_rate=0.001\nmomentum=0.9\ndecay=0.0001\n"
      "time_steps=1\nnotruth=0\nrandom=0\nadam=0\nB1=0.9\nB2=0.999\n"
      "eps=0.0000001\nmax_crop=20\nmin_crop=10\nmax_ratio=2\n"
      "min_ratio=1\ncenter=0\nclip=0\nangle=0\naspect=1\nsaturation=1\n"
      "exposure=1\nhue=0\npolicy=constant\nburn_in=0\npower=4\n"
      "step=1\nscale=1\ngamma=1\nmax_batches=0\nmax_epochs=10\n"
      "[conv]\nfilters=1\nsize=1\nstride=1\npad=0\npadding=0\n"
      "groups=1\nactivation=logistic\nbatch_normalize=0\nbinary=0\n"
      "xnor=0\nflipped=0\ndot=0\n" LAYER_DEFAULTS
      "[conv]\nfilters=4\nsize=3\n" LAYER_DEFAULTS
      "[max]\nstride=2\nsize=2\npadding=1\n" LAYER_DEFAULTS
      "[dropout]\nprobability=.5\n" LAYER_DEFAULTS
      "[avg]\n" LAYER_DEFAULTS
      "[conn]\noutput=6\nactivation=logistic\nbatch_normalize=0\n"
      LAYER_DEFAULTS
      "[soft]\ngroups=1\ntemperature=1\nspatial=0\nnoloss=0\n"
      LAYER_DEFAULTS;
  cnn_net *a = parse_ok(bare), *b = parse_ok(all);
  assert_same_net(a, b);
  size_t count;
  const cnn_layer *l = cnn_net_layers(a, &count);
  assert_int_equal(count, 7);
  assert_int_equal(l[0].act, CNN_ACT_LOGISTIC);
  assert_int_equal(l[5].act, CNN_ACT_LOGISTIC);
  assert_true(l[3].probability == 0.5);
  assert_shape(l[3].out, 5, 4, 4);
  assert_shape(l[4].out, 1, 1, 4);
  assert_u64(l[4].elem_ops, 5 * 4 * 4);
  assert_u64(l[3].elem_ops, 2 * 5 * 4 * 4);
  assert_u64(l[0].elem_ops, 12 * 10 * 4); /* logistic: 4 a value */
  const cnn_train *t = cnn_net_train(a);
  assert_int_equal(t->subdivisions, 0);
  assert_int_equal(t->policy, CNN_POLICY_CONSTANT);
  cnn_net_destroy(a);
  cnn_net_destroy(b);
  /* subdivisions=1 written (darknet's default) keeps a micro-batch of the
   * whole batch; not written, ember picks it (cnn_net.h) */
  a = parse_ok(NET "batch=8\nsubdivisions=1\n[softmax]\n");
  assert_int_equal(cnn_net_train(a)->subdivisions, 1);
  cnn_net_destroy(a);
}

/* What darknet's keys mean: pad, batch_normalize, leaky, dropout, the
 * avg-pool, subdivisions and the schedules' settings. */
static void test_darknet_meaning(void **state) {
  (void)state;
  size_t count;
  /* pad (any non-zero value) is size/2 on each side and overrides
   * padding, as in darknet's parse_convolutional */
  cnn_net *n = parse_ok(NET "[convolutional]\nfilters=3\nsize=5\npad=2\n"
                            "padding=7\nbatch_normalize=1\n"
                            "activation=leaky\n"
                            "[dropout]\nprobability=0.25\n"
                            "[avgpool]\n[softmax]\n");
  const cnn_layer *l = cnn_net_layers(n, &count);
  assert_int_equal(count, 4);
  assert_int_equal(l[0].padding, 2);
  assert_shape(l[0].out, 28, 28, 3);
  assert_int_equal(l[0].batch_norm, 1);
  assert_int_equal(l[0].act, CNN_ACT_LEAKY);
  assert_u64(l[0].weights, 3 * 25);
  assert_u64(l[0].biases, 3);
  assert_u64(l[0].scales, 3);
  assert_u64(l[0].rolling, 6);
  assert_u64(cnn_layer_params(&l[0]), 75 + 3 + 3 + 6);
  assert_u64(cnn_net_params(n), 87);
  assert_u64(l[0].elem_ops, 28 * 28 * 3 * (1 + 8));
  assert_true(l[1].probability == 0.25);
  assert_shape(l[2].out, 1, 1, 3);
  assert_int_equal(cnn_net_classes(n), 3);
  char text[2048];
  assert_true(cnn_net_format(n, text, sizeof text) < sizeof text);
  assert_contains(text, "convolutional        28x28x1 -> 28x28x3        "
                        "5x5/1/2 bn leaky            87           "
                        "58800\n");
  assert_contains(text, "dropout              28x28x3 -> 28x28x3        "
                        "p=0.25");
  assert_contains(text, "avgpool              28x28x3 -> 1x1x3          "
                        "global");
  cnn_net_destroy(n);
  /* subdivisions, the schedule's keys, the loader's (any value) */
  n = parse_ok(NET "batch=64\nsubdivisions=4\npolicy=steps\n"
                   "steps=100, 200,300\nscales=.1,.1,10\nburn_in=5\n"
                   "power=2\nangle=7\nsaturation=1.5\nexposure=1.5\n"
                   "hue=.1\naspect=.5\nmax_crop=32\nmin_crop=28\n"
                   "center=1\nrandom=1\nmax_ratio=1.5\nmin_ratio=.5\n"
                   "[softmax]\n");
  const cnn_train *t = cnn_net_train(n);
  assert_int_equal(t->subdivisions, 4);
  assert_int_equal(t->policy, CNN_POLICY_STEPS);
  assert_int_equal(t->n_steps, 3);
  assert_int_equal(t->steps[1], 200);
  assert_true(t->scales[2] == 10);
  assert_int_equal(t->burn_in, 5);
  assert_true(cnn_net_format(n, text, sizeof text) < sizeof text);
  assert_contains(text, "batch 64, learning_rate 0.001, momentum 0.9, "
                        "decay 0.0001, max_epochs 10, subdivisions 4, "
                        "policy steps, burn_in 5\n");
  cnn_net_destroy(n);
}

/* cnn_train_rate: darknet's get_current_rate for each policy, update k
 * counted from 1. */
static void test_schedules(void **state) {
  (void)state;
  cnn_train t;
  memset(&t, 0, sizeof t);
  t.power = 4;
  t.step = 1;
  t.scale = 1;
  t.gamma = 1;
  const double r = 0.1, eps = 1e-15;
  t.policy = CNN_POLICY_CONSTANT;
  assert_true(cnn_train_rate(&t, r, 1) == r);
  assert_true(cnn_train_rate(&t, r, 1000000) == r);
  t.burn_in = 10; /* r (k / burn_in)^power before it */
  assert_true(fabs(cnn_train_rate(&t, r, 5) - r * pow(0.5, 4)) < eps);
  assert_true(cnn_train_rate(&t, r, 10) == r);
  t.burn_in = 0;
  t.policy = CNN_POLICY_STEP; /* r scale^(k / step) */
  t.step = 100;
  t.scale = 0.5;
  assert_true(cnn_train_rate(&t, r, 99) == r);
  assert_true(fabs(cnn_train_rate(&t, r, 250) - r * 0.25) < eps);
  t.policy = CNN_POLICY_STEPS; /* each scale from its step on */
  t.n_steps = 2;
  t.steps[0] = 10;
  t.steps[1] = 20;
  t.scales[0] = 0.1;
  t.scales[1] = 0.5;
  assert_true(cnn_train_rate(&t, r, 9) == r);
  assert_true(fabs(cnn_train_rate(&t, r, 10) - r * 0.1) < eps);
  assert_true(fabs(cnn_train_rate(&t, r, 25) - r * 0.05) < eps);
  t.policy = CNN_POLICY_EXP; /* r gamma^k */
  t.gamma = 0.9;
  assert_true(fabs(cnn_train_rate(&t, r, 3) - r * 0.729) < eps);
  t.policy = CNN_POLICY_POLY; /* r (1 - k / max_batches)^power, then 0 */
  t.max_batches = 100;
  t.power = 2;
  assert_true(fabs(cnn_train_rate(&t, r, 50) - r * 0.25) < eps);
  assert_true(cnn_train_rate(&t, r, 100) == 0);
  assert_true(cnn_train_rate(&t, r, 5000) == 0);
  t.policy = CNN_POLICY_SIG; /* r / (1 + exp(gamma (k - step))) */
  t.gamma = 0.5;
  t.step = 10;
  assert_true(fabs(cnn_train_rate(&t, r, 10) - r / 2) < eps);
  assert_true(fabs(cnn_train_rate(&t, r, 12) - r / (1 + exp(1))) < eps);
}

/* What ember does not run is refused, naming the key, its value and its
 * line; the same key at darknet's default is read. */
static void test_unimplemented(void **state) {
  (void)state;
  const int F = EMBER_EFORMAT;
  static const struct {
    const char *section, *key, *want;
  } cases[] = {
      {"[net]", "adam=1", "adam=1 in [net]: Adam is not implemented"},
      {"[net]", "time_steps=2", "time_steps=2 in [net]: time steps"},
      {"[net]", "clip=.5", "clip=.5 in [net]: weight clipping"},
      {"[net]", "policy=random", "policy=random in [net]: a learning rate "
                                 "drawn at random"},
      {"[convolutional]", "groups=2", "groups=2 in [convolutional]: grouped "
                                      "convolutions are not implemented "
                                      "(only groups=1, darknet's default, "
                                      "is)"},
      {"[convolutional]", "binary=1", "binary=1 in [convolutional]"},
      {"[convolutional]", "xnor=1", "xnor=1 in [convolutional]"},
      {"[convolutional]", "flipped=1", "flipped=1 in [convolutional]"},
      {"[convolutional]", "dot=0.1", "dot=0.1 in [convolutional]"},
      {"[convolutional]", "activation=tanh", "activation=tanh in "
                                             "[convolutional]: darknet's "
                                             "tanh is not implemented"},
      {"[convolutional]", "activation=elu", "darknet's elu"},
      {"[connected]", "batch_normalize=1", "batch_normalize=1 in "
                                           "[connected]: batch "
                                           "normalisation of a connected "
                                           "layer is not implemented"},
      {"[softmax]", "groups=2", "groups=2 in [softmax]: a softmax over "
                                "groups"},
      {"[softmax]", "temperature=2", "temperature=2 in [softmax]"},
      {"[softmax]", "tree=data/9k.tree", "tree=data/9k.tree in [softmax]: "
                                         "a hierarchical softmax"},
      {"[softmax]", "spatial=1", "spatial=1 in [softmax]"},
      {"[softmax]", "noloss=1", "noloss=1 in [softmax]"},
      {"[maxpool]", "stopbackward=1", "stopbackward=1 in [maxpool]"},
      {"[dropout]", "onlyforward=1", "onlyforward=1 in [dropout]"},
      {"[avgpool]", "truth=1", "truth=1 in [avgpool]"},
      {"[convolutional]", "learning_rate=0.5", "learning_rate=0.5 in "
                                               "[convolutional]: a layer's "
                                               "own learning-rate scale"},
      {"[connected]", "smooth=1", "smooth=1 in [connected]"},
      {"[convolutional]", "dontload=1", "dontload=1 in [convolutional]: "
                                        "ember's weights files hold every "
                                        "layer"},
      {"[convolutional]", "dontsave=1", "dontsave=1"},
      {"[convolutional]", "numload=3", "numload=3"},
      {"[convolutional]", "dontloadscales=1", "dontloadscales=1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char text[512], want[256];
    bool net = strcmp(cases[i].section, "[net]") == 0;
    if (net)
      snprintf(text, sizeof text, "[net]\nheight=8\nwidth=8\nchannels=1\n"
               "%s\n[softmax]\n", cases[i].key);
    else
      snprintf(text, sizeof text, "[net]\nheight=8\nwidth=8\nchannels=1\n"
               "%s\n%s\n[softmax]\n", cases[i].section, cases[i].key);
    snprintf(want, sizeof want, "%s", cases[i].want);
    parse_fails(text, F, net ? 5 : 6, want);
  }
  /* settings darknet would run into the ground */
  parse_fails(NET "batch=4\nsubdivisions=8\n[softmax]\n", F, 6,
              "subdivisions=8 in [net] is more than batch=4");
  parse_fails(NET "inputs=100\n[softmax]\n", F, 5,
              "inputs=100 in [net] is not height x width x channels = 784");
  parse_fails(NET "policy=steps\nsteps=10\n[softmax]\n", F, 5,
              "policy=steps in [net] needs steps and as many scales (1 "
              "steps, 0 scales)");
  parse_fails(NET "policy=poly\n[softmax]\n", F, 5,
              "policy=poly in [net] needs max_batches > 0");
  parse_fails(NET "policy=linear\n[softmax]\n", F, 5,
              "policy 'linear' in [net] is not one of darknet's");
  parse_fails(NET "steps=10,x\n[softmax]\n", F, 5,
              "steps in [net]: '10,x' is not a list of update counts");
  parse_fails(NET "[dropout]\nprobability=1\n[softmax]\n", F, 6,
              "probability in [dropout]: 1 out of range [0, 1)");
  parse_fails(NET "[convolutional]\ngroups=x\n", F, 6,
              "groups in [convolutional]: 'x' is not an integer");
  {
    char text[2048] = NET "steps=0";
    for (int i = 1; i <= CNN_MAX_STEPS; i++)
      snprintf(text + strlen(text), sizeof text - strlen(text), ",%d", i);
    strcat(text, "\n[softmax]\n");
    parse_fails(text, EMBER_ETOOBIG, 5, "steps in [net]: more than 64");
  }
}

/* ---- allocation failures ------------------------------------------------------- */
static void test_alloc_failures(void **state) {
  (void)state;
  FILE *f = fopen(LENET, "rb");
  assert_non_null(f);
  char base[4096];
  size_t len = fread(base, 1, sizeof base - 1, f);
  fclose(f);
  base[len] = '\0';
  /* and enough layers to grow the array more than once */
  char text[8192];
  snprintf(text, sizeof text, "%s", base);
  char *end = strstr(text, "[softmax]");
  assert_non_null(end);
  for (int i = 0; i < 20; i++)
    end += sprintf(end, "[connected]\noutput=10\nactivation=relu\n");
  sprintf(end, "[softmax]\n");
  int done = 0;
  for (int k = 1; !done && k < 10000; k++) {
    long live = alloc_live;
    alloc_count = 0;
    alloc_fail_at = k;
    cnn_net *n = NULL;
    char err[256];
    int rc = cnn_cfg_parse(text, strlen(text), "t", &n, err, sizeof err);
    int calls = alloc_count;
    alloc_fail_at = 0;
    if (rc == 0) {
      assert_non_null(n);
      size_t count;
      cnn_net_layers(n, &count);
      assert_int_equal(count, 27);
      cnn_net_destroy(n);
      done = calls < k;
    } else {
      if (rc != EMBER_ENOMEM)
        fail_msg("allocation %d failed: rc %d (%s)", k, rc, err);
      assert_null(n);
      assert_contains(err, "out of memory");
    }
    if (alloc_live != live)
      fail_msg("allocation %d failed: %ld blocks leaked", k,
               alloc_live - live);
  }
  assert_true(done);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lenet),
      cmocka_unit_test(test_defaults),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_padding_fits),
      cmocka_unit_test(test_layer_check),
      cmocka_unit_test(test_limits),
      cmocka_unit_test(test_files),
      cmocka_unit_test(test_format),
      cmocka_unit_test(test_darknet_defaults),
      cmocka_unit_test(test_darknet_meaning),
      cmocka_unit_test(test_schedules),
      cmocka_unit_test(test_unimplemented),
      cmocka_unit_test(test_alloc_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
