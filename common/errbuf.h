/*
 * errbuf.h - the one way a message goes into a caller's error buffer.
 *
 * Parsers, accelerators and config code take "char *err, size_t err_len"
 * and fill it when they fail; this is the printf they all use, so that
 * each does not carry its own copy.
 */
#ifndef EMBER_ERRBUF_H
#define EMBER_ERRBUF_H

#include <stddef.h>

/* errbuf_printf: format into buf (at most len bytes, NUL included,
 * truncated to fit) and return code, so that a failure reads
 *   return errbuf_printf(err, err_len, EMBER_EINVAL, "bad %s", what);
 * A NULL buf or a len of 0 writes nothing (the caller asked for no text);
 * code is returned all the same. Thread-safe. */
int errbuf_printf(char *buf, size_t len, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
