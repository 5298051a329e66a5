/* client.c - opening and closing clients: the address and its back end
 * (backend.h), options, plugins, counters. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend.h"
#include "last_error.h"
#include "plugins.h"
#include "struct_abi.h"

static int resolve_address(const char *address, char *out, size_t len) {
  if (!address || !address[0]) address = getenv("EMBER_NAM");
  if (!address || !address[0]) {
    struct stat st;
    if (stat(EMBER_DEFAULT_SOCKET, &st) == 0 && S_ISSOCK(st.st_mode))
      address = "unix:" EMBER_DEFAULT_SOCKET;
    else
      address = "embedded";
  }
  if (strlen(address) >= len) {
    ember__client_set_error("address too long: %s", address);
    return EMBER_EINVAL;
  }
  strcpy(out, address);
  return 0;
}

/* The back end an address names, or NULL. */
static const ember__backend_ops *backend_for(const char *address) {
  if (strcmp(address, "embedded") == 0) return &ember__backend_embedded;
  if (strncmp(address, "unix:", 5) == 0 || strncmp(address, "tcp:", 4) == 0)
    return &ember__backend_remote;
  return NULL;
}

/* The in-process engine's plugins: opts.plugin_dir, else $EMBER_PLUGIN_DIR,
 * else none. */
static int load_plugins(ember_client *c) {
  const char *dir = c->opts.plugin_dir;
  if (!dir) dir = getenv("EMBER_PLUGIN_DIR");
  c->opts.plugin_dir = NULL; /* the caller's string: not kept */
  int rc = ember__plugins_get(dir, &c->accels);
  c->stats.plugins_loaded = ember__plugins_loaded(c->accels);
  c->stats.plugins_refused = ember__plugins_refused(c->accels);
  return rc;
}

/* Refusals are not errors, but never silent: ember_last_error() names them
 * after a successful ember_connect (after what is already there). */
static void report_plugins(ember_client *c) {
  char report[EMBER__ERROR_LEN];
  ember__plugins_report(c->accels, report, sizeof report);
  if (!report[0]) return;
  if (!ember_last_error()[0]) {
    ember__client_set_error("%s", report);
  } else {
    char before[EMBER__ERROR_LEN];
    snprintf(before, sizeof before, "%s", ember_last_error());
    ember__client_set_error("%s; %s", before, report);
  }
}

#define DEFAULT_RECONNECT_WINDOW_MS 10000

/* ember_options.reconnect_window_ms: 0 takes $EMBER_RECONNECT_WINDOW_MS,
 * else the default; negative turns it off (-1 after this). */
static int resolve_window(ember_client *c) {
  long ms = c->opts.reconnect_window_ms;
  const char *env = getenv("EMBER_RECONNECT_WINDOW_MS");
  if (ms == 0 && env && env[0]) {
    char *end;
    errno = 0;
    ms = strtol(env, &end, 10);
    if (*end || errno || ms < 0 || ms > 86400000L) {
      ember__client_set_error("EMBER_RECONNECT_WINDOW_MS: '%s' is not a "
                              "number of milliseconds (0 to 86400000)", env);
      return EMBER_EINVAL;
    }
    if (ms == 0) ms = -1; /* 0 there means off */
  } else if (ms == 0) {
    ms = DEFAULT_RECONNECT_WINDOW_MS;
  }
  c->opts.reconnect_window_ms = ms > 0 ? ms : -1;
  return 0;
}

int ember_connect(const char *address, const ember_options *opts,
                  ember_client **out) {
  return ember__client_open(address, opts, NULL, out);
}

int ember__client_open(const char *address, const ember_options *opts,
                       const ember__lease *lease, ember_client **out) {
  *out = NULL;
  ember__client_set_error("%s", "");
  ember_client *c = calloc(1, sizeof *c);
  if (!c) return EMBER_ENOMEM;
  int rc = resolve_address(address, c->address, sizeof c->address);
  if (!rc)
    rc = ember__struct_in(&c->opts, sizeof c->opts, opts, EMBER__OPTIONS_V0,
                          "ember_options");
  if (!rc) rc = resolve_window(c);
  if (!rc && !(c->backend = backend_for(c->address))) {
    ember__client_set_error("unknown address '%s': expected unix:PATH, "
                            "tcp:HOST:PORT or embedded", c->address);
    rc = EMBER_EINVAL;
  }
  if (rc) {
    free(c);
    return rc;
  }
  snprintf(c->client_name, sizeof c->client_name, "%s",
           c->opts.client_name ? c->opts.client_name : "libember");
  c->opts.client_name = c->client_name;
  if (!c->opts.connect_timeout_ms) c->opts.connect_timeout_ms = 2000;
  c->next_block_id = 1;
  c->task_done = ember__task_complete;
  pthread_mutex_init(&c->lock, NULL);
  rc = load_plugins(c);
  if (!rc) rc = c->backend->open(c, lease);
  if (rc) {
    ember_close(c);
    return rc;
  }
  report_plugins(c);
  *out = c;
  return 0;
}

void ember_close(ember_client *c) {
  if (!c) return;
  pthread_mutex_lock(&c->lock);
  c->closing = 1;
  pthread_mutex_unlock(&c->lock);
  c->backend->close(c); /* tasks still running end as ECANCELED */
  pthread_mutex_destroy(&c->lock);
  free(c);
}

void ember__client_lease_ended(ember_client *c) { c->backend->lease_ended(c); }

int ember_is_connected(ember_client *c) { return c->backend->connected(c); }
const char *ember_client_address(const ember_client *c) { return c->address; }

void ember_client_get_stats(ember_client *c, ember_client_stats *out) {
  pthread_mutex_lock(&c->lock);
  ember_client_stats stats = c->stats;
  pthread_mutex_unlock(&c->lock);
  ember__struct_out(out, &stats, sizeof stats, EMBER__CLIENT_STATS_V0);
}
