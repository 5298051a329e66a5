/*
 * cnn_stage_pool.h - built cnn_cpu stages kept for reuse. Building a
 * stage (oneDNN primitives, blocked memories) costs far more than running
 * a small batch through it, and every FORWARD and BACKWARD needs one; the
 * state block stays the truth (parameters are loaded from it every task),
 * so a stage is reusable by any task of the same shape: the same network
 * text (compared byte for byte, not by hash), range, batch and, for a
 * slice's stage, its channel count and whether they are input channels
 * (ICP, cnn_cpu_slice_create) or output channels (OCP,
 * cnn_cpu_ocp_slice_create).
 *
 * At most CNN_STAGE_POOL_MAX idle stages are kept, the least recently
 * used destroyed first; a stage taken is the caller's alone until given
 * back. Thread-safe.
 */
#ifndef EMBER_CNN_STAGE_POOL_H
#define EMBER_CNN_STAGE_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "cnn_cpu.h"

#define CNN_STAGE_POOL_MAX 8

/* cnn_stage_pool_take - an idle stage of this shape with its gradients
 * zeroed, or a new one (cnn_cpu_stage_create's errors; with channels
 * non-zero, cnn_cpu_slice_create's of layer first with that many input
 * channels, or with outputs set cnn_cpu_ocp_slice_create's with that many
 * output channels). Its parameters are whatever its last user left: load
 * them. */
int cnn_stage_pool_take(const cnn_net *net, const uint8_t *text, size_t len,
                        uint32_t first, uint32_t end, uint32_t batch,
                        uint32_t channels, int outputs, cnn_cpu_stage **out,
                        char *err, size_t err_len);

/* cnn_stage_pool_give - hand a stage taken for (text, first, end, batch,
 * channels, outputs) back for reuse; after a failure, destroy it
 * instead. */
void cnn_stage_pool_give(const uint8_t *text, size_t len, uint32_t first,
                         uint32_t end, uint32_t batch, uint32_t channels,
                         int outputs, cnn_cpu_stage *stage);

#endif
