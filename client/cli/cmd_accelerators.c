/*
 * cmd_accelerators.c - `ember accelerators`: what a NAM (or the embedded
 * engine) offers: its accelerators and its platforms.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ember/ember.h"

#define CMD "accelerators"

static const char accelerators_help[] =
    "Usage: ember accelerators [--nam ADDR | --embedded] [--json]\n"
    "\n"
    "List the accelerators a NAM offers (name, version, platforms that run\n"
    "them, tasks queued) and its platforms (name, kind, state, workers, tasks\n"
    "queued and running).\n"
    "\n"
    "  --nam ADDR      ask the NAM at unix:PATH or tcp:HOST:PORT\n"
    "  --embedded      describe the in-process engine instead\n"
    "                  (neither: $EMBER_NAM, else unix:" EMBER_DEFAULT_SOCKET "\n"
    "                  if it exists, else embedded)\n"
    "  --json          one JSON object instead of tables\n"
    "  -h, --help      this text\n"
    "\n"
    "Exit status: 0 listed, 1 the NAM cannot be reached or answered an error,\n"
    "2 bad usage.\n";

enum { OPT_NAM = 256, OPT_EMBEDDED, OPT_JSON };

static const struct option accelerators_options[] = {
    {"nam", required_argument, NULL, OPT_NAM},
    {"embedded", no_argument, NULL, OPT_EMBEDDED},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

static int width(int w, const char *s) {
  int n = (int)strlen(s);
  return n > w ? n : w;
}

static void print_tables(const char *address, const ember_accel_info *a,
                         size_t na, const ember_platform_info *p, size_t np) {
  printf("NAM: %s\n\n", address);
  int wn = width(0, "ACCELERATOR"), wp = width(0, "PLATFORMS");
  for (size_t i = 0; i < na; i++) {
    wn = width(wn, a[i].name);
    wp = width(wp, a[i].platforms[0] ? a[i].platforms : "-");
  }
  printf("%-*s  %7s  %-*s  %6s\n", wn, "ACCELERATOR", "VERSION", wp,
         "PLATFORMS", "QUEUED");
  for (size_t i = 0; i < na; i++)
    printf("%-*s  %7u  %-*s  %6u\n", wn, a[i].name, a[i].version, wp,
           a[i].platforms[0] ? a[i].platforms : "-", a[i].queued);
  if (na == 0) printf("(none)\n");

  int pn = width(0, "PLATFORM"), pk = width(0, "KIND"), ps = width(0, "STATE");
  for (size_t i = 0; i < np; i++) {
    pn = width(pn, p[i].name);
    pk = width(pk, p[i].kind);
    ps = width(ps, p[i].state);
  }
  printf("\n%-*s  %-*s  %-*s  %7s  %6s  %7s\n", pn, "PLATFORM", pk, "KIND", ps,
         "STATE", "WORKERS", "QUEUED", "RUNNING");
  for (size_t i = 0; i < np; i++)
    printf("%-*s  %-*s  %-*s  %7u  %6u  %7u\n", pn, p[i].name, pk, p[i].kind, ps,
           p[i].state, p[i].workers, p[i].queued, p[i].running);
  if (np == 0) printf("(none)\n");
}

/* The comma-separated platform list as a JSON array of strings. */
static void json_platform_list(const char *list) {
  char item[sizeof ((ember_accel_info *)0)->platforms];
  const char *s = list;
  int first = 1;
  putchar('[');
  while (*s) {
    size_t n = strcspn(s, ",");
    if (n > 0) {
      memcpy(item, s, n);
      item[n] = '\0';
      if (!first) fputs(", ", stdout);
      cli_json_string(stdout, item);
      first = 0;
    }
    s += n;
    if (*s == ',') s++;
  }
  putchar(']');
}

static void print_json(const char *address, const ember_accel_info *a,
                       size_t na, const ember_platform_info *p, size_t np) {
  fputs("{\n  \"address\": ", stdout);
  cli_json_string(stdout, address);
  fputs(",\n  \"accelerators\": [", stdout);
  for (size_t i = 0; i < na; i++) {
    fputs(i ? ",\n    {\"name\": " : "\n    {\"name\": ", stdout);
    cli_json_string(stdout, a[i].name);
    printf(", \"version\": %u, \"platforms\": ", a[i].version);
    json_platform_list(a[i].platforms);
    printf(", \"queued\": %u}", a[i].queued);
  }
  fputs(na ? "\n  ],\n  \"platforms\": [" : "],\n  \"platforms\": [", stdout);
  for (size_t i = 0; i < np; i++) {
    fputs(i ? ",\n    {\"name\": " : "\n    {\"name\": ", stdout);
    cli_json_string(stdout, p[i].name);
    fputs(", \"kind\": ", stdout);
    cli_json_string(stdout, p[i].kind);
    fputs(", \"state\": ", stdout);
    cli_json_string(stdout, p[i].state);
    printf(", \"workers\": %u, \"queued\": %u, \"running\": %u}", p[i].workers,
           p[i].queued, p[i].running);
  }
  fputs(np ? "\n  ]\n}\n" : "]\n}\n", stdout);
}

static int accelerators_main(int argc, char **argv) {
  const char *nam = NULL;
  int embedded = 0, json = 0, c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", accelerators_options, NULL)) != -1) {
    switch (c) {
    case OPT_NAM: nam = optarg; break;
    case OPT_EMBEDDED: embedded = 1; break;
    case OPT_JSON: json = 1; break;
    case 'h': fputs(accelerators_help, stdout); return CLI_OK;
    default: return cli_getopt_error(CMD, c, argv);
    }
  }
  if (optind < argc)
    return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
  if (nam && embedded)
    return cli_usage_error(CMD, "--nam and --embedded exclude each other");
  if (nam && !nam[0]) return cli_usage_error(CMD, "--nam: an empty address");

  /* no fallback: an unreachable NAM must be an error here, not a silent
   * switch to the in-process engine */
  ember_options opts = {.client_name = "ember accelerators", .no_fallback = 1};
  const char *address = embedded ? "embedded" : nam;
  ember_client *client = NULL;
  int rc = ember_connect(address, &opts, &client);
  if (rc) {
    cli_error(CMD, "cannot reach the NAM at %s: %s%s%s",
              address ? address : "the default address", ember_strerror(rc),
              ember_last_error()[0] ? ": " : "", ember_last_error());
    return CLI_FAIL;
  }
  ember_accel_info *accels = NULL;
  ember_platform_info *platforms = NULL;
  size_t na = 0, np = 0;
  rc = ember_list_accelerators(client, &accels, &na, &platforms, &np);
  if (rc) {
    cli_error(CMD, "%s: %s%s%s", ember_client_address(client),
              ember_strerror(rc), ember_last_error()[0] ? ": " : "",
              ember_last_error());
    ember_close(client);
    return CLI_FAIL;
  }
  if (json)
    print_json(ember_client_address(client), accels, na, platforms, np);
  else
    print_tables(ember_client_address(client), accels, na, platforms, np);
  free(accels);
  free(platforms);
  ember_close(client);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    cli_error(CMD, "cannot write standard output");
    return CLI_FAIL;
  }
  return CLI_OK;
}

const cli_command cli_cmd_accelerators = {
    .name = "accelerators",
    .summary = "list the accelerators and platforms a NAM offers",
    .help = accelerators_help,
    .run = accelerators_main,
};
