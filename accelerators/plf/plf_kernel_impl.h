/*
 * plf_kernel_impl.h - the interface between the public entry points
 * (plf_kernel_dispatch.c) and the variants (plf_kernel_scalar.c,
 * plf_kernel_avx2.c, plf_kernel_avx512.c); internal to the plf kernels.
 *
 * The entry points check the arguments and put a tip-states child first:
 * a variant's update sees (states, states), (states, partials) or
 * (partials, partials), a range with p0 < p1, and dimensions >= 1.
 */
#ifndef EMBER_PLF_KERNEL_IMPL_H
#define EMBER_PLF_KERNEL_IMPL_H

#include <stdbool.h>

#include "plf_kernel.h"

typedef void (*plf_update_d_fn)(const plf_dims *d, const plf_update_d *op,
                                int p0, int p1);
typedef void (*plf_update_f_fn)(const plf_dims *d, const plf_update_f *op,
                                int p0, int p1);
typedef double (*plf_root_d_fn)(const plf_dims *d, const double *root,
                                const plf_integrate_d *in, int p0, int p1);
typedef double (*plf_root_f_fn)(const plf_dims *d, const float *root,
                                const plf_integrate_f *in, int p0, int p1);
typedef double (*plf_edge_d_fn)(const plf_dims *d, const double *parent,
                                const plf_child_d *child,
                                const plf_integrate_d *in, int p0, int p1);
typedef double (*plf_edge_f_fn)(const plf_dims *d, const float *parent,
                                const plf_child_f *child,
                                const plf_integrate_f *in, int p0, int p1);

struct plf_kernels {
  plf_isa isa;
  bool (*cpu_ok)(void);     /* NULL: always usable */
  plf_update_d_fn update_d;
  plf_update_f_fn update_f;
  plf_root_d_fn root_d;
  plf_root_f_fn root_f;
  plf_edge_d_fn edge_d;
  plf_edge_f_fn edge_f;
};

/* The variants' tables (those not built are not declared). */
extern const plf_kernels plf_kernels_scalar;
#ifdef EMBER_PLF_HAVE_AVX2
extern const plf_kernels plf_kernels_avx2;
#endif
#ifdef EMBER_PLF_HAVE_AVX512
extern const plf_kernels plf_kernels_avx512;
#endif

/* The scalar reference, which the SIMD variants call for what they do not
 * vectorise (S > PLF_SIMD_MAX_STATES, a tail of patterns). */
void plf_update_scalar_d(const plf_dims *d, const plf_update_d *op, int p0,
                         int p1);
void plf_update_scalar_f(const plf_dims *d, const plf_update_f *op, int p0,
                         int p1);
double plf_root_scalar_d(const plf_dims *d, const double *root,
                         const plf_integrate_d *in, int p0, int p1);
double plf_root_scalar_f(const plf_dims *d, const float *root,
                         const plf_integrate_f *in, int p0, int p1);
double plf_edge_scalar_d(const plf_dims *d, const double *parent,
                         const plf_child_d *child, const plf_integrate_d *in,
                         int p0, int p1);
double plf_edge_scalar_f(const plf_dims *d, const float *parent,
                         const plf_child_f *child, const plf_integrate_f *in,
                         int p0, int p1);

#endif
