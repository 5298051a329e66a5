/*
 * frame.h - ember's framing: a 5-byte header (4-byte little-endian payload
 * length, 1-byte message type from MsgType in ember.proto) followed by a
 * protobuf-c payload. Over a unix socket, file descriptors (sealed memfds of
 * blocks) travel with SCM_RIGHTS alongside the frame that names them.
 *
 * The reader checks a frame's length against its limit before it allocates
 * anything for it, and knows every message type before it decodes one.
 */
#ifndef EMBER_PROTO_FRAME_H
#define EMBER_PROTO_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <protobuf-c/protobuf-c.h>

#include "proto/ember.pb-c.h"

/* 2: out and state blocks (BlockOp); 3: NAMs authenticate to the GAM,
 * leases are bound to the app's key (LeaseProof) */
#define PROTO_VERSION 3
#define PROTO_HEADER_SIZE 5
#define PROTO_DEFAULT_MAX_FRAME ((size_t)64 << 20)
#define PROTO_MAX_PENDING_FDS 64    /* received fds not yet claimed */
#define PROTO_MAX_FDS_PER_SEND 16

/* A complete frame inside the reader's buffer; valid until the next call to
 * proto_reader_next/space/commit. */
typedef struct proto_frame {
  uint8_t type;
  const uint8_t *payload;
  size_t len;
} proto_frame;

/* Incremental reader over a byte stream (and the fds that came with it). */
typedef struct proto_reader {
  uint8_t *buf;
  size_t cap;         /* allocated bytes */
  size_t start, end;  /* unconsumed bytes are buf[start, end) */
  size_t max_frame;   /* largest payload accepted */
  int fds[PROTO_MAX_PENDING_FDS];
  size_t nfds;
} proto_reader;

void proto_reader_init(proto_reader *r, size_t max_frame);
/* Frees the buffer and closes fds nobody claimed. */
void proto_reader_free(proto_reader *r);

/* proto_reader_space - where to read more bytes to: returns a pointer and
 * how many bytes fit there; NULL with EMBER_ENOMEM in *err on failure. */
uint8_t *proto_reader_space(proto_reader *r, size_t *avail, int *err);
/* proto_reader_commit - n bytes were written at the space pointer. */
void proto_reader_commit(proto_reader *r, size_t n);
/* proto_reader_feed - copy bytes in (for tests and fuzzing). */
int proto_reader_feed(proto_reader *r, const void *data, size_t len);

/* proto_reader_next - the next complete frame. Returns 1 and fills *out, 0
 * when more bytes are needed, EMBER_ETOOBIG when the header announces a
 * payload over the limit (the stream cannot be resynchronised after that:
 * close it). A frame of an unknown type is returned like any other: the
 * caller answers it with an error and goes on. */
int proto_reader_next(proto_reader *r, proto_frame *out);

/* Received fds, in the order they arrived. */
int proto_reader_push_fd(proto_reader *r, int fd);  /* EMBER_ETOOBIG if full */
int proto_reader_pop_fd(proto_reader *r);           /* -1 if none */

/* proto_recv - one recvmsg() on a stream socket into the reader, taking any
 * SCM_RIGHTS fds. Returns bytes read (> 0), 0 at end of stream, or -errno
 * (-EAGAIN when nothing is there on a non-blocking socket). Fds over the
 * reader's pending limit, and truncated control data, give -EPROTO. */
ssize_t proto_recv(int sock, proto_reader *r);

/* Message types -> protobuf-c descriptors. NULL for an unknown type. */
const ProtobufCMessageDescriptor *proto_descriptor(uint8_t type);
const char *proto_type_name(uint8_t type);

/* proto_unpack - decode a frame's payload; NULL if the type is unknown or
 * the payload is not a valid message. Free with protobuf_c_message_free_unpacked. */
ProtobufCMessage *proto_unpack(const proto_frame *f);

/* A growable output buffer of frames. */
typedef struct proto_wbuf {
  uint8_t *data;
  size_t len, cap, sent;
} proto_wbuf;

/* proto_wbuf_append - append one frame holding msg (of message type type).
 * Returns 0, EMBER_ETOOBIG if the payload exceeds max_frame, EMBER_ENOMEM. */
int proto_wbuf_append(proto_wbuf *w, uint8_t type, const ProtobufCMessage *msg,
                      size_t max_frame);
void proto_wbuf_consume(proto_wbuf *w, size_t n);
void proto_wbuf_free(proto_wbuf *w);

/* proto_send - send all of data on a blocking socket, attaching nfds fds
 * (at most PROTO_MAX_FDS_PER_SEND) to the first byte. Returns 0 or -errno. */
int proto_send(int sock, const void *data, size_t len, const int *fds,
               size_t nfds);

#endif
