/* test_train_darknet - ember_train on the embedded engine with what darknet's
 * small classifiers add (the 100 Fashion-MNIST images of tests/data/cnn,
 * train_fixture.h):
 *   - nets/darknet_small.cfg (batch normalisation, leaky, dropout, the
 *     global avgpool, subdivisions=2): the micro-batch defaults to
 *     batch / subdivisions (ember_train_plan), an explicit one overrides
 *     it; sync training over 2 and 3 stages of whole layers equals 1 stage
 *     bit for bit (every loss, the weights file with the rolling
 *     statistics), since dropout's masks follow the mini-batch and the
 *     sample, not the stages;
 *   - the partitioner keeps its batch-normalized convolutions whole;
 *   - its weights saved after training and loaded with epochs 0 give the
 *     same test accuracy (the test pass is an evaluation: rolling
 *     statistics, no dropout; the file carries them);
 *   - LeNet with a logistic conv2, leaky fc1 and a dropout cut inside
 *     conv2 (ICP and OCP slices apply those activations): sync over 2 and
 *     3 stages within 1e-4 of 1 stage over 20 steps;
 *   - a learning-rate policy: steps=2 scales=0 stops the weights after
 *     the first update (update k of training counted from 1; no batch
 *     normalisation there, whose rolling statistics training FORWARDs
 *     move whatever the rate). */
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

#include "cnn_net.h"
#include "cnn_partition.h"
#include "ember/ember.h"
#include "train_fixture.h"

#define DARKNET EMBER_SOURCE_DIR "/accelerators/cnn/nets/darknet_small.cfg"

enum { EPOCHS = 6 };

static void params_for(ember_train_params *p, epochs_log *l, unsigned stages,
                       unsigned epochs) {
  train_fixture_params(p, l, stages, 1, epochs);
  p->net_path = DARKNET;
  p->micro_batch = 0; /* the .cfg's subdivisions */
  p->test_images = images;
  p->test_labels = labels;
  p->n_test = N;
  p->test_limit = 40;
}

static uint8_t *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc((size_t)size + 1);
  assert_non_null(b);
  assert_int_equal(fread(b, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  *n = (size_t)size;
  return b;
}

static void subdivisions_set_the_micro_batch(void **state) {
  (void)state;
  epochs_log l;
  ember_train_params p;
  params_for(&p, &l, 1, 1);
  char *plan = NULL;
  assert_int_equal(ember_train_plan(&client, 1, &p, &plan), 0);
  assert_non_null(strstr(plan, "batch 20 in micro-batches of 10"));
  free(plan);
  p.micro_batch = 4;
  assert_int_equal(ember_train_plan(&client, 1, &p, &plan), 0);
  assert_non_null(strstr(plan, "batch 20 in micro-batches of 4"));
  free(plan);
  /* darknet's rounding: batch 21 / 2 = 10 a pass, 20 an update */
  p.micro_batch = 0;
  p.batch = 21;
  assert_int_equal(ember_train_plan(&client, 1, &p, &plan), 0);
  assert_non_null(strstr(plan, "batch 20 in micro-batches of 10"));
  free(plan);
}

/* The partitioner never cuts a batch-normalized convolution (nor the
 * avgpool or dropout): over 2 to 8 equal platforms, with the search and
 * with FPDeep's fixed rule, no stage begins or ends inside one; the 1x1
 * convolution without it may be cut. */
static void plans_keep_batch_norm_whole(void **state) {
  (void)state;
  cnn_net *net = NULL;
  char err[256];
  assert_int_equal(cnn_cfg_read(DARKNET, &net, err, sizeof err), 0);
  size_t nl;
  const cnn_layer *layers = cnn_net_layers(net, &nl);
  cnn_platform pf[8];
  for (int i = 0; i < 8; i++) pf[i] = (cnn_platform){"p", 1.0};
  for (size_t n = 2; n <= 8; n++)
    for (unsigned flags = 0; flags <= CNN_PLAN_FIXED_SPLITS;
         flags += CNN_PLAN_FIXED_SPLITS) {
      cnn_plan *plan = NULL;
      int rc = cnn_plan_create(net, pf, n, 64, flags, &plan, err,
                               sizeof err);
      if (rc) fail_msg("%zu stages: %s", n, err);
      size_t ns;
      const cnn_stage *st = cnn_plan_stages(plan, &ns);
      for (size_t i = 0; i < ns; i++) {
        const cnn_layer *a = &layers[st[i].begin.layer];
        const cnn_layer *b = &layers[st[i].end.layer];
        if ((st[i].begin_split && a->batch_norm) ||
            (st[i].end_split && b->batch_norm))
          fail_msg("%zu stages: stage %zu cuts a batch-normalized layer", n,
                   i);
      }
      for (size_t l = 0; l < nl; l++)
        if (layers[l].batch_norm || layers[l].kind == CNN_LAYER_DROPOUT ||
            layers[l].kind == CNN_LAYER_AVGPOOL)
          assert_int_equal(cnn_plan_layer_split(plan, l, NULL),
                           CNN_SPLIT_WHOLE);
      assert_int_not_equal(cnn_plan_layer_split(plan, 6, NULL),
                           CNN_SPLIT_WHOLE); /* the 1x1 convolution */
      cnn_plan_destroy(plan);
    }
  cnn_net_destroy(net);
}

static void sync_stages_bit_for_bit(void **state) {
  (void)state;
  static const unsigned stages[] = {1, 2, 3};
  epochs_log logs[3];
  char paths[3][64];
  uint8_t *files[3];
  size_t sizes[3];
  double acc[3];
  for (int k = 0; k < 3; k++) {
    snprintf(paths[k], sizeof paths[k], "test_train_darknet_%u.weights",
             stages[k]);
    ember_train_params p;
    params_for(&p, &logs[k], stages[k], EPOCHS);
    p.layer_split_only = 1;
    p.save_path = paths[k];
    ember_train_result r = {.size = sizeof r};
    if (ember_train(&client, 1, &p, &r))
      fail_msg("%u stages: %s", stages[k], ember_last_error());
    assert_int_equal(logs[k].stages, stages[k]);
    acc[k] = r.test_accuracy;
    print_message("  %u stage%s: loss %.6f -> %.6f, train %.2f, test %.2f\n",
                  stages[k], stages[k] > 1 ? "s" : "", logs[k].loss[0],
                  logs[k].loss[EPOCHS - 1], logs[k].train_acc[EPOCHS - 1],
                  r.test_accuracy);
    files[k] = read_file(paths[k], &sizes[k]);
  }
  assert_true(logs[0].loss[EPOCHS - 1] < 0.9 * logs[0].loss[0]);
  for (int k = 1; k < 3; k++) {
    assert_memory_equal(logs[k].loss, logs[0].loss, sizeof logs[0].loss);
    assert_true(acc[k] == acc[0]);
    assert_int_equal(sizes[k], sizes[0]);
    assert_memory_equal(files[k], files[0], sizes[0]);
  }
  /* the saved weights, evaluated on their own: the same test accuracy */
  epochs_log l;
  ember_train_params p;
  params_for(&p, &l, 2, 0);
  p.load_path = paths[0];
  ember_train_result r = {.size = sizeof r};
  if (ember_train(&client, 1, &p, &r)) fail_msg("%s", ember_last_error());
  print_message("  loaded: test %.4f (trained: %.4f)\n", r.test_accuracy,
                acc[0]);
  assert_true(r.test_accuracy == acc[0]);
  for (int k = 0; k < 3; k++) {
    free(files[k]);
    unlink(paths[k]);
  }
}

/* LeNet with a logistic conv2, a leaky fc1 and dropout after it */
static const char LENET_ACTS[] =
    "[net]\nheight=28\nwidth=28\nchannels=1\nbatch=20\nlearning_rate=0.05\n"
    "momentum=0.9\ndecay=0.0005\n"
    "[convolutional]\nfilters=20\nsize=5\nactivation=relu\n"
    "[maxpool]\nsize=2\nstride=2\npadding=0\n"
    "[convolutional]\nfilters=50\nsize=5\nactivation=logistic\n"
    "[maxpool]\nsize=2\nstride=2\npadding=0\n"
    "[connected]\noutput=500\nactivation=leaky\n"
    "[dropout]\nprobability=0.3\n"
    "[connected]\noutput=10\nactivation=linear\n"
    "[softmax]\n";

static void slices_of_new_activations(void **state) {
  (void)state;
  enum { E = 4 };
  epochs_log one;
  ember_train_params p;
  train_fixture_params(&p, &one, 1, 1, E);
  p.net_path = NULL;
  p.net_text = LENET_ACTS;
  p.net_len = strlen(LENET_ACTS);
  if (ember_train(&client, 1, &p, NULL)) fail_msg("%s", ember_last_error());
  for (unsigned stages = 2; stages <= 3; stages++)
    for (int fixed = 0; fixed < 2; fixed++) {
      epochs_log l;
      train_fixture_params(&p, &l, stages, 1, E);
      p.net_path = NULL;
      p.net_text = LENET_ACTS;
      p.net_len = strlen(LENET_ACTS);
      p.fixed_splits = fixed;
      char *plan = NULL;
      assert_int_equal(ember_train_plan(&client, 1, &p, &plan), 0);
      int cut = strstr(plan, "-ch [") != NULL;
      free(plan);
      if (ember_train(&client, 1, &p, NULL))
        fail_msg("%s", ember_last_error());
      double worst = 0;
      for (int e = 0; e < E; e++) {
        double rel = fabs(l.loss[e] - one.loss[e]) / fabs(one.loss[e]);
        if (rel > worst) worst = rel;
      }
      print_message("  %u stages%s%s: loss %.6f -> %.6f, largest relative "
                    "difference to 1 stage %.2e\n", stages,
                    fixed ? ", fixed splits" : "", cut ? ", cut in a layer"
                                                       : "",
                    l.loss[0], l.loss[E - 1], worst);
      assert_true(cut);
      assert_true(worst <= 1e-4);
    }
}

static const char STEPS_NET[] =
    "[net]\nheight=28\nwidth=28\nchannels=1\nbatch=20\nlearning_rate=0.05\n"
    "policy=steps\nsteps=2\nscales=0\n"
    "[convolutional]\nfilters=4\nsize=3\nstride=2\nactivation=leaky\n"
    "[avgpool]\n[connected]\noutput=10\nactivation=linear\n[softmax]\n";

static void learning_rate_policy(void **state) {
  (void)state;
  uint8_t *files[2];
  size_t sizes[2];
  for (int k = 0; k < 2; k++) {
    epochs_log l;
    ember_train_params p;
    train_fixture_params(&p, &l, 1, 1, (unsigned)k + 1);
    p.net_path = NULL;
    p.net_text = STEPS_NET;
    p.net_len = strlen(STEPS_NET);
    p.save_path = "test_train_darknet_steps.weights";
    if (ember_train(&client, 1, &p, NULL)) fail_msg("%s", ember_last_error());
    files[k] = read_file(p.save_path, &sizes[k]);
    unlink(p.save_path);
  }
  /* the header's epochs differ (1, 2); the parameters after it do not:
   * update 1 moved them, updates 2 to 10 had a rate of 0 */
  assert_int_equal(sizes[0], sizes[1]);
  assert_memory_equal(files[0] + 16, files[1] + 16, sizes[0] - 16);
  free(files[0]);
  free(files[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(subdivisions_set_the_micro_batch),
      cmocka_unit_test(plans_keep_batch_norm_whole),
      cmocka_unit_test(sync_stages_bit_for_bit),
      cmocka_unit_test(slices_of_new_activations),
      cmocka_unit_test(learning_rate_policy),
  };
  return cmocka_run_group_tests(tests, train_fixture_setup,
                                train_fixture_teardown);
}
