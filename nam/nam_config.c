/* nam_config.c - ember-nam's configuration table (see nam_config.h). */
#include "nam_config.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "log.h"

static int fail(char *why, size_t len, const char *f, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *why, size_t len, const char *f, ...) {
  va_list ap;
  if (why && len) {
    va_start(ap, f);
    vsnprintf(why, len, f, ap);
    va_end(ap);
  }
  return EMBER_ECONFIG;
}

static int parse_port(const char *s, const char *pre, int *port, char *why,
                      size_t len) {
  int n = 0;
  size_t i;
  for (i = 0; s[i]; i++) {
    if (!isdigit((unsigned char)s[i]) || i >= 5)
      return fail(why, len, "port '%.16s' is not a number from 1 to 65535", s);
    n = n * 10 + (s[i] - '0');
  }
  if (i == 0) return fail(why, len, "no port (expected %sHOST:PORT)", pre);
  if (n < 1 || n > 65535)
    return fail(why, len, "port %d is not from 1 to 65535", n);
  *port = n;
  return 0;
}

/* HOST:PORT; pre ("tcp:" or "") is how the reasons show the form. */
static int parse_tcp(const char *s, const char *pre, nam_listen_addr *a,
                     char *why, size_t len) {
  const char *host = s, *end, *port;
  size_t n;
  bool v6 = *s == '[';
  if (v6) {
    host = s + 1;
    end = strchr(host, ']');
    if (!end) return fail(why, len, "no ']' after the IPv6 address");
    if (end[1] != ':')
      return fail(why, len, "no port after ']' (expected %s[ADDRESS]:PORT)", pre);
    port = end + 2;
  } else {
    end = strrchr(s, ':');
    if (!end) return fail(why, len, "no port (expected %sHOST:PORT)", pre);
    port = end + 1;
  }
  n = (size_t)(end - host);
  if (n == 0)
    return fail(why, len, "empty host (expected %sHOST:PORT)", pre);
  if (n >= sizeof a->host)
    return fail(why, len, "host is %zu bytes, more than the maximum %zu", n,
                sizeof a->host - 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)host[i];
    if (!v6 && c == ':')
      return fail(why, len,
                  "an IPv6 address needs brackets, e.g. %s[::1]:7700", pre);
    if (!isalnum(c) && c != '.' && c != '-' && c != '_' &&
        !(v6 && (c == ':' || c == '%')))
      return fail(why, len, "bad character '%c' in the host", c);
  }
  if (parse_port(port, pre, &a->port, why, len)) return EMBER_ECONFIG;
  memcpy(a->host, host, n);
  a->host[n] = '\0';
  return 0;
}

int nam_listen_parse(const char *item, nam_listen_addr *out, char *why,
                     size_t why_len) {
  nam_listen_addr a;
  memset(&a, 0, sizeof a);
  if (strncmp(item, "unix:", 5) == 0) {
    size_t n = strlen(item + 5);
    if (n == 0) return fail(why, why_len, "empty socket path");
    if (n >= sizeof a.path)
      return fail(why, why_len,
                  "socket path is %zu bytes, more than the maximum %zu", n,
                  sizeof a.path - 1);
    a.is_unix = 1;
    memcpy(a.path, item + 5, n + 1);
  } else if (strncmp(item, "tcp:", 4) == 0) {
    if (parse_tcp(item + 4, "tcp:", &a, why, why_len)) return EMBER_ECONFIG;
  } else {
    return fail(why, why_len, "expected unix:PATH or tcp:HOST:PORT");
  }
  if (out) *out = a;
  return 0;
}

int nam_hostport_parse(const char *text, nam_listen_addr *out, char *why,
                       size_t why_len) {
  nam_listen_addr a;
  memset(&a, 0, sizeof a);
  if (parse_tcp(text, "", &a, why, why_len)) return EMBER_ECONFIG;
  if (out) *out = a;
  return 0;
}

static int check_listen(const char *text, char *why, size_t len) {
  return nam_listen_parse(text, NULL, why, len);
}

/* metrics_listen: HOST:PORT, or empty for no metrics endpoint. */
static int check_metrics_listen(const char *text, char *why, size_t len) {
  return text[0] ? nam_hostport_parse(text, NULL, why, len) : 0;
}

/* Group and node names: letters, digits, '.', '-', '_'. */
static int check_name(const char *text, char *why, size_t len) {
  for (const char *p = text; *p; p++)
    if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_')
      return fail(why, len, "only letters, digits, '.', '-' and '_' allowed");
  return 0;
}

static const config_enum_value log_levels[] = {
  {"error", LOG_LVL_ERR},   {"warning", LOG_LVL_WARN},
  {"notice", LOG_LVL_NOTICE}, {"info", LOG_LVL_INFO},
  {"debug", LOG_LVL_DEBUG}, {NULL, 0},
};

#define AT(field, ctype) CONFIG_AT(struct nam_config, field, ctype)
#define KiB (INT64_C(1) << 10)
#define MiB (INT64_C(1) << 20)
#define GiB (INT64_C(1) << 30)
#define TiB (INT64_C(1) << 40)

const config_entry nam_config_table[] = {
  {.name = "listen", .type = CONFIG_LIST, .offset = AT(listen, config_list),
   .def = "unix:/run/ember/nam.sock", .min = 1, .max = 16,
   .check = check_listen,
   .help = "Addresses to listen on for clients, comma-separated: unix:PATH "
           "for a Unix socket (PATH at most 107 bytes) or tcp:HOST:PORT "
           "(an IPv6 address goes in brackets, e.g. tcp:[::1]:7700)."},
  {.name = "socket_mode", .type = CONFIG_INT, .flags = CONFIG_OCTAL,
   .offset = AT(socket_mode, int), .def = "0660", .min = 0, .max = 0777,
   .help = "Permissions of the Unix sockets, in octal as for chmod. Whoever "
           "can connect can run tasks on this node's accelerators."},
  {.name = "socket_group", .type = CONFIG_STRING,
   .offset = AT(socket_group, char *), .def = "", .max = 255,
   .check = check_name,
   .help = "Group given to the Unix sockets; empty leaves the group they "
           "are created with."},
  {.name = "cpu_workers", .type = CONFIG_INT, .offset = AT(cpu_workers, int),
   .def = "0", .min = 0, .max = 1024,
   .help = "Worker threads of the CPU platform; 0 starts one per online "
           "core."},
  {.name = "queue_capacity", .type = CONFIG_INT,
   .offset = AT(queue_capacity, int), .def = "4096", .min = 1,
   .max = 1000000,
   .help = "Tasks each accelerator's queue holds; a task submitted to a "
           "full queue is refused as busy."},
  {.name = "max_frame", .type = CONFIG_SIZE, .offset = AT(max_frame, uint64_t),
   .def = "64MiB", .min = 4 * KiB, .max = GiB,
   .help = "Largest protocol frame accepted from a client; a client that "
           "sends a larger one is disconnected."},
  {.name = "max_clients", .type = CONFIG_INT, .flags = CONFIG_RELOADABLE,
   .offset = AT(max_clients, int), .def = "256", .min = 1, .max = 65536,
   .help = "Clients connected at once; further connections are refused "
           "until one closes."},
  {.name = "max_inflight", .type = CONFIG_INT, .flags = CONFIG_RELOADABLE,
   .offset = AT(max_inflight, int), .def = "64", .min = 1, .max = 65536,
   .help = "Tasks one client may have in flight; at this many the NAM stops "
           "reading from the client until one of them finishes."},
  {.name = "max_block_bytes", .type = CONFIG_SIZE, .flags = CONFIG_RELOADABLE,
   .offset = AT(max_block_bytes, uint64_t), .def = "1GiB", .min = MiB,
   .max = TiB,
   .help = "Bytes of input blocks one client may hold in the NAM at once; "
           "a block beyond that is refused."},
  {.name = "drain_timeout", .type = CONFIG_DURATION,
   .offset = AT(drain_timeout_ms, uint64_t), .def = "30s", .min = 0,
   .max = 3600000,
   .help = "On SIGTERM, how long to wait for the tasks in flight before "
           "exiting anyway; 0 exits at once."},
  {.name = "log_level", .type = CONFIG_ENUM, .flags = CONFIG_RELOADABLE,
   .offset = AT(log_level, int), .def = "info", .enums = log_levels,
   .help = "Most detailed level of the messages logged to stderr (the "
           "journal under systemd)."},
  {.name = "node_name", .type = CONFIG_STRING, .offset = AT(node_name, char *),
   .def = "", .max = 255, .check = check_name,
   .help = "Name of this node in logs, metrics and at the GAM; empty uses "
           "the host name."},
  {.name = "metrics_listen", .type = CONFIG_STRING,
   .offset = AT(metrics_listen, char *), .def = "127.0.0.1:9464", .max = 300,
   .check = check_metrics_listen,
   .help = "HOST:PORT where GET /metrics serves Prometheus text (an IPv6 "
           "address goes in brackets, e.g. [::1]:9464); empty turns the "
           "endpoint off. Anyone who can reach it sees the node's load and "
           "accelerator names: keep it on loopback or a trusted network."},
  {.name = NULL},
};
