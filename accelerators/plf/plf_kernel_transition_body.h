/*
 * plf_kernel_transition_body.h - transition matrices (and their
 * derivatives) from an eigen system, for one precision
 * (plf_kernel_template.h); included by plf_kernel_transition.c only.
 * BEAGLE's EigenDecompositionCube order: P[i][j] = sum_k (E[i][k] Einv[k][j])
 * exp(eval[k] r t), clamped at 0.
 */

int PLF_T(plf_transition_matrices)(int S, int C, const PLF_REAL *evec,
                                   const PLF_REAL *ivec, const PLF_REAL *eval,
                                   const PLF_REAL *rates, double t,
                                   PLF_REAL *p, PLF_REAL *d1, PLF_REAL *d2) {
  if (S < 1 || C < 1 || !evec || !ivec || !eval || !rates || !p ||
      !(t >= 0))
    return EMBER_EINVAL;
  PLF_REAL e0[PLF_TRANSITION_STACK], e1[PLF_TRANSITION_STACK],
      e2[PLF_TRANSITION_STACK];
  for (int c = 0; c < C; c++) {
    PLF_REAL *pc = p + (size_t)c * S * S;
    PLF_REAL *d1c = d1 ? d1 + (size_t)c * S * S : NULL;
    PLF_REAL *d2c = d2 ? d2 + (size_t)c * S * S : NULL;
    double rt = t * (double)rates[c];
    /* the diagonal: exp(eval r t) and its derivatives in t */
    for (int k = 0; k < S && k < PLF_TRANSITION_STACK; k++) {
      double er = (double)eval[k] * (double)rates[c];
      double x = exp((double)eval[k] * rt);
      e0[k] = (PLF_REAL)x;
      e1[k] = (PLF_REAL)(er * x);
      e2[k] = (PLF_REAL)(er * er * x);
    }
    for (int i = 0; i < S; i++)
      for (int j = 0; j < S; j++) {
        PLF_REAL s0 = 0, s1 = 0, s2 = 0;
        for (int k = 0; k < S; k++) {
          PLF_REAL cijk = evec[(size_t)i * S + k] * ivec[(size_t)k * S + j];
          PLF_REAL x0, x1, x2;
          if (k < PLF_TRANSITION_STACK) {
            x0 = e0[k];
            x1 = e1[k];
            x2 = e2[k];
          } else {   /* past the stack's room: recomputed */
            double er = (double)eval[k] * (double)rates[c];
            double x = exp((double)eval[k] * rt);
            x0 = (PLF_REAL)x;
            x1 = (PLF_REAL)(er * x);
            x2 = (PLF_REAL)(er * er * x);
          }
          s0 += cijk * x0;
          s1 += cijk * x1;
          s2 += cijk * x2;
        }
        pc[(size_t)i * S + j] = s0 > 0 ? s0 : 0;
        if (d1c) d1c[(size_t)i * S + j] = s1;
        if (d2c) d2c[(size_t)i * S + j] = s2;
      }
  }
  return 0;
}
