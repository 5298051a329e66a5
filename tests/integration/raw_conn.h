/*
 * raw_conn.h - a raw protocol client of ember-nam for integration tests:
 * one socket and a proto_reader, frames written and read by hand, so that a
 * test can send what libember never would (garbage, frames over the limit,
 * another protocol version, block ids of its own, an fd or none) and see
 * each frame the daemon answers with.
 *
 * Every function here checks what it does and exits the test on failure
 * (CHECK from harness.h), except where its block says it returns something.
 * A raw_conn is used from one thread.
 */
#ifndef EMBER_TEST_RAW_CONN_H
#define EMBER_TEST_RAW_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "frame.h"

typedef struct raw_conn {
  int fd;          /* the connected stream socket */
  proto_reader rd; /* what has come from it and not yet been returned */
  int challenged;  /* the last Welcome carried a challenge (a lease's) */
  uint8_t challenge[32];
} raw_conn;

/* raw_open_unix - connect c to the NAM's unix socket at path. */
void raw_open_unix(raw_conn *c, const char *path);
/* raw_open_tcp - connect c to 127.0.0.1:port. */
void raw_open_tcp(raw_conn *c, int port);
/* raw_close - close the socket and free the reader; c may be opened again. */
void raw_close(raw_conn *c);

/* raw_send - one frame of message m of type type; fd >= 0 goes with it
 * (SCM_RIGHTS, unix sockets only), -1 for none. The fd stays the caller's. */
void raw_send(raw_conn *c, Ember__MsgType type, const ProtobufCMessage *m,
              int fd);
/* raw_send_bytes - len bytes exactly as given (a header of one's own, a
 * malformed payload, garbage), with fd as for raw_send. */
void raw_send_bytes(raw_conn *c, const void *data, size_t len, int fd);

/* raw_recv - the next frame, unpacked: its type in *type, the message
 * returned (free it with protobuf_c_message_free_unpacked). Returns NULL
 * at the end of the stream (or a receive error). Exits when nothing comes
 * within timeout_ms, or when a frame is over the reader's limit or does
 * not unpack. */
ProtobufCMessage *raw_recv(raw_conn *c, uint8_t *type, int timeout_ms);

/* raw_hello - send Hello with protocol version and lease (NULL: none), and
 * read the answer within timeout_ms. Returns NULL for Welcome, or the Error
 * the NAM refused with (the caller's: raw_check_error frees it, or
 * protobuf_c_message_free_unpacked). Exits on anything else or the end of
 * the stream. */
Ember__Error *raw_hello(raw_conn *c, uint32_t version,
                        const Ember__Lease *lease, int timeout_ms);
/* raw_greet - raw_hello with PROTO_VERSION that must be welcomed: exits,
 * printing the refusal, otherwise. */
void raw_greet(raw_conn *c, const Ember__Lease *lease, int timeout_ms);

/* raw_hello_proved - raw_hello with PROTO_VERSION and lease, then answer
 * the NAM's challenge with a LeaseProof signed with sk (64 bytes: the
 * app's Ed25519 secret key, proto/lease_proof.h). NULL once the second
 * Welcome admits the lease, or the Error that refused the lease or the
 * proof (the caller's). Exits when no challenge comes. */
Ember__Error *raw_hello_proved(raw_conn *c, const Ember__Lease *lease,
                               const uint8_t *sk, int timeout_ms);
/* raw_greet_proved - raw_hello_proved that must be admitted. */
void raw_greet_proved(raw_conn *c, const Ember__Lease *lease,
                      const uint8_t *sk, int timeout_ms);

/* raw_check_error - e (NULL: raw_hello was welcomed) must be an Error with
 * code whose message contains text; prints "  Error NAME: message", frees
 * e. */
void raw_check_error(Ember__Error *e, int code, const char *text);
/* raw_expect_error - the next frame (within timeout_ms) is such an Error. */
void raw_expect_error(raw_conn *c, int code, const char *text,
                      int timeout_ms);
/* raw_expect_closed - the next thing within timeout_ms is the end of the
 * stream. */
void raw_expect_closed(raw_conn *c, int timeout_ms);

#endif
