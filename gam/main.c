/*
 * main.c - ember-gam, the global accelerator manager: reads its config,
 * opens the state store, listens for NAMs and apps, serves the admin API,
 * and tells systemd when it is ready. SIGTERM/SIGINT stop it; SIGHUP
 * rereads the config file and applies the reloadable keys.
 */
#include <getopt.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>
#include <uv.h>

#include "admin_http.h"
#include "core.h"
#include "ember/ember_errors.h"
#include "gam_config.h"
#include "log.h"
#include "server.h"
#include "store.h"
#include "store_writer.h"

#define MAX_SETS 64

typedef struct gam_daemon {
  uv_loop_t *loop;
  const char *config_path;
  const char *sets[MAX_SETS];
  int n_sets;
  struct gam_config cfg;
  gam_store *store;
  gam_writer *writer;
  gam_core *core;
  gam_server *server;
  gam_admin_http *admin;
  uv_signal_t sig_term, sig_int, sig_hup;
  uv_timer_t watchdog;
  int watchdog_on;
} gam_daemon;

static void usage(FILE *out) {
  fprintf(out,
    "Usage: ember-gam [OPTIONS]\n"
    "The ember global accelerator manager: NAMs register and heartbeat,\n"
    "apps acquire nodes by label (delay scheduling by accelerator\n"
    "affinity), admins use the HTTP API (emberctl).\n"
    "\n"
    "Options:\n"
    "  -c, --config FILE          read FILE (INI; default: none, or %s\n"
    "                             when it exists)\n"
    "  -s, --set KEY=VALUE        override one config key (repeatable)\n"
    "      --check-config         validate the configuration and exit\n"
    "      --print-config         print the effective configuration and exit\n"
    "      --print-config-example print the commented example config and exit\n"
    "      --create-key FILE      write a fresh cluster key (mode 0600) and exit\n"
    "  -h, --help                 show this help\n"
    "  -V, --version              show the version\n"
    "\n"
    "Signals: SIGTERM/SIGINT exit (state is always on disk); SIGHUP\n"
    "rereads the config file and applies the reloadable keys.\n"
    "Keys and defaults: ember-gam --print-config-example\n",
    GAM_CONFIG_DEFAULT_PATH);
}

static int load_config(gam_daemon *d, struct gam_config *cfg) {
  char err[1024];
  if (config_init(gam_config_table, cfg) != 0) return -1;
  if (d->config_path &&
      config_load_file(gam_config_table, cfg, d->config_path, err, sizeof err)) {
    fprintf(stderr, "ember-gam: %s\n", err);
    config_free(gam_config_table, cfg);
    return -1;
  }
  for (int i = 0; i < d->n_sets; i++)
    if (config_set(gam_config_table, cfg, d->sets[i], err, sizeof err) != 0) {
      fprintf(stderr, "ember-gam: %s\n", err);
      config_free(gam_config_table, cfg);
      return -1;
    }
  return 0;
}

static void on_watchdog(uv_timer_t *t) { sd_notify(0, "WATCHDOG=1"); }

static void on_terminate(uv_signal_t *sig, int signum) {
  gam_daemon *d = sig->data;
  log_notice("%s: stopping", strsignal(signum));
  sd_notify(0, "STOPPING=1");
  uv_stop(d->loop);
}

static void note_reload(const char *key, int applied, void *user) {
  if (applied) log_notice("reload: %s changed", key);
  else log_warn("reload: %s changed but is not reloadable: restart to apply",
                key);
}

static void on_reload(uv_signal_t *sig, int signum) {
  gam_daemon *d = sig->data;
  struct gam_config fresh = {0};
  sd_notify(0, "RELOADING=1");
  if (load_config(d, &fresh) != 0) {
    log_err("reload failed: keeping the running configuration");
  } else {
    config_reload(gam_config_table, &d->cfg, &fresh, note_reload, NULL);
    config_free(gam_config_table, &fresh);
    log_threshold = d->cfg.log_level;
  }
  sd_notify(0, "READY=1");
}

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
 * max_connections (the unit's LimitNOFILE sets the hard one). */
static void raise_fd_limit(unsigned max_connections) {
  struct rlimit rl;
  rlim_t want = (rlim_t)max_connections + 64;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want) return;
  rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want
                    ? want : rl.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < want)
    log_warn("open files limited to %llu: fewer than max_connections = %u "
             "NAMs and apps can connect", (unsigned long long)rl.rlim_cur,
             max_connections);
}

static int start(gam_daemon *d) {
  char err[1024];
  raise_fd_limit((unsigned)d->cfg.max_connections);
  gam_core_options o = {0};
  int rc = lease_key_load(d->cfg.cluster_key_file, &o.key, err, sizeof err);
  if (rc) {
    log_err("cluster key: %s (create one with ember-gam --create-key FILE)",
            err);
    return -1;
  }
  rc = gam_store_open(d->cfg.database, &d->store, err, sizeof err);
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
  o.version = EMBER_VERSION;
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
    .writer = d->writer,
  };
  if (gam_server_start(d->loop, d->core, &so, &d->server, err, sizeof err)) {
    log_err("cannot listen: %s", err);
    return -1;
  }
  log_notice("listening on %s (policy %s)", d->cfg.listen,
             gam_policy_name(o.policy.kind));
  if (d->cfg.admin_listen[0]) {
    if (gam_admin_http_start(d->core, d->cfg.admin_listen,
                             d->cfg.admin_token_file, &d->admin, err,
                             sizeof err) != 0) {
      log_err("admin API: %s", err);
      return -1;
    }
    log_notice("admin API on http://%s/v1/status", d->cfg.admin_listen);
  }
  return 0;
}

static void close_walk(uv_handle_t *h, void *arg) {
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

static void shutdown_all(gam_daemon *d) {
  gam_admin_http_stop(d->admin);
  d->admin = NULL;
  gam_server_close(d->server);
  uv_walk(d->loop, close_walk, NULL);
  uv_run(d->loop, UV_RUN_DEFAULT);
  gam_server_destroy(d->server);
  gam_core_destroy(d->core);
  gam_writer_stop(d->writer);  /* commits what is left */
  gam_store_close(d->store);
}

int main(int argc, char **argv) {
  static const struct option long_opts[] = {
    {"config", required_argument, 0, 'c'},
    {"set", required_argument, 0, 's'},
    {"check-config", no_argument, 0, 1},
    {"print-config", no_argument, 0, 2},
    {"print-config-example", no_argument, 0, 3},
    {"create-key", required_argument, 0, 4},
    {"help", no_argument, 0, 'h'},
    {"version", no_argument, 0, 'V'},
    {0, 0, 0, 0},
  };
  gam_daemon d = {0};
  int check = 0, print = 0, example = 0, opt;
  const char *create_key = NULL;
  while ((opt = getopt_long(argc, argv, "c:s:hV", long_opts, NULL)) != -1) {
    switch (opt) {
    case 'c': d.config_path = optarg; break;
    case 's':
      if (d.n_sets == MAX_SETS) {
        fprintf(stderr, "ember-gam: at most %d --set options\n", MAX_SETS);
        return 2;
      }
      d.sets[d.n_sets++] = optarg;
      break;
    case 1: check = 1; break;
    case 2: print = 1; break;
    case 3: example = 1; break;
    case 4: create_key = optarg; break;
    case 'h': usage(stdout); return 0;
    case 'V': printf("ember-gam %s\n", EMBER_VERSION); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "ember-gam: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  if (example) {
    config_write_example(gam_config_table, stdout, GAM_CONFIG_EXAMPLE_HEADER);
    return 0;
  }
  if (create_key) {
    char err[512];
    if (lease_key_create(create_key, err, sizeof err) != 0) {
      fprintf(stderr, "ember-gam: %s\n", err);
      return 1;
    }
    return 0;
  }
  if (!d.config_path && access(GAM_CONFIG_DEFAULT_PATH, R_OK) == 0)
    d.config_path = GAM_CONFIG_DEFAULT_PATH;
  if (load_config(&d, &d.cfg) != 0) return 1;
  if (check || print) {
    if (print) config_dump(gam_config_table, &d.cfg, stdout);
    if (check) printf("ember-gam: configuration OK\n");
    config_free(gam_config_table, &d.cfg);
    return 0;
  }
  log_threshold = d.cfg.log_level;
  signal(SIGPIPE, SIG_IGN);
  d.loop = uv_default_loop();
  if (start(&d) != 0) {
    shutdown_all(&d);
    config_free(gam_config_table, &d.cfg);
    uv_loop_close(d.loop);
    return 1;
  }
  uv_signal_init(d.loop, &d.sig_term);
  uv_signal_init(d.loop, &d.sig_int);
  uv_signal_init(d.loop, &d.sig_hup);
  d.sig_term.data = d.sig_int.data = d.sig_hup.data = &d;
  uv_signal_start(&d.sig_term, on_terminate, SIGTERM);
  uv_signal_start(&d.sig_int, on_terminate, SIGINT);
  uv_signal_start(&d.sig_hup, on_reload, SIGHUP);
  uint64_t wd_usec = 0;
  if (sd_watchdog_enabled(0, &wd_usec) > 0 && wd_usec > 0) {
    uv_timer_init(d.loop, &d.watchdog);
    uv_timer_start(&d.watchdog, on_watchdog, wd_usec / 2000, wd_usec / 2000);
  }
  sd_notifyf(0, "READY=1\nSTATUS=serving\nMAINPID=%lu", (unsigned long)getpid());
  log_notice("ember-gam %s ready", EMBER_VERSION);
  uv_run(d.loop, UV_RUN_DEFAULT);
  shutdown_all(&d);
  config_free(gam_config_table, &d.cfg);
  uv_loop_close(d.loop);
  log_notice("ember-gam stopped");
  return 0;
}
