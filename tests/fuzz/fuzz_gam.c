/*
 * fuzz_gam.c - libFuzzer target for what ember-gam does with the frames
 * NAMs and apps send it and with admin API requests: the frame decoder
 * (proto/frame.c), the messages' protobuf-c unpacking and the core's own
 * validation and state changes (gam/core*.c: Register, Heartbeat,
 * Acquire, Release, liveness and placement, leases, the admin changes and
 * views), over an in-memory store (gam/store*.c, its writer thread). The
 * store lives for the whole run, as the daemon's does, and is emptied
 * after each input (a fresh store per input spent most of the time in
 * SQLite's schema set-up: about 200 inputs a second).
 *
 * Input: the first byte picks the policy (delay, naive, static); the rest
 * is a stream of ember frames (5-byte header, proto/frame.h), taken as
 * gam/server.c's handle_frame takes them: Hello first, a connection's role
 * (NAM after Register, app after Acquire), the same checks. Three frame
 * types that ember does not use drive the rest:
 *   0xF0 CONN  payload[0] % 4: later frames come on that connection
 *   0xF1 ADMIN "METHOD PATH[?limit=N]": an admin API request, routed as
 *              gam/admin_http.c's dispatch does it (bearer token assumed
 *              good; fuzz_admin_path covers the token check). The API takes
 *              no request body.
 *   0xF2 TICK  gam_core_tick, and payload[0] % 4: that connection closes
 *   0xF3 PROVE payload[0] % 8: a Release from this connection, with the
 *              proof (proto/lease_proof.h) under the harness's key k over
 *              this connection's challenge, for the app id in the next 8
 *              bytes (little-endian) and the lease ids after them (8 bytes
 *              each). An Acquire whose app_key starts with k < 8 and is 32
 *              bytes long gets key k's public key instead: the harness
 *              holds those apps' secret keys, as an app does its own.
 * Replies the core makes (HeartbeatAck, outbox frames for apps) must
 * unpack; admin views must serialise.
 *
 * App-scoped requests (a Release) must act only on the connection's own
 * app or on one whose key signed the proof: after every Release, every
 * other app keeps every lease it had; one that succeeded for an app not
 * the connection's carried a proof by that app's key; the lease ids it
 * named were all that app's; and a refusal for an app not the
 * connection's reads the same as one for an app that does not exist.
 *
 *   build-fuzz/tests/fuzz/fuzz_gam -max_total_time=60 tests/fuzz/corpus/gam
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <sodium.h>

#include "admin_routes.h"
#include "core.h"
#include "core_admin.h"
#include "core_internal.h"
#include "lease_proof.h"
#include "ember/ember_errors.h"
#include "frame.h"
#include "log.h"
#include "store.h"
#include "store_int.h"
#include "store_writer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define MAX_FRAME 8192
#define N_CONNS 4
#define T_CONN 0xF0
#define T_ADMIN 0xF1
#define T_TICK 0xF2
#define T_PROVE 0xF3
#define N_KEYS 8
#define MAX_LISTED 64

enum { ROLE_NONE, ROLE_NAM, ROLE_APP };

typedef struct conn {
  int greeted, role;
  char node[129];
  uint64_t app_id;
  uint8_t challenge[32];  /* its Welcome's: fixed per connection slot */
} conn;

/* The apps' key pairs the harness holds (from fixed seeds). */
static uint8_t key_pk[N_KEYS][LEASE_APP_PK_BYTES];
static uint8_t key_sk[N_KEYS][LEASE_APP_SK_BYTES];

/* ---- what a Release may change ------------------------------------------ */

/* Every app's leases before a Release. */
typedef struct app_view {
  uint64_t id;
  size_t n;
  uint64_t lease[MAX_LISTED];
  int more;                 /* held more than MAX_LISTED: counted only */
  uint8_t key[32];
  bool has_key;
} app_view;

static size_t snapshot(gam_core *core, app_view *v, size_t cap) {
  size_t n = 0;
  for (gam_app *a = core->apps; a && n < cap; a = a->next, n++) {
    v[n].id = a->id;
    v[n].n = a->n_leases;
    v[n].more = a->n_leases > MAX_LISTED;
    for (size_t i = 0; i < a->n_leases && i < MAX_LISTED; i++)
      v[n].lease[i] = a->leases[i]->id;
    memcpy(v[n].key, a->key, sizeof v[n].key);
    v[n].has_key = a->has_key;
  }
  return n;
}

static const app_view *view_of(const app_view *v, size_t n, uint64_t id) {
  for (size_t i = 0; i < n; i++)
    if (v[i].id == id) return &v[i];
  return NULL;
}

static bool holds(const app_view *v, uint64_t lease) {
  for (size_t i = 0; i < v->n && i < MAX_LISTED; i++)
    if (v->lease[i] == lease) return true;
  return false;
}

/* msg with every run of digits as one 'N'. */
static void shape(const char *msg, char *out, size_t len) {
  size_t o = 0;
  for (; *msg && o + 2 < len; msg++)
    if (*msg >= '0' && *msg <= '9') {
      if (o == 0 || out[o - 1] != 'N') out[o++] = 'N';
    } else {
      out[o++] = *msg;
    }
  out[o] = '\0';
}

#define MAX_APPS 256

/* A Release from c, checked against what it may do (see the top). */
static int release(gam_core *core, conn *c, const Ember__Release *r,
                   int proved_by, char *err, size_t err_len) {
  static app_view before[MAX_APPS], after[MAX_APPS];
  size_t nb = snapshot(core, before, MAX_APPS);
  bool complete = core->apps == NULL || nb < MAX_APPS;
  gam_requester who = {.app_id = c->app_id, .challenge = c->challenge};
  int rc = gam_core_release(core, &who, r, err, err_len);
  size_t na = snapshot(core, after, MAX_APPS);
  const app_view *target = view_of(before, nb, r->app_id);
  bool own = r->app_id != 0 && r->app_id == c->app_id;
  if (rc == 0) {
    if (!target && complete) abort();  /* released an app that was not */
    if (!own) {
      /* only the app's own key opens it */
      if (proved_by < 0 || !target || !target->has_key ||
          memcmp(target->key, key_pk[proved_by], 32) != 0)
        abort();
    }
    for (size_t i = 0; target && i < r->n_lease_ids; i++)
      if (!target->more && !holds(target, r->lease_ids[i]))
        abort();  /* ended a lease that was not the app's */
  }
  /* every other app keeps what it had */
  for (size_t i = 0; i < nb && complete; i++) {
    if (before[i].id == r->app_id) continue;
    const app_view *now = view_of(after, na, before[i].id);
    if (!now || now->n != before[i].n) abort();
    for (size_t k = 0; k < before[i].n && k < MAX_LISTED; k++)
      if (now->lease[k] != before[i].lease[k]) abort();
  }
  /* a refusal for an app not this connection's reads as for an absent one */
  if (!own && rc == EMBER_EDENIED) {
    Ember__Release absent = EMBER__RELEASE__INIT;
    absent.app_id = UINT64_MAX - 7;
    char err2[256] = "", a[256], b[256];
    if (gam_core_release(core, &who, &absent, err2, sizeof err2) !=
        EMBER_EDENIED)
      abort();
    shape(err, a, sizeof a);
    shape(err2, b, sizeof b);
    if (strcmp(a, b) != 0) abort();
  }
  if (!own && rc != 0 && rc != EMBER_EDENIED && proved_by < 0)
    abort();  /* anything else would tell the app exists */
  return rc;
}

static void check_outbox(gam_core *core) {
  gam_outbox_item *items = gam_core_take_outbox(core);
  for (gam_outbox_item *it = items; it; it = it->next) {
    proto_frame f = {.type = it->type, .payload = it->payload, .len = it->len};
    ProtobufCMessage *m = proto_unpack(&f);
    if (!m) abort(); /* the GAM sent an app what it cannot read */
    protobuf_c_message_free_unpacked(m, NULL);
  }
  gam_outbox_free(items);
}

/* A reply the GAM would send must be a valid message. */
static void check_reply(const ProtobufCMessage *m) {
  size_t n = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) return;
  protobuf_c_message_pack(m, buf);
  ProtobufCMessage *again =
      protobuf_c_message_unpack(m->descriptor, NULL, n, buf);
  if (!again) abort();
  protobuf_c_message_free_unpacked(again, NULL);
  free(buf);
}

/* conn_close: an app's connection that closes is an app gone. */
static void close_conn(gam_core *core, conn *c) {
  if (c->role == ROLE_APP && c->app_id)
    gam_core_app_disconnected(core, c->app_id);
  uint8_t ch[32];
  memcpy(ch, c->challenge, sizeof ch);
  memset(c, 0, sizeof *c); /* the next frame on it is a new connection's */
  ch[0]++;                 /* whose Welcome has a challenge of its own */
  memcpy(c->challenge, ch, sizeof ch);
}

static void handle_frame(gam_core *core, conn *c, const proto_frame *f) {
  char err[256] = "";
  if (!c->greeted && f->type != EMBER__MSG_TYPE__MSG_HELLO) {
    close_conn(core, c);
    return;
  }
  ProtobufCMessage *m = proto_unpack(f);
  if (!m) return;
  int rc = 0;
  switch (f->type) {
  case EMBER__MSG_TYPE__MSG_HELLO:
    if (c->greeted) break;
    if (((Ember__Hello *)m)->protocol_version == PROTO_VERSION) c->greeted = 1;
    else close_conn(core, c);
    break;
  case EMBER__MSG_TYPE__MSG_REGISTER: {
    const Ember__Register *r = (Ember__Register *)m;
    if (c->role == ROLE_APP) break;
    rc = gam_core_register(core, r, err, sizeof err);
    if (rc == 0) {
      c->role = ROLE_NAM;
      snprintf(c->node, sizeof c->node, "%s", r->node);
    }
    break;
  }
  case EMBER__MSG_TYPE__MSG_HEARTBEAT: {
    const Ember__Heartbeat *h = (Ember__Heartbeat *)m;
    if (c->role != ROLE_NAM || strcmp(c->node, h->node) != 0) break;
    Ember__HeartbeatAck ack;
    uint64_t need = 0;
    rc = gam_core_heartbeat(core, h, &ack, &need, err, sizeof err);
    if (rc == 0) {
      if (ack.seq != h->seq) abort();
      check_reply(&ack.base);
      if (need > gam_core_last_change(core)) abort();
    }
    gam_core_ack_clear(&ack);
    break;
  }
  case EMBER__MSG_TYPE__MSG_ACQUIRE: {
    if (c->role == ROLE_NAM || (c->role == ROLE_APP && c->app_id)) break;
    Ember__Acquire *q = (Ember__Acquire *)m;
    if (q->has_app_key && q->app_key.len == 32 && q->app_key.data[0] < N_KEYS)
      memcpy(q->app_key.data, key_pk[q->app_key.data[0]], 32);
    uint64_t id = 0;
    rc = gam_core_acquire(core, q, &id, err, sizeof err);
    if (rc == 0) {
      if (id == 0) abort();
      c->role = ROLE_APP;
      c->app_id = id;
    }
    break;
  }
  case EMBER__MSG_TYPE__MSG_RELEASE: {
    const Ember__Release *r = (Ember__Release *)m;
    if (c->role == ROLE_NAM) break;
    rc = release(core, c, r, -1, err, sizeof err);
    if (rc == 0 && r->n_lease_ids == 0 && r->app_id == c->app_id)
      c->app_id = 0;
    break;
  }
  default:
    break;
  }
  if (rc != 0 && err[0] == '\0') abort(); /* an error says why */
  protobuf_c_message_free_unpacked(m, NULL);
  check_outbox(core);
}

/* T_PROVE: a Release proven by key k (see the top). */
static void proved_release(gam_core *core, conn *c, const uint8_t *p,
                           size_t len) {
  if (!c->greeted || c->role == ROLE_NAM || len < 9) return;
  int k = p[0] % N_KEYS;
  uint64_t app_id = 0;
  for (int i = 0; i < 8; i++) app_id |= (uint64_t)p[1 + i] << (8 * i);
  uint64_t ids[MAX_LISTED];
  size_t n = 0;
  for (size_t o = 9; o + 8 <= len && n < MAX_LISTED; o += 8, n++) {
    ids[n] = 0;
    for (int i = 0; i < 8; i++) ids[n] |= (uint64_t)p[o + i] << (8 * i);
  }
  uint8_t proof[LEASE_PROOF_BYTES];
  lease_release_sign(key_sk[k], c->challenge, app_id, proof);
  Ember__Release r = EMBER__RELEASE__INIT;
  r.app_id = app_id;
  r.lease_ids = ids;
  r.n_lease_ids = n;
  r.has_proof = 1;
  r.proof.data = proof;
  r.proof.len = sizeof proof;
  char err[256] = "";
  int rc = release(core, c, &r, k, err, sizeof err);
  if (rc != 0 && err[0] == '\0') abort();
  if (rc == 0 && n == 0 && app_id == c->app_id) c->app_id = 0;
  check_outbox(core);
}

static void check_json(json_t *j) {
  if (!j) return; /* out of memory */
  char *text = json_dumps(j, JSON_COMPACT);
  if (!text) abort();
  free(text);
  json_decref(j);
}

/* "METHOD PATH[?limit=N]", as gam/admin_http.c's dispatch routes it. */
static void admin_request(gam_core *core, const uint8_t *p, size_t len) {
  char req[1024];
  if (len >= sizeof req) len = sizeof req - 1;
  memcpy(req, p, len);
  req[len] = '\0';
  char *path = strchr(req, ' ');
  if (!path) return;
  *path++ = '\0';
  char *query = strchr(path, '?');
  if (query) *query++ = '\0';
  gam_admin_unescape(path);
  const char *limit_text = NULL;
  if (query && strncmp(query, "limit=", 6) == 0) {
    gam_admin_unescape(query);
    limit_text = query + 6;
  }
  gam_admin_route r;
  char why[160];
  if (gam_admin_route_parse(path, &r, why, sizeof why) != 0) return;
  unsigned method = gam_admin_method(req);
  if (!(method & r.methods)) return;
  char err[256] = "";
  json_t *node = NULL;
  unsigned limit;
  int rc = 0;
  switch (r.id) {
  case GAM_ROUTE_HEALTHZ: break;
  case GAM_ROUTE_METRICS: {
    char *text = NULL;
    size_t n = 0;
    if (gam_core_metrics_text(core, &text, &n) == 0 && strlen(text) != n)
      abort();
    free(text);
    break;
  }
  case GAM_ROUTE_STATUS: check_json(gam_core_status_json(core)); break;
  case GAM_ROUTE_NODES: check_json(gam_core_nodes_json(core)); break;
  case GAM_ROUTE_APPS: check_json(gam_core_apps_json(core)); break;
  case GAM_ROUTE_EVENTS:
    if (gam_admin_events_limit(limit_text, &limit) == 0)
      check_json(gam_core_events_json(core, limit));
    break;
  case GAM_ROUTE_NODE:
    rc = gam_core_node_json(core, r.node, &node, err, sizeof err);
    check_json(node);
    break;
  case GAM_ROUTE_NODE_LABEL:
    if (!gam_label_valid(r.label)) break;
    rc = method == GAM_METHOD_PUT
             ? gam_core_label_add(core, r.node, r.label, err, sizeof err)
             : gam_core_label_remove(core, r.node, r.label, err, sizeof err);
    break;
  case GAM_ROUTE_NODE_DRAIN:
  case GAM_ROUTE_NODE_UNDRAIN:
    rc = gam_core_set_drained(core, r.node, r.id == GAM_ROUTE_NODE_DRAIN, err,
                              sizeof err);
    break;
  }
  if (rc != 0 && err[0] == '\0') abort();
  check_outbox(core);
}

static const gam_static_rule rules[] = {
    {"gpu", "n1"}, {"sw", "n2"}, {"cnn", "n1"}};

static gam_store *store;
static gam_writer *writer;

static void store_open(void) {
  char err[512];
  if (gam_store_open(":memory:", &store, err, sizeof err) != 0) abort();
  if (gam_writer_start(store, &writer, err, sizeof err) != 0) abort();
}

/* Once the input's changes are committed, empty every table; a writer
 * that failed (a full store, say) gets a fresh store. */
static void store_empty(void) {
  gam_writer_publish(writer);
  if (gam_writer_wait(writer, gam_writer_queued(writer)) != 0) {
    gam_writer_stop(writer);
    gam_store_close(store);
    store_open();
    return;
  }
  if (sqlite3_exec(store->db,
                   "DELETE FROM events; DELETE FROM leases; DELETE FROM apps;"
                   "DELETE FROM labels; DELETE FROM nodes;",
                   NULL, NULL, NULL) != SQLITE_OK)
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  log_threshold = LOG_LVL_ERR - 1; /* the core logs every change: quiet */
  if (sodium_init() < 0) abort();
  for (int k = 0; k < N_KEYS; k++) {
    uint8_t seed[crypto_sign_SEEDBYTES];
    memset(seed, 0x40 + k, sizeof seed);
    crypto_sign_seed_keypair(key_pk[k], key_sk[k], seed);
  }
  store_open();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  char err[512];
  gam_core *core = NULL;
  gam_core_options o = {0};
  o.policy.kind = (gam_policy_kind)(data[0] % 3);
  o.policy.delay_max_skips = data[0] & 0x10 ? 0 : 3;
  o.policy.rules = rules;
  o.policy.n_rules = sizeof rules / sizeof rules[0];
  o.heartbeat_interval_ms = 1000;
  o.lost_after = 3;
  o.slots_per_node = (data[0] >> 5) & 3; /* 0: no limit */
  o.lease_ttl_ms = 60000;
  o.acquire_timeout_ms = data[0] & 0x80 ? 0 : 5000;
  o.version = "fuzz";
  o.writer = writer;
  memset(o.key.bytes, 0x5a, sizeof o.key.bytes);
  if (gam_core_create(&o, store, &core, err, sizeof err) != 0) abort();

  conn conns[N_CONNS];
  memset(conns, 0, sizeof conns);
  for (int i = 0; i < N_CONNS; i++) memset(conns[i].challenge, 0xc0 + i, 32);
  conn *cur = &conns[0];
  proto_reader r;
  proto_reader_init(&r, MAX_FRAME);
  proto_frame f;
  if (proto_reader_feed(&r, data + 1, size - 1) == 0) {
    while (proto_reader_next(&r, &f) == 1) {
      if (f.type == T_CONN) {
        cur = &conns[f.len ? f.payload[0] % N_CONNS : 0];
      } else if (f.type == T_ADMIN) {
        admin_request(core, f.payload, f.len);
      } else if (f.type == T_PROVE) {
        proved_release(core, cur, f.payload, f.len);
      } else if (f.type == T_TICK) {
        gam_core_tick(core);
        if (f.len) close_conn(core, &conns[f.payload[0] % N_CONNS]);
        check_outbox(core);
      } else {
        handle_frame(core, cur, &f);
      }
    }
  }
  proto_reader_free(&r);
  for (size_t i = 0; i < N_CONNS; i++) close_conn(core, &conns[i]);
  gam_core_tick(core);
  check_outbox(core);
  check_json(gam_core_status_json(core));
  gam_core_destroy(core);
  store_empty();
  return 0;
}
