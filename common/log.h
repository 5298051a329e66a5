/*
 * log.h - the daemons' one logging macro.
 *
 * Lines go to stderr with a syslog priority prefix ("<3>") that journald
 * understands. The level is checked before anything is formatted. Libraries
 * (engine, accelerators, libember) never log: they return errors.
 */
#ifndef EMBER_LOG_H
#define EMBER_LOG_H

enum log_level { LOG_LVL_ERR = 3, LOG_LVL_WARN = 4, LOG_LVL_NOTICE = 5,
                 LOG_LVL_INFO = 6, LOG_LVL_DEBUG = 7 };

/* Atomic: a daemon's loop thread changes it on SIGHUP while its other
 * threads (the GAM's admin API, the engine's workers) log. */
extern _Atomic int log_threshold;

void log_write(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* log_level_parse: "error", "warning", "notice", "info", "debug" -> level,
 * or -1 when the name is unknown. */
int log_level_parse(const char *name);

#define LOG(level, ...)                                                      \
  do {                                                                       \
    if ((level) <= log_threshold) log_write((level), __VA_ARGS__);           \
  } while (0)

#define log_err(...)    LOG(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...)   LOG(LOG_LVL_WARN, __VA_ARGS__)
#define log_notice(...) LOG(LOG_LVL_NOTICE, __VA_ARGS__)
#define log_info(...)   LOG(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...)  LOG(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
