/* daemon.c - the daemons' shared skeleton: options, config, signals,
 * systemd (see daemon.h). */
#include "daemon.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "log.h"

/* getopt_long values of the long-only options; a daemon's own options
 * without a short name get OPT_OWN + their index. */
enum { OPT_CHECK = 256, OPT_PRINT, OPT_EXAMPLE, OPT_OWN };

/* One run: what the options said, the config and the loop's handles. */
typedef struct daemon_run {
  const daemon_spec *spec;
  void *cfg;
  void *user;
  const char *config_path;   /* NULL: defaults and --set only */
  const char *sets[DAEMON_MAX_SETS];
  int n_sets;
  int check, print, example; /* --check-config, --print-config(-example) */
  uv_loop_t *loop;
  uv_signal_t sig_term, sig_int, sig_hup;
  uv_timer_t watchdog;
  int stopping;              /* a SIGTERM or SIGINT came */
} daemon_run;

/* "  -l, --label LABEL" padded to the help column, then the help, its
 * further lines indented to that column. */
static void usage_option(FILE *out, const daemon_option *o) {
  char left[64];
  snprintf(left, sizeof left, "%c%c%c --%s%s%s", o->short_name ? '-' : ' ',
           o->short_name ? o->short_name : ' ', o->short_name ? ',' : ' ',
           o->name, o->arg ? " " : "", o->arg ? o->arg : "");
  fprintf(out, "  %-26s ", left);
  for (const char *p = o->help; *p; p++) {
    fputc(*p, out);
    if (*p == '\n') fprintf(out, "%29s", "");
  }
  fputc('\n', out);
}

static void usage(const daemon_spec *spec, FILE *out) {
  fprintf(out,
    "Usage: %s [OPTIONS]\n"
    "%s\n"
    "\n"
    "Options:\n"
    "  -c, --config FILE          read FILE (INI; default: none, or %s\n"
    "                             when it exists)\n"
    "  -s, --set KEY=VALUE        override one config key (repeatable)\n"
    "      --check-config         validate the configuration and exit\n"
    "      --print-config         print the effective configuration and exit\n"
    "      --print-config-example print the commented example config and exit\n",
    spec->name, spec->about, spec->default_path);
  for (int i = 0; i < DAEMON_MAX_OPTIONS && spec->options[i].name; i++)
    usage_option(out, &spec->options[i]);
  fprintf(out,
    "  -h, --help                 show this help\n"
    "  -V, --version              show the version\n"
    "\n"
    "%s\n"
    "Keys and defaults: %s --print-config-example\n",
    spec->signals, spec->name);
}

/* Build a config from defaults, the file, then the --set overrides. */
static int load_config(const daemon_run *r, void *cfg) {
  const daemon_spec *spec = r->spec;
  char err[1024];
  if (config_init(spec->table, cfg) != 0) return -1;
  if (r->config_path &&
      config_load_file(spec->table, cfg, r->config_path, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", spec->name, err);
    config_free(spec->table, cfg);
    return -1;
  }
  for (int i = 0; i < r->n_sets; i++)
    if (config_set(spec->table, cfg, r->sets[i], err, sizeof err) != 0) {
      fprintf(stderr, "%s: %s\n", spec->name, err);
      config_free(spec->table, cfg);
      return -1;
    }
  return 0;
}

/* The table's log_level key (daemon.h) decides what is logged. */
static void set_log_level(const daemon_run *r) {
  const config_entry *e = config_find(r->spec->table, "log_level");
  if (e) log_threshold = *(const int *)((const char *)r->cfg + e->offset);
}

/* getopt_long's value for the daemon's own option i. */
static int own_value(const daemon_spec *spec, int i) {
  return spec->options[i].short_name ? spec->options[i].short_name
                                     : OPT_OWN + i;
}

/* Take the daemon's own option that getopt_long returned as opt; returns
 * 0, or the exit code. */
static int take_own(daemon_run *r, int opt) {
  const daemon_spec *spec = r->spec;
  for (int i = 0; i < DAEMON_MAX_OPTIONS && spec->options[i].name; i++)
    if (opt == own_value(spec, i))
      return spec->options[i].take(r->user, optarg);
  usage(spec, stderr); /* getopt_long said what was wrong */
  return 2;
}

/* The options into r; returns -1 to go on, else the exit code. */
static int parse_options(daemon_run *r, int argc, char **argv) {
  const daemon_spec *spec = r->spec;
  struct option opts[8 + DAEMON_MAX_OPTIONS] = {
    {"config", required_argument, 0, 'c'},
    {"set", required_argument, 0, 's'},
    {"check-config", no_argument, 0, OPT_CHECK},
    {"print-config", no_argument, 0, OPT_PRINT},
    {"print-config-example", no_argument, 0, OPT_EXAMPLE},
    {"help", no_argument, 0, 'h'},
    {"version", no_argument, 0, 'V'},
  };
  char shorts[16 + 2 * DAEMON_MAX_OPTIONS] = "c:s:hV";
  size_t n = 7, ns = strlen(shorts);
  for (int i = 0; i < DAEMON_MAX_OPTIONS && spec->options[i].name; i++) {
    const daemon_option *o = &spec->options[i];
    opts[n++] = (struct option){o->name, o->arg ? required_argument
                                                : no_argument, 0,
                                own_value(spec, i)};
    if (o->short_name) {
      shorts[ns++] = o->short_name;
      if (o->arg) shorts[ns++] = ':';
    }
  }
  int opt, rc;
  while ((opt = getopt_long(argc, argv, shorts, opts, NULL)) != -1) {
    switch (opt) {
    case 'c': r->config_path = optarg; break;
    case 's':
      if (r->n_sets == DAEMON_MAX_SETS) {
        fprintf(stderr, "%s: at most %d --set options\n", spec->name,
                DAEMON_MAX_SETS);
        return 2;
      }
      r->sets[r->n_sets++] = optarg;
      break;
    case OPT_CHECK: r->check = 1; break;
    case OPT_PRINT: r->print = 1; break;
    case OPT_EXAMPLE: r->example = 1; break;
    case 'h': usage(spec, stdout); return 0;
    case 'V': printf("%s %s\n", spec->name, spec->version); return 0;
    default:
      if ((rc = take_own(r, opt)) != 0) return rc;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "%s: unexpected argument '%s'\n", spec->name, argv[optind]);
    usage(spec, stderr);
    return 2;
  }
  return -1;
}

static void on_watchdog(uv_timer_t *t) { sd_notify(0, "WATCHDOG=1"); }

static void on_terminate(uv_signal_t *sig, int signum) {
  daemon_run *r = sig->data;
  if (r->stopping) {
    log_notice("second %s: exiting now", strsignal(signum));
    uv_stop(r->loop);
    return;
  }
  r->stopping = 1;
  sd_notify(0, "STOPPING=1");
  if (r->spec->drain) {
    r->spec->drain(r->user, signum);
  } else {
    log_notice("%s: stopping", strsignal(signum));
    uv_stop(r->loop);
  }
}

static void note_reload(const char *key, int applied, void *user) {
  if (applied)
    log_notice("reload: %s changed", key);
  else
    log_warn("reload: %s changed but is not reloadable: restart to apply", key);
}

static void on_reload(uv_signal_t *sig, int signum) {
  daemon_run *r = sig->data;
  const daemon_spec *spec = r->spec;
  sd_notify(0, "RELOADING=1");
  void *fresh = calloc(1, spec->cfg_size);
  if (!fresh || load_config(r, fresh) != 0) {
    log_err("reload failed: keeping the running configuration");
  } else {
    config_reload(spec->table, r->cfg, fresh, note_reload, NULL);
    config_free(spec->table, fresh);
    set_log_level(r);
    if (spec->reload) spec->reload(r->user);
  }
  free(fresh);
  sd_notify(0, "READY=1");
}

/* Signals as loop events, and the watchdog when systemd asks for one. */
static void watch_signals(daemon_run *r) {
  uv_signal_init(r->loop, &r->sig_term);
  uv_signal_init(r->loop, &r->sig_int);
  uv_signal_init(r->loop, &r->sig_hup);
  r->sig_term.data = r->sig_int.data = r->sig_hup.data = r;
  uv_signal_start(&r->sig_term, on_terminate, SIGTERM);
  uv_signal_start(&r->sig_int, on_terminate, SIGINT);
  uv_signal_start(&r->sig_hup, on_reload, SIGHUP);
  uint64_t wd_usec = 0;
  if (sd_watchdog_enabled(0, &wd_usec) > 0 && wd_usec > 0) {
    uv_timer_init(r->loop, &r->watchdog);
    uv_timer_start(&r->watchdog, on_watchdog, wd_usec / 2000, wd_usec / 2000);
  }
}

static void close_walk(uv_handle_t *h, void *arg) {
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

void daemon_close_handles(uv_loop_t *loop) {
  uv_walk(loop, close_walk, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
}

int daemon_main(const daemon_spec *spec, void *cfg, void *user, int argc,
                char **argv) {
  daemon_run r = {.spec = spec, .cfg = cfg, .user = user};
  int rc = parse_options(&r, argc, argv);
  if (rc >= 0) return rc;
  if (r.example) {
    config_write_example(spec->table, stdout, spec->example_header);
    return 0;
  }
  if (spec->instead && (rc = spec->instead(user)) >= 0) return rc;
  if (!r.config_path && access(spec->default_path, R_OK) == 0)
    r.config_path = spec->default_path;
  if (load_config(&r, cfg) != 0) return 1;
  if (r.check || r.print) {
    if (r.print) config_dump(spec->table, cfg, stdout);
    if (r.check) printf("%s: configuration OK\n", spec->name);
    config_free(spec->table, cfg);
    return 0;
  }
  set_log_level(&r);
  signal(SIGPIPE, SIG_IGN);

  r.loop = uv_default_loop();
  rc = spec->start(user, r.loop);
  if (rc == 0) {
    watch_signals(&r);
    sd_notifyf(0, "READY=1\nSTATUS=serving\nMAINPID=%lu",
               (unsigned long)getpid());
    log_notice("%s %s ready", spec->name, spec->version);
    uv_run(r.loop, UV_RUN_DEFAULT);
  }
  spec->shutdown(user);
  config_free(spec->table, cfg);
  uv_loop_close(r.loop);
  if (rc != 0) return 1;
  log_notice("%s stopped", spec->name);
  return 0;
}
