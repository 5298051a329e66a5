/*
 * client_internal.h - libember's own structs, shared by its files:
 * client.c (handles, addresses), remote.c (the NAM connection and its
 * reader thread), blocks.c, tasks.c (submit, completion, CPU fallback),
 * sw_align.c (the typed sw helper) and introspect.c.
 */
#ifndef EMBER_CLIENT_INTERNAL_H
#define EMBER_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <uthash.h>

#include "accel.h"
#include "plugin_loader.h"
#include "ember/ember.h"
#include "engine.h"
#include "frame.h"

/* The public structs' sizes in the first release (ember.h "ABI"): what a
 * size field of 0 stands for. A release that adds fields leaves these at
 * the last field of 0.1. */
#define EMBER__V0_SIZE(type, last) \
  (offsetof(type, last) + sizeof(((type *)0)->last))
#define EMBER__OPTIONS_V0 EMBER__V0_SIZE(ember_options, reconnect_window_ms)
#define EMBER__SUBMIT_OPTIONS_V0 EMBER__V0_SIZE(ember_submit_options, n_outputs)
#define EMBER__CLUSTER_OPTIONS_V0 EMBER__V0_SIZE(ember_cluster_options, client)
#define EMBER__SW_PARAMS_V0 EMBER__V0_SIZE(ember_sw_params, pairs_per_task)
#define EMBER__SW_REPORT_V0 EMBER__V0_SIZE(ember_sw_report, pairs_failed)
#define EMBER__CLIENT_STATS_V0 EMBER__V0_SIZE(ember_client_stats, tasks_resubmitted)

/* ember__struct_in - a caller's struct (src, whose first member is its
 * size) as this library's (dst, dst_size bytes): the bytes the caller's
 * size covers, zeros for fields it does not know, dst's size set to
 * dst_size. src NULL: all zeros. Returns EMBER_EINVAL (with the error set,
 * naming what) for a size too small to be the struct. */
int ember__struct_in(void *dst, size_t dst_size, const void *src,
                     size_t v0_size, const char *what);

/* ember__struct_out - fill a caller's struct (dst) from the library's
 * (src, src_size bytes): only the bytes dst's size covers; dst's size then
 * says how many were written. */
void ember__struct_out(void *dst, const void *src, size_t src_size,
                       size_t v0_size);

enum client_mode { MODE_EMBEDDED, MODE_UNIX, MODE_TCP };

typedef struct pending_reply {
  int waiting;            /* a caller waits for this message type */
  uint8_t type;
  ProtobufCMessage *msg;  /* set by the reader thread */
  int error;
} pending_reply;

struct ember_client {
  char address[256];
  enum client_mode mode;
  ember_options opts;
  char client_name[64];

  pthread_mutex_t lock;      /* everything below, unless said otherwise */
  pthread_cond_t slot_cv;    /* in-flight count went down, or state changed */
  pthread_cond_t reply_cv;

  /* remote connection */
  int fd;                    /* -1 when not connected */
  uint64_t gen;              /* bumps on every successful connect */
  int reader_running;
  pthread_t reader;
  proto_reader rd;           /* owned by the reader thread */
  size_t max_frame;
  unsigned max_inflight;
  unsigned inflight;
  ember_task *inflight_tasks; /* uthash on task id; NULL when empty */
  uint64_t next_task_id, next_block_id;
  uint64_t last_attempt_ns, backoff_ns;
  /* the reconnect window (remote.c): tasks that cannot run in-process wait
   * here, parked, while there is no connection */
  uint64_t window_ns;        /* 0: off */
  uint64_t down_since_ns;    /* the connection went away; 0 while up */
  char down_why[512];           /* the last reason it is down */
  ember_task *parked_tasks;  /* uthash on task id, in park order */
  pthread_cond_t park_cv;    /* parked, connected, or closing */
  pthread_t resubmitter;     /* reconnects and sends the parked tasks */
  int resubmitter_running;
  int closing;
  pending_reply reply;
  pthread_mutex_t send_lock; /* one writer on the socket at a time */
  pthread_mutex_t connect_lock;
  pthread_mutex_t request_lock; /* one request/reply at a time */

  /* a cluster member's lease (cluster.c): presented in every Hello, and
   * proved ours with the app's secret key when the NAM challenges */
  uint8_t *lease_body, *lease_mac;
  size_t lease_body_len, lease_mac_len;
  uint64_t lease_id;
  uint8_t lease_sk[64];      /* the app's Ed25519 secret key */
  int lease_ended;           /* the GAM ended it: no more reconnecting */

  /* the engine: embedded mode, or the CPU fallback (created on demand) */
  nam_engine *engine;
  /* its accelerators: built-ins and plugin_dir's plugins (plugins.c);
   * NULL: the built-ins. Shared by the process's clients, never freed. */
  const struct ember__accel_set *accels;

  /* block reads, syncs and restores waiting for the NAM (blocks.c) */
  struct block_op *block_ops;
  uint64_t next_op_id;

  ember_client_stats stats;
};

struct ember_block {
  ember_client *client;
  uint64_t id;
  size_t size;
  unsigned flags;
  int refs;                  /* under client->lock */
  int sealed;
  int memfd;                 /* unix mode: the block's memfd, else -1 */
  uint8_t *data;             /* readable bytes (mapping or malloc) */
  int data_is_map;
  uint64_t put_gen;          /* connection generation that has it; 0: none */
  int is_output;             /* made by a task: lives on the NAM only */
  int in_engine;             /* embedded: put into the engine's cache */
};

struct ember_task {
  ember_client *client;
  uint64_t id;
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
  nam_task *local;           /* running on the in-process engine */
  int parked;                /* in client->parked_tasks (client->lock) */
  UT_hash_handle hh;         /* in client->inflight_tasks while in flight,
                                or in client->parked_tasks: never both */
};

/* client.c */
/* ember__client_open - ember_connect, presenting lease (NULL: none) in the Hello
 * of every connection to a TCP NAM and answering the NAM's challenge with a
 * LeaseProof for lease_id signed with app_sk (64 bytes, copied). A NAM that
 * refuses the lease or the proof gives EMBER_ELEASE; an unreachable one is
 * fine unless opts->no_fallback. */
int ember__client_open(const char *address, const ember_options *opts,
                const Ember__Lease *lease, uint64_t lease_id,
                const uint8_t *app_sk, ember_client **out);
/* ember__client_lease_ended - the lease ended: drop the connection (its tasks
 * fall back) and never reconnect. */
void ember__client_lease_ended(ember_client *c);
void ember__client_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int ember__client_engine(ember_client *c, nam_engine **out);
uint64_t ember__client_now_ns(void);

/* remote.c */
/* ember__remote_tcp_open - a connected, blocking TCP socket to "HOST:PORT" (an IPv6
 * address in brackets), within timeout_ms; -1 with the reason in err. */
int ember__remote_tcp_open(const char *address, int timeout_ms, char *err,
                    size_t err_len);
int ember__remote_connect(ember_client *c);             /* under connect_lock */
int ember__remote_ensure(ember_client *c);              /* reconnect with backoff */
void ember__remote_shutdown(ember_client *c);
int ember__remote_send(ember_client *c, const proto_wbuf *w, const int *fds,
                size_t nfds);
/* the same with send_lock already held by the caller */
int ember__remote_send_locked(ember_client *c, const proto_wbuf *w, const int *fds,
                       size_t nfds);
int ember__remote_send_msg(ember_client *c, uint8_t type, const ProtobufCMessage *m);
int ember__remote_request(ember_client *c, uint8_t type, const ProtobufCMessage *m,
                   uint8_t reply_type, ProtobufCMessage **reply);
/* ember__remote_lost_task - t cannot reach the NAM (why, message): it
 * falls back to the CPU in-process if it can, else waits parked for a
 * reconnect within the window, else fails. */
void ember__remote_lost_task(ember_client *c, ember_task *t, int why,
                             const char *message);
/* ember__remote_unpark - take t out of the parked tasks; 1 if it was there
 * (the caller then completes it), else 0. */
int ember__remote_unpark(ember_client *c, ember_task *t);
/* ember__remote_stop_resubmitter - closing: parked tasks are canceled */
void ember__remote_stop_resubmitter(ember_client *c);
/* task map (client->lock held) */
int ember__inflight_add(ember_client *c, ember_task *t);
ember_task *ember__inflight_take(ember_client *c, uint64_t id);

/* tasks.c */
void ember__task_complete(ember_task *t, int status, const char *message,
                   uint8_t *output, size_t output_len, const char *platform,
                   const ember_task_info *info);
void ember__task_fallback(ember_task *t, int why, const char *message);
/* the CPU in-process can run t (fallback allowed, no NAM-only blocks, no
 * platform kind it lacks, an accelerator it knows) */
int ember__task_can_fall_back(const ember_task *t);
/* send t on the current connection (blocks at the in-flight limit); a
 * connection that is gone hands it to ember__remote_lost_task */
void ember__task_send(ember_client *c, ember_task *t);
void ember__task_unref(ember_task *t);

/* blocks.c */
/* The app's namespace in the embedded engine's block cache. */
#define CLIENT_EMBEDDED_APP 1
/* out and state blocks make a task that cannot fall back */
int ember__task_has_remote_blocks(const ember_task *t);
/* a BlockReply from the NAM (reader thread) */
void ember__block_op_reply(ember_client *c, const Ember__BlockReply *r);
/* the connection went away: pending block ops fail with why */
void ember__block_ops_fail_all(ember_client *c, int why);
/* embedded: the block goes into the engine's cache (0 or error) */
int ember__block_put_engine(ember_block *b);
/* ember_block_alloc's bytes for an output handle (none until read) */
ember_block *ember__block_new_output(ember_client *c);
const uint8_t *ember__block_bytes(ember_block *b);
void ember__block_ref(ember_block *b);
void ember__block_unref(ember_block *b);
int ember__block_append_put(ember_block *b, proto_wbuf *w, int *fd_out);

/* plugins.c: the in-process engine's accelerators (set NULL: built-ins) */
struct ember__accel_set;
/* the set of dir's plugins, loaded on first use ("" or NULL: *out NULL);
 * 0 or EMBER_ENOMEM */
int ember__plugins_get(const char *dir, const struct ember__accel_set **out);
/* "" or what was refused, and why, for ember_last_error */
void ember__plugins_report(const struct ember__accel_set *s, char *buf,
                           size_t len);
size_t ember__plugins_loaded(const struct ember__accel_set *s);
size_t ember__plugins_refused(const struct ember__accel_set *s);
/* the whole set for nam_engine_config (NULL: the built-ins) */
const acc_descriptor *const *ember__accels_list(const struct ember__accel_set *s,
                                                size_t *count);
size_t ember__accels_count(const struct ember__accel_set *s);
const acc_descriptor *ember__accels_get(const struct ember__accel_set *s,
                                        size_t index);
const acc_descriptor *ember__accel_find(const struct ember__accel_set *s,
                                        const char *name);
/* "built-in" or the plugin's path */
const char *ember__accel_origin(const struct ember__accel_set *s,
                                const acc_descriptor *acc);

#endif
