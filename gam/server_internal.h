/*
 * server_internal.h - ember-gam's protocol connections, shared by
 * server.c (frames in and out, the requests) and server_guard.c (who may
 * connect, and the timeouts). Everything here belongs to the loop thread.
 */
#ifndef EMBER_GAM_SERVER_INTERNAL_H
#define EMBER_GAM_SERVER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uthash.h>

#include "conn_stats.h"
#include "frame.h"
#include "node_auth.h"
#include "server.h"

/* The most a frame may be before Hello: a Hello with a 4 KiB client name
 * is already far past any real one (libember's is the app's name). */
#define GAM_HELLO_MAX 4096

enum conn_role { ROLE_NEW, ROLE_NAM, ROLE_APP };

/* A frame waiting for its change to be committed. */
typedef struct held_frame {
  uint64_t need;             /* the change it acknowledges */
  uint8_t *data;             /* header + payload */
  size_t len;
  struct held_frame *next;
} held_frame;

/* One client address and what it holds now (uthash on addr, a keyed
 * hash: addresses are the peers' choice). */
typedef struct gam_peer {
  uint8_t addr[16];          /* IPv6, or IPv4 mapped into it */
  unsigned conns;            /* connections from it now */
  unsigned startups;         /* of them before Hello */
  UT_hash_handle hh;
} gam_peer;

typedef struct gam_conn gam_conn;
struct gam_conn {
  uv_tcp_t tcp;
  gam_server *srv;
  gam_peer *from;
  bool greeted;
  bool closing;
  bool paused;               /* reading stopped: its replies pile up */
  enum conn_role role;
  char node[129];            /* ROLE_NAM: the node it registered */
  uint64_t app_id;           /* ROLE_APP */
  char peer[64];
  uint8_t challenge[NODE_AUTH_CHALLENGE_BYTES]; /* sent in Welcome */
  uint64_t opened_ms;        /* uv_now at accept */
  uint64_t last_frame_ms;    /* uv_now of its newest frame */
  uint64_t active_ms;        /* idle_timeout runs from here */
  uint64_t partial_ms;       /* when the frame in progress began; 0: none */
  uint64_t paused_ms;        /* when reading stopped */
  /* The frame in progress: its first bytes while its header is not
   * whole, then a buffer of exactly its size (counted in
   * gam_server.read_buffered before it is allocated). */
  uint8_t head[PROTO_HEADER_SIZE];
  size_t head_len;
  uint8_t *frame;
  size_t frame_len, frame_size;
  held_frame *held, *held_tail;        /* in order */
  size_t held_bytes;
  size_t writes;             /* uv_write requests not yet called back */
  gam_conn *prev, *next;               /* gam_server.conns */
  gam_conn *su_prev, *su_next;         /* gam_server.startups, oldest first */
  gam_conn *wait_prev, *wait_next;     /* gam_server.waiting */
};

struct gam_server {
  uv_loop_t *loop;
  gam_core *core;
  gam_server_options opt;
  gam_conn_stats *stats;
  unsigned startups_start, startups_full; /* max_startups, bounded */
  uv_tcp_t listener;
  uv_async_t outbox;
  uv_async_t durable;        /* the writer committed (or failed) */
  uv_timer_t tick;
  uv_timer_t guard;          /* timeouts (server_guard.c) */
  gam_conn *conns;
  gam_conn *startups, *startups_tail; /* before Hello, by accept time */
  gam_conn *waiting;         /* connections holding frames */
  gam_peer *peers;           /* uthash */
  uint8_t peer_key[16];      /* its hash's key (server_guard.c) */
  uint64_t frame_seq;        /* the newest change before this frame */
  unsigned n_conns, n_startups;
  uint64_t read_buffered;    /* bytes of gam_conn.frame buffers */
  /* refusals and closes since the last line that told of them: one line
   * per interval, however many */
  uint64_t told_ms;
  uint64_t untold_refused[GAM_REFUSED_N], untold_closed[GAM_CLOSED_N];
  uint64_t accept_told_ms, accept_untold; /* accept failures, likewise */
  /* Every read lands here first: a connection keeps a buffer of its own
   * only while it holds part of a frame, so 10,000 idle NAMs do not pin
   * 640 MiB. */
  uint8_t read_buf[64 << 10];
};

/* server.c */
void gam_conn_close(gam_conn *c, const char *why);
/* An Error frame (code, message) and then the close; counted as reason. */
void gam_conn_drop(gam_conn *c, gam_closing reason, int code,
                   const char *message);
/* The largest frame c may send now (a Hello's before Hello). */
size_t gam_conn_frame_limit(const gam_conn *c);

/* server_guard.c */
/* Whether the connection just accepted (its peer address in ss) may stay;
 * it is counted from here on. 0, or -1 when it was refused (its peer
 * told, if its socket takes the Error at once): the caller closes it. An
 * older connection may be dropped for it (max_startups). */
int gam_guard_admit(gam_server *s, gam_conn *c,
                    const struct sockaddr_storage *ss);
/* c said Hello: it leaves the handshake budget. */
void gam_guard_greeted(gam_conn *c);
/* c is closing: its counts go. */
void gam_guard_forget(gam_conn *c);
/* accept failed (descriptors running out, say): logged once an interval. */
void gam_guard_accept_failed(gam_server *s, int uv_err);
/* Count a close for one of the guard's reasons (logged once an interval). */
void gam_guard_note_close(gam_server *s, gam_closing reason);
void gam_guard_start(gam_server *s);
void gam_guard_close(gam_server *s);

#endif
