/*
 * test_admin_http.c - the pure pieces of ember-gam's admin API and of
 * emberctl, without a core or a server: route matching and methods
 * (gam/admin_routes.c), the token file's checks and the bearer comparison
 * (gam/admin_token.c), emberctl's aligned tables and cells
 * (client/ctl/ctl_table.c, ctl_format.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "admin_routes.h"
#include "admin_token.h"
#include "ctl.h"
#include "ember/ember_errors.h"

/* ---- routes ------------------------------------------------------------ */

static void expect_route(const char *path, gam_admin_route_id id,
                         const char *node, const char *label) {
  gam_admin_route r;
  char why[160] = "";
  int rc = gam_admin_route_parse(path, &r, why, sizeof why);
  if (rc != 0) fail_msg("%s: %s (%s)", path, ember_errname(rc), why);
  assert_int_equal(r.id, id);
  assert_string_equal(r.node, node);
  assert_string_equal(r.label, label);
}

static void expect_no_route(const char *path, int code) {
  gam_admin_route r;
  char why[160] = "";
  int rc = gam_admin_route_parse(path, &r, why, sizeof why);
  if (rc != code)
    fail_msg("%s: %s, expected %s", path, ember_errname(rc),
             ember_errname(code));
  assert_true(why[0] != '\0');
  for (const char *p = why; *p; p++)  /* fit for a JSON message */
    assert_true((unsigned char)*p >= ' ' && (unsigned char)*p < 0x7f);
}

static void test_routes(void **state) {
  (void)state;
  expect_route("/healthz", GAM_ROUTE_HEALTHZ, "", "");
  expect_route("/metrics", GAM_ROUTE_METRICS, "", "");
  expect_route("/v1/status", GAM_ROUTE_STATUS, "", "");
  expect_route("/v1/nodes", GAM_ROUTE_NODES, "", "");
  expect_route("/v1/nodes/n1", GAM_ROUTE_NODE, "n1", "");
  expect_route("/v1/nodes/node-7.rack_2/labels/sw@fpga-emu",
               GAM_ROUTE_NODE_LABEL, "node-7.rack_2", "sw@fpga-emu");
  expect_route("/v1/nodes/n1/drain", GAM_ROUTE_NODE_DRAIN, "n1", "");
  expect_route("/v1/nodes/n1/undrain", GAM_ROUTE_NODE_UNDRAIN, "n1", "");
  expect_route("/v1/apps", GAM_ROUTE_APPS, "", "");
  expect_route("/v1/events", GAM_ROUTE_EVENTS, "", "");
  /* a node may be called like a route word */
  expect_route("/v1/nodes/drain", GAM_ROUTE_NODE, "drain", "");
  expect_route("/v1/nodes/labels/labels/labels", GAM_ROUTE_NODE_LABEL,
               "labels", "labels");
  /* the label is only cut to size here; gam_label_valid judges it */
  expect_route("/v1/nodes/n1/labels/a b", GAM_ROUTE_NODE_LABEL, "n1", "a b");
}

static void test_no_routes(void **state) {
  (void)state;
  static const char *const missing[] = {
      "",          "/",          "/v1",           "/v1/",
      "/v1/nodes/", "/v1//nodes", "/v1/nodes//drain", "/v1/status/",
      "/V1/status", "/v2/status", "/healthz/",     "//healthz",
      "/v1/nodes/n1/labels", "/v1/nodes/n1/labels/", "/v1/nodes/n1/drain/x",
      "/v1/nodes/n1/reboot", "/v1/apps/3",   "healthz",
      "/v1/nodes/n1/labels/sw/extra",
  };
  for (size_t i = 0; i < sizeof missing / sizeof *missing; i++)
    expect_no_route(missing[i], EMBER_ENOTFOUND);
  /* a bad node id is a bad request */
  expect_no_route("/v1/nodes/a b", EMBER_EINVAL);
  expect_no_route("/v1/nodes/a\tb/drain", EMBER_EINVAL);
  expect_no_route("/v1/nodes/\xc3\xa9/labels/sw", EMBER_EINVAL);
  expect_no_route("/v1/nodes/\x7f", EMBER_EINVAL);
  char path[1024];
  memset(path, 0, sizeof path);
  strcpy(path, "/v1/nodes/");
  memset(path + strlen(path), 'n', 255);
  expect_route(path, GAM_ROUTE_NODE, path + 10, "");
  strcat(path, "n");  /* 256 */
  expect_no_route(path, EMBER_EINVAL);
  snprintf(path, sizeof path, "/v1/nodes/n1/labels/");
  memset(path + strlen(path), 'l', 300);
  expect_no_route(path, EMBER_EINVAL);
}

static void test_methods(void **state) {
  (void)state;
  assert_int_equal(gam_admin_method("GET"), GAM_METHOD_GET);
  assert_int_equal(gam_admin_method("HEAD"), GAM_METHOD_HEAD);
  assert_int_equal(gam_admin_method("PUT"), GAM_METHOD_PUT);
  assert_int_equal(gam_admin_method("DELETE"), GAM_METHOD_DELETE);
  assert_int_equal(gam_admin_method("POST"), GAM_METHOD_POST);
  assert_int_equal(gam_admin_method("get"), GAM_METHOD_OTHER);
  assert_int_equal(gam_admin_method("PATCH"), GAM_METHOD_OTHER);
  assert_int_equal(gam_admin_method(""), GAM_METHOD_OTHER);

  gam_admin_route r;
  char why[160];
  assert_int_equal(gam_admin_route_parse("/v1/nodes", &r, why, sizeof why), 0);
  assert_true(r.methods & GAM_METHOD_GET);
  assert_true(r.methods & GAM_METHOD_HEAD);
  assert_false(r.methods & GAM_METHODS_CHANGING);
  assert_string_equal(r.allow, "GET, HEAD");
  assert_int_equal(
      gam_admin_route_parse("/v1/nodes/n1/labels/x", &r, why, sizeof why), 0);
  assert_int_equal(r.methods, GAM_METHOD_PUT | GAM_METHOD_DELETE);
  assert_string_equal(r.allow, "PUT, DELETE");
  assert_int_equal(
      gam_admin_route_parse("/v1/nodes/n1/drain", &r, why, sizeof why), 0);
  assert_int_equal(r.methods, GAM_METHOD_POST);
  assert_string_equal(r.allow, "POST");
}

static void test_events_limit(void **state) {
  (void)state;
  unsigned v = 0;
  assert_int_equal(gam_admin_events_limit(NULL, &v), 0);
  assert_int_equal(v, GAM_ADMIN_EVENTS_DEFAULT);
  assert_int_equal(gam_admin_events_limit("1", &v), 0);
  assert_int_equal(v, 1);
  assert_int_equal(gam_admin_events_limit("10000", &v), 0);
  assert_int_equal(v, 10000);
  static const char *const bad[] = {"", "0", "10001", "-1", "+5", " 5", "5 ",
                                    "1e3", "0x10", "99999999999999999999",
                                    "abc"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    if (gam_admin_events_limit(bad[i], &v) != EMBER_EINVAL)
      fail_msg("limit '%s' accepted", bad[i]);
}

static void test_printable(void **state) {
  (void)state;
  char out[8];
  assert_string_equal(gam_admin_printable("a\xff\n b", out, sizeof out),
                      "a?? b");
  assert_string_equal(gam_admin_printable("0123456789", out, sizeof out),
                      "0123456");
  assert_string_equal(gam_admin_printable(NULL, out, sizeof out), "");
}

static void expect_unescaped(const char *in, const char *want) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", in);
  size_t n = gam_admin_unescape(buf);
  assert_string_equal(buf, want);
  assert_int_equal(n, strlen(want));
}

static void test_unescape(void **state) {
  (void)state;
  expect_unescaped("/v1/nodes/n1", "/v1/nodes/n1");
  expect_unescaped("/v1/nodes/a%20b", "/v1/nodes/a b");
  expect_unescaped("%41%62%7e", "Ab~");
  expect_unescaped("%c3%A9", "\xc3\xa9");
  /* a NUL or a '/' would change what the path says: kept encoded */
  expect_unescaped("/v1/nodes/a%00b", "/v1/nodes/a%00b");
  expect_unescaped("/v1/nodes/a%2Fb/drain", "/v1/nodes/a%2Fb/drain");
  expect_unescaped("/v1/nodes/a%2fb", "/v1/nodes/a%2fb");
  /* broken escapes pass through */
  expect_unescaped("%", "%");
  expect_unescaped("%4", "%4");
  expect_unescaped("%zz%4g", "%zz%4g");
  expect_unescaped("100%", "100%");
  expect_unescaped("%%41", "%A");
  expect_unescaped("", "");
  /* what comes out then goes through the routes */
  char path[] = "/v1/nodes/a%2Fb/drain";
  gam_admin_unescape(path);
  gam_admin_route r;
  char why[160];
  assert_int_equal(gam_admin_route_parse(path, &r, why, sizeof why), 0);
  assert_string_equal(r.node, "a%2Fb");
}

/* ---- token ------------------------------------------------------------- */

static char tmpdir[] = "/tmp/ember-test-admin-XXXXXX";

static const char *token_file(const char *name, const char *text, mode_t mode) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
  assert_int_equal(fclose(f), 0);
  assert_int_equal(chmod(path, mode), 0);
  return path;
}

static void expect_load(const char *path, int code, const char *in_err) {
  gam_admin_token t;
  char err[512] = "";
  int rc = gam_admin_token_load(path, &t, err, sizeof err);
  if (rc != code)
    fail_msg("%s: %s (%s), expected %s", path, ember_errname(rc), err,
             ember_errname(code));
  if (in_err && !strstr(err, in_err))
    fail_msg("'%s' does not say '%s'", err, in_err);
}

static void test_token_file(void **state) {
  (void)state;
  expect_load(token_file("good", "s3cret-Token_1\n", 0600), 0, NULL);
  expect_load(token_file("owner-only", "s3cret\n", 0400), 0, NULL);
  expect_load(token_file("group", "s3cret\n", 0640), EMBER_EDENIED,
              "mode 0640");
  expect_load(token_file("world", "s3cret\n", 0604), EMBER_EDENIED, "chmod 600");
  expect_load(token_file("exec", "s3cret\n", 0610), EMBER_EDENIED, NULL);
  expect_load(tmpdir, EMBER_EDENIED, "not a regular file");
  expect_load("/nonexistent/ember/gam.token", EMBER_EIO, "No such file");
  expect_load(token_file("empty", "", 0600), EMBER_ECONFIG, "empty");
  expect_load(token_file("blank", " \n\t\r\n", 0600), EMBER_ECONFIG, "empty");
  expect_load(token_file("space", "two words\n", 0600), EMBER_ECONFIG,
              "space");
  expect_load(token_file("lines", "one\ntwo\n", 0600), EMBER_ECONFIG, NULL);
  expect_load(token_file("ctrl", "a\x01z", 0600), EMBER_ECONFIG, NULL);
  char *big = malloc(GAM_ADMIN_TOKEN_FILE_MAX + 2);
  assert_non_null(big);
  memset(big, 'x', GAM_ADMIN_TOKEN_FILE_MAX + 1);
  big[GAM_ADMIN_TOKEN_FILE_MAX + 1] = '\0';
  expect_load(token_file("big", big, 0600), EMBER_ECONFIG, "more than");
  big[GAM_ADMIN_TOKEN_FILE_MAX] = '\0';
  expect_load(token_file("max", big, 0600), 0, NULL);
  free(big);
  /* a FIFO must not hang the start */
  char fifo[512];
  snprintf(fifo, sizeof fifo, "%s/fifo", tmpdir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  expect_load(fifo, EMBER_EDENIED, "not a regular file");
}

static void test_token_match(void **state) {
  (void)state;
  gam_admin_token t;
  char err[256];
  assert_int_equal(gam_admin_token_load(
                       token_file("match", "  tok-123\r\n", 0600), &t, err,
                       sizeof err), 0);
  assert_true(gam_admin_token_matches(&t, "tok-123", 7));
  assert_false(gam_admin_token_matches(&t, "tok-124", 7));
  assert_false(gam_admin_token_matches(&t, "tok-12", 6));
  assert_false(gam_admin_token_matches(&t, "tok-1234", 8));
  assert_false(gam_admin_token_matches(&t, "", 0));
  /* a prefix of a longer presented token does not count */
  assert_false(gam_admin_token_matches(&t, "tok-123x", 8));

  const char *tok;
  size_t len;
  assert_true(gam_admin_bearer("Bearer tok-123", &tok, &len));
  assert_int_equal(len, 7);
  assert_memory_equal(tok, "tok-123", 7);
  assert_true(gam_admin_bearer("bearer \t tok-123  ", &tok, &len));
  assert_int_equal(len, 7);
  assert_true(gam_admin_token_matches(&t, tok, len));
  assert_false(gam_admin_bearer(NULL, &tok, &len));
  assert_false(gam_admin_bearer("", &tok, &len));
  assert_false(gam_admin_bearer("Bearer", &tok, &len));
  assert_false(gam_admin_bearer("Bearer   ", &tok, &len));
  assert_false(gam_admin_bearer("Bearertok-123", &tok, &len));
  assert_false(gam_admin_bearer("Basic dG9rOjEyMw==", &tok, &len));
}

/* ---- emberctl's tables and cells ---------------------------------------- */

/* What t prints, in a static buffer. */
static const char *printed(const ctl_table *t) {
  static char buf[4096];
  FILE *f = fmemopen(buf, sizeof buf, "w");
  assert_non_null(f);
  assert_int_equal(ctl_table_print(t, f), 0);
  assert_int_equal(fclose(f), 0);
  return buf;
}

static void test_table(void **state) {
  (void)state;
  static const char *const header[] = {"ID", "STATE", "LEASES", "LABELS"};
  ctl_table *t = ctl_table_new(4, header);
  assert_non_null(t);
  ctl_table_right(t, 2);
  ctl_table_right(t, 9);  /* out of range: ignored */
  const char *r1[] = {"n1", "up", "12", "sw,plf"};
  const char *r2[] = {"node-long", NULL, "3", "caf\xc3\xa9"};
  const char *r3[] = {"n3", "lost", "0", ""};
  ctl_table_add(t, r1);
  ctl_table_add(t, r2);
  ctl_table_add(t, r3);
  assert_string_equal(printed(t),
                      "ID         STATE  LEASES  LABELS\n"
                      "n1         up         12  sw,plf\n"
                      "node-long  -           3  caf\xc3\xa9\n"
                      "n3         lost        0  -\n");
  ctl_table_free(t);
  ctl_table_free(NULL);

  /* a header only; a one-column table has no padding at all */
  static const char *const one[] = {"X"};
  t = ctl_table_new(1, one);
  const char *wide[] = {"wider"};
  ctl_table_add(t, wide);
  assert_string_equal(printed(t), "X\nwider\n");
  ctl_table_free(t);

  /* UTF-8 counts characters, not bytes */
  static const char *const two[] = {"A", "B"};
  t = ctl_table_new(2, two);
  const char *u[] = {"\xc3\xa9\xc3\xa9", "x"};
  ctl_table_add(t, u);
  assert_string_equal(printed(t), "A   B\n\xc3\xa9\xc3\xa9  x\n");
  ctl_table_free(t);
  assert_int_equal(ctl_table_print(NULL, stdout), -1);
}

static void test_format(void **state) {
  (void)state;
  char b[64];
  assert_string_equal(ctl_format_age(-5, b, sizeof b), "0ms");
  assert_string_equal(ctl_format_age(230, b, sizeof b), "230ms");
  assert_string_equal(ctl_format_age(4250, b, sizeof b), "4.2s");
  assert_string_equal(ctl_format_age(59999, b, sizeof b), "59s");
  assert_string_equal(ctl_format_age(754000, b, sizeof b), "12m34s");
  assert_string_equal(ctl_format_age(3725000, b, sizeof b), "1h02m");
  assert_string_equal(ctl_format_age(2 * 86400000LL + 3 * 3600000LL, b,
                                     sizeof b), "2d03h");

  json_t *list = json_pack("[s,s,s]", "plf", "sw", "sw@fpga-emu");
  assert_string_equal(ctl_format_list(list, ", ", b, sizeof b),
                      "plf, sw, sw@fpga-emu");
  char small[10];
  assert_string_equal(ctl_format_list(list, ",", small, sizeof small),
                      "plf,sw...");
  json_decref(list);
  json_t *empty = json_array();
  assert_string_equal(ctl_format_list(empty, ",", b, sizeof b), "-");
  assert_string_equal(ctl_format_list(NULL, ",", b, sizeof b), "-");
  assert_string_equal(ctl_format_load(empty, b, sizeof b), "idle");
  json_decref(empty);

  json_t *load = json_loads(
      "[{\"accelerator\":\"sw\",\"queued\":3,\"utilization\":0.25},"
      "{\"accelerator\":\"cnn\",\"queued\":0,\"utilization\":0},"
      "{\"accelerator\":\"plf\",\"queued\":0,\"utilization\":0.6}]",
      0, NULL);
  assert_non_null(load);
  assert_string_equal(ctl_format_load(load, b, sizeof b), "sw 25% 3q, plf 60%");
  json_decref(load);

  json_t *o = json_pack("{s:s,s:s,s:I}", "id", "n1", "empty", "", "n",
                        (json_int_t)42);
  assert_string_equal(ctl_str(o, "id"), "n1");
  assert_string_equal(ctl_str(o, "empty"), "-");
  assert_string_equal(ctl_str(o, "none"), "-");
  assert_string_equal(ctl_str(NULL, "id"), "-");
  assert_string_equal(ctl_format_int(json_object_get(o, "n"), b, sizeof b),
                      "42");
  assert_string_equal(ctl_format_int(json_object_get(o, "id"), b, sizeof b),
                      "-");
  json_decref(o);
  /* a time renders as a date, whatever the local zone */
  ctl_format_time(1790000000000LL, b, sizeof b);
  assert_int_equal(strlen(b), 19);
  assert_true(b[4] == '-' && b[10] == ' ' && b[13] == ':');
}

static int setup(void **state) {
  (void)state;
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_routes),      cmocka_unit_test(test_no_routes),
      cmocka_unit_test(test_methods),     cmocka_unit_test(test_events_limit),
      cmocka_unit_test(test_printable),   cmocka_unit_test(test_unescape),
      cmocka_unit_test(test_token_file),
      cmocka_unit_test(test_token_match), cmocka_unit_test(test_table),
      cmocka_unit_test(test_format),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
