/* log.c - stderr logging with journald priority prefixes. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

_Atomic int log_threshold = LOG_LVL_INFO;

void log_write(int level, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  int n = snprintf(line, sizeof line, "<%d>", level);
  va_start(ap, fmt);
  vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
  va_end(ap);
  /* one write per line so concurrent lines do not interleave */
  size_t len = strlen(line);
  if (len < sizeof line - 1) {
    line[len++] = '\n';
  } else {
    line[sizeof line - 2] = '\n';
    len = sizeof line - 1;
  }
  fwrite(line, 1, len, stderr);
}

int log_level_parse(const char *name) {
  static const struct { const char *name; int level; } levels[] = {
    {"error", LOG_LVL_ERR},   {"warning", LOG_LVL_WARN},
    {"notice", LOG_LVL_NOTICE}, {"info", LOG_LVL_INFO},
    {"debug", LOG_LVL_DEBUG},
  };
  for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
    if (strcmp(name, levels[i].name) == 0) return levels[i].level;
  return -1;
}
