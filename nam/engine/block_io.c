/*
 * block_io.c - reading, syncing and restoring blocks for their apps, on a
 * thread of the engine's own: a read may wait for a task that holds a
 * state, or for a device transfer, and the callers (ember-nam's event
 * loop, libember) must not block on either. The thread starts with the
 * first request and works through them in order.
 */
#include "engine_internal.h"

#include <stdlib.h>

#include "ember/ember_errors.h"

typedef struct block_request {
  struct block_request *next;
  int op;
  uint64_t app, id;
  nam_block_op_fn done;
  void *user;
} block_request;

struct nam_block_io {
  pthread_t thread;
  int started, stopping;
  pthread_cond_t wake;
  block_request *head, *tail;   /* under the engine lock */
};

static void serve(nam_engine *e, const block_request *r) {
  nam_block_op_result res = {0};
  switch (r->op) {
  case NAM_BLOCK_READ:
  case NAM_BLOCK_SYNC:
    res.status = nam_block_cache_read(e->cache, r->app, r->id,
                                      r->op == NAM_BLOCK_SYNC,
                                      r->op == NAM_BLOCK_READ ? &res.bytes
                                                              : NULL,
                                      &res.size, &res.version);
    break;
  case NAM_BLOCK_RESTORE:
    res.status = nam_block_cache_restore(e->cache, r->app, r->id,
                                         &res.version);
    break;
  default:
    res.status = EMBER_EINVAL;
  }
  r->done(&res, r->user);
}

static void *block_thread(void *arg) {
  nam_engine *e = arg;
  pthread_mutex_lock(&e->lock); /* the creator sets block_io under it */
  nam_block_io *io = e->block_io;
  for (;;) {
    while (!io->head && !io->stopping) pthread_cond_wait(&io->wake, &e->lock);
    block_request *r = io->head;
    if (!r) break; /* stopping, and nothing left */
    io->head = r->next;
    if (!io->head) io->tail = NULL;
    pthread_mutex_unlock(&e->lock);
    serve(e, r);
    free(r);
    pthread_mutex_lock(&e->lock);
  }
  pthread_mutex_unlock(&e->lock);
  return NULL;
}

int nam_engine_block_op(nam_engine *e, int op, uint64_t app, uint64_t id,
                        nam_block_op_fn done, void *user) {
  block_request *r = calloc(1, sizeof *r);
  if (!r) return EMBER_ENOMEM;
  *r = (block_request){NULL, op, app, id, done, user};
  pthread_mutex_lock(&e->lock);
  int rc = e->stopping ? EMBER_ESHUTDOWN : 0;
  nam_block_io *io = e->block_io;
  if (!rc && !io) {
    io = calloc(1, sizeof *io);
    if (!io) {
      rc = EMBER_ENOMEM;
    } else {
      pthread_cond_init(&io->wake, NULL);
      if (pthread_create(&io->thread, NULL, block_thread, e) != 0) {
        pthread_cond_destroy(&io->wake);
        free(io);
        io = NULL;
        rc = EMBER_ENOMEM;
      } else {
        io->started = 1;
        e->block_io = io;
      }
    }
  }
  if (!rc) {
    if (io->tail) io->tail->next = r; else io->head = r;
    io->tail = r;
    pthread_cond_signal(&io->wake);
  }
  pthread_mutex_unlock(&e->lock);
  if (rc) free(r);
  return rc;
}

void nam_block_io_stop(nam_engine *e) {
  pthread_mutex_lock(&e->lock);
  nam_block_io *io = e->block_io;
  if (io) {
    io->stopping = 1;
    pthread_cond_signal(&io->wake);
  }
  pthread_mutex_unlock(&e->lock);
  if (!io) return;
  pthread_join(io->thread, NULL); /* it serves what was queued, then ends */
  pthread_cond_destroy(&io->wake);
  free(io);
  e->block_io = NULL;
}
