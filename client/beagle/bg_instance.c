/* bg_instance.c - instances: the table, the state block, and the queue of
 * plf operations sent as one task when an answer is needed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bg_internal.h"

/* Send the queue once it packs to about this much (the NAM takes frames
 * up to 64 MiB), and hand payloads this large as input blocks instead of
 * inline bytes. */
#define BG_FLUSH_BYTES (16u << 20)
#define BG_INPUT_BYTES (1u << 20)
#define BG_MAX_QUEUED_OPS (1u << 20)

struct bg_chunk {
  bg_chunk *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
};

/* ---- the table ------------------------------------------------------------ */

static pthread_mutex_t g_table_lock = PTHREAD_MUTEX_INITIALIZER;
static bg_instance **g_table;
static int g_table_len;

bg_instance *bg_get(int id) {
  pthread_mutex_lock(&g_table_lock);
  bg_instance *in = id >= 0 && id < g_table_len ? g_table[id] : NULL;
  if (in) pthread_mutex_lock(&in->lock);
  pthread_mutex_unlock(&g_table_lock);
  return in;
}

void bg_put(bg_instance *in) { pthread_mutex_unlock(&in->lock); }

static int table_add(bg_instance *in) {
  pthread_mutex_lock(&g_table_lock);
  int id = -1;
  for (int i = 0; i < g_table_len; i++)
    if (!g_table[i]) {
      id = i;
      break;
    }
  if (id < 0) {
    bg_instance **t = realloc(g_table, (size_t)(g_table_len + 8) * sizeof *t);
    if (t) {
      memset(t + g_table_len, 0, 8 * sizeof *t);
      g_table = t;
      id = g_table_len;
      g_table_len += 8;
    }
  }
  if (id >= 0) {
    in->id = id;
    g_table[id] = in;
  }
  pthread_mutex_unlock(&g_table_lock);
  return id;
}

static bg_instance *table_take(int id) {
  pthread_mutex_lock(&g_table_lock);
  bg_instance *in = id >= 0 && id < g_table_len ? g_table[id] : NULL;
  if (in) g_table[id] = NULL;
  pthread_mutex_unlock(&g_table_lock);
  return in;
}

/* ---- the queue ------------------------------------------------------------ */

void *bg_alloc(bg_instance *in, size_t size) {
  size = (size + 15) & ~(size_t)15;
  bg_chunk *c = in->arena;
  if (!c || c->cap - c->used < size) {
    size_t cap = size > (64u << 10) ? size : (64u << 10);
    c = malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->next = in->arena;
    c->used = 0;
    c->cap = cap;
    in->arena = c;
  }
  void *p = c->data + c->used;
  c->used += size;
  memset(p, 0, size);
  return p;
}

void *bg_copy(bg_instance *in, const void *src, size_t size) {
  void *p = bg_alloc(in, size ? size : 1);
  if (p && size) memcpy(p, src, size);
  return p;
}

static void queue_clear(bg_instance *in) {
  while (in->arena) {
    bg_chunk *next = in->arena->next;
    free(in->arena);
    in->arena = next;
  }
  in->n_ops = 0;
  in->pending_bytes = 0;
  for (size_t i = 0; i < in->n_inputs; i++) ember_block_release(in->inputs[i]);
  in->n_inputs = 0;
}

Ember__Plf__Op *bg_push(bg_instance *in, size_t extra_bytes) {
  if (in->n_ops == in->cap_ops) {
    size_t cap = in->cap_ops ? 2 * in->cap_ops : 64;
    Ember__Plf__Op **ops = realloc(in->ops, cap * sizeof *ops);
    if (!ops) return NULL;
    in->ops = ops;
    in->cap_ops = cap;
  }
  Ember__Plf__Op *op = bg_alloc(in, sizeof *op);
  if (!op) return NULL;
  ember__plf__op__init(op);
  in->ops[in->n_ops++] = op;
  in->pending_bytes += 16 + extra_bytes;
  return op;
}

int bg_input(bg_instance *in, const void *data, size_t size,
             Ember__Plf__InputSlice **slice) {
  int rc;
  if (in->n_inputs == BG_MAX_INPUTS && (rc = bg_flush(in, NULL))) return rc;
  ember_client *c = bg_client();
  if (!c) return BEAGLE_ERROR_NO_RESOURCE;
  ember_block *b;
  rc = ember_block_create(c, data, size, 0, &b);
  if (rc) {
    bg_warn("an input block of %zu bytes: %s", size, ember_strerror(rc));
    return bg_ember_error(rc);
  }
  Ember__Plf__InputSlice *s = bg_alloc(in, sizeof *s);
  if (!s) {
    ember_block_release(b);
    return BEAGLE_ERROR_OUT_OF_MEMORY;
  }
  ember__plf__input_slice__init(s);
  s->input = (uint32_t)in->n_inputs;
  s->offset = 0;
  in->inputs[in->n_inputs++] = b;
  *slice = s;
  return BEAGLE_SUCCESS;
}

int bg_flush(bg_instance *in, Ember__Plf__Result **result) {
  if (result) *result = NULL;
  if (in->n_ops == 0) return BEAGLE_SUCCESS;
  ember_client *c = bg_client();
  if (!c) {
    queue_clear(in);
    return BEAGLE_ERROR_NO_RESOURCE;
  }
  Ember__Plf__Params p = EMBER__PLF__PARAMS__INIT;
  p.instance = &in->pinst;
  p.n_ops = in->n_ops;
  p.ops = in->ops;
  if (in->threads) {
    p.has_threads = 1;
    p.threads = in->threads;
  }
  size_t len = ember__plf__params__get_packed_size(&p);
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf) {
    queue_clear(in);
    return BEAGLE_ERROR_OUT_OF_MEMORY;
  }
  ember__plf__params__pack(&p, buf);
  ember_submit_options o = {.size = sizeof o,
                            .platform = in->kind,
                            .states = &in->block,
                            .n_states = 1};
  ember_task *t = NULL;
  int rc = ember_run(c, "plf", buf, len, in->inputs, in->n_inputs, &o, &t);
  free(buf);
  queue_clear(in);
  if (rc == 0) rc = ember_task_status(t);
  if (rc) {
    bg_warn("instance %d: a plf task failed: %s (%s)", in->id,
            ember_strerror(rc),
            t ? ember_task_message(t) : ember_last_error());
    ember_task_free(t);
    return bg_ember_error(rc);
  }
  if (result) {
    size_t n = 0;
    const void *out = ember_task_output(t, &n);
    *result = ember__plf__result__unpack(NULL, n, out);
    if (!*result) {
      bg_warn("instance %d: the plf result does not unpack", in->id);
      ember_task_free(t);
      return BEAGLE_ERROR_GENERAL;
    }
  }
  ember_task_free(t);
  return BEAGLE_SUCCESS;
}

int bg_maybe_flush(bg_instance *in) {
  if (in->pending_bytes < BG_FLUSH_BYTES && in->n_ops < BG_MAX_QUEUED_OPS)
    return BEAGLE_SUCCESS;
  return bg_flush(in, NULL);
}

/* ---- instances ------------------------------------------------------------ */

static void instance_free(bg_instance *in) {
  if (!in) return;
  queue_clear(in);
  free(in->ops);
  ember_block_release(in->block);
  free(in->pattern_weights);
  free(in->scale_raw);
  free(in->site_cache);
  free(in->site_first);
  free(in->site_second);
  pthread_mutex_destroy(&in->lock);
  free(in);
}

int bg_instance_create(const plf_shape *shape, int tips, int buffers,
                       int resource, const char *kind, long flags,
                       int log_scalers, int inv_transposed, unsigned threads,
                       bg_instance **out, char *err, size_t err_len) {
  bg_instance *in = calloc(1, sizeof *in);
  if (!in) return BEAGLE_ERROR_OUT_OF_MEMORY;
  pthread_mutex_init(&in->lock, NULL);
  in->shape = *shape;
  if (plf_layout_compute(shape, &in->layout, err, err_len)) {
    instance_free(in);
    return BEAGLE_ERROR_OUT_OF_RANGE;
  }
  if (in->layout.total > SIZE_MAX) {
    instance_free(in);
    return BEAGLE_ERROR_OUT_OF_MEMORY;
  }
  in->tips = tips;
  in->buffers = buffers;
  in->states = (int)shape->states;
  in->patterns = (int)shape->patterns;
  in->categories = (int)shape->categories;
  in->eigens = (int)shape->eigens;
  in->matrices = (int)shape->matrices;
  in->scale_buffers = (int)shape->scale_buffers;
  in->partitions_max = (int)shape->partitions;
  in->single = shape->single;
  in->log_scalers = log_scalers;
  in->inv_transposed = inv_transposed;
  in->flags = flags;
  in->auto_scale =
      (flags & (BEAGLE_FLAG_SCALING_ALWAYS | BEAGLE_FLAG_SCALING_AUTO)) != 0;
  in->threads = threads;
  in->resource = resource;
  in->kind = kind;

  Ember__Plf__Instance *pi = &in->pinst;
  ember__plf__instance__init(pi);
  pi->states = shape->states;
  pi->patterns = shape->patterns;
  pi->has_categories = 1;
  pi->categories = shape->categories;
  pi->tips = shape->tips;
  pi->partials = shape->partials;
  pi->has_compact = 1;
  pi->compact = shape->compact;
  pi->has_eigens = 1;
  pi->eigens = shape->eigens;
  pi->matrices = shape->matrices;
  pi->has_scale_buffers = 1;
  pi->scale_buffers = shape->scale_buffers;
  pi->has_category_rate_sets = 1;
  pi->category_rate_sets = shape->rate_sets;
  pi->has_partitions = 1;
  pi->partitions = shape->partitions;
  pi->has_precision = 1;
  pi->precision = shape->single ? EMBER__PLF__PRECISION__SINGLE
                                : EMBER__PLF__PRECISION__DOUBLE;

  in->pattern_weights = malloc((size_t)in->patterns * sizeof(double));
  in->scale_raw = calloc((size_t)in->scale_buffers + 1, 1);
  in->site_cache = malloc((size_t)in->patterns * sizeof(double));
  in->site_first = malloc((size_t)in->patterns * sizeof(double));
  in->site_second = malloc((size_t)in->patterns * sizeof(double));
  if (!in->pattern_weights || !in->scale_raw || !in->site_cache ||
      !in->site_first || !in->site_second) {
    instance_free(in);
    return BEAGLE_ERROR_OUT_OF_MEMORY;
  }
  for (int p = 0; p < in->patterns; p++) in->pattern_weights[p] = 1;

  ember_client *c = bg_client();
  if (!c) {
    snprintf(err, err_len, "no connection to ember (see the line above)");
    instance_free(in);
    return BEAGLE_ERROR_NO_RESOURCE;
  }
  /* the instance: a zeroed state block of the layout's size */
  size_t size = (size_t)in->layout.total;
  void *data;
  int rc = ember_block_alloc(c, size, EMBER_BLOCK_STATE, &data, &in->block);
  if (rc == 0) {
    memset(data, 0, size);
    rc = ember_block_seal(in->block);
  }
  if (rc) {
    snprintf(err, err_len, "a state block of %zu bytes: %s (%s)", size,
             ember_strerror(rc), ember_last_error());
    instance_free(in);
    return bg_ember_error(rc);
  }
  if (table_add(in) < 0) {
    instance_free(in);
    return BEAGLE_ERROR_OUT_OF_MEMORY;
  }
  *out = in;
  return BEAGLE_SUCCESS;
}

int bg_instance_finalize(int id) {
  bg_instance *in = table_take(id);
  if (!in) return BEAGLE_ERROR_UNINITIALIZED_INSTANCE;
  /* wait for a call still running on it */
  pthread_mutex_lock(&in->lock);
  pthread_mutex_unlock(&in->lock);
  instance_free(in);
  return BEAGLE_SUCCESS;
}

int bg_finalize_all(void) {
  pthread_mutex_lock(&g_table_lock);
  int n = g_table_len;
  pthread_mutex_unlock(&g_table_lock);
  for (int i = 0; i < n; i++) bg_instance_finalize(i);
  pthread_mutex_lock(&g_table_lock);
  free(g_table);
  g_table = NULL;
  g_table_len = 0;
  pthread_mutex_unlock(&g_table_lock);
  return BEAGLE_SUCCESS;
}
