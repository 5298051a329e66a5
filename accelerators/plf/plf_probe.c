/*
 * plf_probe.c - calibration tasks for "plf": a self-contained instance (no
 * state block) of a three-taxon tree under Jukes-Cantor, DNA, with tip
 * states in the one input block: P(t) for four edges, two partials
 * updates, the root log-likelihood. Small: 256 patterns, one category
 * (mostly a launch's fixed cost); large: 65,536 patterns, four categories
 * (a few ms on one core).
 */
#include "plf_probe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "accelerators/plf/plf.pb-c.h"
#include "ember/ember_errors.h"

enum { TIPS = 3, STATES = 4, MATRICES = 4 };

/* Jukes-Cantor's rate matrix (mean rate 1): eigenvalues 0 and -4/3 (three
 * times); eigenvectors the orthonormal Helmert basis, so the inverse is
 * the transpose. */
static void jc_eigen(double vec[16], double inv[16], double val[4]) {
  static const double h[4][4] = {
      {0.5, 0.5, 0.5, 0.5},
      {1, -1, 0, 0},
      {1, 1, -2, 0},
      {1, 1, 1, -3}};
  static const double norm[4] = {1, 1.4142135623730951, 2.449489742783178,
                                 3.4641016151377544};
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < 4; i++) {
      vec[i * 4 + k] = h[k][i] / norm[k]; /* column k */
      inv[k * 4 + i] = vec[i * 4 + k];
    }
  val[0] = 0;
  val[1] = val[2] = val[3] = -4.0 / 3.0;
}

int plf_make_probe(unsigned size, acc_probe *probe) {
  memset(probe, 0, sizeof *probe);
  uint32_t patterns = size == ACC_PROBE_SMALL ? 256 : 65536;
  uint32_t cats = size == ACC_PROBE_SMALL ? 1 : 4;

  Ember__Plf__Instance in = EMBER__PLF__INSTANCE__INIT;
  in.states = STATES;
  in.patterns = patterns;
  in.has_categories = 1;
  in.categories = cats;
  in.tips = TIPS;
  in.partials = TIPS + 2;
  in.has_compact = 1;
  in.compact = TIPS;
  in.matrices = MATRICES;

  double vec[16], inv[16], val[4], freqs[4] = {.25, .25, .25, .25};
  double weights[4], rates[4] = {0.1, 0.5, 1.2, 2.2};
  jc_eigen(vec, inv, val);
  for (uint32_t c = 0; c < cats; c++) weights[c] = 1.0 / cats;
  if (cats == 1) rates[0] = 1;

  Ember__Plf__InputSlice from[TIPS];
  Ember__Plf__SetTipStates tip[TIPS];
  Ember__Plf__SetEigen eigen = EMBER__PLF__SET_EIGEN__INIT;
  Ember__Plf__SetVector vec_freqs = EMBER__PLF__SET_VECTOR__INIT;
  Ember__Plf__SetVector vec_weights = EMBER__PLF__SET_VECTOR__INIT;
  Ember__Plf__SetVector vec_rates = EMBER__PLF__SET_VECTOR__INIT;
  Ember__Plf__UpdateMatrices um = EMBER__PLF__UPDATE_MATRICES__INIT;
  Ember__Plf__PartialsOp pop[2] = {EMBER__PLF__PARTIALS_OP__INIT,
                                   EMBER__PLF__PARTIALS_OP__INIT};
  Ember__Plf__PartialsOp *pops[2] = {&pop[0], &pop[1]};
  Ember__Plf__UpdatePartials up = EMBER__PLF__UPDATE_PARTIALS__INIT;
  Ember__Plf__LnlTerm term = EMBER__PLF__LNL_TERM__INIT;
  Ember__Plf__LnlTerm *terms[1] = {&term};
  Ember__Plf__Lnl lnl = EMBER__PLF__LNL__INIT;
  Ember__Plf__Op ops[TIPS + 7];
  Ember__Plf__Op *op_list[TIPS + 7];
  size_t n = 0;

  for (int i = 0; i < TIPS; i++) {
    ember__plf__input_slice__init(&from[i]);
    from[i].input = 0;
    from[i].offset = (uint64_t)i * patterns * sizeof(int32_t);
    ember__plf__set_tip_states__init(&tip[i]);
    tip[i].tip = (uint32_t)i;
    tip[i].from = &from[i];
    ember__plf__op__init(&ops[n]);
    ops[n].op_case = EMBER__PLF__OP__OP_TIP_STATES;
    ops[n++].tip_states = &tip[i];
  }
  eigen.n_vectors = eigen.n_inverse = 16;
  eigen.vectors = vec;
  eigen.inverse = inv;
  eigen.n_values = 4;
  eigen.values = val;
  ember__plf__op__init(&ops[n]);
  ops[n].op_case = EMBER__PLF__OP__OP_EIGEN;
  ops[n++].eigen = &eigen;

  Ember__Plf__SetVector *vecs[3] = {&vec_freqs, &vec_weights, &vec_rates};
  vec_freqs.kind = EMBER__PLF__SET_VECTOR__KIND__FREQUENCIES;
  vec_freqs.n_values = 4;
  vec_freqs.values = freqs;
  vec_weights.kind = EMBER__PLF__SET_VECTOR__KIND__CATEGORY_WEIGHTS;
  vec_weights.n_values = cats;
  vec_weights.values = weights;
  vec_rates.kind = EMBER__PLF__SET_VECTOR__KIND__CATEGORY_RATES;
  vec_rates.n_values = cats;
  vec_rates.values = rates;
  for (int i = 0; i < 3; i++) {
    ember__plf__op__init(&ops[n]);
    ops[n].op_case = EMBER__PLF__OP__OP_VECTOR;
    ops[n++].vector = vecs[i];
  }

  uint32_t mats[MATRICES] = {0, 1, 2, 3};
  double lengths[MATRICES] = {0.05, 0.1, 0.02, 0.2};
  um.n_matrices = um.n_lengths = MATRICES;
  um.matrices = mats;
  um.lengths = lengths;
  ember__plf__op__init(&ops[n]);
  ops[n].op_case = EMBER__PLF__OP__OP_UPDATE_MATRICES;
  ops[n++].update_matrices = &um;

  /* ((0,1)3, 2)4 */
  pop[0].dest = TIPS;
  pop[0].child1 = 0;
  pop[0].matrix1 = 0;
  pop[0].child2 = 1;
  pop[0].matrix2 = 1;
  pop[1].dest = TIPS + 1;
  pop[1].child1 = TIPS;
  pop[1].matrix1 = 2;
  pop[1].child2 = 2;
  pop[1].matrix2 = 3;
  up.n_ops = 2;
  up.ops = pops;
  ember__plf__op__init(&ops[n]);
  ops[n].op_case = EMBER__PLF__OP__OP_UPDATE_PARTIALS;
  ops[n++].update_partials = &up;

  term.buffer = TIPS + 1;
  lnl.n_terms = 1;
  lnl.terms = terms;
  ember__plf__op__init(&ops[n]);
  ops[n].op_case = EMBER__PLF__OP__OP_LNL;
  ops[n++].lnl = &lnl;

  for (size_t i = 0; i < n; i++) op_list[i] = &ops[i];
  Ember__Plf__Params p = EMBER__PLF__PARAMS__INIT;
  p.instance = &in;
  p.n_ops = n;
  p.ops = op_list;

  size_t len = ember__plf__params__get_packed_size(&p);
  size_t tip_bytes = (size_t)TIPS * patterns * sizeof(int32_t);
  probe->params = malloc(len);
  uint8_t *tips = malloc(tip_bytes);
  if (!probe->params || !tips) {
    free(probe->params);
    free(tips);
    probe->params = NULL;
    return EMBER_ENOMEM;
  }
  probe->params_len = ember__plf__params__pack(&p, probe->params);
  /* tip states from a fixed linear congruential sequence: the same probe
   * every time */
  uint32_t x = 12345;
  for (size_t i = 0; i < (size_t)TIPS * patterns; i++) {
    x = x * 1103515245u + 12345u;
    int32_t s = (int32_t)((x >> 16) & 3);
    memcpy(tips + i * sizeof s, &s, sizeof s);
  }
  probe->inputs[0].data = tips;
  probe->inputs[0].size = tip_bytes;
  probe->n_inputs = 1;
  return 0;
}
