/* cli.c - helpers shared by the subcommands of the `ember` tool. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "ember/ember.h"

static void verror(const char *cmd, const char *fmt, va_list ap) {
  fprintf(stderr, "ember: %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
}

void cli_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verror(cmd, fmt, ap);
  va_end(ap);
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verror(cmd, fmt, ap);
  va_end(ap);
  fprintf(stderr, "Try 'ember help %s' for the options.\n", cmd);
  return CLI_USAGE;
}

int cli_getopt_error(const char *cmd, int c, char **argv) {
  /* getopt_long has already stepped past the offending argument */
  const char *arg = optind > 0 ? argv[optind - 1] : "?";
  if (c == ':') return cli_usage_error(cmd, "option '%s' needs a value", arg);
  if (optopt && !(arg[0] == '-' && arg[1] == '-'))
    return cli_usage_error(cmd, "unknown option '-%c'", optopt);
  /* "--name=value" names an option that takes none, or an unknown one */
  const char *eq = strchr(arg, '=');
  if (optopt && eq)
    return cli_usage_error(cmd, "option '%.*s' takes no value", (int)(eq - arg),
                           arg);
  return cli_usage_error(cmd, "unknown option '%s'", arg);
}

int cli_parse_int(const char *cmd, const char *option, const char *text,
                  long min, long max, int *out) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (text[0] == '\0' || *end != '\0' || text[0] == ' ' || text[0] == '\t')
    return cli_usage_error(cmd, "%s: '%s' is not a whole number", option, text);
  if (errno == ERANGE || v < min || v > max || v < INT_MIN || v > INT_MAX)
    return cli_usage_error(cmd, "%s: %s is out of range [%ld, %ld]", option,
                           text, min, max);
  *out = (int)v;
  return 0;
}

const char *cli_group_digits(uint64_t v, char *buf, size_t len) {
  char digits[32];
  int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)v);
  size_t o = 0;
  for (int i = 0; i < n && o + 1 < len; i++) {
    if (i > 0 && (n - i) % 3 == 0) {
      buf[o++] = ',';
      if (o + 1 >= len) break;
    }
    buf[o++] = digits[i];
  }
  if (len) buf[o < len ? o : len - 1] = '\0';
  return buf;
}

const char *cli_kind_counts(char *buf, size_t len, const char *const *names,
                            const size_t *counts, size_t n) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    if (!counts[i]) continue;
    int k = snprintf(buf + used, len - used, "%s%s %zu", used ? ", " : "",
                     names[i], counts[i]);
    if (k < 0 || (size_t)k >= len - used) break;
    used += (size_t)k;
  }
  return buf;
}

const char *cli_format_wall(uint64_t ns, char *buf, size_t len) {
  double ms = (double)ns / 1e6;
  snprintf(buf, len, ms < 10 ? "%.1f ms" : ms < 10000 ? "%.0f ms" : "%.1f s",
           ms < 10000 ? ms : ms / 1000);
  return buf;
}

/* Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0. s is NUL-terminated,
 * so reading stops at the terminator, which is never a continuation byte. */
static size_t utf8_length(const unsigned char *s) {
  unsigned char c = s[0];
  unsigned char lo = 0x80, hi = 0xBF;
  size_t n;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < n; i++)
    if (s[i] < 0x80 || s[i] > 0xBF) return 0;
  return n;
}

json_t *cli_json_text(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  size_t len = strlen(s), o = 0;
  char *clean = malloc(3 * len + 1); /* every byte bad: 3 bytes each */
  if (!clean) return NULL;
  for (size_t i = 0; i < len;) {
    size_t n = utf8_length(p + i);
    if (n == 0) {
      memcpy(clean + o, "\xEF\xBF\xBD", 3); /* U+FFFD */
      o += 3;
      i++;
    } else {
      memcpy(clean + o, p + i, n);
      o += n;
      i += n;
    }
  }
  json_t *j = json_stringn(clean, o);
  free(clean);
  return j;
}

#define PROGRESS_MIN_NS (2000 * 1000000ull)
#define PROGRESS_EVERY_NS (100 * 1000000ull)

void cli_progress_show(cli_progress *pr, size_t done, size_t total,
                       size_t min_total, const char *verb, const char *unit) {
  cli_progress_show_note(pr, done, total, min_total, verb, unit, NULL);
}

void cli_progress_show_note(cli_progress *pr, size_t done, size_t total,
                            size_t min_total, const char *verb,
                            const char *unit, const char *note) {
  if (!pr->tty || total == 0) return;
  uint64_t now = clock_now_ns();
  if (!pr->shown && total <= min_total && now - pr->start_ns < PROGRESS_MIN_NS)
    return;
  if (pr->shown && now - pr->last_ns < PROGRESS_EVERY_NS && done != total)
    return;
  char d[32], t[32];
  int w = fprintf(stderr, "\r%s %s/%s %s (%d%%)%s%s", verb,
                  cli_group_digits(done, d, sizeof d),
                  cli_group_digits(total, t, sizeof t), unit,
                  (int)((double)done * 100.0 / (double)total),
                  note ? ", " : "", note ? note : "");
  if (w > 0 && w - 1 < pr->width) fprintf(stderr, "%*s", pr->width - (w - 1), "");
  if (w > 0 && w - 1 > pr->width) pr->width = w - 1;
  fflush(stderr);
  pr->shown = 1;
  pr->last_ns = now;
}

void cli_progress_clear(cli_progress *pr) {
  if (pr->shown) fprintf(stderr, "\r%*s\r", pr->width, "");
}

/* "--platform: unknown kind 'gpu' (cpu, opencl or fpga-emu)" */
int cli_check_platform_kind(const char *cmd, const char *option,
                            const char *kind) {
  char kinds[128] = "";
  size_t used = 0;
  for (size_t i = 0; ember_platform_kind(i); i++) {
    if (strcmp(ember_platform_kind(i), kind) == 0) return 0;
    const char *sep = i == 0 ? "" : ember_platform_kind(i + 1) ? ", " : " or ";
    int n = snprintf(kinds + used, sizeof kinds - used, "%s%s", sep,
                     ember_platform_kind(i));
    if (n < 0 || (size_t)n >= sizeof kinds - used) break;
    used += (size_t)n;
  }
  return cli_usage_error(cmd, "%s: unknown kind '%s' (%s)", option, kind,
                         kinds);
}
