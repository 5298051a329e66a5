/* train_fixture.h - what test_train and test_train_icp share: LeNet
 * (nets/lenet.cfg), the 100 Fashion-MNIST images of tests/data/cnn as
 * floats, an embedded client, a log of each epoch's figures and the
 * parameters both start from. */
#ifndef EMBER_TESTS_TRAIN_FIXTURE_H
#define EMBER_TESTS_TRAIN_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "ember/ember.h"

#define LENET EMBER_SOURCE_DIR "/accelerators/cnn/nets/lenet.cfg"
#define DATA EMBER_SOURCE_DIR "/tests/data/cnn"

enum { N = 100, PX = 28 * 28 };

extern ember_client *client; /* embedded, 4 threads */
extern float *images;        /* N images of PX pixels, scaled to [0, 1] */
extern uint8_t *labels;      /* N labels */

/* cmocka group setup and teardown: the data and the client. */
int train_fixture_setup(void **state);
int train_fixture_teardown(void **state);

typedef struct epochs_log {
  double loss[64];
  double train_acc[64];
  double test_acc[64];
  unsigned epochs;
  size_t stages;
} epochs_log;

/* An epoch_cb filling the epochs_log at user (and checking the stages'
 * figures are sane). */
int train_fixture_on_epoch(const ember_train_epoch *e, void *user);

/* p: the defaults, then LeNet on the N images, epochs of 5 mini-batches of
 * 20 in micro-batches of 5, seed 7, stages and sync as given, the epochs
 * logged into l (cleared). */
void train_fixture_params(ember_train_params *p, epochs_log *l,
                          unsigned stages, int sync, unsigned epochs);

#endif
