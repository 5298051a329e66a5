/*
 * fuzz_nam.c - libFuzzer target for what ember-nam does with a client's
 * frames before the engine runs anything: the frame decoder
 * (proto/frame.c), protobuf-c unpacking of every message a client sends,
 * and the checks nam/conn.c, nam/conn_blocks.c and nam/lease_check.c make
 * on them: Hello (protocol version; over TCP the lease: MAC, body,
 * expiry, node, label, ended leases, proto/lease.c), PutBlock (ids,
 * sizes, inline bytes against the size, duplicates, the per-client byte
 * limit), ReleaseBlock, Submit (task ids, the accelerator, block counts,
 * reserved ids, inputs among the client's blocks, then the accelerator's
 * own validate on the params and input blocks, and run_cpu when the work
 * is small), Cancel, BlockOp (the op's range).
 *
 * conn.c's handlers need a running server (a libuv loop, the engine's
 * threads, a socket), so this target repeats their checks in the same
 * order on a model of one connection, calling the same functions for the
 * parts that are callable alone: proto_reader_next, proto_unpack,
 * lease_verify, the sw descriptor's validate/run_cpu/release.
 *
 * Input: the first byte sets the connection: bit 0 TCP (else unix: inline
 * blocks are refused, as over a unix socket blocks come as memfds), bit 1
 * re-sign the Hello's lease under the test key (so that the checks after
 * the MAC are reached); the rest is a stream of ember frames.
 *
 *   build-fuzz/tests/fuzz/fuzz_nam -max_total_time=60 tests/fuzz/corpus/nam
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "ember/ember_errors.h"
#include "frame.h"
#include "lease.h"
#include "sw/sw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_FRAME 65536
#define MAX_INPUTS 16           /* NAM_MAX_INPUTS (nam/engine/engine.h) */
#define MAX_BLOCKS 32           /* the model's table; the NAM's is a hash */
#define MAX_BLOCK_BYTES 100000  /* max_block_bytes */
#define MAX_TASKS 16
#define MAX_CELLS 20000         /* run_cpu only on small work */
#define NOW_MS 1700000000000ull
#define NODE "n1"
#define BLOCK_OPS 3             /* read, sync, restore: op_of_wire */

static const lease_key key = {{
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
    17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32}};

typedef struct block {
  uint64_t id;
  Ember__PutBlock *msg; /* adopted, as conn.c keeps inline blocks */
} block;

typedef struct conn {
  int is_tcp, resign, greeted, closed;
  block blocks[MAX_BLOCKS];
  size_t n_blocks;
  uint64_t bytes;
  uint64_t tasks[MAX_TASKS]; /* "in flight": until the stream ends */
  size_t n_tasks;
  uint64_t ended_lease;      /* a lease the GAM ended */
} conn;

static block *find_block(conn *c, uint64_t id) {
  for (size_t i = 0; i < c->n_blocks; i++)
    if (c->blocks[i].id == id) return &c->blocks[i];
  return NULL;
}

/* nam_lease_admit */
static int admit(conn *c, const Ember__Hello *h) {
  if (!h->lease) return EMBER_ELEASE;
  Ember__Lease l = *h->lease;
  uint8_t mac[crypto_auth_hmacsha256_BYTES];
  if (c->resign) {
    crypto_auth_hmacsha256(mac, l.body.data, l.body.len, key.bytes);
    l.mac.data = mac;
    l.mac.len = sizeof mac;
  }
  Ember__LeaseBody *body = NULL;
  char why[128] = "";
  int rc = lease_verify(&key, &l, NOW_MS, &body, why, sizeof why);
  if (rc) {
    if (rc != EMBER_ELEASE || body || !why[0]) abort();
    return rc;
  }
  if (!body || body->expires_unix_ms <= NOW_MS) abort();
  rc = EMBER_ELEASE;
  if (strcmp(body->node, NODE) == 0 && strcmp(body->label, "sw") == 0 &&
      body->lease_id != c->ended_lease)
    rc = 0;
  ember__lease_body__free_unpacked(body, NULL);
  return rc;
}

static void hello(conn *c, const Ember__Hello *m) {
  if (m->protocol_version != PROTO_VERSION) {
    c->closed = 1;
    return;
  }
  if (c->is_tcp && admit(c, m) != 0) {
    c->closed = 1; /* close_after_flush */
    return;
  }
  c->greeted = 1;
}

/* handle_put_block for the inline transport (the fd one needs a socket).
 * Returns 1 if m was adopted. */
static int put_block(conn *c, Ember__PutBlock *m) {
  if (m->transport == EMBER__PUT_BLOCK__TRANSPORT__FD) return 0; /* no fd */
  if (!c->is_tcp) return 0;
  if (m->block_id == 0 || m->size == 0) return 0;
  if (find_block(c, m->block_id)) return 0;
  if (c->bytes + m->size > MAX_BLOCK_BYTES) return 0;
  if (!m->has_data || m->data.len != m->size) return 0;
  if (c->n_blocks == MAX_BLOCKS) return 0;
  c->blocks[c->n_blocks].id = m->block_id;
  c->blocks[c->n_blocks].msg = m;
  c->n_blocks++;
  c->bytes += m->size;
  return 1;
}

static void release_block(conn *c, uint64_t id) {
  block *b = find_block(c, id);
  if (!b) return;
  c->bytes -= b->msg->size;
  ember__put_block__free_unpacked(b->msg, NULL);
  *b = c->blocks[--c->n_blocks];
}

static void run(const acc_descriptor *d, void *prep, const acc_block *in,
                size_t n) {
  if (d->work(prep) > MAX_CELLS) return;
  char err[512] = "";
  acc_output out = {NULL, 0};
  int rc = d->run_cpu(prep, in, n, NULL, &out, err, sizeof err);
  if (rc == 0) {
    ProtobufCMessage *res =
        protobuf_c_message_unpack(d->result_descriptor, NULL, out.size,
                                  out.data);
    if (!res) abort(); /* a result the client cannot read */
    protobuf_c_message_free_unpacked(res, NULL);
  } else if (!err[0]) {
    abort();
  }
  free(out.data);
}

/* handle_submit up to the engine: every check, then validate. */
static void submit(conn *c, const Ember__Submit *m) {
  if (m->task_id == 0) return;
  for (size_t i = 0; i < c->n_tasks; i++)
    if (c->tasks[i] == m->task_id) return;
  const acc_descriptor *acc = &acc_sw_descriptor; /* nam_accel_find */
  if (strcmp(m->accelerator, acc->name) != 0) return;
  if (m->n_input_blocks > MAX_INPUTS || m->n_output_blocks > ACC_MAX_OUTPUTS ||
      m->n_state_blocks > ACC_MAX_STATES)
    return;
  for (size_t i = 0; i < m->n_output_blocks + m->n_state_blocks; i++)
    if ((i < m->n_output_blocks ? m->output_blocks[i]
                                : m->state_blocks[i - m->n_output_blocks]) == 0)
      return;
  if (m->n_output_blocks && c->bytes >= MAX_BLOCK_BYTES) return;
  acc_block inputs[MAX_INPUTS];
  for (size_t i = 0; i < m->n_input_blocks; i++) {
    block *b = find_block(c, m->input_blocks[i]);
    if (!b) return; /* EMBER_ENOTFOUND (no out blocks in this model) */
    inputs[i].data = b->msg->data.data;
    inputs[i].size = b->msg->size;
  }
  char err[512] = "";
  void *prepared = NULL;
  int rc = acc->validate(m->has_params ? m->params.data : NULL,
                         m->has_params ? m->params.len : 0, inputs,
                         m->n_input_blocks, &prepared, err, sizeof err);
  if (rc) {
    if (prepared || !err[0]) abort();
    return;
  }
  if (m->n_output_blocks == 0 && m->n_state_blocks == 0)
    run(acc, prepared, inputs, m->n_input_blocks);
  acc->release(prepared);
  if (c->n_tasks < MAX_TASKS) c->tasks[c->n_tasks++] = m->task_id;
}

static void handle_frame(conn *c, const proto_frame *f) {
  if (!proto_descriptor(f->type)) return; /* answered, the stream goes on */
  ProtobufCMessage *m = proto_unpack(f);
  if (!m) {
    if (!c->greeted) c->closed = 1;
    return;
  }
  if (!c->greeted && f->type != EMBER__MSG_TYPE__MSG_HELLO) {
    c->closed = 1;
    protobuf_c_message_free_unpacked(m, NULL);
    return;
  }
  int adopted = 0;
  switch (f->type) {
  case EMBER__MSG_TYPE__MSG_HELLO:
    if (!c->greeted) hello(c, (Ember__Hello *)m);
    break;
  case EMBER__MSG_TYPE__MSG_PUT_BLOCK:
    adopted = put_block(c, (Ember__PutBlock *)m);
    break;
  case EMBER__MSG_TYPE__MSG_RELEASE_BLOCK:
    release_block(c, ((Ember__ReleaseBlock *)m)->block_id);
    break;
  case EMBER__MSG_TYPE__MSG_SUBMIT: submit(c, (Ember__Submit *)m); break;
  case EMBER__MSG_TYPE__MSG_CANCEL: break; /* a task id, looked up */
  case EMBER__MSG_TYPE__MSG_BLOCK_OP: {
    const Ember__BlockOp *op = (Ember__BlockOp *)m;
    if ((unsigned)op->op >= BLOCK_OPS) break; /* EPROTO */
    (void)find_block(c, op->block_id);
    break;
  }
  default:
    break; /* not a message a client sends: EPROTO, the stream goes on */
  }
  if (!adopted) protobuf_c_message_free_unpacked(m, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  conn c;
  memset(&c, 0, sizeof c);
  c.is_tcp = data[0] & 1;
  c.resign = (data[0] >> 1) & 1;
  c.ended_lease = 7;
  proto_reader r;
  proto_reader_init(&r, MAX_FRAME);
  proto_frame f;
  int rc = 0;
  if (proto_reader_feed(&r, data + 1, size - 1) == 0)
    while (!c.closed && (rc = proto_reader_next(&r, &f)) == 1) {
      if (f.len > MAX_FRAME) abort();
      handle_frame(&c, &f);
    }
  if (rc < 0 && rc != EMBER_ETOOBIG) abort();
  proto_reader_free(&r);
  while (c.n_blocks) release_block(&c, c.blocks[0].id);
  return 0;
}
