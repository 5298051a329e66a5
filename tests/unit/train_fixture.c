/* train_fixture.c - see train_fixture.h. */
#include "train_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cnn_idx.h"

ember_client *client;
float *images;
uint8_t *labels;

int train_fixture_setup(void **state) {
  (void)state;
  ember_options o = {.size = sizeof o, .client_name = "test_train",
                     .embedded_threads = 4};
  char err[256];
  cnn_data *d = NULL;
  if (cnn_data_read_dir(DATA, CNN_SPLIT_TEST, 10, &d, err, sizeof err))
    return -1;
  images = malloc(N * PX * sizeof *images);
  labels = malloc(N);
  if (!images || !labels) {
    cnn_data_destroy(d);
    return -1;
  }
  cnn_data_to_float(d, 0, N, images);
  memcpy(labels, cnn_data_labels(d), N);
  cnn_data_destroy(d);
  return ember_connect("embedded", &o, &client);
}

int train_fixture_teardown(void **state) {
  (void)state;
  ember_close(client);
  free(images);
  free(labels);
  return 0;
}

int train_fixture_on_epoch(const ember_train_epoch *e, void *user) {
  epochs_log *l = user;
  assert_true(e->epoch >= 1 && e->epoch <= 64);
  l->loss[e->epoch - 1] = e->loss;
  l->train_acc[e->epoch - 1] = e->train_accuracy;
  l->test_acc[e->epoch - 1] = e->test_accuracy;
  l->epochs = e->epoch;
  l->stages = e->n_stages;
  for (size_t i = 0; i < e->n_stages; i++) {
    assert_true(e->stage_busy[i] >= 0 && e->stage_busy[i] <= 1.01);
    assert_non_null(e->stage_platform[i]);
  }
  return 0;
}

void train_fixture_params(ember_train_params *p, epochs_log *l,
                          unsigned stages, int sync, unsigned epochs) {
  memset(l, 0, sizeof *l);
  ember_train_params_default(p);
  p->net_path = LENET;
  p->train_images = images;
  p->train_labels = labels;
  p->n_train = N;
  p->epochs = epochs;
  p->batch = 20;
  p->micro_batch = 5;
  p->stages = stages;
  p->sync = sync;
  p->seed = 7;
  p->epoch_cb = train_fixture_on_epoch;
  p->user = l;
}
