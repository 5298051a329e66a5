/*
 * test_gam_store_full - an admin change the store cannot keep (the disk
 * full; here the database capped by database_max_size) is answered 503
 * with a JSON error that says why, not with a closed connection; then
 * ember-gam stops (exit 1) rather than acknowledge anything more.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gam_harness.h"
#include "harness.h"

#define MAX_CHANGES 20000

int main(void) {
  gam_proc g;
  const char *sets[] = {"database_max_size=96KiB", NULL};
  CHECK_EQ(gam_start(&g, sets), 0);

  /* a node to change */
  uint8_t challenge[32];
  int fd = gam_connect_challenge(&g, challenge);
  CHECK(fd >= 0);
  char *labels[] = {"sw"};
  Ember__Register r = EMBER__REGISTER__INIT;
  r.node = "n1";
  r.address = "tcp:127.0.0.1:1";
  r.labels = labels;
  r.n_labels = 1;
  CHECK_EQ(gam_send_register(&g, fd, challenge, &r), 0);
  ProtobufCMessage *m =
      gam_recv_type(fd, 10000, EMBER__MSG_TYPE__MSG_HEARTBEAT_ACK);
  CHECK(m != NULL);
  protobuf_c_message_free_unpacked(m, NULL);

  /* each change adds an event row (and a label row): the cap comes */
  long status = 200;
  json_t *body = NULL;
  int i = 0;
  for (; i < MAX_CHANGES && status == 200; i++) {
    char path[128];
    snprintf(path, sizeof path, "/v1/nodes/n1/labels/label-%06d-with-a-long-name", i);
    json_decref(body);
    body = gam_http(&g, "PUT", path, GAM_TEST_TOKEN, &status);
  }
  char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
  printf("change %d answered %ld: %s\n", i, status,
         text ? text : "(no JSON body)");
  free(text);
  CHECK_EQ(status, 503);
  CHECK(body != NULL);
  const char *code = json_string_value(json_object_get(
      json_object_get(body, "error"), "code"));
  const char *message = json_string_value(json_object_get(
      json_object_get(body, "error"), "message"));
  CHECK(code && strcmp(code, "ESHUTDOWN") == 0);
  CHECK(message && strstr(message, "the disk is full"));
  json_decref(body);

  /* it stops by itself, with a failure status (systemd restarts it) */
  int st = 0;
  for (int waited = 0; waited < 10000; waited += 50) {
    pid_t got = waitpid(g.pid, &st, WNOHANG);
    CHECK(got >= 0);
    if (got == g.pid) {
      g.pid = 0;
      break;
    }
    usleep(50000);
  }
  CHECK_EQ(g.pid, 0);
  CHECK(WIFEXITED(st));
  CHECK_EQ(WEXITSTATUS(st), 1);
  close(fd);
  gam_cleanup(&g);
  printf("ok\n");
  return 0;
}
