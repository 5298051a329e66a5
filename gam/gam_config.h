/*
 * gam_config.h - ember-gam's configuration: its struct and its one table,
 * read with the same engine as the NAM's (common/config.h): defaults, then
 * the file (--config), then each --set KEY=VALUE.
 */
#ifndef EMBER_GAM_CONFIG_H
#define EMBER_GAM_CONFIG_H

#include <stdint.h>

#include "config.h"

#define GAM_CONFIG_DEFAULT_PATH "/etc/ember/gam.conf"

#define GAM_CONFIG_EXAMPLE_HEADER                                            \
  "ember-gam configuration (/etc/ember/gam.conf): every key, at its\n"       \
  "default.\n"                                                               \
  "\n"                                                                       \
  "Generated from gam/gam_config.c by `ember-gam --print-config-example`;\n" \
  "do not edit by hand: change the table and regenerate. A unit test\n"      \
  "checks that this file is in sync with the table.\n"                       \
  "\n"                                                                       \
  "Uncomment a key to change it. `ember-gam --set KEY=VALUE` overrides the\n"\
  "file; SIGHUP rereads it and applies the keys marked reloadable."

struct gam_config {
  char *listen;               /* listen: HOST:PORT for NAMs and apps */
  char *admin_listen;         /* admin_listen: HOST:PORT, "" = off */
  char *admin_token_file;     /* admin_token_file */
  uint64_t admin_timeout_ms;  /* admin_timeout */
  int admin_max_connections;  /* admin_max_connections */
  int admin_max_connections_per_ip; /* admin_max_connections_per_ip: 0 = none */
  int admin_threads;          /* admin_threads */
  char *cluster_key_file;     /* cluster_key_file */
  char *database;             /* database: SQLite file */
  uint64_t database_max_size; /* database_max_size: bytes, 0 = no cap */
  uint64_t heartbeat_interval_ms; /* heartbeat_interval */
  int lost_after;             /* lost_after: missed heartbeats */
  int policy;                 /* policy: gam_policy_kind */
  int delay_max_skips;        /* delay_max_skips */
  config_list static_partition; /* static_partition: LABEL=NODE items */
  int slots_per_node;         /* slots_per_node: 0 = no limit */
  uint64_t lease_ttl_ms;      /* lease_ttl */
  uint64_t app_grace_ms;      /* app_grace */
  uint64_t acquire_timeout_ms; /* acquire_timeout */
  uint64_t max_frame;         /* max_frame */
  int max_connections;        /* max_connections */
  int max_connections_per_address; /* 0 = no limit */
  char *max_startups;         /* max_startups: START:RATE:FULL */
  int max_startups_per_address; /* 0 = no limit */
  uint64_t handshake_timeout_ms; /* handshake_timeout */
  uint64_t frame_timeout_ms;  /* frame_timeout */
  uint64_t idle_timeout_ms;   /* idle_timeout: 0 = never */
  uint64_t max_read_buffers;  /* max_read_buffers: bytes */
  int log_level;              /* log_level */
};

extern const config_entry gam_config_table[];

/* max_startups: sshd's MaxStartups for connections before Hello. */
typedef struct gam_startups {
  unsigned start, rate, full;   /* rate: percent */
} gam_startups;

/* "START:RATE:FULL" or "FULL" (START = FULL) into out (may be NULL); 0 or
 * EMBER_ECONFIG with the reason. */
int gam_startups_parse(const char *text, gam_startups *out, char *why,
                       size_t why_len);

/* "HOST:PORT" (IPv4, [IPv6] or localhost) into a sockaddr; 0 or
 * EMBER_ECONFIG with the reason. */
struct sockaddr_storage;
int gam_hostport_parse(const char *text, struct sockaddr_storage *out,
                       char *why, size_t why_len);

#endif
