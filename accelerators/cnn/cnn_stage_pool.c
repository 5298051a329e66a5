/* cnn_stage_pool.c - built cnn_cpu stages kept for reuse (cnn_stage_pool.h). */
#include "cnn_stage_pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct pooled {
  uint8_t *text;             /* NULL: a free entry */
  size_t len;
  uint32_t first, end, batch, channels;
  int outputs;
  uint64_t used;             /* when it was given back (a counter) */
  cnn_cpu_stage *stage;
} pooled;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pooled pool[CNN_STAGE_POOL_MAX];
static uint64_t clock_ticks;

static int same(const pooled *p, const uint8_t *text, size_t len,
                uint32_t first, uint32_t end, uint32_t batch,
                uint32_t channels, int outputs) {
  return p->text && p->len == len && p->first == first && p->end == end &&
         p->batch == batch && p->channels == channels &&
         p->outputs == outputs &&
         memcmp(p->text, text, len) == 0;
}

int cnn_stage_pool_take(const cnn_net *net, const uint8_t *text, size_t len,
                        uint32_t first, uint32_t end, uint32_t batch,
                        uint32_t channels, int outputs, cnn_cpu_stage **out,
                        char *err, size_t err_len) {
  outputs = outputs != 0;
  pthread_mutex_lock(&pool_lock);
  for (size_t i = 0; i < CNN_STAGE_POOL_MAX; i++)
    if (same(&pool[i], text, len, first, end, batch, channels, outputs)) {
      *out = pool[i].stage;
      free(pool[i].text);
      memset(&pool[i], 0, sizeof pool[i]);
      pthread_mutex_unlock(&pool_lock);
      cnn_cpu_stage_zero_grads(*out);
      return 0;
    }
  pthread_mutex_unlock(&pool_lock);
  if (channels && outputs)
    return cnn_cpu_ocp_slice_create(net, first, channels, batch, out, err,
                                    err_len);
  if (channels)
    return cnn_cpu_slice_create(net, first, channels, batch, out, err,
                                err_len);
  return cnn_cpu_stage_create(net, first, end, batch, out, err, err_len);
}

void cnn_stage_pool_give(const uint8_t *text, size_t len, uint32_t first,
                         uint32_t end, uint32_t batch, uint32_t channels,
                         int outputs, cnn_cpu_stage *stage) {
  if (!stage) return;
  uint8_t *copy = malloc(len ? len : 1);
  if (!copy) {
    cnn_cpu_stage_destroy(stage);
    return;
  }
  memcpy(copy, text, len);
  cnn_cpu_stage *evicted = NULL;
  uint8_t *evicted_text = NULL;
  pthread_mutex_lock(&pool_lock);
  size_t slot = 0;
  for (size_t i = 0; i < CNN_STAGE_POOL_MAX; i++) {
    if (!pool[i].text) {
      slot = i;
      break;
    }
    if (pool[i].used < pool[slot].used) slot = i;
  }
  evicted = pool[slot].stage;
  evicted_text = pool[slot].text;
  pool[slot] = (pooled){.text = copy, .len = len, .first = first,
                        .end = end, .batch = batch,
                        .channels = channels, .outputs = outputs != 0,
                        .used = ++clock_ticks,
                        .stage = stage};
  pthread_mutex_unlock(&pool_lock);
  cnn_cpu_stage_destroy(evicted);
  free(evicted_text);
}
