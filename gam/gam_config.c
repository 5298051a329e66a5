/* gam_config.c - ember-gam's configuration table (gam_config.h). */
#include "gam_config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core_admin.h"
#include "ember/ember_errors.h"
#include "errbuf.h"
#include "hostport.h"
#include "log.h"
#include "policy.h"

int gam_hostport_parse(const char *text, struct sockaddr_storage *out,
                       char *why, size_t why_len) {
  hostport hp;
  if (hostport_parse(text, HOSTPORT_ANY_PORT, &hp, why, why_len) != 0)
    return EMBER_ECONFIG;
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
  if (strcmp(hp.host, "localhost") == 0) strcpy(hp.host, "127.0.0.1");
  if (hp.is_ipv6) {
    if (inet_pton(AF_INET6, hp.host, &v6->sin6_addr) != 1)
      return errbuf_printf(why, why_len, EMBER_ECONFIG, "not an IPv6 address");
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((uint16_t)hp.port_num);
  } else if (inet_pton(AF_INET, hp.host, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)hp.port_num);
  } else {
    return errbuf_printf(
        why, why_len, EMBER_ECONFIG,
        "the host must be an IPv4 address, [IPv6] or localhost");
  }
  if (out) *out = ss;
  return 0;
}

static int check_hostport(const char *text, char *why, size_t len) {
  return gam_hostport_parse(text, NULL, why, len);
}

static int check_optional_hostport(const char *text, char *why, size_t len) {
  return text[0] ? gam_hostport_parse(text, NULL, why, len) : 0;
}

/* static_partition items: LABEL=NODE */
static int check_rule(const char *text, char *why, size_t len) {
  const char *eq = strchr(text, '=');
  if (!eq) return errbuf_printf(why, len, EMBER_ECONFIG, "expected LABEL=NODE");
  char label[128];
  size_t ll = (size_t)(eq - text);
  if (ll == 0 || ll >= sizeof label || !eq[1])
    return errbuf_printf(why, len, EMBER_ECONFIG, "expected LABEL=NODE");
  memcpy(label, text, ll);
  label[ll] = '\0';
  if (!gam_label_valid(label))
    return errbuf_printf(why, len, EMBER_ECONFIG,
                         "labels are 1..64 characters of [A-Za-z0-9_.@-]");
  return 0;
}

int gam_startups_parse(const char *text, gam_startups *out, char *why,
                       size_t why_len) {
  unsigned long v[3];
  char tail;
  int n = sscanf(text, "%lu:%lu:%lu%c", &v[0], &v[1], &v[2], &tail);
  if (n == 1 && sscanf(text, "%lu%c", &v[0], &tail) == 1) {
    v[2] = v[0];  /* N alone: N at once, none dropped before */
    v[1] = 100;
  } else if (n != 3) {
    return errbuf_printf(why, why_len, EMBER_ECONFIG,
                         "expected START:RATE:FULL (or FULL alone)");
  }
  for (const char *p = text; *p; p++)
    if (!(*p >= '0' && *p <= '9') && *p != ':')
      return errbuf_printf(why, why_len, EMBER_ECONFIG,
                           "expected START:RATE:FULL (or FULL alone)");
  if (v[2] < 1 || v[2] > 1000000)
    return errbuf_printf(why, why_len, EMBER_ECONFIG,
                         "FULL must be 1..1000000");
  if (v[0] > v[2])
    return errbuf_printf(why, why_len, EMBER_ECONFIG,
                         "START must be at most FULL");
  if (v[1] > 100)
    return errbuf_printf(why, why_len, EMBER_ECONFIG,
                         "RATE is a percentage, 0..100");
  if (out) {
    out->start = (unsigned)v[0];
    out->rate = (unsigned)v[1];
    out->full = (unsigned)v[2];
  }
  return 0;
}

static int check_startups(const char *text, char *why, size_t len) {
  return gam_startups_parse(text, NULL, why, len);
}

static const config_enum_value policies[] = {
  {"delay", GAM_POLICY_DELAY}, {"naive", GAM_POLICY_NAIVE},
  {"static", GAM_POLICY_STATIC}, {NULL, 0},
};

#define AT(field, ctype) CONFIG_AT(struct gam_config, field, ctype)
#define KiB (INT64_C(1) << 10)
#define MiB (INT64_C(1) << 20)
#define DAY_MS INT64_C(86400000)

const config_entry gam_config_table[] = {
  {.name = "listen", .type = CONFIG_STRING, .offset = AT(listen, char *),
   .def = "127.0.0.1:7070", .max = 300, .check = check_hostport,
   .help = "HOST:PORT where NAMs register and send heartbeats and apps "
           "acquire nodes (the binary protocol). A NAM registers only by "
           "proving it holds the cluster key; apps need no key to acquire: "
           "keep it on a trusted network."},
  {.name = "admin_listen", .type = CONFIG_STRING,
   .offset = AT(admin_listen, char *), .def = "127.0.0.1:7080", .max = 300,
   .check = check_optional_hostport,
   .help = "HOST:PORT of the HTTP admin API (/v1/..., /healthz, /metrics); "
           "empty turns it off. Reads are open to whoever reaches it, "
           "changes need the bearer token."},
  {.name = "admin_token_file", .type = CONFIG_STRING,
   .offset = AT(admin_token_file, char *), .def = "/etc/ember/gam.token",
   .max = 4096,
   .help = "File holding the admin API's bearer token (one line); it must "
           "be mode 0600 or stricter."},
  {.name = "admin_timeout", .type = CONFIG_DURATION,
   .offset = AT(admin_timeout_ms, uint64_t), .def = "5s", .min = 1000,
   .max = 3600000,
   .help = "An admin API connection idle this long is closed (whole "
           "seconds), so that clients that send half a request cannot hold "
           "a slot."},
  {.name = "admin_max_connections", .type = CONFIG_INT,
   .offset = AT(admin_max_connections, int), .def = "512", .min = 4,
   .max = 100000,
   .help = "Admin API connections at once; more wait in the listen backlog "
           "until one closes."},
  {.name = "admin_max_connections_per_ip", .type = CONFIG_INT,
   .offset = AT(admin_max_connections_per_ip, int), .def = "8", .min = 0,
   .max = 100000,
   .help = "Admin API connections at once from one client address; more are "
           "closed at once. Half-sent requests from N addresses hold at most "
           "N times this many until admin_timeout: keep it well under "
           "admin_max_connections / admin_threads, so that they cannot fill "
           "the slots /healthz needs. 0 sets no limit."},
  {.name = "admin_threads", .type = CONFIG_INT,
   .offset = AT(admin_threads, int), .def = "4", .min = 1, .max = 64,
   .help = "Threads serving the admin API: a slow request (a big /metrics, "
           "a change waiting for SQLite) holds only its own."},
  {.name = "cluster_key_file", .type = CONFIG_STRING,
   .offset = AT(cluster_key_file, char *), .def = "/etc/ember/cluster.key",
   .max = 4096,
   .help = "File holding the cluster key (64 hex digits, mode 0600) that "
           "signs leases and that NAMs prove they hold when they register; "
           "every NAM has the same file. Required."},
  {.name = "database", .type = CONFIG_STRING, .offset = AT(database, char *),
   .def = "/var/lib/ember/gam.db", .max = 4096,
   .help = "SQLite file holding nodes, labels, apps, leases and the event "
           "log (WAL mode: keep it on a local disk); empty keeps the state in memory only, lost at exit (for tests)."},
  {.name = "database_max_size", .type = CONFIG_SIZE,
   .offset = AT(database_max_size, uint64_t), .def = "0", .min = 0,
   .max = INT64_C(1) << 50,
   .help = "Cap on the database file (0: none). A change that would pass "
           "it fails as on a full disk: the admin caller gets 503 and the "
           "GAM stops, to restart from what is on disk."},
  {.name = "heartbeat_interval", .type = CONFIG_DURATION,
   .offset = AT(heartbeat_interval_ms, uint64_t), .def = "1s", .min = 10,
   .max = 600000,
   .help = "How often NAMs send heartbeats (told to them in each "
           "acknowledgement). Each heartbeat is a scheduling opportunity."},
  {.name = "lost_after", .type = CONFIG_INT, .offset = AT(lost_after, int),
   .def = "3", .min = 1, .max = 1000,
   .help = "Heartbeats a node may miss before it is declared lost; its "
           "leases then end and their apps are told."},
  {.name = "policy", .type = CONFIG_ENUM, .offset = AT(policy, int),
   .def = "delay", .enums = policies,
   .help = "Placement policy: delay (accelerator-affinity delay scheduling: "
           "apps wait a few heartbeats for a node already running their "
           "label), naive (first fit) or static (a fixed label-to-node "
           "partition, static_partition)."},
  {.name = "delay_max_skips", .type = CONFIG_INT,
   .offset = AT(delay_max_skips, int), .def = "80", .min = 1, .max = 100000,
   .help = "delay: scheduling opportunities after which a pending app takes "
           "any node; its affinity threshold falls linearly from 1 to 0 "
           "over this many skipped heartbeats (of any node: scale it with "
           "the cluster, about 20 per node). The simulator's 4-node figures "
           "(gam/sim) use 80."},
  {.name = "static_partition", .type = CONFIG_LIST,
   .offset = AT(static_partition, config_list), .def = "", .min = 0,
   .max = 4096, .check = check_rule,
   .help = "static: LABEL=NODE pairs giving each node the labels it runs; "
           "empty splits the nodes evenly between the labels asked for."},
  {.name = "slots_per_node", .type = CONFIG_INT,
   .offset = AT(slots_per_node, int), .def = "16", .min = 0, .max = 100000,
   .help = "Leases one node holds at once; 0 sets no limit."},
  {.name = "lease_ttl", .type = CONFIG_DURATION,
   .offset = AT(lease_ttl_ms, uint64_t), .def = "1h", .min = 1000,
   .max = 30 * DAY_MS,
   .help = "How long a lease is valid; the NAM refuses it afterwards and "
           "the GAM ends it."},
  {.name = "app_grace", .type = CONFIG_DURATION,
   .offset = AT(app_grace_ms, uint64_t), .def = "30s", .min = 0,
   .max = DAY_MS,
   .help = "How long a placed app may be without its connection to the GAM "
           "(its process died, or the GAM restarted) before its leases end; "
           "the NAMs then drop its clients. It may Release them meanwhile."},
  {.name = "acquire_timeout", .type = CONFIG_DURATION,
   .offset = AT(acquire_timeout_ms, uint64_t), .def = "60s", .min = 100,
   .max = DAY_MS,
   .help = "How long an Acquire may wait to be placed when the app gives "
           "no wait; it then gets the nodes placed so far, or an error if "
           "none."},
  {.name = "max_frame", .type = CONFIG_SIZE, .offset = AT(max_frame, uint64_t),
   .def = "1MiB", .min = 4 * KiB, .max = 64 * MiB,
   .help = "Largest protocol frame accepted; a peer that sends a larger one "
           "is disconnected."},
  {.name = "max_connections", .type = CONFIG_INT,
   .offset = AT(max_connections, int), .def = "20000", .min = 1,
   .max = 1000000,
   .help = "NAM and app connections at once; more are refused."},
  {.name = "max_connections_per_address", .type = CONFIG_INT,
   .offset = AT(max_connections_per_address, int), .def = "256", .min = 0,
   .max = 1000000,
   .help = "Connections at once from one client address (NAMs, apps and "
           "those not yet past Hello together); more are refused. 0 sets no "
           "limit (a load generator on one host)."},
  {.name = "max_startups", .type = CONFIG_STRING,
   .offset = AT(max_startups, char *), .def = "100:30:400", .max = 64,
   .check = check_startups,
   .help = "START:RATE:FULL, as sshd's MaxStartups, for connections that "
           "have not sent Hello yet: past START of them a new one is dropped "
           "with probability RATE%, rising linearly to 100% at FULL (never "
           "more than half of max_connections, so that there is always room "
           "for connections past Hello). What is dropped is the oldest "
           "connection from the address holding the most unfinished "
           "handshakes, when that is more than the newcomer's own address "
           "holds; else the newcomer."},
  {.name = "max_startups_per_address", .type = CONFIG_INT,
   .offset = AT(max_startups_per_address, int), .def = "32", .min = 0,
   .max = 1000000,
   .help = "Connections from one client address that have not sent Hello "
           "yet; more are refused. 0 sets no limit."},
  {.name = "handshake_timeout", .type = CONFIG_DURATION,
   .offset = AT(handshake_timeout_ms, uint64_t), .def = "10s", .min = 100,
   .max = 3600000,
   .help = "A connection that has not sent its Hello this long after "
           "connecting is sent an Error and closed. Before Hello a frame may "
           "be at most 4 KiB (a Hello's most): a larger one is refused at its "
           "length."},
  {.name = "frame_timeout", .type = CONFIG_DURATION,
   .offset = AT(frame_timeout_ms, uint64_t), .def = "10s", .min = 100,
   .max = 3600000,
   .help = "A frame whose first bytes came must be complete within this "
           "long, and a peer that leaves more than 4 x max_frame of replies "
           "unread (the GAM stops reading it meanwhile) must read them "
           "within this long; else it is closed."},
  {.name = "idle_timeout", .type = CONFIG_DURATION,
   .offset = AT(idle_timeout_ms, uint64_t), .def = "60s", .min = 0,
   .max = 86400000,
   .help = "A connection past Hello that holds nothing (no node registered, "
           "no app that has not ended) and sends nothing this long is "
           "closed; a NAM's after max(this, lost_after heartbeats). Apps "
           "waiting for or holding leases are never idle. 0 closes none."},
  {.name = "max_read_buffers", .type = CONFIG_SIZE,
   .offset = AT(max_read_buffers, uint64_t), .def = "64MiB", .min = 64 * KiB,
   .max = INT64_C(1) << 40,
   .help = "Bytes of partly received frames held for all connections at "
           "once (each holds at most max_frame, counted before it is "
           "allocated); a frame that would pass it is refused (EBUSY) and "
           "its connection closed."},
  {.name = "log_level", .type = CONFIG_ENUM, .flags = CONFIG_RELOADABLE,
   .offset = AT(log_level, int), .def = "info", .enums = config_log_levels,
   .help = "Most detailed level of the messages logged to stderr (the "
           "journal under systemd)."},
  {0},
};
