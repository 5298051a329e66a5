/* test_align_partial - `ember align --platform fpga-emu` through a NAM that
 * is killed (-9) in the middle of the batch and does not come back within
 * the reconnect window: the tool still writes every pair that completed,
 * each equal to an embedded run, says on standard error how many pairs and
 * tasks did not complete, and exits with status 3. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define EMBER_CLI EMBER_BINARY_DIR "/client/cli/ember"

static void write_fasta(const char *path, char prefix, const ember_seq *seqs,
                        size_t n) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  for (size_t i = 0; i < n; i++)
    fprintf(f, ">%c%zu\n%.*s\n", prefix, i, (int)seqs[i].length,
            seqs[i].residues);
  CHECK_EQ(fclose(f), 0);
}

/* Tasks the NAM finished well, from its metrics. */
static unsigned long long tasks_ok(int port) {
  char *body = NULL;
  if (nam_http_get(port, "/metrics", &body) != 200) {
    free(body);
    return 0;
  }
  unsigned long long sum = 0;
  for (char *line = strtok(body, "\n"); line; line = strtok(NULL, "\n")) {
    const char *v = strrchr(line, ' ');
    if (strncmp(line, "ember_nam_tasks_total{", 22) == 0 &&
        strstr(line, "outcome=\"ok\"") && v)
      sum += strtoull(v + 1, NULL, 10);
  }
  free(body);
  return sum;
}

/* "1,234" -> 1234 */
static size_t grouped_number(const char *s) {
  size_t v = 0;
  for (; (*s >= '0' && *s <= '9') || *s == ','; s++)
    if (*s != ',') v = v * 10 + (size_t)(*s - '0');
  return v;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  char *text = calloc(1, 1 << 22);
  CHECK(text != NULL);
  size_t n = fread(text, 1, (1 << 22) - 1, f);
  text[n] = '\0';
  fclose(f);
  return text;
}

int main(void) {
  pair_set ps;
  CHECK_EQ(pairs_load_dna(&ps, 0), 0);
  size_t n = ps.n;

  ember_client *ref;
  CHECK_EQ(ember_connect("embedded", NULL, &ref), 0);
  ember_sw_params p;
  ember_sw_params_default(&p);
  ember_sw_result *want = calloc(n, sizeof *want);
  CHECK(want != NULL);
  CHECK_EQ(ember_sw_align(ref, &p, ps.queries, ps.refs, n, want, NULL, NULL,
                          NULL), 0);
  ember_close(ref);

  /* one slow emulated board: the batch lasts seconds */
  nam_proc nam;
  static char metrics_set[64];
  int mport = free_tcp_port();
  CHECK(mport > 0);
  snprintf(metrics_set, sizeof metrics_set, "metrics_listen=127.0.0.1:%d", mport);
  const char *sets[] = {"cpu_workers=1", "opencl.enabled=false",
                        "fpga-emu.boards=1", "fpga-emu.reprogram_time=0ms",
                        "fpga-emu.timing=sw:1:50", metrics_set, NULL};
  CHECK_EQ(nam_start(&nam, sets), 0);

  char qpath[400], rpath[400], out[400], err[400];
  snprintf(qpath, sizeof qpath, "%s/q.fa", nam.dir);
  snprintf(rpath, sizeof rpath, "%s/r.fa", nam.dir);
  snprintf(out, sizeof out, "%s/out.tsv", nam.dir);
  snprintf(err, sizeof err, "%s/err.txt", nam.dir);
  write_fasta(qpath, 'q', ps.queries, n);
  write_fasta(rpath, 'r', ps.refs, n);

  pid_t cli = fork();
  CHECK(cli >= 0);
  if (cli == 0) {
    int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || dup2(fd, 2) < 0) _exit(99);
    execl(EMBER_CLI, "ember", "align", "--nam", nam.unix_addr, "--platform",
          "fpga-emu", "--reconnect-window", "500", "--query", qpath, "--ref",
          rpath, "--out", out, (char *)NULL);
    _exit(98);
  }
  /* kill the NAM once a few tasks are done: the rest never comes back */
  struct timespec tick = {0, 2000000};
  for (int i = 0; i < 30000 && tasks_ok(mport) < 5; i++) nanosleep(&tick, NULL);
  unsigned long long at_kill = tasks_ok(mport);
  nam_kill9(&nam);

  int status = 0;
  CHECK_EQ(waitpid(cli, &status, 0), cli);
  char *errtext = slurp(err);
  printf("killed the NAM after %llu tasks; ember align exited %d:\n%s", at_kill,
         WIFEXITED(status) ? WEXITSTATUS(status) : -1, errtext);
  CHECK(at_kill >= 5);
  CHECK(WIFEXITED(status));
  CHECK_EQ(WEXITSTATUS(status), 3);

  /* "ember: align: 1,234 of 2,000 pairs (25 of 40 tasks) did not complete" */
  const char *line = strstr(errtext, "ember: align: ");
  while (line && !strstr(line, "did not complete")) line = strstr(line + 1, "ember: align: ");
  CHECK(line != NULL);
  line = strstr(line, "did not complete");
  while (line > errtext && line[-1] != '\n') line--;
  line += strlen("ember: align: ");
  size_t failed = grouped_number(line);
  const char *paren = strchr(line, '(');
  CHECK(paren != NULL);
  size_t tasks_failed = grouped_number(paren + 1);
  CHECK(failed > 0 && failed < n);
  CHECK(tasks_failed > 0);
  CHECK(strstr(errtext, "reconnect window") != NULL); /* the reason */

  /* every line written is a pair that completed, equal to the embedded run */
  char *text = slurp(out);
  char *save = NULL;
  char *l = strtok_r(text, "\n", &save);
  CHECK(l && strncmp(l, "query\tref\tscore", 15) == 0);
  size_t lines = 0;
  for (l = strtok_r(NULL, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
    size_t qi, ri;
    ember_sw_result got;
    CHECK_EQ(sscanf(l, "q%zu\tr%zu\t%d\t%d\t%d\t%d\t%d", &qi, &ri, &got.score,
                    &got.query_start, &got.query_end, &got.ref_start,
                    &got.ref_end), 7);
    CHECK_EQ(qi, ri);
    CHECK(qi < n);
    CHECK_EQ(results_compare(&got, &want[qi], 1, "written pair"), 1);
    lines++;
  }
  printf("%zu pairs written, %zu reported missing (%zu tasks), of %zu\n",
         lines, failed, tasks_failed, n);
  CHECK_EQ(lines + failed, n);

  free(text);
  free(errtext);
  nam_cleanup(&nam);
  free(want);
  pairs_free(&ps);
  printf("1 passed, 0 failed\n");
  return 0;
}
