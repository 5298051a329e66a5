/*
 * blocks.c - the block API: a client's blocks, their references, and
 * reading, syncing and restoring out and state blocks. Where the bytes live
 * is the back end's business (backend.h): a memfd the NAM maps over a unix
 * socket, plain memory over TCP, the engine's block cache in embedded mode.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "block_mem.h"
#include "blocks.h"
#include "last_error.h"

static ember_block *block_new(ember_client *c, size_t size, unsigned flags) {
  ember_block *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  b->client = c;
  b->size = size;
  b->flags = flags;
  b->refs = 1;
  b->memfd = -1;
  pthread_mutex_lock(&c->lock);
  b->id = c->next_block_id++;
  pthread_mutex_unlock(&c->lock);
  return b;
}

/* A new block of size bytes (a copy of init unless NULL), or an error. */
static int block_make(ember_client *c, size_t size, unsigned flags,
                      const void *init, ember_block **out) {
  *out = NULL;
  if (size == 0) {
    ember__client_set_error("a block cannot be empty");
    return EMBER_EINVAL;
  }
  ember_block *b = block_new(c, size, flags);
  if (!b) return EMBER_ENOMEM;
  int rc = c->backend->alloc_block(b, init);
  if (rc) {
    free(b);
    return rc;
  }
  *out = b;
  return 0;
}

int ember_block_alloc(ember_client *c, size_t size, unsigned flags, void **data,
                      ember_block **out) {
  int rc = block_make(c, size, flags, NULL, out);
  if (rc == 0) *data = (*out)->data;
  return rc;
}

int ember_block_seal(ember_block *b) {
  if (b->sealed) return 0;
  int rc = b->client->backend->seal_block(b);
  if (rc == 0) b->sealed = 1;
  return rc;
}

int ember_block_create(ember_client *c, const void *data, size_t size,
                       unsigned flags, ember_block **out) {
  int rc = block_make(c, size, flags, data, out);
  if (rc == 0 && (rc = ember_block_seal(*out)) != 0) {
    ember__block_mem_free(*out);
    free(*out);
    *out = NULL;
  }
  return rc;
}

size_t ember_block_size(const ember_block *b) { return b->size; }

void ember__block_ref(ember_block *b) {
  pthread_mutex_lock(&b->client->lock);
  b->refs++;
  pthread_mutex_unlock(&b->client->lock);
}

void ember__block_unref(ember_block *b) {
  ember_client *c = b->client;
  pthread_mutex_lock(&c->lock);
  int left = --b->refs;
  pthread_mutex_unlock(&c->lock);
  if (left > 0) return;
  c->backend->release_block(b);
  ember__block_mem_free(b);
  free(b);
}

ember_block *ember__block_new_output(ember_client *c) {
  ember_block *b = block_new(c, 0, 0);
  if (!b) return NULL;
  b->is_output = 1;
  b->sealed = 1;
  return b;
}

/* ---- reading, syncing, restoring ----------------------------------------- */

typedef struct block_op {
  ember_block *block;
  ember_block_read_cb cb;
  void *user;
} block_op;

static void op_done(void *user, int status, const void *data, size_t size,
                    uint64_t version) {
  block_op *op = user;
  op->cb(op->block, status, data, size, version, op->user);
  ember__block_unref(op->block);
  free(op);
}

/* Start op on b: an input's bytes are here, the rest is the back end's. */
static int block_op_start(ember_block *b, enum ember__block_op op,
                          ember_block_read_cb cb, void *user) {
  int is_state = (b->flags & EMBER_BLOCK_STATE) != 0;
  if (op != EMBER__BLOCK_READ && !is_state) {
    ember__client_set_error("block %llu is not a state block",
                            (unsigned long long)b->id);
    return EMBER_EINVAL;
  }
  if (op == EMBER__BLOCK_READ && !is_state && !b->is_output) {
    const uint8_t *data = ember__block_bytes(b);
    if (!data) return EMBER_ENOMEM;
    cb(b, 0, data, b->size, 0, user);
    return 0;
  }
  block_op *o = calloc(1, sizeof *o);
  if (!o) return EMBER_ENOMEM;
  o->block = b;
  o->cb = cb;
  o->user = user;
  ember__block_ref(b);
  int rc = b->client->backend->block_op(b, op, op_done, o);
  if (rc) {
    ember__block_unref(b);
    free(o);
  }
  return rc;
}

int ember_block_read_async(ember_block *b, ember_block_read_cb cb,
                           void *user) {
  if (!b || !cb) return EMBER_EINVAL;
  return block_op_start(b, EMBER__BLOCK_READ, cb, user);
}

/* The blocking forms wait for their callback. */
typedef struct op_wait {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, status;
  void *data;
  size_t size;
  uint64_t version;
  int want_data;
} op_wait;

static void on_wait(ember_block *b, int status, const void *data, size_t size,
                    uint64_t version, void *user) {
  (void)b;
  op_wait *w = user;
  pthread_mutex_lock(&w->mu);
  w->status = status;
  w->size = size;
  w->version = version;
  if (status == 0 && w->want_data) {
    w->data = malloc(size ? size : 1);
    if (!w->data)
      w->status = EMBER_ENOMEM;
    else if (size)
      memcpy(w->data, data, size);
  }
  w->done = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static int wait_op(ember_block *b, enum ember__block_op op, op_wait *w) {
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  int rc = block_op_start(b, op, on_wait, w);
  if (rc == 0) {
    pthread_mutex_lock(&w->mu);
    while (!w->done) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    rc = w->status;
  }
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  return rc;
}

int ember_block_read(ember_block *b, void **data, size_t *size,
                     uint64_t *version) {
  if (!b || !data || !size) return EMBER_EINVAL;
  op_wait w = {.want_data = 1};
  int rc = wait_op(b, EMBER__BLOCK_READ, &w);
  *data = rc == 0 ? w.data : NULL;
  *size = rc == 0 ? w.size : 0;
  if (version) *version = w.version;
  if (rc) free(w.data);
  return rc;
}

int ember_block_sync(ember_block *b, uint64_t *version) {
  if (!b) return EMBER_EINVAL;
  op_wait w = {0};
  int rc = wait_op(b, EMBER__BLOCK_SYNC, &w);
  if (version) *version = w.version;
  return rc;
}

int ember_block_restore(ember_block *b, uint64_t *version) {
  if (!b) return EMBER_EINVAL;
  op_wait w = {0};
  int rc = wait_op(b, EMBER__BLOCK_RESTORE, &w);
  if (version) *version = w.version;
  return rc;
}

void ember_block_release(ember_block *b) {
  if (b) ember__block_unref(b);
}
