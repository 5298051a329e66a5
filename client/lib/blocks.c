/*
 * blocks.c - a client's blocks. Over a unix socket a block is a memfd: the
 * application writes it once, it is sealed (write, grow, shrink, seal) and
 * its fd goes to the NAM, which maps it: the bytes are never copied again.
 * Over TCP and in embedded mode a block is plain memory; in embedded mode
 * it goes into the in-process engine's block cache when sealed. Out and
 * state blocks are read back, synced and restored where they live.
 */
#include "client_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "block_cache.h"

#define ALL_SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

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

static int check_size(size_t size) {
  if (size == 0) {
    ember__client_set_error("a block cannot be empty");
    return EMBER_EINVAL;
  }
  return 0;
}

int ember_block_alloc(ember_client *c, size_t size, unsigned flags, void **data,
                      ember_block **out) {
  *out = NULL;
  int rc = check_size(size);
  if (rc) return rc;
  ember_block *b = block_new(c, size, flags);
  if (!b) return EMBER_ENOMEM;
  if (c->mode == MODE_UNIX) {
    b->memfd = memfd_create("ember-block", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    void *p = MAP_FAILED;
    if (b->memfd >= 0 && ftruncate(b->memfd, (off_t)size) == 0)
      p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, b->memfd, 0);
    if (p == MAP_FAILED) {
      ember__client_set_error("block of %zu bytes: %s", size, strerror(errno));
      if (b->memfd >= 0) close(b->memfd);
      free(b);
      return EMBER_ENOMEM;
    }
    b->data = p;
    b->data_is_map = 1;
  } else if (!(b->data = malloc(size))) {
    free(b);
    return EMBER_ENOMEM;
  }
  *data = b->data;
  *out = b;
  return 0;
}

int ember_block_seal(ember_block *b) {
  if (b->sealed) return 0;
  if (b->client->mode == MODE_EMBEDDED) {
    int rc = ember__block_put_engine(b);
    if (rc) return rc;
  }
  if (b->memfd >= 0) {
    /* a writable mapping would make the write seal fail: drop it first;
     * a read-only one is made again only if the CPU fallback needs it */
    munmap(b->data, b->size);
    b->data = NULL;
    b->data_is_map = 0;
    if (fcntl(b->memfd, F_ADD_SEALS, ALL_SEALS) != 0) {
      ember__client_set_error("sealing block %llu: %s", (unsigned long long)b->id,
                       strerror(errno));
      return EMBER_EIO;
    }
  }
  b->sealed = 1;
  return 0;
}

int ember_block_create(ember_client *c, const void *data, size_t size,
                       unsigned flags, ember_block **out) {
  *out = NULL;
  int rc = check_size(size);
  if (rc) return rc;
  if (c->mode != MODE_UNIX) {
    void *dst;
    rc = ember_block_alloc(c, size, flags, &dst, out);
    if (rc) return rc;
    memcpy(dst, data, size);
    return ember_block_seal(*out);
  }
  /* write() fills the memfd without setting up a mapping */
  ember_block *b = block_new(c, size, flags);
  if (!b) return EMBER_ENOMEM;
  b->memfd = memfd_create("ember-block", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  const uint8_t *p = data;
  size_t left = size;
  while (b->memfd >= 0 && left > 0) {
    ssize_t n = write(b->memfd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    p += n;
    left -= (size_t)n;
  }
  if (b->memfd < 0 || left > 0) {
    ember__client_set_error("block of %zu bytes: %s", size, strerror(errno));
    if (b->memfd >= 0) close(b->memfd);
    free(b);
    return EMBER_ENOMEM;
  }
  rc = ember_block_seal(b);
  if (rc) {
    close(b->memfd);
    free(b);
    return rc;
  }
  *out = b;
  return 0;
}

size_t ember_block_size(const ember_block *b) { return b->size; }

const uint8_t *ember__block_bytes(ember_block *b) {
  ember_client *c = b->client;
  pthread_mutex_lock(&c->lock);
  if (!b->data && b->memfd >= 0) {
    void *p = mmap(NULL, b->size, PROT_READ, MAP_SHARED, b->memfd, 0);
    if (p != MAP_FAILED) {
      b->data = p;
      b->data_is_map = 1;
    }
  }
  const uint8_t *data = b->data;
  pthread_mutex_unlock(&c->lock);
  return data;
}

void ember__block_ref(ember_block *b) {
  pthread_mutex_lock(&b->client->lock);
  b->refs++;
  pthread_mutex_unlock(&b->client->lock);
}

void ember__block_unref(ember_block *b) {
  ember_client *c = b->client;
  pthread_mutex_lock(&c->lock);
  int left = --b->refs;
  int tell_nam = left == 0 && b->put_gen && b->put_gen == c->gen && c->fd >= 0;
  pthread_mutex_unlock(&c->lock);
  if (left > 0) return;
  if (tell_nam) {
    Ember__ReleaseBlock m = EMBER__RELEASE_BLOCK__INIT;
    m.block_id = b->id;
    ember__remote_send_msg(c, EMBER__MSG_TYPE__MSG_RELEASE_BLOCK, &m.base);
  }
  if (b->in_engine) {
    /* the cache owns the bytes: it frees them once no task uses them */
    nam_engine *engine = NULL;
    if (ember__client_engine(c, &engine) == 0)
      nam_block_cache_drop(nam_engine_block_cache(engine), CLIENT_EMBEDDED_APP,
                           b->id);
  } else if (b->data_is_map) {
    munmap(b->data, b->size);
  } else {
    free(b->data);
  }
  if (b->memfd >= 0) close(b->memfd);
  free(b);
}

/* ---- embedded mode: blocks live in the engine's cache ------------------ */

static void free_cached_bytes(void *user, const void *data, size_t size) {
  (void)user, (void)size;
  free((void *)(uintptr_t)data);
}

int ember__block_put_engine(ember_block *b) {
  nam_engine *engine;
  int rc = ember__client_engine(b->client, &engine);
  if (rc) return rc;
  unsigned flags = b->flags & (EMBER_BLOCK_CACHE | EMBER_BLOCK_BROADCAST |
                               EMBER_BLOCK_STATE);
  rc = nam_block_cache_put(nam_engine_block_cache(engine), CLIENT_EMBEDDED_APP,
                           b->id, flags, b->data, b->size, free_cached_bytes,
                           NULL);
  if (rc == 0) b->in_engine = 1;
  return rc;
}

ember_block *ember__block_new_output(ember_client *c) {
  ember_block *b = block_new(c, 0, 0);
  if (!b) return NULL;
  b->is_output = 1;
  b->sealed = 1;
  b->in_engine = c->mode == MODE_EMBEDDED;
  return b;
}

/* ---- reading, syncing, restoring ----------------------------------------- */

typedef struct block_op {
  struct block_op *next;
  uint64_t id;
  ember_block *block;
  ember_block_read_cb cb;
  void *user;
} block_op;

static void op_done(block_op *op, int status, const void *data, size_t size,
                    uint64_t version) {
  op->cb(op->block, status, data, size, version, op->user);
  ember__block_unref(op->block);
  free(op);
}

static void on_engine_op(const nam_block_op_result *r, void *user) {
  op_done(user, r->status, r->bytes, r->size, r->version);
  free(r->bytes);
}

static const Ember__BlockOp__Op wire_op[] = {
  [NAM_BLOCK_READ] = EMBER__BLOCK_OP__OP__READ,
  [NAM_BLOCK_SYNC] = EMBER__BLOCK_OP__OP__SYNC,
  [NAM_BLOCK_RESTORE] = EMBER__BLOCK_OP__OP__RESTORE,
};

/* Start op on b: on the embedded engine, or as a BlockOp to the NAM. */
static int block_op_start(ember_block *b, int op, ember_block_read_cb cb,
                          void *user) {
  ember_client *c = b->client;
  int is_state = (b->flags & EMBER_BLOCK_STATE) != 0;
  if (op != NAM_BLOCK_READ && !is_state) {
    ember__client_set_error("block %llu is not a state block",
                     (unsigned long long)b->id);
    return EMBER_EINVAL;
  }
  if (op == NAM_BLOCK_READ && !is_state && !b->is_output) {
    const uint8_t *data = ember__block_bytes(b); /* an input: the bytes are here */
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
  if (c->mode == MODE_EMBEDDED) {
    nam_engine *engine;
    int rc = ember__client_engine(c, &engine);
    if (!rc)
      rc = nam_engine_block_op(engine, op, CLIENT_EMBEDDED_APP, b->id,
                               on_engine_op, o);
    if (rc) {
      ember__block_unref(b);
      free(o);
    }
    return rc;
  }
  pthread_mutex_lock(&c->lock);
  int here = b->put_gen && b->put_gen == c->gen && c->fd >= 0;
  if (here) {
    o->id = ++c->next_op_id;
    o->next = c->block_ops;
    c->block_ops = o;
  }
  pthread_mutex_unlock(&c->lock);
  if (!here) {
    ember__block_unref(b);
    free(o);
    ember__client_set_error("block %llu lived on a NAM connection that is gone",
                     (unsigned long long)b->id);
    return EMBER_ESTATE;
  }
  Ember__BlockOp m = EMBER__BLOCK_OP__INIT;
  m.request_id = o->id;
  m.block_id = b->id;
  m.op = wire_op[op];
  int rc = ember__remote_send_msg(c, EMBER__MSG_TYPE__MSG_BLOCK_OP, &m.base);
  /* a send that failed shut the socket down: the reader fails every op */
  (void)rc;
  return 0;
}

void ember__block_op_reply(ember_client *c, const Ember__BlockReply *r) {
  pthread_mutex_lock(&c->lock);
  block_op **pp = &c->block_ops, *o = NULL;
  while (*pp && (*pp)->id != r->request_id) pp = &(*pp)->next;
  if (*pp) {
    o = *pp;
    *pp = o->next;
  }
  pthread_mutex_unlock(&c->lock);
  if (!o) return; /* not ours: ignore */
  if (r->status == 0 && r->has_size && o->block->is_output)
    o->block->size = r->size;
  if (r->status) ember__client_set_error("%s", r->message ? r->message : "");
  op_done(o, r->status, r->has_data ? r->data.data : NULL,
          r->has_data ? r->data.len : (r->has_size ? r->size : 0),
          r->has_version ? r->version : 0);
}

void ember__block_ops_fail_all(ember_client *c, int why) {
  pthread_mutex_lock(&c->lock);
  block_op *list = c->block_ops;
  c->block_ops = NULL;
  pthread_mutex_unlock(&c->lock);
  while (list) {
    block_op *o = list;
    list = o->next;
    op_done(o, why, NULL, 0, 0);
  }
}

int ember_block_read_async(ember_block *b, ember_block_read_cb cb,
                           void *user) {
  if (!b || !cb) return EMBER_EINVAL;
  return block_op_start(b, NAM_BLOCK_READ, cb, user);
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

static int wait_op(ember_block *b, int op, op_wait *w) {
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
  int rc = wait_op(b, NAM_BLOCK_READ, &w);
  *data = rc == 0 ? w.data : NULL;
  *size = rc == 0 ? w.size : 0;
  if (version) *version = w.version;
  if (rc) free(w.data);
  return rc;
}

int ember_block_sync(ember_block *b, uint64_t *version) {
  if (!b) return EMBER_EINVAL;
  op_wait w = {0};
  int rc = wait_op(b, NAM_BLOCK_SYNC, &w);
  if (version) *version = w.version;
  return rc;
}

int ember_block_restore(ember_block *b, uint64_t *version) {
  if (!b) return EMBER_EINVAL;
  op_wait w = {0};
  int rc = wait_op(b, NAM_BLOCK_RESTORE, &w);
  if (version) *version = w.version;
  return rc;
}

void ember_block_release(ember_block *b) {
  if (b) ember__block_unref(b);
}

int ember__block_append_put(ember_block *b, proto_wbuf *w, int *fd_out) {
  Ember__PutBlock m = EMBER__PUT_BLOCK__INIT;
  m.block_id = b->id;
  m.size = b->size;
  if (b->flags) {
    m.has_flags = 1;
    m.flags = b->flags;
  }
  *fd_out = -1;
  if (b->memfd >= 0) {
    m.has_transport = 1;
    m.transport = EMBER__PUT_BLOCK__TRANSPORT__FD;
    *fd_out = b->memfd;
  } else {
    const uint8_t *data = ember__block_bytes(b);
    m.has_data = 1;
    m.data.data = (uint8_t *)data;
    m.data.len = b->size;
  }
  return proto_wbuf_append(w, EMBER__MSG_TYPE__MSG_PUT_BLOCK, &m.base,
                           b->client->max_frame);
}
