/*
 * lnl.c - ember_lnl and its handles (ember.h, "The plf accelerator"):
 * alignments and models from ember_plf_io, trees from ember_plf_tree, and
 * the scoring through lnl_run.c's instance and planner. `ember lnl` is a
 * front end to these calls.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "last_error.h"
#include "lnl_run.h"
#include "plf_alignment.h"
#include "plf_model.h"
#include "struct_abi.h"

#define EMBER__LNL_PARAMS_V0 EMBER__V0_SIZE(ember_lnl_params, instances)
#define EMBER__LNL_REPORT_V0 EMBER__V0_SIZE(ember_lnl_report, instances)

/* The default max_vectors: the fewest that recompute nothing, within these
 * bytes. */
#define DEFAULT_PARTIALS_BYTES ((uint64_t)256 << 20)
#define DEFAULT_TCP_STATE_BYTES ((uint64_t)48 << 20) /* under max_frame */

struct ember_alignment {
  plf_alignment *aln;
  const char **names; /* the taxa's names, for the Newick reader */
};

struct ember_model {
  plf_model *m;
  const ember_alignment *aln;
};

struct ember_trees {
  plf_tree **trees;
  int n;
  const ember_alignment *aln;
};

/* ---- alignments ----------------------------------------------------------- */

static int parse_type(const char *type, plf_datatype *out) {
  if (!type) *out = PLF_DATA_AUTO;
  else if (strcmp(type, "dna") == 0) *out = PLF_DATA_DNA;
  else if (strcmp(type, "protein") == 0) *out = PLF_DATA_PROTEIN;
  else {
    ember__client_set_error("type '%s' is not dna or protein", type);
    return EMBER_EPARAM;
  }
  return 0;
}

/* Wrap a plf alignment (taken over, also on failure). */
static int wrap_alignment(plf_alignment *a, ember_alignment **out) {
  ember_alignment *e = calloc(1, sizeof *e);
  size_t taxa = plf_alignment_taxa(a);
  const char **names = calloc(taxa ? taxa : 1, sizeof *names);
  if (!e || !names) {
    free(e);
    free(names);
    plf_alignment_destroy(a);
    ember__client_set_error("out of memory");
    return EMBER_ENOMEM;
  }
  for (size_t i = 0; i < taxa; i++) names[i] = plf_alignment_name(a, i);
  e->aln = a;
  e->names = names;
  *out = e;
  return 0;
}

int ember_alignment_read(const char *path, const char *type,
                         ember_alignment **out) {
  if (out) *out = NULL;
  if (!path || !out) {
    ember__client_set_error("ember_alignment_read: missing argument");
    return EMBER_EINVAL;
  }
  plf_datatype t;
  int rc = parse_type(type, &t);
  if (rc) return rc;
  char err[1024];
  plf_alignment *a = NULL;
  rc = plf_alignment_read(path, PLF_FORMAT_AUTO, t, &a, err, sizeof err);
  if (rc) {
    ember__client_set_error("%s", err);
    return rc;
  }
  return wrap_alignment(a, out);
}

int ember_alignment_from_sequences(const char *const *names,
                                   const char *const *seqs, size_t n,
                                   const char *type, ember_alignment **out) {
  if (out) *out = NULL;
  if (!out || (n && (!names || !seqs))) {
    ember__client_set_error("ember_alignment_from_sequences: missing "
                            "argument");
    return EMBER_EINVAL;
  }
  plf_datatype t;
  int rc = parse_type(type, &t);
  if (rc) return rc;
  char err[1024];
  plf_alignment *a = NULL;
  rc = plf_alignment_from_sequences(names, seqs, n, t, &a, err, sizeof err);
  if (rc) {
    ember__client_set_error("%s", err);
    /* sequences in memory are the caller's parameters, not a file */
    return rc == EMBER_EFORMAT ? EMBER_EPARAM : rc;
  }
  return wrap_alignment(a, out);
}

size_t ember_alignment_taxa(const ember_alignment *aln) {
  return aln ? plf_alignment_taxa(aln->aln) : 0;
}

size_t ember_alignment_sites(const ember_alignment *aln) {
  return aln ? plf_alignment_sites(aln->aln) : 0;
}

size_t ember_alignment_patterns(const ember_alignment *aln) {
  return aln ? plf_alignment_patterns(aln->aln) : 0;
}

const char *ember_alignment_name(const ember_alignment *aln, size_t i) {
  return aln ? plf_alignment_name(aln->aln, i) : NULL;
}

const char *ember_alignment_type(const ember_alignment *aln) {
  if (!aln) return NULL;
  return plf_alignment_datatype(aln->aln) == PLF_DATA_PROTEIN ? "protein"
                                                               : "dna";
}

void ember_alignment_free(ember_alignment *aln) {
  if (!aln) return;
  plf_alignment_destroy(aln->aln);
  free(aln->names);
  free(aln);
}

/* ---- models --------------------------------------------------------------- */

int ember_model_parse(const char *model, const char *rates_file,
                      const ember_alignment *aln, ember_model **out) {
  if (out) *out = NULL;
  if (!aln || !out) {
    ember__client_set_error("ember_model_parse: missing argument");
    return EMBER_EINVAL;
  }
  if (!rates_file && (!model || !model[0])) {
    ember__client_set_error("no model (and no rate file)");
    return EMBER_EPARAM;
  }
  ember_model *e = calloc(1, sizeof *e);
  if (!e) {
    ember__client_set_error("out of memory");
    return EMBER_ENOMEM;
  }
  char err[1024];
  int rc;
  if (rates_file)
    rc = plf_model_load_paml(rates_file, model ? model : "", aln->aln, &e->m,
                             err, sizeof err);
  else
    rc = plf_model_parse(model, aln->aln, &e->m, err, sizeof err);
  if (rc) {
    free(e);
    ember__client_set_error("%s", err);
    return rc;
  }
  e->aln = aln;
  *out = e;
  return 0;
}

const char *ember_model_name(const ember_model *model) {
  return model ? plf_model_name(model->m) : NULL;
}

void ember_model_free(ember_model *model) {
  if (!model) return;
  plf_model_destroy(model->m);
  free(model);
}

/* ---- trees ---------------------------------------------------------------- */

/* The Newick reader speaks of "the taxon list": here it is the alignment. */
static void name_taxon_list(char *msg) {
  static const char from[] = "the taxon list", to[] = "the alignment";
  char *p;
  while ((p = strstr(msg, from)) != NULL) {
    memmove(p + strlen(to), p + strlen(from), strlen(p + strlen(from)) + 1);
    memcpy(p, to, strlen(to));
  }
}

static int trees_args(const ember_alignment *aln, ember_trees **out,
                      const char *what) {
  if (out) *out = NULL;
  if (!aln || !out) {
    ember__client_set_error("%s: missing argument", what);
    return EMBER_EINVAL;
  }
  if (plf_alignment_taxa(aln->aln) < 2) {
    ember__client_set_error("the alignment has %zu taxon; a tree needs at "
                            "least 2", plf_alignment_taxa(aln->aln));
    return EMBER_EPARAM;
  }
  return 0;
}

int ember_trees_read(const char *path, const ember_alignment *aln,
                     ember_trees **out) {
  int rc = trees_args(aln, out, "ember_trees_read");
  if (rc) return rc;
  if (!path) {
    ember__client_set_error("ember_trees_read: missing argument");
    return EMBER_EINVAL;
  }
  ember_trees *e = calloc(1, sizeof *e);
  if (!e) {
    ember__client_set_error("out of memory");
    return EMBER_ENOMEM;
  }
  char err[1024];
  rc = plf_newick_read_file(path, aln->names,
                            (int)plf_alignment_taxa(aln->aln), &e->trees,
                            &e->n, err, sizeof err);
  if (rc) {
    free(e);
    name_taxon_list(err);
    ember__client_set_error("%s", err);
    return rc;
  }
  e->aln = aln;
  *out = e;
  return 0;
}

int ember_trees_parse(const char *const *newick, size_t n,
                      const ember_alignment *aln, ember_trees **out) {
  int rc = trees_args(aln, out, "ember_trees_parse");
  if (rc) return rc;
  if (!newick && n) {
    ember__client_set_error("ember_trees_parse: missing argument");
    return EMBER_EINVAL;
  }
  if (n > PLF_NEWICK_MAX_TREES) {
    ember__client_set_error("%zu trees: at most %d at once", n,
                            PLF_NEWICK_MAX_TREES);
    return EMBER_ETOOBIG;
  }
  ember_trees *e = calloc(1, sizeof *e);
  if (e) e->trees = calloc(n ? n : 1, sizeof *e->trees);
  if (!e || !e->trees) {
    free(e);
    ember__client_set_error("out of memory");
    return EMBER_ENOMEM;
  }
  e->aln = aln;
  int taxa = (int)plf_alignment_taxa(aln->aln);
  for (size_t i = 0; i < n; i++) {
    plf_tree **one = NULL;
    int count = 0;
    char err[1024] = "";
    if (!newick[i]) {
      snprintf(err, sizeof err, "NULL");
      rc = EMBER_EINVAL;
    } else if (strchr(newick[i], '\n')) {
      snprintf(err, sizeof err, "one tree per string, on one line");
      rc = EMBER_EPARAM;
    } else {
      rc = plf_newick_parse(newick[i], strlen(newick[i]), "tree", aln->names,
                            taxa, &one, &count, err, sizeof err);
      if (rc == 0 && count != 1) {
        plf_trees_destroy(one, count);
        snprintf(err, sizeof err, "%d trees; give one per string", count);
        rc = EMBER_EPARAM;
      }
    }
    if (rc) {
      /* "tree:1: reason" from the reader: the reason alone */
      const char *why = strncmp(err, "tree:1: ", 8) == 0 ? err + 8 : err;
      name_taxon_list(err);
      ember__client_set_error("newick[%zu]: %s", i, why);
      ember_trees_free(e);
      return rc == EMBER_EFORMAT ? EMBER_EPARAM : rc;
    }
    e->trees[e->n++] = one[0];
    free(one);
  }
  *out = e;
  return 0;
}

size_t ember_trees_count(const ember_trees *trees) {
  return trees ? (size_t)trees->n : 0;
}

void ember_trees_free(ember_trees *trees) {
  if (!trees) return;
  plf_trees_destroy(trees->trees, trees->n);
  free(trees);
}

/* ---- scoring -------------------------------------------------------------- */

size_t ember_lnl_min_vectors(size_t taxa) {
  if (taxa < 2) taxa = 2;
  if (taxa > PLF_TREE_MAX_TIPS) taxa = PLF_TREE_MAX_TIPS;
  return (size_t)ember__lnl_min_vectors((int)taxa);
}

void ember_lnl_params_default(ember_lnl_params *params) {
  if (!params) return;
  memset(params, 0, sizeof *params);
  params->size = sizeof *params;
  params->precision = EMBER_LNL_DOUBLE;
}

/* The tips' input block: per taxon int32 states, or doubles (patterns x
 * states) for a taxon with partial ambiguity codes, each 8-byte aligned. */
typedef struct tips {
  uint8_t *data;
  size_t size;
  uint64_t *offset;
  unsigned char *partials;
} tips;

static void tips_free(tips *t) {
  free(t->data);
  free(t->offset);
  free(t->partials);
}

static int make_tips(const plf_alignment *aln, tips *t) {
  size_t n = plf_alignment_taxa(aln);
  size_t P = plf_alignment_patterns(aln);
  size_t S = (size_t)plf_alignment_states(aln);
  memset(t, 0, sizeof *t);
  t->offset = calloc(n, sizeof *t->offset);
  t->partials = calloc(n, 1);
  if (!t->offset || !t->partials) return EMBER_ENOMEM;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    t->partials[i] = plf_alignment_tip_ambiguous(aln, i) == 1;
    t->offset[i] = at;
    size_t bytes = t->partials[i] ? P * S * sizeof(double)
                                  : P * sizeof(int32_t);
    at += (bytes + 7) & ~(size_t)7;
  }
  t->size = at;
  t->data = calloc(at ? at : 1, 1);
  int *states = malloc(P * sizeof *states);
  int rc = t->data && states ? 0 : EMBER_ENOMEM;
  for (size_t i = 0; i < n && rc == 0; i++) {
    uint8_t *dst = t->data + t->offset[i];
    if (t->partials[i]) {
      rc = plf_alignment_tip_partials(aln, i, (double *)(void *)dst);
    } else {
      rc = plf_alignment_tip_states(aln, i, states);
      for (size_t p = 0; p < P && rc == 0; p++) {
        int32_t v = states[p];
        memcpy(dst + p * sizeof v, &v, sizeof v);
      }
    }
  }
  free(states);
  return rc;
}

/* params->max_vectors, or the default: what the trees need, within
 * memory. */
static int choose_vectors(ember_client *client, const ember_lnl_params *p,
                          const ember_trees *trees, const lnl_setup *s,
                          int site_lnl, int *vectors) {
  int taxa = s->taxa;
  int min = ember__lnl_min_vectors(taxa);
  if (p->max_vectors) {
    if (p->max_vectors < (size_t)min) {
      ember__client_set_error("max_vectors: %zu is below the minimum %d for "
                              "%d taxa (ceil(log2 taxa) + 2)",
                              p->max_vectors, min, taxa);
      return EMBER_EPARAM;
    }
    if (p->max_vectors > (size_t)1 << 20) {
      ember__client_set_error("max_vectors: %zu is over %d", p->max_vectors,
                              1 << 20);
      return EMBER_EPARAM;
    }
    *vectors = (int)p->max_vectors;
    return 0;
  }
  uint64_t per = ember__lnl_partials_bytes(s);
  uint64_t cap = per ? DEFAULT_PARTIALS_BYTES / per : (uint64_t)1 << 20;
  if (strncmp(ember_client_address(client), "tcp:", 4) == 0) {
    /* the state block crosses TCP in one frame: keep it below max_frame */
    char err[256];
    uint64_t fixed = ember__lnl_state_bytes(s, min, err, sizeof err);
    /* each more slot: a partials buffer and a scale buffer */
    uint64_t slot = per + (uint64_t)s->patterns * (s->single ? 4 : 8) + 128;
    uint64_t room = fixed && fixed < DEFAULT_TCP_STATE_BYTES
                        ? (DEFAULT_TCP_STATE_BYTES - fixed) / slot
                        : 0;
    if (room + (uint64_t)min < cap) cap = room + (uint64_t)min;
  }
  if (cap > (uint64_t)1 << 20) cap = (uint64_t)1 << 20;
  if (cap < (uint64_t)min) cap = (uint64_t)min;
  *vectors = ember__lnl_vectors_needed(
      trees->trees, (size_t)trees->n, taxa,
      ember__lnl_run_batch_size(s, site_lnl), (int)cap);
  if (*vectors < 0) {
    ember__client_set_error("out of memory planning %d trees", trees->n);
    return EMBER_ENOMEM;
  }
  return 0;
}

static int check_args(ember_client *client, const ember_lnl_params *p,
                      const ember_model *model, const ember_trees *trees) {
  if (!client || !model || !trees) {
    ember__client_set_error("ember_lnl: missing argument");
    return EMBER_EINVAL;
  }
  if (model->aln != trees->aln) {
    ember__client_set_error("the model and the trees belong to different "
                            "alignments");
    return EMBER_EPARAM;
  }
  if (p->precision != EMBER_LNL_DOUBLE && p->precision != EMBER_LNL_SINGLE) {
    ember__client_set_error("precision %d is not EMBER_LNL_DOUBLE or "
                            "EMBER_LNL_SINGLE", (int)p->precision);
    return EMBER_EPARAM;
  }
  if (p->instances > 256) {
    ember__client_set_error("instances: %u is over 256", p->instances);
    return EMBER_EPARAM;
  }
  if (p->threads > 1024) {
    ember__client_set_error("threads: %u is over 1024", p->threads);
    return EMBER_EPARAM;
  }
  return 0;
}

/* One scoring: the buffers of a batch and where the results go. */
typedef struct scoring {
  const ember_lnl_params *p;
  size_t sites, patterns;
  const uint32_t *site_pattern;
  double *lnl, *site_lnl;   /* the caller's, or NULL */
  double *batch_lnl, *batch_site, *tree_sites;
} scoring;

static void mark_failed(scoring *sc, size_t first, size_t n) {
  for (size_t k = first; k < first + n; k++) {
    if (sc->lnl) sc->lnl[k] = NAN;
    if (sc->site_lnl)
      for (size_t s = 0; s < sc->sites; s++)
        sc->site_lnl[k * sc->sites + s] = NAN;
  }
}

/* A scored batch into the caller's arrays and tree_cb; EMBER_ECANCELED
 * when the callback stopped it, *delivered the trees handed over. */
static int deliver(scoring *sc, size_t first, size_t n, size_t *delivered) {
  *delivered = n;
  for (size_t k = 0; k < n; k++) {
    const double *pat = sc->batch_site ? sc->batch_site + k * sc->patterns
                                       : NULL;
    double *row = NULL;
    if (pat) {
      row = sc->site_lnl ? sc->site_lnl + (first + k) * sc->sites
                         : sc->tree_sites;
      for (size_t s = 0; s < sc->sites; s++)
        row[s] = pat[sc->site_pattern[s]];
    }
    if (sc->lnl) sc->lnl[first + k] = sc->batch_lnl[k];
    if (sc->p->tree_cb &&
        sc->p->tree_cb(first + k, sc->batch_lnl[k], row, row ? sc->sites : 0,
                       sc->p->tree_user) != 0) {
      ember__client_set_error("stopped by the tree callback at tree %zu",
                              first + k);
      *delivered = k + 1;
      return EMBER_ECANCELED;
    }
  }
  return 0;
}

/* One instance: its state block and planner (run) on a thread of its own,
 * scoring the batches j = index, index + k, ... into its buffers, each
 * kept until the calling thread has delivered it. */
typedef struct instance {
  struct scorer *sc;
  unsigned index;
  pthread_t thread;
  lnl_run *run;
  int create_rc;               /* the run could not be made: its batches fail */
  double *batch_lnl, *batch_site;
  /* the batch in the buffers (-1: none) and how it went; under sc->lock */
  long ready;
  int ready_rc;
  char err[1024];
} instance;

/* What the instances share with the calling thread. */
typedef struct scorer {
  ember_client *client;
  const lnl_setup *setup;
  int vectors;
  plf_tree *const *trees;
  size_t total, batch, batches;
  unsigned k;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int go;                      /* the instances' threads all started */
  int stop;                    /* the tree callback stopped the call */
} scorer;

static void *instance_main(void *arg) {
  instance *in = arg;
  scorer *sc = in->sc;
  int fatal = 0, fatal_rc = 0;
  in->create_rc = ember__lnl_run_create(sc->client, sc->setup, sc->vectors,
                                        &in->run, in->err, sizeof in->err);
  pthread_mutex_lock(&sc->lock);
  while (!sc->go) pthread_cond_wait(&sc->cond, &sc->lock);  /* k is final */
  pthread_mutex_unlock(&sc->lock);
  for (size_t j = in->index; j < sc->batches; j += sc->k) {
    pthread_mutex_lock(&sc->lock);
    while (in->ready != -1 && !sc->stop)
      pthread_cond_wait(&sc->cond, &sc->lock);
    int stop = sc->stop;
    pthread_mutex_unlock(&sc->lock);
    if (stop) break;
    size_t first = j * sc->batch;
    size_t n = sc->total - first < sc->batch ? sc->total - first : sc->batch;
    char err[1024] = "";
    int rc = in->create_rc ? in->create_rc : fatal_rc;
    if (rc == 0) {
      rc = ember__lnl_run_batch(in->run, sc->trees + first, n, in->batch_lnl,
                                in->batch_site, &fatal, err, sizeof err);
      if (fatal) fatal_rc = rc;   /* the run cannot go on: the rest fail */
    }
    pthread_mutex_lock(&sc->lock);
    in->ready = (long)j;
    in->ready_rc = rc;
    if (err[0]) snprintf(in->err, sizeof in->err, "%s", err);
    pthread_cond_broadcast(&sc->cond);
    pthread_mutex_unlock(&sc->lock);
  }
  return NULL;
}

static void add_stats(ember_lnl_report *r, const lnl_run *run) {
  if (!run) return;
  lnl_stats st;
  ember__lnl_run_stats(run, &st);
  r->tasks += st.tasks;
  r->tasks_cpu += st.tasks_cpu;
  r->tasks_opencl += st.tasks_opencl;
  r->tasks_fpga_emu += st.tasks_fpga_emu;
  r->tasks_other += st.tasks_other;
  r->tasks_failed += st.tasks_failed;
  r->setups += st.setups;
  r->ops += st.ops;
  r->recomputed += st.recomputed;
  r->hits += st.hits;
  r->vectors = (size_t)st.vectors;
  r->state_bytes += st.state_bytes;
  r->exec_ns += st.exec_ns;
}

/* Deliver the batches in order as the instances finish them: results to
 * the caller's arrays and tree_cb, failures marked. Returns the first
 * error (with its message set). */
static int deliver_in_order(scorer *sc, instance *ins, scoring *out,
                            size_t *failed, ember_progress_cb progress,
                            void *user) {
  int first_rc = 0, rc = 0;
  char first_error[1024] = "";
  size_t done_trees = 0, given;
  for (size_t j = 0; j < sc->batches; j++) {
    instance *in = &ins[j % sc->k];
    size_t first = j * sc->batch;
    size_t n = sc->total - first < sc->batch ? sc->total - first : sc->batch;
    pthread_mutex_lock(&sc->lock);
    while (in->ready != (long)j) pthread_cond_wait(&sc->cond, &sc->lock);
    int brc = in->ready_rc;
    if (brc && !first_rc) {
      first_rc = brc;
      snprintf(first_error, sizeof first_error, "%s", in->err);
    }
    pthread_mutex_unlock(&sc->lock);
    if (brc) {
      mark_failed(out, first, n);
      *failed += n;
    } else {
      out->batch_lnl = in->batch_lnl;
      out->batch_site = in->batch_site;
      rc = deliver(out, first, n, &given);
    }
    pthread_mutex_lock(&sc->lock);
    if (rc) sc->stop = 1;
    else in->ready = -1;
    pthread_cond_broadcast(&sc->cond);
    pthread_mutex_unlock(&sc->lock);
    if (rc) {
      mark_failed(out, first + given, sc->total - first - given);
      *failed += sc->total - first - given;
      return rc;
    }
    done_trees += n;
    if (progress) progress(done_trees, sc->total, user);
  }
  if (first_rc) ember__client_set_error("%s", first_error);
  return first_rc;
}

/* The work of ember_lnl, on structs of this library's size. */
static int score(ember_client *client, const ember_lnl_params *p,
                 const ember_model *model, const ember_trees *trees,
                 double *lnl, double *site_lnl, ember_lnl_report *report,
                 ember_progress_cb progress, void *user) {
  const plf_alignment *aln = model->aln->aln;
  const plf_model *m = model->m;
  int want_sites = site_lnl != NULL || p->site_lnl;
  if (trees->n == 0) return 0;
  tips tp;
  if (make_tips(aln, &tp) != 0) {
    tips_free(&tp);
    ember__client_set_error("out of memory for the tips of %zu taxa",
                            plf_alignment_taxa(aln));
    return EMBER_ENOMEM;
  }
  lnl_setup s = {
      .taxa = (int)plf_alignment_taxa(aln),
      .states = plf_model_states(m),
      .patterns = (int)plf_alignment_patterns(aln),
      .categories = (int)plf_model_categories(m),
      .single = p->precision == EMBER_LNL_SINGLE,
      .threads = p->threads,
      .platform = p->platform,
      .tips = tp.data,
      .tips_size = tp.size,
      .tip_offset = tp.offset,
      .tip_partials = tp.partials,
      .evec = plf_model_eigenvectors(m),
      .ivec = plf_model_inverse_eigenvectors(m),
      .eval = plf_model_eigenvalues(m),
      .freqs = plf_model_freqs(m),
      .cat_rates = plf_model_category_rates(m),
      .cat_weights = plf_model_category_weights(m),
      .pattern_weights = plf_alignment_weights(aln)};
  scoring out = {.p = p, .sites = plf_alignment_sites(aln),
                 .patterns = (size_t)s.patterns,
                 .site_pattern = plf_alignment_site_patterns(aln),
                 .lnl = lnl, .site_lnl = site_lnl};
  scorer sc = {.client = client, .setup = &s, .trees = trees->trees,
               .total = (size_t)trees->n};
  instance *ins = NULL;
  unsigned n_ins = 0;
  size_t failed = 0;
  int ran = 0;   /* the instances ran: every tree has a value or NaN */
  int rc = choose_vectors(client, p, trees, &s, want_sites, &sc.vectors);
  if (rc) goto done;
  sc.batch = ember__lnl_run_batch_size(&s, want_sites);
  sc.k = p->instances ? p->instances : 1;
  /* several instances: batches small enough that each gets one */
  size_t share = (sc.total + sc.k - 1) / sc.k;
  if (sc.batch > share) sc.batch = share;
  sc.batches = (sc.total + sc.batch - 1) / sc.batch;
  if (sc.k > sc.batches) sc.k = (unsigned)sc.batches;
  ins = calloc(sc.k, sizeof *ins);
  n_ins = ins ? sc.k : 0;
  if (want_sites)
    out.tree_sites = malloc((out.sites ? out.sites : 1) * sizeof(double));
  if (!ins || (want_sites && !out.tree_sites)) goto oom;
  for (unsigned w = 0; w < sc.k; w++) {
    ins[w] = (instance){.sc = &sc, .index = w, .ready = -1};
    ins[w].batch_lnl = malloc(sc.batch * sizeof(double));
    if (want_sites)
      ins[w].batch_site = malloc(sc.batch * out.patterns * sizeof(double));
    if (!ins[w].batch_lnl || (want_sites && !ins[w].batch_site)) goto oom;
  }
  pthread_mutex_init(&sc.lock, NULL);
  pthread_cond_init(&sc.cond, NULL);
  unsigned started = 0;
  while (started < sc.k &&
         pthread_create(&ins[started].thread, NULL, instance_main,
                        &ins[started]) == 0)
    started++;
  pthread_mutex_lock(&sc.lock);
  sc.k = started;   /* the batches are dealt to the instances that started */
  sc.go = 1;
  pthread_cond_broadcast(&sc.cond);
  pthread_mutex_unlock(&sc.lock);
  ran = 1;
  if (started == 0) {
    ember__client_set_error("cannot start a thread for an instance");
    rc = EMBER_ENOMEM;
    mark_failed(&out, 0, sc.total);
    failed = sc.total;
  } else {
    rc = deliver_in_order(&sc, ins, &out, &failed, progress, user);
  }
  for (unsigned w = 0; w < started; w++) pthread_join(ins[w].thread, NULL);
  pthread_cond_destroy(&sc.cond);
  pthread_mutex_destroy(&sc.lock);
  if (report) {
    report->trees = sc.total - failed;
    report->trees_failed = failed;
    report->patterns = out.patterns;
    for (unsigned w = 0; w < sc.k; w++) add_stats(report, ins[w].run);
    report->vectors = (size_t)sc.vectors;
    report->instances = sc.k;
  }
  goto done;
oom:
  ember__client_set_error("out of memory");
  rc = EMBER_ENOMEM;
done:
  if (rc && !ran) {
    mark_failed(&out, 0, sc.total);
    if (report) report->trees_failed = sc.total;
  }
  for (unsigned w = 0; w < n_ins; w++) {
    free(ins[w].batch_lnl);
    free(ins[w].batch_site);
    ember__lnl_run_destroy(ins[w].run);
  }
  free(ins);
  free(out.tree_sites);
  tips_free(&tp);
  return rc;
}

int ember_lnl(ember_client *client, const ember_lnl_params *params,
              const ember_model *model, const ember_trees *trees, double *lnl,
              double *site_lnl, ember_lnl_report *report,
              ember_progress_cb progress, void *user) {
  ember_lnl_params p;
  if (params) {
    int rc = ember__struct_in(&p, sizeof p, params, EMBER__LNL_PARAMS_V0,
                              "ember_lnl_params");
    if (rc) return rc;
  } else {
    ember_lnl_params_default(&p);
  }
  uint64_t start = clock_now_ns();
  ember_lnl_report full = {.size = sizeof full};
  int rc = check_args(client, &p, model, trees);
  if (rc == 0) {
    full.patterns = plf_alignment_patterns(model->aln->aln);
    rc = score(client, &p, model, trees, lnl, site_lnl, &full, progress,
               user);
  }
  full.wall_ns = clock_now_ns() - start;
  if (report)
    ember__struct_out(report, &full, sizeof full, EMBER__LNL_REPORT_V0);
  return rc;
}
