/*
 * gam_harness.h - the real ember-gam for integration tests: a private
 * directory with its cluster key, admin token and SQLite file, free ports,
 * readiness from its sd_notify READY=1; a blocking protocol client (for
 * apps and hand-made NAMs) and the admin API through libcurl.
 */
#ifndef EMBER_TEST_GAM_HARNESS_H
#define EMBER_TEST_GAM_HARNESS_H

#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

#include "proto/ember.pb-c.h"

typedef struct gam_proc {
  pid_t pid;
  char dir[256];
  char key_path[300], token_path[300], db_path[300], log_path[300];
  char notify_path[300];
  int notify_fd;
  int port, admin_port;
  char addr[64];        /* 127.0.0.1:PORT (NAMs' `gam` key) */
  char admin_url[64];   /* http://127.0.0.1:APORT */
  const char *sets[16];
  size_t n_sets;
} gam_proc;

/* Start with extra --set items (NULL-terminated, may be NULL). The binary
 * is the build's ember-gam, or $EMBER_TEST_GAM_BIN (to run a test against
 * another build, e.g. the one before a fix). */
int gam_start(gam_proc *g, const char *const *sets);
/* Start again on the same directory, ports and database. */
int gam_restart(gam_proc *g);
void gam_kill9(gam_proc *g);
int gam_stop(gam_proc *g);
void gam_cleanup(gam_proc *g);

/* ---- the binary protocol, blocking, for tests */
/* Connect and exchange Hello/Welcome; the fd, or -1. */
int gam_connect(const gam_proc *g);
/* The same, keeping the Welcome's challenge (protocol 3). */
int gam_connect_challenge(const gam_proc *g, uint8_t challenge[32]);
/* A NAM's Register: sets r->auth, the answer under g's cluster key to
 * challenge (proto/node_auth.h), and sends it; 0 or -1. r->auth points
 * at thread-local storage until the next call. */
int gam_send_register(const gam_proc *g, int fd, const uint8_t challenge[32],
                      Ember__Register *r);
int gam_send(int fd, uint8_t type, const ProtobufCMessage *m);
/* The next frame within timeout_ms: the message (free with
 * protobuf_c_message_free_unpacked) and its type, or NULL on time-out,
 * close or garbage. */
ProtobufCMessage *gam_recv(int fd, int timeout_ms, uint8_t *type);
/* Receive until a frame of type want arrives (others are dropped). */
ProtobufCMessage *gam_recv_type(int fd, int timeout_ms, uint8_t want);

/* ---- the admin API */
/* method GET/PUT/DELETE/POST on path; the body parsed (NULL if not JSON)
 * and the HTTP status in *status. token may be NULL. */
json_t *gam_http(const gam_proc *g, const char *method, const char *path,
                 const char *token, long *status);
/* GET /v1/nodes/{id} -> its "node" object (a new reference) or NULL. */
json_t *gam_node(const gam_proc *g, const char *id);
/* Whether the JSON string array has s. */
int json_has_string(const json_t *array, const char *s);

/* ---- what the daemon holds, from /proc (attack tests print and bound
 * these) */
typedef struct gam_figures {
  double rss_mib;       /* VmRSS */
  double cpu_s;         /* user + system since it started */
  unsigned sockets;     /* open socket descriptors (listeners included) */
  long log_bytes;       /* its log file's size */
} gam_figures;
/* 0, or -1 when /proc cannot be read. */
int gam_figures_get(const gam_proc *g, gam_figures *out);

/* A connection to g's protocol port from source address `from`
 * ("127.0.0.N"; NULL: any), non-blocking, its connect under way; the fd
 * or -1. */
int gam_connect_from(const gam_proc *g, const char *from);

/* The admin token the harness wrote. */
#define GAM_TEST_TOKEN "test-token-0123456789"

#endif
