/* tally_plugin.c - tally as an ember-nam plugin (accel.h's entry point),
 * for tests that run it through the daemon. */
#include "tally.h"

__attribute__((visibility("default"))) const acc_descriptor *
ember_accelerator(void) {
  return &acc_tally_descriptor;
}
