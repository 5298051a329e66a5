/*
 * metrics_http.h - ember-nam's HTTP endpoints: a libmicrohttpd server on a
 * small pool of threads that serves Prometheus text rendered on the loop
 * thread, and the liveness and readiness probes.
 *
 *   GET /metrics  200 "text/plain; version=0.0.4"
 *   GET /healthz  200 "ok" while the process serves HTTP (liveness)
 *   GET /readyz   200 "ready", or 503 "not ready: REASON" (starting,
 *                 draining, no platform ready, the loop not answering)
 *
 * Other paths answer 404, other methods than GET and HEAD 405.
 *
 * The loop thread owns the stats, so the HTTP threads never read them: for
 * /metrics and /readyz they ask the loop (uv_async_t) for a fresh snapshot
 * and wait up to a second for it; if the loop does not answer (stopped, or
 * busy) /metrics serves the last text and /readyz answers 503. An idle
 * connection is closed after the timeout; the connection limits keep half-sent
 * requests from holding every slot.
 */
#ifndef EMBER_NAM_METRICS_HTTP_H
#define EMBER_NAM_METRICS_HTTP_H

#include <stddef.h>

#include <uv.h>

typedef struct nam_metrics_http nam_metrics_http;

/* Called on the loop thread: a malloc'd text and its length, or nonzero
 * on failure. */
typedef int (*nam_metrics_render_fn)(void *user, char **text, size_t *len);
/* Called on the loop thread: 1 when the node is ready for work, else 0 with
 * the reason in why. */
typedef int (*nam_metrics_ready_fn)(void *user, char *why, size_t why_len);

typedef struct nam_metrics_http_options {
  const char *address;       /* "HOST:PORT", as hostport_parse takes it */
  unsigned timeout_s;        /* an idle connection is closed after this */
  unsigned max_connections;  /* at once; more are closed at once */
  unsigned max_per_ip;       /* at once from one address; 0 = no limit */
  unsigned threads;          /* serving threads (1 or more) */
  nam_metrics_render_fn render;
  nam_metrics_ready_fn ready;
  void *user;                /* for render and ready */
} nam_metrics_http_options;

/*
 * nam_metrics_http_start - listen on o->address and serve. Call on the loop
 * thread; render and ready run once here and then on the loop for each
 * request that needs them.
 * Returns 0 and the server in *out, or EMBER_ECONFIG (bad address),
 * EMBER_ENOMEM or EMBER_EIO (cannot listen) with the reason in err; after
 * EMBER_EIO *out may hold a closed server, still to be destroyed once the
 * loop has run (*out is left alone for the other errors).
 */
int nam_metrics_http_start(uv_loop_t *loop, const nam_metrics_http_options *o,
                           nam_metrics_http **out, char *err, size_t err_len);

/* nam_metrics_http_close - stop the HTTP thread (requests in progress get
 * the last text) and close the loop handle. The loop must then run once to
 * close it before nam_metrics_http_destroy. NULL is a no-op. */
void nam_metrics_http_close(nam_metrics_http *m);
/* Free after the loop ran the close callbacks. NULL is a no-op. */
void nam_metrics_http_destroy(nam_metrics_http *m);

#endif
