/*
 * hostport.h - the one parser of "HOST:PORT" addresses: the NAM's tcp:
 * listen items, metrics_listen and gam, the GAM's listen and admin_listen,
 * a client's tcp:HOST:PORT and the GAM address it asks for a lease.
 *
 * HOST is a name or an IPv4 address (letters, digits, '.', '-', '_'), or
 * an IPv6 address in brackets ("[::1]:7700", a zone as in "[fe80::1%eth0]"
 * allowed); an IPv6 address without brackets is refused, as its last ':'
 * cannot be told from the port's. PORT is 1 to 65535 in decimal digits, or
 * 0 where the caller allows it (the kernel picks a free port).
 * Nothing is resolved here: the caller hands host and port to getaddrinfo.
 */
#ifndef EMBER_HOSTPORT_H
#define EMBER_HOSTPORT_H

#include <stddef.h>

enum {
  HOSTPORT_HOST_MAX = 256,  /* host buffer, its NUL included */
  HOSTPORT_ANY_PORT = 1     /* flag: port 0 is allowed */
};

typedef struct hostport {
  char host[HOSTPORT_HOST_MAX]; /* IPv6 without its brackets */
  char port[6];                 /* the port's digits, for getaddrinfo */
  int port_num;                 /* the same as a number */
  int is_ipv6;                  /* the host was written in brackets */
} hostport;

/*
 * hostport_parse - split text into host and port and check both.
 * flags: 0 or HOSTPORT_ANY_PORT. out may be NULL (validation only).
 * Returns 0, or EMBER_ECONFIG with the reason in why (why may be NULL),
 * e.g. "no port (expected HOST:PORT)" or "port 70000 is not from 1 to
 * 65535". Thread-safe.
 */
int hostport_parse(const char *text, unsigned flags, hostport *out,
                   char *why, size_t why_len);

#endif
