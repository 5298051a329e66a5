/*
 * plf_model.h - substitution models for the plf accelerator: IQ-TREE model
 * strings and PAML rate files in, what a likelihood kernel needs out
 * (BEAGLE's conventions): state frequencies, rate categories with their
 * weights, and the eigen system of the rate matrix.
 *
 * Model strings (IQ-TREE syntax, names in any case, numbers separated by
 * ',' or '/'):
 *   DNA      JC (JC69)          equal rates, equal frequencies
 *            F81                equal rates, frequencies as +F
 *            K80{k} (K2P)       transition/transversion ratio k, equal freqs
 *            HKY{k} (HKY85)     k, frequencies as +F
 *            GTR{a,b,c,d,e}     rates AC,AG,AT,CG,CT with GT = 1 (or six
 *                               rates AC..GT), frequencies as +F
 *   protein  LG, WAG, JTT       PAML's lg.dat, wag.dat, jones.dat, with the
 *                               matrix's own frequencies
 *   then any of
 *     +F         frequencies counted from the alignment (empirical)
 *     +F{f1,..}  given frequencies (4 or 20, order A C G T or
 *                A R N D C Q E G H I L K M F P S T W Y V; they are
 *                normalised, and must sum to 1 within 0.01)
 *     +FQ        equal frequencies;  +FU  the matrix's own (protein)
 *     +G, +Gn, +G{a}, +Gn{a}
 *                discrete gamma, n categories (default 4), shape a: each
 *                category at its MEAN rate (Yang 1994), as IQ-TREE, PhyML
 *                and BEAGLE do by default
 *     +I{p}      a proportion p of invariable sites
 * Rates must lie in [1e-6, 1e6], frequencies at least 1e-6 (bounds that
 * keep the eigen system well conditioned).
 * Parameters not given take IQ-TREE's starting values: rates 1, gamma
 * shape 1.0, +I half the alignment's constant fraction; nothing is
 * estimated here (plf_model_unset() says which were defaulted).
 *
 * Categories: with +I{p} (p > 0) category 0 is the invariable one (rate 0,
 * weight p) and the others' rates are divided by 1 - p, their weights
 * multiplied by it, so that the mean rate stays 1 (IQ-TREE's convention);
 * with gamma, n categories of weight 1/n; else one of rate 1.
 *
 * The eigen system: the rate matrix Q (Q_ij = R_ij pi_j, i != j) is scaled
 * so that its mean rate -sum_i pi_i Q_ii is 1, and symmetrised as
 * A = diag(sqrt(pi)) Q diag(1/sqrt(pi)), which LAPACK's dsyev decomposes as
 * A = U diag(lambda) U^T. Then E = diag(1/sqrt(pi)) U and
 * Einv = U^T diag(sqrt(pi)), and P(t) = E diag(exp(lambda t)) Einv, t in
 * expected substitutions per site: what beagleSetEigenDecomposition takes
 * (row-major S x S arrays). Eigenvalues are ascending; the last is 0 (up
 * to rounding).
 *
 * A model is immutable once built: its functions may be called from any
 * number of threads at once.
 */
#ifndef PLF_MODEL_H
#define PLF_MODEL_H

#include <stddef.h>

#include "ember/ember_errors.h"
#include "plf_alignment.h"

#define PLF_MODEL_MAX_SPEC 4096       /* bytes in a model string */
#define PLF_MODEL_MAX_GAMMA 64        /* gamma categories */
#define PLF_MODEL_MAX_CATEGORIES (PLF_MODEL_MAX_GAMMA + 1) /* with +I */
#define PLF_MODEL_MAX_PAML_BYTES 1048576 /* a PAML rate file */
#define PLF_MODEL_MIN_ALPHA 0.02      /* gamma shape bounds (IQ-TREE's) */
#define PLF_MODEL_MAX_ALPHA 1000.0

/* plf_model_unset() bits: parameters that took their default value */
#define PLF_MODEL_UNSET_RATES 1u /* kappa or GTR rates */
#define PLF_MODEL_UNSET_ALPHA 2u /* +G without {alpha} */
#define PLF_MODEL_UNSET_PINV 4u  /* +I without {p} */

typedef struct plf_model plf_model;

/*
 * plf_model_parse - build a model from an IQ-TREE model string.
 *   spec   the string (NUL-terminated, at most PLF_MODEL_MAX_SPEC bytes)
 *   aln    the alignment, for +F (empirical frequencies), +I without a
 *          value, and a check that its data type fits the model; may be
 *          NULL when none of these is needed
 *   out    receives the model (NULL on failure); the caller owns it and
 *          frees it with plf_model_destroy()
 *   err    receives "model 'spec': reason" on failure
 * Returns 0, EMBER_EPARAM (a bad or unsupported string, a value out of
 * range, a model that does not fit the alignment, or one that needs an
 * alignment and got none), EMBER_EINVAL (NULL arguments), EMBER_ENOMEM, or
 * EMBER_EINTERNAL (the eigen decomposition failed).
 */
int plf_model_parse(const char *spec, const plf_alignment *aln,
                    plf_model **out, char *err, size_t err_len);

/*
 * plf_model_load_paml - a protein model from a PAML rate file (190
 * exchangeabilities, lower triangle by rows, then 20 frequencies, in the
 * order A R N D C Q E G H I L K M F P S T W Y V; what follows is ignored).
 * Exchangeabilities in [0, 1e6], frequencies at least 1e-6, summing to 1
 * within 0.01 (they are normalised).
 *   path       the file (at most PLF_MODEL_MAX_PAML_BYTES)
 *   modifiers  "+G4{0.5}+I{0.1}+F..." as in a model string, or NULL/""
 * Other arguments and returns as plf_model_parse(); errors in the file
 * read "path:line: reason" and return EMBER_EFORMAT, EMBER_EIO when the
 * file cannot be read, EMBER_ETOOBIG when it is over the limit.
 */
int plf_model_load_paml(const char *path, const char *modifiers,
                        const plf_alignment *aln, plf_model **out, char *err,
                        size_t err_len);

/* plf_model_parse_paml - plf_model_load_paml() on text in memory; source
 * names it in messages and in the model's name. */
int plf_model_parse_paml(const void *text, size_t len, const char *source,
                         const char *modifiers, const plf_alignment *aln,
                         plf_model **out, char *err, size_t err_len);

/* plf_model_destroy - free a model; NULL is a no-op. */
void plf_model_destroy(plf_model *m);

/* The model written back with all its values, e.g.
 * "HKY{2}+F{0.3,0.2,0.25,0.25}+G4{0.5}". Owned by the model. */
const char *plf_model_name(const plf_model *m);

/* State count: 4 (DNA) or 20 (protein), and the data type. */
int plf_model_states(const plf_model *m);
plf_datatype plf_model_datatype(const plf_model *m);

/* Which parameters took default values (PLF_MODEL_UNSET_* bits). */
unsigned plf_model_unset(const plf_model *m);

/* Equilibrium frequencies, states() values summing to 1. */
const double *plf_model_freqs(const plf_model *m);

/* The exchangeabilities R (S x S, symmetric, zero diagonal), scaled with
 * the frequencies to a mean rate of 1. */
const double *plf_model_exchangeabilities(const plf_model *m);

/* Rate categories: their count, rates and weights (weights sum to 1; the
 * weighted mean rate is 1). */
size_t plf_model_categories(const plf_model *m);
const double *plf_model_category_rates(const plf_model *m);
const double *plf_model_category_weights(const plf_model *m);

/* Gamma shape (0 without +G) and the proportion of invariable sites. */
double plf_model_alpha(const plf_model *m);
double plf_model_pinv(const plf_model *m);

/* The eigen system (see above): E and Einv S x S row-major, eigenvalues
 * S, ascending. */
const double *plf_model_eigenvectors(const plf_model *m);
const double *plf_model_inverse_eigenvectors(const plf_model *m);
const double *plf_model_eigenvalues(const plf_model *m);

/*
 * plf_model_transition - P(t) = E diag(exp(lambda t)) Einv into p (S x S,
 * row-major: p[i * S + j] is the probability of j after t from i), t >= 0
 * in expected substitutions per site (a branch length times a category
 * rate). Returns 0 or EMBER_EINVAL (t negative or not finite, NULLs).
 */
int plf_model_transition(const plf_model *m, double t, double *p);

/*
 * plf_model_gamma_rates - the mean rates of n equal-probability categories
 * of a gamma distribution with shape alpha and mean 1 (Yang 1994): the
 * category boundaries are gamma quantiles, each rate the mean within its
 * category; they average to 1. n in 1..PLF_MODEL_MAX_GAMMA, alpha in
 * [PLF_MODEL_MIN_ALPHA, PLF_MODEL_MAX_ALPHA]. Returns 0 or EMBER_EINVAL.
 */
int plf_model_gamma_rates(double alpha, int n, double *rates);

#endif
