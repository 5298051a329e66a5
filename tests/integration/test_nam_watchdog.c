/* test_nam_watchdog - with WATCHDOG_USEC set, as systemd's WatchdogSec=
 * sets it, ember-nam keeps sending WATCHDOG=1 at half the interval; SIGTERM
 * then brings STOPPING=1 and a clean exit. (Its own test: a notify socket
 * that nobody reads fills up, and sd_notify would then block the daemon.) */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

int main(void) {
  nam_proc nam = {.watchdog_usec = 400000}; /* WATCHDOG=1 every 0.2 s */
  CHECK_EQ(nam_start_config(&nam, NULL, NULL), 0);
  for (int i = 0; i < 3; i++) CHECK_EQ(nam_wait_notify(&nam, "WATCHDOG=1"), 0);
  printf("three WATCHDOG=1 after READY=1\n");
  pid_t pid = nam.pid;
  kill(pid, SIGTERM);
  CHECK_EQ(nam_wait_notify(&nam, "STOPPING=1"), 0);
  int status;
  CHECK_EQ(waitpid(pid, &status, 0), pid);
  nam.pid = 0;
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  printf("SIGTERM: STOPPING=1, exit 0\n");
  nam_cleanup(&nam);
  printf("1 passed, 0 failed\n");
  return 0;
}
