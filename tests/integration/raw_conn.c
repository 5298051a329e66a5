/* raw_conn.c - a raw protocol client of ember-nam for integration tests. */
#include <errno.h>
#include "raw_conn.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"
#include "lease_proof.h"

static void raw_connect(raw_conn *c, int family, const struct sockaddr *sa,
                        socklen_t len) {
  c->fd = socket(family, SOCK_STREAM, 0);
  CHECK(c->fd >= 0);
  CHECK_EQ(connect(c->fd, sa, len), 0);
  proto_reader_init(&c->rd, 0);
  c->challenged = 0;
}

void raw_open_unix(raw_conn *c, const char *path) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%.107s", path);
  raw_connect(c, AF_UNIX, (struct sockaddr *)&sa, sizeof sa);
}

void raw_open_tcp(raw_conn *c, int port) {
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  raw_connect(c, AF_INET, (struct sockaddr *)&sa, sizeof sa);
}

void raw_close(raw_conn *c) {
  close(c->fd);
  c->fd = -1;
  proto_reader_free(&c->rd);
}

void raw_send_bytes(raw_conn *c, const void *data, size_t len, int fd) {
  CHECK_EQ(proto_send(c->fd, data, len, fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0),
           0);
}

void raw_send(raw_conn *c, Ember__MsgType type, const ProtobufCMessage *m,
              int fd) {
  proto_wbuf w = {0};
  CHECK_EQ(proto_wbuf_append(&w, (uint8_t)type, m, 0), 0);
  raw_send_bytes(c, w.data, w.len, fd);
  proto_wbuf_free(&w);
}

ProtobufCMessage *raw_recv(raw_conn *c, uint8_t *type, int timeout_ms) {
  for (;;) {
    proto_frame f;
    int rc = proto_reader_next(&c->rd, &f);
    CHECK(rc >= 0);
    if (rc == 1) {
      *type = f.type;
      ProtobufCMessage *m = proto_unpack(&f);
      CHECK(m != NULL);
      return m;
    }
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    CHECK_EQ(poll(&p, 1, timeout_ms), 1);
    if (proto_recv(c->fd, &c->rd) <= 0) return NULL;
  }
}

Ember__Error *raw_hello(raw_conn *c, uint32_t version,
                        const Ember__Lease *lease, int timeout_ms) {
  Ember__Hello h = EMBER__HELLO__INIT;
  h.protocol_version = version;
  h.lease = (Ember__Lease *)lease;
  proto_wbuf hello = {0};
  CHECK_EQ(proto_wbuf_append(&hello, EMBER__MSG_TYPE__MSG_HELLO, &h.base, 0),
           0);
  /* a connection refused at accept may be closed before the Hello goes:
   * the refusal's Error is still there to read */
  int rc = proto_send(c->fd, hello.data, hello.len, NULL, 0);
  proto_wbuf_free(&hello);
  CHECK(rc == 0 || rc == -EPIPE || rc == -ECONNRESET);
  uint8_t type;
  ProtobufCMessage *m = raw_recv(c, &type, timeout_ms);
  if (!m) {
    fprintf(stderr, "raw_hello: the end of the stream instead of Welcome\n");
    exit(1);
  }
  if (type == EMBER__MSG_TYPE__MSG_ERROR) return (Ember__Error *)m;
  if (type != EMBER__MSG_TYPE__MSG_WELCOME) {
    fprintf(stderr, "raw_hello: expected Welcome or Error, got %s\n",
            proto_type_name(type));
    exit(1);
  }
  const Ember__Welcome *w = (const Ember__Welcome *)m;
  c->challenged = w->has_challenge && w->challenge.len == sizeof c->challenge;
  if (c->challenged) memcpy(c->challenge, w->challenge.data, sizeof c->challenge);
  protobuf_c_message_free_unpacked(m, NULL);
  return NULL;
}

Ember__Error *raw_hello_proved(raw_conn *c, const Ember__Lease *lease,
                               const uint8_t *sk, int timeout_ms) {
  Ember__Error *e = raw_hello(c, PROTO_VERSION, lease, timeout_ms);
  if (e) return e;
  if (!c->challenged) {
    fprintf(stderr, "raw_hello_proved: the Welcome has no challenge\n");
    exit(1);
  }
  Ember__LeaseBody *b =
      ember__lease_body__unpack(NULL, lease->body.len, lease->body.data);
  CHECK(b != NULL);
  uint8_t sig[LEASE_PROOF_BYTES];
  lease_proof_sign(sk, c->challenge, b->lease_id, sig);
  ember__lease_body__free_unpacked(b, NULL);
  Ember__LeaseProof p = EMBER__LEASE_PROOF__INIT;
  p.signature.data = sig;
  p.signature.len = sizeof sig;
  raw_send(c, EMBER__MSG_TYPE__MSG_LEASE_PROOF, &p.base, -1);
  uint8_t type;
  ProtobufCMessage *m = raw_recv(c, &type, timeout_ms);
  if (m && type == EMBER__MSG_TYPE__MSG_ERROR) return (Ember__Error *)m;
  if (!m || type != EMBER__MSG_TYPE__MSG_WELCOME ||
      ((Ember__Welcome *)m)->has_challenge) {
    fprintf(stderr, "raw_hello_proved: expected the second Welcome, got %s\n",
            m ? proto_type_name(type) : "the end of the stream");
    exit(1);
  }
  protobuf_c_message_free_unpacked(m, NULL);
  c->challenged = 0;
  return NULL;
}

void raw_greet_proved(raw_conn *c, const Ember__Lease *lease,
                      const uint8_t *sk, int timeout_ms) {
  Ember__Error *e = raw_hello_proved(c, lease, sk, timeout_ms);
  if (e) {
    fprintf(stderr, "raw_greet_proved: refused: %s: %s\n",
            ember_errname(e->code), e->message);
    exit(1);
  }
}

void raw_greet(raw_conn *c, const Ember__Lease *lease, int timeout_ms) {
  Ember__Error *e = raw_hello(c, PROTO_VERSION, lease, timeout_ms);
  if (e) {
    fprintf(stderr, "raw_greet: refused: %s: %s\n", ember_errname(e->code),
            e->message);
    exit(1);
  }
}

void raw_check_error(Ember__Error *e, int code, const char *text) {
  if (!e) {
    fprintf(stderr, "expected Error %s containing '%s', got Welcome\n",
            ember_errname(code), text);
    exit(1);
  }
  printf("  Error %s: %s\n", ember_errname(e->code), e->message);
  if (e->code != code || !strstr(e->message, text)) {
    fprintf(stderr, "expected %s containing '%s'\n", ember_errname(code), text);
    exit(1);
  }
  protobuf_c_message_free_unpacked(&e->base, NULL);
}

void raw_expect_error(raw_conn *c, int code, const char *text,
                      int timeout_ms) {
  uint8_t type;
  ProtobufCMessage *m = raw_recv(c, &type, timeout_ms);
  CHECK(m != NULL);
  if (type != EMBER__MSG_TYPE__MSG_ERROR) {
    fprintf(stderr, "expected Error(%s), got %s\n", text, proto_type_name(type));
    exit(1);
  }
  raw_check_error((Ember__Error *)m, code, text);
}

void raw_expect_closed(raw_conn *c, int timeout_ms) {
  uint8_t type;
  CHECK(raw_recv(c, &type, timeout_ms) == NULL);
}
