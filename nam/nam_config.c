/* nam_config.c - ember-nam's configuration table (see nam_config.h). */
#include "nam_config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "errbuf.h"
#include "hostport.h"
#include "log.h"

/* the build sets it (nam/CMakeLists.txt): LIBDIR/ember/accelerators */
#ifndef EMBER_PLUGIN_DIR
#error "EMBER_PLUGIN_DIR is not defined"
#endif

int nam_listen_parse(const char *item, nam_listen_addr *out, char *why,
                     size_t why_len) {
  nam_listen_addr a;
  memset(&a, 0, sizeof a);
  if (strncmp(item, "unix:", 5) == 0) {
    size_t n = strlen(item + 5);
    if (n == 0)
      return errbuf_printf(why, why_len, EMBER_ECONFIG, "empty socket path");
    if (n >= sizeof a.path)
      return errbuf_printf(
          why, why_len, EMBER_ECONFIG,
          "socket path is %zu bytes, more than the maximum %zu", n,
          sizeof a.path - 1);
    a.is_unix = 1;
    memcpy(a.path, item + 5, n + 1);
  } else if (strncmp(item, "tcp:", 4) == 0) {
    hostport hp;
    if (hostport_parse(item + 4, 0, &hp, why, why_len)) return EMBER_ECONFIG;
    memcpy(a.host, hp.host, sizeof a.host);
    a.port = hp.port_num;
  } else {
    return errbuf_printf(why, why_len, EMBER_ECONFIG,
                         "expected unix:PATH or tcp:HOST:PORT");
  }
  if (out) *out = a;
  return 0;
}

static int check_listen(const char *text, char *why, size_t len) {
  return nam_listen_parse(text, NULL, why, len);
}

/* metrics_listen: HOST:PORT, or empty for no metrics endpoint. */
static int check_metrics_listen(const char *text, char *why, size_t len) {
  return text[0] ? hostport_parse(text, 0, NULL, why, len) : 0;
}

/* Group and node names: letters, digits, '.', '-', '_'. */
static int check_name(const char *text, char *why, size_t len) {
  for (const char *p = text; *p; p++)
    if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_')
      return errbuf_printf(why, len, EMBER_ECONFIG,
                           "only letters, digits, '.', '-' and '_' allowed");
  return 0;
}

bool nam_label_valid(const char *label) {
  size_t n = strlen(label);
  if (n < 1 || n > 64) return false;
  for (const char *p = label; *p; p++)
    if (!isalnum((unsigned char)*p) && !strchr("_.-@", *p)) return false;
  return true;
}

static int check_label(const char *text, char *why, size_t len) {
  if (nam_label_valid(text)) return 0;
  return errbuf_printf(why, len, EMBER_ECONFIG,
                       "a label is 1 to 64 letters, digits, '_', '.', '-' or "
                       "'@' (e.g. sw or sw@fpga-emu)");
}

/* gam: HOST:PORT (a tcp: in front is taken too), or empty. */
static int check_gam(const char *text, char *why, size_t len) {
  if (!text[0]) return 0;
  return hostport_parse(strncmp(text, "tcp:", 4) == 0 ? text + 4 : text, 0,
                        NULL, why, len);
}

/* advertise: tcp:HOST:PORT, or empty. */
static int check_advertise(const char *text, char *why, size_t len) {
  if (!text[0]) return 0;
  if (strncmp(text, "tcp:", 4) != 0)
    return errbuf_printf(why, len, EMBER_ECONFIG,
                         "expected tcp:HOST:PORT (where apps reach this NAM)");
  return nam_listen_parse(text, NULL, why, len);
}

int nam_rate_parse(const char *text, double *out, char *why, size_t len) {
  char *end;
  double v = strtod(text, &end);
  if (end == text || *end || !(v >= 0 && v <= 1))
    return errbuf_printf(why, len, EMBER_ECONFIG,
                         "'%.32s' is not a rate from 0 to 1 (e.g. 0.1)", text);
  if (out) *out = v;
  return 0;
}

static int check_rate(const char *text, char *why, size_t len) {
  return nam_rate_parse(text, NULL, why, len);
}

int nam_timing_parse(const char *text, char *acc, size_t acc_len,
                     double *units, double *mhz, char *why, size_t len) {
  const char *c1 = strchr(text, ':');
  const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
  if (!c1 || !c2 || c1 == text)
    return errbuf_printf(
        why, len, EMBER_ECONFIG,
        "expected ACCELERATOR:UNITS_PER_CYCLE:MHZ, e.g. sw:256:250");
  if ((size_t)(c1 - text) >= (acc_len ? acc_len : 32))
    return errbuf_printf(why, len, EMBER_ECONFIG, "accelerator name too long");
  char *end;
  double u = strtod(c1 + 1, &end);
  if (end != c2 || !(u > 0 && u < 1e9))
    return errbuf_printf(why, len, EMBER_ECONFIG,
                         "units per cycle must be a positive number");
  double m = strtod(c2 + 1, &end);
  if (end == c2 + 1 || *end || !(m > 0 && m < 1e6))
    return errbuf_printf(why, len, EMBER_ECONFIG,
                         "clock must be a positive number of MHz");
  if (acc) {
    memcpy(acc, text, (size_t)(c1 - text));
    acc[c1 - text] = '\0';
  }
  if (units) *units = u;
  if (mhz) *mhz = m;
  return 0;
}

static int check_timing(const char *text, char *why, size_t len) {
  return nam_timing_parse(text, NULL, 0, NULL, NULL, why, len);
}

int nam_startups_parse(const char *text, unsigned *start, unsigned *rate,
                       unsigned *full, char *why, size_t len) {
  unsigned long v[3];
  int n = 0;
  const char *p = text;
  for (;;) {
    char *end;
    if (*p < '0' || *p > '9') break;
    v[n++] = strtoul(p, &end, 10);
    p = end;
    if (*p != ':' || n == 3) break;
    p++;
  }
  if ((n != 1 && n != 3) || *p)
    return errbuf_printf(why, len, EMBER_ECONFIG,
                         "expected START:RATE:FULL (e.g. 64:30:128) or one "
                         "number for both START and FULL");
  if (n == 1) v[2] = v[0], v[1] = 100;
  if (v[2] > 65536 || v[0] > v[2] || v[1] > 100)
    return errbuf_printf(
        why, len, EMBER_ECONFIG,
        "START at most FULL, FULL at most 65536, RATE a percentage (0 to 100)");
  if (start) *start = (unsigned)v[0];
  if (rate) *rate = (unsigned)v[1];
  if (full) *full = (unsigned)v[2];
  return 0;
}

static int check_startups(const char *text, char *why, size_t len) {
  return nam_startups_parse(text, NULL, NULL, NULL, why, len);
}

static const config_enum_value schedulers[] = {
  {"fcfs", 0}, {"fair", 1}, {NULL, 0},
};

static const config_enum_value clocks[] = {
  {"real", 0}, {"virtual", 1}, {NULL, 0},
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
   .help = "Clients connected at once over all listeners; further "
           "connections are refused with an Error frame until one closes."},
  {.name = "max_clients_unix", .type = CONFIG_INT, .flags = CONFIG_RELOADABLE,
   .offset = AT(max_clients_unix, int), .def = "192", .min = 1, .max = 65536,
   .help = "Clients connected at once on the unix sockets. Kept below "
           "max_clients so that a full TCP side (max_clients_tcp) leaves room "
           "for local clients, and the other way round."},
  {.name = "max_clients_tcp", .type = CONFIG_INT, .flags = CONFIG_RELOADABLE,
   .offset = AT(max_clients_tcp, int), .def = "192", .min = 1, .max = 65536,
   .help = "Clients connected at once on the TCP listeners; further TCP "
           "connections are refused (\"too many clients on tcp listener\")."},
  {.name = "max_clients_per_uid", .type = CONFIG_INT,
   .flags = CONFIG_RELOADABLE, .offset = AT(max_clients_per_uid, int),
   .def = "128", .min = 0, .max = 65536,
   .help = "Clients connected at once on the unix sockets from processes "
           "of one user (the peer's uid); further connections from that "
           "user are refused. 0 sets no limit."},
  {.name = "max_clients_per_address", .type = CONFIG_INT,
   .flags = CONFIG_RELOADABLE, .offset = AT(max_clients_per_address, int),
   .def = "64", .min = 0, .max = 65536,
   .help = "Clients connected at once on the TCP listeners from one "
           "address; further connections from it are refused. 0 sets no "
           "limit."},
  {.name = "max_startups", .type = CONFIG_STRING, .flags = CONFIG_RELOADABLE,
   .offset = AT(max_startups, char *), .def = "64:30:128", .max = 32,
   .check = check_startups,
   .help = "Connections that have not finished their Hello (and a lease's "
           "LeaseProof), as sshd's MaxStartups START:RATE:FULL: from START "
           "such connections on, each new connection drops one of them "
           "with a chance of RATE percent, rising to 100 at FULL, so that "
           "there are never more than FULL. The one dropped is the oldest "
           "of the peer (uid or address) that holds the most: a client "
           "that says Hello at once is served while others hold sockets "
           "open in silence. FULL is kept below max_clients (at most three "
           "quarters of it) so that clients through their Hello always "
           "have room."},
  {.name = "max_client_fds", .type = CONFIG_INT, .flags = CONFIG_RELOADABLE,
   .offset = AT(max_client_fds, int), .def = "16", .min = 16, .max = 48,
   .help = "File descriptors (a PutBlock's sealed memfds) a unix-socket "
           "client may have waiting for frames not yet complete; more, and "
           "it is sent an Error and closed. Descriptors that came with "
           "other frames are closed as soon as those are read. The NAM "
           "needs max_clients x (1 + max_client_fds) descriptors and some "
           "of its own: it raises its soft RLIMIT_NOFILE to the hard limit "
           "at start and warns when that is less (LimitNOFILE in the "
           "systemd unit)."},
  {.name = "max_inflight", .type = CONFIG_INT, .flags = CONFIG_RELOADABLE,
   .offset = AT(max_inflight, int), .def = "64", .min = 1, .max = 65536,
   .help = "Tasks one client may have in flight; at this many the NAM stops "
           "reading from the client until one of them finishes."},
  {.name = "max_block_bytes", .type = CONFIG_SIZE, .flags = CONFIG_RELOADABLE,
   .offset = AT(max_block_bytes, uint64_t), .def = "1GiB", .min = MiB,
   .max = TiB,
   .help = "Bytes one client may make the NAM hold at once: the blocks it "
           "put, the out blocks of its tasks, and what its tasks in flight "
           "will make (their out blocks and scratch, reserved when the task "
           "is admitted, from the accelerator's plan). A block or task "
           "beyond that is refused (EBUSY; ETOOBIG for a task larger than "
           "the limit by itself); so is a frame, at its length prefix."},
  {.name = "max_memory", .type = CONFIG_SIZE, .flags = CONFIG_RELOADABLE,
   .offset = AT(max_memory, uint64_t), .def = "0", .min = 0, .max = 64 * TiB,
   .help = "Bytes all clients together may make the NAM hold: their "
           "blocks, out blocks, tasks' reservations and read buffers. A "
           "PutBlock or Submit that would pass it is refused with EBUSY "
           "(try again later), so that clients each within max_block_bytes "
           "cannot together push the node into swap. 0: half the "
           "machine's memory."},
  {.name = "max_send_queue", .type = CONFIG_SIZE, .flags = CONFIG_RELOADABLE,
   .offset = AT(max_send_queue, uint64_t), .def = "64MiB", .min = 64 * KiB,
   .max = 64 * GiB,
   .help = "Bytes of replies queued to one client that does not read them. "
           "Past it the NAM reads and runs nothing more of that client's "
           "(its frames wait, nothing is lost) until the queue drains below "
           "half; results of tasks already running still queue."},
  {.name = "send_stall_timeout", .type = CONFIG_DURATION,
   .flags = CONFIG_RELOADABLE,
   .offset = AT(send_stall_timeout_ms, uint64_t), .def = "30s", .min = 100,
   .max = 3600000,
   .help = "A client over max_send_queue this long is disconnected (logged "
           "as a warning with the bytes queued)."},
  {.name = "handshake_timeout", .type = CONFIG_DURATION,
   .flags = CONFIG_RELOADABLE,
   .offset = AT(handshake_timeout_ms, uint64_t), .def = "10s", .min = 100,
   .max = 3600000,
   .help = "A connection that has not completed its Hello this long after "
           "connecting is sent an Error and closed."},
  {.name = "frame_timeout", .type = CONFIG_DURATION, .flags = CONFIG_RELOADABLE,
   .offset = AT(frame_timeout_ms, uint64_t), .def = "60s", .min = 100,
   .max = 3600000,
   .help = "A frame whose first bytes came must be complete within this "
           "long (while the NAM is reading), or the client is sent an Error "
           "and closed: a client trickling bytes holds no slot for long."},
  {.name = "idle_timeout", .type = CONFIG_DURATION, .flags = CONFIG_RELOADABLE,
   .offset = AT(idle_timeout_ms, uint64_t), .def = "300s", .min = 0,
   .max = 86400000,
   .help = "A client that sends nothing this long while it has no task or "
           "block operation in flight is closed, and its blocks freed; 0 "
           "never closes idle clients."},
  {.name = "drain_timeout", .type = CONFIG_DURATION,
   .offset = AT(drain_timeout_ms, uint64_t), .def = "30s", .min = 0,
   .max = 3600000,
   .help = "On SIGTERM, how long to wait for the tasks in flight before "
           "exiting anyway; 0 exits at once."},
  {.name = "log_level", .type = CONFIG_ENUM, .flags = CONFIG_RELOADABLE,
   .offset = AT(log_level, int), .def = "info", .enums = config_log_levels,
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
  {.name = "metrics_timeout", .type = CONFIG_DURATION,
   .offset = AT(metrics_timeout_ms, uint64_t), .def = "5s", .min = 1000,
   .max = 3600000,
   .help = "A metrics connection idle this long is closed (whole seconds), "
           "so that clients that send half a request cannot hold a slot."},
  {.name = "metrics_max_connections", .type = CONFIG_INT,
   .offset = AT(metrics_max_connections, int), .def = "64", .min = 2,
   .max = 100000,
   .help = "Connections to metrics_listen at once; more are closed at once."},
  {.name = "metrics_max_connections_per_ip", .type = CONFIG_INT,
   .offset = AT(metrics_max_connections_per_ip, int), .def = "16", .min = 0,
   .max = 100000,
   .help = "Connections to metrics_listen at once from one client address; "
           "0 sets no limit."},
  {.name = "metrics_threads", .type = CONFIG_INT,
   .offset = AT(metrics_threads, int), .def = "2", .min = 1, .max = 64,
   .help = "Threads serving metrics_listen: a request waiting for the "
           "event loop holds only its own."},
  {.name = "gam", .type = CONFIG_STRING, .offset = AT(gam, char *),
   .def = "", .max = 300, .check = check_gam,
   .help = "HOST:PORT of ember-gam, the cluster manager this NAM registers "
           "with and sends heartbeats to; empty runs the NAM standalone. "
           "While the GAM cannot be reached the NAM keeps serving its local "
           "clients and retries with backoff."},
  {.name = "heartbeat_interval", .type = CONFIG_DURATION,
   .offset = AT(heartbeat_interval_ms, uint64_t), .def = "1s", .min = 10,
   .max = 3600000,
   .help = "Time between two heartbeats to the GAM, until the GAM answers "
           "with its own interval, which then applies."},
  {.name = "labels", .type = CONFIG_LIST, .offset = AT(labels, config_list),
   .def = "", .min = 0, .max = 64, .check = check_label,
   .help = "Labels this node offers at the GAM, comma-separated; each "
           "--label flag adds one. Empty: one per accelerator served "
           "(e.g. sw) plus ACC@KIND for each non-cpu platform kind that can "
           "run it (e.g. sw@fpga-emu). A label naming an accelerator (or "
           "ACC@KIND) is withdrawn while that accelerator is disabled."},
  {.name = "advertise", .type = CONFIG_STRING, .offset = AT(advertise, char *),
   .def = "", .max = 300, .check = check_advertise,
   .help = "tcp:HOST:PORT where applications reach this NAM, as the GAM "
           "hands it out; empty uses the first tcp: listen address."},
  {.name = "cluster_key_file", .type = CONFIG_STRING,
   .offset = AT(cluster_key_file, char *), .def = "", .max = 4000,
   .help = "File holding the 64 hex digits of the key shared with the GAM "
           "(mode 0600). When set, a TCP client must present a lease the "
           "GAM signed with it, unexpired, for this node and a label it "
           "serves; unix-socket clients are trusted as before. The NAM also "
           "proves with it that it may register with the GAM: required when "
           "gam is set. Empty: no lease checking."},
  {.name = "scheduler", .type = CONFIG_ENUM, .offset = AT(scheduler, int),
   .def = "fcfs", .enums = schedulers,
   .help = "Order of the tasks of one priority in an accelerator's queue: "
           "fcfs (first come, first served) or fair (round robin between "
           "the connected applications). Higher priorities always go "
           "first."},
  {.name = "pipeline_depth", .type = CONFIG_INT,
   .offset = AT(pipeline_depth, int), .def = "3", .min = 1, .max = 64,
   .help = "Tasks in flight on each device platform: while one executes, "
           "the next one's blocks are copied in and the previous one's "
           "output copied out. 1 runs the stages one task at a time."},
  {.name = "sticky", .type = CONFIG_BOOL, .offset = AT(sticky, bool),
   .def = "true",
   .help = "Keep an FPGA's loaded bitstream while tasks for it are queued "
           "(up to reprogram_bound); false dispatches first come, first "
           "served and reprograms whenever the next task needs another "
           "accelerator."},
  {.name = "reprogram_bound", .type = CONFIG_DURATION,
   .offset = AT(reprogram_bound_ms, uint64_t), .def = "3s", .min = 0,
   .max = 3600000,
   .help = "With sticky on: an FPGA switches to another accelerator once "
           "that accelerator's oldest task has waited this long, even if "
           "the loaded one still has tasks (bounds the wait)."},
  {.name = "fail_threshold", .type = CONFIG_INT,
   .offset = AT(fail_threshold, int), .def = "3", .min = 1, .max = 1000,
   .help = "Failures in a row after which an accelerator is disabled on a "
           "platform; its tasks go to other platforms meanwhile."},
  {.name = "probe_interval", .type = CONFIG_DURATION,
   .offset = AT(probe_interval_ms, uint64_t), .def = "30s", .min = 1,
   .max = 86400000,
   .help = "How long a disabled accelerator/platform pair rests before one "
           "task is sent there as a probe; success re-enables the pair."},
  {.name = "task_timeout", .type = CONFIG_DURATION,
   .offset = AT(task_timeout_ms, uint64_t), .def = "0", .min = 0,
   .max = 86400000,
   .help = "A device task executing longer than this has hung: it is "
           "abandoned and retried on another platform. 0 uses "
           "timeout_factor times the task's expected time (at least 10 s)."},
  {.name = "timeout_factor", .type = CONFIG_INT,
   .offset = AT(timeout_factor, int), .def = "10", .min = 1, .max = 10000,
   .help = "With task_timeout 0: how many times its expected time (from "
           "the platform's model or measured speed) a task may take."},
  {.name = "plugin_dir", .type = CONFIG_STRING,
   .offset = AT(plugin_dir, char *), .def = EMBER_PLUGIN_DIR, .max = 4000,
   .help = "Directory of accelerator plugins, one NAME.so per accelerator, "
           "loaded at start-up (the default is under the library directory "
           "ember was built for); empty loads none. A plugin, or the "
           "directory, that anyone but root or the daemon's user can "
           "change is refused, as are plugins of another ABI version, "
           "without the entry symbol or whose name is already served. "
           "Plugins run inside the daemon: a crashing plugin stops it."},
  {.name = "accelerator_cache", .type = CONFIG_SIZE,
   .offset = AT(accelerator_cache, uint64_t), .def = "256MiB", .min = 0,
   .max = TiB,
   .help = "Bytes each accelerator may keep between tasks for reuse: the "
           "cnn accelerator's built CPU stages (their oneDNN memories, "
           "workspaces and scratchpads), the least recently used dropped "
           "first; a client's go when it disconnects. 0 keeps none (every "
           "cnn task then builds its stage)."},
  {.name = "opencl.enabled", .type = CONFIG_BOOL,
   .offset = AT(opencl_enabled, bool), .def = "true",
   .help = "Make every device the OpenCL ICD loader finds a platform (pocl's "
           "CPU device, a GPU, an FPGA runtime)."},
  {.name = "opencl.max_memory", .type = CONFIG_SIZE,
   .offset = AT(opencl_max_memory, uint64_t), .def = "0", .min = 0,
   .max = 64 * TiB,
   .help = "Cap on the device memory each OpenCL device lends the block "
           "cache; 0 takes what the device reports."},
  {.name = "opencl.cache_dir", .type = CONFIG_STRING,
   .offset = AT(opencl_cache_dir, char *),
   .def = "/var/cache/ember/kernels", .max = 4000,
   .help = "Directory of built kernel binaries, keyed by device, driver "
           "version and source hash (created if missing); empty builds "
           "from source at every start."},
  {.name = "fpga-emu.boards", .type = CONFIG_INT,
   .offset = AT(fpga_boards, int), .def = "1", .min = 0, .max = 8,
   .help = "Emulated FPGA boards (platforms fpga0, fpga1, ...), all alike: "
           "results are computed by the CPU code, time follows the board's "
           "model. 0 for none."},
  {.name = "fpga-emu.memory", .type = CONFIG_SIZE,
   .offset = AT(fpga_memory, uint64_t), .def = "16GiB", .min = MiB,
   .max = TiB,
   .help = "Device memory of each board: the block cache's budget there."},
  {.name = "fpga-emu.pcie_mbps", .type = CONFIG_INT,
   .offset = AT(fpga_pcie_mbps, int), .def = "6000", .min = 1,
   .max = 1000000,
   .help = "Host-to-board bandwidth in MB/s (each direction)."},
  {.name = "fpga-emu.memory_mbps", .type = CONFIG_INT,
   .offset = AT(fpga_memory_mbps, int), .def = "21333", .min = 1,
   .max = 10000000,
   .help = "Bandwidth of the board's own memory in MB/s: the roofline's "
           "memory bound (a task's declared bytes over it); 21333 is two "
           "64-bit DDR3-1333 channels."},
  {.name = "fpga-emu.reprogram_time", .type = CONFIG_DURATION,
   .offset = AT(fpga_reprogram_ms, uint64_t), .def = "1500ms", .min = 0,
   .max = 600000,
   .help = "Time to load another bitstream; the board runs nothing "
           "meanwhile."},
  {.name = "fpga-emu.bitstreams", .type = CONFIG_LIST,
   .offset = AT(fpga_bitstreams, config_list), .def = "builtin", .min = 1,
   .max = 8,
   .help = "Accelerators the boards have bitstreams for; \"builtin\" is "
           "every built-in accelerator with an FPGA model (sw, plf, cnn), "
           "e.g. builtin,myplugin."},
  {.name = "fpga-emu.timing", .type = CONFIG_LIST,
   .offset = AT(fpga_timing, config_list), .def = "", .min = 0, .max = 8,
   .check = check_timing,
   .help = "Timing model overrides, ACCELERATOR:UNITS_PER_CYCLE:MHZ items "
           "(sw: processing elements and clock); empty keeps each "
           "accelerator's defaults."},
  {.name = "fpga-emu.fail_rate", .type = CONFIG_STRING,
   .flags = CONFIG_RELOADABLE, .offset = AT(fpga_fail_rate, char *),
   .def = "0", .max = 32, .check = check_rate,
   .help = "Fault injection: the fraction of tasks that fail (0 to 1). "
           "SIGHUP applies a new rate to the running boards."},
  {.name = "fpga-emu.hang_rate", .type = CONFIG_STRING,
   .flags = CONFIG_RELOADABLE, .offset = AT(fpga_hang_rate, char *),
   .def = "0", .max = 32, .check = check_rate,
   .help = "Fault injection: the fraction of tasks that hang until the "
           "task timeout catches them (0 to 1)."},
  {.name = "fpga-emu.seed", .type = CONFIG_INT, .offset = AT(fpga_seed, int),
   .def = "1", .min = 0, .max = INT32_MAX,
   .help = "Seed of the fault injection's random sequence (board N uses "
           "seed + N)."},
  {.name = "fpga-emu.clock", .type = CONFIG_ENUM,
   .offset = AT(fpga_clock, int), .def = "real", .enums = clocks,
   .help = "real: a task takes at least its modelled time; virtual: "
           "modelled time is only counted (simulations)."},
  {.name = NULL},
};
