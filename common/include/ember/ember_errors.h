/*
 * ember_errors.h - the one list of ember error codes.
 *
 * Every ember function that can fail returns 0 or one of these negative
 * values. The same numbers travel in Error frames on the wire, so a value is
 * never renumbered or reused; new codes are appended at the end.
 */
#ifndef EMBER_ERRORS_H
#define EMBER_ERRORS_H

#define EMBER_ERRNO_MAP(X)                                                   \
  X(EINVAL,      -1, "invalid argument")                                     \
  X(ENOMEM,      -2, "out of memory")                                        \
  X(EPROTO,      -3, "protocol error")                                       \
  X(ETOOBIG,     -4, "over the size limit")                                  \
  X(EVERSION,    -5, "protocol version mismatch")                            \
  X(ENOACCEL,    -6, "unknown accelerator")                                  \
  X(ENOPLATFORM, -7, "no platform can run the task")                         \
  X(ENOTFOUND,   -8, "not found")                                            \
  X(ECONNECT,    -9, "cannot connect")                                       \
  X(ECONNLOST,  -10, "connection lost")                                      \
  X(ETIMEDOUT,  -11, "timed out")                                            \
  X(ECANCELED,  -12, "canceled")                                             \
  X(EBUSY,      -13, "over a limit, try again later")                        \
  X(EIO,        -14, "input/output error")                                   \
  X(EPARAM,     -15, "invalid parameters")                                   \
  X(EBLOCK,     -16, "bad block")                                            \
  X(ECONFIG,    -17, "configuration error")                                  \
  X(ESHUTDOWN,  -18, "shutting down")                                        \
  X(EFORMAT,    -19, "malformed input")                                      \
  X(EINTERNAL,  -20, "internal error")                                       \
  X(EPLATFORM,  -21, "platform failure")                                   \
  X(ELEASE,     -22, "no valid lease")                                     \
  X(EDENIED,    -23, "permission denied")                                  \
  X(ESTATE,     -24, "block state lost or untrusted")

#define EMBER_ERRNO_ENUM_(name, value, text) EMBER_##name = (value),
typedef enum ember_error {
  EMBER_OK = 0,
  EMBER_ERRNO_MAP(EMBER_ERRNO_ENUM_)
} ember_error;
#undef EMBER_ERRNO_ENUM_

/* ember_strerror: a static, human-readable text for an error code
 * (0 gives "success", an unknown value "unknown error"). Thread-safe. */
const char *ember_strerror(int code);

/* ember_errname: the code's symbolic name without the prefix, e.g. "EPARAM". */
const char *ember_errname(int code);

#endif
