/*
 * blocks.c - input blocks. Over a unix socket a block is a memfd: the
 * application writes it once, it is sealed (write, grow, shrink, seal) and
 * its fd goes to the NAM, which maps it: the bytes are never copied again.
 * Over TCP and in embedded mode a block is plain memory.
 */
#include "client_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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
    client_set_error("a block cannot be empty");
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
      client_set_error("block of %zu bytes: %s", size, strerror(errno));
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
  if (b->memfd >= 0) {
    /* a writable mapping would make the write seal fail: drop it first;
     * a read-only one is made again only if the CPU fallback needs it */
    munmap(b->data, b->size);
    b->data = NULL;
    b->data_is_map = 0;
    if (fcntl(b->memfd, F_ADD_SEALS, ALL_SEALS) != 0) {
      client_set_error("sealing block %llu: %s", (unsigned long long)b->id,
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
    client_set_error("block of %zu bytes: %s", size, strerror(errno));
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

const uint8_t *block_bytes(ember_block *b) {
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

void block_ref(ember_block *b) {
  pthread_mutex_lock(&b->client->lock);
  b->refs++;
  pthread_mutex_unlock(&b->client->lock);
}

void block_unref(ember_block *b) {
  ember_client *c = b->client;
  pthread_mutex_lock(&c->lock);
  int left = --b->refs;
  int tell_nam = left == 0 && b->put_gen && b->put_gen == c->gen && c->fd >= 0;
  pthread_mutex_unlock(&c->lock);
  if (left > 0) return;
  if (tell_nam) {
    Ember__ReleaseBlock m = EMBER__RELEASE_BLOCK__INIT;
    m.block_id = b->id;
    remote_send_msg(c, EMBER__MSG_TYPE__MSG_RELEASE_BLOCK, &m.base);
  }
  if (b->data_is_map)
    munmap(b->data, b->size);
  else
    free(b->data);
  if (b->memfd >= 0) close(b->memfd);
  free(b);
}

void ember_block_release(ember_block *b) {
  if (b) block_unref(b);
}

int block_append_put(ember_block *b, proto_wbuf *w, int *fd_out) {
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
    const uint8_t *data = block_bytes(b);
    m.has_data = 1;
    m.data.data = (uint8_t *)data;
    m.data.len = b->size;
  }
  return proto_wbuf_append(w, EMBER__MSG_TYPE__MSG_PUT_BLOCK, &m.base,
                           b->client->max_frame);
}
