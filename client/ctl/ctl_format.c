/* ctl_format.c - the cells of emberctl's tables: ages, times, lists, load
 * (ctl.h). */
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "ctl.h"

const char *ctl_format_age(int64_t ms, char *buf, size_t len) {
  if (ms < 0) ms = 0;
  int64_t s = ms / 1000;
  if (ms < 1000)
    snprintf(buf, len, "%" PRId64 "ms", ms);
  else if (ms < 10000)
    snprintf(buf, len, "%" PRId64 ".%" PRId64 "s", s, (ms % 1000) / 100);
  else if (s < 60)
    snprintf(buf, len, "%" PRId64 "s", s);
  else if (s < 3600)
    snprintf(buf, len, "%" PRId64 "m%02" PRId64 "s", s / 60, s % 60);
  else if (s < 86400)
    snprintf(buf, len, "%" PRId64 "h%02" PRId64 "m", s / 3600, s / 60 % 60);
  else
    snprintf(buf, len, "%" PRId64 "d%02" PRId64 "h", s / 86400, s / 3600 % 24);
  return buf;
}

const char *ctl_format_time(int64_t unix_ms, char *buf, size_t len) {
  time_t t = (time_t)(unix_ms / 1000);
  struct tm tm;
  if (!localtime_r(&t, &tm) || strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm) == 0)
    snprintf(buf, len, "%" PRId64, unix_ms);
  return buf;
}

/* Append s to buf (used bytes *at), cutting with "..." when it does not
 * fit. */
static void append(char *buf, size_t len, size_t *at, const char *s) {
  size_t n = strlen(s);
  if (*at + n < len) {
    memcpy(buf + *at, s, n + 1);
    *at += n;
  } else if (len >= 4) {
    memcpy(buf + len - 4, "...", 4);
    *at = len - 1;
  }
}

const char *ctl_format_list(const json_t *arr, const char *sep, char *buf,
                            size_t len) {
  size_t at = 0, i;
  json_t *v;
  if (!len) return buf;
  buf[0] = '\0';
  json_array_foreach(arr, i, v) {
    const char *s = json_string_value(v);
    if (!s) continue;
    if (at) append(buf, len, &at, sep);
    append(buf, len, &at, s);
  }
  if (!at) snprintf(buf, len, "-");
  return buf;
}

const char *ctl_format_load(const json_t *load, char *buf, size_t len) {
  size_t at = 0, i;
  json_t *l;
  if (!len) return buf;
  buf[0] = '\0';
  json_array_foreach(load, i, l) {
    json_int_t queued = json_integer_value(json_object_get(l, "queued"));
    double used = json_number_value(json_object_get(l, "utilization"));
    if (queued <= 0 && used <= 0) continue;
    char one[96];
    int n = snprintf(one, sizeof one, "%s %.0f%%", ctl_str(l, "accelerator"),
                     100 * used);
    if (queued > 0 && n > 0 && (size_t)n < sizeof one)
      snprintf(one + n, sizeof one - (size_t)n, " %" JSON_INTEGER_FORMAT "q",
               queued);
    if (at) append(buf, len, &at, ", ");
    append(buf, len, &at, one);
  }
  if (!at) snprintf(buf, len, "idle");
  return buf;
}

const char *ctl_format_int(const json_t *v, char *buf, size_t len) {
  if (json_is_integer(v))
    snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
  else
    snprintf(buf, len, "-");
  return buf;
}

const char *ctl_str(const json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s && s[0] ? s : "-";
}
