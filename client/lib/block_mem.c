/* block_mem.c - a block's bytes: malloc'd, or a memfd (block_mem.h). */
#include "block_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "last_error.h"

#define ALL_SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

int ember__block_mem_malloc(ember_block *b, const void *init) {
  if (!(b->data = malloc(b->size))) return EMBER_ENOMEM;
  if (init) memcpy(b->data, init, b->size);
  return 0;
}

/* write() fills the memfd without setting up a mapping */
static int write_all(int fd, const uint8_t *p, size_t left) {
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    left -= (size_t)n;
  }
  return 0;
}

int ember__block_mem_memfd(ember_block *b, const void *init) {
  b->memfd = memfd_create("ember-block", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  int ok = b->memfd >= 0;
  if (ok && init) {
    ok = write_all(b->memfd, init, b->size) == 0;
  } else if (ok) {
    void *p = MAP_FAILED;
    if (ftruncate(b->memfd, (off_t)b->size) == 0)
      p = mmap(NULL, b->size, PROT_READ | PROT_WRITE, MAP_SHARED, b->memfd, 0);
    ok = p != MAP_FAILED;
    if (ok) {
      b->data = p;
      b->data_is_map = 1;
    }
  }
  if (!ok) {
    ember__client_set_error("block of %zu bytes: %s", b->size, strerror(errno));
    if (b->memfd >= 0) close(b->memfd);
    b->memfd = -1;
    return EMBER_ENOMEM;
  }
  return 0;
}

int ember__block_mem_add_memfd(ember_block *b) {
  int fd = memfd_create("ember-block", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0 || write_all(fd, b->data, b->size) != 0 ||
      fcntl(fd, F_ADD_SEALS, ALL_SEALS) != 0) {
    ember__client_set_error("block %llu as a memfd: %s",
                            (unsigned long long)b->id, strerror(errno));
    if (fd >= 0) close(fd);
    return EMBER_ENOMEM;
  }
  b->memfd = fd;
  return 0;
}

int ember__block_mem_seal(ember_block *b) {
  if (b->memfd < 0) return 0;
  /* a writable mapping would make the write seal fail: drop it first;
   * a read-only one is made again only if the CPU fallback needs it */
  if (b->data) munmap(b->data, b->size);
  b->data = NULL;
  b->data_is_map = 0;
  if (fcntl(b->memfd, F_ADD_SEALS, ALL_SEALS) != 0) {
    ember__client_set_error("sealing block %llu: %s", (unsigned long long)b->id,
                            strerror(errno));
    return EMBER_EIO;
  }
  return 0;
}

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

void ember__block_mem_free(ember_block *b) {
  if (b->data_is_map)
    munmap(b->data, b->size);
  else
    free(b->data);
  b->data = NULL;
  b->data_is_map = 0;
  if (b->memfd >= 0) close(b->memfd);
  b->memfd = -1;
}
