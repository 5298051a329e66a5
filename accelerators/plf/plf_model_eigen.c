/*
 * plf_model_eigen.c - the eigen system of a reversible rate matrix, through
 * its symmetric form (see plf_model.h): Q_ij = R_ij pi_j is similar to
 * A = diag(sqrt(pi)) Q diag(1/sqrt(pi)), A_ij = sqrt(pi_i) R_ij sqrt(pi_j),
 * which LAPACK's dsyev decomposes with orthonormal eigenvectors U; then
 * E = diag(1/sqrt(pi)) U and Einv = U^T diag(sqrt(pi)) need no inversion.
 */
#include <math.h>

#include <lapacke.h>

#include "plf_model_internal.h"

int plf_model_eigen(int S, double *exch, const double *freqs, double *evec,
                    double *ievec, double *eval) {
  double mu = 0;
  for (int i = 0; i < S; i++)
    for (int j = 0; j < S; j++)
      if (i != j) mu += freqs[i] * exch[i * S + j] * freqs[j];
  if (!(mu > 0) || !isfinite(mu)) return EMBER_EINTERNAL;
  for (int i = 0; i < S * S; i++) exch[i] /= mu;

  double a[PLF_MAX_STATES * PLF_MAX_STATES], root[PLF_MAX_STATES];
  for (int i = 0; i < S; i++) root[i] = sqrt(freqs[i]);
  for (int i = 0; i < S; i++) {
    double out = 0;
    for (int j = 0; j < S; j++) {
      if (i == j) continue;
      a[i * S + j] = root[i] * exch[i * S + j] * root[j];
      out += exch[i * S + j] * freqs[j];
    }
    a[i * S + i] = -out;
  }
  lapack_int info = LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'V', 'U', S, a, S, eval);
  if (info == LAPACK_WORK_MEMORY_ERROR) return EMBER_ENOMEM;
  if (info != 0) return EMBER_EINTERNAL;
  for (int i = 0; i < S; i++)
    for (int k = 0; k < S; k++) {
      evec[i * S + k] = a[i * S + k] / root[i];
      ievec[k * S + i] = a[i * S + k] * root[i];
    }
  return 0;
}
