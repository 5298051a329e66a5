/*
 * fuzz_config.c - libFuzzer target for the daemons' config files: the
 * table engine (common/config.c over libinih) with ember-nam's table
 * (nam/nam_config.c: listen addresses, labels, rates, timings) and
 * ember-gam's (gam/gam_config.c: HOST:PORT, static_partition rules).
 *
 * The first byte picks the table (bit 0) and whether the rest is a file
 * or --set lines (bit 1). A file is read through a memfd with
 * config_load_file; each --set line goes to config_set. What must hold:
 * the result is 0, EMBER_ECONFIG or EMBER_ENOMEM, an error says why; after
 * a success every key prints (config_format_value), the printed value is
 * accepted again by --set (what the status API shows can be given back),
 * and prints the same again, the config dumps and reloads onto the
 * defaults; everything is freed.
 *
 *   build-fuzz/tests/fuzz/fuzz_config -max_total_time=60 tests/fuzz/corpus/config
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "ember/ember_errors.h"
#include "gam_config.h"
#include "nam_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Big enough for either daemon's struct. */
typedef union any_config {
  struct nam_config nam;
  struct gam_config gam;
} any_config;

static void check_rc(int rc, const char *err) {
  if (rc == 0) return;
  if (rc != EMBER_ECONFIG && rc != EMBER_ENOMEM) abort();
  if (err[0] == '\0') abort();
}

static void note(const char *key, int applied, void *user) {
  (void)key;
  (void)applied;
  (void)user;
}

/* After a success: every value prints, and prints in a form --set takes. */
static void check_loaded(const config_entry *table, const any_config *cfg) {
  FILE *null = fopen("/dev/null", "w");
  if (null) {
    config_dump(table, cfg, null);
    fclose(null);
  }
  any_config again;
  memset(&again, 0, sizeof again);
  if (config_init(table, &again) != 0) abort();
  for (const config_entry *e = table; e->name; e++) {
    char value[8192];
    if (config_format_value(table, cfg, e->name, value, sizeof value) != 0)
      abort();
    size_t n = strlen(e->name) + strlen(value) + 2;
    char *set = malloc(n);
    char err[512] = "";
    if (!set) continue;
    snprintf(set, n, "%s=%s", e->name, value);
    int rc = config_set(table, &again, set, err, sizeof err);
    if (rc != 0 && rc != EMBER_ENOMEM) {
      fprintf(stderr, "'%s' printed but refused: %s\n", set, err);
      abort();
    }
    /* and it means the same: it prints the same again */
    char back[8192];
    if (rc == 0 &&
        (config_format_value(table, &again, e->name, back, sizeof back) != 0 ||
         strcmp(back, value) != 0)) {
      fprintf(stderr, "'%s' printed back as '%s'\n", set, back);
      abort();
    }
    free(set);
  }
  config_free(table, &again);
  any_config live;
  memset(&live, 0, sizeof live);
  if (config_init(table, &live) == 0) config_reload(table, &live, cfg, note, NULL);
  config_free(table, &live);
}

static void load_file(const config_entry *table, const uint8_t *data,
                      size_t size) {
  int fd = memfd_create("fuzz_config", 0);
  if (fd < 0) return;
  if (write(fd, data, size) != (ssize_t)size) {
    close(fd);
    return;
  }
  char path[64], err[512] = "";
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  any_config cfg;
  memset(&cfg, 0, sizeof cfg);
  if (config_init(table, &cfg) != 0) abort();
  int rc = config_load_file(table, &cfg, path, err, sizeof err);
  check_rc(rc, err);
  if (rc == 0) check_loaded(table, &cfg);
  config_free(table, &cfg);
  close(fd);
}

static void set_lines(const config_entry *table, const uint8_t *data,
                      size_t size) {
  any_config cfg;
  memset(&cfg, 0, sizeof cfg);
  if (config_init(table, &cfg) != 0) abort();
  int all_ok = 1;
  size_t at = 0;
  while (at < size) {
    const uint8_t *nl = memchr(data + at, '\n', size - at);
    size_t len = nl ? (size_t)(nl - (data + at)) : size - at;
    char *line = malloc(len + 1);
    if (!line) break;
    memcpy(line, data + at, len);
    line[len] = '\0'; /* argv cannot hold a NUL: the line ends at one */
    char err[512] = "";
    int rc = config_set(table, &cfg, line, err, sizeof err);
    check_rc(rc, err);
    if (rc) all_ok = 0;
    free(line);
    at += len + 1;
  }
  if (all_ok) check_loaded(table, &cfg);
  config_free(table, &cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  const config_entry *table = data[0] & 1 ? gam_config_table : nam_config_table;
  if (data[0] & 2) set_lines(table, data + 1, size - 1);
  else load_file(table, data + 1, size - 1);
  return 0;
}
