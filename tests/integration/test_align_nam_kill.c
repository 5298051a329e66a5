/* test_align_nam_kill - `ember align --platform fpga-emu` through a NAM
 * that is killed (-9) in the middle of the batch.
 *
 *   restarted  six `ember align` at once; the NAM starts again on the same
 *              socket: each exits 0 with every pair, equal to an embedded
 *              run (before libember kept such tasks, all six exited 1 with
 *              no output)
 *   stays away one `ember align --reconnect-window 500`; the NAM does not
 *              come back: the tool still writes every pair that completed,
 *              each equal to the embedded run, says on standard error how
 *              many pairs and tasks did not complete, and exits 3 */
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

#define CLIENTS 6
#define RESTART_PAIRS 300 /* per client: the six together last seconds */

/* ember align on files q.fa and r.fa of dir (the first n pairs), writing
 * dir/out-TAG.tsv and dir/err-TAG.txt; extra: more options or NULL. */
static pid_t spawn_align(const char *dir, const char *qfile, const char *rfile,
                         const char *nam, const char *tag, const char *extra,
                         const char *extra_value) {
  char q[400], r[400], out[400], err[400];
  snprintf(q, sizeof q, "%s/%s", dir, qfile);
  snprintf(r, sizeof r, "%s/%s", dir, rfile);
  snprintf(out, sizeof out, "%s/out-%s.tsv", dir, tag);
  snprintf(err, sizeof err, "%s/err-%s.txt", dir, tag);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || dup2(fd, 2) < 0) _exit(99);
    execl(EMBER_CLI, "ember", "align", "--nam", nam, "--platform", "fpga-emu",
          "--query", q, "--ref", r, "--out", out, extra, extra_value,
          (char *)NULL);
    _exit(98);
  }
  return pid;
}

/* Every line of dir/out-TAG.tsv is a pair qI/rI equal to want[I]; returns
 * how many there are. */
static size_t check_output(const char *dir, const char *tag,
                           const ember_sw_result *want, size_t n) {
  char path[400];
  snprintf(path, sizeof path, "%s/out-%s.tsv", dir, tag);
  char *text = slurp(path);
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
  free(text);
  return lines;
}

static char *slurp_err(const char *dir, const char *tag) {
  char path[400];
  snprintf(path, sizeof path, "%s/err-%s.txt", dir, tag);
  return slurp(path);
}

/* Kill the NAM once a few more tasks than base are done; returns how many
 * were. */
static unsigned long long kill_mid_batch(nam_proc *nam, int mport,
                                         unsigned long long base) {
  struct timespec tick = {0, 2000000};
  for (int i = 0; i < 30000 && tasks_ok(mport) < base + 5; i++)
    nanosleep(&tick, NULL);
  unsigned long long at_kill = tasks_ok(mport) - base;
  nam_kill9(nam);
  CHECK(at_kill >= 5);
  return at_kill;
}

static int exit_status(pid_t pid) {
  int status = 0;
  CHECK_EQ(waitpid(pid, &status, 0), pid);
  CHECK(WIFEXITED(status));
  return WEXITSTATUS(status);
}

static void restarted(nam_proc *nam, int mport, const ember_sw_result *want) {
  pid_t pids[CLIENTS];
  char tags[CLIENTS][16];
  for (int i = 0; i < CLIENTS; i++) {
    snprintf(tags[i], sizeof tags[i], "six%d", i);
    pids[i] = spawn_align(nam->dir, "q300.fa", "r300.fa", nam->unix_addr,
                          tags[i], NULL, NULL);
  }
  unsigned long long at_kill = kill_mid_batch(nam, mport, 0);
  CHECK_EQ(nam_restart(nam), 0);
  for (int i = 0; i < CLIENTS; i++) {
    int rc = exit_status(pids[i]);
    char *err = slurp_err(nam->dir, tags[i]);
    if (rc != 0) printf("client %d exited %d:\n%s", i, rc, err);
    CHECK_EQ(rc, 0);
    CHECK(strstr(err, "did not complete") == NULL);
    free(err);
    CHECK_EQ(check_output(nam->dir, tags[i], want, RESTART_PAIRS), RESTART_PAIRS);
  }
  printf("restarted: the NAM killed after %llu tasks; %d clients exited 0 "
         "with all %d pairs each\n", at_kill, CLIENTS, RESTART_PAIRS);
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

  char path[400];
  snprintf(path, sizeof path, "%s/q.fa", nam.dir);
  write_fasta(path, 'q', ps.queries, n);
  snprintf(path, sizeof path, "%s/r.fa", nam.dir);
  write_fasta(path, 'r', ps.refs, n);
  snprintf(path, sizeof path, "%s/q300.fa", nam.dir);
  write_fasta(path, 'q', ps.queries, RESTART_PAIRS);
  snprintf(path, sizeof path, "%s/r300.fa", nam.dir);
  write_fasta(path, 'r', ps.refs, RESTART_PAIRS);

  restarted(&nam, mport, want);

  /* stays away: the rest of the batch never comes back (the restarted
   * NAM's counters began with the six clients' resubmitted tasks) */
  unsigned long long base = tasks_ok(mport);
  pid_t cli = spawn_align(nam.dir, "q.fa", "r.fa", nam.unix_addr, "away",
                          "--reconnect-window", "500");
  unsigned long long at_kill = kill_mid_batch(&nam, mport, base);
  int rc = exit_status(cli);
  char *errtext = slurp_err(nam.dir, "away");
  printf("stays away: the NAM killed after %llu tasks; ember align exited "
         "%d:\n%s", at_kill, rc, errtext);
  CHECK_EQ(rc, 3);

  /* "ember: align: 1,234 of 2,000 pairs (25 of 40 tasks) did not complete" */
  const char *line = strstr(errtext, "did not complete");
  CHECK(line != NULL);
  while (line > errtext && line[-1] != '\n') line--;
  CHECK_EQ(strncmp(line, "ember: align: ", 14), 0);
  line += 14;
  size_t failed = grouped_number(line);
  const char *paren = strchr(line, '(');
  CHECK(paren != NULL);
  size_t tasks_failed = grouped_number(paren + 1);
  CHECK(failed > 0 && failed < n);
  CHECK(tasks_failed > 0);
  CHECK(strstr(errtext, "reconnect window") != NULL); /* the reason */

  /* every line written is a pair that completed, equal to the embedded run */
  size_t lines = check_output(nam.dir, "away", want, n);
  printf("%zu pairs written, %zu reported missing (%zu tasks), of %zu\n",
         lines, failed, tasks_failed, n);
  CHECK_EQ(lines + failed, n);

  free(errtext);
  nam_cleanup(&nam);
  free(want);
  pairs_free(&ps);
  printf("2 passed, 0 failed\n");
  return 0;
}
