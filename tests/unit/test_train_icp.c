/* test_train_icp - ember_train with stages that begin or end inside a
 * convolutional or connected layer (FPDeep's input-channel partition,
 * ICP slices; client/lib/train_pipeline.c), on the embedded engine with
 * LeNet (nets/lenet.cfg) and the 100 Fashion-MNIST images of
 * tests/data/cnn:
 *   - the plans over 2 and 3 stages cut inside a layer ("in-ch" in the
 *     plan text);
 *   - sync training over 2, 3 and 5 stages equals 1-stage training: every
 *     epoch's loss within 1e-4 relative over 20 SGD steps (4 epochs of 5
 *     mini-batches of 20, micro-batches of 5; the slices add partial sums
 *     in another order than the whole layer, so floats differ in the last
 *     bits and the gap grows with the steps), and the loss falls
 *     (2 and 3 stages cut inside conv2, 5 inside conv2 and fc1; about
 *     5e-8 measured; 100 steps grow it to a few % on this data: chaos,
 *     not a bug, see the cnn README);
 *   - FPDeep's pipelined updates (async) over 3 stages learn;
 *   - two clients (slices of one layer on both) equal one client bit for
 *     bit on the same plan;
 *   - a first layer cut (conv1 over 3 channels, a small random set) over
 *     2 and 3 stages equals 1 stage within 1e-4 over 20 steps;
 *   - a first layer over 1 channel cut by output channels (OCP slices),
 *     likewise, and over two clients equal to one bit for bit;
 *   - LeNet's conv2 cut by output channels (the split search's plan; the
 *     unit before sums the slices' input errors), likewise over 2 to 4
 *     stages. The other LeNet tests keep FPDeep's fixed splits (ICP). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ember/ember.h"
#include "train_fixture.h"

enum { EPOCHS = 4 };

/* The fixture's parameters with FPDeep's fixed splits: LeNet's conv2 and
 * fc1 cut by input channels (ICP), as the tests of ICP want (the search
 * would cut conv2 by its output channels, see mid_layer_ocp). */
static void icp_params(ember_train_params *p, epochs_log *l, unsigned stages,
                       int sync, unsigned epochs) {
  train_fixture_params(p, l, stages, sync, epochs);
  p->fixed_splits = 1;
}

/* Three fresh embedded engines (their cpu has no measured speed yet: equal
 * speeds, one plan), named name. */
static void three_clients(ember_client **c, const char *name) {
  for (int k = 0; k < 3; k++) {
    ember_options o = {.size = sizeof o, .client_name = name,
                       .embedded_threads = 2};
    c[k] = NULL;
    assert_int_equal(ember_connect("embedded", &o, &c[k]), 0);
  }
}

/* The largest relative difference of b's losses from a's over epochs. */
static double worst_rel(const epochs_log *a, const epochs_log *b,
                        int epochs) {
  double worst = 0;
  for (int e = 0; e < epochs; e++) {
    double rel = fabs(b->loss[e] - a->loss[e]) / fabs(a->loss[e]);
    if (rel > worst) worst = rel;
  }
  return worst;
}

/* The plan over stages, printed; whether a stage cuts inside a layer. */
static int plan_cuts_a_layer(unsigned stages) {
  epochs_log l;
  ember_train_params p;
  icp_params(&p, &l, stages, 1, 1);
  char *plan = NULL;
  int rc = ember_train_plan(&client, 1, &p, &plan);
  if (rc) fail_msg("%u stages: %s", stages, ember_last_error());
  print_message("%s", plan);
  int cut = strstr(plan, "in-ch") != NULL;
  free(plan);
  return cut;
}

static void sync_icp_equals_one_stage(void **state) {
  (void)state;
  /* 2, 3: conv2 cut; 5: conv2 and fc1 cut, one stage beginning in a
   * slice of conv2 and ending in one of fc1 (three units) */
  static const unsigned stages[] = {1, 2, 3, 5};
  epochs_log logs[4];
  for (int k = 0; k < 4; k++) {
    if (stages[k] > 1) assert_true(plan_cuts_a_layer(stages[k]));
    ember_train_params p;
    icp_params(&p, &logs[k], stages[k], 1, EPOCHS);
    ember_train_result r = {.size = sizeof r};
    int rc = ember_train(&client, 1, &p, &r);
    if (rc) fail_msg("%u stages: %s", stages[k], ember_last_error());
    assert_int_equal(r.epochs, EPOCHS);
    assert_int_equal(logs[k].stages, stages[k]);
    print_message("  %u stage%s, sync: loss %.6f -> %.6f, train %.2f, "
                  "%zu tasks\n", stages[k], stages[k] > 1 ? "s" : "",
                  logs[k].loss[0], logs[k].loss[EPOCHS - 1],
                  logs[k].train_acc[EPOCHS - 1], r.tasks);
  }
  assert_true(logs[0].loss[EPOCHS - 1] < 0.7 * logs[0].loss[0]);
  for (int k = 1; k < 4; k++) {
    double worst = 0;
    for (int e = 0; e < EPOCHS; e++) {
      double rel = fabs(logs[k].loss[e] - logs[0].loss[e]) /
                   fabs(logs[0].loss[e]);
      print_message("    epoch %d: %.9f vs %.9f: %.2e\n", e + 1,
                    logs[k].loss[e], logs[0].loss[e], rel);
      if (rel > worst) worst = rel;
    }
    print_message("  %u stages (ICP) vs 1: loss rel diff %.2e over %d "
                  "steps\n", stages[k], worst, EPOCHS * 5);
    assert_true(worst <= 1e-4);
  }
}

static void pipelined_icp_learns(void **state) {
  (void)state;
  epochs_log l;
  ember_train_params p;
  icp_params(&p, &l, 3, 0, 8);
  ember_train_result r = {.size = sizeof r};
  int rc = ember_train(&client, 1, &p, &r);
  if (rc) fail_msg("%s", ember_last_error());
  print_message("  3 stages (ICP), pipelined: loss %.4f -> %.4f, train "
                "%.2f -> %.2f\n", l.loss[0], l.loss[7], l.train_acc[0],
                l.train_acc[7]);
  assert_true(l.loss[7] < 0.6 * l.loss[0]);
  assert_true(l.train_acc[7] > l.train_acc[0]);
}

/* Two clients (two embedded engines): the stages dealt over both, a
 * layer's slices on both, so the layer input, partial sums, dz and the
 * slices' errors cross between them through this process: equal to one
 * client's run bit for bit (the same plan, the same sums). Fresh engines
 * each, whose cpu has no measured speed yet: equal speeds, one plan. */
static void two_clients_equal_one(void **state) {
  (void)state;
  ember_client *c[3];
  three_clients(c, "test_train_icp-n");
  epochs_log l1, l2;
  ember_train_params p;
  char *plan1 = NULL, *plan2 = NULL;
  icp_params(&p, &l2, 2, 1, EPOCHS);
  assert_int_equal(ember_train_plan(c, 2, &p, &plan2), 0);
  print_message("%s", plan2);
  int rc = ember_train(c, 2, &p, NULL);
  if (rc) fail_msg("two clients: %s", ember_last_error());
  icp_params(&p, &l1, 2, 1, EPOCHS);
  assert_int_equal(ember_train_plan(&c[2], 1, &p, &plan1), 0);
  rc = ember_train(&c[2], 1, &p, NULL);
  if (rc) fail_msg("one client: %s", ember_last_error());
  /* the same cuts (platform labels aside) */
  assert_non_null(strstr(plan2, "in-ch"));
  const char *cut1 = strstr(plan1, "in-ch"), *cut2 = strstr(plan2, "in-ch");
  assert_non_null(cut1);
  assert_memory_equal(cut1, cut2, (size_t)(strchr(cut2, ')') - cut2));
  for (int e = 0; e < EPOCHS; e++) {
    print_message("    epoch %d: two clients %.9f, one %.9f\n", e + 1,
                  l2.loss[e], l1.loss[e]);
    assert_true(l2.loss[e] == l1.loss[e]);
  }
  free(plan1);
  free(plan2);
  for (int k = 0; k < 3; k++) ember_close(c[k]);
}

/* M seeded random images of el floats in [0, 1), labels k % 4. */
enum { M = 32 };
static float *random_images(size_t el, uint8_t *y) {
  float *x = malloc(M * el * sizeof *x);
  assert_non_null(x);
  uint64_t r = 12345;
  for (size_t k = 0; k < M * el; k++) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    x[k] = (float)(r >> 40) / (float)(1u << 24);
  }
  for (int k = 0; k < M; k++) y[k] = (uint8_t)(k % 4);
  return x;
}

/* 5 sync epochs of net over stages on clients, into *log; with cut, the
 * plan must hold it. */
static void train_random(const char *net, size_t el, unsigned stages,
                         ember_client *const *clients, size_t n_clients,
                         const char *cut, epochs_log *log) {
  uint8_t y[M];
  float *x = random_images(el, y);
  ember_train_params p;
  memset(log, 0, sizeof *log);
  ember_train_params_default(&p);
  p.net_text = net;
  p.net_len = strlen(net);
  p.train_images = x;
  p.train_labels = y;
  p.n_train = M;
  p.epochs = 5;
  p.micro_batch = 4;
  p.stages = stages;
  p.sync = 1;
  p.seed = 5;
  p.epoch_cb = train_fixture_on_epoch;
  p.user = log;
  p.fixed_splits = cut && strstr(cut, "in-ch") != NULL; /* ICP wanted */
  if (cut) {
    char *plan = NULL;
    assert_int_equal(ember_train_plan(clients, n_clients, &p, &plan), 0);
    print_message("%s", plan);
    if (!strstr(plan, cut)) fail_msg("the plan has no \"%s\"", cut);
    free(plan);
  }
  int rc = ember_train(clients, n_clients, &p, NULL);
  if (rc) fail_msg("%u stages: %s", stages, ember_last_error());
  free(x);
}

/* Over 2 and 3 stages with a cut in net's first layer against 1 stage:
 * every epoch's loss within 1e-4 over 20 steps. */
static void cut_equals_one_stage(const char *net, size_t el,
                                 const char *cut) {
  epochs_log logs[3];
  for (unsigned st = 1; st <= 3; st++)
    train_random(net, el, st, &client, 1, st > 1 ? cut : NULL,
                 &logs[st - 1]);
  assert_true(logs[0].loss[4] < logs[0].loss[0]);
  for (int k = 1; k < 3; k++) {
    double worst = worst_rel(&logs[0], &logs[k], 5);
    print_message("  %d stages (%s) vs 1: loss %.6f -> %.6f, rel diff "
                  "%.2e over 20 steps\n", k + 1, cut, logs[k].loss[0],
                  logs[k].loss[4], worst);
    assert_true(worst <= 1e-4);
  }
}

/* A first layer cut by input channels (the slices' input errors made and
 * dropped, dz passed on): a heavy conv1 over 3 input channels, on seeded
 * random 3 x 8 x 8 images. */
static void first_layer_cut(void **state) {
  (void)state;
  static const char net[] =
      "[net]\nheight=8\nwidth=8\nchannels=3\nbatch=8\nlearning_rate=0.05\n"
      "momentum=0.9\ndecay=0.0005\n"
      "[convolutional]\nfilters=32\nsize=3\nstride=1\npad=1\n"
      "activation=relu\n"
      "[connected]\noutput=4\nactivation=linear\n"
      "[softmax]\n";
  cut_equals_one_stage(net, 3 * 8 * 8, "conv1 in-ch");
}

/* A first layer over one input channel, cut by output channels (OCP, as
 * FPDeep cuts a first layer): the slices fill in its output one after
 * another and each takes the layer's output error. 2 and 3 stages equal
 * 1 within 1e-4; 3 stages over two clients (slices on both: the output
 * and its error cross between them) equal one client bit for bit, fresh
 * engines each as in two_clients_equal_one. */
static void first_layer_ocp(void **state) {
  (void)state;
  static const char net[] =
      "[net]\nheight=12\nwidth=12\nchannels=1\nbatch=8\n"
      "learning_rate=0.05\nmomentum=0.9\ndecay=0.0005\n"
      "[convolutional]\nfilters=24\nsize=3\nstride=1\npad=1\n"
      "activation=relu\n"
      "[maxpool]\nsize=2\nstride=2\n"
      "[connected]\noutput=4\nactivation=linear\n"
      "[softmax]\n";
  cut_equals_one_stage(net, 12 * 12, "conv1 out-ch");
  ember_client *c[3];
  three_clients(c, "test_train_icp-o");
  epochs_log two, one;
  train_random(net, 12 * 12, 3, c, 2, "conv1 out-ch", &two);
  train_random(net, 12 * 12, 3, &c[2], 1, "conv1 out-ch", &one);
  for (int e = 0; e < 5; e++) {
    print_message("    epoch %d: two clients %.9f, one %.9f\n", e + 1,
                  two.loss[e], one.loss[e]);
    assert_true(two.loss[e] == one.loss[e]);
  }
  for (int k = 0; k < 3; k++) ember_close(c[k]);
}

/* LeNet's conv2 cut by output channels (the split search's choice over
 * 2 to 4 stages: 50 output channels balance finer than 20 input ones):
 * the slices' parts of conv2's input error are summed by the unit before
 * (cnn.proto error_addends). Sync training over 2, 3 and 4 stages equals
 * 1 stage within 1e-4 over 20 steps; 3 stages over two clients (slices on
 * both: the layer's input, output, output error and the addends cross
 * between them) equal one client bit for bit. */
static void mid_layer_ocp(void **state) {
  (void)state;
  epochs_log logs[4];
  for (unsigned st = 1; st <= 4; st++) {
    ember_train_params p;
    train_fixture_params(&p, &logs[st - 1], st, 1, EPOCHS);
    if (st > 1) {
      char *plan = NULL;
      assert_int_equal(ember_train_plan(&client, 1, &p, &plan), 0);
      print_message("%s", plan);
      if (!strstr(plan, "conv2 out-ch")) fail_msg("no conv2 OCP cut");
      free(plan);
    }
    int rc = ember_train(&client, 1, &p, NULL);
    if (rc) fail_msg("%u stages: %s", st, ember_last_error());
  }
  assert_true(logs[0].loss[EPOCHS - 1] < 0.7 * logs[0].loss[0]);
  for (int k = 1; k < 4; k++) {
    double worst = worst_rel(&logs[0], &logs[k], EPOCHS);
    print_message("  %d stages (conv2 out-ch) vs 1: loss %.6f -> %.6f, rel "
                  "diff %.2e over 20 steps\n", k + 1, logs[k].loss[0],
                  logs[k].loss[EPOCHS - 1], worst);
    assert_true(worst <= 1e-4);
  }
  ember_client *c[3];
  three_clients(c, "test_train_icp-m");
  epochs_log two, one;
  ember_train_params p;
  train_fixture_params(&p, &two, 3, 1, EPOCHS);
  assert_int_equal(ember_train(c, 2, &p, NULL), 0);
  train_fixture_params(&p, &one, 3, 1, EPOCHS);
  assert_int_equal(ember_train(&c[2], 1, &p, NULL), 0);
  for (int e = 0; e < EPOCHS; e++) {
    print_message("    epoch %d: two clients %.9f, one %.9f\n", e + 1,
                  two.loss[e], one.loss[e]);
    assert_true(two.loss[e] == one.loss[e]);
  }
  for (int k = 0; k < 3; k++) ember_close(c[k]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sync_icp_equals_one_stage),
      cmocka_unit_test(pipelined_icp_learns),
      cmocka_unit_test(two_clients_equal_one),
      cmocka_unit_test(first_layer_cut),
      cmocka_unit_test(first_layer_ocp),
      cmocka_unit_test(mid_layer_ocp),
  };
  return cmocka_run_group_tests(tests, train_fixture_setup,
                                train_fixture_teardown);
}
