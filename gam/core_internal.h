/* core_internal.h - the GAM core's state, shared by core.c (changes),
 * core_load.c (start-up), core_leases.c (granting and ending leases),
 * core_json.c (admin views) and core_metrics.c (Prometheus). Everything
 * here is guarded by gam_core.lock, except what gam_core_create sets once
 * (core.h says which threads call what). */
#ifndef EMBER_GAM_CORE_INTERNAL_H
#define EMBER_GAM_CORE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include "core.h"
#include "strlist.h"

typedef struct gam_fpga {
  char *platform, *bitstream;
} gam_fpga;

typedef struct gam_load {
  char *accelerator;
  unsigned queued;
  double utilization;
} gam_load;

typedef struct gam_node {
  char *id, *address;
  gam_node_state state;
  bool drained;
  strlist reported;        /* what its NAM serves (heartbeat or Register) */
  strlist added, removed;  /* admin overrides */
  strlist disabled;        /* from heartbeats: failed accelerators */
  strlist effective;       /* reported + added - removed - disabled */
  strlist platforms;
  gam_fpga *fpgas;
  size_t n_fpgas;
  gam_load *load;
  size_t n_load;
  gam_label_count *in_use; /* leases by label (labels point into leases) */
  size_t n_in_use, cap_in_use;
  unsigned n_leases;
  uint64_t registered_ms, last_seen_ms;
  uint64_t last_seen_ns;   /* monotonic: liveness */
  uint64_t heartbeats;
  uint64_t *ended;         /* lease ids for its next HeartbeatAck */
  uint64_t *ended_expires; /* and their expiry times (parallel) */
  size_t n_ended, cap_ended;
  size_t index;            /* in gam_core.nodes and gam_core.sched */
} gam_node;

typedef struct gam_lease {
  uint64_t id;
  struct gam_app *app;
  gam_node *node;
  char *label;
  uint64_t issued_unix_ms, expires_unix_ms;
} gam_lease;

typedef struct gam_app {
  uint64_t id;
  char *name, *label;
  unsigned wanted;
  gam_app_state state;
  unsigned skipped;
  uint64_t created_ms;
  uint64_t deadline_ns;    /* pending: when its wait runs out */
  bool connected;
  uint64_t gone_ns;        /* !connected: since when (monotonic) */
  uint8_t key[32];         /* its Ed25519 public key (Acquire.app_key) */
  bool has_key;            /* false for apps loaded from the store */
  gam_lease **leases;
  size_t n_leases, cap_leases;
  struct gam_app *next;    /* in id order */
} gam_app;

typedef struct gam_core_counters {
  uint64_t heartbeats, registrations, acquires, allocations;
  uint64_t leases_granted, nodes_lost, skips, bad_messages;
  uint64_t ended_released, ended_lost, ended_drained, ended_label,
      ended_expired;
  /* heartbeat handling time, histogram buckets in microseconds */
  uint64_t hb_buckets[12];
  uint64_t hb_sum_ns, hb_count;
} gam_core_counters;

#define GAM_HB_BUCKETS_US {10, 25, 50, 100, 250, 500, 1000, 2500, 5000, \
                           10000, 50000, 100000}

struct gam_core {
  pthread_mutex_t lock;
  gam_core_options opt;
  gam_static_rule *rules;
  size_t n_rules;
  char *version;
  gam_store *store;        /* read at start; then the writer's */
  gam_writer *w;           /* every change goes through it */
  uint64_t last_app_id, last_lease_id;  /* the core numbers them */
  gam_node **nodes;        /* sorted by id */
  size_t n_nodes, cap_nodes;
  gam_sched_node *sched;   /* the policy's view, parallel to nodes */
  gam_app *apps;           /* not ended, in id order */
  gam_outbox_item *out_head, *out_tail;
  void (*wake)(void *user);
  void *wake_user;
  uint64_t started_ns;
  uint8_t decoy_key[32];   /* Release proofs for absent apps check this */
  gam_core_counters n;
};

/* core.c */
gam_node *core_find_node(gam_core *c, const char *id);
gam_app *core_find_app(gam_core *c, uint64_t id);
/* Hand what this call queued to the writer, then drop the lock: every
 * locked entry point ends here. */
void core_unlock(gam_core *c);
/* reported + added - removed - disabled, into a fresh *out. 0 or
 * EMBER_ENOMEM. */
int core_effective_labels(const gam_node *node, strlist *out);
/* Recompute a node's effective labels; ends leases whose label left. */
int core_node_relabel(gam_core *c, gam_node *node);
void core_sync_sched(gam_core *c, gam_node *node);
int core_queue(gam_core *c, uint64_t app_id, uint8_t type,
               const ProtobufCMessage *msg);
gam_node *core_node_new(gam_core *c, const char *id, const char *address);
void core_app_free(gam_app *a);

/* core_leases.c */
/* Count delta leases on label at node (a label at 0 is dropped). */
int core_in_use_add(gam_node *n, const char *label, int delta);
/* A new lease of app a on node for label (copied), with room made for it
 * in a->leases; the caller fills it in and appends it. NULL: out of
 * memory. Granting and start-up's reload both make leases this way. */
gam_lease *core_lease_new(gam_app *a, gam_node *node, const char *label);
int core_lease_grant(gam_core *c, gam_app *a, gam_node *node);
/* End one lease: store, counts, the node's next ack, the app's outbox. */
int core_lease_end(gam_core *c, gam_lease *l, const char *reason);
int core_end_node_leases(gam_core *c, gam_node *node, const char *label,
                         const char *reason);
/* Send an app its Allocation (every lease it holds, signed now). */
int core_send_allocation(gam_core *c, gam_app *a);
void core_place_on(gam_core *c, gam_node *node);
int core_app_end(gam_core *c, gam_app *a, const char *reason);

/* core_load.c */
int core_load(gam_core *c, char *err, size_t err_len);

#endif
