/*
 * test_gam_protocol.c - the real ember-gam driven through its protocol by
 * hand-made NAMs and apps, and through its admin API:
 *   - bad input: no Hello, garbage, an oversized frame, an unknown type, a
 *     malformed payload, heartbeats before registering, bad labels and
 *     counts, an unknown label: clear errors, the daemon keeps serving;
 *   - placement: leases signed with the cluster key for the right node and
 *     label; delay scheduling keeps a second label off a busy node;
 *   - admins removing a label and draining a node end leases (apps told);
 *   - a node that stops heartbeating is lost (apps told);
 *   - a node that reports an accelerator disabled loses that label, and
 *     gets it back when it recovers;
 *   - kill -9 and restart: nodes, labels, apps and leases intact, and lease
 *     ids never handed out twice.
 * The same scenarios with real ember-nam processes are in test_gam_cluster.
 */
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ember/ember_errors.h"
#include "frame.h"
#include "gam_harness.h"
#include "harness.h"
#include "lease.h"

typedef struct hand_nam {
  const char *id;
  int fd;
  uint64_t seq;
  const char *labels[4];
  size_t n_labels;
  const char *disabled[2];
  size_t n_disabled;
} hand_nam;

static void nam_register(const gam_proc *g, hand_nam *n) {
  uint8_t challenge[32];
  n->fd = gam_connect_challenge(g, challenge);
  CHECK(n->fd >= 0);
  Ember__Register r = EMBER__REGISTER__INIT;
  r.node = (char *)n->id;
  char addr[64];
  snprintf(addr, sizeof addr, "tcp:127.0.0.1:%d", 40000 + (int)n->id[1]);
  r.address = addr;
  r.labels = (char **)n->labels;
  r.n_labels = n->n_labels;
  CHECK(gam_send_register(g, n->fd, challenge, &r) == 0);
  uint8_t type = 0;
  ProtobufCMessage *m = gam_recv(n->fd, 5000, &type);
  if (m && type == EMBER__MSG_TYPE__MSG_ERROR)
    fprintf(stderr, "register: %s\n", ((Ember__Error *)m)->message);
  CHECK(m && type == EMBER__MSG_TYPE__MSG_HEARTBEAT_ACK);
  protobuf_c_message_free_unpacked(m, NULL);
}

/* One heartbeat; returns the ack (free it). */
static Ember__HeartbeatAck *beat(hand_nam *n) {
  Ember__Heartbeat hb = EMBER__HEARTBEAT__INIT;
  hb.node = (char *)n->id;
  hb.seq = ++n->seq;
  hb.labels = (char **)n->labels;
  hb.n_labels = n->n_labels;
  hb.disabled = (char **)n->disabled;
  hb.n_disabled = n->n_disabled;
  CHECK(gam_send(n->fd, EMBER__MSG_TYPE__MSG_HEARTBEAT, &hb.base) == 0);
  uint8_t type;
  ProtobufCMessage *m = gam_recv(n->fd, 5000, &type);
  CHECK(m && type == EMBER__MSG_TYPE__MSG_HEARTBEAT_ACK);
  Ember__HeartbeatAck *ack = (Ember__HeartbeatAck *)m;
  CHECK_EQ(ack->seq, n->seq);
  return ack;
}

static void beat_all(hand_nam *nams, size_t n) {
  for (size_t i = 0; i < n; i++)
    protobuf_c_message_free_unpacked(&beat(&nams[i])->base, NULL);
}

static int app_acquire(const gam_proc *g, const char *label, unsigned count) {
  int fd = gam_connect(g);
  CHECK(fd >= 0);
  Ember__Acquire a = EMBER__ACQUIRE__INIT;
  a.app = "test-app";
  a.label = (char *)label;
  a.count = count;
  static uint8_t app_key[32]; /* a public key: never used at a NAM here */
  a.has_app_key = 1;
  a.app_key.data = app_key;
  a.app_key.len = sizeof app_key;
  CHECK(gam_send(fd, EMBER__MSG_TYPE__MSG_ACQUIRE, &a.base) == 0);
  return fd;
}

static int readable(int fd, int ms) {
  struct pollfd pf = {.fd = fd, .events = POLLIN};
  return poll(&pf, 1, ms) == 1;
}

/* Heartbeat the nodes until the app's Allocation arrives. */
static Ember__Allocation *placed(int app, hand_nam *nams, size_t n) {
  for (int round = 0; round < 50; round++) {
    beat_all(nams, n);
    if (readable(app, 50)) {
      uint8_t type;
      ProtobufCMessage *m = gam_recv(app, 5000, &type);
      CHECK(m);
      if (type == EMBER__MSG_TYPE__MSG_ERROR)
        fprintf(stderr, "error: %s\n", ((Ember__Error *)m)->message);
      CHECK_EQ(type, EMBER__MSG_TYPE__MSG_ALLOCATION);
      return (Ember__Allocation *)m;
    }
  }
  fprintf(stderr, "no Allocation after 50 rounds of heartbeats\n");
  exit(1);
}

static Ember__Error *expect_error(int fd, int code) {
  Ember__Error *e =
      (Ember__Error *)gam_recv_type(fd, 5000, EMBER__MSG_TYPE__MSG_ERROR);
  CHECK(e);
  if (e->code != code)
    fprintf(stderr, "expected %s, got %s: %s\n", ember_errname(code),
            ember_errname(e->code), e->message);
  CHECK_EQ(e->code, code);
  return e;
}

static void healthy(const gam_proc *g) {
  long status;
  json_t *j = gam_http(g, "GET", "/healthz", NULL, &status);
  CHECK_EQ(status, 200);
  json_decref(j);
}

static void bad_input(const gam_proc *g) {
  /* no Hello first */
  int fd = gam_connect(g);
  CHECK(fd >= 0);
  close(fd);
  {
    uint8_t challenge[32];
    int s = gam_connect_challenge(g, challenge);
    /* garbage after the greeting: an unknown type, then a bad payload */
    uint8_t junk[] = {3, 0, 0, 0, 200, 1, 2, 3};
    CHECK(proto_send(s, junk, sizeof junk, NULL, 0) == 0);
    Ember__Error *e = expect_error(s, EMBER_EPROTO);
    CHECK(strstr(e->message, "unknown message type"));
    protobuf_c_message_free_unpacked(&e->base, NULL);
    uint8_t bad[] = {3, 0, 0, 0, EMBER__MSG_TYPE__MSG_REGISTER, 0xff, 0xff, 0xff};
    CHECK(proto_send(s, bad, sizeof bad, NULL, 0) == 0);
    protobuf_c_message_free_unpacked(&expect_error(s, EMBER_EFORMAT)->base, NULL);
    /* a heartbeat before registering */
    Ember__Heartbeat hb = EMBER__HEARTBEAT__INIT;
    hb.node = "ghost";
    CHECK(gam_send(s, EMBER__MSG_TYPE__MSG_HEARTBEAT, &hb.base) == 0);
    protobuf_c_message_free_unpacked(&expect_error(s, EMBER_EPROTO)->base, NULL);
    /* a bad label */
    Ember__Register r = EMBER__REGISTER__INIT;
    char *labels[] = {"no spaces please"};
    r.node = "n9";
    r.address = "tcp:127.0.0.1:1";
    r.labels = labels;
    r.n_labels = 1;
    CHECK(gam_send_register(g, s, challenge, &r) == 0);
    protobuf_c_message_free_unpacked(&expect_error(s, EMBER_EINVAL)->base, NULL);
    /* an oversized frame: error, then closed */
    uint8_t big[] = {0, 0, 0, 0x10, EMBER__MSG_TYPE__MSG_REGISTER};
    CHECK(proto_send(s, big, sizeof big, NULL, 0) == 0);
    protobuf_c_message_free_unpacked(&expect_error(s, EMBER_ETOOBIG)->base, NULL);
    uint8_t type;
    CHECK(gam_recv(s, 2000, &type) == NULL);
    close(s);
  }
  {
    /* no Hello */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)g->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(connect(s, (struct sockaddr *)&sa, sizeof sa) == 0);
    Ember__Acquire a = EMBER__ACQUIRE__INIT;
    a.app = "x";
    a.label = "sw";
    a.count = 1;
    CHECK(gam_send(s, EMBER__MSG_TYPE__MSG_ACQUIRE, &a.base) == 0);
    protobuf_c_message_free_unpacked(&expect_error(s, EMBER_EPROTO)->base, NULL);
    close(s);
  }
  {
    /* acquires that cannot be placed */
    int s = app_acquire(g, "nobody-has-this", 1);
    protobuf_c_message_free_unpacked(&expect_error(s, EMBER_ENOTFOUND)->base,
                                     NULL);
    close(s);
    s = app_acquire(g, "bad label", 1);
    protobuf_c_message_free_unpacked(&expect_error(s, EMBER_EINVAL)->base, NULL);
    close(s);
    s = app_acquire(g, "lr", 0);
    protobuf_c_message_free_unpacked(&expect_error(s, EMBER_EINVAL)->base, NULL);
    close(s);
    s = app_acquire(g, "lr", 99);
    protobuf_c_message_free_unpacked(&expect_error(s, EMBER_EINVAL)->base, NULL);
    close(s);
  }
  healthy(g);
}

static Ember__LeaseEnded *lease_ended(int app) {
  Ember__LeaseEnded *e = (Ember__LeaseEnded *)gam_recv_type(
      app, 5000, EMBER__MSG_TYPE__MSG_LEASE_ENDED);
  CHECK(e);
  return e;
}

static const char *node_state(const gam_proc *g, const char *id) {
  static char state[16];
  json_t *n = gam_node(g, id);
  CHECK(n);
  snprintf(state, sizeof state, "%s",
           json_string_value(json_object_get(n, "state")));
  json_decref(n);
  return state;
}

static int node_has_label(const gam_proc *g, const char *id, const char *l) {
  json_t *n = gam_node(g, id);
  CHECK(n);
  int has = json_has_string(json_object_get(n, "labels"), l);
  json_decref(n);
  return has;
}

int main(void) {
  gam_proc g;
  const char *sets[] = {"heartbeat_interval=200ms", "lost_after=3",
                        "delay_max_skips=4", NULL};
  CHECK(gam_start(&g, sets) == 0);
  hand_nam nams[3] = {
    {.id = "n1", .labels = {"lr", "km"}, .n_labels = 2},
    {.id = "n2", .labels = {"lr", "km"}, .n_labels = 2},
    {.id = "n3", .labels = {"lr", "km", "sw@fpga-emu"}, .n_labels = 3},
  };
  for (int i = 0; i < 3; i++) nam_register(&g, &nams[i]);
  bad_input(&g);

  /* an lr app placed and its lease checked with the cluster key */
  lease_key key;
  char err[256];
  CHECK(lease_key_load(g.key_path, &key, err, sizeof err) == 0);
  int app1 = app_acquire(&g, "lr", 1);
  Ember__Allocation *a1 = placed(app1, nams, 3);
  CHECK_EQ(a1->n_grants, 1);
  Ember__LeaseBody *body = NULL;
  CHECK(lease_verify(&key, a1->grants[0]->lease, lease_now_unix_ms(), &body,
                     err, sizeof err) == 0);
  CHECK(strcmp(body->node, a1->grants[0]->node) == 0);
  CHECK(strcmp(body->label, "lr") == 0);
  CHECK_EQ(body->lease_id, a1->grants[0]->lease_id);
  char lr_node[16];
  snprintf(lr_node, sizeof lr_node, "%s", body->node);
  uint64_t first_lease = body->lease_id;
  ember__lease_body__free_unpacked(body, NULL);
  /* a forged lease fails the check */
  a1->grants[0]->lease->body.data[0] ^= 1;
  CHECK(lease_verify(&key, a1->grants[0]->lease, lease_now_unix_ms(), &body,
                     err, sizeof err) == EMBER_ELEASE);

  /* delay: a km app goes to an idle node, not the lr one */
  int app2 = app_acquire(&g, "km", 2);
  Ember__Allocation *a2 = placed(app2, nams, 3);
  CHECK_EQ(a2->n_grants, 2);
  for (size_t i = 0; i < a2->n_grants; i++)
    CHECK(strcmp(a2->grants[i]->node, lr_node) != 0);
  fprintf(stderr, "lr on %s; km on %s and %s\n", lr_node, a2->grants[0]->node,
          a2->grants[1]->node);

  /* an admin removes lr from its node: the lr app is told */
  char path[128];
  long status;
  snprintf(path, sizeof path, "/v1/nodes/%s/labels/lr", lr_node);
  json_t *j = gam_http(&g, "DELETE", path, NULL, &status);
  CHECK_EQ(status, 401);
  json_decref(j);
  j = gam_http(&g, "DELETE", path, GAM_TEST_TOKEN, &status);
  CHECK_EQ(status, 200);
  json_decref(j);
  Ember__LeaseEnded *ended = lease_ended(app1);
  CHECK_EQ(ended->lease_id, first_lease);
  CHECK(strcmp(ended->reason, "label removed") == 0);
  protobuf_c_message_free_unpacked(&ended->base, NULL);
  CHECK(!node_has_label(&g, lr_node, "lr"));
  /* the NAM hears of it in its next ack */
  for (int i = 0; i < 3; i++)
    if (strcmp(nams[i].id, lr_node) == 0) {
      Ember__HeartbeatAck *ack = beat(&nams[i]);
      CHECK_EQ(ack->n_ended_leases, 1);
      CHECK_EQ(ack->ended_leases[0], first_lease);
      protobuf_c_message_free_unpacked(&ack->base, NULL);
    }
  j = gam_http(&g, "PUT", path, GAM_TEST_TOKEN, &status);
  CHECK_EQ(status, 200);
  json_decref(j);
  CHECK(node_has_label(&g, lr_node, "lr"));

  /* n3 reports its FPGA's sw disabled, then recovered */
  CHECK(node_has_label(&g, "n3", "sw@fpga-emu"));
  nams[2].disabled[0] = "sw@fpga-emu";
  nams[2].n_disabled = 1;
  beat_all(nams, 3);
  CHECK(!node_has_label(&g, "n3", "sw@fpga-emu"));
  nams[2].n_disabled = 0;
  beat_all(nams, 3);
  CHECK(node_has_label(&g, "n3", "sw@fpga-emu"));

  /* kill -9 and restart: everything there, ids not reused */
  json_t *before = gam_http(&g, "GET", "/v1/apps", NULL, &status);
  CHECK_EQ(status, 200);
  gam_kill9(&g);
  CHECK(gam_restart(&g) == 0);
  json_t *after = gam_http(&g, "GET", "/v1/apps", NULL, &status);
  CHECK_EQ(status, 200);
  /* "connected" differs (the apps' connections died with the GAM) */
  size_t i;
  json_t *app;
  json_array_foreach(json_object_get(after, "apps"), i, app)
      json_object_del(app, "connected");
  json_array_foreach(json_object_get(before, "apps"), i, app)
      json_object_del(app, "connected");
  if (!json_equal(before, after)) {
    char *b = json_dumps(before, 0), *a = json_dumps(after, 0);
    fprintf(stderr, "apps before: %s\nafter: %s\n", b, a);
    exit(1);
  }
  json_decref(before);
  json_decref(after);
  CHECK(strcmp(node_state(&g, "n1"), "up") == 0);
  CHECK(node_has_label(&g, lr_node, "lr"));
  for (int k = 0; k < 3; k++) {
    close(nams[k].fd);
    nams[k].seq = 0;
    nam_register(&g, &nams[k]);
  }
  close(app1);
  int app3 = app_acquire(&g, "lr", 1);
  Ember__Allocation *a3 = placed(app3, nams, 3);
  CHECK(a3->grants[0]->lease_id > a2->grants[0]->lease_id);
  CHECK(a3->grants[0]->lease_id > a2->grants[1]->lease_id);

  /* n2 goes silent: lost after 3 intervals, its leases end */
  int app4 = app_acquire(&g, "km", 3);
  Ember__Allocation *a4 = placed(app4, nams, 3);
  CHECK_EQ(a4->n_grants, 3);
  hand_nam alive[2] = {nams[0], nams[2]};
  for (int k = 0; k < 20 && strcmp(node_state(&g, "n2"), "lost") != 0; k++) {
    beat_all(alive, 2);
    usleep(100 * 1000);
  }
  CHECK(strcmp(node_state(&g, "n2"), "lost") == 0);
  ended = lease_ended(app4);
  CHECK(strcmp(ended->node, "n2") == 0);
  CHECK(strcmp(ended->reason, "node lost") == 0);
  protobuf_c_message_free_unpacked(&ended->base, NULL);

  /* drain n1: its leases end, nothing new goes there */
  j = gam_http(&g, "POST", "/v1/nodes/n1/drain", GAM_TEST_TOKEN, &status);
  CHECK_EQ(status, 200);
  json_t *drained = json_object_get(j, "node") ? json_object_get(j, "node") : j;
  CHECK(json_is_true(json_object_get(drained, "drained")));
  json_decref(j);
  ended = lease_ended(app4);
  CHECK(strcmp(ended->node, "n1") == 0);
  CHECK(strcmp(ended->reason, "drained") == 0);
  protobuf_c_message_free_unpacked(&ended->base, NULL);
  j = gam_http(&g, "POST", "/v1/nodes/n1/undrain", GAM_TEST_TOKEN, &status);
  CHECK_EQ(status, 200);
  json_decref(j);

  /* releasing everything ends the app */
  Ember__Release rel = EMBER__RELEASE__INIT;
  rel.app_id = a4->app_id;
  CHECK(gam_send(app4, EMBER__MSG_TYPE__MSG_RELEASE, &rel.base) == 0);
  rel.app_id = 987654;  /* not this connection's: refused, no app or not */
  CHECK(gam_send(app4, EMBER__MSG_TYPE__MSG_RELEASE, &rel.base) == 0);
  protobuf_c_message_free_unpacked(&expect_error(app4, EMBER_EDENIED)->base,
                                   NULL);
  healthy(&g);

  protobuf_c_message_free_unpacked(&a1->base, NULL);
  protobuf_c_message_free_unpacked(&a2->base, NULL);
  protobuf_c_message_free_unpacked(&a3->base, NULL);
  protobuf_c_message_free_unpacked(&a4->base, NULL);
  close(app2);
  close(app3);
  close(app4);
  for (int k = 0; k < 3; k++) close(nams[k].fd);
  CHECK_EQ(gam_stop(&g), 0);
  gam_cleanup(&g);
  printf("test_gam_protocol: ok\n");
  return 0;
}
