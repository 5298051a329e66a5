/*
 * conn_reply.c - a finished task's Result frame, built and sent by the
 * engine worker that ran the task.
 *
 * Handing the finished task to the loop first (uv_async) costs the client
 * one more thread wake-up per task, about a third of a small task's round
 * trip. So the worker encodes the Result itself and, when nothing else is
 * queued for the client, writes it to the socket at once. Anything the
 * socket does not take at once goes to the connection's output queue,
 * which the loop flushes; the loop still does all of the connection's
 * bookkeeping (nam_conn_task_done). The output queue, the socket and the
 * connection's closing are shared with the loop under send_mu.
 */
#include "server_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "clock.h"

/* Results larger than this are encoded by the loop (which turns one over
 * the frame limit into an Error): a worker does not copy big outputs. */
#define DIRECT_REPLY_MAX ((size_t)256 << 10)

int nam_reply_encode(conn_task *ct, nam_task *t, proto_wbuf *w,
                     size_t max_frame) {
  const nam_task_times *tm = nam_task_get_times(t);
  Ember__Result r = EMBER__RESULT__INIT;
  Ember__StageTimes times = EMBER__STAGE_TIMES__INIT;
  r.task_id = ct->id;
  r.status = nam_task_status(t);
  if (r.status) r.message = (char *)nam_task_message(t);
  if (ct->output.data) {
    r.has_output = 1;
    r.output.data = ct->output.data;
    r.output.len = ct->output.size;
  }
  r.platform = (char *)nam_task_platform(t);
  r.platform_kind = (char *)nam_task_platform_kind(t);
  Ember__OutputBlock outs[ACC_MAX_OUTPUTS];
  Ember__OutputBlock *out_ptrs[ACC_MAX_OUTPUTS];
  if (r.status == 0) {
    for (size_t i = 0; i < ct->n_outputs; i++) {
      ember__output_block__init(&outs[i]);
      outs[i].block_id = ct->output_ids[i];
      outs[i].size = nam_task_output_size(t, i);
      out_ptrs[i] = &outs[i];
    }
    r.n_outputs = ct->n_outputs;
    r.outputs = out_ptrs;
  }
  if (tm->started) {
    times.has_queue_ns = times.has_exec_ns = 1;
    times.queue_ns = tm->started - tm->queued;
    times.exec_ns = tm->finished - tm->started;
  }
  if (tm->staged && tm->executed >= tm->staged && tm->staged >= tm->started) {
    times.has_stage_in_ns = times.has_stage_out_ns = 1;
    times.stage_in_ns = tm->staged - tm->started;
    times.stage_out_ns = tm->finished - tm->executed;
  }
  times.has_attempts = 1;
  times.attempts = tm->attempts;
  times.has_total_ns = 1;
  times.total_ns = clock_now_ns() - ct->received_ns;
  r.times = &times;
  return proto_wbuf_append(w, EMBER__MSG_TYPE__MSG_RESULT, &r.base, max_frame);
}

void nam_reply_prepare(conn_task *ct, nam_task *t) {
  nam_task_take_output(t, &ct->output);
  size_t max = ct->reply_max < DIRECT_REPLY_MAX ? ct->reply_max : DIRECT_REPLY_MAX;
  if (nam_reply_encode(ct, t, &ct->reply, max) != 0) {
    proto_wbuf_free(&ct->reply); /* too big: the loop encodes it */
    ct->reply = (proto_wbuf){0};
    return;
  }
  free(ct->output.data); /* it is in the frame now */
  ct->output = (acc_output){0};
}

void nam_reply_send_locked(conn_task *ct) {
  nam_conn *c = ct->conn;
  /* with replies queued before it, it waits its turn (the loop's flush) */
  if (ct->reply.len && !c->closing && c->out.len == c->out.sent) {
    while (ct->reply.sent < ct->reply.len) {
      ssize_t n = send(c->fd, ct->reply.data + ct->reply.sent,
                       ct->reply.len - ct->reply.sent,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break; /* full, or broken: the loop finds out */
      ct->reply.sent += (size_t)n;
    }
    /* part of the frame went: the rest must follow before anything else */
    if (ct->reply.sent > 0) {
      if (ct->reply.sent < ct->reply.len &&
          proto_wbuf_append_raw(&c->out, ct->reply.data + ct->reply.sent,
                                ct->reply.len - ct->reply.sent) != 0)
        c->out_broken = 1; /* out of memory mid-frame: the loop closes */
      ct->replied = 1;
    }
  }
  if (ct->replied) {
    proto_wbuf_free(&ct->reply);
    ct->reply = (proto_wbuf){0};
  }
}
