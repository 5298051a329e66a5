/*
 * main.c - ember-nam, the node accelerator manager: reads its config, starts
 * the engine, listens, tells systemd when it is ready, and on SIGTERM drains
 * the tasks in flight before it exits. SIGHUP rereads the config file.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <uv.h>

#include "daemon.h"
#include "ember/ember_errors.h"
#include "engine.h"
#include "engine_setup.h"
#include "frame.h"
#include "gam_link.h"
#include "lease_check.h"
#include "log.h"
#include "metrics_http.h"
#include "nam_config.h"
#include "node_labels.h"
#include "platform_kinds.h"
#include "server.h"
#include "stats.h"

#define MAX_LABEL_FLAGS 64

typedef struct nam_daemon {
  uv_loop_t *loop;
  const char *label_flags[MAX_LABEL_FLAGS]; /* --label */
  int n_label_flags;
  struct nam_config cfg;
  nam_engine_setup setup;    /* the engine's config, alive with it */
  nam_engine *engine;
  nam_server *server;
  nam_metrics_http *metrics;   /* NULL: metrics_listen is empty */
  nam_node_labels labels;    /* offered at the GAM, checked in leases */
  nam_gam_link *gam;         /* NULL: standalone */
  uv_timer_t drain_timer;
  int drain_expired;         /* drain_timeout passed with tasks running */
  int started;               /* start() finished: listening, platforms open */
  int draining;              /* SIGTERM came: /readyz says 503 */
} nam_daemon;

/* Descriptors the daemon keeps for itself besides its clients' (listeners,
 * the log, the engine's devices and plugins, the GAM link, a memfd being
 * mapped): a generous allowance. */
#define NAM_OWN_FDS 128

/* max_startups, with FULL kept below max_clients (at most three quarters
 * of it): clients through their Hello always have room. */
static void startups_of(const struct nam_config *cfg, nam_server_limits *l) {
  unsigned start = 0, rate = 0, full = 0;
  if (nam_startups_parse(cfg->max_startups, &start, &rate, &full, NULL, 0))
    return; /* the table checked it */
  unsigned cap = (unsigned)cfg->max_clients - (unsigned)cfg->max_clients / 4;
  if (full > cap) {
    log_notice("max_startups %s: FULL %u is over three quarters of "
               "max_clients (%d): using %u", cfg->max_startups, full,
               cfg->max_clients, cap);
    full = cap;
    if (start > full) start = full;
  }
  l->startups_start = start;
  l->startups_rate = rate;
  l->startups_full = full;
}

/* The descriptors max_clients clients may make the NAM hold: each its
 * socket and max_client_fds waiting, one message's more while it is read,
 * the metrics connections and the daemon's own. */
static unsigned long long fds_needed(const struct nam_config *cfg) {
  return (unsigned long long)cfg->max_clients * (1 + (unsigned)cfg->max_client_fds) +
         PROTO_MAX_FDS_PER_SEND + (unsigned)cfg->metrics_max_connections +
         NAM_OWN_FDS;
}

/* What RLIMIT_NOFILE leaves the clients (max_fds): all but the daemon's
 * own and the metrics connections, or half of it when that is less. */
static unsigned client_fds_of(const struct nam_config *cfg) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return 0;
  unsigned long long own =
      NAM_OWN_FDS + (unsigned long long)cfg->metrics_max_connections;
  unsigned long long n = rl.rlim_cur > 2 * own ? rl.rlim_cur - own
                                               : rl.rlim_cur / 2;
  return n > UINT_MAX ? UINT_MAX : (unsigned)n;
}

/* RLIMIT_NOFILE: the soft limit goes up to the hard one (libuv polls with
 * epoll: no select() limit to keep), and a warning says when even that is
 * less than the limits need. */
static void check_nofile(const struct nam_config *cfg, int raise) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (raise && rl.rlim_cur < rl.rlim_max) {
    struct rlimit up = {.rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &up) == 0)
      rl = up;
    else
      log_warn("cannot raise RLIMIT_NOFILE from %llu to %llu: %s",
               (unsigned long long)rl.rlim_cur,
               (unsigned long long)rl.rlim_max, strerror(errno));
  }
  unsigned long long need = fds_needed(cfg);
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)
    log_warn("RLIMIT_NOFILE is %llu, but max_clients (%d) clients with "
             "max_client_fds (%d) file descriptors each, %d metrics "
             "connections and the NAM's own need %llu: raise LimitNOFILE "
             "(ulimit -n) or lower max_clients; clients get at most %u "
             "descriptors, and new ones are refused past that",
             (unsigned long long)rl.rlim_cur, cfg->max_clients,
             cfg->max_client_fds, cfg->metrics_max_connections, need,
             client_fds_of(cfg));
  else
    log_info("RLIMIT_NOFILE %llu: room for the %llu descriptors the limits "
             "need", (unsigned long long)rl.rlim_cur, need);
}

/* max_memory = 0: half of the machine's memory (0, no bound, if it
 * cannot be read). */
static uint64_t max_memory_of(const struct nam_config *cfg) {
  if (cfg->max_memory) return cfg->max_memory;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page / 2 : 0;
}

static nam_server_limits limits_of(const struct nam_config *cfg) {
  nam_server_limits l = {
    .max_frame = cfg->max_frame,
    .max_clients = (unsigned)cfg->max_clients,
    .max_inflight = (unsigned)cfg->max_inflight,
    .max_block_bytes = cfg->max_block_bytes,
    .max_memory = max_memory_of(cfg),
    .max_clients_unix = (unsigned)cfg->max_clients_unix,
    .max_clients_tcp = (unsigned)cfg->max_clients_tcp,
    .max_send_queue = cfg->max_send_queue,
    .send_stall_ms = cfg->send_stall_timeout_ms,
    .handshake_ms = cfg->handshake_timeout_ms,
    .frame_ms = cfg->frame_timeout_ms,
    .idle_ms = cfg->idle_timeout_ms,
    .max_client_fds = (unsigned)cfg->max_client_fds,
    .max_fds = client_fds_of(cfg),
    .max_clients_per_uid = (unsigned)cfg->max_clients_per_uid,
    .max_clients_per_address = (unsigned)cfg->max_clients_per_address,
  };
  startups_of(cfg, &l);
  return l;
}

static void stop_loop(nam_daemon *d) {
  uv_timer_stop(&d->drain_timer);
  uv_stop(d->loop);
}

static void on_idle(nam_server *s, void *user) {
  nam_daemon *d = user;
  log_notice("drained: no task in flight, exiting");
  stop_loop(d);
}

static void on_drain_timeout(uv_timer_t *t) {
  nam_daemon *d = t->data;
  log_warn("drain_timeout passed with tasks still in flight: exiting");
  d->drain_expired = 1;
  stop_loop(d);
}

/* SIGTERM/SIGINT: tasks in flight finish, up to drain_timeout. */
static void drain(void *user, int signum) {
  nam_daemon *d = user;
  log_notice("%s: draining in-flight tasks (up to %llu ms)", strsignal(signum),
             (unsigned long long)d->cfg.drain_timeout_ms);
  d->draining = 1;
  uv_timer_start(&d->drain_timer, on_drain_timeout, d->cfg.drain_timeout_ms, 0);
  nam_server_drain(d->server, on_idle, d);
}

/* fpga-emu.fail_rate and hang_rate apply to the running boards. */
static void apply_fault_rates(nam_daemon *d) {
  double fail = 0, hang = 0;
  if (nam_rate_parse(d->cfg.fpga_fail_rate, &fail, NULL, 0) ||
      nam_rate_parse(d->cfg.fpga_hang_rate, &hang, NULL, 0) ||
      nam_engine_set_fault_rates(d->engine, fail, hang) != 0)
    log_err("reload: fpga-emu.fail_rate %s and hang_rate %s not applied "
            "(their sum must be at most 1)", d->cfg.fpga_fail_rate,
            d->cfg.fpga_hang_rate);
}

/* SIGHUP applied the reloadable keys: pass on those the config struct
 * does not carry by itself. */
static void reload(void *user) {
  nam_daemon *d = user;
  nam_server_limits l = limits_of(&d->cfg);
  nam_server_set_limits(d->server, &l);
  check_nofile(&d->cfg, 0);
  apply_fault_rates(d);
}

/* Loop thread: the text GET /metrics serves. */
static int render_metrics(void *user, char **text, size_t *len) {
  nam_daemon *d = user;
  return nam_stats_render(nam_server_metrics(d->server), d->server, d->engine,
                          text, len);
}

/* Loop thread: what GET /readyz says. */
static int ready_now(void *user, char *why, size_t why_len) {
  nam_daemon *d = user;
  if (d->draining) {
    snprintf(why, why_len, "draining");
    return 0;
  }
  if (!d->started) {
    snprintf(why, why_len, "starting");
    return 0;
  }
  nam_platform_status ps[16];
  size_t np = nam_engine_platforms(d->engine, ps, 16);
  for (size_t i = 0; i < np; i++)
    if (strcmp(ps[i].state, "ready") == 0) return 1;
  snprintf(why, why_len, "no platform is ready");
  return 0;
}

/* Lease checks ask whether the node serves a label now. */
static int label_served(void *user, const char *label) {
  nam_daemon *d = user;
  nam_disabled dis;
  nam_disabled_now(d->engine, &dis);
  return nam_label_served(&d->labels, &dis, label);
}

/* advertise, or tcp: of the first tcp listen address (a wildcard address
 * replaced by the host name: apps elsewhere cannot use 0.0.0.0). */
static void advertised_address(const nam_daemon *d, char *out, size_t len) {
  out[0] = '\0';
  if (d->cfg.advertise[0]) {
    snprintf(out, len, "%s", d->cfg.advertise);
    return;
  }
  for (size_t i = 0; i < d->cfg.listen.count; i++) {
    nam_listen_addr a;
    if (nam_listen_parse(d->cfg.listen.items[i], &a, NULL, 0) || a.is_unix)
      continue;
    char host[256];
    if (strcmp(a.host, "0.0.0.0") == 0 || strcmp(a.host, "::") == 0) {
      if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
    } else {
      snprintf(host, sizeof host, strchr(a.host, ':') ? "[%s]" : "%s", a.host);
    }
    snprintf(out, len, "tcp:%s:%d", host, a.port);
    return;
  }
}

/* Labels, lease checking and the GAM link, once the server listens. */
static int start_cluster(nam_daemon *d) {
  char err[512];
  if (nam_node_labels_build(d->engine, &d->cfg.labels, d->label_flags,
                            (size_t)d->n_label_flags, &d->labels) != 0)
    log_warn("more than %d labels: the rest are not offered", NAM_MAX_LABELS);
  if (d->cfg.cluster_key_file[0]) {
    int rc = nam_lease_check_start(d->server, d->cfg.cluster_key_file,
                                   nam_server_name(d->server), label_served,
                                   d, err, sizeof err);
    if (rc) {
      log_err("cluster_key_file: %s", err);
      return -1;
    }
    log_notice("TCP clients need a lease signed with %s",
               d->cfg.cluster_key_file);
  }
  if (!d->cfg.gam[0]) return 0;
  /* the GAM registers only NAMs that hold the cluster key */
  lease_key key;
  if (!d->cfg.cluster_key_file[0]) {
    log_err("gam is set but cluster_key_file is not: the GAM registers only "
            "NAMs that hold the cluster key");
    return -1;
  }
  if (lease_key_load(d->cfg.cluster_key_file, &key, err, sizeof err) != 0) {
    log_err("cluster_key_file: %s", err);
    return -1;
  }
  char address[320];
  advertised_address(d, address, sizeof address);
  if (!address[0])
    log_warn("no tcp listen address and no advertise: the GAM cannot send "
             "apps here");
  nam_gam_link_config lc = {
    .gam = d->cfg.gam, .node = nam_server_name(d->server),
    .address = address, .labels = &d->labels,
    .interval_ms = d->cfg.heartbeat_interval_ms, .version = EMBER_VERSION,
    .key = &key,
  };
  int rc = nam_gam_link_start(d->loop, d->server, d->engine, &lc, &d->gam,
                              err, sizeof err);
  memset(&key, 0, sizeof key); /* the link keeps its copy */
  if (rc != 0) {
    log_err("gam: %s", err);
    return -1;
  }
  log_notice("reporting to the GAM at %s as %s", d->cfg.gam,
             nam_server_name(d->server));
  return 0;
}

static int start(void *user, uv_loop_t *loop) {
  nam_daemon *d = user;
  char err[512];
  d->loop = loop;
  uv_timer_init(loop, &d->drain_timer);
  d->drain_timer.data = d;
  int rc = nam_engine_setup_build(&d->cfg, &d->setup, err, sizeof err);
  if (rc) {
    log_err("configuration: %s", rc == EMBER_ECONFIG ? err : ember_strerror(rc));
    return -1;
  }
  rc = nam_engine_create(&d->setup.engine, &d->engine);
  if (rc) {
    log_err("cannot start the engine: %s", ember_strerror(rc));
    return -1;
  }
  char name[256];
  if (d->cfg.node_name && d->cfg.node_name[0])
    snprintf(name, sizeof name, "%s", d->cfg.node_name);
  else if (gethostname(name, sizeof name) != 0)
    strcpy(name, "ember-nam");
  check_nofile(&d->cfg, 1);
  nam_server_limits l = limits_of(&d->cfg);
  log_info("clients may make the NAM hold %llu MiB in all (max_memory), "
           "%llu MiB each (max_block_bytes)",
           (unsigned long long)(l.max_memory >> 20),
           (unsigned long long)(l.max_block_bytes >> 20));
  if (nam_server_create(d->loop, d->engine, &l, name, &d->server) != 0) return -1;
  for (size_t i = 0; i < d->cfg.listen.count; i++) {
    const char *addr = d->cfg.listen.items[i];
    if (nam_server_listen(d->server, addr, (unsigned)d->cfg.socket_mode,
                          d->cfg.socket_group, err, sizeof err) != 0) {
      log_err("cannot listen: %s", err);
      return -1;
    }
    log_notice("listening on %s", addr);
  }
  if (d->cfg.metrics_listen[0]) {
    nam_metrics_http_options mo = {
      .address = d->cfg.metrics_listen,
      .timeout_s = (unsigned)((d->cfg.metrics_timeout_ms + 999) / 1000),
      .max_connections = (unsigned)d->cfg.metrics_max_connections,
      .max_per_ip = (unsigned)d->cfg.metrics_max_connections_per_ip,
      .threads = (unsigned)d->cfg.metrics_threads,
      .render = render_metrics, .ready = ready_now, .user = d,
    };
    if (nam_metrics_http_start(d->loop, &mo, &d->metrics, err, sizeof err) != 0) {
      log_err("cannot serve metrics: %s", err);
      return -1;
    }
    log_notice("metrics on http://%s/metrics", d->cfg.metrics_listen);
  }
  if (start_cluster(d) != 0) return -1;
  nam_platform_status ps[16];
  size_t np = nam_engine_platforms(d->engine, ps, 16);
  for (size_t i = 0; i < np; i++)
    log_notice("platform %s (%s%s%s): %u %s", ps[i].name, ps[i].kind,
               ps[i].device[0] ? ", " : "", ps[i].device, ps[i].workers,
               platform_kind_is_device(ps[i].kind) ? "tasks in flight"
                                                   : "workers");
  d->started = 1;
  return 0;
}

static void shutdown_all(void *user) {
  nam_daemon *d = user;
  if (d->drain_expired) {
    /* a task that outlived drain_timeout may never end (a hung device):
     * joining its worker could block forever, so leave without it */
    log_notice("ember-nam stopped (tasks abandoned)");
    _exit(0);
  }
  /* every task ends first (queued ones canceled), then their results go
   * out to the clients still connected, then the sockets close; the
   * metrics thread stops first, while the engine it reports on is there */
  nam_metrics_http_close(d->metrics);
  nam_gam_link_close(d->gam); /* it reads the engine and the server */
  d->gam = NULL;
  if (d->server) nam_lease_check_close(d->server);
  nam_engine_destroy(d->engine);
  d->engine = NULL;
  nam_engine_setup_free(&d->setup);
  if (d->server) {
    nam_server_forget_engine(d->server);
    nam_server_flush(d->server);
    nam_server_close(d->server);
  }
  daemon_close_handles(d->loop);
  nam_metrics_http_destroy(d->metrics);
  nam_server_destroy(d->server);
}

static int take_label(void *user, const char *label) {
  nam_daemon *d = user;
  if (!nam_label_valid(label)) {
    fprintf(stderr, "ember-nam: --label '%s': a label is 1 to 64 letters, "
            "digits, '_', '.', '-' or '@'\n", label);
    return 2;
  }
  if (d->n_label_flags == MAX_LABEL_FLAGS) {
    fprintf(stderr, "ember-nam: at most %d --label options\n",
            MAX_LABEL_FLAGS);
    return 2;
  }
  d->label_flags[d->n_label_flags++] = label;
  return 0;
}

static const daemon_spec nam_spec = {
  .name = "ember-nam",
  .version = EMBER_VERSION,
  .about = "The ember node accelerator manager: serves accelerator tasks to\n"
           "libember clients over a unix socket and optionally TCP.",
  .signals = "Signals: SIGTERM/SIGINT drain in-flight tasks, then exit; SIGHUP\n"
             "rereads the config file and applies the reloadable keys.",
  .default_path = NAM_CONFIG_DEFAULT_PATH,
  .table = nam_config_table,
  .example_header = NAM_CONFIG_EXAMPLE_HEADER,
  .cfg_size = sizeof(struct nam_config),
  .options = {
    {.name = "label", .short_name = 'l', .arg = "LABEL",
     .help = "offer LABEL at the GAM, besides the labels\nkey (repeatable)",
     .take = take_label},
  },
  .start = start,
  .reload = reload,
  .drain = drain,
  .shutdown = shutdown_all,
};

int main(int argc, char **argv) {
  nam_daemon d = {0};
  return daemon_main(&nam_spec, &d.cfg, &d, argc, argv);
}
