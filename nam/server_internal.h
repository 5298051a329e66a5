/* server_internal.h - what server.c (listeners, completions), conn.c (one
 * client's frames) and server_leases.c (the leases clients hold) share.
 * The daemon's other parts use server.h. */
#ifndef EMBER_NAM_SERVER_INTERNAL_H
#define EMBER_NAM_SERVER_INTERNAL_H

#include <pthread.h>

#include "blocks.h"
#include "frame.h"
#include "poll_score.h"
#include "server.h"
#include "stats.h"


#define NAM_MAX_LISTENERS 8
#define NAM_PEER_BUCKETS 256

typedef struct nam_conn nam_conn;

/* Who is at the other end, for the per-peer limits (conn_admit.c): a uid
 * on the unix sockets (SO_PEERCRED), an address on TCP (IPv4-mapped IPv6
 * addresses count as IPv4). */
typedef struct nam_peer_key {
  uint8_t bytes[17]; /* [0]: 'u' uid, '4' IPv4, '6' IPv6, '?' unknown */
} nam_peer_key;

typedef struct nam_peer {
  nam_peer_key key;
  char name[64];       /* "uid 1000", "10.0.0.7": for messages */
  unsigned conns;      /* its connections */
  unsigned startups;   /* of them, not yet through their Hello */
  struct nam_peer *next; /* hash chain */
} nam_peer;

/* A task as the server tracks it: which client, which blocks it pins. */
typedef struct conn_task {
  nam_conn *conn;
  uint64_t id;
  const acc_descriptor *acc;
  nam_task *task;
  nam_block *pins[NAM_MAX_INPUTS]; /* NULL: an out block (the engine's) */
  size_t n_pins;
  uint64_t output_ids[ACC_MAX_OUTPUTS];
  size_t n_outputs;
  uint64_t reserved;   /* its out blocks and scratch, counted at admission
                          until it finishes (conn_memory.c) */
  uint64_t received_ns;
  /* its Result (conn_reply.c), made by the engine worker that ran it */
  acc_output output;   /* taken from the task; the loop frees it */
  proto_wbuf reply;    /* the encoded frame, if the worker did not send it */
  size_t reply_max;    /* the frame limit when it was submitted */
  int replied;         /* the worker sent it (or its start, the rest queued) */
  struct conn_task *prev, *next;  /* the connection's in-flight list */
  struct conn_task *done_next;    /* the server's completion list */
} conn_task;

/* A block read, sync or restore in flight (conn_blocks.c). */
typedef struct conn_block_op {
  nam_conn *conn;
  uint64_t request_id, block_id;
  int op;                         /* enum nam_block_op_kind */
  nam_block_op_result result;     /* set on the engine's block thread */
  struct conn_block_op *done_next;
} conn_block_op;

struct nam_conn {
  nam_server *srv;
  int fd;
  int is_unix;
  uv_poll_t poll;
  int poll_events;
  int greeted;
  int admitted;         /* through its Hello (and LeaseProof): no longer one
                           of the server's startups */
  int close_after_flush; /* a fatal Error is queued: close once sent */
  int closing;          /* no more I/O; freed when nothing is in flight */
  int handle_closed;
  proto_reader reader;
  /* out, fd and closing are shared with the engine workers that send
   * results (conn_reply.c): out only under send_mu, fd and closing
   * written only under it */
  pthread_mutex_t send_mu;
  proto_wbuf out;
  int out_broken;       /* a worker could not queue the rest of a frame */
  nam_block_table blocks;
  conn_task *tasks;     /* in flight */
  unsigned inflight;
  unsigned ops_pending; /* block ops in flight (conn_blocks.c) */
  uint64_t out_bytes;   /* its tasks' out blocks, held on the NAM */
  uint64_t task_bytes;  /* reserved by its tasks in flight */
  uint64_t state_bytes; /* its state blocks again: the platform's working
                           copy a task makes of each */
  uint64_t app;         /* namespace of its blocks in the engine's cache */
  char peer[96];
  nam_peer *peer_of;    /* its entry in the per-peer counts */
  nam_conn *sprev, *snext; /* the server's startups, oldest first */
  uint64_t opened_turn; /* the loop's turn it was accepted in */
  size_t fds_counted;   /* its fds waiting, as counted in fds_held */
  /* the guards against clients that hold the NAM (conn_guard.c), uv_now ms */
  uint64_t opened_ms;   /* accepted: handshake_timeout */
  uint64_t active_ms;   /* last bytes received or task finished: idle_timeout */
  uint64_t partial_ms;  /* an incomplete frame began (0: none): frame_timeout */
  uint64_t over_ms;     /* send queue over max_send_queue since (0: not) */
  int send_paused;      /* over max_send_queue: its frames wait unread */
  /* TCP clients of a NAM that checks leases (server_leases.c) */
  int has_lease;
  uint64_t lease_id;
  uint64_t lease_expires_unix_ms;
  char lease_label[65];
  /* the lease is held only once the client proved it holds its app key:
   * until then the Welcome's challenge is out and nothing else is taken */
  int lease_proof_due;
  uint8_t lease_challenge[32];
  uint8_t lease_app_key[32];
  nam_conn *prev, *next;
};

typedef struct listener {
  nam_server *srv;
  uv_poll_t poll;
  int fd;
  int is_unix;
  char path[108];
} listener;

/* Replies queued to c and not yet taken by its socket (takes send_mu). */
uint64_t nam_conn_queued(nam_conn *c);

struct nam_server {
  uv_loop_t *loop;
  nam_engine *engine;
  nam_server_limits limits;
  char name[64];
  listener listeners[NAM_MAX_LISTENERS];
  size_t n_listeners;
  nam_conn *conns;
  uint64_t next_app;        /* each connection is an app: its cache namespace */
  nam_server_stats stats;   /* clients, tasks in flight */
  unsigned clients_unix, clients_tcp; /* by listener kind: their own limits */
  unsigned fds_held;        /* clients' sockets and fds waiting: max_fds */
  uint64_t fds_log_ms;      /* fds refused for max_fds: logged once a second */
  unsigned fds_quiet;
  /* conn_admit.c: connections by peer, and those not through their Hello
   * yet (the startups), oldest first */
  nam_peer *peers[NAM_PEER_BUCKETS];
  uint64_t peer_seed;
  nam_conn *startups_head, *startups_tail;
  unsigned n_startups;
  uint64_t rng;             /* random early drop */
  unsigned pass_drops;      /* startups dropped in this round of accepts */
  uv_prepare_t turn_prepare; /* counts the loop's turns: */
  uint64_t turn;            /* a startup is not dropped in its first one */
  uv_idle_t spin;           /* active: the loop polls without sleeping */
  uint64_t spin_until_ns;   /* ...until then (nam_server_spin) */
  uint64_t spin_last_end_ns; /* the last such task ended */
  uint64_t spin_gap_avg_ns; /* from then to the next one's frame, lately */
  poll_score polling;       /* whether spinning pays (poll_score.h) */
  uv_timer_t guard_timer;   /* conn_guard.c: timeouts of every connection */
  uint64_t guard_period_ms;
  uint64_t refused_log_ms;  /* refusals are logged at most once a second */
  unsigned refused_quiet;   /* refused since then, not logged */
  uint64_t dropped_log_ms;  /* startups dropped for others: likewise */
  unsigned dropped_quiet;
  /* accepting paused after running out of descriptors (server.c) */
  uv_timer_t accept_timer;
  int accept_paused;
  uint64_t emfile_log_ms;
  unsigned emfile_quiet;
  uint64_t reserved_bytes;  /* every task in flight's reservation, its
                               client gone or not (conn_memory.c) */
  nam_stats metrics;        /* counters for /metrics */
  uv_async_t done_async;
  pthread_mutex_t done_lock;
  conn_task *done_head, *done_tail;
  conn_block_op *ops_head, *ops_tail; /* block ops done, for the loop */
  int draining;
  void (*on_idle)(nam_server *s, void *user);
  void *on_idle_user;
  struct nam_lease_check *leases; /* NULL: TCP clients need no lease */
  /* tasks in flight by accelerator (the GAM link's utilization) */
  const acc_descriptor *inflight_acc[NAM_MAX_PAIRS];
  unsigned inflight_by_acc[NAM_MAX_PAIRS];
};

/* conn.c */
void nam_conn_open(nam_server *s, int fd, int is_unix, const char *peer);
void nam_conn_task_done(conn_task *ct);
void nam_conn_close(nam_conn *c, const char *why);
/* Send an Error (code, detail), then close once it is out. */
void nam_conn_refuse(nam_conn *c, int code, const char *detail);

/* conn_reply.c: a task's Result, made by the engine worker that finished
 * ct's task t (ct->task may not be set yet: the task can finish before
 * nam_engine_submit returns). nam_reply_prepare takes its output and
 * encodes the Result into ct->reply (one over the direct limit is left to
 * the loop, its output in ct->output); nam_reply_send_locked, with
 * ct->conn's send_mu held, sends it if nothing is queued before it
 * (ct->replied), else leaves it in ct->reply for the loop.
 * nam_reply_encode appends ct's Result to w: 0, EMBER_ETOOBIG over
 * max_frame, EMBER_ENOMEM. */
void nam_reply_prepare(conn_task *ct, nam_task *t);
void nam_reply_send_locked(conn_task *ct);
int nam_reply_encode(conn_task *ct, nam_task *t, proto_wbuf *w,
                     size_t max_frame);

/* conn.c: what conn_blocks.c answers through */
void nam_conn_send(nam_conn *c, Ember__MsgType type, const ProtobufCMessage *m);
int nam_conn_error(nam_conn *c, int code, uint64_t task_id, uint64_t block_id,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* the connection may be freed once nothing is in flight */
void nam_conn_maybe_free(nam_conn *c);

/* Log why at level (LOG_LVL_*), send Error code with it as far as it goes
 * without waiting, and close now: for clients that may never read. */
void nam_conn_drop(nam_conn *c, int code, int level, const char *why);

/* conn_admit.c: who may connect. The peer of a socket, its text for logs
 * ("pid 12 uid 1000", "10.0.0.7:51234") in text. */
void nam_peer_key_of(int fd, int is_unix, nam_peer_key *key, char *text,
                     size_t text_len);
/* nam_admit - room for a new connection of this kind from key: 0, perhaps
 * after dropping a startup to make it (max_clients*, per-peer limits,
 * max_startups), or the limit that is full in *limit with its text in
 * why. */
int nam_admit(nam_server *s, int is_unix, const nam_peer_key *key, char *why,
              size_t why_len, enum nam_stats_refusal *limit);
/* nam_admit_wait - before accepting one more of this kind: 1 when a
 * limit of everyone's is full and only startups accepted in this or the
 * last turn of the loop could make way (their Hello may not have been
 * read yet): the connection waits in the backlog for the next turn. */
int nam_admit_wait(const nam_server *s, int is_unix);
/* A new connection (nam_conn_open): counted for its peer, one of the
 * startups. EMBER_ENOMEM when its peer cannot be counted. */
int nam_admit_open(nam_server *s, nam_conn *c, const nam_peer_key *key);
/* c is through its Hello (and LeaseProof): no longer a startup. */
void nam_admit_done(nam_conn *c);
/* c closes: its counts go. */
void nam_admit_close(nam_conn *c);
/* nam_admit_drop_startup - out of descriptors: drop the oldest startup of
 * the peer that holds the most. 1 if one was dropped, else 0. */
int nam_admit_drop_startup(nam_server *s, const char *why);
void nam_admit_free(nam_server *s);

/* conn_guard.c: one timer closes connections past handshake_timeout,
 * frame_timeout, idle_timeout or send_stall_timeout */
void nam_guard_start(nam_server *s);
/* the limits changed: the timer's period follows the shortest timeout */
void nam_guard_limits_changed(nam_server *s);
void nam_guard_stop(nam_server *s);

/* conn_memory.c: bytes counted before they are taken. What c holds
 * against max_block_bytes: blocks, out blocks, its tasks' reservations. */
uint64_t nam_conn_held(const nam_conn *c);
/* The memory fields of out (block, out, buffer, reserved, held bytes and
 * max_memory), summed over every client. */
void nam_server_memory(const nam_server *s, nam_server_stats *out);
/* nam_conn_block_room - room for a new block of size (a state block counts
 * twice: its working copy; inline_frame: its bytes are in c's read
 * buffer) within c's max_block_bytes and the NAM's max_memory: 0, or
 * EMBER_EBUSY with the reason in why. */
int nam_conn_block_room(nam_conn *c, uint64_t size, int state,
                        int inline_frame, char *why, size_t why_len);
/* nam_conn_reserve_task - nam_task_spec.admit for a conn_task (user):
 * reserve the bytes its plan declares on its connection and the server,
 * or refuse (ETOOBIG: over max_block_bytes alone; EBUSY: with what the
 * client or the NAM holds). nam_conn_unreserve_task gives them back when
 * the task is done. */
int nam_conn_reserve_task(void *user, uint64_t out_bytes,
                          uint64_t scratch_bytes, char *why, size_t why_len);
void nam_conn_unreserve_task(conn_task *ct);

/* conn_blocks.c: out and state blocks of a client (protocol 2) */
void nam_conn_block_op(nam_conn *c, const Ember__BlockOp *m);
void nam_conn_block_op_done(conn_block_op *op);

/* server.c: called when a task finishes, to fire on_idle while draining */
void nam_server_check_idle(nam_server *s);
/* nam_server_spin - a client waits for small tasks one at a time (this one,
 * whose frame was read at arrived_ns, just ran on the loop): the loop
 * polls without sleeping for a while (server.c), so that its next frame is
 * read at once instead of after a thread wake-up (tens of us on a VM). An
 * idle daemon never spins. */
#define NAM_LOOP_SPIN_MIN_NS 50000u
#define NAM_LOOP_SPIN_MAX_NS 500000u
#define NAM_LOOP_SPIN_PROBE 64
void nam_server_spin(nam_server *s, uint64_t arrived_ns);

#endif
