/*
 * fuzz_frame.c - libFuzzer target for ember's framing (proto/frame.c): the
 * input is a byte stream fed into a proto_reader in chunks whose sizes are
 * derived from the input itself; frames are taken until the reader needs
 * more or fails, each is decoded with proto_unpack, and each decoded
 * message is written back with proto_wbuf_append and read again.
 *
 *   build-fuzz/tests/fuzz/fuzz_frame -max_total_time=60 tests/fuzz/corpus/frame
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "frame.h"

#define MAX_FRAME 4096 /* small, so that the limit is reached */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether msg or any message inside it kept unknown fields. */
static int has_unknown_fields(const ProtobufCMessage *msg) {
  if (msg->n_unknown_fields) return 1;
  const ProtobufCMessageDescriptor *d = msg->descriptor;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->type != PROTOBUF_C_TYPE_MESSAGE) continue;
    const char *base = (const char *)msg;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t n = *(const size_t *)(base + f->quantifier_offset);
      ProtobufCMessage *const *subs = *(ProtobufCMessage *const *const *)(base + f->offset);
      for (size_t k = 0; k < n; k++)
        if (has_unknown_fields(subs[k])) return 1;
    } else {
      const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)(base + f->offset);
      if (sub && has_unknown_fields(sub)) return 1;
    }
  }
  return 0;
}

/* A decoded message survives being framed and read again. */
static void round_trip(uint8_t type, const ProtobufCMessage *msg) {
  proto_wbuf w = {0};
  int rc = proto_wbuf_append(&w, type, msg, 0);
  if (rc == EMBER_ENOMEM) return;
  if (rc != 0) abort();
  proto_reader r;
  proto_frame f;
  proto_reader_init(&r, 0);
  if (proto_reader_feed(&r, w.data, w.len) == 0) {
    if (proto_reader_next(&r, &f) != 1 || f.type != type ||
        f.len != w.len - PROTO_HEADER_SIZE)
      abort();
    ProtobufCMessage *again = proto_unpack(&f);
    if (!again || again->descriptor != msg->descriptor) abort();
    protobuf_c_message_free_unpacked(again, NULL);
    if (proto_reader_next(&r, &f) != 0) abort();
  }
  proto_reader_free(&r);
  proto_wbuf_free(&w);
}

/* Take every complete frame; returns 0, or < 0 once the stream is bad. */
static int drain(proto_reader *r) {
  proto_frame f;
  int rc;
  while ((rc = proto_reader_next(r, &f)) == 1) {
    if (f.len > MAX_FRAME) abort();
    (void)proto_type_name(f.type);
    ProtobufCMessage *m = proto_unpack(&f);
    if (m) {
      if (!proto_descriptor(f.type)) abort();
      /* protobuf-c keeps unknown fields (deprecated groups among them) and
       * writes them back in a form it may not read again; the NAM never
       * sends back what it received, so only known fields must survive */
      if (!has_unknown_fields(m)) round_trip(f.type, m);
      protobuf_c_message_free_unpacked(m, NULL);
    }
  }
  if (rc < 0 && rc != EMBER_ETOOBIG) abort();
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  proto_reader r;
  proto_reader_init(&r, MAX_FRAME);
  size_t off = 0;
  int rc = 0;
  while (off < size && rc == 0) {
    /* the chunk size comes from the byte at the split point */
    size_t n = 1 + ((size_t)data[off] * 37 + off) % 301;
    if (n > size - off) n = size - off;
    if (data[off] & 1) {
      if (proto_reader_feed(&r, data + off, n) != 0) break;
    } else { /* as a socket reader does: space, then commit */
      size_t avail = 0;
      int err = 0;
      uint8_t *dst = proto_reader_space(&r, &avail, &err);
      if (!dst) break;
      if (avail == 0) abort();
      if (n > avail) n = avail;
      memcpy(dst, data + off, n);
      proto_reader_commit(&r, n);
    }
    off += n;
    rc = drain(&r);
  }
  proto_reader_free(&r);
  return 0;
}
