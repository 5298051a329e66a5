/*
 * test_gam_config.c - ember-gam's configuration table: it passes the
 * engine's checks, deploy/gam.conf.example is what it generates, addresses
 * and labels are checked as the docs say.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "core_admin.h"
#include "ember/ember_errors.h"
#include "gam_config.h"

static void table_is_sound(void **state) {
  char err[512] = "";
  if (config_check_table(gam_config_table, err, sizeof err) != 0)
    fail_msg("%s", err);
  struct gam_config cfg = {0};
  assert_int_equal(config_init(gam_config_table, &cfg), 0);
  assert_string_equal(cfg.listen, "127.0.0.1:7070");
  assert_int_equal(cfg.lost_after, 3);
  assert_int_equal(cfg.heartbeat_interval_ms, 1000);
  config_free(gam_config_table, &cfg);
}

static void example_in_sync(void **state) {
  char *want = NULL, *got = NULL;
  size_t want_len = 0, cap = 0;
  FILE *w = open_memstream(&want, &want_len);
  assert_non_null(w);
  config_write_example(gam_config_table, w, GAM_CONFIG_EXAMPLE_HEADER);
  fclose(w);
  FILE *f = fopen(EMBER_SOURCE_DIR "/deploy/gam.conf.example", "r");
  assert_non_null(f);
  assert_true(getdelim(&got, &cap, '\0', f) > 0);
  fclose(f);
  if (strcmp(got, want) != 0)
    fail_msg("deploy/gam.conf.example is stale: regenerate it with "
             "`ember-gam --print-config-example > deploy/gam.conf.example`");
  free(want);
  free(got);
}

static void settings_are_checked(void **state) {
  struct gam_config cfg = {0};
  char err[512];
  assert_int_equal(config_init(gam_config_table, &cfg), 0);
  assert_int_equal(config_set(gam_config_table, &cfg, "policy=naive", err,
                              sizeof err), 0);
  assert_int_equal(config_set(gam_config_table, &cfg, "policy=fastest", err,
                              sizeof err), EMBER_ECONFIG);
  assert_int_equal(config_set(gam_config_table, &cfg,
                              "static_partition=lr=n1, km=n2", err,
                              sizeof err), 0);
  assert_int_equal(cfg.static_partition.count, 2);
  assert_int_equal(config_set(gam_config_table, &cfg,
                              "static_partition=lr", err, sizeof err),
                   EMBER_ECONFIG);
  assert_non_null(strstr(err, "LABEL=NODE"));
  assert_int_equal(config_set(gam_config_table, &cfg,
                              "static_partition=bad label=n1", err,
                              sizeof err), EMBER_ECONFIG);
  assert_int_equal(config_set(gam_config_table, &cfg, "listen=nowhere", err,
                              sizeof err), EMBER_ECONFIG);
  assert_int_equal(config_set(gam_config_table, &cfg, "admin_listen=", err,
                              sizeof err), 0);
  assert_int_equal(config_set(gam_config_table, &cfg, "lost_after=0", err,
                              sizeof err), EMBER_ECONFIG);
  config_free(gam_config_table, &cfg);
}

static void hostports(void **state) {
  struct sockaddr_storage ss;
  char why[128];
  assert_int_equal(gam_hostport_parse("127.0.0.1:7070", &ss, why, sizeof why), 0);
  assert_int_equal(ss.ss_family, AF_INET);
  assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), 7070);
  assert_int_equal(gam_hostport_parse("[::1]:80", &ss, why, sizeof why), 0);
  assert_int_equal(ss.ss_family, AF_INET6);
  assert_int_equal(gam_hostport_parse("localhost:1", &ss, why, sizeof why), 0);
  assert_int_equal(gam_hostport_parse("127.0.0.1", &ss, why, sizeof why),
                   EMBER_ECONFIG);
  assert_int_equal(gam_hostport_parse("127.0.0.1:70000", &ss, why, sizeof why),
                   EMBER_ECONFIG);
  assert_int_equal(gam_hostport_parse("127.0.0.1:", &ss, why, sizeof why),
                   EMBER_ECONFIG);
  assert_int_equal(gam_hostport_parse("[::1:80", &ss, why, sizeof why),
                   EMBER_ECONFIG);
  assert_int_equal(gam_hostport_parse("host.example:80", &ss, why, sizeof why),
                   EMBER_ECONFIG);
}

static void labels(void **state) {
  assert_true(gam_label_valid("sw"));
  assert_true(gam_label_valid("sw@fpga-emu"));
  assert_true(gam_label_valid("a.b_c-9"));
  assert_false(gam_label_valid(""));
  assert_false(gam_label_valid("has space"));
  assert_false(gam_label_valid("semi;colon"));
  assert_false(gam_label_valid("../x/y"));
  char longest[66];
  memset(longest, 'a', 65);
  longest[65] = '\0';
  assert_false(gam_label_valid(longest));
  longest[64] = '\0';
  assert_true(gam_label_valid(longest));
}

/* max_startups: START:RATE:FULL as sshd's MaxStartups, or FULL alone. */
static void startups(void **state) {
  gam_startups su;
  char why[160];
  assert_int_equal(gam_startups_parse("100:30:400", &su, why, sizeof why), 0);
  assert_int_equal(su.start, 100);
  assert_int_equal(su.rate, 30);
  assert_int_equal(su.full, 400);
  assert_int_equal(gam_startups_parse("50", &su, why, sizeof why), 0);
  assert_int_equal(su.start, 50);
  assert_int_equal(su.full, 50);
  assert_int_equal(gam_startups_parse("0:0:1", &su, why, sizeof why), 0);
  static const char *const bad[] = {
    "", "10:20", "10:20:30:40", "-1:30:100", "10:101:100", "200:30:100",
    "10:30:0", "10:30:2000000", "a:b:c", "10 :30:100", "10:30:100x",
    "99999999999999999999999:1:2",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (gam_startups_parse(bad[i], &su, why, sizeof why) != EMBER_ECONFIG)
      fail_msg("max_startups '%s' was taken", bad[i]);
    assert_true(why[0] != '\0');
  }
  /* through the table */
  struct gam_config cfg = {0};
  assert_int_equal(config_init(gam_config_table, &cfg), 0);
  char err[256];
  assert_int_equal(config_set(gam_config_table, &cfg, "max_startups=10:50:20",
                              err, sizeof err), 0);
  assert_int_not_equal(config_set(gam_config_table, &cfg,
                                  "max_startups=30:50:20", err, sizeof err), 0);
  config_free(gam_config_table, &cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(startups),
    cmocka_unit_test(table_is_sound),
    cmocka_unit_test(example_in_sync),
    cmocka_unit_test(settings_are_checked),
    cmocka_unit_test(hostports),
    cmocka_unit_test(labels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
