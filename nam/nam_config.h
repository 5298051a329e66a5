/*
 * nam_config.h - ember-nam's configuration: its struct and its one table.
 *
 * The daemon fills a struct nam_config with the engine in config.h:
 *   config_init(nam_config_table, &cfg);
 *   config_load_file(nam_config_table, &cfg, path, err, sizeof err);
 *   config_set(nam_config_table, &cfg, "key=value", err, sizeof err);  (each --set)
 * and frees it with config_free(nam_config_table, &cfg). On SIGHUP it builds
 * a fresh struct the same way and hands it to config_reload().
 */
#ifndef EMBER_NAM_CONFIG_H
#define EMBER_NAM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "hostport.h"

#define NAM_CONFIG_DEFAULT_PATH "/etc/ember/nam.conf"

/* The header of deploy/nam.conf.example, as written by
 * config_write_example(nam_config_table, stdout, NAM_CONFIG_EXAMPLE_HEADER). */
#define NAM_CONFIG_EXAMPLE_HEADER                                            \
  "ember-nam configuration (/etc/ember/nam.conf): every key, at its\n"       \
  "default.\n"                                                               \
  "\n"                                                                       \
  "Generated from nam/nam_config.c by `ember-nam --print-config-example`;\n" \
  "do not edit by hand: change the table and regenerate. A unit test\n"      \
  "checks that this file is in sync with the table.\n"                       \
  "\n"                                                                       \
  "Uncomment a key to change it. `ember-nam --set KEY=VALUE` overrides the\n"\
  "file; SIGHUP rereads it and applies the keys marked reloadable."

struct nam_config {
  config_list listen;        /* listen: unix:PATH / tcp:HOST:PORT items */
  int socket_mode;           /* socket_mode: permissions of unix sockets */
  char *socket_group;        /* socket_group: "" leaves the group alone */
  int cpu_workers;           /* cpu_workers: 0 = one per online core */
  int queue_capacity;        /* queue_capacity: tasks per accelerator queue */
  uint64_t max_frame;        /* max_frame: bytes */
  int max_clients;           /* max_clients: all listeners together */
  int max_clients_unix;      /* max_clients_unix: on the unix sockets */
  int max_clients_tcp;       /* max_clients_tcp: on the TCP listeners */
  int max_clients_per_uid;   /* max_clients_per_uid: 0 = no limit */
  int max_clients_per_address; /* max_clients_per_address: 0 = no limit */
  char *max_startups;        /* max_startups: START:RATE:FULL */
  int max_client_fds;        /* max_client_fds: fds waiting per client */
  int max_inflight;          /* max_inflight: tasks in flight per client */
  uint64_t max_block_bytes;  /* max_block_bytes: bytes per client */
  uint64_t max_memory;       /* max_memory: all clients; 0 = half of RAM */
  uint64_t max_send_queue;   /* max_send_queue: bytes queued to one client */
  uint64_t send_stall_timeout_ms; /* send_stall_timeout */
  uint64_t handshake_timeout_ms;  /* handshake_timeout */
  uint64_t frame_timeout_ms; /* frame_timeout */
  uint64_t idle_timeout_ms;  /* idle_timeout: 0 = never */
  uint64_t drain_timeout_ms; /* drain_timeout */
  int log_level;             /* log_level: LOG_LVL_* of log.h */
  char *node_name;           /* node_name: "" = the host name */
  char *metrics_listen;      /* metrics_listen: HOST:PORT, "" = off */
  uint64_t metrics_timeout_ms;    /* metrics_timeout */
  int metrics_max_connections;    /* metrics_max_connections */
  int metrics_max_connections_per_ip; /* metrics_max_connections_per_ip */
  int metrics_threads;            /* metrics_threads */
  /* the cluster */
  char *gam;                 /* gam: HOST:PORT of ember-gam, "" = standalone */
  uint64_t heartbeat_interval_ms; /* heartbeat_interval */
  config_list labels;        /* labels: empty = derived from the engine */
  char *advertise;           /* advertise: tcp:HOST:PORT, "" = first tcp listen */
  char *cluster_key_file;    /* cluster_key_file: "" = no lease checking */
  /* scheduling and fault tolerance */
  int scheduler;             /* scheduler: enum nam_scheduler */
  int pipeline_depth;        /* pipeline_depth */
  bool sticky;               /* sticky: keep an FPGA's bitstream */
  uint64_t reprogram_bound_ms; /* reprogram_bound */
  int fail_threshold;        /* fail_threshold */
  uint64_t probe_interval_ms; /* probe_interval */
  uint64_t task_timeout_ms;  /* task_timeout: 0 = timeout_factor x expected */
  int timeout_factor;        /* timeout_factor */
  char *plugin_dir;          /* plugin_dir: "" = no plugins */
  uint64_t accelerator_cache; /* accelerator_cache: bytes kept between tasks
                                 by each accelerator */
  /* [opencl] */
  bool opencl_enabled;       /* opencl.enabled */
  uint64_t opencl_max_memory; /* opencl.max_memory: 0 = the device's */
  char *opencl_cache_dir;    /* opencl.cache_dir: "" = no binary cache */
  /* [fpga-emu] */
  int fpga_boards;           /* fpga-emu.boards */
  uint64_t fpga_memory;      /* fpga-emu.memory */
  int fpga_pcie_mbps;        /* fpga-emu.pcie_mbps: MB/s */
  int fpga_memory_mbps;      /* fpga-emu.memory_mbps: MB/s */
  uint64_t fpga_reprogram_ms; /* fpga-emu.reprogram_time */
  config_list fpga_bitstreams; /* fpga-emu.bitstreams */
  config_list fpga_timing;   /* fpga-emu.timing: ACC:UNITS:MHZ items */
  char *fpga_fail_rate;      /* fpga-emu.fail_rate: 0..1 */
  char *fpga_hang_rate;      /* fpga-emu.hang_rate: 0..1 */
  int fpga_seed;             /* fpga-emu.seed */
  int fpga_clock;            /* fpga-emu.clock: 0 real, 1 virtual */
};

extern const config_entry nam_config_table[];

/* One item of the listen list, parsed. */
typedef struct nam_listen_addr {
  int is_unix;
  char path[108];  /* unix: the socket path (fits sockaddr_un.sun_path) */
  char host[HOSTPORT_HOST_MAX]; /* tcp: name or address, IPv6 without [] */
  int port;        /* tcp: 1..65535 */
} nam_listen_addr;

/*
 * nam_listen_parse - parse one listen item: "unix:PATH" (PATH 1 to 107
 * bytes) or "tcp:HOST:PORT" (as hostport_parse takes it: HOST a name, an
 * IPv4 address or a bracketed IPv6 address such as [::1]; PORT 1 to 65535).
 * out may be NULL (validation only). Returns 0, or EMBER_ECONFIG with the
 * reason in why (why may be NULL).
 */
int nam_listen_parse(const char *item, nam_listen_addr *out, char *why,
                     size_t why_len);

/* nam_label_valid - a label as the GAM takes it: 1 to 64 characters of
 * letters, digits, '_', '.', '-' and '@' (e.g. "sw", "sw@fpga-emu"). */
bool nam_label_valid(const char *label);

/* nam_rate_parse - a fail_rate/hang_rate value: a decimal from 0 to 1.
 * Returns 0 or EMBER_ECONFIG (why may be NULL). */
int nam_rate_parse(const char *text, double *out, char *why, size_t why_len);

/* nam_startups_parse - a max_startups value "START:RATE:FULL" (or one
 * number N: N:100:N). Returns 0 or EMBER_ECONFIG (why may be NULL). */
int nam_startups_parse(const char *text, unsigned *start, unsigned *rate,
                       unsigned *full, char *why, size_t why_len);

/* nam_timing_parse - a fpga-emu.timing item "ACC:UNITS_PER_CYCLE:MHZ"
 * (e.g. "sw:256:250"). Returns 0 or EMBER_ECONFIG. */
int nam_timing_parse(const char *text, char *acc, size_t acc_len,
                     double *units, double *mhz, char *why, size_t why_len);

#endif
