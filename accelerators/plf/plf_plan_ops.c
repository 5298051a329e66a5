/* plf_plan_ops.c - a plan as the plf accelerator's task ops
 * (plf_plan_ops.h). */
#include "plf_plan_ops.h"

#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"

void plf_plan_ops_free(plf_plan_ops *m) {
  if (!m) return;
  free(m->ops), free(m->list), free(m->um), free(m->mat_idx);
  free(m->mat_len), free(m->up), free(m->po), free(m->pl), free(m->sc);
  free(m->sc_idx), free(m->lnl), free(m->term), free(m->tl);
  memset(m, 0, sizeof *m);
}

static Ember__Plf__Op *next_op(plf_plan_ops *m) {
  Ember__Plf__Op *op = &m->ops[m->n];
  ember__plf__op__init(op);
  m->list[m->n++] = op;
  return op;
}

int plf_plan_ops_build(const plf_plan *plan, int site_lnl, plf_plan_ops *m) {
  size_t segs = plan->tree_count, nops = plan->op_count;
  size_t nmat = plan->matrix_count;
  size_t cap = 2 * segs + 2 * nops;
  memset(m, 0, sizeof *m);
  m->ops = calloc(cap ? cap : 1, sizeof *m->ops);
  m->list = calloc(cap ? cap : 1, sizeof *m->list);
  m->um = calloc(segs ? segs : 1, sizeof *m->um);
  m->mat_idx = calloc(nmat ? nmat : 1, sizeof *m->mat_idx);
  m->mat_len = calloc(nmat ? nmat : 1, sizeof *m->mat_len);
  m->up = calloc(nops ? nops : 1, sizeof *m->up);
  m->po = calloc(nops ? nops : 1, sizeof *m->po);
  m->pl = calloc(nops ? nops : 1, sizeof *m->pl);
  m->sc = calloc(nops ? nops : 1, sizeof *m->sc);
  m->sc_idx = calloc(nops ? 2 * nops : 1, sizeof *m->sc_idx);
  m->lnl = calloc(segs ? segs : 1, sizeof *m->lnl);
  m->term = calloc(segs ? segs : 1, sizeof *m->term);
  m->tl = calloc(segs ? segs : 1, sizeof *m->tl);
  if (!m->ops || !m->list || !m->um || !m->mat_idx || !m->mat_len || !m->up ||
      !m->po || !m->pl || !m->sc || !m->sc_idx || !m->lnl || !m->term ||
      !m->tl) {
    plf_plan_ops_free(m);
    return EMBER_ENOMEM;
  }
  size_t n_up = 0, n_sc = 0;
  for (size_t s = 0; s < segs; s++) {
    const plf_plan_tree *seg = &plan->trees[s];
    if (seg->matrix_count) {
      Ember__Plf__UpdateMatrices *um = &m->um[s];
      ember__plf__update_matrices__init(um);
      um->n_matrices = um->n_lengths = seg->matrix_count;
      um->matrices = m->mat_idx + seg->first_matrix;
      um->lengths = m->mat_len + seg->first_matrix;
      for (size_t i = 0; i < seg->matrix_count; i++) {
        const plf_matrix_update *u = &plan->matrices[seg->first_matrix + i];
        um->matrices[i] = (uint32_t)u->matrix;
        um->lengths[i] = u->length;
      }
      Ember__Plf__Op *op = next_op(m);
      op->op_case = EMBER__PLF__OP__OP_UPDATE_MATRICES;
      op->update_matrices = um;
    }
    /* runs of ops in one UpdatePartials, closed by each op whose
     * children's scale factors are to be added to its own: the addition
     * must come before a later op overwrites any of those buffers */
    Ember__Plf__UpdatePartials *run = NULL;
    for (size_t i = 0; i < seg->op_count; i++) {
      size_t k = seg->first_op + i;
      const plf_op *o = &plan->ops[k];
      Ember__Plf__PartialsOp *po = &m->po[k];
      ember__plf__partials_op__init(po);
      po->dest = (uint32_t)o->dest;
      if (o->dest_scale_write != PLF_NONE) {
        po->has_scale_write = 1;
        po->scale_write = o->dest_scale_write;
      }
      po->child1 = (uint32_t)o->child1;
      po->matrix1 = (uint32_t)o->child1_matrix;
      po->child2 = (uint32_t)o->child2;
      po->matrix2 = (uint32_t)o->child2_matrix;
      if (!run) {
        run = &m->up[n_up++];
        ember__plf__update_partials__init(run);
        run->ops = &m->pl[k];
        Ember__Plf__Op *op = next_op(m);
        op->op_case = EMBER__PLF__OP__OP_UPDATE_PARTIALS;
        op->update_partials = run;
      }
      run->ops[run->n_ops++] = po;
      uint32_t idx[2];
      size_t ni = 0;
      if (o->dest_scale_write != PLF_NONE) {
        if (o->child1_scale != PLF_NONE) idx[ni++] = (uint32_t)o->child1_scale;
        if (o->child2_scale != PLF_NONE) idx[ni++] = (uint32_t)o->child2_scale;
      }
      if (ni) {
        Ember__Plf__ScaleOp *sc = &m->sc[n_sc];
        ember__plf__scale_op__init(sc);
        sc->kind = EMBER__PLF__SCALE_OP__KIND__ACCUMULATE;
        sc->scales = m->sc_idx + 2 * n_sc;
        memcpy(sc->scales, idx, ni * sizeof *idx);
        sc->n_scales = ni;
        sc->cumulative = (uint32_t)o->dest_scale_write;
        n_sc++;
        Ember__Plf__Op *op = next_op(m);
        op->op_case = EMBER__PLF__OP__OP_SCALE;
        op->scale = sc;
        run = NULL;
      }
    }
    Ember__Plf__LnlTerm *t = &m->term[s];
    ember__plf__lnl_term__init(t);
    t->buffer = (uint32_t)seg->root;
    t->weights = 0;
    t->frequencies = 0;
    if (seg->root_scale != PLF_NONE) {
      t->has_cumulative_scale = 1;
      t->cumulative_scale = seg->root_scale;
    }
    m->tl[s] = t;
    Ember__Plf__Lnl *l = &m->lnl[s];
    ember__plf__lnl__init(l);
    l->n_terms = 1;
    l->terms = &m->tl[s];
    if (site_lnl) {
      l->has_site_lnl = 1;
      l->site_lnl = 1;
    }
    Ember__Plf__Op *op = next_op(m);
    op->op_case = EMBER__PLF__OP__OP_LNL;
    op->lnl = l;
  }
  return 0;
}

static uint32_t map_tip(uint32_t b, const uint32_t *tip_buffer,
                        uint32_t n_tips) {
  return b < n_tips ? tip_buffer[b] : b;
}

void plf_plan_ops_map_tips(plf_plan_ops *m, const uint32_t *tip_buffer,
                           uint32_t n_tips) {
  for (size_t i = 0; i < m->n; i++) {
    const Ember__Plf__Op *op = m->list[i];
    if (op->op_case == EMBER__PLF__OP__OP_UPDATE_PARTIALS) {
      const Ember__Plf__UpdatePartials *up = op->update_partials;
      for (size_t k = 0; k < up->n_ops; k++) {
        Ember__Plf__PartialsOp *po = up->ops[k];
        po->child1 = map_tip(po->child1, tip_buffer, n_tips);
        po->child2 = map_tip(po->child2, tip_buffer, n_tips);
      }
    } else if (op->op_case == EMBER__PLF__OP__OP_LNL) {
      for (size_t k = 0; k < op->lnl->n_terms; k++) {
        Ember__Plf__LnlTerm *t = op->lnl->terms[k];
        t->buffer = map_tip(t->buffer, tip_buffer, n_tips);
        if (t->child >= 0)
          t->child = (int32_t)map_tip((uint32_t)t->child, tip_buffer, n_tips);
      }
    }
  }
}
