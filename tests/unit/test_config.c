/*
 * test_config.c - the configuration table engine (common/config.c) and the
 * NAM's table (nam/nam_config.c).
 *
 * `test_config --print-nam-example` writes the NAM's example config to
 * stdout (what deploy/nam.conf.example must contain).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "alloc_fail.h"
#include "config.h"
#include "ember/ember_errors.h"
#include "log.h"
#include "nam_config.h"

static char tmpdir[] = "/tmp/ember-test-config-XXXXXX";
static char path[512];
static int file_no;

/* Write text to a new file in tmpdir; its name is left in path. */
static const char *write_conf(const char *text) {
  FILE *f;
  snprintf(path, sizeof path, "%s/%d.conf", tmpdir, ++file_no);
  f = fopen(path, "w");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
  assert_int_equal(fclose(f), 0);
  return path;
}

/* Expected error text: "PATH" followed by rest. */
static const char *at_path(const char *rest) {
  static char buf[1024];
  snprintf(buf, sizeof buf, "%s%s", path, rest);
  return buf;
}

/* Load text as a NAM config over the defaults; returns the code, err set. */
static int load_nam(struct nam_config *cfg, const char *text, char *err,
                    size_t len) {
  memset(cfg, 0, sizeof *cfg);
  assert_int_equal(config_init(nam_config_table, cfg), 0);
  return config_load_file(nam_config_table, cfg, write_conf(text), err, len);
}

static void expect_nam_error(const char *text, const char *rest) {
  struct nam_config cfg;
  char err[512];
  assert_int_equal(load_nam(&cfg, text, err, sizeof err), EMBER_ECONFIG);
  assert_string_equal(err, at_path(rest));
  config_free(nam_config_table, &cfg);
}

/* config_dump to a string (caller frees). */
static char *dump(const config_entry *table, const void *cfg) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  config_dump(table, cfg, f);
  assert_int_equal(fclose(f), 0);
  return buf;
}

static char *example(const config_entry *table, const char *header) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  config_write_example(table, f, header);
  assert_int_equal(fclose(f), 0);
  return buf;
}

/* ------------------------------------------------------------------------ */
/* A table with every type and a section, to test the engine alone.          */

struct test_config {
  bool verbose;
  int level;
  int count;
  uint64_t size;
  uint64_t wait_ms;
  char *name;
  config_list items;
  char *gam_address;
  uint64_t gam_timeout_ms;
};

static const config_enum_value levels[] = {
  {"low", 1}, {"mid", 5}, {"high", 9}, {NULL, 0}};

#define T_AT(field, ctype) CONFIG_AT(struct test_config, field, ctype)

static const config_entry test_table[] = {
  {.name = "verbose", .type = CONFIG_BOOL, .flags = CONFIG_RELOADABLE,
   .offset = T_AT(verbose, bool), .def = "no", .help = "Talk more."},
  {.name = "level", .type = CONFIG_ENUM, .offset = T_AT(level, int),
   .def = "mid", .enums = levels, .help = "A level."},
  {.name = "count", .type = CONFIG_INT, .offset = T_AT(count, int),
   .def = "-5", .min = -10, .max = 10, .help = "A count."},
  {.name = "size", .type = CONFIG_SIZE, .flags = CONFIG_RELOADABLE,
   .offset = T_AT(size, uint64_t), .def = "1K", .min = 0,
   .max = INT64_C(1) << 50, .help = "A size."},
  {.name = "wait", .type = CONFIG_DURATION, .offset = T_AT(wait_ms, uint64_t),
   .def = "1500ms", .min = 10, .max = 86400000, .help = "A wait."},
  {.name = "name", .type = CONFIG_STRING, .flags = CONFIG_RELOADABLE,
   .offset = T_AT(name, char *), .def = "\"  padded \"", .max = 16,
   .help = "A name."},
  {.name = "items", .type = CONFIG_LIST, .flags = CONFIG_RELOADABLE,
   .offset = T_AT(items, config_list), .def = "", .max = 3,
   .help = "Some items."},
  {.name = "gam.address", .type = CONFIG_STRING,
   .offset = T_AT(gam_address, char *), .def = "tcp:gam:7800",
   .help = "The GAM."},
  {.name = "gam.timeout", .type = CONFIG_DURATION,
   .offset = T_AT(gam_timeout_ms, uint64_t), .def = "2m", .min = 0,
   .max = 3600000, .help = "Its timeout."},
  {.name = NULL},
};

static void init_test(struct test_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  assert_int_equal(config_init(test_table, cfg), 0);
}

/* ------------------------------------------------------------------------ */

static void table_check(void **state) {
  char err[512] = "x";
  assert_int_equal(config_check_table(nam_config_table, err, sizeof err), 0);
  assert_string_equal(err, "");
  assert_int_equal(config_check_table(test_table, err, sizeof err), 0);
  assert_string_equal(err, "");
}

static void table_check_finds_bad_entries(void **state) {
  struct test_config cfg;
  char err[512];
  config_entry bad[] = {
    {.name = "count", .type = CONFIG_INT, .offset = T_AT(count, int),
     .def = "11", .min = 0, .max = 10, .help = "x"},
    {.name = NULL}};
  assert_int_equal(config_check_table(bad, err, sizeof err), EMBER_ECONFIG);
  assert_string_equal(err,
                      "entry 'count': default '11': 11 is above the maximum 10");
  assert_int_equal(config_init(bad, &cfg), EMBER_ECONFIG);

  bad[0].def = "1";
  bad[0].help = NULL;
  assert_int_equal(config_check_table(bad, err, sizeof err), EMBER_ECONFIG);
  assert_string_equal(err, "entry 'count': no help or no default");

  config_entry split[] = {test_table[7], test_table[0], {.name = NULL}};
  assert_int_equal(config_check_table(split, err, sizeof err), EMBER_ECONFIG);
  assert_string_equal(err,
                      "entry 'verbose': top-level key after a section");

  config_entry twice[] = {test_table[0], test_table[0], {.name = NULL}};
  assert_int_equal(config_check_table(twice, err, sizeof err), EMBER_ECONFIG);
  assert_string_equal(err, "entry 'verbose' twice");
}

static void nam_defaults(void **state) {
  struct nam_config cfg;
  char buf[128];
  memset(&cfg, 0, sizeof cfg);
  assert_int_equal(config_init(nam_config_table, &cfg), 0);
  assert_int_equal(cfg.listen.count, 1);
  assert_string_equal(cfg.listen.items[0], "unix:/run/ember/nam.sock");
  assert_null(cfg.listen.items[1]);
  assert_int_equal(cfg.socket_mode, 0660);
  assert_string_equal(cfg.socket_group, "");
  assert_int_equal(cfg.cpu_workers, 0);
  assert_int_equal(cfg.queue_capacity, 4096);
  assert_int_equal(cfg.max_frame, 64u << 20);
  assert_int_equal(cfg.max_clients, 256);
  assert_int_equal(cfg.max_inflight, 64);
  assert_int_equal(cfg.max_block_bytes, 1u << 30);
  assert_int_equal(cfg.drain_timeout_ms, 30000);
  assert_int_equal(cfg.log_level, LOG_LVL_INFO);
  assert_string_equal(cfg.node_name, "");

  assert_int_equal(config_format_value(nam_config_table, &cfg, "socket_mode",
                                       buf, sizeof buf), 0);
  assert_string_equal(buf, "0660");
  assert_int_equal(config_format_value(nam_config_table, &cfg, "max_frame",
                                       buf, sizeof buf), 0);
  assert_string_equal(buf, "64MiB");
  assert_int_equal(config_format_value(nam_config_table, &cfg,
                                       "drain_timeout", buf, sizeof buf), 0);
  assert_string_equal(buf, "30s");
  assert_int_equal(config_format_value(nam_config_table, &cfg, "log_level",
                                       buf, sizeof buf), 0);
  assert_string_equal(buf, "info");
  assert_int_equal(config_format_value(nam_config_table, &cfg, "nope", buf,
                                       sizeof buf), EMBER_ENOTFOUND);
  assert_int_equal(config_format_value(nam_config_table, &cfg, "listen", buf,
                                       8), EMBER_ETOOBIG);
  assert_string_equal(buf, "unix:/r");

  config_free(nam_config_table, &cfg);
  assert_null(cfg.listen.items);
  assert_null(cfg.node_name);
  config_free(nam_config_table, &cfg); /* twice is fine */
}

static void load_values(void **state) {
  struct nam_config cfg;
  char err[512];
  assert_int_equal(load_nam(&cfg,
                            "# a comment\n"
                            "; another\n"
                            "\n"
                            "listen = unix:/tmp/a.sock , tcp:[::1]:7700,"
                            "tcp:127.0.0.1:1\n"
                            "  socket_mode = 0600   ; inline comment\n"
                            "socket_group=ember\r\n"
                            "max_frame = 1GiB\n"
                            "max_block_bytes = 2048 M\n"
                            "drain_timeout = 0\n"
                            "log_level = debug\n"
                            "node_name = \"node-1\"\n",
                            err, sizeof err), 0);
  assert_string_equal(err, "");
  assert_int_equal(cfg.listen.count, 3);
  assert_string_equal(cfg.listen.items[0], "unix:/tmp/a.sock");
  assert_string_equal(cfg.listen.items[1], "tcp:[::1]:7700");
  assert_string_equal(cfg.listen.items[2], "tcp:127.0.0.1:1");
  assert_null(cfg.listen.items[3]);
  assert_int_equal(cfg.socket_mode, 0600);
  assert_string_equal(cfg.socket_group, "ember");
  assert_int_equal(cfg.max_frame, 1u << 30);
  assert_int_equal(cfg.max_block_bytes, 2u << 30);
  assert_int_equal(cfg.drain_timeout_ms, 0);
  assert_int_equal(cfg.log_level, LOG_LVL_DEBUG);
  assert_string_equal(cfg.node_name, "node-1");
  config_free(nam_config_table, &cfg);
}

static void octal_mode(void **state) {
  struct nam_config cfg;
  char err[512], buf[32];
  assert_int_equal(load_nam(&cfg, "socket_mode = 600\n", err, sizeof err), 0);
  assert_int_equal(cfg.socket_mode, 0600);
  assert_int_equal(config_format_value(nam_config_table, &cfg, "socket_mode",
                                       buf, sizeof buf), 0);
  assert_string_equal(buf, "0600");
  config_free(nam_config_table, &cfg);
  expect_nam_error("socket_mode = 0668\n",
                   ":1: key 'socket_mode': '0668' is not an octal number");
  expect_nam_error("socket_mode = 01000\n",
                   ":1: key 'socket_mode': 01000 is above the maximum 0777");
  expect_nam_error("socket_mode = -1\n",
                   ":1: key 'socket_mode': '-1' is not an octal number");
}

static void error_unknown_key(void **state) {
  expect_nam_error("max_clients = 5\n\nlisen = unix:/x\n",
                   ":3: unknown key 'lisen'");
}

static void error_syntax(void **state) {
  expect_nam_error("max_clients = 5\n# ok\nmax_inflight 7\n",
                   ":3: syntax error");
  expect_nam_error("[gam\n", ":1: syntax error");
  expect_nam_error("max_clients = 5\nmax_inflight = x\nbroken\n",
                   ":2: key 'max_inflight': 'x' is not an integer");
}

static void error_bad_value(void **state) {
  expect_nam_error("max_clients = many\n",
                   ":1: key 'max_clients': 'many' is not an integer");
  expect_nam_error("max_clients = 12abc\n",
                   ":1: key 'max_clients': '12abc' is not an integer");
  expect_nam_error("max_clients =\n",
                   ":1: key 'max_clients': '' is not an integer");
  expect_nam_error("drain_timeout = 30\n",
                   ":1: key 'drain_timeout': '30' needs a unit "
                   "(ms, s, m or h)");
  expect_nam_error("drain_timeout = 1.5s\n",
                   ":1: key 'drain_timeout': '1.5s' is not a duration");
  expect_nam_error("node_name = a b\n",
                   ":1: key 'node_name': 'a b': only letters, digits, '.', "
                   "'-' and '_' allowed");
}

static void error_out_of_bounds(void **state) {
  expect_nam_error("# comment\n\n\n\n\n\ncpu_workers = 5000\n",
                   ":7: key 'cpu_workers': 5000 is above the maximum 1024");
  expect_nam_error("max_clients = 0\n",
                   ":1: key 'max_clients': 0 is below the minimum 1");
  expect_nam_error("max_clients = 99999999999999999999999\n",
                   ":1: key 'max_clients': 99999999999999999999999 is above "
                   "the maximum 65536");
  expect_nam_error("max_frame = 2G\n",
                   ":1: key 'max_frame': 2G is above the maximum 1GiB");
  expect_nam_error("max_frame = 4095\n",
                   ":1: key 'max_frame': 4095 is below the minimum 4KiB");
  expect_nam_error("max_block_bytes = 99999999999T\n",
                   ":1: key 'max_block_bytes': 99999999999T is above the "
                   "maximum 1TiB");
  expect_nam_error("drain_timeout = 61m\n",
                   ":1: key 'drain_timeout': 61m is above the maximum 1h");
}

static void error_bad_list_item(void **state) {
  expect_nam_error("listen = unix:/a, tcp:host\n",
                   ":1: key 'listen': 'tcp:host': no port "
                   "(expected HOST:PORT)");
  expect_nam_error("listen = unix:/a,,unix:/b\n",
                   ":1: key 'listen': item 2 is empty");
  expect_nam_error("listen = unix:/a,\n", ":1: key 'listen': item 2 is empty");
  expect_nam_error("listen =\n", ":1: key 'listen': needs at least 1 item");
  expect_nam_error("listen = udp:x:1\n",
                   ":1: key 'listen': 'udp:x:1': expected unix:PATH or "
                   "tcp:HOST:PORT");
  expect_nam_error("listen = tcp:::1:7700\n",
                   ":1: key 'listen': 'tcp:::1:7700': an IPv6 address needs "
                   "brackets, e.g. [::1]:7700");
  expect_nam_error("listen = tcp:h:0\n",
                   ":1: key 'listen': 'tcp:h:0': port 0 is not from 1 to "
                   "65535");
  expect_nam_error("listen = tcp:h:65536\n",
                   ":1: key 'listen': 'tcp:h:65536': port 65536 is not from "
                   "1 to 65535");
  expect_nam_error("listen = unix:\n",
                   ":1: key 'listen': 'unix:': empty socket path");
}

static void error_bad_enum(void **state) {
  expect_nam_error("log_level = verbose\n",
                   ":1: key 'log_level': 'verbose' is not one of error, "
                   "warning, notice, info, debug");
}

static void error_bad_size_suffix(void **state) {
  expect_nam_error("max_frame = 64MB\n",
                   ":1: key 'max_frame': '64MB' has an unknown unit 'MB' "
                   "(use K, M, G, T, KiB, MiB, GiB, TiB or none for bytes)");
  expect_nam_error("max_frame = -1\n",
                   ":1: key 'max_frame': '-1' is not a size");
}

static void error_missing_file(void **state) {
  struct nam_config cfg;
  char err[512], missing[256];
  memset(&cfg, 0, sizeof cfg);
  assert_int_equal(config_init(nam_config_table, &cfg), 0);
  snprintf(missing, sizeof missing, "%s/missing.conf", tmpdir);
  assert_int_equal(config_load_file(nam_config_table, &cfg, missing, err,
                                    sizeof err), EMBER_ECONFIG);
  snprintf(path, sizeof path, "%s", missing);
  assert_string_equal(err, at_path(": cannot open: No such file or directory"));
  assert_int_equal(config_load_file(nam_config_table, &cfg, tmpdir, err,
                                    sizeof err), EMBER_ECONFIG);
  snprintf(path, sizeof path, "%s", tmpdir);
  assert_string_equal(err, at_path(": cannot read: Is a directory"));
  config_free(nam_config_table, &cfg);
}

static void error_other_file_problems(void **state) {
  char line[400];
  expect_nam_error("max_clients = 5\nmax_clients = 6\n",
                   ":2: key 'max_clients': already set on line 1");
  memset(line, 'a', sizeof line);
  memcpy(line, "node_name = ", 12);
  line[12 + 187] = '\n'; /* 199 bytes before the newline */
  line[12 + 188] = '\0';
  expect_nam_error(line, ":1: line longer than 198 bytes");
  line[12 + 186] = '\n'; /* 198 bytes: fits */
  line[12 + 187] = '\0';
  struct nam_config cfg;
  char err[512];
  assert_int_equal(load_nam(&cfg, line, err, sizeof err), 0);
  assert_int_equal(strlen(cfg.node_name), 186);
  config_free(nam_config_table, &cfg);
}

static void file_with_nul_byte(void **state) {
  struct nam_config cfg;
  char err[512];
  FILE *f;
  memset(&cfg, 0, sizeof cfg);
  assert_int_equal(config_init(nam_config_table, &cfg), 0);
  snprintf(path, sizeof path, "%s/nul.conf", tmpdir);
  f = fopen(path, "w");
  assert_non_null(f);
  fwrite("max_clients = 5\nnode_name = a\0b\n", 1, 32, f);
  fclose(f);
  assert_int_equal(config_load_file(nam_config_table, &cfg, path, err,
                                    sizeof err), EMBER_ECONFIG);
  assert_string_equal(err, at_path(":2: syntax error"));
  config_free(nam_config_table, &cfg);
}

static void set_overrides_file(void **state) {
  struct nam_config cfg;
  char err[512];
  assert_int_equal(load_nam(&cfg, "max_clients = 10\nlog_level = error\n",
                            err, sizeof err), 0);
  assert_int_equal(cfg.max_clients, 10);
  assert_int_equal(config_set(nam_config_table, &cfg, "max_clients=20", err,
                              sizeof err), 0);
  assert_int_equal(config_set(nam_config_table, &cfg,
                              " listen = tcp:0.0.0.0:7700 ,unix:/x ", err,
                              sizeof err), 0);
  assert_int_equal(cfg.max_clients, 20);
  assert_int_equal(cfg.log_level, LOG_LVL_ERR);
  assert_int_equal(cfg.listen.count, 2);
  assert_string_equal(cfg.listen.items[0], "tcp:0.0.0.0:7700");
  assert_string_equal(cfg.listen.items[1], "unix:/x");

  assert_int_equal(config_set(nam_config_table, &cfg, "cpu_workers=5000",
                              err, sizeof err), EMBER_ECONFIG);
  assert_string_equal(err, "--set cpu_workers=5000: 5000 is above the "
                           "maximum 1024");
  assert_int_equal(config_set(nam_config_table, &cfg, "lisen=unix:/x", err,
                              sizeof err), EMBER_ECONFIG);
  assert_string_equal(err, "--set lisen=unix:/x: unknown key 'lisen'");
  assert_int_equal(config_set(nam_config_table, &cfg, "max_clients", err,
                              sizeof err), EMBER_ECONFIG);
  assert_string_equal(err, "--set max_clients: expected KEY=VALUE");
  assert_int_equal(config_set(nam_config_table, &cfg, "node_name=a\nb", err,
                              sizeof err), EMBER_ECONFIG);
  assert_string_equal(err, "--set node_name=a\nb: contains a control "
                           "character");
  assert_int_equal(cfg.max_clients, 20); /* failed sets change nothing */
  config_free(nam_config_table, &cfg);
}

static void sections(void **state) {
  struct test_config cfg;
  char err[512];
  init_test(&cfg);
  assert_int_equal(config_load_file(test_table, &cfg,
                                    write_conf("verbose = on\n"
                                               "[gam]  # the GAM link\n"
                                               "address = tcp:g:1\n"
                                               "timeout = 5s\n"),
                                    err, sizeof err), 0);
  assert_string_equal(err, "");
  assert_true(cfg.verbose);
  assert_string_equal(cfg.gam_address, "tcp:g:1");
  assert_int_equal(cfg.gam_timeout_ms, 5000);
  assert_int_equal(config_set(test_table, &cfg, "gam.timeout=1m", err,
                              sizeof err), 0);
  assert_int_equal(cfg.gam_timeout_ms, 60000);

  assert_int_equal(config_load_file(test_table, &cfg,
                                    write_conf("[gam]\nverbose = 1\n"), err,
                                    sizeof err), EMBER_ECONFIG);
  assert_string_equal(err, at_path(":2: unknown key 'gam.verbose'"));
  assert_int_equal(config_load_file(test_table, &cfg,
                                    write_conf("\n[nam]\n"), err, sizeof err),
                   EMBER_ECONFIG);
  assert_string_equal(err, at_path(":2: unknown section 'nam'"));
  assert_int_equal(config_load_file(test_table, &cfg,
                                    write_conf("[gam] x\n"), err, sizeof err),
                   EMBER_ECONFIG);
  assert_string_equal(err, at_path(":1: syntax error"));
  config_free(test_table, &cfg);
}

static void engine_types(void **state) {
  struct test_config cfg;
  char err[512], buf[64];
  init_test(&cfg);
  assert_false(cfg.verbose);
  assert_int_equal(cfg.level, 5);
  assert_int_equal(cfg.count, -5);
  assert_int_equal(cfg.size, 1024);
  assert_int_equal(cfg.wait_ms, 1500);
  assert_string_equal(cfg.name, "  padded ");
  assert_int_equal(cfg.items.count, 0);
  assert_non_null(cfg.items.items);
  assert_null(cfg.items.items[0]);

  static const char *const yes[] = {"true", "YES", "on", "1"};
  static const char *const no[] = {"false", "No", "off", "0"};
  for (size_t i = 0; i < 4; i++) {
    char set[32];
    snprintf(set, sizeof set, "verbose=%s", yes[i]);
    assert_int_equal(config_set(test_table, &cfg, set, err, sizeof err), 0);
    assert_true(cfg.verbose);
    snprintf(set, sizeof set, "verbose=%s", no[i]);
    assert_int_equal(config_set(test_table, &cfg, set, err, sizeof err), 0);
    assert_false(cfg.verbose);
  }
  assert_int_equal(config_set(test_table, &cfg, "verbose=2", err, sizeof err),
                   EMBER_ECONFIG);
  assert_string_equal(err, "--set verbose=2: '2' is not a boolean "
                           "(true/false, yes/no, on/off, 1/0)");
  assert_int_equal(config_set(test_table, &cfg, "level=high", err,
                              sizeof err), 0);
  assert_int_equal(cfg.level, 9);
  assert_int_equal(config_set(test_table, &cfg, "count=-10", err, sizeof err),
                   0);
  assert_int_equal(cfg.count, -10);
  assert_int_equal(config_set(test_table, &cfg, "count=-11", err, sizeof err),
                   EMBER_ECONFIG);
  assert_string_equal(err, "--set count=-11: -11 is below the minimum -10");

  static const struct { const char *in; uint64_t bytes; const char *out; }
      sizes[] = {{"0", 0, "0"},           {"1000", 1000, "1000"},
                 {"1000B", 1000, "1000"}, {"2K", 2048, "2KiB"},
                 {"2KiB", 2048, "2KiB"},  {"3 MiB", 3u << 20, "3MiB"},
                 {"1024M", 1u << 30, "1GiB"}, {"5T", 5ull << 40, "5TiB"},
                 {"1536K", 1536u << 10, "1536KiB"}};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    char set[64];
    snprintf(set, sizeof set, "size=%s", sizes[i].in);
    assert_int_equal(config_set(test_table, &cfg, set, err, sizeof err), 0);
    assert_int_equal(cfg.size, sizes[i].bytes);
    assert_int_equal(config_format_value(test_table, &cfg, "size", buf,
                                         sizeof buf), 0);
    assert_string_equal(buf, sizes[i].out);
  }
  assert_int_equal(config_set(test_table, &cfg, "size=99999999999999999999",
                              err, sizeof err), EMBER_ECONFIG);
  assert_string_equal(err, "--set size=99999999999999999999: "
                           "99999999999999999999 is above the maximum 1024TiB");

  static const struct { const char *in; uint64_t ms; const char *out; }
      waits[] = {{"10ms", 10, "10ms"},  {"1500ms", 1500, "1500ms"},
                 {"2s", 2000, "2s"},    {"90s", 90000, "90s"},
                 {"120s", 120000, "2m"}, {"24h", 86400000, "24h"}};
  for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++) {
    char set[64];
    snprintf(set, sizeof set, "wait=%s", waits[i].in);
    assert_int_equal(config_set(test_table, &cfg, set, err, sizeof err), 0);
    assert_int_equal(cfg.wait_ms, waits[i].ms);
    assert_int_equal(config_format_value(test_table, &cfg, "wait", buf,
                                         sizeof buf), 0);
    assert_string_equal(buf, waits[i].out);
  }
  assert_int_equal(config_set(test_table, &cfg, "wait=0", err, sizeof err),
                   EMBER_ECONFIG);
  assert_string_equal(err, "--set wait=0: 0 is below the minimum 10ms");
  assert_int_equal(config_set(test_table, &cfg, "wait=5d", err, sizeof err),
                   EMBER_ECONFIG);
  assert_string_equal(err, "--set wait=5d: '5d' has an unknown unit 'd' "
                           "(use ms, s, m or h)");

  assert_int_equal(config_set(test_table, &cfg, "name=0123456789abcdefg",
                              err, sizeof err), EMBER_ECONFIG);
  assert_string_equal(err, "--set name=0123456789abcdefg: 17 bytes, more "
                           "than the maximum 16");
  assert_int_equal(config_set(test_table, &cfg, "items=a, b ,c", err,
                              sizeof err), 0);
  assert_int_equal(cfg.items.count, 3);
  assert_string_equal(cfg.items.items[1], "b");
  assert_int_equal(config_format_value(test_table, &cfg, "items", buf,
                                       sizeof buf), 0);
  assert_string_equal(buf, "a, b, c");
  assert_int_equal(config_set(test_table, &cfg, "items=a,b,c,d", err,
                              sizeof err), EMBER_ECONFIG);
  assert_string_equal(err, "--set items=a,b,c,d: 4 items, more than the "
                           "maximum 3");
  assert_int_equal(config_set(test_table, &cfg, "items=", err, sizeof err),
                   0);
  assert_int_equal(cfg.items.count, 0);
  config_free(test_table, &cfg);
}

static void listen_parse(void **state) {
  nam_listen_addr a;
  char why[256], long_path[120];
  assert_int_equal(nam_listen_parse("tcp:[::1]:7700", &a, why, sizeof why), 0);
  assert_int_equal(a.is_unix, 0);
  assert_string_equal(a.host, "::1");
  assert_int_equal(a.port, 7700);
  assert_int_equal(nam_listen_parse("tcp:node-1.example:65535", &a, why,
                                    sizeof why), 0);
  assert_string_equal(a.host, "node-1.example");
  assert_int_equal(a.port, 65535);
  assert_int_equal(nam_listen_parse("unix:/run/ember/nam.sock", &a, why,
                                    sizeof why), 0);
  assert_int_equal(a.is_unix, 1);
  assert_string_equal(a.path, "/run/ember/nam.sock");

  memcpy(long_path, "unix:/", 6);
  memset(long_path + 6, 'p', 106); /* a 107-byte path */
  long_path[112] = '\0';
  assert_int_equal(nam_listen_parse(long_path, &a, why, sizeof why), 0);
  assert_int_equal(strlen(a.path), 107);
  long_path[112] = 'p';
  long_path[113] = '\0';
  assert_int_equal(nam_listen_parse(long_path, &a, why, sizeof why),
                   EMBER_ECONFIG);
  assert_string_equal(why, "socket path is 108 bytes, more than the maximum "
                           "107");
  assert_int_equal(nam_listen_parse("tcp:[::1]7700", NULL, why, sizeof why),
                   EMBER_ECONFIG);
  assert_string_equal(why, "no port after ']' (expected [ADDRESS]:PORT)");
  assert_int_equal(nam_listen_parse("tcp::7700", NULL, why, sizeof why),
                   EMBER_ECONFIG);
  assert_string_equal(why, "empty host (expected HOST:PORT)");
  assert_int_equal(nam_listen_parse("tcp:h:77x", NULL, why, sizeof why),
                   EMBER_ECONFIG);
  assert_string_equal(why, "port '77x' is not a number from 1 to 65535");
  assert_int_equal(nam_listen_parse("tcp:h:", NULL, NULL, 0), EMBER_ECONFIG);
}

/* metrics_listen: HOST:PORT as in tcp: items, or empty (off). */
static void metrics_listen_key(void **state) {
  char err[512];
  struct nam_config cfg = {0};
  assert_int_equal(config_init(nam_config_table, &cfg), 0);
  assert_string_equal(cfg.metrics_listen, "127.0.0.1:9464");
  assert_int_equal(config_set(nam_config_table, &cfg,
                              "metrics_listen=[::1]:9464", err, sizeof err), 0);
  assert_string_equal(cfg.metrics_listen, "[::1]:9464");
  assert_int_equal(config_set(nam_config_table, &cfg, "metrics_listen=9464",
                              err, sizeof err), EMBER_ECONFIG);
  assert_string_equal(err, "--set metrics_listen=9464: '9464': no port "
                           "(expected HOST:PORT)");
  assert_int_equal(config_set(nam_config_table, &cfg, "metrics_listen=",
                              err, sizeof err), 0);
  assert_string_equal(cfg.metrics_listen, "");
  assert_int_equal(config_set(nam_config_table, &cfg, "metrics_listen=h:0",
                              err, sizeof err), EMBER_ECONFIG);
  assert_string_equal(err, "--set metrics_listen=h:0: 'h:0': port 0 is not "
                           "from 1 to 65535");
  config_free(nam_config_table, &cfg);
}

/* The example with "#key = default" lines uncommented loads to the
 * defaults. */
static void roundtrip(const config_entry *table, void *defaults, void *loaded,
                      const char *header) {
  char err[512];
  char *text = example(table, header), *out = malloc(strlen(text) + 1), *o;
  char *want, *got;
  assert_non_null(out);
  o = out;
  for (const char *line = text; *line;) {
    size_t n = strcspn(line, "\n");
    if (line[0] == '#' && n > 1 && line[1] != ' ') line++, n--;
    memcpy(o, line, n);
    o += n;
    line += n;
    if (*line) *o++ = *line++;
  }
  *o = '\0';
  assert_int_equal(config_init(table, defaults), 0);
  assert_int_equal(config_init(table, loaded), 0);
  assert_int_equal(config_load_file(table, loaded, write_conf(out), err,
                                    sizeof err), 0);
  assert_string_equal(err, "");
  want = dump(table, defaults);
  got = dump(table, loaded);
  assert_string_equal(got, want);
  free(want);
  free(got);
  free(out);
  free(text);
  config_free(table, defaults);
  config_free(table, loaded);
}

static void example_roundtrip(void **state) {
  struct nam_config a, b;
  struct test_config c, d;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  roundtrip(nam_config_table, &a, &b, NAM_CONFIG_EXAMPLE_HEADER);
  memset(&c, 0, sizeof c);
  memset(&d, 0, sizeof d);
  roundtrip(test_table, &c, &d, NULL);
}

static void example_format(void **state) {
  char *text = example(test_table, "Title\n\nmore");
  assert_string_equal(text,
                      "# Title\n"
                      "#\n"
                      "# more\n"
                      "\n"
                      "# Talk more.\n"
                      "# Type: boolean (true/false, yes/no, on/off, 1/0). "
                      "Reloadable on SIGHUP.\n"
                      "#verbose = no\n"
                      "\n"
                      "# A level.\n"
                      "# Type: one of low, mid, high. Changing it needs a "
                      "restart.\n"
                      "#level = mid\n"
                      "\n"
                      "# A count.\n"
                      "# Type: integer, -10 to 10. Changing it needs a "
                      "restart.\n"
                      "#count = -5\n"
                      "\n"
                      "# A size.\n"
                      "# Type: size in bytes, 0 to 1024TiB (suffixes K, M, "
                      "G, T or KiB, MiB, GiB,\n"
                      "# TiB: powers of 1024). Reloadable on SIGHUP.\n"
                      "#size = 1K\n"
                      "\n"
                      "# A wait.\n"
                      "# Type: duration, 10ms to 24h (units ms, s, m, h). "
                      "Changing it needs a\n"
                      "# restart.\n"
                      "#wait = 1500ms\n"
                      "\n"
                      "# A name.\n"
                      "# Type: string, at most 16 bytes. Reloadable on "
                      "SIGHUP.\n"
                      "#name = \"  padded \"\n"
                      "\n"
                      "# Some items.\n"
                      "# Type: comma-separated list, 0 to 3 items. "
                      "Reloadable on SIGHUP.\n"
                      "#items =\n"
                      "\n"
                      "[gam]\n"
                      "\n"
                      "# The GAM.\n"
                      "# Type: string, at most 4096 bytes. Changing it needs "
                      "a restart.\n"
                      "#address = tcp:gam:7800\n"
                      "\n"
                      "# Its timeout.\n"
                      "# Type: duration, 0 to 1h (units ms, s, m, h). "
                      "Changing it needs a restart.\n"
                      "#timeout = 2m\n");
  for (const char *l = text; *l; l += strcspn(l, "\n") + 1)
    assert_in_range(strcspn(l, "\n"), 0, 78);
  free(text);
}

/* plugin_dir's default follows the install prefix; the committed example
 * shows the default prefix's, /usr/local. */
#define EXAMPLE_PLUGIN_DIR "/usr/local/lib/ember/accelerators"

static char *with_example_plugin_dir(char *text) {
  const char *key = "#plugin_dir = " EMBER_PLUGIN_DIR "\n";
  char *at = strstr(text, key);
  if (!at || strcmp(EMBER_PLUGIN_DIR, EXAMPLE_PLUGIN_DIR) == 0) return text;
  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  assert_non_null(f);
  fprintf(f, "%.*s#plugin_dir = " EXAMPLE_PLUGIN_DIR "\n%s",
          (int)(at - text), text, at + strlen(key));
  assert_int_equal(fclose(f), 0);
  free(text);
  return out;
}

/* deploy/nam.conf.example is what the table generates. */
static void example_in_sync(void **state) {
  char *want = with_example_plugin_dir(
      example(nam_config_table, NAM_CONFIG_EXAMPLE_HEADER));
  char *got = NULL;
  size_t cap = 0;
  FILE *f = fopen(EMBER_SOURCE_DIR "/deploy/nam.conf.example", "r");
  ssize_t n;
  assert_non_null(f);
  n = getdelim(&got, &cap, '\0', f);
  fclose(f);
  assert_true(n > 0);
  if (strcmp(got, want) != 0) {
    /* show the first line that differs rather than both whole files */
    const char *g = got, *w = want;
    int line = 1;
    while (*g && *g == *w) {
      if (*g == '\n') line++;
      g++, w++;
    }
    while (g > got && g[-1] != '\n') g--, w--;
    print_error("deploy/nam.conf.example is out of date at line %d: "
                "regenerate it with `test_config --print-nam-example > "
                "deploy/nam.conf.example`\n  file:      %.*s\n"
                "  generated: %.*s\n",
                line, (int)strcspn(g, "\n"), g, (int)strcspn(w, "\n"), w);
    fail();
  }
  free(got);
  free(want);
}

struct notes { char text[512]; };

static void note(const char *key, int applied, void *user) {
  struct notes *n = user;
  size_t used = strlen(n->text);
  snprintf(n->text + used, sizeof n->text - used, "%s%s=%d",
           used ? " " : "", key, applied);
}

static void reload_applies_reloadable(void **state) {
  struct nam_config live, fresh;
  struct notes notes = {""};
  char err[512];
  memset(&live, 0, sizeof live);
  assert_int_equal(config_init(nam_config_table, &live), 0);
  assert_int_equal(load_nam(&fresh,
                            "listen = unix:/other.sock\n"
                            "cpu_workers = 8\n"
                            "max_clients = 512\n"
                            "max_inflight = 64\n"
                            "max_block_bytes = 2GiB\n"
                            "log_level = debug\n",
                            err, sizeof err), 0);
  assert_int_equal(config_reload(nam_config_table, &live, &fresh, note,
                                 &notes), 0);
  assert_string_equal(notes.text, "listen=0 cpu_workers=0 max_clients=1 "
                                  "max_block_bytes=1 log_level=1");
  assert_string_equal(live.listen.items[0], "unix:/run/ember/nam.sock");
  assert_int_equal(live.cpu_workers, 0);
  assert_int_equal(live.max_clients, 512);
  assert_int_equal(live.max_block_bytes, 2ull << 30);
  assert_int_equal(live.log_level, LOG_LVL_DEBUG);
  config_free(nam_config_table, &fresh);
  config_free(nam_config_table, &live);

  /* strings and lists are deep-copied */
  struct test_config tl, tn;
  struct notes tnotes = {""};
  init_test(&tl);
  init_test(&tn);
  assert_int_equal(config_set(test_table, &tn, "items=x,y", err, sizeof err),
                   0);
  assert_int_equal(config_set(test_table, &tn, "name=new", err, sizeof err),
                   0);
  assert_int_equal(config_set(test_table, &tn, "gam.address=other", err,
                              sizeof err), 0);
  assert_int_equal(config_reload(test_table, &tl, &tn, note, &tnotes), 0);
  config_free(test_table, &tn);
  assert_string_equal(tnotes.text, "name=1 items=1 gam.address=0");
  assert_string_equal(tl.name, "new");
  assert_int_equal(tl.items.count, 2);
  assert_string_equal(tl.items.items[1], "y");
  assert_string_equal(tl.gam_address, "tcp:gam:7800");
  assert_int_equal(config_reload(test_table, &tl, &tl, NULL, NULL), 0);
  config_free(test_table, &tl);
}

static void dump_output(void **state) {
  struct test_config cfg;
  char *text;
  init_test(&cfg);
  text = dump(test_table, &cfg);
  assert_string_equal(text,
                      "verbose = false\n"
                      "level = mid\n"
                      "count = -5\n"
                      "size = 1KiB\n"
                      "wait = 1500ms\n"
                      "name = \"  padded \"\n"
                      "items =\n"
                      "\n"
                      "[gam]\n"
                      "address = tcp:gam:7800\n"
                      "timeout = 2m\n");
  free(text);
  config_free(test_table, &cfg);
}

static void free_zeroed(void **state) {
  struct nam_config cfg;
  memset(&cfg, 0, sizeof cfg);
  config_free(nam_config_table, &cfg);
  assert_null(cfg.listen.items);
}

/* Allocation failure (alloc_fail.h): the Nth allocation after arming fails. */
static void allocation_failures(void **state) {
  const char *file = write_conf("name = file\nitems = a, b\n"
                                "[gam]\naddress = x\n");
  int n, rc = -1;
  for (n = 1; rc != 0; n++) {
    struct test_config live, fresh;
    char err[512] = "";
    memset(&live, 0, sizeof live);
    memset(&fresh, 0, sizeof fresh);
    alloc_count = 0;
    alloc_fail_at = n;
    rc = config_init(test_table, &live);
    if (rc == 0) rc = config_init(test_table, &fresh);
    if (rc == 0)
      rc = config_load_file(test_table, &fresh, file, err, sizeof err);
    if (rc == 0)
      rc = config_set(test_table, &fresh, "items=p,q", err, sizeof err);
    if (rc == 0) rc = config_reload(test_table, &live, &fresh, NULL, NULL);
    alloc_fail_at = 0;
    if (rc == 0) {
      assert_string_equal(live.items.items[1], "q");
      assert_string_equal(live.name, "file");
    } else {
      assert_int_equal(rc, EMBER_ENOMEM);
    }
    config_free(test_table, &live);
    config_free(test_table, &fresh);
  }
  assert_true(n > 10); /* every allocation above was made to fail once */
}

static int setup(void **state) {
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
  char name[300];
  for (int i = 1; i <= file_no; i++) {
    snprintf(name, sizeof name, "%s/%d.conf", tmpdir, i);
    unlink(name);
  }
  snprintf(name, sizeof name, "%s/nul.conf", tmpdir);
  unlink(name);
  return rmdir(tmpdir);
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--print-nam-example") == 0) {
    config_write_example(nam_config_table, stdout, NAM_CONFIG_EXAMPLE_HEADER);
    return fflush(stdout) == 0 ? 0 : 1;
  }
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(table_check),
    cmocka_unit_test(table_check_finds_bad_entries),
    cmocka_unit_test(nam_defaults),
    cmocka_unit_test(load_values),
    cmocka_unit_test(octal_mode),
    cmocka_unit_test(error_unknown_key),
    cmocka_unit_test(error_syntax),
    cmocka_unit_test(error_bad_value),
    cmocka_unit_test(error_out_of_bounds),
    cmocka_unit_test(error_bad_list_item),
    cmocka_unit_test(error_bad_enum),
    cmocka_unit_test(error_bad_size_suffix),
    cmocka_unit_test(error_missing_file),
    cmocka_unit_test(error_other_file_problems),
    cmocka_unit_test(file_with_nul_byte),
    cmocka_unit_test(set_overrides_file),
    cmocka_unit_test(sections),
    cmocka_unit_test(engine_types),
    cmocka_unit_test(listen_parse),
    cmocka_unit_test(metrics_listen_key),
    cmocka_unit_test(example_roundtrip),
    cmocka_unit_test(example_format),
    cmocka_unit_test(example_in_sync),
    cmocka_unit_test(reload_applies_reloadable),
    cmocka_unit_test(dump_output),
    cmocka_unit_test(free_zeroed),
    cmocka_unit_test(allocation_failures),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
