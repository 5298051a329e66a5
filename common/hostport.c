/* hostport.c - "HOST:PORT" and "[IPv6]:PORT" (hostport.h). */
#include "hostport.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "errbuf.h"

static int parse_port(const char *s, unsigned flags, hostport *a, char *why,
                      size_t len) {
  int n = 0;
  size_t i;
  int lo = flags & HOSTPORT_ANY_PORT ? 0 : 1;
  for (i = 0; s[i]; i++) {
    if (!isdigit((unsigned char)s[i]) || i >= 5)
      return errbuf_printf(why, len, EMBER_ECONFIG,
                           "port '%.16s' is not a number from %d to 65535", s,
                           lo);
    n = n * 10 + (s[i] - '0');
  }
  if (i == 0)
    return errbuf_printf(why, len, EMBER_ECONFIG,
                         "no port (expected HOST:PORT)");
  if (n < lo || n > 65535)
    return errbuf_printf(why, len, EMBER_ECONFIG,
                         "port %d is not from %d to 65535", n, lo);
  memcpy(a->port, s, i + 1);
  a->port_num = n;
  return 0;
}

int hostport_parse(const char *text, unsigned flags, hostport *out,
                   char *why, size_t why_len) {
  hostport a;
  const char *host = text, *end, *port;
  int v6 = text[0] == '[';
  memset(&a, 0, sizeof a);
  if (v6) {
    host = text + 1;
    end = strchr(host, ']');
    if (!end)
      return errbuf_printf(why, why_len, EMBER_ECONFIG,
                           "no ']' after the IPv6 address");
    if (end[1] != ':')
      return errbuf_printf(why, why_len, EMBER_ECONFIG,
                           "no port after ']' (expected [ADDRESS]:PORT)");
    port = end + 2;
  } else {
    end = strrchr(text, ':');
    if (!end)
      return errbuf_printf(why, why_len, EMBER_ECONFIG,
                           "no port (expected HOST:PORT)");
    port = end + 1;
  }
  size_t n = (size_t)(end - host);
  if (n == 0)
    return errbuf_printf(why, why_len, EMBER_ECONFIG,
                         "empty host (expected HOST:PORT)");
  if (n >= sizeof a.host)
    return errbuf_printf(why, why_len, EMBER_ECONFIG,
                         "host is %zu bytes, more than the maximum %zu", n,
                         sizeof a.host - 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)host[i];
    if (!v6 && c == ':')
      return errbuf_printf(why, why_len, EMBER_ECONFIG,
                           "an IPv6 address needs brackets, e.g. [::1]:7700");
    if (!isalnum(c) && c != '.' && c != '-' && c != '_' &&
        !(v6 && (c == ':' || c == '%')))
      return isprint(c) ? errbuf_printf(why, why_len, EMBER_ECONFIG,
                                        "bad character '%c' in the host", c)
                        : errbuf_printf(why, why_len, EMBER_ECONFIG,
                                        "bad byte 0x%02x in the host", c);
  }
  if (parse_port(port, flags, &a, why, why_len)) return EMBER_ECONFIG;
  memcpy(a.host, host, n);
  a.host[n] = '\0';
  a.is_ipv6 = v6;
  if (out) *out = a;
  return 0;
}
