/*
 * sw_dispatch.c - the kernel variants built into this binary, which of them
 * the CPU runs, and the one acc_sw_run_batch uses (chosen once, through a
 * pointer).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "sw_kernel.h"

#ifdef EMBER_SW_HAVE_SSE41
static bool cpu_sse41(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.1");
}
#endif
#ifdef EMBER_SW_HAVE_AVX2
static bool cpu_avx2(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
}
#endif
#ifdef EMBER_SW_HAVE_AVX512
static bool cpu_avx512(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw");
}
#endif

/* Widest last. */
static const sw_kernel kernels[] = {
  {ACC_SW_ISA_SCALAR, "scalar", 0, 0, NULL, acc_sw_pass_scalar},
#ifdef EMBER_SW_HAVE_SSE41
  {ACC_SW_ISA_SSE41, "sse41", 8, 16, cpu_sse41, acc_sw_pass_sse41},
#endif
#ifdef EMBER_SW_HAVE_AVX2
  {ACC_SW_ISA_AVX2, "avx2", 16, 32, cpu_avx2, acc_sw_pass_avx2},
#endif
#ifdef EMBER_SW_HAVE_AVX512
  {ACC_SW_ISA_AVX512, "avx512", 32, 64, cpu_avx512, acc_sw_pass_avx512},
#endif
};
#define N_KERNELS (sizeof kernels / sizeof kernels[0])

static const char *const isa_names[ACC_SW_ISA_COUNT] = {
  "scalar", "sse41", "avx2", "avx512",
};

const char *acc_sw_isa_name(acc_sw_isa isa) {
  return (unsigned)isa < ACC_SW_ISA_COUNT ? isa_names[isa] : NULL;
}

int acc_sw_isa_parse(const char *name, acc_sw_isa *out) {
  if (!name || !out) return EMBER_EINVAL;
  for (int i = 0; i < ACC_SW_ISA_COUNT; i++)
    if (strcmp(name, isa_names[i]) == 0) {
      *out = (acc_sw_isa)i;
      return 0;
    }
  return EMBER_EINVAL;
}

const sw_kernel *acc_sw_kernel_get(acc_sw_isa isa) {
  for (size_t i = 0; i < N_KERNELS; i++)
    if (kernels[i].isa == isa)
      return (!kernels[i].cpu_ok || kernels[i].cpu_ok()) ? &kernels[i] : NULL;
  return NULL;
}

bool acc_sw_isa_supported(acc_sw_isa isa) {
  return acc_sw_kernel_get(isa) != NULL;
}

size_t acc_sw_kernel_mem_bytes(const sw_kernel *k, int32_t qlen,
                               int alphabet) {
  size_t m = qlen > 0 ? (size_t)qlen : 1;
  if (k->lanes == 0) return m * (2 * sizeof(int32_t) + 1) + 64;
  size_t seg = (m + (size_t)k->lanes - 1) / (size_t)k->lanes;
  return ((size_t)alphabet + 4) * seg * k->vec_bytes;
}

static const sw_kernel *selected;
static pthread_once_t selected_once = PTHREAD_ONCE_INIT;

static void select_kernel(void) {
  acc_sw_isa want;
  const char *env = getenv("EMBER_SW_ISA");
  if (env && acc_sw_isa_parse(env, &want) == 0 && acc_sw_kernel_get(want)) {
    selected = acc_sw_kernel_get(want);
    return;
  }
  for (size_t i = N_KERNELS; i-- > 0;)
    if (!kernels[i].cpu_ok || kernels[i].cpu_ok()) {
      selected = &kernels[i];
      return;
    }
}

acc_sw_isa acc_sw_isa_selected(void) {
  pthread_once(&selected_once, select_kernel);
  return selected->isa;
}
