/*
 * test_hostport.c - the one HOST:PORT parser (common/hostport.c): names,
 * IPv4, bracketed IPv6 with and without a zone, port bounds, port 0 only
 * when allowed, and the reason for each refusal.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ember/ember_errors.h"
#include "hostport.h"

static void accept_ok(const char *text, unsigned flags, const char *host,
                      const char *port, int is_ipv6) {
  hostport a;
  char why[256] = "";
  memset(&a, 0x55, sizeof a);
  int rc = hostport_parse(text, flags, &a, why, sizeof why);
  if (rc != 0) fail_msg("'%s': %d (%s)", text, rc, why);
  assert_string_equal(a.host, host);
  assert_string_equal(a.port, port);
  assert_int_equal(a.port_num, atoi(port));
  assert_int_equal(a.is_ipv6, is_ipv6);
  /* validation only: out may be NULL */
  assert_int_equal(hostport_parse(text, flags, NULL, NULL, 0), 0);
}

static void refuse(const char *text, unsigned flags, const char *reason) {
  hostport a;
  char why[256] = "";
  memset(&a, 0x55, sizeof a);
  assert_int_equal(hostport_parse(text, flags, &a, why, sizeof why),
                   EMBER_ECONFIG);
  assert_string_equal(why, reason);
  assert_int_equal(((unsigned char *)&a)[0], 0x55); /* out left alone */
  assert_int_equal(hostport_parse(text, flags, NULL, NULL, 0), EMBER_ECONFIG);
}

static void accepted(void **state) {
  accept_ok("127.0.0.1:7070", 0, "127.0.0.1", "7070", 0);
  accept_ok("localhost:1", 0, "localhost", "1", 0);
  accept_ok("node-1.example_x:65535", 0, "node-1.example_x", "65535", 0);
  accept_ok("[::1]:7700", 0, "::1", "7700", 1);
  accept_ok("[fe80::1%eth0]:80", 0, "fe80::1%eth0", "80", 1);
  accept_ok("0.0.0.0:0", HOSTPORT_ANY_PORT, "0.0.0.0", "0", 0);
  accept_ok("[::]:0", HOSTPORT_ANY_PORT, "::", "0", 1);
  accept_ok("h:00080", 0, "h", "00080", 0);
}

static void refused(void **state) {
  refuse("9464", 0, "no port (expected HOST:PORT)");
  refuse("h:", 0, "no port (expected HOST:PORT)");
  refuse(":7700", 0, "empty host (expected HOST:PORT)");
  refuse("[]:7700", 0, "empty host (expected HOST:PORT)");
  refuse("[::1:80", 0, "no ']' after the IPv6 address");
  refuse("[::1]7700", 0, "no port after ']' (expected [ADDRESS]:PORT)");
  refuse("[::1]", 0, "no port after ']' (expected [ADDRESS]:PORT)");
  refuse("::1:7700", 0, "an IPv6 address needs brackets, e.g. [::1]:7700");
  refuse("tcp:h:1", 0, "an IPv6 address needs brackets, e.g. [::1]:7700");
  refuse("h:77x", 0, "port '77x' is not a number from 1 to 65535");
  refuse("h:-1", 0, "port '-1' is not a number from 1 to 65535");
  refuse("h: 80", 0, "port ' 80' is not a number from 1 to 65535");
  refuse("h:123456", 0, "port '123456' is not a number from 1 to 65535");
  refuse("h:65536", 0, "port 65536 is not from 1 to 65535");
  refuse("h:99999", HOSTPORT_ANY_PORT, "port 99999 is not from 0 to 65535");
  refuse("h:0", 0, "port 0 is not from 1 to 65535");
  refuse("h:x", HOSTPORT_ANY_PORT, "port 'x' is not a number from 0 to 65535");
  refuse("a b:80", 0, "bad character ' ' in the host");
  refuse("a\nb:80", 0, "bad byte 0x0a in the host");
  refuse("a%b:80", 0, "bad character '%' in the host");
  refuse("[a/b]:80", 0, "bad character '/' in the host");
}

static void host_length(void **state) {
  char text[HOSTPORT_HOST_MAX + 8];
  hostport a;
  memset(text, 'h', HOSTPORT_HOST_MAX - 1);   /* the longest host */
  strcpy(text + HOSTPORT_HOST_MAX - 1, ":1");
  assert_int_equal(hostport_parse(text, 0, &a, NULL, 0), 0);
  assert_int_equal(strlen(a.host), HOSTPORT_HOST_MAX - 1);
  memset(text, 'h', HOSTPORT_HOST_MAX);       /* one byte more */
  strcpy(text + HOSTPORT_HOST_MAX, ":1");
  refuse(text, 0, "host is 256 bytes, more than the maximum 255");
}

/* A short why buffer is cut, never overrun. */
static void short_reason(void **state) {
  char why[8];
  memset(why, 'x', sizeof why);
  assert_int_equal(hostport_parse("h:", 0, NULL, why, 4), EMBER_ECONFIG);
  assert_string_equal(why, "no ");
  assert_int_equal(why[4], 'x');
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(accepted),
      cmocka_unit_test(refused),
      cmocka_unit_test(host_length),
      cmocka_unit_test(short_reason),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
