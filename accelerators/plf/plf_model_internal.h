/*
 * plf_model_internal.h - what the model files share: the model, the parsed
 * form of a model string, the built-in matrices, the gamma and eigen
 * numerics. Not installed; not for other parts.
 */
#ifndef PLF_MODEL_INTERNAL_H
#define PLF_MODEL_INTERNAL_H

#include "plf_model.h"

#define PLF_NAME_MAX 2048

struct plf_model {
  int states;
  plf_datatype type;
  unsigned unset;
  char name[PLF_NAME_MAX];
  double freqs[PLF_MAX_STATES];
  double exch[PLF_MAX_STATES * PLF_MAX_STATES];
  size_t ncat;
  double rates[PLF_MODEL_MAX_CATEGORIES];
  double weights[PLF_MODEL_MAX_CATEGORIES];
  double alpha, pinv;
  double evec[PLF_MAX_STATES * PLF_MAX_STATES];
  double ievec[PLF_MAX_STATES * PLF_MAX_STATES];
  double eval[PLF_MAX_STATES];
};

typedef enum plf_freq_kind {
  PLF_FREQ_DEFAULT = 0, /* the base model's: equal, empirical or its own */
  PLF_FREQ_EQUAL,
  PLF_FREQ_EMPIRICAL,
  PLF_FREQ_MATRIX,      /* the protein matrix's own */
  PLF_FREQ_GIVEN
} plf_freq_kind;

/* A model string, parsed: the base's exchangeabilities and frequencies,
 * then the modifiers. */
typedef struct plf_model_spec {
  int states;
  char base[PLF_NAME_MAX];     /* the base as written back, params included */
  double exch[PLF_MAX_STATES * PLF_MAX_STATES]; /* symmetric, zero diagonal */
  double matrix_freqs[PLF_MAX_STATES];          /* protein: the matrix's */
  plf_freq_kind base_freq;     /* what PLF_FREQ_DEFAULT means */
  plf_freq_kind freq;
  double freqs[PLF_MAX_STATES];
  int gamma;                   /* categories, 0 without +G */
  double alpha;
  int pinv_given, pinv_set;    /* +I seen, +I{p} seen */
  double pinv;
  unsigned unset;
} plf_model_spec;

/* Where a message goes: "model 'what': reason". */
typedef struct plf_model_err {
  char *buf;
  size_t len;
  const char *what;
} plf_model_err;

int plf_model_fail(plf_model_err *e, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* plf_model_parse.c: the modifiers "+F..+G..+I.." of s into spec (whose
 * base is already set). */
int plf_model_parse_modifiers(const char *s, plf_model_spec *spec,
                              plf_model_err *e);

/* plf_model.c: the model from a parsed spec. */
int plf_model_build(const plf_model_spec *spec, const plf_alignment *aln,
                    plf_model **out, plf_model_err *e);

/* plf_model_matrices.c: the built-in protein matrices, PAML layout (190
 * exchangeabilities, lower triangle by rows; 20 frequencies). */
typedef struct plf_model_matrix {
  const char *name;
  const double *exch;  /* 190 */
  const double *freqs; /* 20 */
} plf_model_matrix;
const plf_model_matrix *plf_model_builtin(const char *name);

/* Fill a symmetric S x S matrix from PAML's lower triangle. */
void plf_model_from_lower(int states, const double *lower, double *full);

/* plf_model_paml.c: 190 + 20 numbers from a PAML rate file's text. */
int plf_model_paml_numbers(const char *text, size_t len, const char *source,
                           double *lower, double *freqs, char *err,
                           size_t err_len);

/* plf_model_gamma.c: the regularized lower incomplete gamma P(a, x) and
 * its inverse in x (the quantile of a gamma with shape a, scale 1). */
double plf_gamma_p(double a, double x);
double plf_gamma_quantile(double a, double p);

/* plf_model_eigen.c: the eigen system of the rate matrix of exch (scaled
 * in place to a mean rate of 1) and freqs. 0 or EMBER_EINTERNAL. */
int plf_model_eigen(int states, double *exch, const double *freqs,
                    double *evec, double *ievec, double *eval);

#endif
