/* errbuf.c - a message into a caller's error buffer (errbuf.h). */
#include "errbuf.h"

#include <stdarg.h>
#include <stdio.h>

int errbuf_printf(char *buf, size_t len, int code, const char *fmt, ...) {
  if (buf && len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
  }
  return code;
}
