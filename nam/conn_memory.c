/*
 * conn_memory.c - the bytes clients make the NAM hold, counted before they
 * are taken (redis's per-client limits and maxmemory). A client's blocks
 * (state blocks twice: the first task on one makes the platform's working
 * copy), its out blocks, and what its tasks in flight reserved at
 * admission (the out blocks they declare and their scratch, from the
 * accelerator's plan()) stay within max_block_bytes; every client's
 * together, with their read buffers and the reservations of tasks whose
 * client left, within max_memory. Over its own limit a client is told to
 * release (EBUSY) or that the task can never fit (ETOOBIG); over the
 * NAM's, to come back later (EBUSY).
 */
#include "server_internal.h"

#include <stdio.h>

#include "ember/ember_errors.h"

static uint64_t add_sat(uint64_t a, uint64_t b) {
  return a + b < a ? UINT64_MAX : a + b;
}

uint64_t nam_conn_held(const nam_conn *c) {
  return c->blocks.bytes + c->state_bytes + c->out_bytes + c->task_bytes;
}

void nam_server_memory(const nam_server *s, nam_server_stats *out) {
  out->block_bytes = out->out_bytes = out->buffer_bytes = 0;
  out->state_bytes = 0;
  for (const nam_conn *c = s->conns; c; c = c->next) {
    out->block_bytes += c->blocks.bytes;
    out->state_bytes += c->state_bytes;
    out->out_bytes += c->out_bytes;
    out->buffer_bytes += c->reader.cap;
  }
  out->reserved_bytes = s->reserved_bytes;
  out->held_bytes = out->block_bytes + out->state_bytes + out->out_bytes +
                    out->buffer_bytes + out->reserved_bytes;
  out->max_memory = s->limits.max_memory;
}

/* 0 when `more` bytes fit under max_memory with what the NAM holds (less
 * `excluded`, bytes already counted that the new ones replace), else
 * EMBER_EBUSY with the reason in why. */
static int fits_memory(const nam_server *s, uint64_t more, uint64_t excluded,
                       const char *what, char *why, size_t why_len) {
  uint64_t max = s->limits.max_memory;
  if (!max) return 0;
  nam_server_stats m;
  nam_server_memory(s, &m);
  /* excluded is a read buffer's */
  m.buffer_bytes -= excluded < m.buffer_bytes ? excluded : m.buffer_bytes;
  uint64_t held = m.held_bytes > excluded ? m.held_bytes - excluded : 0;
  if (add_sat(held, more) <= max) return 0;
  snprintf(why, why_len, "%s needs %llu bytes, and the NAM holds %llu of "
           "max_memory %llu for its clients (blocks %llu and their state "
           "copies %llu, out blocks %llu, tasks in flight %llu, read "
           "buffers %llu); try again later",
           what, (unsigned long long)more, (unsigned long long)held,
           (unsigned long long)max, (unsigned long long)m.block_bytes,
           (unsigned long long)m.state_bytes,
           (unsigned long long)m.out_bytes,
           (unsigned long long)m.reserved_bytes,
           (unsigned long long)m.buffer_bytes);
  return EMBER_EBUSY;
}

int nam_conn_block_room(nam_conn *c, uint64_t size, int state,
                        int inline_frame, char *why, size_t why_len) {
  nam_server *s = c->srv;
  uint64_t need = state ? add_sat(size, size) : size;
  uint64_t held = nam_conn_held(c), max = s->limits.max_block_bytes;
  if (add_sat(held, need) > max) {
    snprintf(why, why_len, "%llu bytes%s would pass this client's limit: "
             "it holds %llu (blocks %llu and their state copies %llu, out "
             "blocks %llu, tasks in flight %llu), max_block_bytes = %llu; "
             "release some", (unsigned long long)need,
             state ? " (a state block and its working copy)" : "",
             (unsigned long long)held, (unsigned long long)c->blocks.bytes,
             (unsigned long long)c->state_bytes,
             (unsigned long long)c->out_bytes,
             (unsigned long long)c->task_bytes, (unsigned long long)max);
    return EMBER_EBUSY;
  }
  /* an inline block's bytes are in the read buffer already, counted */
  return fits_memory(s, need, inline_frame ? c->reader.cap : 0, "the block",
                     why, why_len);
}

int nam_conn_reserve_task(void *user, uint64_t out_bytes,
                          uint64_t scratch_bytes, char *why, size_t why_len) {
  conn_task *ct = user;
  nam_conn *c = ct->conn;
  nam_server *s = c->srv;
  uint64_t need = add_sat(out_bytes, scratch_bytes);
  uint64_t held = nam_conn_held(c), max = s->limits.max_block_bytes;
  if (need > max) {
    snprintf(why, why_len, "the task would make the NAM hold %llu bytes "
             "(out blocks %llu, scratch %llu), over this client's "
             "max_block_bytes (%llu)", (unsigned long long)need,
             (unsigned long long)out_bytes, (unsigned long long)scratch_bytes,
             (unsigned long long)max);
    return EMBER_ETOOBIG;
  }
  if (held + need > max) {
    snprintf(why, why_len, "the task needs %llu bytes (out blocks %llu, "
             "scratch %llu) and this client holds %llu (blocks %llu and "
             "their state copies %llu, out blocks %llu, tasks in flight "
             "%llu) of max_block_bytes %llu: release blocks or wait for "
             "tasks to finish",
             (unsigned long long)need, (unsigned long long)out_bytes,
             (unsigned long long)scratch_bytes, (unsigned long long)held,
             (unsigned long long)c->blocks.bytes,
             (unsigned long long)c->state_bytes,
             (unsigned long long)c->out_bytes,
             (unsigned long long)c->task_bytes, (unsigned long long)max);
    return EMBER_EBUSY;
  }
  int rc = fits_memory(s, need, 0, "the task", why, why_len);
  if (rc) return rc;
  ct->reserved = need;
  c->task_bytes += need;
  s->reserved_bytes += need;
  return 0;
}

void nam_conn_unreserve_task(conn_task *ct) {
  nam_conn *c = ct->conn;
  c->task_bytes -= ct->reserved;
  c->srv->reserved_bytes -= ct->reserved;
  ct->reserved = 0;
}
