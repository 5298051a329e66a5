/*
 * process_metrics.h - the standard Prometheus process_* metrics of the
 * calling process, read from /proc/self (Linux), shared by ember-nam and
 * ember-gam:
 *
 *   process_cpu_seconds_total       user + system CPU time
 *   process_resident_memory_bytes   resident set size
 *   process_virtual_memory_bytes    virtual memory size
 *   process_open_fds                open file descriptors
 *   process_max_fds                 RLIMIT_NOFILE (soft)
 *   process_start_time_seconds      start time, seconds since the epoch
 *
 * Thread safety: safe from any thread; it only reads /proc.
 */
#ifndef EMBER_PROCESS_METRICS_H
#define EMBER_PROCESS_METRICS_H

#include <stdint.h>
#include <stdio.h>

typedef struct process_metrics {
  double cpu_seconds;
  uint64_t resident_bytes, virtual_bytes;
  uint64_t open_fds, max_fds;   /* max_fds 0: unlimited */
  double start_time_seconds;
} process_metrics;

/* Read the figures now. 0, or -1 when /proc/self could not be read (the
 * fields then hold what could be read, the rest 0). */
int process_metrics_read(process_metrics *out);

/* Write the families above as Prometheus text to f (HELP and TYPE lines
 * included). A family whose figure could not be read is left out. */
void process_metrics_write(FILE *f);

#endif
