/*
 * fuzz_nam.c - libFuzzer target for ember-nam's client connections: the
 * real nam/conn.c, conn_blocks.c, server.c and conn_guard.c, on a real
 * libuv loop with a real engine (the cpu platform, the built-in
 * accelerators), fed through a socketpair as a client's socket would feed
 * them. Every frame a client may send goes through the handlers the daemon
 * runs: Hello, PutBlock (inline), ReleaseBlock, Submit (the accelerator's
 * validate, the engine running it), Cancel, BlockOp, List, Stats,
 * LeaseProof; and what the NAM sends back must be frames that unpack.
 *
 * One server lives for the whole run (LLVMFuzzerInitialize), as the daemon
 * does; each input is one connection. Input: the first byte's bit 0 makes
 * it a TCP connection (inline blocks allowed; no lease check here: the
 * lease's MAC, body and expiry are fuzz_lease's), else a unix one (inline
 * blocks refused: there they come as memfds); the rest is the byte stream
 * the client sends. The connection stays open until its tasks have
 * finished and their results came back, then the client closes it.
 *
 *   build-fuzz/tests/fuzz/fuzz_nam -max_total_time=60 tests/fuzz/corpus/nam
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uv.h>

#include "accels.h"
#include "engine.h"
#include "frame.h"
#include "log.h"
#include "server.h"
#include "server_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define MAX_FRAME 65536
/* Loop turns one input may take: far more than any input needs while the
 * engine answers; a bound, so that a stuck connection is a finding. */
#define MAX_TURNS 200000

static uv_loop_t loop;
static nam_engine *engine;
static nam_server *server;
static proto_reader replies;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  log_threshold = LOG_LVL_ERR - 1; /* every connection logs: quiet */
  if (uv_loop_init(&loop) != 0 || nam_accels_load(NULL) != 0) abort();
  nam_engine_config cfg = {.cpu_workers = 1, .queue_capacity = 64};
  cfg.accelerators = nam_accels_list(&cfg.n_accelerators);
  if (nam_engine_create(&cfg, &engine) != 0) abort();
  nam_server_limits l = {
      .max_frame = MAX_FRAME,
      .max_clients = 4,
      .max_clients_unix = 4,
      .max_clients_tcp = 4,
      .max_inflight = 8,
      .max_block_bytes = 1 << 20,
      .max_send_queue = 1 << 20,
      .send_stall_ms = 30000,
      .handshake_ms = 30000,
      .frame_ms = 30000,
      .idle_ms = 0,
  };
  if (nam_server_create(&loop, engine, &l, "fuzz", &server) != 0) abort();
  proto_reader_init(&replies, MAX_FRAME);
  return 0;
}

/* Whatever the NAM sent must be frames of messages a client can unpack. */
static void read_replies(int fd) {
  for (;;) {
    ssize_t n = proto_recv(fd, &replies);
    if (n <= 0) return; /* EAGAIN, or the NAM closed its end */
    proto_frame f;
    int rc;
    while ((rc = proto_reader_next(&replies, &f)) == 1) {
      ProtobufCMessage *m = proto_unpack(&f);
      if (!m) abort();
      protobuf_c_message_free_unpacked(m, NULL);
    }
    if (rc < 0) abort(); /* the NAM framed a reply wrongly */
  }
}

static unsigned clients(void) {
  nam_server_stats st;
  nam_server_get_stats(server, &st);
  return st.clients;
}

static unsigned inflight(void) {
  nam_server_stats st;
  nam_server_get_stats(server, &st);
  return st.inflight;
}

/* One loop turn; a short sleep when the engine has work and nothing else
 * is ready, so that its worker gets the core. */
static void turn(void) {
  if (uv_run(&loop, UV_RUN_NOWAIT) == 0 || inflight() > 0) usleep(20);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
                 sv) != 0)
    abort();
  unsigned before = clients();
  nam_conn_open(server, sv[0], !(data[0] & 1), "fuzz");
  proto_reader_free(&replies);
  proto_reader_init(&replies, MAX_FRAME);

  /* send the stream as the NAM takes it (it stops reading under
   * backpressure), then wait until its tasks are done */
  const uint8_t *p = data + 1;
  size_t left = size - 1;
  int quiet = 0;
  for (int i = 0; i < MAX_TURNS && clients() > before; i++) {
    if (left) {
      ssize_t n = write(sv[1], p, left);
      if (n > 0) {
        p += n;
        left -= (size_t)n;
      } else if (n < 0 && errno != EAGAIN) {
        break; /* the NAM closed the connection */
      }
    }
    turn();
    read_replies(sv[1]);
    quiet = left == 0 && inflight() == 0 ? quiet + 1 : 0;
    if (quiet > 3) break;
  }
  close(sv[1]);
  for (int i = 0; i < MAX_TURNS && clients() > before; i++) turn();
  if (clients() > before) abort(); /* a connection the NAM never closed */
  /* its close callbacks and deferred frees */
  while (uv_run(&loop, UV_RUN_NOWAIT) != 0 && inflight() > 0) usleep(20);
  return 0;
}
