/*
 * cnn_stage_pool.h - built cnn_cpu stages kept for reuse. Building a
 * stage (oneDNN primitives, blocked memories) costs far more than running
 * a small batch through it, and every FORWARD and BACKWARD needs one; the
 * state block stays the truth (parameters are loaded from it every task),
 * so a stage is reusable by any task of the same shape (cnn_pool_key):
 * the same network text (compared byte for byte, not by hash), range,
 * batch and, for a slice's stage, its channel count and whether they are
 * input channels (ICP, cnn_cpu_slice_create) or output channels (OCP,
 * cnn_cpu_ocp_slice_create).
 *
 * A stage taken is lent: the caller's alone until it gives it back, or
 * discards it after a failure. Idle stages are kept within a byte budget
 * (each stage's cnn_cpu_stage_bytes: its oneDNN memories, workspaces and
 * scratchpad), at most CNN_STAGE_POOL_MAX of them, the least recently
 * given back destroyed first; a stage larger than the budget is not kept.
 * Each stage belongs to the app that took it last (acc_run_ctx.app): when
 * that app leaves (cnn_stage_pool_app_gone), its idle stages are
 * destroyed at once and those it has lent are destroyed when given back.
 *
 * The pool is the process's (the cnn accelerator's CPU path): every
 * function is thread-safe; stages are destroyed outside the lock.
 */
#ifndef EMBER_CNN_STAGE_POOL_H
#define EMBER_CNN_STAGE_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "cnn_cpu.h"

#define CNN_STAGE_POOL_MAX 64                     /* idle stages at most */
#define CNN_STAGE_POOL_DEFAULT_BYTES (256ull << 20) /* the budget at start */

/* What makes two tasks' stages interchangeable; text is only read during
 * a call (the pool keeps a copy). */
typedef struct cnn_pool_key {
  const uint8_t *text;  /* the .cfg text */
  size_t len;
  uint32_t first, end, batch;
  uint32_t channels;    /* a slice's channel count; 0: a whole range */
  int outputs;          /* non-zero: channels are output channels (OCP) */
} cnn_pool_key;

/* cnn_stage_pool_take - an idle stage of key's shape with its gradients
 * zeroed, or a new one (cnn_cpu_stage_create's errors; with channels
 * non-zero, cnn_cpu_slice_create's of layer first with that many input
 * channels, or with outputs set cnn_cpu_ocp_slice_create's with that many
 * output channels), lent to app. Its parameters are whatever its last
 * user left: load them. Also EMBER_ENOMEM. */
int cnn_stage_pool_take(const cnn_net *net, const cnn_pool_key *key,
                        uint64_t app, cnn_cpu_stage **out, char *err,
                        size_t err_len);

/* cnn_stage_pool_give - hand a stage taken for key back for reuse (kept,
 * or destroyed: its app has left, it is over the budget). NULL: no-op. */
void cnn_stage_pool_give(const cnn_pool_key *key, cnn_cpu_stage *stage);

/* cnn_stage_pool_discard - destroy a stage taken from the pool (after a
 * failure: its state is unknown). NULL: no-op. */
void cnn_stage_pool_discard(cnn_cpu_stage *stage);

/* cnn_stage_pool_app_gone - app has left: destroy its idle stages now,
 * and those lent to it when they come back. */
void cnn_stage_pool_app_gone(uint64_t app);

/* cnn_stage_pool_set_budget - the bytes idle stages may hold from now on
 * (idle ones beyond it destroyed now); 0 keeps none. */
void cnn_stage_pool_set_budget(uint64_t bytes);

/* cnn_stage_pool_clear - destroy every idle stage (lent ones stay lent). */
void cnn_stage_pool_clear(void);

typedef struct cnn_stage_pool_stats {
  uint64_t budget;
  size_t idle, lent;              /* stages now */
  uint64_t idle_bytes, lent_bytes;
  uint64_t hits, builds;          /* takes served by an idle stage, and
                                     stages built, since start */
  uint64_t evicted;               /* idle stages destroyed for the budget
                                     or the count */
  uint64_t dropped;               /* stages destroyed because their app
                                     left */
} cnn_stage_pool_stats;

/* cnn_stage_pool_get_stats - a snapshot. */
void cnn_stage_pool_get_stats(cnn_stage_pool_stats *out);

#endif
