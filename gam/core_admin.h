/*
 * core_admin.h - what the admin API (admin_http.c, on libmicrohttpd's
 * thread) may ask of the GAM's core. Each call takes the core's lock, so
 * it is safe from any thread (core.h has the lock discipline); changes
 * are committed to SQLite before the call returns 0.
 *
 * JSON shapes (jansson; the caller owns the returned reference):
 *
 *   status  {"gam": {"version": "0.1.0", "policy": "delay",
 *                    "uptime_s": 12, "heartbeats": 345,
 *                    "heartbeat_interval_ms": 1000, "lost_after": 3},
 *            "nodes": {"total": 3, "up": 2, "lost": 1, "drained": 0},
 *            "apps": {"pending": 1, "running": 2},
 *            "leases": 4,
 *            "labels": {"sw": 2, "plf": 1}}      (up nodes offering each)
 *
 *   node    {"id": "n1", "address": "tcp:127.0.0.1:7001",
 *            "state": "up"|"lost", "drained": false,
 *            "labels": ["plf", "sw"],            (effective, sorted)
 *            "reported": [...], "added": [...], "removed": [...],
 *            "disabled": [...],                  (from its heartbeats)
 *            "platforms": ["cpu", "fpga0"],
 *            "fpgas": [{"platform": "fpga0", "bitstream": "sw"}],
 *            "load": [{"accelerator": "sw", "queued": 0,
 *                      "utilization": 0.25}],
 *            "leases": [{"id": 7, "app_id": 3, "app": "demo",
 *                        "label": "sw"}],
 *            "heartbeats": 10, "last_heartbeat_ms_ago": 230}
 *   nodes   {"nodes": [node, ...]}               (sorted by id)
 *
 *   apps    {"apps": [{"id": 3, "name": "demo", "label": "sw",
 *                      "wanted": 2, "state": "pending"|"running",
 *                      "skipped": 4,
 *                      "leases": [{"id": 7, "node": "n1",
 *                                  "expires_unix_ms": 1790000000000}]},
 *                     ...]}                      (not ended, by id)
 *
 *   events  {"events": [{"id": 9, "at_ms": ..., "kind": "node_lost",
 *                        "node": "n2", "app_id": 0, "detail": "..."}]}
 *
 * Errors: EMBER_ENOTFOUND (no such node), EMBER_EINVAL (a label that is
 * not 1..64 characters of [A-Za-z0-9_.@-]), EMBER_EIO (SQLite failed);
 * err gets one line for the JSON error body.
 */
#ifndef EMBER_GAM_CORE_ADMIN_H
#define EMBER_GAM_CORE_ADMIN_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

typedef struct gam_core gam_core;

json_t *gam_core_status_json(gam_core *c);
json_t *gam_core_nodes_json(gam_core *c);
int gam_core_node_json(gam_core *c, const char *id, json_t **out, char *err,
                       size_t err_len);
json_t *gam_core_apps_json(gam_core *c);
json_t *gam_core_events_json(gam_core *c, unsigned limit);

/* PUT / DELETE /v1/nodes/{id}/labels/{label}. Removing a label ends the
 * leases that use it on that node (their apps are told). */
int gam_core_label_add(gam_core *c, const char *node, const char *label,
                       char *err, size_t err_len);
int gam_core_label_remove(gam_core *c, const char *node, const char *label,
                          char *err, size_t err_len);
/* POST /v1/nodes/{id}/drain and /undrain: a drained node gets no new
 * leases; the leases it has end (their apps are told). */
int gam_core_set_drained(gam_core *c, const char *node, bool drained,
                         char *err, size_t err_len);

/* GET /metrics: Prometheus text, malloc'd. 0 or EMBER_ENOMEM. */
int gam_core_metrics_text(gam_core *c, char **text, size_t *len);

/* A label as the API and the config accept it. */
bool gam_label_valid(const char *label);

#endif
