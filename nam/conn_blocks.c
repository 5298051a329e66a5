/*
 * conn_blocks.c - a client's out and state blocks (protocol 2): BlockOp
 * reads a block back, syncs a state block's host copy or restores it, on
 * the engine's block thread (a device read may block); the answer comes
 * back to the loop like a task's result and goes out as a BlockReply.
 */
#include "server_internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "ember/ember_errors.h"
#include "log.h"

/* Engine block thread: hand the answer to the loop. */
static void on_engine_op(const nam_block_op_result *r, void *user) {
  conn_block_op *op = user;
  nam_server *s = op->conn->srv;
  op->result = *r;
  pthread_mutex_lock(&s->done_lock);
  op->done_next = NULL;
  if (s->ops_tail) s->ops_tail->done_next = op; else s->ops_head = op;
  s->ops_tail = op;
  pthread_mutex_unlock(&s->done_lock);
  uv_async_send(&s->done_async);
}

static const int op_of_wire[] = {
  [EMBER__BLOCK_OP__OP__READ] = NAM_BLOCK_READ,
  [EMBER__BLOCK_OP__OP__SYNC] = NAM_BLOCK_SYNC,
  [EMBER__BLOCK_OP__OP__RESTORE] = NAM_BLOCK_RESTORE,
};

/* The client waits for the BlockReply of its request_id: an Error frame
 * would leave its read, sync or restore waiting forever. */
static void reply_error(nam_conn *c, uint64_t request_id, uint64_t block_id,
                        int code, const char *why) {
  char text[200];
  snprintf(text, sizeof text, "block %llu: %s", (unsigned long long)block_id,
           why);
  Ember__BlockReply rep = EMBER__BLOCK_REPLY__INIT;
  rep.request_id = request_id;
  rep.status = code;
  rep.message = text;
  nam_conn_send(c, EMBER__MSG_TYPE__MSG_BLOCK_REPLY, &rep.base);
}

void nam_conn_block_op(nam_conn *c, const Ember__BlockOp *m) {
  if ((unsigned)m->op >= sizeof op_of_wire / sizeof op_of_wire[0]) {
    nam_conn_error(c, EMBER_EPROTO, 0, m->block_id, "unknown block op %d",
                   (int)m->op);
    return;
  }
  if (c->ops_pending >= c->srv->limits.max_inflight) {
    /* a client that floods block ops without taking replies is bounded */
    reply_error(c, m->request_id, m->block_id, EMBER_EBUSY,
                "too many block operations in flight (max_inflight)");
    return;
  }
  conn_block_op *op = calloc(1, sizeof *op);
  int rc = EMBER_ENOMEM;
  if (op) {
    op->conn = c;
    op->request_id = m->request_id;
    op->block_id = m->block_id;
    op->op = op_of_wire[m->op];
    rc = nam_engine_block_op(c->srv->engine, op->op, c->app, m->block_id,
                             on_engine_op, op);
  }
  if (rc) {
    free(op);
    reply_error(c, m->request_id, m->block_id, rc, ember_strerror(rc));
    return;
  }
  c->ops_pending++;
}

static const char *op_name(int op) {
  return op == NAM_BLOCK_READ ? "read" : op == NAM_BLOCK_SYNC ? "sync"
                                                              : "restore";
}

void nam_conn_block_op_done(conn_block_op *op) {
  nam_conn *c = op->conn;
  const nam_block_op_result *r = &op->result;
  c->ops_pending--;
  if (!c->closing) {
    Ember__BlockReply rep = EMBER__BLOCK_REPLY__INIT;
    char text[160];
    rep.request_id = op->request_id;
    rep.status = r->status;
    if (r->status) {
      snprintf(text, sizeof text, "block %llu: %s: %s",
               (unsigned long long)op->block_id, op_name(op->op),
               r->status == EMBER_ESTATE
                   ? "its state was lost (its platform failed or a task on "
                     "it did); restore it from its synced copy"
                   : ember_strerror(r->status));
      rep.message = text;
      log_debug("client %s: %s", c->peer, text);
    } else if (r->bytes && r->size > c->srv->limits.max_frame - 4096) {
      /* the reply would not fit a frame: say so in the reply itself */
      rep.status = EMBER_ETOOBIG;
      snprintf(text, sizeof text, "block %llu: %zu bytes do not fit a frame "
               "(max_frame %zu)", (unsigned long long)op->block_id, r->size,
               c->srv->limits.max_frame);
      rep.message = text;
    } else {
      rep.has_size = rep.has_version = 1;
      rep.size = r->size;
      rep.version = r->version;
      if (r->bytes) {
        rep.has_data = 1;
        rep.data.data = r->bytes;
        rep.data.len = r->size;
      }
    }
    nam_conn_send(c, EMBER__MSG_TYPE__MSG_BLOCK_REPLY, &rep.base);
  }
  free(r->bytes);
  free(op);
  nam_conn_maybe_free(c);
}
