/*
 * test_nam_gam_link - the NAM's side of the cluster, with real daemons:
 *   - leases: a TCP client with no lease, a forged, altered or expired one,
 *     one for another node or for a label the node does not serve is
 *     refused with Error ELEASE saying why, and the NAM carries on; a
 *     valid lease (signed here with the same key file) is accepted (tasks
 *     through a lease run below, with the GAM); a connection whose lease
 *     expires is closed with ELEASE;
 *   - a NAM whose GAM is not there serves its local clients and keeps
 *     retrying (its log and metrics say so), and stops cleanly;
 *   - with a real ember-gam: the NAM registers and heartbeats (labels,
 *     platforms, load, FPGA bitstreams at /v1/nodes), libember's
 *     ember_cluster_acquire gets the node and runs tasks there through the
 *     lease, and when the GAM ends the lease (drain) the app is told, the
 *     NAM drops the client with ELEASE, and the tasks fall back to the CPU;
 *   - impostors: raw connections that Register n1 under another address
 *     while the real NAM heartbeats (no auth, a forged MAC, a MAC answering
 *     another challenge, the right key while n1's connection is live) are
 *     refused and logged, and n1 keeps its address and heartbeats.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frame.h"
#include "gam_harness.h"
#include "harness.h"
#include "lease.h"
#include "lease_proof.h"
#include "node_auth.h"
#include "raw_conn.h"

/* Daemons still running when a check fails: stopped at exit. */
static nam_proc *running_nam;
static gam_proc *running_gam;

static void stop_daemons(void) {
  if (running_nam && running_nam->pid > 0) nam_kill9(running_nam);
  if (running_gam && running_gam->pid > 0) gam_kill9(running_gam);
}

/* ---- raw TCP clients of the NAM (raw_conn.h) ---------------------------- */

/* Hello with lease (NULL: none) must be refused for text, then closed. */
static void refused(int port, const Ember__Lease *lease, const char *text) {
  raw_conn r;
  raw_open_tcp(&r, port);
  raw_check_error(raw_hello(&r, PROTO_VERSION, lease, 5000), EMBER_ELEASE,
                  text);
  raw_expect_closed(&r, 5000);
  raw_close(&r);
}

/* ---- leases ------------------------------------------------------------ */

/* This test's app key pair: the leases it signs are bound to app_pk. */
static uint8_t app_pk[LEASE_APP_PK_BYTES], app_sk[LEASE_APP_SK_BYTES];

static void sign(const lease_key *key, const char *node, const char *label,
                 int64_t expires_in_ms, uint64_t id, Ember__Lease *out) {
  Ember__LeaseBody b = EMBER__LEASE_BODY__INIT;
  b.has_app_key = 1;
  b.app_key.data = app_pk;
  b.app_key.len = sizeof app_pk;
  uint64_t now = lease_now_unix_ms();
  b.lease_id = id;
  b.app_id = 1;
  b.app = "test";
  b.node = (char *)node;
  b.label = (char *)label;
  b.issued_unix_ms = now - 1000;
  b.expires_unix_ms = (uint64_t)((int64_t)now + expires_in_ms);
  CHECK_EQ(lease_sign(key, &b, out), 0);
}

static int log_contains(const char *path, const char *text) {
  FILE *f = fopen(path, "r");
  char line[1024];
  int found = 0;
  while (f && !found && fgets(line, sizeof line, f)) found = strstr(line, text) != NULL;
  if (f) fclose(f);
  return found;
}

/* One HTTP/1.0 GET on 127.0.0.1:port: the body (malloc'd) or NULL. */
static char *http_get(int port, const char *path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    if (fd >= 0) close(fd);
    return NULL;
  }
  char req[256];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\n\r\n", path);
  CHECK(write(fd, req, (size_t)n) == n);
  size_t len = 0, cap = 1 << 16;
  char *buf = malloc(cap);
  ssize_t got;
  while (buf && (got = read(fd, buf + len, cap - len - 1)) > 0) {
    len += (size_t)got;
    if (len + 1 == cap) buf = realloc(buf, cap *= 2);
  }
  close(fd);
  CHECK(buf != NULL);
  buf[len] = '\0';
  return buf;
}

/* The value of a metric sample written exactly as series, or -1. */
static double metric(int port, const char *series) {
  char *text = http_get(port, "/metrics");
  double v = -1;
  size_t n = strlen(series);
  for (const char *line = text; line && *line;) {
    if (strncmp(line, series, n) == 0 && line[n] == ' ') {
      v = strtod(line + n + 1, NULL);
      break;
    }
    line = strchr(line, '\n');
    if (line) line++;
  }
  free(text);
  return v;
}

/* sw through client c; returns the tasks that fell back (all results are
 * checked against the reference). */
static size_t align_checked(ember_client *c, const pair_set *ps,
                            const ember_sw_result *want) {
  ember_sw_params params;
  ember_sw_params_default(&params);
  params.pairs_per_task = 8;
  ember_sw_result *got = calloc(ps->n, sizeof *got);
  ember_sw_report rep = {.size = sizeof rep};
  int rc = ember_sw_align(c, &params, ps->queries, ps->refs, ps->n, got, &rep,
                          NULL, NULL);
  if (rc) fprintf(stderr, "align: %s: %s\n", ember_strerror(rc), ember_last_error());
  CHECK_EQ(rc, 0);
  CHECK_EQ(results_compare(got, want, ps->n, "sw"), ps->n);
  free(got);
  return rep.tasks_fallback;
}

static void align_unix(nam_proc *nam, const pair_set *ps,
                       const ember_sw_result *want) {
  ember_client *c;
  ember_options o = {.client_name = "test_nam_gam_link", .no_fallback = 1};
  CHECK_EQ(ember_connect(nam->unix_addr, &o, &c), 0);
  CHECK_EQ(align_checked(c, ps, want), 0);
  ember_close(c);
}

static void test_leases(const pair_set *ps, const ember_sw_result *want) {
  char dir[] = "/tmp/ember-lease.XXXXXX", key_path[300], other_path[300];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(key_path, sizeof key_path, "%s/cluster.key", dir);
  snprintf(other_path, sizeof other_path, "%s/other.key", dir);
  char err[256];
  CHECK_EQ(lease_key_create(key_path, err, sizeof err), 0);
  CHECK_EQ(lease_key_create(other_path, err, sizeof err), 0);
  lease_key key, other;
  CHECK_EQ(lease_key_load(key_path, &key, err, sizeof err), 0);
  CHECK_EQ(lease_key_load(other_path, &other, err, sizeof err), 0);

  int mport = free_tcp_port();
  char key_set[400], metrics_set[64];
  snprintf(key_set, sizeof key_set, "cluster_key_file=%s", key_path);
  snprintf(metrics_set, sizeof metrics_set, "metrics_listen=127.0.0.1:%d", mport);
  const char *sets[] = {"node_name=n1", key_set, metrics_set,
                        "opencl.enabled=false", NULL};
  static nam_proc nam;
  running_nam = &nam;
  CHECK_EQ(nam_start(&nam, sets), 0);

  printf("leases refused:\n");
  Ember__Lease l = EMBER__LEASE__INIT;
  refused(nam.port, NULL, "lease: none");
  sign(&other, "n1", "sw", 60000, 1, &l);
  refused(nam.port, &l, "lease: bad signature");
  lease_clear(&l);
  sign(&key, "n1", "sw", 60000, 2, &l);
  l.body.data[l.body.len - 1] ^= 1; /* altered after signing */
  refused(nam.port, &l, "lease: bad signature");
  lease_clear(&l);
  sign(&key, "n1", "sw", -1000, 3, &l);
  refused(nam.port, &l, "lease: expired");
  lease_clear(&l);
  sign(&key, "n2", "sw", 60000, 4, &l);
  refused(nam.port, &l, "lease: for node n2, this is n1");
  lease_clear(&l);
  sign(&key, "n1", "gpu", 60000, 5, &l);
  refused(nam.port, &l, "lease: label gpu not served here");
  lease_clear(&l);
  CHECK_EQ(kill(nam.pid, 0), 0);
  CHECK_EQ(metric(mport, "ember_nam_leases_refused_total"), 6);
  align_unix(&nam, ps, want); /* unix clients need no lease */
  printf("the NAM carries on; unix clients need no lease\n");

  /* a valid lease, for the derived labels sw and sw@fpga-emu */
  sign(&key, "n1", "sw@fpga-emu", 60000, 6, &l);
  raw_conn r;
  raw_open_tcp(&r, nam.port);
  raw_greet_proved(&r, &l, app_sk, 5000);
  raw_close(&r);
  lease_clear(&l);
  sign(&key, "n1", "sw", 60000, 7, &l);
  raw_open_tcp(&r, nam.port);
  raw_greet_proved(&r, &l, app_sk, 5000);
  raw_close(&r);
  lease_clear(&l);
  CHECK(log_contains(nam.log_path, "presents lease 7 (app test, label sw)"));
  CHECK(log_contains(nam.log_path, "holds lease for label sw"));
  printf("valid leases accepted\n");

  /* a lease that expires while its client is connected */
  sign(&key, "n1", "sw", 1500, 8, &l);
  raw_open_tcp(&r, nam.port);
  raw_greet_proved(&r, &l, app_sk, 5000);
  raw_expect_error(&r, EMBER_ELEASE, "lease 8 expired", 10000);
  raw_expect_closed(&r, 5000);
  raw_close(&r);
  lease_clear(&l);
  printf("an expired lease's client is disconnected\n");

  CHECK_EQ(nam_stop(&nam), 0);
  nam_cleanup(&nam);
  unlink(key_path);
  unlink(other_path);
  rmdir(dir);
}

/* ---- no GAM ------------------------------------------------------------ */

static void test_gam_away(const pair_set *ps, const ember_sw_result *want) {
  int mport = free_tcp_port(), gport = free_tcp_port();
  char gam_set[64], metrics_set[64];
  snprintf(gam_set, sizeof gam_set, "gam=127.0.0.1:%d", gport); /* nobody */
  snprintf(metrics_set, sizeof metrics_set, "metrics_listen=127.0.0.1:%d", mport);
  /* a NAM that reports to a GAM holds the cluster key */
  char dir[] = "/tmp/ember-away.XXXXXX", key_path[300], key_set[400], err[256];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(key_path, sizeof key_path, "%s/cluster.key", dir);
  CHECK_EQ(lease_key_create(key_path, err, sizeof err), 0);
  snprintf(key_set, sizeof key_set, "cluster_key_file=%s", key_path);
  const char *sets[] = {"node_name=lonely", gam_set, metrics_set, key_set,
                        "opencl.enabled=false", NULL};
  static nam_proc nam;
  running_nam = &nam;
  CHECK_EQ(nam_start(&nam, sets), 0);
  align_unix(&nam, ps, want);
  double retries = 0;
  for (int i = 0; i < 150 && retries < 3; i++) {
    retries = metric(mport, "ember_nam_gam_reconnects_total");
    if (retries < 3) usleep(100 * 1000);
  }
  CHECK(retries >= 3);
  CHECK_EQ(metric(mport, "ember_nam_gam_connected"), 0);
  CHECK(log_contains(nam.log_path, "cannot reach the GAM"));
  CHECK(log_contains(nam.log_path, "retrying"));
  align_unix(&nam, ps, want);
  CHECK_EQ(nam_stop(&nam), 0); /* exits 0 with the link retrying */
  printf("GAM away: local clients served, %g retries so far, clean stop\n",
         retries);
  nam_cleanup(&nam);
  unlink(key_path);
  rmdir(dir);
}

/* ---- a real ember-gam -------------------------------------------------- */

static json_t *wait_node(const gam_proc *g, const char *id, int heartbeats) {
  for (int i = 0; i < 200; i++) {
    json_t *n = gam_node(g, id);
    if (n && strcmp(json_string_value(json_object_get(n, "state")), "up") == 0 &&
        json_integer_value(json_object_get(n, "heartbeats")) >= heartbeats)
      return n;
    json_decref(n);
    usleep(50 * 1000);
  }
  return NULL;
}

static int has_load_for(json_t *node, const char *acc) {
  json_t *load = json_object_get(node, "load"), *v;
  size_t i;
  json_array_foreach(load, i, v) {
    if (strcmp(json_string_value(json_object_get(v, "accelerator")), acc) == 0)
      return 1;
  }
  return 0;
}

static int has_fpga(json_t *node, const char *platform) {
  json_t *fpgas = json_object_get(node, "fpgas"), *v;
  size_t i;
  json_array_foreach(fpgas, i, v) {
    if (strcmp(json_string_value(json_object_get(v, "platform")), platform) == 0)
      return 1;
  }
  return 0;
}

/* One impostor's Register for n1: refused with Error code, then closed. */
static void impostor(const gam_proc *g, const char *what, int code) {
  uint8_t challenge[32];
  int fd = gam_connect_challenge(g, challenge);
  CHECK(fd >= 0);
  Ember__Register r = EMBER__REGISTER__INIT;
  r.node = "n1";
  r.address = "tcp:10.6.6.6:6666";
  uint8_t mac[NODE_AUTH_MAC_BYTES];
  if (strcmp(what, "live") == 0) {
    CHECK(gam_send_register(g, fd, challenge, &r) == 0);
  } else {
    if (strcmp(what, "forged") == 0) {
      memset(mac, 0x5a, sizeof mac);
    } else if (strcmp(what, "replayed") == 0) {
      lease_key key;
      char err[256];
      CHECK_EQ(lease_key_load(g->key_path, &key, err, sizeof err), 0);
      uint8_t other[32];
      memset(other, 7, sizeof other);  /* a challenge from another session */
      node_auth_mac(&key, other, "n1", mac);
    }
    r.has_auth = strcmp(what, "none") != 0;
    r.auth.data = mac;
    r.auth.len = sizeof mac;
    CHECK(gam_send(fd, EMBER__MSG_TYPE__MSG_REGISTER, &r.base) == 0);
  }
  uint8_t type = 0;
  ProtobufCMessage *m = gam_recv(fd, 5000, &type);
  CHECK(m && type == EMBER__MSG_TYPE__MSG_ERROR);
  const Ember__Error *e = (const Ember__Error *)m;
  printf("  impostor (%s): %s: %s\n", what, ember_errname(e->code),
         e->message);
  CHECK_EQ(e->code, code);
  protobuf_c_message_free_unpacked(m, NULL);
  CHECK(gam_recv(fd, 2000, &type) == NULL); /* and closed */
  close(fd);
}

static void test_impostors(const gam_proc *g, const char *want_addr) {
  json_t *n1 = gam_node(g, "n1");
  CHECK(n1 != NULL);
  json_int_t beats = json_integer_value(json_object_get(n1, "heartbeats"));
  json_decref(n1);
  printf("impostors registering n1 at tcp:10.6.6.6:6666:\n");
  impostor(g, "none", EMBER_EDENIED);
  impostor(g, "forged", EMBER_EDENIED);
  impostor(g, "replayed", EMBER_EDENIED);
  impostor(g, "live", EMBER_EBUSY);
  n1 = wait_node(g, "n1", (int)beats + 3);
  CHECK(n1 != NULL);
  const char *addr = json_string_value(json_object_get(n1, "address"));
  CHECK(addr && strcmp(addr, want_addr) == 0);
  printf("n1 keeps %s and heartbeats (%" JSON_INTEGER_FORMAT " -> %"
         JSON_INTEGER_FORMAT ")\n", addr, beats,
         json_integer_value(json_object_get(n1, "heartbeats")));
  json_decref(n1);
  CHECK(log_contains(g->log_path, "register of node 'n1' from 127.0.0.1 "
                     "refused: bad auth"));
  CHECK(log_contains(g->log_path, "refused: node n1 is registered by a live"));
}

static void test_with_gam(const pair_set *ps, const ember_sw_result *want) {
  static gam_proc g;
  running_gam = &g;
  const char *gsets[] = {"heartbeat_interval=200ms", "lost_after=5", NULL};
  CHECK(gam_start(&g, gsets) == 0);
  char gam_set[96], key_set[400];
  snprintf(gam_set, sizeof gam_set, "gam=%s", g.addr);
  snprintf(key_set, sizeof key_set, "cluster_key_file=%s", g.key_path);
  const char *sets[] = {"node_name=n1", gam_set, key_set,
                        "heartbeat_interval=1s", "labels=sw, sw@fpga-emu, fast",
                        "opencl.enabled=false", NULL};
  static nam_proc nam;
  running_nam = &nam;
  CHECK_EQ(nam_start(&nam, sets), 0);

  /* registered and heartbeating (at the GAM's 200 ms, not its own 1 s) */
  json_t *n1 = wait_node(&g, "n1", 5);
  CHECK(n1 != NULL);
  CHECK(json_has_string(json_object_get(n1, "labels"), "sw"));
  CHECK(json_has_string(json_object_get(n1, "labels"), "fast"));
  CHECK(json_has_string(json_object_get(n1, "platforms"), "fpga0"));
  CHECK(has_load_for(n1, "sw"));
  CHECK(has_fpga(n1, "fpga0"));
  char want_addr[80];
  snprintf(want_addr, sizeof want_addr, "tcp:127.0.0.1:%d", nam.port);
  CHECK(strcmp(json_string_value(json_object_get(n1, "address")), want_addr) == 0);
  printf("n1 registered at the GAM: %s, labels, platforms, load, fpgas, %" 
         JSON_INTEGER_FORMAT " heartbeats\n", want_addr,
         json_integer_value(json_object_get(n1, "heartbeats")));
  json_decref(n1);
  CHECK(log_contains(nam.log_path, "heartbeat interval 200 ms"));
  test_impostors(&g, want_addr);

  /* an app through libember */
  ember_cluster *cl;
  ember_cluster_options co = {.gam = g.addr, .app_name = "link-test",
                              .label = "sw", .count = 1, .wait_ms = 10000};
  int rc = ember_cluster_acquire(&co, &cl);
  if (rc) fprintf(stderr, "acquire: %s: %s\n", ember_strerror(rc), ember_last_error());
  CHECK_EQ(rc, 0);
  CHECK_EQ(ember_cluster_size(cl), 1);
  CHECK(strcmp(ember_cluster_node(cl, 0), "n1") == 0);
  uint64_t lease = ember_cluster_lease_id(cl, 0);
  CHECK(lease != 0);
  ember_client *c = ember_cluster_client(cl, 0);
  CHECK(ember_is_connected(c));
  CHECK_EQ(align_checked(c, ps, want), 0);
  CHECK(!ember_cluster_ended(cl, 0));
  printf("ember_cluster_acquire: n1, lease %" PRIu64 ", %zu pairs run there\n",
         lease, ps->n);

  /* a second connection on the same lease id, which the NAM must drop
   * (signed here with the cluster key: the NAM knows a lease by its id) */
  lease_key key;
  char err[256];
  CHECK_EQ(lease_key_load(g.key_path, &key, err, sizeof err), 0);
  Ember__Lease l = EMBER__LEASE__INIT;
  sign(&key, "n1", "sw", 60000, lease, &l);
  raw_conn held;
  raw_open_tcp(&held, nam.port);
  raw_greet_proved(&held, &l, app_sk, 5000);

  /* the GAM ends the lease: the app is told, the NAM drops the client */
  long status;
  json_decref(gam_http(&g, "POST", "/v1/nodes/n1/drain", GAM_TEST_TOKEN, &status));
  CHECK_EQ(status, 200);
  int ended = 0;
  for (int i = 0; i < 200 && !ended; i++) {
    ended = ember_cluster_ended(cl, 0);
    if (!ended) usleep(50 * 1000);
  }
  CHECK(ended);
  int told = 0; /* the NAM hears it in a HeartbeatAck */
  for (int i = 0; i < 200 && !told; i++) {
    told = log_contains(nam.log_path, "1 lease(s) ended");
    if (!told) usleep(50 * 1000);
  }
  CHECK(told);
  char text[64];
  snprintf(text, sizeof text, "lease %" PRIu64 " ended", lease);
  raw_expect_error(&held, EMBER_ELEASE, text, 5000);
  raw_expect_closed(&held, 5000);
  raw_close(&held);
  CHECK(log_contains(nam.log_path, "the GAM drained this node"));
  CHECK(!ember_is_connected(c));
  CHECK_EQ(align_checked(c, ps, want) > 0, 1); /* on the CPU fallback */
  /* the ended lease cannot come back */
  snprintf(text, sizeof text, "lease: %" PRIu64 " ended", lease);
  refused(nam.port, &l, text);
  lease_clear(&l);
  printf("drained: lease ended, the app told, the NAM refuses it, tasks fell "
         "back\n");
  ember_cluster_release(cl);

  /* nothing to be had: an error, with the reason */
  json_decref(gam_http(&g, "POST", "/v1/nodes/n1/undrain", GAM_TEST_TOKEN, &status));
  ember_cluster_options none = {.gam = g.addr, .label = "nope", .wait_ms = 300};
  rc = ember_cluster_acquire(&none, &cl);
  printf("acquire of an unknown label: %s: %s\n", ember_strerror(rc),
         ember_last_error());
  CHECK(rc < 0 && cl == NULL && ember_last_error()[0]);
  ember_cluster_options away = {.gam = "tcp:127.0.0.1:1", .label = "sw"};
  CHECK_EQ(ember_cluster_acquire(&away, &cl), EMBER_ECONNECT);

  CHECK_EQ(nam_stop(&nam), 0);
  nam_cleanup(&nam);
  CHECK_EQ(gam_stop(&g), 0);
  gam_cleanup(&g);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  atexit(stop_daemons);
  CHECK_EQ(lease_app_keypair(app_pk, app_sk), 0);
  pair_set ps;
  CHECK_EQ(pairs_load_dna(&ps, 48), 0);
  ember_sw_result *want = pairs_reference_default(&ps);
  test_leases(&ps, want);
  test_gam_away(&ps, want);
  test_with_gam(&ps, want);
  free(want);
  pairs_free(&ps);
  printf("3 passed, 0 failed\n");
  return 0;
}
