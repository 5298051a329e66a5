/* gam_harness.c - the real ember-gam for integration tests. */
#include "gam_harness.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frame.h"
#include "harness.h"
#include "lease.h"
#include "node_auth.h"

#define GAM_BUILT_BIN EMBER_BINARY_DIR "/gam/ember-gam"

static const char *gam_bin(void) {
  const char *b = getenv("EMBER_TEST_GAM_BIN");
  return b && b[0] ? b : GAM_BUILT_BIN;
}

static int notify_ready(gam_proc *g) {
  for (int waited = 0; waited < 10000; waited += 100) {
    struct pollfd pf = {.fd = g->notify_fd, .events = POLLIN};
    if (poll(&pf, 1, 100) == 1) {
      char msg[512];
      ssize_t n = recv(g->notify_fd, msg, sizeof msg - 1, 0);
      if (n > 0) {
        msg[n] = '\0';
        if (strstr(msg, "READY=1")) return 0;
      }
    }
    if (waitpid(g->pid, NULL, WNOHANG) == g->pid) {
      fprintf(stderr, "gam_harness: ember-gam exited (log %s)\n", g->log_path);
      g->pid = 0;
      return -1;
    }
  }
  fprintf(stderr, "gam_harness: no READY=1 from ember-gam\n");
  return -1;
}

static int spawn(gam_proc *g) {
  char s[8][400];
  snprintf(s[0], sizeof s[0], "cluster_key_file=%s", g->key_path);
  snprintf(s[1], sizeof s[1], "admin_token_file=%s", g->token_path);
  snprintf(s[2], sizeof s[2], "database=%s", g->db_path);
  snprintf(s[3], sizeof s[3], "listen=127.0.0.1:%d", g->port);
  snprintf(s[4], sizeof s[4], "admin_listen=127.0.0.1:%d", g->admin_port);
  snprintf(s[5], sizeof s[5], "log_level=debug");
  const char *argv[64];
  size_t n = 0;
  argv[n++] = gam_bin();
  for (int i = 0; i < 6; i++) {
    argv[n++] = "--set";
    argv[n++] = s[i];
  }
  for (size_t i = 0; i < g->n_sets; i++) {
    argv[n++] = "--set";
    argv[n++] = g->sets[i];
  }
  argv[n] = NULL;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    FILE *log = fopen(g->log_path, "a");
    if (log) {
      dup2(fileno(log), 1);
      dup2(fileno(log), 2);
    }
    setenv("NOTIFY_SOCKET", g->notify_path, 1);
    execv(gam_bin(), (char *const *)argv);
    _exit(127);
  }
  g->pid = pid;
  return notify_ready(g);
}

int gam_start(gam_proc *g, const char *const *sets) {
  memset(g, 0, sizeof *g);
  g->notify_fd = -1;
  snprintf(g->dir, sizeof g->dir, "/tmp/ember-gam-test.XXXXXX");
  if (!mkdtemp(g->dir)) return -1;
  snprintf(g->key_path, sizeof g->key_path, "%s/cluster.key", g->dir);
  snprintf(g->token_path, sizeof g->token_path, "%s/gam.token", g->dir);
  snprintf(g->db_path, sizeof g->db_path, "%s/gam.db", g->dir);
  snprintf(g->log_path, sizeof g->log_path, "%s/gam.log", g->dir);
  snprintf(g->notify_path, sizeof g->notify_path, "%s/notify", g->dir);
  for (; sets && sets[g->n_sets] && g->n_sets < 16; g->n_sets++)
    g->sets[g->n_sets] = sets[g->n_sets];
  /* the key through the daemon itself, as an admin would make it */
  char cmd[700];
  snprintf(cmd, sizeof cmd, "%s --create-key %s", gam_bin(), g->key_path);
  if (system(cmd) != 0) return -1;
  int fd = open(g->token_path, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0 || write(fd, GAM_TEST_TOKEN "\n", sizeof GAM_TEST_TOKEN) < 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  close(fd);
  g->port = free_tcp_port();
  g->admin_port = free_tcp_port();
  snprintf(g->addr, sizeof g->addr, "127.0.0.1:%d", g->port);
  snprintf(g->admin_url, sizeof g->admin_url, "http://127.0.0.1:%d",
           g->admin_port);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%.107s", g->notify_path);
  g->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (g->notify_fd < 0 ||
      bind(g->notify_fd, (struct sockaddr *)&sa, sizeof sa) != 0)
    return -1;
  return spawn(g);
}

int gam_restart(gam_proc *g) { return spawn(g); }

void gam_kill9(gam_proc *g) {
  if (g->pid <= 0) return;
  kill(g->pid, SIGKILL);
  waitpid(g->pid, NULL, 0);
  g->pid = 0;
}

int gam_stop(gam_proc *g) {
  if (g->pid <= 0) return -1;
  int status = 0;
  kill(g->pid, SIGTERM);
  if (waitpid(g->pid, &status, 0) != g->pid) return -1;
  g->pid = 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void gam_cleanup(gam_proc *g) {
  if (g->pid > 0) gam_stop(g);
  if (g->notify_fd >= 0) close(g->notify_fd);
  if (getenv("EMBER_TEST_KEEP")) {
    fprintf(stderr, "gam_harness: kept %s\n", g->dir);
    return;
  }
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g->dir);
  if (system(cmd) != 0) fprintf(stderr, "gam_harness: cannot remove %s\n", g->dir);
}

/* ---- protocol */

int gam_send(int fd, uint8_t type, const ProtobufCMessage *m) {
  size_t len = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(PROTO_HEADER_SIZE + len);
  if (!buf) return -1;
  proto_header_write(buf, (uint32_t)len, type);
  protobuf_c_message_pack(m, buf + PROTO_HEADER_SIZE);
  int rc = proto_send(fd, buf, PROTO_HEADER_SIZE + len, NULL, 0);
  free(buf);
  return rc;
}

static int read_full(int fd, void *p, size_t n, int timeout_ms) {
  uint8_t *b = p;
  while (n) {
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    if (poll(&pf, 1, timeout_ms) != 1) return -1;
    ssize_t r = recv(fd, b, n, 0);
    if (r <= 0) return -1;
    b += r;
    n -= (size_t)r;
  }
  return 0;
}

ProtobufCMessage *gam_recv(int fd, int timeout_ms, uint8_t *type) {
  uint8_t h[PROTO_HEADER_SIZE];
  if (read_full(fd, h, sizeof h, timeout_ms) != 0) return NULL;
  size_t len = (size_t)h[0] | (size_t)h[1] << 8 | (size_t)h[2] << 16 |
               (size_t)h[3] << 24;
  if (len > (16u << 20)) return NULL;
  uint8_t *payload = malloc(len ? len : 1);
  if (!payload || read_full(fd, payload, len, timeout_ms) != 0) {
    free(payload);
    return NULL;
  }
  proto_frame f = {.type = h[4], .payload = payload, .len = len};
  ProtobufCMessage *m = proto_unpack(&f);
  free(payload);
  *type = h[4];
  return m;
}

ProtobufCMessage *gam_recv_type(int fd, int timeout_ms, uint8_t want) {
  for (int i = 0; i < 1000; i++) {
    uint8_t type;
    ProtobufCMessage *m = gam_recv(fd, timeout_ms, &type);
    if (!m || type == want) return m;
    protobuf_c_message_free_unpacked(m, NULL);
  }
  return NULL;
}

int gam_connect(const gam_proc *g) {
  uint8_t challenge[32];
  return gam_connect_challenge(g, challenge);
}

int gam_send_register(const gam_proc *g, int fd, const uint8_t challenge[32],
                      Ember__Register *r) {
  lease_key key;
  char err[256];
  if (lease_key_load(g->key_path, &key, err, sizeof err) != 0) {
    fprintf(stderr, "gam_send_register: %s\n", err);
    return -1;
  }
  static _Thread_local uint8_t mac[NODE_AUTH_MAC_BYTES]; /* r points at it */
  node_auth_mac(&key, challenge, r->node, mac);
  r->has_auth = 1;
  r->auth.data = mac;
  r->auth.len = sizeof mac;
  return gam_send(fd, EMBER__MSG_TYPE__MSG_REGISTER, &r->base);
}

int gam_connect_challenge(const gam_proc *g, uint8_t challenge[32]) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)g->port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  Ember__Hello hello = EMBER__HELLO__INIT;
  hello.protocol_version = PROTO_VERSION;
  hello.client_name = "test";
  ProtobufCMessage *w = NULL;
  if (gam_send(fd, EMBER__MSG_TYPE__MSG_HELLO, &hello.base) != 0 ||
      !(w = gam_recv_type(fd, 5000, EMBER__MSG_TYPE__MSG_WELCOME))) {
    close(fd);
    return -1;
  }
  const Ember__Welcome *wm = (const Ember__Welcome *)w;
  int ok = wm->has_challenge && wm->challenge.len == 32;
  if (ok) memcpy(challenge, wm->challenge.data, 32);
  protobuf_c_message_free_unpacked(w, NULL);
  if (!ok) {
    close(fd);
    return -1;
  }
  return fd;
}

int gam_connect_from(const gam_proc *g, const char *from) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  struct sockaddr_in src = {.sin_family = AF_INET};
  struct sockaddr_in dst = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)g->port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if ((from && (inet_pton(AF_INET, from, &src.sin_addr) != 1 ||
                bind(fd, (struct sockaddr *)&src, sizeof src) != 0)) ||
      (connect(fd, (struct sockaddr *)&dst, sizeof dst) != 0 &&
       errno != EINPROGRESS)) {
    close(fd);
    return -1;
  }
  return fd;
}

/* ---- /proc */

int gam_figures_get(const gam_proc *g, gam_figures *out) {
  char path[64], line[512];
  memset(out, 0, sizeof *out);
  snprintf(path, sizeof path, "/proc/%d/status", (int)g->pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0)
      out->rss_mib = strtod(line + 6, NULL) / 1024.0;
  fclose(f);
  snprintf(path, sizeof path, "/proc/%d/stat", (int)g->pid);
  f = fopen(path, "r");
  if (!f) return -1;
  char stat_line[1024];
  size_t n = fread(stat_line, 1, sizeof stat_line - 1, f);
  fclose(f);
  stat_line[n] = '\0';
  const char *p = strrchr(stat_line, ')');  /* the name may hold spaces */
  unsigned long long utime = 0, stime = 0;
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
                          "%llu", &utime, &stime) != 2)
    return -1;
  out->cpu_s = (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
  snprintf(path, sizeof path, "/proc/%d/fd", (int)g->pid);
  DIR *d = opendir(path);
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));) {
    char link[600], target[64];
    snprintf(link, sizeof link, "%s/%s", path, e->d_name);
    ssize_t k = readlink(link, target, sizeof target - 1);
    if (k > 0 && strncmp(target, "socket:", 7) == 0) out->sockets++;
  }
  closedir(d);
  struct stat st;
  out->log_bytes = stat(g->log_path, &st) == 0 ? (long)st.st_size : 0;
  return 0;
}

/* ---- admin API */

static size_t collect(char *p, size_t size, size_t n, void *user) {
  FILE *f = user;
  return fwrite(p, size, n, f);
}

json_t *gam_http(const gam_proc *g, const char *method, const char *path,
                 const char *token, long *status) {
  char url[512], auth[256];
  snprintf(url, sizeof url, "%s%s", g->admin_url, path);
  char *body = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&body, &len);
  CURL *c = curl_easy_init();
  struct curl_slist *h = NULL;
  if (token) {
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    h = curl_slist_append(h, auth);
  }
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, f);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
  *status = 0;
  if (curl_easy_perform(c) == CURLE_OK)
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  fclose(f);
  json_t *j = body ? json_loads(body, 0, NULL) : NULL;
  free(body);
  return j;
}

json_t *gam_node(const gam_proc *g, const char *id) {
  char path[256];
  long status;
  snprintf(path, sizeof path, "/v1/nodes/%s", id);
  json_t *j = gam_http(g, "GET", path, NULL, &status);
  json_t *inner = j ? json_object_get(j, "node") : NULL;
  json_t *node = j && status == 200 ? json_incref(inner ? inner : j) : NULL;
  json_decref(j);
  return node;
}

int json_has_string(const json_t *array, const char *s) {
  size_t i;
  json_t *v;
  json_array_foreach(array, i, v) if (json_is_string(v) &&
                                      strcmp(json_string_value(v), s) == 0)
      return 1;
  return 0;
}
