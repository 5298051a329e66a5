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
/* Over a unix socket, blocks up to this size may travel inline (the NAM
 * says so in its Welcome): copying 64 KiB costs less than making, sealing,
 * passing and mapping a memfd. */
#define PROTO_UNIX_INLINE_MAX 65536u
/* The largest payload a peer takes before the handshake is done: a Hello
 * (names, a lease of the GAM's with its app key and MAC: well under 1 KiB)
 * or a LeaseProof. A longer frame is refused at its length prefix. */
#define PROTO_MAX_HELLO_FRAME 4096
/* The reader's buffer without a large frame in it; what it holds beyond
 * this is a frame that announced more (proto_reader_held). */
#define PROTO_READ_CHUNK ((size_t)64 << 10)

/* A complete frame inside the reader's buffer; valid until the next call to
 * proto_reader_next/space/commit/shrink. */
typedef struct proto_frame {
  uint8_t type;
  const uint8_t *payload;
  size_t len;
  uint64_t offset;    /* of its first header byte in the stream */
} proto_frame;

/* A received fd and the stream bytes [from, to) of the recvmsg() that
 * brought it: the message it was sent with began in there (the kernel
 * returns a message's fds with its first bytes; to is UINT64_MAX while
 * the read may have stopped inside that message). fd is PROTO_FD_REFUSED
 * for one its owner closed on arrival (proto_reader_refuse_fd). */
typedef struct proto_fd {
  int fd;
  uint64_t from, to;
} proto_fd;

#define PROTO_FD_REFUSED (-2)

/* Incremental reader over a byte stream (and the fds that came with it). */
typedef struct proto_reader {
  uint8_t *buf;
  size_t cap;         /* allocated bytes */
  size_t start, end;  /* unconsumed bytes are buf[start, end) */
  size_t max_frame;   /* largest payload accepted; the owner may change it
                         between calls (a frame already given room stays) */
  uint64_t offset;    /* stream offset of buf[start] */
  int taken;          /* the frame at start was given room: max_frame no
                         longer applies to it */
  proto_fd fds[PROTO_MAX_PENDING_FDS];
  size_t nfds;
  size_t max_fds;     /* pending fds accepted; 0: PROTO_MAX_PENDING_FDS */
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

/* proto_reader_head - the header at the front, if complete: 1 with the
 * announced payload length and type (either may be NULL), else 0. */
int proto_reader_head(const proto_reader *r, size_t *len, uint8_t *type);

/* proto_reader_held - bytes the buffer holds beyond PROTO_READ_CHUNK: a
 * large frame (or room made for one), which its owner counts. */
size_t proto_reader_held(const proto_reader *r);

/* proto_reader_shrink - give back the room of a large frame once it has
 * been consumed: the buffer returns to at most PROTO_READ_CHUNK when what
 * is left (and the frame it begins, if its header is there) fits. Frames
 * returned before are invalid after it. Never fails. */
void proto_reader_shrink(proto_reader *r);

/* Received fds, in the order they arrived. push and pop ignore where in
 * the stream they came (push records none: from 0, to UINT64_MAX); pop
 * may give PROTO_FD_REFUSED. */
int proto_reader_push_fd(proto_reader *r, int fd);  /* EMBER_ETOOBIG if full */
int proto_reader_pop_fd(proto_reader *r);           /* -1 if none */

/* proto_reader_take_fd - the fd for the frame that begins at stream offset
 * at (a PutBlock's memfd): the oldest pending one, if the read that brought
 * it began at or before at (PROTO_FD_REFUSED if it was refused); else -1
 * (the next fd came with later bytes: none was sent with this frame). The
 * caller owns the fd. */
int proto_reader_take_fd(proto_reader *r, uint64_t at);

/* proto_reader_refuse_fd - close pending fd i (0 the oldest) now; it stays
 * in its place as PROTO_FD_REFUSED, which the frame that claims it gets
 * instead of an fd. */
void proto_reader_refuse_fd(proto_reader *r, size_t i);

/* proto_reader_drop_fds - close the pending fds that no frame can claim
 * any more: those whose message's bytes have all been consumed (to at or
 * before the reader's offset), and all of them with all set. Returns how
 * many were closed. */
size_t proto_reader_drop_fds(proto_reader *r, int all);

/* proto_recv - one recvmsg() on a stream socket into the reader, taking any
 * SCM_RIGHTS fds with the stream bytes they came with. Returns bytes read
 * (> 0), 0 at end of stream, or -errno (-EAGAIN when nothing is there on a
 * non-blocking socket). Fds over the reader's pending limit (max_fds) give
 * -ETOOMANYREFS, truncated control data (more fds in one message than
 * PROTO_MAX_FDS_PER_SEND, or none left to this process) -EPROTO; either
 * way the fds of that read are closed and its bytes not taken. */
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

/* proto_header_write - the PROTO_HEADER_SIZE bytes at h that announce a
 * payload of len bytes of message type type. */
void proto_header_write(uint8_t *h, uint32_t len, uint8_t type);

/* proto_wbuf_append - append one frame holding msg (of message type type).
 * Returns 0, EMBER_ETOOBIG if the payload exceeds max_frame, EMBER_ENOMEM. */
int proto_wbuf_append(proto_wbuf *w, uint8_t type, const ProtobufCMessage *msg,
                      size_t max_frame);
/* proto_wbuf_append_raw - append len bytes already framed (the rest of a
 * frame whose start went out elsewhere). 0 or EMBER_ENOMEM. */
int proto_wbuf_append_raw(proto_wbuf *w, const void *data, size_t len);
void proto_wbuf_consume(proto_wbuf *w, size_t n);
void proto_wbuf_free(proto_wbuf *w);

/* proto_send - send all of data on a blocking socket, attaching nfds fds
 * (at most PROTO_MAX_FDS_PER_SEND) to the first byte. Returns 0 or -errno. */
int proto_send(int sock, const void *data, size_t len, const int *fds,
               size_t nfds);

#endif
