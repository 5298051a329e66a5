/*
 * test_lease_binding - what a lease lets its holder do, with a real
 * ember-gam and ember-nam; the apps are raw protocol clients with key pairs
 * of their own (proto/lease_proof.h):
 *   - bound to the app: another process presenting an app's lease is
 *     refused (its own key's proof, or no proof); the app is admitted;
 *   - scoped to its label: a lease for big-memory (a label naming no
 *     accelerator) cannot run sw; one for sw@fpga-emu cannot ask for cpu;
 *     one for sw can submit sw;
 *   - an app killed with -9: after app_grace the GAM ends its leases and
 *     the NAM drops the connection holding one with ELEASE;
 *   - more than 1,024 ended leases are all still refused at the NAM.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "gam_harness.h"
#include "harness.h"
#include "lease.h"
#include "lease_proof.h"
#include "raw_conn.h"

#define APP_GRACE_MS 1000
#define ENDED_WANTED 1100 /* past the old ring of 1,024 */
#define APPS_AT_ONCE 50

static gam_proc gam;
static nam_proc nam;
static pid_t main_pid;

static void stop_daemons(void) {
  if (getpid() != main_pid) return; /* a forked child failing */
  if (nam.pid > 0) nam_kill9(&nam);
  if (gam.pid > 0) gam_kill9(&gam);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- apps: raw GAM connections with a key pair each -------------------- */

typedef struct app {
  int fd;
  uint8_t pk[LEASE_APP_PK_BYTES], sk[LEASE_APP_SK_BYTES];
  uint64_t app_id;
} app;

typedef struct held_lease {
  Ember__Lease lease;  /* body and mac malloc'd */
  uint64_t id;
} held_lease;

static void app_open(app *a) {
  a->fd = gam_connect(&gam);
  CHECK(a->fd >= 0);
  CHECK_EQ(lease_app_keypair(a->pk, a->sk), 0);
}

static void app_ask(app *a, const char *label) {
  Ember__Acquire q = EMBER__ACQUIRE__INIT;
  q.app = "binding-test";
  q.label = (char *)label;
  q.count = 1;
  q.has_wait_ms = 1;
  q.wait_ms = 20000;
  q.has_app_key = 1;
  q.app_key.data = a->pk;
  q.app_key.len = sizeof a->pk;
  CHECK(gam_send(a->fd, EMBER__MSG_TYPE__MSG_ACQUIRE, &q.base) == 0);
}

/* The Allocation for a's Acquire: its one lease, copied into out. */
static void app_granted(app *a, held_lease *out) {
  ProtobufCMessage *m =
      gam_recv_type(a->fd, 30000, EMBER__MSG_TYPE__MSG_ALLOCATION);
  CHECK(m != NULL);
  const Ember__Allocation *al = (const Ember__Allocation *)m;
  CHECK_EQ(al->n_grants, 1);
  a->app_id = al->app_id;
  const Ember__Lease *l = al->grants[0]->lease;
  ember__lease__init(&out->lease);
  out->lease.body.data = malloc(l->body.len);
  out->lease.mac.data = malloc(l->mac.len);
  CHECK(out->lease.body.data && out->lease.mac.data);
  memcpy(out->lease.body.data, l->body.data, l->body.len);
  memcpy(out->lease.mac.data, l->mac.data, l->mac.len);
  out->lease.body.len = l->body.len;
  out->lease.mac.len = l->mac.len;
  out->id = al->grants[0]->lease_id;
  protobuf_c_message_free_unpacked(m, NULL);
}

/* Give everything back: the app ends, its connection may acquire again. */
static void app_release(app *a) {
  Ember__Release r = EMBER__RELEASE__INIT;
  r.app_id = a->app_id;
  CHECK(gam_send(a->fd, EMBER__MSG_TYPE__MSG_RELEASE, &r.base) == 0);
}

static void acquire(app *a, const char *label, held_lease *out) {
  app_ask(a, label);
  app_granted(a, out);
}

/* ---- at the NAM --------------------------------------------------------- */

/* Submit sw (requiring platform, "" for any) on an admitted connection:
 * 1 when the NAM denies it for the lease (EDENIED, printed), else 0. */
static int sw_denied(raw_conn *r, const char *platform) {
  static uint64_t task_id;
  Ember__Submit s = EMBER__SUBMIT__INIT;
  s.task_id = ++task_id;
  s.accelerator = "sw";
  s.platform = (char *)platform;
  raw_send(r, EMBER__MSG_TYPE__MSG_SUBMIT, &s.base, -1);
  uint8_t type;
  ProtobufCMessage *m = raw_recv(r, &type, 10000);
  CHECK(m != NULL);
  int denied = 0;
  if (type == EMBER__MSG_TYPE__MSG_ERROR) {
    const Ember__Error *e = (const Ember__Error *)m;
    denied = e->code == EMBER_EDENIED;
    printf("  Submit sw%s%s: Error %s: %s\n", platform[0] ? " on " : "",
           platform, ember_errname(e->code), e->message);
  } else {
    printf("  Submit sw%s%s: %s\n", platform[0] ? " on " : "", platform,
           proto_type_name(type));
  }
  protobuf_c_message_free_unpacked(m, NULL);
  return denied;
}

/* Another process that has the app's lease bytes but not its key. */
static void replay_in_child(const held_lease *h) {
  fflush(stdout); /* once, not once per process */
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    uint8_t pk[LEASE_APP_PK_BYTES], sk[LEASE_APP_SK_BYTES];
    CHECK_EQ(lease_app_keypair(pk, sk), 0);
    raw_conn r;
    raw_open_tcp(&r, nam.port);
    raw_check_error(raw_hello_proved(&r, &h->lease, sk, 5000), EMBER_ELEASE,
                    "proof does not match");
    raw_expect_closed(&r, 5000);
    raw_close(&r);
    /* no proof at all: straight to work */
    raw_open_tcp(&r, nam.port);
    CHECK(raw_hello(&r, PROTO_VERSION, &h->lease, 5000) == NULL);
    CHECK(r.challenged);
    Ember__ListAccelerators la = EMBER__LIST_ACCELERATORS__INIT;
    raw_send(&r, EMBER__MSG_TYPE__MSG_LIST_ACCELERATORS, &la.base, -1);
    raw_expect_error(&r, EMBER_ELEASE, "LeaseProof must follow", 5000);
    raw_expect_closed(&r, 5000);
    raw_close(&r);
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  CHECK_EQ(waitpid(pid, &status, 0), pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_bound_and_scoped(void) {
  app a;
  app_open(&a);
  held_lease sw;
  acquire(&a, "sw", &sw);
  printf("replaying lease %" PRIu64 " from another process:\n", sw.id);
  replay_in_child(&sw);
  raw_conn r;
  raw_open_tcp(&r, nam.port);
  raw_greet_proved(&r, &sw.lease, a.sk, 5000);
  CHECK(!sw_denied(&r, ""));
  raw_close(&r);
  app_release(&a);
  printf("the app itself is admitted and may submit sw\n");

  printf("scoped to the label:\n");
  held_lease big;
  acquire(&a, "big-memory", &big);
  raw_open_tcp(&r, nam.port);
  raw_greet_proved(&r, &big.lease, a.sk, 5000);
  CHECK(sw_denied(&r, ""));
  CHECK(sw_denied(&r, "cpu"));
  raw_close(&r);
  app_release(&a);
  held_lease fpga;
  acquire(&a, "sw@fpga-emu", &fpga);
  raw_open_tcp(&r, nam.port);
  raw_greet_proved(&r, &fpga.lease, a.sk, 5000);
  CHECK(sw_denied(&r, "cpu"));
  CHECK(!sw_denied(&r, "fpga-emu"));
  raw_close(&r);
  app_release(&a);
  close(a.fd);
  lease_clear(&sw.lease);
  lease_clear(&big.lease);
  lease_clear(&fpga.lease);
}

/* ---- an app killed with -9 -------------------------------------------- */

static void write_all(int fd, const void *p, size_t n) {
  CHECK(write(fd, p, n) == (ssize_t)n);
}

static void read_all(int fd, void *p, size_t n) {
  for (size_t got = 0; got < n;) {
    ssize_t k = read(fd, (uint8_t *)p + got, n - got);
    CHECK(k > 0);
    got += (size_t)k;
  }
}

static void test_app_killed(void) {
  int pipefd[2];
  CHECK_EQ(pipe(pipefd), 0);
  fflush(stdout);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) { /* the app: acquires, hands its lease and key over, waits */
    close(pipefd[0]);
    app a;
    app_open(&a);
    held_lease h;
    acquire(&a, "sw", &h);
    uint32_t lens[2] = {(uint32_t)h.lease.body.len, (uint32_t)h.lease.mac.len};
    write_all(pipefd[1], lens, sizeof lens);
    write_all(pipefd[1], h.lease.body.data, lens[0]);
    write_all(pipefd[1], h.lease.mac.data, lens[1]);
    write_all(pipefd[1], a.sk, sizeof a.sk);
    write_all(pipefd[1], &h.id, sizeof h.id);
    for (;;) pause();
  }
  close(pipefd[1]);
  uint32_t lens[2];
  read_all(pipefd[0], lens, sizeof lens);
  CHECK(lens[0] < 4096 && lens[1] < 4096);
  held_lease h;
  ember__lease__init(&h.lease);
  h.lease.body.data = malloc(lens[0]);
  h.lease.mac.data = malloc(lens[1]);
  CHECK(h.lease.body.data && h.lease.mac.data);
  h.lease.body.len = lens[0];
  h.lease.mac.len = lens[1];
  uint8_t sk[LEASE_APP_SK_BYTES];
  read_all(pipefd[0], h.lease.body.data, lens[0]);
  read_all(pipefd[0], h.lease.mac.data, lens[1]);
  read_all(pipefd[0], sk, sizeof sk);
  read_all(pipefd[0], &h.id, sizeof h.id);
  close(pipefd[0]);

  raw_conn r; /* the app's NAM connection, held here past its death */
  raw_open_tcp(&r, nam.port);
  raw_greet_proved(&r, &h.lease, sk, 5000);
  CHECK_EQ(kill(pid, SIGKILL), 0);
  CHECK_EQ(waitpid(pid, NULL, 0), pid);
  double t0 = now_s();
  char text[64];
  snprintf(text, sizeof text, "lease %" PRIu64 " ended", h.id);
  raw_expect_error(&r, EMBER_ELEASE, text, 20000);
  raw_expect_closed(&r, 5000);
  raw_close(&r);
  printf("app killed with -9: lease %" PRIu64 " ended at the NAM %.2f s "
         "later (app_grace %d ms)\n", h.id, now_s() - t0, APP_GRACE_MS);
  /* and it cannot come back */
  snprintf(text, sizeof text, "lease: %" PRIu64 " ended", h.id);
  raw_open_tcp(&r, nam.port);
  raw_check_error(raw_hello_proved(&r, &h.lease, sk, 5000), EMBER_ELEASE,
                  text);
  raw_close(&r);
  lease_clear(&h.lease);
}

/* ---- more ended leases than the old ring held ------------------------- */

static void test_many_ended(void) {
  static app apps[APPS_AT_ONCE];
  held_lease *leases = calloc(ENDED_WANTED + APPS_AT_ONCE, sizeof *leases);
  uint8_t (*keys)[LEASE_APP_SK_BYTES] =
      calloc(ENDED_WANTED + APPS_AT_ONCE, sizeof *keys);
  CHECK(leases && keys);
  for (int i = 0; i < APPS_AT_ONCE; i++) app_open(&apps[i]);
  size_t n = 0;
  double t0 = now_s();
  while (n < ENDED_WANTED) {
    for (int i = 0; i < APPS_AT_ONCE; i++) app_ask(&apps[i], "sw");
    for (int i = 0; i < APPS_AT_ONCE; i++) {
      memcpy(keys[n], apps[i].sk, sizeof keys[n]);
      app_granted(&apps[i], &leases[n++]);
    }
    for (int i = 0; i < APPS_AT_ONCE; i++) app_release(&apps[i]);
  }
  /* the NAM hears of the last ends in a HeartbeatAck */
  json_t *node = gam_node(&gam, "n1");
  CHECK(node != NULL);
  json_int_t beats = json_integer_value(json_object_get(node, "heartbeats"));
  json_decref(node);
  for (int i = 0; i < 400; i++) {
    node = gam_node(&gam, "n1");
    json_int_t now = json_integer_value(json_object_get(node, "heartbeats"));
    json_decref(node);
    if (now >= beats + 4) break;
    usleep(25 * 1000);
  }
  printf("%zu leases granted and released in %.1f s\n", n, now_s() - t0);
  size_t refused = 0;
  for (size_t i = 0; i < n; i++) {
    char text[64];
    snprintf(text, sizeof text, "lease: %" PRIu64 " ended", leases[i].id);
    raw_conn r;
    raw_open_tcp(&r, nam.port);
    Ember__Error *e = raw_hello_proved(&r, &leases[i].lease, keys[i], 5000);
    if (e && e->code == EMBER_ELEASE && strstr(e->message, text)) refused++;
    else
      fprintf(stderr, "lease %" PRIu64 " (the %zu-th ended): %s\n",
              leases[i].id, i + 1, e ? e->message : "admitted");
    if (e) protobuf_c_message_free_unpacked(&e->base, NULL);
    raw_close(&r);
    lease_clear(&leases[i].lease);
  }
  printf("ended leases refused at the NAM: %zu of %zu\n", refused, n);
  CHECK_EQ(refused, n);
  for (int i = 0; i < APPS_AT_ONCE; i++) close(apps[i].fd);
  free(leases);
  free(keys);
}

int main(void) {
  main_pid = getpid();
  signal(SIGPIPE, SIG_IGN);
  atexit(stop_daemons);
  char grace[64];
  snprintf(grace, sizeof grace, "app_grace=%dms", APP_GRACE_MS);
  const char *gsets[] = {"heartbeat_interval=50ms", "lost_after=200",
                         "slots_per_node=0", grace, NULL};
  CHECK(gam_start(&gam, gsets) == 0);
  char gam_set[96], key_set[400];
  snprintf(gam_set, sizeof gam_set, "gam=%s", gam.addr);
  snprintf(key_set, sizeof key_set, "cluster_key_file=%s", gam.key_path);
  const char *sets[] = {"node_name=n1", gam_set, key_set,
                        "labels=sw, sw@fpga-emu, big-memory",
                        "opencl.enabled=false", NULL};
  CHECK_EQ(nam_start(&nam, sets), 0);
  json_t *n1 = NULL;
  for (int i = 0; i < 200; i++) {
    n1 = gam_node(&gam, "n1");
    if (n1 && json_has_string(json_object_get(n1, "labels"), "big-memory"))
      break;
    json_decref(n1);
    n1 = NULL;
    usleep(50 * 1000);
  }
  CHECK(n1 != NULL);
  json_decref(n1);

  test_bound_and_scoped();
  test_app_killed();
  test_many_ended();

  CHECK_EQ(nam_stop(&nam), 0);
  nam_cleanup(&nam);
  CHECK_EQ(gam_stop(&gam), 0);
  gam_cleanup(&gam);
  printf("4 passed, 0 failed\n");
  return 0;
}
