/*
 * plf_kernel_scalar.c - the scalar reference variant: any S, any C, always
 * built; the SIMD variants fall back on it for what they do not vectorise.
 */
#include <math.h>
#include <stddef.h>

#include "plf_kernel_impl.h"
#include "plf_kernel_template.h"

#define PLF_REAL double
#define PLF_SFX d
#define PLF_LOG log
#include "plf_kernel_scalar_body.h"
#undef PLF_REAL
#undef PLF_SFX
#undef PLF_LOG

#define PLF_REAL float
#define PLF_SFX f
#define PLF_LOG logf
#include "plf_kernel_scalar_body.h"
#undef PLF_REAL
#undef PLF_SFX
#undef PLF_LOG

const plf_kernels plf_kernels_scalar = {
  .isa = PLF_ISA_SCALAR,
  .cpu_ok = NULL,
  .update_d = plf_update_scalar_d,
  .update_f = plf_update_scalar_f,
  .root_d = plf_root_scalar_d,
  .root_f = plf_root_scalar_f,
  .edge_d = plf_edge_scalar_d,
  .edge_f = plf_edge_scalar_f,
};
