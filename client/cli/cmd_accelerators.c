/*
 * cmd_accelerators.c - `ember accelerators`: what a NAM (or the embedded
 * engine) offers: its accelerators and its platforms.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "ember/ember.h"
#include "platform_counters.h"

#define CMD "accelerators"

static const char accelerators_help[] =
    "Usage: ember accelerators [--nam ADDR | --embedded] [--json]\n"
    "\n"
    "List the accelerators a NAM offers (name, version, platforms that run\n"
    "them, tasks queued, origin: built-in or the plugin's path) and its\n"
    "platforms: kind, state, loaded bitstream (fpga-emu), tasks queued,\n"
    "running, done, failed and retried elsewhere, block cache use\n"
    "(resident/budget, hits/misses/evictions), and each accelerator's health\n"
    "on each platform (ready, disabled or probing, with its error counters).\n"
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

/* 1536 MiB -> "1.5G", for the cache column: at most "1023B" or, for the
 * largest uint64_t, "16384P". */
static void human(uint64_t bytes, char *buf, size_t len) {
  static const char units[] = "BKMGTP";
  if (bytes < 1024) {
    snprintf(buf, len, "%uB", (unsigned)bytes);
    return;
  }
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    u++;
  }
  snprintf(buf, len, v < 10 ? "%.1f%c" : "%.0f%c", v, units[u]);
}

static void print_pairs(const ember_platform_info *p) {
  for (size_t k = 0; k < p->n_pairs; k++) {
    const ember_pair_info *q = p->pairs[k];
    printf("  %-10s %-4s %-8s done %llu  errors %llu  timeouts %llu  "
           "failures in a row %u  disabled %llu times", p->name,
           q->accelerator, q->state, (unsigned long long)q->completed,
           (unsigned long long)q->errors, (unsigned long long)q->timeouts,
           q->consecutive_failures, (unsigned long long)q->disabled_count);
    if (strcmp(q->speed, "calibrated") == 0 ||
        strcmp(q->speed, "measured") == 0)
      printf("  speed %s: %.1f us + %.3g ns per unit\n", q->speed,
             q->fixed_ns / 1e3, q->ns_per_unit);
    else
      printf("  speed %s\n", q->speed);
  }
}

static void print_tables(const char *address, const ember_listing *l) {
  size_t na = ember_listing_accelerators(l), np = ember_listing_platforms(l);
  printf("NAM: %s\n\n", address);
  int wn = width(0, "ACCELERATOR"), wp = width(0, "PLATFORMS");
  for (size_t i = 0; i < na; i++) {
    const ember_accel_info *a = ember_listing_accelerator(l, i);
    wn = width(wn, a->name);
    wp = width(wp, a->platforms[0] ? a->platforms : "-");
  }
  printf("%-*s  %7s  %-*s  %6s  %s\n", wn, "ACCELERATOR", "VERSION", wp,
         "PLATFORMS", "QUEUED", "ORIGIN");
  for (size_t i = 0; i < na; i++) {
    const ember_accel_info *a = ember_listing_accelerator(l, i);
    printf("%-*s  %7u  %-*s  %6u  %s\n", wn, a->name, a->version, wp,
           a->platforms[0] ? a->platforms : "-", a->queued, a->origin);
  }
  if (na == 0) printf("(none)\n");

  int pn = width(0, "PLATFORM"), pk = width(0, "KIND"), ps = width(0, "STATE");
  for (size_t i = 0; i < np; i++) {
    const ember_platform_info *p = ember_listing_platform(l, i);
    pn = width(pn, p->name);
    pk = width(pk, p->kind);
    ps = width(ps, p->state);
  }
  printf("\n%-*s  %-*s  %-*s  %-9s  %6s  %7s  %6s  %6s  %7s  %-13s  %s\n", pn,
         "PLATFORM", pk, "KIND", ps, "STATE", "LOADED", "QUEUED", "RUNNING",
         "DONE", "FAILED", "RETRIED", "CACHE", "HITS/MISSES/EVICTIONS");
  for (size_t i = 0; i < np; i++) {
    const ember_platform_info *p = ember_listing_platform(l, i);
    char cache[32] = "-", used[16], budget[16];
    if (p->cache_budget) {
      human(p->cache_resident, used, sizeof used);
      if (p->cache_budget == UINT64_MAX)
        snprintf(budget, sizeof budget, "-");
      else
        human(p->cache_budget, budget, sizeof budget);
      snprintf(cache, sizeof cache, "%s/%s", used, budget);
    }
    printf("%-*s  %-*s  %-*s  %-9s  %6u  %7u  %6llu  %6llu  %7llu  %-13s  "
           "%llu/%llu/%llu\n", pn, p->name, pk, p->kind, ps, p->state,
           p->loaded[0] ? p->loaded : "-", p->queued, p->running,
           (unsigned long long)p->completed, (unsigned long long)p->failed,
           (unsigned long long)p->retried, cache,
           (unsigned long long)p->cache_hits,
           (unsigned long long)p->cache_misses,
           (unsigned long long)p->cache_evictions);
  }
  if (np == 0) printf("(none)\n");
  int any = 0;
  for (size_t i = 0; i < np; i++) any |= ember_listing_platform(l, i)->n_pairs > 0;
  if (any) printf("\nPER ACCELERATOR AND PLATFORM\n");
  for (size_t i = 0; i < np; i++) print_pairs(ember_listing_platform(l, i));
  int had_device = 0; /* a blank line before the first device line */
  for (size_t i = 0; i < np; i++) {
    const ember_platform_info *p = ember_listing_platform(l, i);
    if (!p->device[0]) {
      had_device = 0;
      continue;
    }
    printf("%s%s: %s\n", i == 0 || !had_device ? "\n" : "", p->name, p->device);
    had_device = 1;
  }
}

/* The comma-separated platform list as a JSON array. */
static json_t *platform_list(const char *list) {
  json_t *arr = json_array();
  const char *s = list;
  while (*s) {
    size_t n = strcspn(s, ",");
    if (n > 0) json_array_append_new(arr, json_stringn(s, n));
    s += n;
    if (*s == ',') s++;
  }
  return arr;
}

/* A figure; UINT64_MAX means no limit. */
static json_t *figure(uint64_t v) {
  return v == UINT64_MAX ? json_null() : json_integer((json_int_t)v);
}

static json_t *platform_json(const ember_platform_info *p) {
  json_t *pairs = json_array();
  for (size_t k = 0; k < p->n_pairs; k++) {
    const ember_pair_info *q = p->pairs[k];
    json_array_append_new(pairs, json_pack(
        "{s:s, s:s, s:I, s:I, s:I, s:i, s:I, s:s, s:f, s:f}", "accelerator",
        q->accelerator, "state", q->state, "completed",
        (json_int_t)q->completed, "errors", (json_int_t)q->errors,
        "timeouts", (json_int_t)q->timeouts, "consecutive_failures",
        (int)q->consecutive_failures, "disabled_count",
        (json_int_t)q->disabled_count, "speed", q->speed, "fixed_ns",
        q->fixed_ns, "ns_per_unit", q->ns_per_unit));
  }
  json_t *top = json_pack("{s:s, s:s, s:s, s:s}", "name", p->name, "kind",
                          p->kind, "state", p->state, "device", p->device);
  json_t *cache = json_object();
  if (!top || !cache) {
    json_decref(top);
    json_decref(cache);
    json_decref(pairs);
    return NULL;
  }
  /* the figures in platform_counters.h's order, each in its object */
#define PUT(field, engine, json, key, ...) \
  json_object_set_new(json, key, figure(p->field));
  PLATFORM_COUNTERS(PUT)
#undef PUT
  json_object_set_new(top, "loaded", p->loaded[0] ? json_string(p->loaded)
                                                  : json_null());
  json_object_set_new(top, "cache", cache);
  json_object_set_new(top, "pairs", pairs);
  return top;
}

static int print_json(const char *address, const ember_listing *l) {
  size_t na = ember_listing_accelerators(l), np = ember_listing_platforms(l);
  json_t *accs = json_array(), *plats = json_array();
  for (size_t i = 0; i < na; i++) {
    const ember_accel_info *a = ember_listing_accelerator(l, i);
    json_array_append_new(accs, json_pack(
        "{s:s, s:i, s:o, s:i, s:s}", "name", a->name, "version",
        (int)a->version, "platforms", platform_list(a->platforms),
        "queued", (int)a->queued, "origin", a->origin));
  }
  for (size_t i = 0; i < np; i++)
    json_array_append_new(plats, platform_json(ember_listing_platform(l, i)));
  json_t *root = json_pack("{s:s, s:o, s:o}", "address", address,
                           "accelerators", accs, "platforms", plats);
  int rc = root ? json_dumpf(root, stdout, JSON_INDENT(2)) : -1;
  if (rc == 0) putchar('\n');
  json_decref(root);
  return rc == 0 ? 0 : -1;
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
  ember_listing *listing = NULL;
  rc = ember_list_accelerators(client, &listing);
  if (rc) {
    cli_error(CMD, "%s: %s%s%s", ember_client_address(client),
              ember_strerror(rc), ember_last_error()[0] ? ": " : "",
              ember_last_error());
    ember_close(client);
    return CLI_FAIL;
  }
  if (json)
    rc = print_json(ember_client_address(client), listing);
  else
    print_tables(ember_client_address(client), listing);
  ember_listing_free(listing);
  ember_close(client);
  if (rc || fflush(stdout) != 0 || ferror(stdout)) {
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
