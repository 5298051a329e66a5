/* test_train - ember_train on the embedded engine with LeNet
 * (nets/lenet.cfg) and the 100 Fashion-MNIST images of tests/data/cnn as
 * both training and test set:
 *   - sync training over 2 and 4 stages of whole layers
 *     (layer_split_only) equals 1-stage training bit for bit, as
 *     ember.h says: every epoch's loss and every final weight identical
 *     over 100 SGD steps (20 epochs of 5 mini-batches of 20,
 *     micro-batches of 5; 4 epochs under a sanitizer, which looks for
 *     memory errors and races, not numbers) (test_train_icp: stages cut
 *     inside a layer);
 *   - FPDeep's pipelined updates (the default) over 3 stages (cut inside
 *     conv2: ICP slices) learn: the loss falls and training accuracy
 *     rises; their weights, saved, load into 2 stages cut elsewhere;
 *   - weights saved after training, loaded with epochs 0, give the same
 *     test accuracy; a load into another network is refused;
 *   - bad input: a .cfg that does not chain (file:line), more stages than
 *     layers (layer_split_only), a micro-batch that does not divide the batch, labels out of
 *     range. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ember/ember.h"
#include "train_fixture.h"

#ifdef EMBER_SANITIZED
enum { EPOCHS = 4 }; /* 5-15 times slower: each path, fewer steps */
#else
enum { EPOCHS = 20 };
#endif

/* LeNet on the 100 images for EPOCHS epochs, tested on 20 of them after
 * each (train_fixture_params) */
static void params_for(ember_train_params *p, epochs_log *l, unsigned stages,
                       int sync) {
  train_fixture_params(p, l, stages, sync, EPOCHS);
  p->test_images = images;
  p->test_labels = labels;
  p->n_test = N;
  p->test_limit = 20; /* the test pass's cost, each epoch */
}

static float *read_weights(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *bytes = malloc((size_t)size);
  assert_int_equal(fread(bytes, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  /* magic, layers, epochs, params, then 16 bytes a layer (7) */
  size_t head = 8 + 8 + 8 + 7 * 16;
  *n = ((size_t)size - head) / sizeof(float);
  float *w = malloc(*n * sizeof *w);
  memcpy(w, bytes + head, *n * sizeof *w);
  free(bytes);
  return w;
}

static void sync_equals_one_stage(void **state) {
  (void)state;
  static const unsigned stages[] = {1, 2, 4};
  epochs_log logs[3];
  char paths[3][64];
  for (int k = 0; k < 3; k++) {
    snprintf(paths[k], sizeof paths[k], "test_train_%u.weights", stages[k]);
    ember_train_params p;
    params_for(&p, &logs[k], stages[k], 1);
    p.layer_split_only = 1; /* bit for bit: no partial sums reordered */
    p.save_path = paths[k];
    ember_train_result r = {.size = sizeof r};
    int rc = ember_train(&client, 1, &p, &r);
    if (rc) fail_msg("%u stages: %s", stages[k], ember_last_error());
    assert_int_equal(r.epochs, EPOCHS);
    assert_int_equal(logs[k].stages, stages[k]);
    print_message("  %u stage%s, sync: loss %.6f -> %.6f, train %.2f, "
                  "test %.2f, %zu tasks\n", stages[k], stages[k] > 1 ? "s" : "",
                  logs[k].loss[0], logs[k].loss[EPOCHS - 1],
                  logs[k].train_acc[EPOCHS - 1], r.test_accuracy, r.tasks);
  }
  if (EPOCHS >= 20) assert_true(logs[0].loss[EPOCHS - 1] < 0.5 * logs[0].loss[0]);
  size_t n0, n;
  float *w0 = read_weights(paths[0], &n0);
  for (int k = 1; k < 3; k++) {
    int losses_differ = 0;
    for (int e = 0; e < EPOCHS; e++)
      losses_differ += logs[k].loss[e] != logs[0].loss[e];
    float *w = read_weights(paths[k], &n);
    assert_int_equal(n, n0);
    size_t weights_differ = 0;
    for (size_t i = 0; i < n; i++)
      weights_differ += memcmp(&w[i], &w0[i], sizeof w[i]) != 0;
    print_message("  %u stages vs 1 over %d steps: %d of %d losses and %zu "
                  "of %zu weights differ\n", stages[k], EPOCHS * 5,
                  losses_differ, EPOCHS, weights_differ, n);
    assert_int_equal(losses_differ, 0);
    assert_int_equal(weights_differ, 0);
    free(w);
  }
  free(w0);
  for (int k = 0; k < 3; k++) unlink(paths[k]);
}

static void pipelined_learns_and_resumes(void **state) {
  (void)state;
  epochs_log l;
  ember_train_params p;
  params_for(&p, &l, 3, 0);
  p.epochs = 10;
  p.save_path = "test_train_async.weights";
  ember_train_result r = {.size = sizeof r};
  int rc = ember_train(&client, 1, &p, &r);
  if (rc) fail_msg("%s", ember_last_error());
  print_message("  3 stages, pipelined: loss %.4f -> %.4f, train %.2f -> "
                "%.2f, test %.2f\n", l.loss[0], l.loss[9], l.train_acc[0],
                l.train_acc[9], r.test_accuracy);
  assert_true(l.loss[9] < 0.6 * l.loss[0]);
  assert_true(l.train_acc[9] > l.train_acc[0]);

  /* evaluate the saved weights, on another split */
  epochs_log l2;
  params_for(&p, &l2, 2, 0);
  p.epochs = 0;
  p.load_path = "test_train_async.weights";
  ember_train_result r2 = {.size = sizeof r2};
  rc = ember_train(&client, 1, &p, &r2);
  if (rc) fail_msg("%s", ember_last_error());
  assert_int_equal(r2.epochs, 0);
  print_message("  loaded: test %.4f (trained: %.4f)\n", r2.test_accuracy,
                r.test_accuracy);
  assert_true(fabs(r2.test_accuracy - r.test_accuracy) < 1e-12);

  /* resume: epochs count on from the file's */
  params_for(&p, &l2, 1, 0);
  p.epochs = 1;
  p.load_path = "test_train_async.weights";
  rc = ember_train(&client, 1, &p, &r2);
  if (rc) fail_msg("%s", ember_last_error());
  assert_int_equal(l2.epochs, 11);

  /* another network's weights */
  static const char small[] = "[net]\nheight=28\nwidth=28\nchannels=1\n"
                              "[connected]\noutput=10\nactivation=linear\n"
                              "[softmax]\n";
  params_for(&p, &l2, 1, 0);
  p.net_path = NULL;
  p.net_text = small;
  p.net_len = strlen(small);
  p.load_path = "test_train_async.weights";
  assert_int_equal(ember_train(&client, 1, &p, &r2), EMBER_EPARAM);
  print_message("  refused: %s\n", ember_last_error());
  assert_non_null(strstr(ember_last_error(), "another network"));
  unlink("test_train_async.weights");
}

static void refuses_bad_input(void **state) {
  (void)state;
  epochs_log l;
  ember_train_params p;
  params_for(&p, &l, 1, 0);
  p.net_path = NULL;
  static const char broken[] = "[net]\nheight=28\nwidth=28\nchannels=1\n"
                               "[convolutional]\nfilters=4\nsize=40\n"
                               "activation=relu\n"
                               "[softmax]\n";
  p.net_text = broken;
  p.net_len = strlen(broken);
  assert_int_equal(ember_train(&client, 1, &p, NULL), EMBER_EPARAM);
  print_message("  %s\n", ember_last_error());
  assert_non_null(strstr(ember_last_error(), "net:5"));

  params_for(&p, &l, 9, 0);
  p.layer_split_only = 1;
  assert_int_equal(ember_train(&client, 1, &p, NULL), EMBER_EPARAM);
  print_message("  %s\n", ember_last_error());

  params_for(&p, &l, 1, 0);
  p.micro_batch = 3;
  assert_int_equal(ember_train(&client, 1, &p, NULL), EMBER_EPARAM);
  print_message("  %s\n", ember_last_error());

  uint8_t bad[N];
  memcpy(bad, labels, N);
  bad[17] = 10;
  params_for(&p, &l, 1, 0);
  p.train_labels = bad;
  assert_int_equal(ember_train(&client, 1, &p, NULL), EMBER_EPARAM);
  print_message("  %s\n", ember_last_error());

  char *plan = NULL;
  params_for(&p, &l, 3, 0);
  assert_int_equal(ember_train_plan(&client, 1, &p, &plan), 0);
  print_message("%s", plan);
  assert_non_null(strstr(plan, "cpu"));
  free(plan);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(refuses_bad_input),
      cmocka_unit_test(pipelined_learns_and_resumes),
      cmocka_unit_test(sync_equals_one_stage),
  };
  return cmocka_run_group_tests(tests, train_fixture_setup,
                                train_fixture_teardown);
}
