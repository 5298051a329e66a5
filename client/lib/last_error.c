/* last_error.c - the thread's last error text (ember_last_error). */
#include <stdarg.h>
#include <stdio.h>

#include "ember/ember.h"
#include "last_error.h"

static __thread char last_error[EMBER__ERROR_LEN];

void ember__client_set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
}

const char *ember_last_error(void) { return last_error; }
