/*
 * daemon.h - the skeleton that ember-nam and ember-gam share: the command
 * line, the configuration (file, --set, --check-config, --print-config*),
 * logging, signals as loop events and systemd's notifications.
 *
 * A daemon describes itself in one const daemon_spec (its name, config
 * table, own options and hooks) and hands main() to daemon_main(), which
 *   1. reads the options: -c/--config FILE, -s/--set KEY=VALUE (at most
 *      DAEMON_MAX_SETS), --check-config, --print-config,
 *      --print-config-example, -h/--help, -V/--version and the daemon's own
 *      (spec->options);
 *   2. --print-config-example: writes the example config, exits 0;
 *   3. runs spec->instead (an option that acts and exits, --create-key);
 *   4. loads the config: defaults, the file (--config, else the default
 *      path when it is readable), then each --set; an error is printed as
 *      "NAME: file:line: reason" and exits 1;
 *   5. --check-config / --print-config: says so or prints it, exits 0;
 *   6. sets the log level, ignores SIGPIPE, calls spec->start on the
 *      default loop (failure: spec->shutdown, exit 1);
 *   7. SIGTERM/SIGINT: STOPPING=1, then spec->drain (none: the loop stops);
 *      a second one stops the loop at once. SIGHUP: RELOADING=1, the file
 *      and the --set options are read again, the reloadable keys applied
 *      (each change logged), spec->reload, READY=1. With WATCHDOG_USEC set,
 *      a loop timer sends WATCHDOG=1 at half the interval;
 *   8. sends READY=1 and runs the loop; once it stops, spec->shutdown,
 *      then exits 0.
 * Exit codes: 0 done, 1 configuration or start failed, 2 bad usage.
 *
 * The config table must have a "log_level" key, a CONFIG_ENUM of the
 * LOG_LVL_* values (config_log_levels): it sets log_threshold.
 *
 * Threads: everything here, hooks included, runs on the loop thread.
 */
#ifndef EMBER_DAEMON_H
#define EMBER_DAEMON_H

#include <stddef.h>

#include <uv.h>

#include "config.h"

#define DAEMON_MAX_SETS 64     /* --set options */
#define DAEMON_MAX_OPTIONS 8   /* a daemon's own options */

/* One option of the daemon's own, shown in --help between the config
 * options and --help. */
typedef struct daemon_option {
  const char *name;      /* long name, without "--" */
  char short_name;       /* 0: none */
  const char *arg;       /* "FILE", "LABEL", ...; NULL: takes no argument */
  const char *help;      /* lines of at most 49 columns, "\n" between them */
  /* Take the option (arg NULL when it takes none). Returns 0, or prints
   * "NAME: reason" to stderr and returns the exit code (2). */
  int (*take)(void *user, const char *arg);
} daemon_option;

typedef struct daemon_spec {
  const char *name;           /* "ember-nam": messages, --help, --version */
  const char *version;
  const char *about;          /* --help, after the usage line */
  const char *signals;        /* --help, what the signals do */
  const char *default_path;   /* read when it exists and no --config */
  const config_entry *table;
  const char *example_header; /* of --print-config-example */
  size_t cfg_size;            /* the struct the table fills */
  daemon_option options[DAEMON_MAX_OPTIONS]; /* ends at a NULL name */

  /* Optional: after the options, before the config is read. Returns an
   * exit code to exit with, or -1 to go on. */
  int (*instead)(void *user);
  /* Open and listen on loop; 0, or -1 after logging why. */
  int (*start)(void *user, uv_loop_t *loop);
  /* Optional: after SIGHUP applied the reloadable keys to the config. */
  void (*reload)(void *user);
  /* Optional: SIGTERM or SIGINT (signum) asks to stop. The daemon finishes
   * its work, then calls uv_stop. None: the loop stops at once. */
  void (*drain)(void *user, int signum);
  /* Close what start opened (also after start failed part way); close
   * the loop's handles with daemon_close_handles. */
  void (*shutdown)(void *user);
} daemon_spec;

/*
 * daemon_main - run the daemon: see the steps above. cfg is the daemon's
 * config struct (zeroed; spec->cfg_size bytes), filled from spec->table
 * and freed before returning; user is passed to every hook.
 * Returns the process's exit code.
 */
int daemon_main(const daemon_spec *spec, void *cfg, void *user, int argc,
                char **argv);

/* daemon_close_handles - close every handle still open on loop and run
 * it until their close callbacks ran. */
void daemon_close_handles(uv_loop_t *loop);

#endif
