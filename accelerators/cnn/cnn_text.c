/* cnn_text.c - see cnn_text.h. */
#include "cnn_text.h"

#include <stdarg.h>
#include <stdio.h>

void cnn_text_put(cnn_text *o, const char *f, ...) {
  va_list ap;
  size_t room = o->need < o->len ? o->len - o->need : 0;
  int n;
  va_start(ap, f);
  n = vsnprintf(room ? o->buf + o->need : NULL, room, f, ap);
  va_end(ap);
  if (n > 0) o->need += (size_t)n;
}
