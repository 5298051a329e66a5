/* ctl_http.c - emberctl's requests to the GAM's admin API (libcurl). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "ctl.h"

static size_t collect(char *p, size_t size, size_t n, void *user) {
  return fwrite(p, size, n, user);
}

/* The token: the file's first line. NULL with a message on failure. */
static char *read_token(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "emberctl: cannot read the token file %s: %m\n", path);
    return NULL;
  }
  char line[512];
  char *tok = fgets(line, sizeof line, f) ? line : NULL;
  fclose(f);
  if (!tok) {
    fprintf(stderr, "emberctl: the token file %s is empty\n", path);
    return NULL;
  }
  tok[strcspn(tok, "\r\n")] = '\0';
  return strdup(tok);
}

int ctl_request(const ctl_options *o, const char *method, const char *path,
                json_t **out) {
  *out = NULL;
  char url[1024], *token = NULL, *auth = NULL;
  snprintf(url, sizeof url, "%s%s", o->gam, path);
  int change = strcmp(method, "GET") != 0;
  if (change && !(token = read_token(o->token_file))) return 1;
  char *body = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&body, &len);
  CURL *c = curl_easy_init();
  struct curl_slist *headers = NULL;
  if (!f || !c) {
    fprintf(stderr, "emberctl: out of memory\n");
    return 1;
  }
  if (token && asprintf(&auth, "Authorization: Bearer %s", token) > 0)
    headers = curl_slist_append(headers, auth);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, f);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, o->timeout_s);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  if (change) curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
  CURLcode rc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(c);
  fclose(f);
  free(auth);
  free(token);
  int failed = 0;
  if (rc != CURLE_OK) {
    fprintf(stderr, "emberctl: cannot reach the GAM at %s: %s\n", o->gam,
            curl_easy_strerror(rc));
    failed = 1;
  } else {
    json_error_t jerr;
    *out = json_loads(body ? body : "", 0, &jerr);
    if (status < 200 || status > 299) {
      json_t *e = *out ? json_object_get(*out, "error") : NULL;
      const char *msg = e ? json_string_value(json_object_get(e, "message"))
                          : NULL;
      fprintf(stderr, "emberctl: %s %s: HTTP %ld: %s\n", method, path, status,
              msg ? msg : "no error message");
      failed = 1;
    } else if (!*out) {
      fprintf(stderr, "emberctl: %s %s: the reply is not JSON: %s\n", method,
              path, jerr.text);
      failed = 1;
    }
  }
  free(body);
  if (failed) {
    json_decref(*out);
    *out = NULL;
  }
  return failed;
}
