/* conn_guard.c - the timeouts that keep clients from holding the NAM: no
 * Hello (handshake_timeout), a frame begun and not finished (frame_timeout),
 * nothing sent and nothing in flight (idle_timeout), replies piling up
 * unread (send_stall_timeout). One timer walks every connection: a few
 * hundred checks of a few fields, instead of a timer per connection. */
#include "server_internal.h"

#include <stdio.h>

#include "ember/ember_errors.h"
#include "log.h"

static void check(nam_conn *c, uint64_t now) {
  const nam_server_limits *l = &c->srv->limits;
  char why[256];
  if (c->over_ms && now - c->over_ms >= l->send_stall_ms) {
    snprintf(why, sizeof why, "%llu reply bytes queued unread, over "
             "max_send_queue (%llu) for %llu ms: disconnecting",
             (unsigned long long)nam_conn_queued(c),
             (unsigned long long)l->max_send_queue,
             (unsigned long long)(now - c->over_ms));
    nam_stats_dropped(&c->srv->metrics, NAM_DROPPED_SEND_STALL);
    nam_conn_drop(c, EMBER_EBUSY, LOG_LVL_WARN, why);
  } else if (!c->admitted && now - c->opened_ms >= l->handshake_ms) {
    /* a lease's LeaseProof is part of the handshake */
    snprintf(why, sizeof why, "no %s within handshake_timeout (%llu ms): "
             "closing", c->greeted ? "LeaseProof" : "Hello",
             (unsigned long long)l->handshake_ms);
    nam_stats_dropped(&c->srv->metrics, NAM_DROPPED_HANDSHAKE_TIMEOUT);
    /* counted; silent connections by the hundred are no news for the log */
    nam_conn_drop(c, EMBER_ETIMEDOUT, LOG_LVL_DEBUG, why);
  } else if (c->partial_ms && (c->poll_events & UV_READABLE) &&
             now - c->partial_ms >= l->frame_ms) {
    /* only while we read: a frame waiting on our backpressure is ours */
    snprintf(why, sizeof why, "a frame not complete within frame_timeout "
             "(%llu ms, %zu bytes of it came): closing",
             (unsigned long long)l->frame_ms, c->reader.end - c->reader.start);
    nam_stats_dropped(&c->srv->metrics, NAM_DROPPED_FRAME_TIMEOUT);
    nam_conn_drop(c, EMBER_ETIMEDOUT, LOG_LVL_NOTICE, why);
  } else if (l->idle_ms && c->admitted && !c->inflight && !c->ops_pending &&
             !c->partial_ms && !c->send_paused /* then we do not read */ &&
             now - c->active_ms >= l->idle_ms) {
    snprintf(why, sizeof why, "idle for idle_timeout (%llu ms) with nothing "
             "in flight: closing", (unsigned long long)l->idle_ms);
    nam_stats_dropped(&c->srv->metrics, NAM_DROPPED_IDLE_TIMEOUT);
    nam_conn_drop(c, EMBER_ETIMEDOUT, LOG_LVL_NOTICE, why);
  }
}

static void on_guard(uv_timer_t *t) {
  nam_server *s = t->data;
  uint64_t now = uv_now(s->loop);
  for (nam_conn *c = s->conns, *next; c; c = next) {
    next = c->next; /* a dropped connection leaves the list */
    check(c, now);
  }
}

/* A quarter of the shortest timeout, 50 ms to 1 s: a connection goes at
 * most that much past its time. */
static uint64_t period_of(const nam_server_limits *l) {
  uint64_t p = l->handshake_ms;
  if (l->frame_ms < p) p = l->frame_ms;
  if (l->send_stall_ms < p) p = l->send_stall_ms;
  if (l->idle_ms && l->idle_ms < p) p = l->idle_ms;
  p /= 4;
  return p < 50 ? 50 : p > 1000 ? 1000 : p;
}

void nam_guard_start(nam_server *s) {
  uv_timer_init(s->loop, &s->guard_timer);
  s->guard_timer.data = s;
  s->guard_period_ms = period_of(&s->limits);
  uv_timer_start(&s->guard_timer, on_guard, s->guard_period_ms,
                 s->guard_period_ms);
}

void nam_guard_limits_changed(nam_server *s) {
  uint64_t p = period_of(&s->limits);
  if (p == s->guard_period_ms) return;
  s->guard_period_ms = p;
  uv_timer_start(&s->guard_timer, on_guard, p, p);
}

void nam_guard_stop(nam_server *s) {
  uv_close((uv_handle_t *)&s->guard_timer, NULL);
}
