/* emberctl.c - the admin CLI of ember-gam: options and command dispatch. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "ctl.h"

static void usage(FILE *out) {
  fprintf(out,
    "Usage: emberctl [OPTIONS] COMMAND\n"
    "Administer an ember cluster through ember-gam's HTTP API.\n"
    "\n"
    "Commands:\n"
    "  status                     the cluster at a glance, and its nodes\n"
    "  nodes                      every node: state, leases, load, labels\n"
    "  node ID                    one node in detail\n"
    "  label add NODE LABEL       offer LABEL on NODE (kept across restarts)\n"
    "  label rm NODE LABEL        stop offering LABEL on NODE (its leases end)\n"
    "  drain NODE                 no new leases on NODE; its leases end\n"
    "  undrain NODE               take NODE back\n"
    "  apps                       apps with their leases\n"
    "  events [N]                 the newest N events (default 20)\n"
    "\n"
    "Options:\n"
    "  -g, --gam URL              the admin API (default $EMBER_GAM or\n"
    "                             http://127.0.0.1:7080)\n"
    "  -t, --token-file FILE      bearer token for changes (default\n"
    "                             $EMBER_GAM_TOKEN_FILE or /etc/ember/gam.token)\n"
    "  -j, --json                 print the server's JSON\n"
    "      --timeout SECONDS      give up after this long (default 10)\n"
    "  -h, --help                 show this help\n"
    "  -V, --version              show the version\n"
    "\n"
    "Exit status: 0 on success, 1 when the request fails, 2 on bad usage.\n");
}

static int need(int argc, int have, int want) {
  if (have - 1 == want && argc == have) return 0;
  fprintf(stderr, "emberctl: wrong number of arguments\n");
  usage(stderr);
  return 2;
}

int main(int argc, char **argv) {
  static const struct option long_opts[] = {
    {"gam", required_argument, 0, 'g'},
    {"token-file", required_argument, 0, 't'},
    {"json", no_argument, 0, 'j'},
    {"timeout", required_argument, 0, 1},
    {"help", no_argument, 0, 'h'},
    {"version", no_argument, 0, 'V'},
    {0, 0, 0, 0},
  };
  ctl_options o = {
    .gam = getenv("EMBER_GAM") ? getenv("EMBER_GAM") : "http://127.0.0.1:7080",
    .token_file = getenv("EMBER_GAM_TOKEN_FILE") ? getenv("EMBER_GAM_TOKEN_FILE")
                                                 : "/etc/ember/gam.token",
    .timeout_s = 10,
  };
  int opt;
  while ((opt = getopt_long(argc, argv, "+g:t:jhV", long_opts, NULL)) != -1) {
    switch (opt) {
    case 'g': o.gam = optarg; break;
    case 't': o.token_file = optarg; break;
    case 'j': o.json = 1; break;
    case 1:
      o.timeout_s = strtol(optarg, NULL, 10);
      if (o.timeout_s <= 0) {
        fprintf(stderr, "emberctl: --timeout takes a positive number\n");
        return 2;
      }
      break;
    case 'h': usage(stdout); return 0;
    case 'V': printf("emberctl %s\n", EMBER_VERSION); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (optind >= argc) {
    usage(stderr);
    return 2;
  }
  int n = argc - optind;
  char **a = argv + optind;
  const char *cmd = a[0];
  int rc;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  if (strcmp(cmd, "status") == 0) rc = need(n, n, 0) ? 2 : ctl_status(&o);
  else if (strcmp(cmd, "nodes") == 0) rc = need(n, n, 0) ? 2 : ctl_nodes(&o);
  else if (strcmp(cmd, "node") == 0) rc = need(n, 2, 1) ? 2 : ctl_node(&o, a[1]);
  else if (strcmp(cmd, "apps") == 0) rc = need(n, n, 0) ? 2 : ctl_apps(&o);
  else if (strcmp(cmd, "events") == 0)
    rc = n > 2 ? need(n, 2, 1) : ctl_events(&o, n == 2 ? a[1] : NULL);
  else if (strcmp(cmd, "drain") == 0 || strcmp(cmd, "undrain") == 0)
    rc = need(n, 2, 1) ? 2 : ctl_drain(&o, cmd[0] == 'd', a[1]);
  else if (strcmp(cmd, "label") == 0 && n >= 2 &&
           (strcmp(a[1], "add") == 0 || strcmp(a[1], "rm") == 0))
    rc = need(n, 4, 3) ? 2 : ctl_label(&o, a[1][0] == 'a', a[2], a[3]);
  else {
    fprintf(stderr, "emberctl: unknown command '%s'\n", cmd);
    usage(stderr);
    rc = 2;
  }
  curl_global_cleanup();
  return rc;
}
