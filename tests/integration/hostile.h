/*
 * hostile.h - what the tests of ember-nam under attack share: what the
 * daemon holds (RSS, descriptors, CPU, log bytes, from /proc and its log),
 * a good client that must be served while the attack goes on (its own
 * connection each time: connect, Hello, a Stats round trip, within a
 * deadline, never exiting the test), and attackers in a process of their
 * own, so that the daemon's CPU is the daemon's.
 */
#ifndef EMBER_TEST_HOSTILE_H
#define EMBER_TEST_HOSTILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"

/* Windows of attack: a few seconds, less under a sanitizer. */
#ifdef EMBER_SANITIZED
#define HOSTILE_SCALE(ms) ((ms) / 2)
#else
#define HOSTILE_SCALE(ms) (ms)
#endif

/* hostile_window_ms - an attack's window: EMBER_ATTACK_MS when set (to
 * measure a long attack by hand, e.g. 60000), else default_ms scaled. */
int hostile_window_ms(int default_ms);

typedef struct nam_usage {
  long rss_kb;      /* VmRSS */
  int fds;          /* entries of /proc/PID/fd */
  double cpu_s;     /* user + system */
  long log_bytes;   /* the daemon's log file */
} nam_usage;

/* Wait (up to 10 s) until the daemon's start-up work is done: its CPU
 * time stands still for 300 ms. */
void nam_wait_idle(const nam_proc *p);

/* What the daemon holds now (exits the test if /proc cannot be read). */
void nam_usage_read(const nam_proc *p, nam_usage *u);
/* "rss 91 MB, 12 fds, cpu 0.31 s, log 2.1 KB", into buf. */
const char *nam_usage_text(const nam_usage *u, char *buf, size_t len);

uint64_t hostile_now_ms(void);

/* One good client: its own connection to the unix socket (tcp 0) or the
 * TCP port from 127.0.0.1 (tcp 1), Hello, then a StatsRequest answered,
 * all within timeout_ms. 0 and the time in *ms, or -1 with what went
 * wrong in why (an Error's text, "timed out", ...). */
int good_client(const nam_proc *p, int tcp, int timeout_ms, double *ms,
                char *why, size_t why_len);

typedef struct probe_stats {
  unsigned tries, served;
  double worst_ms, sum_ms;
  char first_failure[256];
} probe_stats;

/* good_client over and over, unix and TCP in turn, every interval_ms for
 * window_ms, counting into u and t. */
void probe_window(const nam_proc *p, int window_ms, int interval_ms,
                  int timeout_ms, probe_stats *u, probe_stats *t);
/* The log bytes an attack of ms may add: a line a second for each kind
 * of refusal or drop, and the good clients' own (connected, disconnected
 * at info) for each of their tries. */
long log_allowance(const probe_stats *u, const probe_stats *t, int ms);

/* "unix 40/40 served (worst 1.2 ms)"; both must be all served. */
void probe_report(const char *what, const probe_stats *u, const probe_stats *t);
void probe_check(const probe_stats *u, const probe_stats *t);

/* A stream socket to the NAM: unix, or TCP from source address src
 * (NULL: any). Nonblocking connect: -1 when it failed at once (a full
 * backlog, no descriptors). */
int hostile_connect(const nam_proc *p, int tcp, const char *src);

/* fn(arg) in a child process until attack_stop kills it. */
pid_t attack_start(void (*fn)(void *arg), void *arg);
void attack_stop(pid_t pid);

/* CHECK_RSS - an RSS bound, the plain build's to check: under ASan freed
 * memory waits in a quarantine and every byte has its shadow, so the
 * daemon's RSS says nothing about what it holds (hundreds of MB more). */
#ifdef EMBER_SANITIZED
#define CHECK_RSS(cond) ((void)sizeof(cond)) /* not evaluated */
#else
#define CHECK_RSS(cond) CHECK(cond)
#endif

#endif
