/* ctl_http.c - emberctl's requests to the GAM's admin API: libcurl's easy
 * interface, jansson for the replies (ctl.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "ctl.h"

#define REPLY_MAX (256u << 20)  /* a cluster of 10,000 nodes is ~10 MiB */
#define TOKEN_FILE_MAX 4096

typedef struct reply {
  char *data;
  size_t len, cap;
  bool too_big, no_memory;
} reply;

static size_t collect(char *p, size_t size, size_t n, void *user) {
  reply *r = user;
  size_t add = size * n;
  if (add > REPLY_MAX - r->len) {
    r->too_big = true;
    return 0;  /* curl stops with CURLE_WRITE_ERROR */
  }
  if (r->len + add + 1 > r->cap) {
    size_t cap = r->cap ? r->cap : 4096;
    while (cap < r->len + add + 1) cap *= 2;
    char *grown = realloc(r->data, cap);
    if (!grown) {
      r->no_memory = true;
      return 0;
    }
    r->data = grown;
    r->cap = cap;
  }
  memcpy(r->data + r->len, p, add);
  r->len += add;
  r->data[r->len] = '\0';
  return add;
}

char *ctl_read_token(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    ctl_error("cannot read the admin token file %s: %s (see --token-file)",
              path, strerror(errno));
    return NULL;
  }
  char buf[TOKEN_FILE_MAX + 1];
  size_t n = 0;
  ssize_t got = 0;
  while (n < sizeof buf - 1 &&
         ((got = read(fd, buf + n, sizeof buf - 1 - n)) > 0 ||
          (got < 0 && errno == EINTR)))
    if (got > 0) n += (size_t)got;
  int read_errno = errno;
  close(fd);
  if (got < 0) {
    ctl_error("cannot read the admin token file %s: %s", path,
              strerror(read_errno));
    return NULL;
  }
  if (n == sizeof buf - 1) {
    ctl_error("the admin token file %s is %d bytes or more: not a token",
              path, TOKEN_FILE_MAX);
    return NULL;
  }
  buf[n] = '\0';
  char *start = buf, *end = buf + n;
  while (start < end && strchr(" \t\r\n", *start)) start++;
  while (end > start && strchr(" \t\r\n", end[-1])) end--;
  for (char *p = start; p < end; p++)
    if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f) {
      ctl_error("the admin token file %s holds more than one line of visible "
                "characters", path);
      return NULL;
    }
  if (start == end) {
    ctl_error("the admin token file %s is empty", path);
    return NULL;
  }
  *end = '\0';
  char *token = strdup(start);
  memset(buf, 0, sizeof buf);
  if (!token) ctl_error("out of memory");
  return token;
}

char *ctl_path(const char *prefix, ...) {
  CURL *c = curl_easy_init();
  size_t len = strlen(prefix);
  char *out = c ? malloc(len + 1) : NULL;
  if (out) memcpy(out, prefix, len + 1);
  va_list ap;
  va_start(ap, prefix);
  for (const char *piece; out && (piece = va_arg(ap, const char *));) {
    char *escaped = curl_easy_escape(c, piece, 0);
    size_t n = escaped ? strlen(escaped) : 0;
    char *grown = escaped ? realloc(out, len + n + 2) : NULL;
    if (!grown) {
      free(out);
      out = NULL;
    } else {
      out = grown;
      if (len && out[len - 1] != '/') out[len++] = '/';
      memcpy(out + len, escaped, n + 1);
      len += n;
    }
    curl_free(escaped);
  }
  va_end(ap);
  curl_easy_cleanup(c);
  return out;
}

int ctl_print_json(const json_t *j) {
  if (json_dumpf(j, stdout, JSON_INDENT(2)) != 0 || putchar('\n') == EOF)
    return ctl_error("cannot write standard output");
  return CTL_OK;
}

/* The message for an HTTP error: the server's own when it sent one. */
static int http_error(const ctl_options *o, long status, const json_t *body) {
  const json_t *e = json_object_get(body, "error");
  const char *message = json_string_value(json_object_get(e, "message"));
  const char *code = json_string_value(json_object_get(e, "code"));
  if (!message)
    return ctl_error("HTTP %ld from %s (is it ember-gam's admin API?)", status,
                     o->gam);
  if (status == 401)
    return ctl_error("%s (HTTP 401, %s; the token comes from %s)", message,
                     code ? code : "?", o->token_file);
  return ctl_error("%s (HTTP %ld, %s)", message, status, code ? code : "?");
}

static int perform(const ctl_options *o, CURL *c, const char *method,
                   const char *url, const char *auth, reply *r, long *status) {
  char detail[CURL_ERROR_SIZE] = "";
  struct curl_slist *headers = curl_slist_append(NULL, "Accept: application/json");
  if (headers && auth) {
    struct curl_slist *more = curl_slist_append(headers, auth);
    if (!more) curl_slist_free_all(headers);
    headers = more;
  }
  if (!headers) return ctl_error("out of memory");
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, detail);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, o->timeout_ms);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, o->timeout_ms);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOPROXY, "localhost,127.0.0.1,::1");
  curl_easy_setopt(c, CURLOPT_USERAGENT, "emberctl/" EMBER_VERSION);
  if (strcmp(method, "GET") != 0) {
    /* no body, but a Content-Length: 0 so that every server takes it */
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  }
  CURLcode rc = curl_easy_perform(c);
  curl_slist_free_all(headers);
  if (r->no_memory) return ctl_error("out of memory reading the reply");
  if (r->too_big)
    return ctl_error("the reply from %s is over %u MiB", o->gam,
                     REPLY_MAX >> 20);
  if (rc != CURLE_OK)
    return ctl_error("cannot reach the GAM at %s: %s", o->gam,
                     detail[0] ? detail : curl_easy_strerror(rc));
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
  return CTL_OK;
}

int ctl_request(const ctl_options *o, const char *method, const char *path,
                json_t **out) {
  *out = NULL;
  char *token = NULL, *auth = NULL, *url = NULL;
  if (strcmp(method, "GET") != 0 && !(token = ctl_read_token(o->token_file)))
    return CTL_FAIL;
  CURL *c = curl_easy_init();
  reply r = {0};
  long status = 0;
  int rc = CTL_FAIL;
  /* asprintf leaves its pointer undefined on failure: reset it */
  if (asprintf(&url, "%s%s", o->gam, path) < 0) url = NULL;
  if (token && asprintf(&auth, "Authorization: Bearer %s", token) < 0)
    auth = NULL;
  if (!c || !url || (token && !auth))
    ctl_error("out of memory");
  else
    rc = perform(o, c, method, url, auth, &r, &status);
  if (rc == CTL_OK) {
    json_error_t jerr;
    json_t *body = r.data ? json_loadb(r.data, r.len, 0, &jerr) : NULL;
    if (status < 200 || status > 299) {
      rc = http_error(o, status, body);
      json_decref(body);
    } else if (!body) {
      rc = ctl_error("the reply to %s %s is not JSON: %s", method, path,
                     r.data ? jerr.text : "empty");
    } else {
      *out = body;
    }
  }
  curl_easy_cleanup(c);
  if (token) memset(token, 0, strlen(token));
  if (auth) memset(auth, 0, strlen(auth));
  free(token);
  free(auth);
  free(url);
  free(r.data);
  return rc;
}
