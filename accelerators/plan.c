/* plan.c - a prepared task's out blocks, scratch and cost (accel.h). */
#include "accel.h"

#include <stdio.h>
#include <string.h>

#include "ember/ember_errors.h"

int acc_plan_task(const acc_descriptor *acc, const void *prepared,
                  const acc_task_shape *shape, uint64_t input_bytes,
                  acc_task_plan *plan, char *err, size_t err_len) {
  memset(plan, 0, sizeof *plan);
  if (shape->n_outputs > ACC_MAX_OUTPUTS || shape->n_states > ACC_MAX_STATES) {
    snprintf(err, err_len, "%zu out and %zu state blocks, at most %d and %d",
             shape->n_outputs, shape->n_states, ACC_MAX_OUTPUTS,
             ACC_MAX_STATES);
    return EMBER_EPARAM;
  }
  if (acc->plan) return acc->plan(prepared, shape, plan, err, err_len);
  if (shape->n_outputs || shape->n_states) {
    snprintf(err, err_len, "%s takes no out or state blocks", acc->name);
    return EMBER_EPARAM;
  }
  plan->cost.ops = acc->work ? acc->work(prepared) : 0;
  plan->cost.bytes_read = input_bytes;
  return 0;
}
