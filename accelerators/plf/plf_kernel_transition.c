/*
 * plf_kernel_transition.c - plf_transition_matrices_{d,f} (plf_kernel.h):
 * one S^3 pass per category, not vectorised (it is per edge, not per
 * pattern).
 */
#include <math.h>
#include <stddef.h>

#include "ember/ember_errors.h"
#include "plf_kernel.h"
#include "plf_kernel_template.h"

/* states whose exp(eval r t) are kept on the stack; further ones are
 * recomputed where they are used */
#define PLF_TRANSITION_STACK 256

#define PLF_REAL double
#define PLF_SFX d
#include "plf_kernel_transition_body.h"
#undef PLF_REAL
#undef PLF_SFX

#define PLF_REAL float
#define PLF_SFX f
#include "plf_kernel_transition_body.h"
#undef PLF_REAL
#undef PLF_SFX
