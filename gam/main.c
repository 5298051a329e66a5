/*
 * main.c - ember-gam, the global accelerator manager: reads its config,
 * opens the state store, listens for NAMs and apps, serves the admin API,
 * and tells systemd when it is ready. SIGTERM/SIGINT stop it; SIGHUP
 * rereads the config file and applies the reloadable keys.
 */
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "admin_http.h"
#include "core.h"
#include "daemon.h"
#include "ember/ember_errors.h"
#include "gam_config.h"
#include "log.h"
#include "server.h"
#include "store.h"
#include "store_writer.h"

typedef struct gam_daemon {
  uv_loop_t *loop;
  const char *create_key;    /* --create-key FILE */
  struct gam_config cfg;
  gam_store *store;
  gam_writer *writer;
  gam_core *core;
  gam_server *server;
  gam_admin_http *admin;
  lease_key key;             /* the cluster key: leases, NAMs' Register */
  gam_conn_stats conn_stats; /* the protocol port's, for /metrics */
} gam_daemon;

/* static_partition's LABEL=NODE items, split in place into rules. */
static gam_static_rule *parse_rules(const config_list *l) {
  gam_static_rule *rules = calloc(l->count ? l->count : 1, sizeof *rules);
  for (size_t i = 0; rules && i < l->count; i++) {
    char *eq = strchr(l->items[i], '=');
    *eq = '\0';
    rules[i].label = l->items[i];
    rules[i].node = eq + 1;
  }
  return rules;
}

/* One descriptor per connection: raise the soft limit toward
 * max_connections and the admin API's admin_max_connections (the unit's
 * LimitNOFILE sets the hard one). */
static void raise_fd_limit(unsigned max_connections, unsigned admin) {
  struct rlimit rl;
  rlim_t want = (rlim_t)max_connections + admin + 64;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want) return;
  rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want
                    ? want : rl.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < want)
    log_warn("open files limited to %llu: fewer than max_connections = %u "
             "NAMs and apps and admin_max_connections = %u admin clients can "
             "connect", (unsigned long long)rl.rlim_cur, max_connections,
             admin);
}

static int start(void *user, uv_loop_t *loop) {
  gam_daemon *d = user;
  char err[1024];
  d->loop = loop;
  raise_fd_limit((unsigned)d->cfg.max_connections,
                 d->cfg.admin_listen[0]
                     ? (unsigned)d->cfg.admin_max_connections : 0u);
  gam_startups su;
  if (gam_startups_parse(d->cfg.max_startups, &su, err, sizeof err) != 0) {
    log_err("max_startups: %s", err);  /* the table checked it already */
    return -1;
  }
  gam_core_options o = {0};
  int rc = lease_key_load(d->cfg.cluster_key_file, &d->key, err, sizeof err);
  if (rc) {
    log_err("cluster key: %s (create one with ember-gam --create-key FILE)",
            err);
    return -1;
  }
  o.key = d->key;
  rc = gam_store_open(d->cfg.database, &d->store, err, sizeof err);
  if (!rc && gam_store_set_max_size(d->store, d->cfg.database_max_size)) {
    snprintf(err, sizeof err, "database_max_size: %s",
             gam_store_error(d->store));
    rc = EMBER_EIO;
  }
  if (rc) {
    log_err("state store: %s", err);
    return -1;
  }
  rc = gam_writer_start(d->store, &d->writer, err, sizeof err);
  if (rc) {
    log_err("state store: %s", err);
    return -1;
  }
  o.writer = d->writer;
  gam_static_rule *rules = parse_rules(&d->cfg.static_partition);
  if (!rules) return -1;
  o.policy.kind = (gam_policy_kind)d->cfg.policy;
  o.policy.delay_max_skips = (unsigned)d->cfg.delay_max_skips;
  o.policy.rules = rules;
  o.policy.n_rules = d->cfg.static_partition.count;
  o.heartbeat_interval_ms = d->cfg.heartbeat_interval_ms;
  o.lost_after = (unsigned)d->cfg.lost_after;
  o.slots_per_node = (unsigned)d->cfg.slots_per_node;
  o.lease_ttl_ms = d->cfg.lease_ttl_ms;
  o.acquire_timeout_ms = d->cfg.acquire_timeout_ms;
  o.app_grace_ms = d->cfg.app_grace_ms;
  o.version = EMBER_VERSION;
  o.conn_stats = &d->conn_stats;
  rc = gam_core_create(&o, d->store, &d->core, err, sizeof err);
  /* the core copied the rules; the strings are the config's */
  free(rules);
  if (rc) {
    log_err("state: %s", err);
    return -1;
  }
  gam_server_options so = {
    .listen = d->cfg.listen,
    .max_frame = d->cfg.max_frame,
    .max_connections = (unsigned)d->cfg.max_connections,
    .tick_ms = d->cfg.heartbeat_interval_ms / 4 ? d->cfg.heartbeat_interval_ms / 4 : 1,
    .heartbeat_interval_ms = d->cfg.heartbeat_interval_ms,
    .nam_silent_ms = d->cfg.heartbeat_interval_ms * (uint64_t)d->cfg.lost_after,
    .key = &d->key,
    .writer = d->writer,
    .max_per_address = (unsigned)d->cfg.max_connections_per_address,
    .startups_start = su.start,
    .startups_rate = su.rate,
    .startups_full = su.full,
    .startups_per_address = (unsigned)d->cfg.max_startups_per_address,
    .handshake_ms = d->cfg.handshake_timeout_ms,
    .frame_ms = d->cfg.frame_timeout_ms,
    .idle_ms = d->cfg.idle_timeout_ms,
    .max_read_buffers = d->cfg.max_read_buffers,
    .stats = &d->conn_stats,
  };
  if (gam_server_start(d->loop, d->core, &so, &d->server, err, sizeof err)) {
    log_err("cannot listen: %s", err);
    return -1;
  }
  log_notice("listening on %s (policy %s)", d->cfg.listen,
             gam_policy_name(o.policy.kind));
  if (d->cfg.admin_listen[0]) {
    gam_admin_http_options ao = {
      .address = d->cfg.admin_listen,
      .token_file = d->cfg.admin_token_file,
      .timeout_s = (unsigned)((d->cfg.admin_timeout_ms + 999) / 1000),
      .max_connections = (unsigned)d->cfg.admin_max_connections,
      .max_per_ip = (unsigned)d->cfg.admin_max_connections_per_ip,
      .threads = (unsigned)d->cfg.admin_threads,
    };
    if (gam_admin_http_start(d->core, &ao, &d->admin, err, sizeof err) != 0) {
      log_err("admin API: %s", err);
      return -1;
    }
    log_notice("admin API on http://%s/v1/status", d->cfg.admin_listen);
  }
  return 0;
}

static void shutdown_all(void *user) {
  gam_daemon *d = user;
  gam_admin_http_stop(d->admin);
  d->admin = NULL;
  gam_server_close(d->server);
  daemon_close_handles(d->loop);
  gam_server_destroy(d->server);
  gam_core_destroy(d->core);
  gam_writer_stop(d->writer);  /* commits what is left */
  gam_store_close(d->store);
}

static int take_create_key(void *user, const char *path) {
  gam_daemon *d = user;
  d->create_key = path;
  return 0;
}

/* --create-key: write the key instead of running. */
static int create_key(void *user) {
  gam_daemon *d = user;
  if (!d->create_key) return -1;
  char err[512];
  if (lease_key_create(d->create_key, err, sizeof err) != 0) {
    fprintf(stderr, "ember-gam: %s\n", err);
    return 1;
  }
  return 0;
}

static const daemon_spec gam_spec = {
  .name = "ember-gam",
  .version = EMBER_VERSION,
  .about = "The ember global accelerator manager: NAMs register (proving\n"
           "they hold the cluster key) and heartbeat, apps acquire nodes by\n"
           "label (delay scheduling by accelerator affinity) and get leases\n"
           "bound to their own key, which only they can release, admins use\n"
           "the HTTP API (emberctl). Connections that have not said Hello\n"
           "have a budget of their own (max_startups), each client address\n"
           "a limit, and the handshake, frames and idle connections\n"
           "timeouts.",
  .signals = "Signals: SIGTERM/SIGINT exit (state is always on disk); SIGHUP\n"
             "rereads the config file and applies the reloadable keys.",
  .default_path = GAM_CONFIG_DEFAULT_PATH,
  .table = gam_config_table,
  .example_header = GAM_CONFIG_EXAMPLE_HEADER,
  .cfg_size = sizeof(struct gam_config),
  .options = {
    {.name = "create-key", .arg = "FILE",
     .help = "write a fresh cluster key (mode 0600) and exit",
     .take = take_create_key},
  },
  .instead = create_key,
  .start = start,
  .shutdown = shutdown_all,
};

int main(int argc, char **argv) {
  gam_daemon d = {0};
  return daemon_main(&gam_spec, &d.cfg, &d, argc, argv);
}
