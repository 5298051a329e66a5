/* plf_result.c - packing a plf Result (plf_result.h). */
#include "plf_result.h"

#include <stdlib.h>

#include "ember/ember_errors.h"

int plf_pack_result(const plf_answers *a, const plf_task *t,
                    acc_output *out) {
  Ember__Plf__Result r = EMBER__PLF__RESULT__INIT;
  r.n_lnl = t->n_lnl;
  r.lnl = a->lnl;
  r.n_site_lnl = t->n_site_lnl;
  r.site_lnl = a->site_lnl;
  r.n_values = t->n_values;
  r.values = a->values;
  r.n_first_derivative = r.n_second_derivative = t->n_derivatives;
  r.first_derivative = a->first;
  r.second_derivative = a->second;
  r.n_site_first_derivative = r.n_site_second_derivative =
      t->n_site_derivatives;
  r.site_first_derivative = a->site_first;
  r.site_second_derivative = a->site_second;
  if (a->non_finite) {
    r.has_non_finite = 1;
    r.non_finite = a->non_finite;
  }
  out->size = ember__plf__result__get_packed_size(&r);
  out->data = malloc(out->size ? out->size : 1);
  if (!out->data) return EMBER_ENOMEM;
  ember__plf__result__pack(&r, out->data);
  return 0;
}
