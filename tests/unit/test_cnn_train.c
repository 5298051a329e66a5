/* test_cnn_train - the cnn accelerator through libember's generic API on
 * the embedded engine: the listing names cnn; LeNet (nets/lenet.cfg) as
 * two stages, each one state block (EMBER_BLOCK_STATE), trained for 20 SGD
 * steps of 20 images on the 100 Fashion-MNIST images of tests/data/cnn,
 * the activations and errors between the stages passed as out blocks that
 * never go back to the client; the loss must fall. A state block sized for
 * another stage is refused with the sizes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accelerators/cnn/cnn.pb-c.h"
#include "cnn_idx.h"
#include "cnn_layout.h"
#include "cnn_net.h"
#include "ember/ember.h"

#define LENET EMBER_SOURCE_DIR "/accelerators/cnn/nets/lenet.cfg"
#define DATA EMBER_SOURCE_DIR "/tests/data/cnn"

enum { B = 20, STEPS = 20, SPLIT = 4, LAYERS = 7, PX = 28 * 28 };

static ember_client *client;
static char *cfg;          /* LeNet's text */
static size_t cfg_len;

static int setup(void **state) {
  (void)state;
  ember_options o = {.size = sizeof o, .client_name = "test_cnn_train",
                     .embedded_threads = 1};
  FILE *f = fopen(LENET, "rb");
  if (!f) return -1;
  cfg = malloc(CNN_CFG_MAX_BYTES);
  cfg_len = cfg ? fread(cfg, 1, CNN_CFG_MAX_BYTES, f) : 0;
  fclose(f);
  return ember_connect("embedded", &o, &client);
}

static int teardown(void **state) {
  (void)state;
  ember_close(client);
  free(cfg);
  return 0;
}

/* Params of op on LeNet's layers [first, end); free() it */
static uint8_t *params(Ember__Cnn__Op op, uint32_t first, uint32_t end,
                       size_t *len) {
  Ember__Cnn__Params p = EMBER__CNN__PARAMS__INIT;
  p.op = op;
  p.net.data = (uint8_t *)cfg;
  p.net.len = cfg_len;
  p.first = first;
  p.end = end;
  p.batch = B;
  p.has_seed = 1;
  p.seed = 2024;
  *len = ember__cnn__params__get_packed_size(&p);
  uint8_t *buf = malloc(*len);
  assert_non_null(buf);
  ember__cnn__params__pack(&p, buf);
  return buf;
}

/* One task on a stage; the Result's loss into *loss when given. */
static void task(Ember__Cnn__Op op, uint32_t first, uint32_t end,
                 ember_block *const *in, size_t n_in, ember_block *st,
                 ember_block **out, double *loss) {
  size_t len;
  uint8_t *p = params(op, first, end, &len);
  ember_submit_options o = {.size = sizeof o, .states = &st, .n_states = 1,
                            .outputs = out, .n_outputs = out ? 1 : 0};
  ember_task *t = NULL;
  assert_int_equal(ember_run(client, "cnn", p, len, in, n_in, &o, &t), 0);
  if (ember_task_status(t))
    fail_msg("cnn op %d on %u..%u: %s: %s", (int)op, first, end - 1,
             ember_errname(ember_task_status(t)), ember_task_message(t));
  const ember_task_info *info = ember_task_get_info(t);
  assert_string_equal(info->platform_kind, "cpu");
  size_t size;
  const void *res = ember_task_output(t, &size);
  Ember__Cnn__Result *r = ember__cnn__result__unpack(NULL, size, res);
  assert_non_null(r);
  if (loss) {
    assert_true(r->has_loss);
    *loss = r->loss;
  }
  ember__cnn__result__free_unpacked(r, NULL);
  ember_task_free(t);
  free(p);
}

static ember_block *state_block(uint32_t first, uint32_t end) {
  cnn_net *net = NULL;
  char err[256];
  assert_int_equal(cnn_cfg_parse(cfg, cfg_len, "lenet", &net, err,
                                 sizeof err), 0);
  cnn_layout L;
  assert_int_equal(cnn_layout_compute(net, first, end, B, 1, &L), 0);
  cnn_net_destroy(net);
  void *zero = calloc(1, L.total);
  assert_non_null(zero);
  ember_block *b = NULL;
  assert_int_equal(ember_block_create(client, zero, L.total,
                                      EMBER_BLOCK_STATE, &b), 0);
  free(zero);
  return b;
}

static void lists_cnn(void **state) {
  (void)state;
  ember_listing *l = NULL;
  assert_int_equal(ember_list_accelerators(client, &l), 0);
  int found = 0;
  for (size_t i = 0; i < ember_listing_accelerators(l); i++) {
    const ember_accel_info *a = ember_listing_accelerator(l, i);
    if (strcmp(a->name, "cnn") == 0) {
      found = 1;
      print_message("  cnn v%u on %s\n", a->version, a->platforms);
    }
  }
  ember_listing_free(l);
  assert_true(found);
}

static void lenet_two_stages_train(void **state) {
  (void)state;
  char err[256];
  cnn_data *data = NULL;
  int rc = cnn_data_read_dir(DATA, CNN_SPLIT_TEST, CNN_FASHION_CLASSES,
                             &data, err, sizeof err);
  if (rc) fail_msg("%s", err);
  assert_true(cnn_data_count(data) >= 100);
  ember_block *s1 = state_block(0, SPLIT), *s2 = state_block(SPLIT, LAYERS);
  task(EMBER__CNN__OP__INIT, 0, SPLIT, NULL, 0, s1, NULL, NULL);
  task(EMBER__CNN__OP__INIT, SPLIT, LAYERS, NULL, 0, s2, NULL, NULL);

  float *x = malloc(B * PX * sizeof *x);
  assert_non_null(x);
  double first = 0, last = 0;
  for (int step = 0; step < STEPS; step++) {
    size_t at = (size_t)(step % 5) * B;
    assert_int_equal(cnn_data_to_float(data, at, B, x), 0);
    ember_block *xb = NULL, *lb = NULL, *act = NULL, *errb = NULL;
    assert_int_equal(ember_block_create(client, x, B * PX * sizeof *x, 0,
                                        &xb), 0);
    assert_int_equal(ember_block_create(client, cnn_data_labels(data) + at,
                                        B, 0, &lb), 0);
    double loss;
    task(EMBER__CNN__OP__FORWARD, 0, SPLIT, &xb, 1, s1, &act, NULL);
    ember_block *in2[2] = {act, lb};
    task(EMBER__CNN__OP__FORWARD, SPLIT, LAYERS, in2, 2, s2, NULL, &loss);
    task(EMBER__CNN__OP__BACKWARD, SPLIT, LAYERS, NULL, 0, s2, &errb, NULL);
    task(EMBER__CNN__OP__BACKWARD, 0, SPLIT, &errb, 1, s1, NULL, NULL);
    task(EMBER__CNN__OP__UPDATE, 0, SPLIT, NULL, 0, s1, NULL, NULL);
    task(EMBER__CNN__OP__UPDATE, SPLIT, LAYERS, NULL, 0, s2, NULL, NULL);
    if (step < 5) first += loss / 5;
    if (step >= STEPS - 5) last += loss / 5;
    ember_block_release(xb);
    ember_block_release(lb);
    ember_block_release(act);
    ember_block_release(errb);
  }
  print_message("  LeNet in 2 stages, 100 images: mean loss %.4f over the "
                "first 5 steps, %.4f over the last 5\n", first, last);
  assert_true(first > 1.5);
  if (!(last < 0.7 * first))
    fail_msg("loss %.4f -> %.4f: no clear drop", first, last);

  /* the state holds what the tasks did: 20 updates in its header */
  void *bytes;
  size_t size;
  uint64_t version;
  assert_int_equal(ember_block_read(s2, &bytes, &size, &version), 0);
  cnn_state_header h;
  memcpy(&h, bytes, sizeof h);
  assert_int_equal(h.updates, STEPS);
  assert_int_equal(version, 1 + 3 * STEPS); /* INIT, then F, B, U a step */
  free(bytes);

  /* a stage's task on the other stage's block: refused with the sizes */
  size_t len;
  uint8_t *p = params(EMBER__CNN__OP__UPDATE, 0, SPLIT, &len);
  ember_submit_options o = {.size = sizeof o, .states = &s2, .n_states = 1};
  ember_task *t = NULL;
  assert_int_equal(ember_run(client, "cnn", p, len, NULL, 0, &o, &t), 0);
  assert_int_equal(ember_task_status(t), EMBER_EPARAM);
  print_message("  refused: %s\n", ember_task_message(t));
  assert_non_null(strstr(ember_task_message(t), "state block has"));
  ember_task_free(t);
  free(p);

  free(x);
  ember_block_release(s1);
  ember_block_release(s2);
  cnn_data_destroy(data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lists_cnn),
      cmocka_unit_test(lenet_two_stages_train),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
