/*
 * metrics_http.h - the /metrics endpoint: a libmicrohttpd server on its own
 * thread that serves Prometheus text rendered on the loop thread.
 *
 * The loop thread owns the stats, so the HTTP thread never reads them: for
 * each request it asks the loop (uv_async_t) for a fresh rendering and waits
 * up to a second for it; if the loop does not answer (stopped, or busy) it
 * serves the last one. GET and HEAD /metrics answer 200 with
 * "text/plain; version=0.0.4"; other paths 404; other methods 405.
 */
#ifndef EMBER_NAM_METRICS_HTTP_H
#define EMBER_NAM_METRICS_HTTP_H

#include <stddef.h>

#include <uv.h>

typedef struct nam_metrics_http nam_metrics_http;

/* Called on the loop thread: a malloc'd text and its length, or nonzero
 * on failure. */
typedef int (*nam_metrics_render_fn)(void *user, char **text, size_t *len);

/*
 * nam_metrics_http_start - listen on "HOST:PORT" (as hostport_parse
 * takes it) and serve render's text. Call on the loop thread; render runs
 * once here and then on the loop for each request.
 * Returns 0 and the server in *out, or EMBER_ECONFIG (bad address),
 * EMBER_ENOMEM or EMBER_EIO (cannot listen) with the reason in err; after
 * EMBER_EIO *out may hold a closed server, still to be destroyed once the
 * loop has run (*out is left alone for the other errors).
 */
int nam_metrics_http_start(uv_loop_t *loop, const char *address,
                           nam_metrics_render_fn render, void *user,
                           nam_metrics_http **out, char *err, size_t err_len);

/* nam_metrics_http_close - stop the HTTP thread (requests in progress get
 * the last text) and close the loop handle. The loop must then run once to
 * close it before nam_metrics_http_destroy. NULL is a no-op. */
void nam_metrics_http_close(nam_metrics_http *m);
/* Free after the loop ran the close callbacks. NULL is a no-op. */
void nam_metrics_http_destroy(nam_metrics_http *m);

#endif
