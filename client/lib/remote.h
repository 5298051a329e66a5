/*
 * remote.h - the connection to a NAM (remote.c): connect and greet,
 * serialized writes, requests and their replies, reconnection with backoff,
 * and reading: one thread at a time reads the socket and hands each
 * Result, Error and BlockReply to the owner's events (backend_remote.c).
 * A caller that waits for its own reply reads it itself (ember__remote_lead):
 * one thread wake-up instead of two. The connection's reader thread reads
 * only when the owner needs it (replies nobody waits for in person), and
 * otherwise sleeps until the NAM hangs up. Nothing here knows of tasks.
 */
#ifndef EMBER_REMOTE_H
#define EMBER_REMOTE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "frame.h"

struct ember__remote;

typedef struct ember__remote_events {
  /* a Result, Error or BlockReply (reader thread; m is freed after) */
  void (*on_message)(struct ember__remote *r, uint8_t type,
                     ProtobufCMessage *m);
  /* connected again (client->lock held) */
  void (*on_connected)(struct ember__remote *r);
  /* the connection is gone: the last call for it, on whichever thread
   * read its end (no lock held) */
  void (*on_lost)(struct ember__remote *r, const char *why);
  /* client->lock held: the owner awaits replies that nobody waits for in
   * person (async tasks, block ops, a full in-flight window), so the
   * reader thread must read */
  int (*needs_reader)(struct ember__remote *r);
  /* client->lock held, nobody reads: hand the reading to a caller that
   * waits for its reply in person; 1 if one took it */
  int (*offer_read)(struct ember__remote *r);
} ember__remote_events;

typedef struct ember__remote_reply {
  int waiting;            /* a caller waits for this message type */
  uint8_t type;
  ProtobufCMessage *msg;  /* set by the reader thread */
  int error;
} ember__remote_reply;

/* One client's connection. Under client->lock unless said otherwise. */
typedef struct ember__remote {
  ember_client *client;
  const ember__remote_events *events;
  int fd;                    /* -1 when not connected */
  uint64_t gen;              /* bumps on every successful connect */
  int reader_running;        /* the reader (connect_lock, close) */
  pthread_t reader;
  int reading;               /* a thread reads the socket (owns rd) */
  int hangup;                /* we shut the socket down: read to its end */
  int wake_fd;               /* eventfd: the reader thread has work */
  int wake_pending;          /* written and not yet read */
  proto_reader rd;           /* owned by the thread that is reading */
  size_t max_frame;
  unsigned max_inflight;     /* the NAM's Welcome says */
  size_t unix_inline_max;    /* likewise: blocks up to this size may go
                                inline over its unix socket (0: none) */
  uint64_t last_attempt_ns, backoff_ns;
  uint64_t down_since_ns;    /* the connection went away; 0 while up */
  char down_why[512];        /* the last reason it is down */
  int lease_ended;           /* the GAM ended it: no more reconnecting */
  ember__remote_reply reply;
  pthread_cond_t reply_cv;
  pthread_mutex_t send_lock; /* one writer on the socket at a time */
  pthread_mutex_t connect_lock;
  pthread_mutex_t request_lock; /* one request/reply at a time */
  /* a cluster member's lease, presented in every Hello (copied) */
  uint8_t *lease_body, *lease_mac;
  size_t lease_body_len, lease_mac_len;
  uint64_t lease_id;
  uint8_t lease_sk[64];
} ember__remote;

/* ember__remote_init - r for c, not connected, lease (NULL: none) copied;
 * 0 or EMBER_ENOMEM (then ember__remote_destroy). */
int ember__remote_init(ember__remote *r, ember_client *c,
                       const ember__lease *lease,
                       const ember__remote_events *events);
/* ember__remote_destroy - after ember__remote_shutdown */
void ember__remote_destroy(ember__remote *r);
/* ember__remote_tcp_open - a connected, blocking TCP socket to "HOST:PORT"
 * (an IPv6 address in brackets), within timeout_ms; -1 with the reason in
 * err. */
int ember__remote_tcp_open(const char *address, int timeout_ms, char *err,
                           size_t err_len);
int ember__remote_connect(ember__remote *r);  /* under connect_lock */
int ember__remote_ensure(ember__remote *r);   /* reconnect with backoff */
/* close the socket and join the reader (its on_lost has run) */
void ember__remote_shutdown(ember__remote *r);
/* ember__remote_kick - client->lock held: something awaits a reply; if
 * nobody reads, a waiting caller or the reader thread starts */
void ember__remote_kick(ember__remote *r);
/* ember__remote_hangup - client->lock held: shut the socket down; whoever
 * reads next sees its end and hands what was in flight to on_lost */
void ember__remote_hangup(ember__remote *r);
/* ember__remote_lead - client->lock held: 1 if the calling thread now
 * reads the socket (nobody did and it is up), else 0 */
int ember__remote_lead(ember__remote *r);
/* How a reader that expects bytes soon waits for them: it sleeps for up to
 * sleep_ns, then polls without sleeping for up to spin_ns, then sleeps
 * until they come. outcome: when they came. */
enum ember__remote_wait_outcome {
  EMBER__WAIT_LATE,     /* after the polling */
  EMBER__WAIT_EARLY,    /* during the first sleep */
  EMBER__WAIT_CAUGHT,   /* while it polled */
};

typedef struct ember__remote_wait {
  uint64_t sleep_ns, spin_ns;
  enum ember__remote_wait_outcome outcome;
} ember__remote_wait;

/* ember__remote_read - the reader (no lock held): wait for bytes (as w
 * says; NULL: sleep until they come), then hand every whole frame to the
 * events. 0, or -1 when the connection ended (on_lost has run, the reading
 * is given up). */
int ember__remote_read(ember__remote *r, ember__remote_wait *w);
/* ember__remote_unlead - client->lock held: stop reading, and kick */
void ember__remote_unlead(ember__remote *r);
int ember__remote_send(ember__remote *r, const proto_wbuf *w, const int *fds,
                       size_t nfds);
/* the same with send_lock already held by the caller */
int ember__remote_send_locked(ember__remote *r, const proto_wbuf *w,
                              const int *fds, size_t nfds);
int ember__remote_send_msg(ember__remote *r, uint8_t type,
                           const ProtobufCMessage *m);
int ember__remote_request(ember__remote *r, uint8_t type,
                          const ProtobufCMessage *m, uint8_t reply_type,
                          ProtobufCMessage **reply);

#endif
