/* last_error.h - the detail text ember_last_error() returns: one buffer
 * per thread (last_error.c), set by whichever file saw the error. */
#ifndef EMBER_LAST_ERROR_H
#define EMBER_LAST_ERROR_H

#define EMBER__ERROR_LEN 512 /* the buffer's size, with its '\0' */

void ember__client_set_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

#endif
