/*
 * harness.h - start the real ember-nam for integration tests: a private
 * directory, a unix socket and a free TCP port, and readiness read from the
 * daemon's own sd_notify READY=1 (NOTIFY_SOCKET), never a sleep.
 */
#ifndef EMBER_TEST_HARNESS_H
#define EMBER_TEST_HARNESS_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include "ember/ember.h"

typedef struct nam_proc {
  pid_t pid;
  char dir[256];
  char sock[320];
  char unix_addr[340];
  char tcp_addr[64];
  int port;
  char notify_path[320];
  int notify_fd;
  char log_path[320];
  const char *config_path;  /* passed as --config when set */
  /* WATCHDOG_USEC for the daemon (0: none). Nothing reads the notify socket
   * after READY unless the test does, and a full datagram queue blocks
   * sd_notify: keep it long, and read the socket. */
  unsigned long long watchdog_usec;
  /* RLIMIT_NOFILE, soft and hard, for the daemon (0: the test's own); set
   * by the caller before nam_start_config and kept, as watchdog_usec */
  unsigned long nofile;
  const char *sets[16];
  size_t n_sets;
} nam_proc;

/* A TCP port on 127.0.0.1 that is free now (the kernel's pick), or -1. */
int free_tcp_port(void);

/* test_part - whether a test whose parts are named on its command line
 * (argv[1], if given: that one only) runs part name. */
int test_part(int argc, char **argv, const char *name);

/* Start ember-nam with --set overrides (NULL-terminated, may be NULL;
 * an item that starts with "--" is passed as an option, e.g. --label=x);
 * waits for READY=1 (10 s). Returns 0, or -1 with a message on stderr. */
int nam_start(nam_proc *p, const char *const *sets);
/* nam_start_config: the same with --config path; p->watchdog_usec and
 * p->nofile, set by the caller before, are kept. */
int nam_start_config(nam_proc *p, const char *path, const char *const *sets);
/* Start again with the same socket, port and settings. */
int nam_restart(nam_proc *p);
/* nam_wait_notify - wait up to 10 s for an sd_notify message from the
 * daemon that contains what ("WATCHDOG=1"); 0, or -1 on time-out. Reading
 * also keeps the notify socket from filling up. */
int nam_wait_notify(nam_proc *p, const char *what);
void nam_kill9(nam_proc *p);
/* SIGTERM, then wait; returns the exit status (or -1). */
int nam_stop(nam_proc *p);
/* Stop if running and remove the directory. */
void nam_cleanup(nam_proc *p);

/* nam_http_get - GET path from 127.0.0.1:port (HTTP/1.0); returns the
 * status and the body in *body (malloc'd, NUL-terminated), or -1. */
int nam_http_get(int port, const char *path, char **body);

/* Pairs from the bundled test data. */
typedef struct pair_set {
  size_t n;
  ember_seq *queries, *refs;
  char *storage;
} pair_set;

/* fasta_read - the sequences of one of our own FASTA files; returns the
 * storage the residues point into (free it), NULL on failure. */
char *fasta_read(const char *path, ember_seq **seqs, size_t *n);

/* Load the first max pairs (0: all) of the DNA test pairs. */
int pairs_load_dna(pair_set *ps, size_t max);
void pairs_free(pair_set *ps);

/* Reference answers from the in-process scalar kernel. */
int pairs_reference(const pair_set *ps, const ember_sw_params *params,
                    ember_sw_result *out);

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

#define CHECK_EQ(a, b)                                                       \
  do {                                                                       \
    long long va_ = (long long)(a), vb_ = (long long)(b);                    \
    if (va_ != vb_) {                                                        \
      fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__,    \
              __LINE__, #a, #b, va_, vb_);                                   \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

/* pairs_reference_default - reference answers for the default DNA scoring,
 * malloc'd (exits on failure). */
ember_sw_result *pairs_reference_default(const pair_set *ps);

/* A long batch (the test pairs repeated) aligned on a thread of its own,
 * so that a test can act on the NAM in the middle of it. */
typedef struct align_job {
  ember_client *c;
  size_t n, base_n, pairs_per_task;
  ember_seq *q, *r;
  ember_sw_result *got;
  ember_sw_report rep;
  _Atomic size_t done;
  int rc;
  unsigned long thread;
} align_job;

void align_job_start(align_job *j, ember_client *c, const pair_set *ps,
                     size_t copies, size_t pairs_per_task);
/* Wait until at least a tenth of the batch is done; returns how much is. */
size_t align_job_wait_tenth(align_job *j);
void align_job_join(align_job *j);
/* Results equal to want (the answers for one copy of the pairs). */
size_t align_job_equal(const align_job *j, const ember_sw_result *want);
void align_job_free(align_job *j);

/* Compare results; prints the first difference. Returns the count equal. */
size_t results_compare(const ember_sw_result *got, const ember_sw_result *want,
                       size_t n, const char *what);

#endif
