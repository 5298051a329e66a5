/*
 * test_gam_admin_hammer.c - the GAM core's lock discipline (gam/core.h)
 * under load: the real ember-gam while, at once,
 *   - three hand-made NAMs heartbeat as fast as they are answered (the loop
 *     thread: heartbeats, placement, ticks),
 *   - an app acquires, holds and releases leases over and over,
 *   - one admin reads every view (status, nodes, a node, apps, events,
 *     metrics) and another changes labels and drains nodes, which ends
 *     leases from libmicrohttpd's thread (the outbox, the writer),
 *   - SIGHUP reloads the configuration on the loop thread now and then.
 * Every request must succeed and the daemon must exit 0. Its value is in
 * the ThreadSanitizer build (-DEMBER_TSAN=ON): a data race in ember-gam is
 * reported in its log and makes it exit 66.
 */
#include <curl/curl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gam_harness.h"
#include "harness.h"

#define N_NAMS 3
#define BEATS 1000       /* per NAM: the length of the test */

static gam_proc gam;
static atomic_int stop;  /* the NAMs are done: the others finish */
static atomic_long requests, changes, placements;

/* ---- NAMs: register, then heartbeat with platforms, FPGAs and load */

static void *nam_thread(void *arg) {
  const char *id = arg;
  char *labels[] = {"sw", "plf", "sw@fpga-emu"};
  uint8_t challenge[32];
  int fd = gam_connect_challenge(&gam, challenge);
  CHECK(fd >= 0);
  char addr[64];
  snprintf(addr, sizeof addr, "tcp:127.0.0.1:%d", 41000 + id[1]);
  Ember__Register r = EMBER__REGISTER__INIT;
  r.node = (char *)id;
  r.address = addr;
  r.labels = labels;
  r.n_labels = 3;
  CHECK(gam_send_register(&gam, fd, challenge, &r) == 0);
  ProtobufCMessage *m =
      gam_recv_type(fd, 10000, EMBER__MSG_TYPE__MSG_HEARTBEAT_ACK);
  CHECK(m);
  protobuf_c_message_free_unpacked(m, NULL);

  char *platforms[] = {"cpu", "fpga0"};
  Ember__FpgaState fpga = EMBER__FPGA_STATE__INIT;
  fpga.platform = "fpga0";
  Ember__FpgaState *fpgas[] = {&fpga};
  Ember__AcceleratorLoad load = EMBER__ACCELERATOR_LOAD__INIT;
  load.accelerator = "sw";
  load.has_queued = load.has_utilization = 1;
  Ember__AcceleratorLoad *loads[] = {&load};
  for (uint64_t seq = 1; seq <= BEATS; seq++) {
    Ember__Heartbeat hb = EMBER__HEARTBEAT__INIT;
    hb.node = (char *)id;
    hb.seq = seq;
    hb.labels = labels;
    hb.n_labels = 3;
    hb.platforms = platforms;
    hb.n_platforms = 2;
    fpga.bitstream = seq % 2 ? "sw" : "plf";  /* reprogrammed every beat */
    hb.fpgas = fpgas;
    hb.n_fpgas = 1;
    load.queued = (uint32_t)(seq % 5);
    load.utilization = (double)(seq % 10) / 10;
    hb.load = loads;
    hb.n_load = 1;
    CHECK(gam_send(fd, EMBER__MSG_TYPE__MSG_HEARTBEAT, &hb.base) == 0);
    m = gam_recv_type(fd, 10000, EMBER__MSG_TYPE__MSG_HEARTBEAT_ACK);
    if (!m) fprintf(stderr, "%s: no ack for heartbeat %llu\n", id,
                    (unsigned long long)seq);
    CHECK(m);
    CHECK_EQ(((Ember__HeartbeatAck *)m)->seq, seq);
    protobuf_c_message_free_unpacked(m, NULL);
    usleep(2000);
  }
  close(fd);
  return NULL;
}

/* ---- an app: acquire, hold a moment, release, again */

static void *app_thread(void *arg) {
  while (!atomic_load(&stop)) {
    int fd = gam_connect(&gam);
    CHECK(fd >= 0);
    Ember__Acquire a = EMBER__ACQUIRE__INIT;
    a.app = "hammer-app";
    a.label = "sw";
    a.count = 1;
    a.has_wait_ms = 1;
    a.wait_ms = 300;
    static uint8_t app_key[32]; /* a public key: never used at a NAM here */
    a.has_app_key = 1;
    a.app_key.data = app_key;
    a.app_key.len = sizeof app_key;
    CHECK(gam_send(fd, EMBER__MSG_TYPE__MSG_ACQUIRE, &a.base) == 0);
    uint8_t type = 0;
    ProtobufCMessage *m = gam_recv(fd, 10000, &type);
    CHECK(m);  /* an Allocation, or an Error when no node offers sw now */
    uint64_t app_id = 0;
    if (type == EMBER__MSG_TYPE__MSG_ALLOCATION) {
      app_id = ((Ember__Allocation *)m)->app_id;
      atomic_fetch_add(&placements, 1);
    } else {
      CHECK_EQ(type, EMBER__MSG_TYPE__MSG_ERROR);
    }
    protobuf_c_message_free_unpacked(m, NULL);
    if (app_id) {
      /* hold it while the admins drain and relabel (LeaseEnded may come) */
      struct pollfd pf = {.fd = fd, .events = POLLIN};
      while (poll(&pf, 1, 20) == 1 && (m = gam_recv(fd, 1000, &type)))
        protobuf_c_message_free_unpacked(m, NULL);
      Ember__Release rel = EMBER__RELEASE__INIT;
      rel.app_id = app_id;
      CHECK(gam_send(fd, EMBER__MSG_TYPE__MSG_RELEASE, &rel.base) == 0);
    }
    close(fd);
  }
  return NULL;
}

/* ---- admins */

static void request(const char *method, const char *path, const char *token) {
  long status = 0;
  json_t *j = gam_http(&gam, method, path, token, &status);
  if (status != 200)
    fprintf(stderr, "%s %s: HTTP %ld\n", method, path, status);
  CHECK_EQ(status, 200);
  json_decref(j);
  atomic_fetch_add(&requests, 1);
}

static void *reader_thread(void *arg) {
  static const char *const paths[] = {
      "/v1/status", "/v1/nodes", "/v1/nodes/n1", "/v1/apps",
      "/v1/events?limit=20", "/healthz"};
  for (unsigned i = 0; !atomic_load(&stop); i++) {
    request("GET", paths[i % 6], NULL);
    if (i % 6 == 5) {  /* not JSON: the status is what counts */
      long status = 0;
      gam_http(&gam, "GET", "/metrics", NULL, &status);
      CHECK_EQ(status, 200);
    }
  }
  return NULL;
}

static void *writer_thread(void *arg) {
  char path[128];
  for (unsigned i = 0; !atomic_load(&stop); i++) {
    int node = 1 + (int)(i % N_NAMS);
    snprintf(path, sizeof path, "/v1/nodes/n%d/labels/extra", node);
    request("PUT", path, GAM_TEST_TOKEN);
    request("DELETE", path, GAM_TEST_TOKEN);
    /* removing a reported label ends its leases, from this thread */
    snprintf(path, sizeof path, "/v1/nodes/n%d/labels/sw", node);
    request("DELETE", path, GAM_TEST_TOKEN);
    request("PUT", path, GAM_TEST_TOKEN);
    snprintf(path, sizeof path, "/v1/nodes/n%d/drain", node);
    request("POST", path, GAM_TEST_TOKEN);
    snprintf(path, sizeof path, "/v1/nodes/n%d/undrain", node);
    request("POST", path, GAM_TEST_TOKEN);
    atomic_fetch_add(&changes, 6);
  }
  return NULL;
}

int main(void) {
  CHECK(curl_global_init(CURL_GLOBAL_DEFAULT) == 0);  /* before threads */
  const char *sets[] = {"heartbeat_interval=100ms", NULL};
  CHECK(gam_start(&gam, sets) == 0);

  static const char *const ids[N_NAMS] = {"n1", "n2", "n3"};
  pthread_t nams[N_NAMS], app, reader, writer;
  for (int i = 0; i < N_NAMS; i++)
    CHECK(pthread_create(&nams[i], NULL, nam_thread, (void *)ids[i]) == 0);
  /* the admins start once every node has registered */
  for (int i = 0; i < N_NAMS; i++) {
    json_t *n = NULL;
    for (int tries = 0; tries < 500 && !(n = gam_node(&gam, ids[i])); tries++)
      usleep(20000);
    CHECK(n);
    json_decref(n);
  }
  CHECK(pthread_create(&app, NULL, app_thread, NULL) == 0);
  CHECK(pthread_create(&reader, NULL, reader_thread, NULL) == 0);
  CHECK(pthread_create(&writer, NULL, writer_thread, NULL) == 0);
  for (int i = 0; i < 5; i++) {
    usleep(200000);
    CHECK(kill(gam.pid, SIGHUP) == 0);
  }
  for (int i = 0; i < N_NAMS; i++) pthread_join(nams[i], NULL);
  atomic_store(&stop, 1);
  pthread_join(app, NULL);
  pthread_join(reader, NULL);
  pthread_join(writer, NULL);

  printf("test_gam_admin_hammer: %d x %d heartbeats, %ld admin requests "
         "(%ld changes), %ld placements\n", N_NAMS, BEATS,
         atomic_load(&requests), atomic_load(&changes),
         atomic_load(&placements));
  CHECK(atomic_load(&changes) > 0);
  int rc = gam_stop(&gam);
  if (rc != 0)
    fprintf(stderr, "ember-gam exited %d (66: ThreadSanitizer found a "
            "race); its log: %s\n", rc, gam.log_path);
  CHECK_EQ(rc, 0);
  gam_cleanup(&gam);
  curl_global_cleanup();
  printf("ok\n");
  return 0;
}
