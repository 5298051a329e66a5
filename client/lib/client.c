/* client.c - opening and closing clients, addresses, errors, counters. */
#include "client_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

static __thread char last_error[512];

void ember__client_set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
}

const char *ember_last_error(void) { return last_error; }

uint64_t ember__client_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The in-process engine: embedded mode's, or the fallback's (started the
 * first time a task falls back). */
int ember__client_engine(ember_client *c, nam_engine **out) {
  pthread_mutex_lock(&c->lock);
  int rc = 0;
  if (!c->engine) {
    nam_engine_config cfg = {.cpu_workers = c->opts.embedded_threads};
    cfg.accelerators = ember__accels_list(c->accels, &cfg.n_accelerators);
    rc = nam_engine_create(&cfg, &c->engine);
  }
  *out = c->engine;
  pthread_mutex_unlock(&c->lock);
  return rc;
}

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

static int copy_lease(ember_client *c, const Ember__Lease *lease) {
  c->lease_body = malloc(lease->body.len ? lease->body.len : 1);
  c->lease_mac = malloc(lease->mac.len ? lease->mac.len : 1);
  if (!c->lease_body || !c->lease_mac) return EMBER_ENOMEM;
  memcpy(c->lease_body, lease->body.data, lease->body.len);
  memcpy(c->lease_mac, lease->mac.data, lease->mac.len);
  c->lease_body_len = lease->body.len;
  c->lease_mac_len = lease->mac.len;
  return 0;
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
  char report[sizeof last_error];
  ember__plugins_report(c->accels, report, sizeof report);
  if (!report[0]) return;
  if (!last_error[0]) {
    ember__client_set_error("%s", report);
  } else {
    char before[sizeof last_error];
    snprintf(before, sizeof before, "%s", last_error);
    ember__client_set_error("%s; %s", before, report);
  }
}

#define DEFAULT_RECONNECT_WINDOW_MS 10000

/* ember_options.reconnect_window_ms: 0 takes $EMBER_RECONNECT_WINDOW_MS,
 * else the default; negative turns it off. */
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
  c->window_ns = ms > 0 ? (uint64_t)ms * 1000000u : 0;
  return 0;
}

int ember_connect(const char *address, const ember_options *opts,
                  ember_client **out) {
  return ember__client_open(address, opts, NULL, 0, NULL, out);
}

int ember__client_open(const char *address, const ember_options *opts,
                const Ember__Lease *lease, uint64_t lease_id,
                const uint8_t *app_sk, ember_client **out) {
  *out = NULL;
  last_error[0] = '\0';
  ember_client *c = calloc(1, sizeof *c);
  if (!c) return EMBER_ENOMEM;
  int rc = resolve_address(address, c->address, sizeof c->address);
  if (!rc)
    rc = ember__struct_in(&c->opts, sizeof c->opts, opts, EMBER__OPTIONS_V0,
                          "ember_options");
  if (!rc) rc = resolve_window(c);
  if (rc) {
    free(c);
    return rc;
  }
  snprintf(c->client_name, sizeof c->client_name, "%s",
           c->opts.client_name ? c->opts.client_name : "libember");
  c->opts.client_name = c->client_name;
  if (!c->opts.connect_timeout_ms) c->opts.connect_timeout_ms = 2000;
  c->max_frame = c->opts.max_frame ? c->opts.max_frame : PROTO_DEFAULT_MAX_FRAME;
  c->fd = -1;
  c->next_task_id = 1;
  c->next_block_id = 1;
  c->max_inflight = 64;
  pthread_mutex_init(&c->lock, NULL);
  pthread_mutex_init(&c->send_lock, NULL);
  pthread_mutex_init(&c->connect_lock, NULL);
  pthread_mutex_init(&c->request_lock, NULL);
  pthread_cond_init(&c->slot_cv, NULL);
  pthread_cond_init(&c->reply_cv, NULL);
  pthread_cond_init(&c->park_cv, NULL);
  if (lease && copy_lease(c, lease) != 0) {
    ember_close(c);
    return EMBER_ENOMEM;
  }
  c->lease_id = lease_id;
  if (app_sk) memcpy(c->lease_sk, app_sk, sizeof c->lease_sk);
  if ((rc = load_plugins(c)) != 0) {
    ember_close(c);
    return rc;
  }

  if (strcmp(c->address, "embedded") == 0) {
    c->mode = MODE_EMBEDDED;
    nam_engine *e;
    rc = ember__client_engine(c, &e);
  } else if (strncmp(c->address, "unix:", 5) == 0 ||
             strncmp(c->address, "tcp:", 4) == 0) {
    c->mode = c->address[0] == 'u' ? MODE_UNIX : MODE_TCP;
    pthread_mutex_lock(&c->connect_lock);
    rc = ember__remote_connect(c);
    pthread_mutex_unlock(&c->connect_lock);
    /* unreachable is fine: tasks fall back (or wait out the reconnect
     * window) until the NAM is back */
    if (rc == EMBER_ECONNECT && !c->opts.no_fallback) {
      c->down_since_ns = ember__client_now_ns();
      snprintf(c->down_why, sizeof c->down_why, "%s", last_error);
      rc = 0;
    }
  } else {
    ember__client_set_error("unknown address '%s': expected unix:PATH, tcp:HOST:PORT "
                     "or embedded", c->address);
    rc = EMBER_EINVAL;
  }
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
  pthread_cond_broadcast(&c->slot_cv); /* a resubmit waiting for a slot */
  pthread_mutex_unlock(&c->lock);
  ember__remote_stop_resubmitter(c); /* parked tasks end as ECANCELED */
  ember__remote_shutdown(c);     /* in-flight remote tasks end as ECANCELED */
  nam_engine_destroy(c->engine); /* local ones too */
  HASH_CLEAR(hh, c->inflight_tasks); /* empty by now: frees the table */
  free(c->lease_body);
  free(c->lease_mac);
  sodium_memzero(c->lease_sk, sizeof c->lease_sk);
  pthread_cond_destroy(&c->slot_cv);
  pthread_cond_destroy(&c->reply_cv);
  pthread_cond_destroy(&c->park_cv);
  pthread_mutex_destroy(&c->request_lock);
  pthread_mutex_destroy(&c->connect_lock);
  pthread_mutex_destroy(&c->send_lock);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

void ember__client_lease_ended(ember_client *c) {
  pthread_mutex_lock(&c->lock);
  c->lease_ended = 1;
  pthread_cond_broadcast(&c->park_cv); /* parked tasks fall back now */
  /* the reader sees the end of the stream and hands the tasks in flight
   * to the fallback */
  if (c->fd >= 0) shutdown(c->fd, SHUT_RDWR);
  pthread_mutex_unlock(&c->lock);
}

int ember_is_connected(ember_client *c) {
  pthread_mutex_lock(&c->lock);
  int up = c->fd >= 0;
  pthread_mutex_unlock(&c->lock);
  return up;
}

const char *ember_client_address(const ember_client *c) { return c->address; }

void ember_client_get_stats(ember_client *c, ember_client_stats *out) {
  pthread_mutex_lock(&c->lock);
  ember_client_stats stats = c->stats;
  pthread_mutex_unlock(&c->lock);
  ember__struct_out(out, &stats, sizeof stats, EMBER__CLIENT_STATS_V0);
}
