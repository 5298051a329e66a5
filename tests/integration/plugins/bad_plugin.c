/*
 * bad_plugin.c - plugins that ember-nam must refuse, one shared object per
 * case, built from this file with one of (tests/integration/CMakeLists.txt):
 *   BAD_ABI         abi_version is ACC_ABI_VERSION + 1      -> "abi"
 *   BAD_CLASH       named "sw", like the built-in           -> "clash"
 *   BAD_INCOMPLETE  no run_cpu                              -> "incomplete"
 *   BAD_NO_SYMBOL   exports no ember_accelerator            -> "symbol"
 */
#include <stddef.h>

#include "accel.h"
#include "ember/ember_errors.h"

static int stub_validate(const uint8_t *params, size_t params_len,
                         const acc_block *inputs, size_t n_inputs,
                         void **prepared, char *err, size_t err_len) {
  return EMBER_EPARAM;
}

__attribute__((unused))
static int stub_run(void *prepared, const acc_block *inputs, size_t n_inputs,
                    const acc_run_ctx *ctx, acc_output *out, char *err,
                    size_t err_len) {
  return EMBER_EINTERNAL;
}

static void stub_release(void *prepared) {}

static uint64_t stub_work(const void *prepared) { return 0; }

static const acc_descriptor bad = {
#ifdef BAD_ABI
  .abi_version = ACC_ABI_VERSION + 1,
  .name = "abi_next",
#else
  .abi_version = ACC_ABI_VERSION,
#endif
#ifdef BAD_CLASH
  .name = "sw",
#endif
#ifdef BAD_INCOMPLETE
  .name = "incomplete",
#else
  .run_cpu = stub_run,
#endif
#ifdef BAD_NO_SYMBOL
  .name = "nosymbol",
#endif
  .version = 1,
  .summary = "refused by ember-nam's plugin loader",
  .validate = stub_validate,
  .release = stub_release,
  .work = stub_work,
};

#ifdef BAD_NO_SYMBOL
const acc_descriptor *ember_accelerator_v0(void);
const acc_descriptor *ember_accelerator_v0(void) { return &bad; }
#else
const acc_descriptor *ember_accelerator(void) { return &bad; }
#endif
