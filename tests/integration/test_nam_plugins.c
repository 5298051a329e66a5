/*
 * test_nam_plugins - accelerator plugins in the real ember-nam.
 *
 * The example accelerator (accelerators/example, built out of tree against
 * the installed SDK by the plugins_sdk test) loads from plugin_dir and runs
 * through ember_submit: GC fractions of known sequences, malformed input
 * refused with validate's reason; `ember accelerators --json` shows each
 * accelerator's origin. Beside it, every refusal case is refused with its
 * reason in the log and counted in the metrics: world- and group-writable
 * files, a file of another owner (as root: uid 65534), a symbolic link, a
 * file that is not a shared object, another ABI version, the name of a
 * built-in, no entry symbol, no run_cpu. A second daemon gets a
 * group-writable plugin_dir of another owner (world-writable when not
 * root) and loads nothing from it.
 *
 * test_nam_plugins GC_SO ABI_SO CLASH_SO INCOMPLETE_SO NOSYMBOL_SO
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define EMBER_CLI EMBER_BINARY_DIR "/client/cli/ember"
#define NOBODY 65534

static char top[64] = "/tmp/ember-plugins.XXXXXX";

static void copy_file(const char *from, const char *to, mode_t mode) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  if (!in || !out) {
    fprintf(stderr, "copy %s -> %s: %s\n", from, to, strerror(errno));
    exit(1);
  }
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    CHECK(fwrite(buf, 1, n, out) == n);
  fclose(in);
  CHECK(fclose(out) == 0);
  CHECK(chmod(to, mode) == 0);  /* exactly mode, whatever the umask */
}

static void write_text(const char *path, const char *text, mode_t mode) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  fputs(text, f);
  CHECK(fclose(f) == 0);
  CHECK(chmod(path, mode) == 0);
}

/* dir/name into buf */
static const char *at(char *buf, size_t len, const char *dir,
                      const char *name) {
  snprintf(buf, len, "%s/%s", dir, name);
  return buf;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  char *text = NULL;
  size_t cap = 0;
  ssize_t n = getdelim(&text, &cap, '\0', f);
  fclose(f);
  CHECK(n >= 0);
  return text;
}

#define CHECK_HAS(text, what)                                                \
  do {                                                                       \
    if (!strstr(text, what)) {                                               \
      fprintf(stderr, "%s:%d: no \"%s\" in:\n%s\n", __FILE__, __LINE__,      \
              what, text);                                                   \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

/* The log says that dir/file was refused for reason. */
static void check_refused(const char *log, const char *dir, const char *file,
                          const char *reason) {
  char want[512];
  if (file)
    snprintf(want, sizeof want, "plugin %s/%s refused (%s)", dir, file,
             reason);
  else
    snprintf(want, sizeof want, "plugin %s refused (%s)", dir, reason);
  CHECK_HAS(log, want);
}

/* The metrics show loaded plugins and refused[reason] for every reason. */
static void check_metrics(int port, int loaded, const int refused[6]) {
  static const char *const reasons[6] = {"unsafe", "dlopen", "symbol",
                                         "abi", "incomplete", "clash"};
  char *body = NULL, want[160];
  CHECK_EQ(nam_http_get(port, "/metrics", &body), 200);
  snprintf(want, sizeof want, "\nember_nam_plugins_loaded %d\n", loaded);
  CHECK_HAS(body, want);
  for (int i = 0; i < 6; i++) {
    snprintf(want, sizeof want,
             "\nember_nam_plugins_refused_total{reason=\"%s\"} %d\n",
             reasons[i], refused[i]);
    CHECK_HAS(body, want);
  }
  free(body);
}

/* Run gc on text; returns the finished task (free it). */
static ember_task *run_gc(ember_client *c, const char *text) {
  ember_block *b;
  ember_task *t;
  CHECK_EQ(ember_block_create(c, text, strlen(text), 0, &b), 0);
  CHECK_EQ(ember_submit(c, "gc", NULL, 0, &b, 1, NULL, &t), 0);
  CHECK_EQ(ember_task_wait(t, 30000), 0);
  ember_block_release(b);
  return t;
}

/* Output value i: little-endian binary64 (accelerators/example/gc.h). */
static double output_at(const unsigned char *out, size_t i) {
  uint64_t bits = 0;
  for (int k = 7; k >= 0; k--) bits = bits << 8 | out[8 * i + (size_t)k];
  double v;
  memcpy(&v, &bits, sizeof v);
  return v;
}

static void check_gc_runs(const nam_proc *p) {
  ember_client *c;
  ember_options opts = {.client_name = "test_nam_plugins", .no_fallback = 1};
  CHECK_EQ(ember_connect(p->unix_addr, &opts, &c), 0);

  /* fractions computed the way the plugin does: exact */
  static const char seqs[] = "GGCC\nATAT\nACGT\nacgtg\nGATTACA\n";
  const double want[] = {1.0, 0.0, 0.5, 3.0 / 5.0, 2.0 / 7.0};
  ember_task *t = run_gc(c, seqs);
  if (ember_task_status(t) != 0)
    fprintf(stderr, "gc failed: %s\n", ember_task_message(t));
  CHECK_EQ(ember_task_status(t), 0);
  size_t size = 0;
  const unsigned char *out = ember_task_output(t, &size);
  CHECK(out != NULL);
  CHECK_EQ(size, 8 * 5);
  for (size_t i = 0; i < 5; i++)
    if (output_at(out, i) != want[i]) {
      fprintf(stderr, "sequence %zu: GC %.17g, want %.17g\n", i,
              output_at(out, i), want[i]);
      exit(1);
    }
  ember_task_free(t);

  /* validate's reason comes back with the error */
  t = run_gc(c, "ACGT\nACXT\n");
  CHECK_EQ(ember_task_status(t), EMBER_EFORMAT);
  CHECK_HAS(ember_task_message(t), "line 2, column 3");
  ember_task_free(t);
  ember_close(c);
}

/* `ember accelerators --json` names the origin of each accelerator. */
static void check_listing(const nam_proc *p, const char *gc_path) {
  char cmd[512], want[512];
  snprintf(cmd, sizeof cmd, EMBER_CLI " accelerators --json --nam %s",
           p->unix_addr);
  FILE *f = popen(cmd, "r");
  CHECK(f != NULL);
  char *text = NULL;
  size_t cap = 0;
  CHECK(getdelim(&text, &cap, '\0', f) > 0);
  CHECK_EQ(pclose(f), 0);
  CHECK_HAS(text, "\"name\": \"gc\"");
  snprintf(want, sizeof want, "\"origin\": \"%s\"", gc_path);
  CHECK_HAS(text, want);
  CHECK_HAS(text, "\"origin\": \"built-in\"");
  free(text);
}

static void start_with(nam_proc *p, const char *dir, int *port) {
  static char dir_set[256], metrics_set[64];
  *port = free_tcp_port();
  snprintf(dir_set, sizeof dir_set, "plugin_dir=%s", dir);
  snprintf(metrics_set, sizeof metrics_set, "metrics_listen=127.0.0.1:%d",
           *port);
  const char *sets[] = {dir_set, metrics_set, "opencl.enabled=false",
                        "fpga-emu.boards=0", NULL};
  CHECK_EQ(nam_start(p, sets), 0);
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: test_nam_plugins GC_SO ABI_SO CLASH_SO "
            "INCOMPLETE_SO NOSYMBOL_SO\n");
    return 2;
  }
  const int root = geteuid() == 0;
  char good[128], shared[128], path[256], gc_path[256];
  CHECK(mkdtemp(top) != NULL);
  CHECK(chmod(top, 0755) == 0);
  snprintf(good, sizeof good, "%s/good", top);
  snprintf(shared, sizeof shared, "%s/shared", top);
  CHECK(mkdir(good, 0755) == 0 && chmod(good, 0755) == 0);
  CHECK(mkdir(shared, 0755) == 0);

  /* plugin_dir with the example and every refusal case of a file */
  copy_file(argv[1], at(gc_path, sizeof gc_path, good, "gc.so"), 0755);
  copy_file(argv[2], at(path, sizeof path, good, "abi.so"), 0755);
  copy_file(argv[3], at(path, sizeof path, good, "clash.so"), 0755);
  copy_file(argv[4], at(path, sizeof path, good, "incomplete.so"), 0755);
  copy_file(argv[5], at(path, sizeof path, good, "nosymbol.so"), 0755);
  copy_file(argv[1], at(path, sizeof path, good, "world.so"), 0757);
  copy_file(argv[1], at(path, sizeof path, good, "group.so"), 0775);
  write_text(at(path, sizeof path, good, "text.so"), "not ELF\n", 0644);
  write_text(at(path, sizeof path, good, "README"), "not a plugin\n", 0666);
  CHECK(symlink(gc_path, at(path, sizeof path, good, "link.so")) == 0);
  if (root) {
    copy_file(argv[1], at(path, sizeof path, good, "foreign.so"), 0755);
    CHECK(chown(path, NOBODY, NOBODY) == 0);
  }

  nam_proc p;
  int port;
  start_with(&p, good, &port);
  check_gc_runs(&p);
  check_listing(&p, gc_path);
  char *log = slurp(p.log_path);
  CHECK_HAS(log, "accelerator gc version 1 loaded");
  check_refused(log, good, "world.so", "unsafe");
  CHECK_HAS(log, "writable by its world");
  check_refused(log, good, "group.so", "unsafe");
  CHECK_HAS(log, "writable by its group");
  check_refused(log, good, "link.so", "unsafe");
  if (root) {
    check_refused(log, good, "foreign.so", "unsafe");
    CHECK_HAS(log, "owned by uid 65534");
  }
  check_refused(log, good, "text.so", "dlopen");
  check_refused(log, good, "nosymbol.so", "symbol");
  check_refused(log, good, "abi.so", "abi");
  check_refused(log, good, "incomplete.so", "incomplete");
  CHECK_HAS(log, "has no run_cpu function");
  check_refused(log, good, "clash.so", "clash");
  CHECK(strstr(log, "README") == NULL);  /* not NAME.so: not looked at */
  free(log);
  /* unsafe, dlopen, symbol, abi, incomplete, clash */
  const int refused_good[6] = {3 + root, 1, 1, 1, 1, 1};
  check_metrics(port, 1, refused_good);
  nam_cleanup(&p);

  /* a plugin_dir someone else can write to: nothing from it is loaded */
  copy_file(argv[1], at(path, sizeof path, shared, "gc.so"), 0755);
  if (root) {
    CHECK(chown(shared, NOBODY, NOBODY) == 0);
    CHECK(chmod(shared, 0775) == 0);
  } else {
    CHECK(chmod(shared, 0777) == 0);
  }
  start_with(&p, shared, &port);
  log = slurp(p.log_path);
  check_refused(log, shared, NULL, "unsafe");
  CHECK_HAS(log, root ? "owned by uid 65534" : "writable by its world");
  CHECK(strstr(log, "accelerator gc version") == NULL);
  free(log);
  const int refused_shared[6] = {1, 0, 0, 0, 0, 0};
  check_metrics(port, 0, refused_shared);
  ember_client *c;
  ember_options opts = {.client_name = "test_nam_plugins", .no_fallback = 1};
  CHECK_EQ(ember_connect(p.unix_addr, &opts, &c), 0);
  ember_task *t = run_gc(c, "ACGT\n");
  CHECK_EQ(ember_task_status(t), EMBER_ENOACCEL);
  ember_task_free(t);
  ember_close(c);
  nam_cleanup(&p);

  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", top);
  if (!getenv("EMBER_TEST_KEEP") && system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", top);
  printf("test_nam_plugins: ok (%s)\n", root ? "as root" : "not root");
  return 0;
}
