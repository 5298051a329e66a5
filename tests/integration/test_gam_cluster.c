/*
 * test_gam_cluster.c - one real ember-gam and three real ember-nam
 * processes on loopback:
 *   - the NAMs register and heartbeat; labels come from their accelerators,
 *     from --label flags and from the admin API;
 *   - apps acquiring by label are placed by affinity (delay): a second
 *     label stays off the node the first one uses;
 *   - kill -9 of a NAM holding a lease: node lost, lease ended, app told;
 *   - kill -9 and restart of the GAM: state intact, the NAMs come back by
 *     themselves;
 *   - a NAM whose FPGA keeps failing disables sw there: the GAM drops
 *     sw@fpga-emu from the node, and restores it once a probe succeeds
 *     after the board is healed (SIGHUP with fail_rate 0).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ember/ember_errors.h"
#include "frame.h"
#include "gam_harness.h"
#include "harness.h"

/* Poll the admin API until cond holds for node id (10 s). */
typedef int (*node_cond)(json_t *node, const void *arg);

static int wait_node(const gam_proc *g, const char *id, node_cond cond,
                     const void *arg) {
  for (int i = 0; i < 200; i++) {
    json_t *n = gam_node(g, id);
    int ok = n && cond(n, arg);
    json_decref(n);
    if (ok) return 1;
    usleep(50 * 1000);
  }
  return 0;
}

static int is_up(json_t *n, const void *arg) {
  return strcmp(json_string_value(json_object_get(n, "state")), "up") == 0 &&
         json_integer_value(json_object_get(n, "heartbeats")) >=
             (json_int_t)(intptr_t)arg;
}
static int is_lost(json_t *n, const void *arg) {
  return strcmp(json_string_value(json_object_get(n, "state")), "lost") == 0;
}
static int has_label(json_t *n, const void *label) {
  return json_has_string(json_object_get(n, "labels"), label);
}
static int lacks_label(json_t *n, const void *label) {
  return !has_label(n, label);
}

static int app_acquire(const gam_proc *g, const char *label, unsigned count) {
  int fd = gam_connect(g);
  CHECK(fd >= 0);
  Ember__Acquire a = EMBER__ACQUIRE__INIT;
  a.app = "cluster-test";
  a.label = (char *)label;
  a.count = count;
  static uint8_t app_key[32]; /* a public key: never used at a NAM here */
  a.has_app_key = 1;
  a.app_key.data = app_key;
  a.app_key.len = sizeof app_key;
  CHECK(gam_send(fd, EMBER__MSG_TYPE__MSG_ACQUIRE, &a.base) == 0);
  return fd;
}

static Ember__Allocation *allocation(int fd) {
  uint8_t type;
  ProtobufCMessage *m = gam_recv(fd, 15000, &type);
  CHECK(m);
  if (type == EMBER__MSG_TYPE__MSG_ERROR)
    fprintf(stderr, "acquire: %s\n", ((Ember__Error *)m)->message);
  CHECK_EQ(type, EMBER__MSG_TYPE__MSG_ALLOCATION);
  return (Ember__Allocation *)m;
}

static void admin_label(const gam_proc *g, const char *node, const char *l) {
  char path[128];
  long status;
  snprintf(path, sizeof path, "/v1/nodes/%s/labels/%s", node, l);
  json_decref(gam_http(g, "PUT", path, GAM_TEST_TOKEN, &status));
  CHECK_EQ(status, 200);
}

/* A few sw tasks preferring the FPGA, through the NAM's unix socket. */
static void run_sw(nam_proc *p, const pair_set *ps) {
  ember_client *c;
  ember_options o = {.client_name = "cluster-test"};
  CHECK_EQ(ember_connect(p->unix_addr, &o, &c), 0);
  ember_sw_params params;
  ember_sw_params_default(&params);
  params.prefer = "fpga-emu";
  ember_sw_result *got = calloc(ps->n, sizeof *got);
  ember_sw_report rep = {.size = sizeof rep};
  CHECK_EQ(ember_sw_align(c, &params, ps->queries, ps->refs, ps->n, got, &rep,
                          NULL, NULL), 0);
  free(got);
  ember_close(c);
}

int main(void) {
  gam_proc g;
  const char *gsets[] = {"heartbeat_interval=200ms", "lost_after=3",
                         "delay_max_skips=4", NULL};
  CHECK(gam_start(&g, gsets) == 0);
  char gam_set[96], key_set[400];
  snprintf(gam_set, sizeof gam_set, "gam=%s", g.addr);
  snprintf(key_set, sizeof key_set, "cluster_key_file=%s", g.key_path);

  /* n3's FPGA fails every task until healed through its config file */
  char conf[] = "/tmp/ember-cluster-n3.XXXXXX";
  int cfd = mkstemp(conf);
  CHECK(cfd >= 0);
  const char *broken = "fail_threshold = 2\nprobe_interval = 300ms\n"
                       "[fpga-emu]\nreprogram_time = 10ms\nfail_rate = 1\n";
  CHECK(write(cfd, broken, strlen(broken)) == (ssize_t)strlen(broken));
  close(cfd);

  nam_proc nams[3];
  memset(nams, 0, sizeof nams); /* nam_start_config keeps nofile, watchdog */
  const char *names[3] = {"node_name=n1", "node_name=n2", "node_name=n3"};
  for (int i = 0; i < 3; i++) {
    const char *sets[] = {gam_set, key_set, names[i], "heartbeat_interval=200ms",
                          "opencl.enabled=false",
                          i < 2 ? "fpga-emu.boards=0" : "--label=fast",
                          i == 0 ? "--label=big-memory" : NULL, NULL};
    if (i == 2) CHECK(nam_start_config(&nams[i], conf, sets) == 0);
    else CHECK(nam_start(&nams[i], sets) == 0);
  }
  /* registration, and labels from accelerators and flags */
  CHECK(wait_node(&g, "n1", is_up, (void *)2));
  CHECK(wait_node(&g, "n2", is_up, (void *)2));
  CHECK(wait_node(&g, "n3", is_up, (void *)2));
  CHECK(wait_node(&g, "n1", has_label, "sw"));
  CHECK(wait_node(&g, "n1", has_label, "big-memory"));
  CHECK(wait_node(&g, "n3", has_label, "fast"));
  CHECK(wait_node(&g, "n3", has_label, "sw@fpga-emu"));
  CHECK(wait_node(&g, "n2", lacks_label, "sw@fpga-emu"));
  /* labels from the admin API */
  for (int i = 0; i < 3; i++) {
    char id[4];
    snprintf(id, sizeof id, "n%d", i + 1);
    admin_label(&g, id, "lr");
    admin_label(&g, id, "km");
  }
  CHECK(wait_node(&g, "n2", has_label, "km"));

  /* delay scheduling: km stays off the lr node */
  int lr = app_acquire(&g, "lr", 1);
  Ember__Allocation *a_lr = allocation(lr);
  const char *lr_node = a_lr->grants[0]->node;
  int km = app_acquire(&g, "km", 2);
  Ember__Allocation *a_km = allocation(km);
  CHECK_EQ(a_km->n_grants, 2);
  for (size_t i = 0; i < 2; i++)
    CHECK(strcmp(a_km->grants[i]->node, lr_node) != 0);
  fprintf(stderr, "lr on %s, km on %s and %s\n", lr_node,
          a_km->grants[0]->node, a_km->grants[1]->node);

  /* kill -9 of the lr node's NAM: lost, the lr app told */
  int victim = lr_node[1] - '1';
  nam_kill9(&nams[victim]);
  CHECK(wait_node(&g, lr_node, is_lost, NULL));
  Ember__LeaseEnded *ended = (Ember__LeaseEnded *)gam_recv_type(
      lr, 5000, EMBER__MSG_TYPE__MSG_LEASE_ENDED);
  CHECK(ended);
  CHECK(strcmp(ended->reason, "node lost") == 0);
  CHECK_EQ(ended->lease_id, a_lr->grants[0]->lease_id);
  protobuf_c_message_free_unpacked(&ended->base, NULL);
  CHECK(nam_restart(&nams[victim]) == 0);
  CHECK(wait_node(&g, lr_node, is_up, (void *)1));

  /* kill -9 and restart of the GAM: apps and leases intact */
  long status;
  json_t *before = gam_http(&g, "GET", "/v1/apps", NULL, &status);
  gam_kill9(&g);
  CHECK(gam_restart(&g) == 0);
  json_t *after = gam_http(&g, "GET", "/v1/apps", NULL, &status);
  CHECK_EQ(status, 200);
  CHECK_EQ(json_array_size(json_object_get(after, "apps")),
           json_array_size(json_object_get(before, "apps")));
  json_decref(before);
  json_decref(after);
  for (int i = 0; i < 3; i++) {
    char id[4];
    snprintf(id, sizeof id, "n%d", i + 1);
    CHECK(wait_node(&g, id, has_label, "km"));  /* admin labels kept */
  }
  json_t *n1 = gam_node(&g, "n1");
  json_int_t beats = json_integer_value(json_object_get(n1, "heartbeats"));
  json_decref(n1);
  CHECK(wait_node(&g, "n1", is_up, (void *)(intptr_t)(beats + 2)));

  /* n3's FPGA fails: sw@fpga-emu leaves the node, then comes back */
  pair_set ps;
  CHECK(pairs_load_dna(&ps, 64) == 0);
  for (int i = 0; i < 3; i++) run_sw(&nams[2], &ps);
  CHECK(wait_node(&g, "n3", lacks_label, "sw@fpga-emu"));
  json_t *n3 = gam_node(&g, "n3");
  CHECK(json_has_string(json_object_get(n3, "disabled"), "sw@fpga-emu"));
  CHECK(json_has_string(json_object_get(n3, "labels"), "sw"));  /* cpu */
  json_decref(n3);
  FILE *f = fopen(conf, "w");
  CHECK(f);
  fputs("fail_threshold = 2\nprobe_interval = 300ms\n"
        "[fpga-emu]\nreprogram_time = 10ms\nfail_rate = 0\n", f);
  fclose(f);
  kill(nams[2].pid, SIGHUP);
  for (int i = 0; i < 40; i++) {
    usleep(200 * 1000);
    run_sw(&nams[2], &ps);  /* a task probes the disabled pair */
    json_t *n = gam_node(&g, "n3");
    int back = n && has_label(n, "sw@fpga-emu");
    json_decref(n);
    if (back) break;
  }
  CHECK(wait_node(&g, "n3", has_label, "sw@fpga-emu"));
  pairs_free(&ps);

  protobuf_c_message_free_unpacked(&a_lr->base, NULL);
  protobuf_c_message_free_unpacked(&a_km->base, NULL);
  close(lr);
  close(km);
  for (int i = 0; i < 3; i++) nam_cleanup(&nams[i]);
  unlink(conf);
  CHECK_EQ(gam_stop(&g), 0);
  gam_cleanup(&g);
  printf("test_gam_cluster: ok\n");
  return 0;
}
