/*
 * emberctl.c - the admin CLI of ember-gam: options, --help, --version and
 * the dispatch to the commands (ctl_nodes.c, ctl_apps.c).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "ctl.h"

#ifndef EMBER_VERSION
#error "EMBER_VERSION must be defined by the build"
#endif

static const ctl_command *const commands[] = {
    &ctl_cmd_status, &ctl_cmd_nodes,   &ctl_cmd_node, &ctl_cmd_label,
    &ctl_cmd_drain,  &ctl_cmd_undrain, &ctl_cmd_apps, &ctl_cmd_events,
};
#define N_COMMANDS (sizeof commands / sizeof *commands)

static void verror(const char *fmt, va_list ap) {
  fputs("emberctl: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
}

int ctl_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verror(fmt, ap);
  va_end(ap);
  return CTL_FAIL;
}

int ctl_usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verror(fmt, ap);
  va_end(ap);
  fputs("Try 'emberctl --help' for the commands and options.\n", stderr);
  return CTL_USAGE;
}

static void usage(FILE *f) {
  fputs("Usage: emberctl [OPTIONS] COMMAND [ARGS]\n"
        "\n"
        "Look at and change an ember cluster through ember-gam's admin API.\n"
        "\n"
        "Commands:\n", f);
  for (size_t i = 0; i < N_COMMANDS; i++) {
    char both[64];
    snprintf(both, sizeof both, "%s %s", commands[i]->name, commands[i]->args);
    fprintf(f, "  %-26s %s\n", both, commands[i]->summary);
  }
  fputs("\n"
        "Options (before or after the command):\n"
        "  -g, --gam URL          ember-gam's admin API (default\n"
        "                         $EMBER_GAM_ADMIN, else\n"
        "                         " CTL_DEFAULT_GAM ")\n"
        "  -t, --token-file FILE  the bearer token, for changes only (default\n"
        "                         $EMBER_GAM_TOKEN_FILE, else\n"
        "                         " CTL_DEFAULT_TOKEN_FILE ")\n"
        "  -j, --json             print the server's JSON (indented)\n"
        "      --timeout SECONDS  give up after this long (default 10)\n"
        "  -h, --help             show this help; after a command, its own\n"
        "  -V, --version          show the version\n"
        "\n"
        "Environment: EMBER_GAM_ADMIN (the admin API's URL),\n"
        "EMBER_GAM_TOKEN_FILE. (EMBER_GAM is the GAM's binary HOST:PORT for\n"
        "libember's ember_cluster_acquire; emberctl does not read it.)\n"
        "\n"
        "Exit status: 0 on success, 1 when the GAM cannot be reached or\n"
        "answers an error, 2 on bad usage.\n", f);
}

/* `emberctl COMMAND --help` */
static void command_usage(const ctl_command *cmd) {
  printf("Usage: emberctl [OPTIONS] %s%s%s\n\n%c%s.\n\n%s\n"
         "Options: see 'emberctl --help'.\n",
         cmd->name, cmd->args[0] ? " " : "", cmd->args,
         toupper((unsigned char)cmd->summary[0]), cmd->summary + 1,
         cmd->details);
}

static const ctl_command *find_command(const char *name) {
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (strcmp(commands[i]->name, name) == 0) return commands[i];
  return NULL;
}

/* SECONDS, a number in (0, 3600], into milliseconds. */
static int parse_timeout(const char *text, long *ms) {
  char *end;
  errno = 0;
  double s = strtod(text, &end);
  if (end == text || *end || errno || !(s > 0 && s <= 3600))
    return ctl_usage_error("--timeout: '%s' is not a number of seconds "
                           "above 0, at most 3600", text);
  *ms = (long)(s * 1000 + 0.5);
  if (*ms < 1) *ms = 1;
  return 0;
}

/* The base URL without trailing slashes; "HOST:PORT" gets "http://". */
static char *base_url(const char *gam) {
  size_t n = strlen(gam);
  while (n > 0 && gam[n - 1] == '/') n--;
  char *url = NULL;
  if (asprintf(&url, "%s%.*s", strstr(gam, "://") ? "" : "http://", (int)n,
               gam) < 0)
    return NULL;
  return url;
}

int main(int argc, char **argv) {
  static const struct option long_opts[] = {
      {"gam", required_argument, NULL, 'g'},
      {"token-file", required_argument, NULL, 't'},
      {"json", no_argument, NULL, 'j'},
      {"timeout", required_argument, NULL, 'T'},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0},
  };
  const char *gam = getenv("EMBER_GAM_ADMIN");
  const char *token_file = getenv("EMBER_GAM_TOKEN_FILE");
  ctl_options o = {
      .token_file = token_file && token_file[0] ? token_file
                                                : CTL_DEFAULT_TOKEN_FILE,
      .timeout_ms = 10000,
  };
  gam = gam && gam[0] ? gam : CTL_DEFAULT_GAM;
  opterr = 0;
  bool help = false;
  int c;
  while ((c = getopt_long(argc, argv, ":g:t:jhV", long_opts, NULL)) != -1) {
    switch (c) {
    case 'g': gam = optarg; break;
    case 't': o.token_file = optarg; break;
    case 'j': o.json = true; break;
    case 'T':
      if (parse_timeout(optarg, &o.timeout_ms)) return CTL_USAGE;
      break;
    case 'h': help = true; break;  /* the command's, if one follows */
    case 'V': printf("emberctl %s\n", EMBER_VERSION); return CTL_OK;
    case ':':
      return ctl_usage_error("option '%s' needs a value", argv[optind - 1]);
    default:
      return ctl_usage_error("unknown option '%s'", argv[optind - 1]);
    }
  }
  if (help) {
    const ctl_command *cmd = optind < argc ? find_command(argv[optind]) : NULL;
    if (cmd) command_usage(cmd);
    else usage(stdout);
    return CTL_OK;
  }
  if (optind >= argc) {
    usage(stderr);
    return CTL_USAGE;
  }
  int n = argc - optind;
  char **args = argv + optind;
  const ctl_command *cmd = find_command(args[0]);
  if (!cmd) return ctl_usage_error("unknown command '%s'", args[0]);
  if (n - 1 < cmd->min_args || n - 1 > cmd->max_args)
    return ctl_usage_error("usage: emberctl %s %s", cmd->name, cmd->args);
  char *url = base_url(gam);
  if (!url || curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
    free(url);
    return ctl_error("cannot start: out of memory");
  }
  o.gam = url;
  int rc = cmd->run(&o, n, args);
  if (fflush(stdout) != 0 && rc == CTL_OK)
    rc = ctl_error("cannot write standard output");
  curl_global_cleanup();
  free(url);
  return rc;
}
