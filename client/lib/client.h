/*
 * client.h - libember's front end: the handles behind ember.h (client,
 * block, task), shared by the front end (client.c, blocks.c, tasks.c,
 * introspect.c) and the back ends (backend.h) that do its work.
 */
#ifndef EMBER_CLIENT_H
#define EMBER_CLIENT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <uthash.h>

#include "accel.h"
#include "ember/ember.h"

struct ember__accel_set;
struct ember__backend_ops;
struct ember__lease;
struct nam_engine;
struct nam_task;

/* ember__task_done - a back end's report that t finished (the front end's
 * ember__task_complete, c->task_done): status, message (NULL or "": the
 * status's text), output (malloc'd, taken), the platform that ran it and
 * its times (info NULL: none). Only the first report of a task counts. */
typedef void ember__task_done(ember_task *t, int status, const char *message,
                              uint8_t *output, size_t output_len,
                              const char *platform,
                              const ember_task_info *info);

struct ember_client {
  char address[256];
  ember_options opts;
  char client_name[64];
  const struct ember__backend_ops *backend; /* picked once, from address */
  void *backend_data;        /* the back end's own (its open makes it) */
  ember__task_done *task_done;

  pthread_mutex_t lock;      /* everything below, and the back ends' state */
  int closing;
  uint64_t next_block_id;
  /* the in-process engine (backend_embedded.c): embedded mode's, or the
   * CPU fallback's, created on demand */
  struct nam_engine *engine;
  /* its accelerators: built-ins and plugin_dir's plugins (plugins.c);
   * NULL: the built-ins. Shared by the process's clients, never freed. */
  const struct ember__accel_set *accels;
  ember_client_stats stats;
};

struct ember_block {
  ember_client *client;
  uint64_t id;
  size_t size;
  unsigned flags;
  int refs;                  /* under client->lock */
  int sealed;
  int memfd;                 /* unix socket: the block's memfd, else -1 */
  uint8_t *data;             /* readable bytes (mapping or malloc) */
  int data_is_map;
  uint64_t put_gen;          /* connection generation that has it; 0: none */
  int is_output;             /* made by a task: lives where it ran */
  int in_engine;             /* embedded: put into the engine's cache */
};

struct ember_task {
  ember_client *client;
  uint64_t id;               /* the NAM's name for it; 0 until sent */
  const acc_descriptor *acc; /* NULL if only the NAM knows it */
  char accelerator[64];
  uint8_t *params;
  size_t params_len;
  ember_block *inputs[16];
  size_t n_inputs;
  ember_block *states[ACC_MAX_STATES];
  size_t n_states;
  ember_block *outputs[ACC_MAX_OUTPUTS];
  size_t n_outputs;
  int priority;
  char platform_req[32];
  char platform_pref[32];
  ember_task_cb callback;
  void *user;
  uint64_t submit_ns;
  int sync;                  /* ember_run: the submitter waits for it */

  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;                  /* the result is there */
  int settled;               /* ...and its callback has returned */
  int refs;                  /* the application's + one while in flight */
  int status;
  char message[512];
  uint8_t *output;           /* malloc'd */
  size_t output_len;
  char platform[64];
  char platform_kind[32];
  ember_task_info info;
  struct nam_task *local;    /* running on the in-process engine */
  int parked;                /* waiting for a reconnect (client->lock) */
  int on_wire;               /* sent, its result not yet read (likewise) */
  struct ember_task *wait_next; /* the remote back end's ember_run waiters
                                   (client->lock) */
  int read_offer;            /* a reader handed its caller the reading
                                (under mu) */
  UT_hash_handle hh;         /* the remote back end's in-flight or parked
                                tasks: never both */
};

/* client.c */
/* ember__client_open - ember_connect, presenting lease (NULL: none) to a
 * TCP NAM (backend.h). A NAM that refuses the lease or its proof gives
 * EMBER_ELEASE; an unreachable one is fine unless opts->no_fallback. */
int ember__client_open(const char *address, const ember_options *opts,
                       const struct ember__lease *lease, ember_client **out);
/* ember__client_lease_ended - the lease ended: drop the connection (its
 * tasks fall back) and never reconnect. */
void ember__client_lease_ended(ember_client *c);

/* tasks.c: the ember__task_done every client's back end is given */
ember__task_done ember__task_complete;

#endif
