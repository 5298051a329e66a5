/*
 * ember.h - libember, the client library of the ember accelerator service.
 *
 * An application connects to a node accelerator manager (ember-nam) over a
 * unix socket or TCP, or runs the same engine in-process ("embedded"). It
 * hands over input blocks, submits tasks that name an accelerator ("sw")
 * with its parameters, and receives each task's result exactly once: from
 * the NAM, or from the accelerator's CPU code run in-process when the NAM
 * cannot be reached, dies mid-task, or has no platform for the task (the
 * result is then marked as fallen back).
 *
 * Errors: functions return 0 or a negative EMBER_E* code (ember_errors.h);
 * ember_strerror() gives its text and ember_last_error() the detail of the
 * calling thread's last failure.
 *
 * Threads: one ember_client may be shared by any number of threads. Blocks
 * and tasks may be used from any thread, but one task must not be freed
 * while another thread still waits on it.
 *
 * ABI: libember.so.0 keeps its binary interface across 0.x releases. Every
 * struct passed to or filled by the library starts with a size field: set
 * it to sizeof the struct (or leave it 0 for the first release's layout) and
 * a newer library reads and writes only the fields your program knows.
 * Fields are only ever added at the end. Lists the library makes are
 * reached through accessors (ember_listing), strings through pointers.
 */
#ifndef EMBER_H
#define EMBER_H

#include <stddef.h>
#include <stdint.h>

#include <ember/ember_errors.h>
#include <ember/ember_block_flags.h>
#include <ember/ember_version.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EMBER_PROTOCOL_VERSION 3
#define EMBER_DEFAULT_SOCKET "/run/ember/nam.sock"

/* ember_version - the linked library's version ("0.1.0"), which may be
 * newer than the headers' EMBER_VERSION_STRING. */
const char *ember_version(void);

typedef struct ember_client ember_client;
typedef struct ember_block ember_block;
typedef struct ember_task ember_task;

/* ------------------------------------------------------------------------ */
/* Connections                                                              */

/* Options for ember_connect; zero-initialise, then set what you need. */
typedef struct ember_options {
  size_t size;               /* sizeof(ember_options), or 0 (see "ABI") */
  const char *client_name;   /* shown in the NAM's logs; NULL: "libember" */
  unsigned embedded_threads; /* worker threads of an embedded engine or of
                                the CPU fallback; 0: one per core */
  int connect_timeout_ms;    /* 0: 2000 */
  int no_fallback;           /* nonzero: fail tasks instead of running them
                                on the CPU in-process */
  size_t max_frame;          /* largest frame accepted; 0: 64 MiB */
  const char *plugin_dir;    /* accelerator plugins for the in-process
                                engine (embedded mode, CPU fallback): see
                                ember_connect. NULL: $EMBER_PLUGIN_DIR if
                                set, else none; "": none */
  /* How long to wait, in milliseconds, for a NAM that went away (killed,
   * restarted) before failing the tasks that cannot run in-process. While
   * the client is disconnected, such tasks - in flight or submitted then -
   * are kept and sent again, with their input blocks, once it reconnects
   * (with backoff); after the window they complete with EMBER_ECONNLOST.
   * A task cannot run in-process when no_fallback is set, when it requires
   * a platform kind other than "cpu", or when only the NAM knows its
   * accelerator. Tasks that can run in-process fall back at once as
   * before; tasks with out or state blocks complete with EMBER_ESTATE
   * ("Out and state blocks"). The window starts when the connection is
   * lost (or at ember_connect when the NAM could not be reached) and ends
   * at the next successful connect. 0: $EMBER_RECONNECT_WINDOW_MS if set
   * (0 there turns it off), else 10000; negative: off (such tasks fail at
   * once). */
  int reconnect_window_ms;
} ember_options;

/*
 * ember_connect - open a client.
 *
 * address: "unix:PATH", "tcp:HOST:PORT", "embedded", or NULL for the
 * default: $EMBER_NAM if set, else unix:/run/ember/nam.sock if that socket
 * exists, else embedded. opts may be NULL.
 *
 * A NAM that cannot be reached is not an error here: the client starts in
 * fallback and tries to reconnect at later submits (tasks that cannot run
 * in-process wait for it up to opts->reconnect_window_ms). It is an error
 * (EMBER_ECONNECT) only when opts->no_fallback is set, and EMBER_EVERSION
 * when the NAM speaks another protocol version.
 *
 * Plugins: with a plugin directory (opts->plugin_dir, else
 * $EMBER_PLUGIN_DIR), the in-process engine serves its NAME.so plugins
 * beside the built-ins, loaded with ember-nam's checks (plugin_dir in
 * ember-nam's configuration): the directory and each file must belong to
 * root or to the process's user and not be group- or world-writable, not
 * be a symbolic link, export the accelerator entry point of this ABI
 * version, and not reuse a built-in's name. The system's plugin directory
 * is never loaded implicitly. A directory is loaded once per process and
 * its plugins stay loaded until exit; they run inside the application. A
 * refused plugin, or a directory that is missing or unreadable, does not
 * fail ember_connect: it returns 0, and ember_last_error() then names each
 * one with its reason ("plugin DIR/x.so refused (unsafe): writable by its
 * group (mode 0664); ..."); ember_client_stats counts plugins_loaded and
 * plugins_refused. Over a socket the NAM serves its own plugins; the
 * client's serve its CPU fallback only.
 *
 * On success *out owns the client; free it with ember_close().
 */
int ember_connect(const char *address, const ember_options *opts,
                  ember_client **out);

/* ember_close - cancel what is still in flight, wait until it has ended,
 * disconnect and free the client. Release every block and free every task
 * of the client before closing it. ember_close(NULL) is a no-op. */
void ember_close(ember_client *client);

/* ember_is_connected - 1 when the client talks to a NAM right now, 0 when it
 * is embedded or in fallback. */
int ember_is_connected(ember_client *client);

/* ember_client_address - the address this client was opened with (after
 * defaults were applied), e.g. "unix:/run/ember/nam.sock" or "embedded". */
const char *ember_client_address(const ember_client *client);

/* ember_last_error - the detail text of the calling thread's last failed
 * ember call ("" if none). Valid until that thread's next ember call. */
const char *ember_last_error(void);

/* ------------------------------------------------------------------------ */
/* Blocks                                                                   */

/* Block flags: EMBER_BLOCK_CACHE, EMBER_BLOCK_BROADCAST, EMBER_BLOCK_STATE
 * (ember_block_flags.h). */

/*
 * ember_block_alloc - get size writable bytes for a new block.
 *
 * Over a unix socket the memory of a block larger than the NAM's inline
 * limit (64 KiB) is a memfd the NAM will map, so filling it is the only
 * copy the data ever sees; a smaller block travels in the frame (copying a
 * few KiB costs less than a memfd). Write the bytes into *data, then call
 * ember_block_seal(); after sealing the memory is read-only.
 */
int ember_block_alloc(ember_client *client, size_t size, unsigned flags,
                      void **data, ember_block **out);

/* ember_block_seal - make the block immutable and hand it to the NAM. */
int ember_block_seal(ember_block *block);

/* ember_block_create - alloc + copy size bytes from data + seal. */
int ember_block_create(ember_client *client, const void *data, size_t size,
                       unsigned flags, ember_block **out);

/* ember_block_size - the block's size in bytes. */
size_t ember_block_size(const ember_block *block);

/* ember_block_release - drop the application's reference. The NAM frees the
 * block once no task uses it. ember_block_release(NULL) is a no-op. */
void ember_block_release(ember_block *block);

/*
 * Out and state blocks (accel.h has the roles).
 *
 * An out block is made by a task (ember_submit_options.outputs): it stays
 * on the NAM, on the platform that ran the task, and a later task can name
 * it as an input without its bytes crossing the socket. Its size is known
 * once its task succeeded (ember_block_size is 0 before); read it with
 * ember_block_read. Submit a task that reads it after its maker completed
 * (before, the NAM answers EMBER_EBUSY).
 *
 * A state block is made with EMBER_BLOCK_STATE and its first bytes; tasks
 * that name it in ember_submit_options.states update it in place on the
 * one platform that holds it, one task at a time, in the order the NAM
 * dispatches them (submit the next after the previous completed when the
 * order matters). ember_block_read gives its current bytes and version
 * (the number of tasks that updated it); ember_block_sync makes the NAM
 * keep a host copy of the current version.
 *
 * When state cannot be trusted - a task on it failed or hung, its platform
 * failed or was disabled, or the NAM itself went away - nothing runs on it
 * silently: the task that was running completes with EMBER_ESTATE, and so
 * does every later task and read naming the block, until
 * ember_block_restore takes it back to its last synced version (or to its
 * first bytes if it was never synced); the version tells the app which
 * updates to redo. Tasks without out or state blocks are retried on
 * another platform and fall back to the CPU as before; tasks with them
 * never fall back (the blocks live on the NAM): when the NAM cannot be
 * reached they complete with EMBER_ESTATE. After a reconnect, out and
 * state blocks of the old connection are lost (EMBER_ESTATE); make a new
 * state block from your last read.
 */

/* Called once when an asynchronous read is done: status 0 and the bytes
 * (valid during the call only), or an error (EMBER_ESTATE: lost; EMBER_EBUSY:
 * its task has not completed). Runs on a library thread. */
typedef void (*ember_block_read_cb)(ember_block *block, int status,
                                    const void *data, size_t size,
                                    uint64_t version, void *user);

/* ember_block_read_async - read an out or state block's current bytes from
 * where they live. Returns 0 (cb will be called), or an error (cb will
 * not be). Input blocks are read locally. Keep the block until cb ran. */
int ember_block_read_async(ember_block *block, ember_block_read_cb cb,
                           void *user);

/* ember_block_read - the blocking form: *data gets a malloc'd copy (free it
 * with free()), *size its size, *version (may be NULL) a state's version.
 * Returns 0 or the error. */
int ember_block_read(ember_block *block, void **data, size_t *size,
                     uint64_t *version);

/* ember_block_sync - make the NAM keep a host copy of a state block's
 * current version (what ember_block_restore goes back to). Blocks until it
 * is kept; *version (may be NULL) gets that version. */
int ember_block_sync(ember_block *block, uint64_t *version);

/* ember_block_restore - take a state block back to its last synced
 * version: it is trusted again, and its next task uploads it anew.
 * *version (may be NULL) gets that version. EMBER_EBUSY while a task that
 * names the block is queued or running (a restore never changes the bytes
 * a submitted task runs on: wait for your tasks on it to complete, then
 * restore); EMBER_EINVAL for a block that is not state. */
int ember_block_restore(ember_block *block, uint64_t *version);

/* ------------------------------------------------------------------------ */
/* Tasks                                                                    */

/* Where and how a finished task ran. Times are in nanoseconds. */
typedef struct ember_task_info {
  size_t size;            /* of the library's struct: fields past your
                             sizeof(ember_task_info) are newer ones */
  const char *platform;   /* the NAM platform's name ("cpu", "opencl0",
                             "fpga0"), or "fallback" when run in-process */
  const char *platform_kind; /* its kind: "cpu", "opencl", "fpga-emu",
                             or "fallback" */
  int fell_back;          /* 1 if the CPU fallback produced the result */
  uint64_t queue_ns;      /* waiting in the NAM's queues (on a device:
                             and behind the task ahead of it there) */
  uint64_t exec_ns;       /* running on the platform (on a device: from
                             when the task ahead finished, its stage-in
                             having overlapped that task's run) */
  uint64_t server_ns;     /* received -> result sent, inside the NAM */
  uint64_t round_trip_ns; /* submit -> result, seen by the client */
  uint64_t stage_in_ns;   /* device platforms: blocks copied in (part of
                             exec_ns); 0 when all were cached */
  uint64_t stage_out_ns;  /* device platforms: output copied back */
  unsigned attempts;      /* platforms tried in the NAM: >1 after a
                             device failure was retried elsewhere */
} ember_task_info;

typedef void (*ember_task_cb)(ember_task *task, void *user);

/* Options for ember_submit; zero-initialise. */
typedef struct ember_submit_options {
  size_t size;            /* sizeof(ember_submit_options), or 0 */
  int priority;           /* higher runs first; default 0 */
  const char *platform;   /* require a platform kind ("cpu", "opencl",
                             "fpga-emu") or one platform by its name
                             ("fpga1", as ember_listing_platform names
                             it); NULL: any. One the NAM lacks is an error
                             (EMBER_ENOPLATFORM, the message names the
                             kinds it has), not a fallback. */
  const char *prefer;     /* prefer a platform kind; others take the task
                             only while that kind is busy; NULL: the NAM's
                             load decides */
  ember_task_cb callback; /* called once when the task is done, on a
                             library thread or on a thread waiting in
                             ember_run on the same client; it must not
                             block for long and may free the task */
  void *user;
  /* state blocks (made with EMBER_BLOCK_STATE) the task updates in place */
  ember_block *const *states;
  size_t n_states;
  /* out blocks the task makes: outputs[i] receives a new handle for each
   * (release it with ember_block_release); readable once the task
   * succeeded, and an input of later tasks */
  ember_block **outputs;
  size_t n_outputs;
} ember_submit_options;

/*
 * ember_submit - submit a task: accelerator name, its packed Params message
 * (params, params_len; may be empty for defaults) and input blocks in the
 * order the accelerator expects. opts may be NULL.
 *
 * Returns 0 and a task in *out (free it with ember_task_free()), or an
 * error. Invalid parameters or inputs are reported through the task's
 * status (EMBER_EPARAM, EMBER_EFORMAT), with ember_task_message() saying
 * what was wrong; a task on state that was lost completes with
 * EMBER_ESTATE (see "Out and state blocks"). ember_submit blocks while the
 * client is at the NAM's in-flight limit (backpressure).
 *
 * The NAM counts what a task will make it hold (the out blocks and scratch
 * its accelerator declares) against the client's bytes before it admits
 * it: a task that would take the client past the NAM's max_block_bytes
 * completes with EMBER_EBUSY (release blocks, or wait for tasks in flight)
 * or, larger than the limit by itself, EMBER_ETOOBIG; one that would take
 * all clients together past the NAM's max_memory, with EMBER_EBUSY (try
 * again later). Nothing of it ran.
 */
int ember_submit(ember_client *client, const char *accelerator,
                 const void *params, size_t params_len,
                 ember_block *const *inputs, size_t n_inputs,
                 const ember_submit_options *opts, ember_task **out);

/* ember_task_wait - wait until the task is done and its callback (if any)
 * has returned, or timeout_ms passed (negative: forever). Returns 0 when
 * done, EMBER_ETIMEDOUT otherwise. Never call it from the task's callback. */
int ember_task_wait(ember_task *task, int timeout_ms);

/* ember_task_done - 1 if the task has finished, else 0. Never blocks. */
int ember_task_done(const ember_task *task);

/* ember_task_status - 0 if the task succeeded, else its error. Only
 * meaningful once the task is done. */
int ember_task_status(const ember_task *task);

/* ember_task_message - detail text for a failed task ("" on success). */
const char *ember_task_message(const ember_task *task);

/* ember_task_output - the accelerator's packed Result message; owned by the
 * task and valid until ember_task_free(). NULL until done. */
const void *ember_task_output(const ember_task *task, size_t *size);

/* ember_task_info - where and how long; owned by the task. */
const ember_task_info *ember_task_get_info(const ember_task *task);

/* ember_task_cancel - ask for cancellation; the task then completes with
 * EMBER_ECANCELED unless its result was already on its way. */
int ember_task_cancel(ember_task *task);

/* ember_task_free - free a task; a task still running is canceled first.
 * ember_task_free(NULL) is a no-op. */
void ember_task_free(ember_task *task);

/* ember_run - submit and wait: the synchronous helper. On return *out holds
 * the finished task (free it), whatever its status. Through a NAM the
 * calling thread reads the result from the socket itself (and hands on any
 * other task's result it finds), polling for it around the time recent
 * results took (at most 120 us of polling, and only while results come
 * within it), so a small task costs it no wake-up from sleep. */
int ember_run(ember_client *client, const char *accelerator,
              const void *params, size_t params_len,
              ember_block *const *inputs, size_t n_inputs,
              const ember_submit_options *opts, ember_task **out);

/* ------------------------------------------------------------------------ */
/* The sw accelerator: batched Smith-Waterman                               */

typedef enum ember_sw_alphabet {
  EMBER_SW_DNA = 0,
  EMBER_SW_PROTEIN = 1
} ember_sw_alphabet;

/* Scoring. Gap penalties are positive numbers; a gap of length k costs
 * gap_open + (k-1) * gap_extend (parasail's convention). */
typedef struct ember_sw_params {
  size_t size;              /* sizeof(ember_sw_params), or 0 */
  ember_sw_alphabet alphabet;
  int match, mismatch;      /* DNA: e.g. 3 and -3 */
  const char *matrix;       /* protein: BLOSUM45/50/62/80, PAM250 or a path
                               to an NCBI-format matrix file; NULL: BLOSUM62 */
  int gap_open, gap_extend; /* e.g. 6 and 1 */
  const char *platform;     /* require a platform kind; NULL: any */
  const char *prefer;       /* prefer a platform kind; NULL: load decides */
  size_t pairs_per_task;    /* 0: chosen from the sequence lengths */
} ember_sw_params;

/* ember_sw_params_default - DNA, 3/-3, gap 6/1 (sets size too). */
void ember_sw_params_default(ember_sw_params *params);

/* A sequence: residue letters, not NUL-terminated. */
typedef struct ember_seq {
  const char *residues;
  size_t length;
} ember_seq;

/* One pair's answer: 0-based inclusive coordinates; all -1 if score is 0. */
typedef struct ember_sw_result {
  int32_t score;
  int32_t query_start, query_end;
  int32_t ref_start, ref_end;
} ember_sw_result;

/* What an ember_sw_align call did. Set size (or leave it 0) before the call;
 * the library fills the fields your size covers. */
typedef struct ember_sw_report {
  size_t size;                 /* sizeof(ember_sw_report), or 0 */
  size_t tasks;
  size_t tasks_fallback;       /* run by the in-process CPU fallback */
  size_t tasks_cpu;            /* run by the NAM (or the embedded engine) on */
  size_t tasks_opencl;         /* a platform of each kind */
  size_t tasks_fpga_emu;
  size_t tasks_retried;        /* moved to another platform in the NAM */
  uint64_t cells;              /* DP cell updates of the pairs aligned */
  uint64_t queue_ns, exec_ns, server_ns, round_trip_ns; /* summed */
  uint64_t wall_ns;
  /* tasks that gave no result (not in tasks, their cells not in cells)
   * and the pairs they held: see ember_sw_align */
  size_t tasks_failed;
  size_t pairs_failed;
} ember_sw_report;

/* ember_platform_kind - the NAM's platform kinds by index ("cpu",
 * "opencl", "fpga-emu"), NULL past the last: what
 * ember_submit_options.platform and ember_sw_params.platform accept. */
const char *ember_platform_kind(size_t i);

/* Progress callback: pairs done so far out of total. */
typedef void (*ember_progress_cb)(size_t done, size_t total, void *user);

/*
 * ember_sw_align - align queries[i] with refs[i] for i < n; results[i]
 * receives pair i. The batch is cut into tasks that run concurrently.
 * report and progress may be NULL. Returns 0, or the first error (bad
 * parameters or residues: EMBER_EPARAM with ember_last_error() saying
 * which). Synchronous; thread-safe.
 *
 * When some tasks fail (e.g. the NAM went away and did not come back
 * within ember_options.reconnect_window_ms), the results of every other
 * task are still filled in: a pair whose task failed, or was never
 * submitted, gets score -1 and -1 coordinates (a real score is never
 * negative), and report->tasks_failed and report->pairs_failed count them.
 */
int ember_sw_align(ember_client *client, const ember_sw_params *params,
                   const ember_seq *queries, const ember_seq *refs, size_t n,
                   ember_sw_result *results, ember_sw_report *report,
                   ember_progress_cb progress, void *progress_user);

/* ------------------------------------------------------------------------ */
/* The plf accelerator: log-likelihoods of fixed trees                      */

/*
 * Scoring trees (what `ember lnl` does): an alignment, a substitution model
 * and trees, each read into its own handle and checked there, then
 * ember_lnl computes every tree's log-likelihood (branch lengths and model
 * parameters as given, nothing optimised) on the plf accelerator of the
 * client's NAM or embedded engine:
 *
 *   ember_alignment *aln; ember_model *m; ember_trees *t;
 *   ember_alignment_read("primates.fasta", NULL, &aln);
 *   ember_model_parse("HKY{2}+F+G4{0.5}", NULL, aln, &m);
 *   ember_trees_parse(newick, n, aln, &t);
 *   ember_lnl(client, NULL, m, t, lnl, NULL, NULL, NULL, NULL);
 *
 * The handles are immutable once made: any number of threads may use them
 * at once. A model and trees keep a pointer to their alignment, which must
 * outlive them. Errors are EMBER_E* codes with ember_last_error() saying
 * why: "path:line: reason" for files.
 */
typedef struct ember_alignment ember_alignment;
typedef struct ember_model ember_model;
typedef struct ember_trees ember_trees;

/*
 * ember_alignment_read - read an alignment file: PHYLIP (sequential or
 * interleaved), FASTA or NEXUS, plain or gzip'd, the format detected.
 * type: "dna", "protein", or NULL to detect it from the letters (DNA when
 * at least 90% of them are A, C, G, T, U or N; a NEXUS DATATYPE= wins).
 * Gaps and '?' are missing data; IUPAC codes are ambiguities. Sites are
 * compressed into patterns (distinct columns).
 *
 * Returns 0 and *out (free it with ember_alignment_free), or EMBER_EFORMAT
 * (malformed: "path:line: unequal lengths"), EMBER_EIO (cannot be read),
 * EMBER_ETOOBIG, EMBER_EPARAM (an unknown type), EMBER_EINVAL (NULL
 * arguments) or EMBER_ENOMEM.
 */
int ember_alignment_read(const char *path, const char *type,
                         ember_alignment **out);

/*
 * ember_alignment_from_sequences - an alignment of n sequences in memory:
 * names[i] (NUL-terminated, distinct, no blanks) and seqs[i] (residue
 * letters, NUL-terminated, all of one length; blanks are skipped); type as
 * for ember_alignment_read. Returns 0 and *out, or EMBER_EPARAM with
 * "sequences:N: reason" (N counting from 1: "unequal lengths", "unknown
 * character '!'", a duplicate name), EMBER_EINVAL (NULL arguments) or
 * EMBER_ENOMEM. The strings are copied.
 */
int ember_alignment_from_sequences(const char *const *names,
                                   const char *const *seqs, size_t n,
                                   const char *type, ember_alignment **out);

/* Sizes: taxa (sequences), sites (columns), patterns (distinct columns). */
size_t ember_alignment_taxa(const ember_alignment *aln);
size_t ember_alignment_sites(const ember_alignment *aln);
size_t ember_alignment_patterns(const ember_alignment *aln);

/* ember_alignment_name - taxon i's name (in the input's order), owned by
 * the alignment; NULL past the last. */
const char *ember_alignment_name(const ember_alignment *aln, size_t i);

/* ember_alignment_type - "dna" or "protein". */
const char *ember_alignment_type(const ember_alignment *aln);

/* ember_alignment_free - free an alignment (after its models and trees);
 * NULL is a no-op. */
void ember_alignment_free(ember_alignment *aln);

/*
 * ember_model_parse - a substitution model for aln.
 *
 * model: IQ-TREE's syntax: JC, F81, K80{k}, HKY{k}, GTR{ac,ag,at,cg,ct}
 * (DNA), LG, WAG, JTT (protein), then any of +F (counted from aln),
 * +F{f1,...}, +FQ, +G4{alpha}, +I{p}; e.g.
 * "GTR{1.2,3.9,0.8,1.1,4.5}+F+G4{0.5}". Values left out take IQ-TREE's starting values.
 * rates_file: NULL, or a PAML rate file (190 exchangeabilities, then 20
 * frequencies, as PAML's lg.dat) as the protein matrix; model then gives
 * only the modifiers ("+G4{0.5}+I{0.1}") or is NULL.
 *
 * Returns 0 and *out (free it with ember_model_free), or EMBER_EPARAM
 * ("model 'GTR{1,2}': GTR takes 5 rates", a protein model for DNA, no
 * model at all), EMBER_EFORMAT or EMBER_EIO (the rate file:
 * "path:line: reason"), EMBER_EINVAL (NULL aln or out), EMBER_ENOMEM.
 */
int ember_model_parse(const char *model, const char *rates_file,
                      const ember_alignment *aln, ember_model **out);

/* ember_model_name - the model written out with all its values
 * ("HKY{2}+F{0.3,...}+G4{0.5}"), owned by the model. */
const char *ember_model_name(const ember_model *model);

/* ember_model_free - NULL is a no-op. */
void ember_model_free(ember_model *model);

/*
 * ember_trees_read - the Newick trees of a file, one per line ending with
 * ';' (blank lines skipped), over aln's taxa: each tree holds every taxon
 * of the alignment once, names matching exactly, and every branch has a
 * length. Returns 0 and *out (free it with ember_trees_free), or
 * EMBER_EFORMAT ("path:line: taxon 'Toad' is not in the alignment",
 * "path:line: taxon 'Frog' has no branch length"), EMBER_EIO,
 * EMBER_ETOOBIG, EMBER_EPARAM (aln has fewer than 2 taxa), EMBER_EINVAL
 * (NULL arguments) or EMBER_ENOMEM.
 */
int ember_trees_read(const char *path, const ember_alignment *aln,
                     ember_trees **out);

/*
 * ember_trees_parse - n trees given as Newick strings, newick[i] holding
 * exactly one tree; the same rules as ember_trees_read. A bad tree is
 * EMBER_EPARAM with "newick[i]: reason" (i counting from 0).
 */
int ember_trees_parse(const char *const *newick, size_t n,
                      const ember_alignment *aln, ember_trees **out);

/* ember_trees_count - the number of trees. */
size_t ember_trees_count(const ember_trees *trees);

/* ember_trees_free - NULL is a no-op. */
void ember_trees_free(ember_trees *trees);

/* ember_lnl_min_vectors - the fewest partials buffers for ancestral
 * vectors that ember_lnl takes for taxa: ceil(log2 taxa) + 2. */
size_t ember_lnl_min_vectors(size_t taxa);

typedef enum ember_lnl_precision {
  EMBER_LNL_DOUBLE = 0,      /* the accelerator's buffers in double */
  EMBER_LNL_SINGLE = 1       /* in single precision (half the memory) */
} ember_lnl_precision;

/* Called by ember_lnl for each tree scored, in order, on the calling
 * thread, before the progress callback of its batch: tree (from 0), its
 * log-likelihood and, when site log-likelihoods are computed, its sites
 * values (sites of them, valid during the call only; else NULL and 0).
 * Return 0 to go on; anything else stops ember_lnl (EMBER_ECANCELED). */
typedef int (*ember_lnl_tree_cb)(size_t tree, double lnl,
                                 const double *site_lnl, size_t sites,
                                 void *user);

/* How ember_lnl computes; ember_lnl_params_default gives the defaults. */
typedef struct ember_lnl_params {
  size_t size;               /* sizeof(ember_lnl_params), or 0 */
  ember_lnl_precision precision; /* default EMBER_LNL_DOUBLE */
  /* partials buffers for ancestral vectors, at least
   * ember_lnl_min_vectors(taxa): fewer take less memory and recompute what
   * had to be dropped. 0: the fewest with which scoring the trees
   * recomputes nothing (planned ahead on the first trees), within 256 MiB
   * of partials (48 MiB of state over tcp:, one frame) */
  size_t max_vectors;
  unsigned threads;          /* CPU threads of each task, over patterns;
                                0: 1 */
  const char *platform;      /* require a platform kind ("cpu", "opencl",
                                "fpga-emu"); NULL: any */
  int site_lnl;              /* nonzero: compute site log-likelihoods for
                                tree_cb (a site_lnl array asks for them
                                too) */
  ember_lnl_tree_cb tree_cb; /* NULL: none */
  void *tree_user;           /* tree_cb's user */
  /* instances scoring trees at once (threads over trees): each its own
   * state block, planner and max_vectors, the batches dealt out in turn
   * and delivered in order; on a NAM they run on as many of its workers.
   * 0: 1 */
  unsigned instances;
} ember_lnl_params;

/* ember_lnl_params_default - double precision, the default vectors, one
 * thread, any platform, no callback (sets size too). */
void ember_lnl_params_default(ember_lnl_params *params);

/* What an ember_lnl call did. Set size (or leave it 0) before the call;
 * the library fills the fields your size covers. */
typedef struct ember_lnl_report {
  size_t size;               /* sizeof(ember_lnl_report), or 0 */
  size_t trees;              /* trees scored */
  size_t trees_failed;       /* trees not scored: their task failed
                                twice, or tree_cb stopped the call */
  size_t patterns;           /* the alignment's */
  size_t tasks;              /* tasks that succeeded, setups included */
  size_t tasks_cpu;          /* ... on a platform of each kind */
  size_t tasks_opencl;
  size_t tasks_fpga_emu;
  size_t tasks_other;
  size_t tasks_failed;       /* tasks that failed (redone or not) */
  size_t setups;             /* 1 + one per recovery after a failure */
  uint64_t ops;              /* partials operations run */
  uint64_t recomputed;       /* of them, vectors computed again because
                                they had been dropped */
  uint64_t hits;             /* vectors found resident, not computed */
  size_t vectors;            /* partials buffers for ancestral vectors */
  uint64_t state_bytes;      /* the instances' state blocks, summed */
  uint64_t exec_ns;          /* the tasks' time on their platforms */
  uint64_t wall_ns;          /* the call's */
  size_t instances;          /* instances that scored trees (vectors is
                                each one's) */
} ember_lnl_report;

/*
 * ember_lnl - the log-likelihood of every tree of trees for model's
 * alignment, on the plf accelerator of client (a NAM, or the embedded
 * engine; tasks on state blocks never fall back in-process, so a client
 * in fallback fails with EMBER_ESTATE). model and trees must belong to
 * the same alignment.
 *
 * One instance (a state block) holds the alignment's tips and the model;
 * the trees go in batches, each one task, the planner keeping vectors that
 * later trees share resident within params->max_vectors. A failed task is
 * redone once on the instance set up again (ember_block_restore). With
 * params->instances > 1, that many instances score the batches in turn,
 * each on a thread of the library's (callbacks still come on the calling
 * thread, in tree order).
 *
 * lnl (may be NULL): receives ember_trees_count(trees) values. site_lnl
 * (may be NULL): count x ember_alignment_sites values, tree by tree, each
 * site's log-likelihood (patterns expanded: a tree's row sums to its lnl).
 * params, report, progress (called with trees done and their total after
 * each batch, on the calling thread) and user may be NULL.
 *
 * Returns 0; or EMBER_EPARAM (model and trees of different alignments,
 * max_vectors below the minimum, an instance out of the accelerator's
 * bounds), EMBER_EINVAL (NULL client, model or trees), EMBER_ECANCELED
 * (tree_cb stopped it), EMBER_ENOMEM, or what the tasks failed with
 * (EMBER_ENOPLATFORM: no platform of params->platform's kind). When some
 * batches failed twice, the other trees are still scored: the failed
 * trees' lnl and site_lnl values are NaN, tree_cb is not called for them,
 * report->trees_failed counts them and the first failure is returned
 * (ember_last_error() says why). Synchronous; thread-safe.
 */
int ember_lnl(ember_client *client, const ember_lnl_params *params,
              const ember_model *model, const ember_trees *trees, double *lnl,
              double *site_lnl, ember_lnl_report *report,
              ember_progress_cb progress, void *user);

/* ------------------------------------------------------------------------ */
/* CNN training (the cnn accelerator)                                       */

/* After each epoch (on the calling thread): what it did. Arrays have
 * n_stages entries and live during the call only. */
typedef struct ember_train_epoch {
  size_t size;               /* sizeof(ember_train_epoch) of the library */
  unsigned epoch;            /* 1-based, counting epochs of a loaded
                                weights file */
  unsigned epochs;           /* the last epoch this call trains */
  double loss;               /* mean training loss over the epoch */
  double train_accuracy;     /* share of the epoch's training samples
                                predicted right (as they were trained) */
  double test_accuracy;      /* share of the test samples, after the
                                epoch (an evaluation: batch
                                normalisation's rolling statistics, no
                                dropout); NaN without test data */
  double seconds;            /* the epoch's training wall time (the test
                                pass not included) */
  double images_per_second;  /* training samples / seconds */
  size_t n_stages;
  const double *stage_busy;  /* each stage's share of seconds spent
                                running its tasks (exec time / wall) */
  const char *const *stage_platform; /* the platform each stage ran on */
} ember_train_epoch;

/* Return 0 to go on; anything else stops ember_train (EMBER_ECANCELED). */
typedef int (*ember_train_epoch_cb)(const ember_train_epoch *epoch,
                                    void *user);

/* What ember_train does; ember_train_params_default gives the defaults. */
typedef struct ember_train_params {
  size_t size;               /* sizeof(ember_train_params), or 0 */
  /* the network: a darknet .cfg file, or its text (net_path NULL) */
  const char *net_path;
  const char *net_text;
  size_t net_len;
  /* the data: a directory of MNIST idx files (train-images-idx3-ubyte,
   * train-labels-idx1-ubyte, t10k-...; plain or .gz: Fashion-MNIST as
   * Debian's dataset-fashion-mnist installs it), or arrays (data_dir
   * NULL): n images of the network's input shape (floats, NCHW, pixels
   * scaled to [0, 1]) and n labels (each below the classes) */
  const char *data_dir;
  const float *train_images;
  const uint8_t *train_labels;
  size_t n_train;
  const float *test_images;  /* may be NULL (n_test 0): no test pass */
  const uint8_t *test_labels;
  size_t n_test;
  size_t train_limit;        /* use the first N training samples; 0: all */
  size_t test_limit;         /* likewise for the test samples */
  unsigned epochs;           /* 0: evaluate only (load_path's weights) */
  unsigned batch;            /* mini-batch (samples per update); 0: the
                                .cfg's [net] batch */
  unsigned micro_batch;      /* samples per task, dividing batch; 0:
                                batch / the .cfg's subdivisions where it
                                writes them (darknet's forward batch, the
                                mini-batch then subdivisions of them),
                                else the largest divisor of batch up to
                                16. Batch normalisation's statistics are
                                a micro-batch's */
  double learning_rate;      /* < 0: the .cfg's; the base of the .cfg's
                                learning-rate policy */
  double momentum;           /* < 0: the .cfg's */
  double decay;              /* < 0: the .cfg's */
  unsigned stages;           /* stages the network is split into; 0: 1 */
  const char *platform;      /* the kind every stage runs on; NULL: any */
  int sync;                  /* nonzero: each stage updates before it
                                takes the next mini-batch, so training
                                equals one stage's (bit for bit with
                                layer_split_only; a cut inside a layer
                                adds in another order, which training
                                amplifies); 0: FPDeep's pipeline
                                (a stage updates as soon as its last
                                gradient of the mini-batch is in, while
                                later samples are in flight) */
  uint64_t seed;             /* initial weights, the data's shuffle and
                                dropout's masks */
  const char *load_path;     /* weights to start from (ember_train's
                                save_path format); NULL: seeded */
  const char *save_path;     /* written after each epoch; NULL: none */
  ember_train_epoch_cb epoch_cb;  /* NULL: none */
  ember_progress_cb progress;     /* samples done in the epoch and its
                                     total, at least every mini-batch */
  void *user;                /* of both callbacks */
  /* (added after user: a caller built against an older ember.h passes a
   * smaller size and gets 0) */
  int layer_split_only;      /* nonzero: stages hold whole layers (the
                                partitioner's coarse phase alone); 0:
                                a stage may begin or end inside a
                                convolutional or connected layer, holding
                                a slice of its input channels (FPDeep's
                                ICP) or of its output channels (OCP),
                                unless the pipeline cannot run the cuts
                                (then whole layers too) */
  int fixed_splits;          /* nonzero: each layer cut by its default
                                split only: ICP, or OCP for a layer with
                                fewer input channels than stages and
                                more output than input channels; 0: each
                                layer's split searched for the smaller
                                bottleneck (cnn_partition.h) */
} ember_train_params;

/* ember_train_params_default - the .cfg's settings, 1 stage, any
 * platform, FPDeep's updates, seed 1 (sets size too). */
void ember_train_params_default(ember_train_params *params);

/* How ember_train ended. Set size (or leave it 0) before the call. */
typedef struct ember_train_result {
  size_t size;               /* sizeof(ember_train_result), or 0 */
  unsigned epochs;           /* epochs trained by this call */
  double loss;               /* the last epoch's */
  double train_accuracy;
  double test_accuracy;      /* after the last epoch (or of the loaded
                                weights when epochs was 0); NaN without
                                test data */
  double seconds;            /* training wall time, all epochs */
  size_t tasks;              /* cnn tasks run */
} ember_train_result;

/*
 * ember_train - train a network on the cnn accelerator, split into
 * params->stages stages of balanced work (FPDeep's partitioner, each
 * stage's operations weighted by its platform's speed) driven as a
 * pipeline: several micro-batches in flight, FP towards the loss, EB and
 * PG back, each stage's weights, gradients and kept activations a state
 * block on its platform, activations and errors passed as out blocks.
 *
 * clients: n_clients NAMs (or one embedded client); the stages are dealt
 * over them in order (stage i on clients[i * n_clients / stages]), and
 * over the platforms of params->platform's kind on each. Activations and
 * errors between stages on different clients go through this process.
 *
 * Returns 0 with *result filled (result may be NULL); EMBER_EPARAM with
 * ember_last_error() saying why (a .cfg that does not parse or chain,
 * with file:line; data that does not match the network; more stages than
 * layers to split; a weights file of another network), EMBER_EFORMAT (a
 * broken idx or weights file), EMBER_ENOPLATFORM, EMBER_ECANCELED
 * (epoch_cb stopped it), or what a task failed with. Synchronous.
 */
int ember_train(ember_client *const *clients, size_t n_clients,
                const ember_train_params *params, ember_train_result *result);

/*
 * ember_train_plan - the plan ember_train would follow, as text: one row
 * per stage with its platform, layers and channels, operations per
 * sample, share of the work and expected idle share. *text is malloc'd
 * (free() it). Returns 0 or an error as ember_train.
 */
int ember_train_plan(ember_client *const *clients, size_t n_clients,
                     const ember_train_params *params, char **text);

/* ------------------------------------------------------------------------ */
/* Introspection                                                            */

/* What a NAM (or the embedded engine) offers: a listing made by
 * ember_list_accelerators, read through its accessors. Strings and structs
 * belong to the listing and live until ember_listing_free. */
typedef struct ember_listing ember_listing;

/* One accelerator's health on one platform. */
typedef struct ember_pair_info {
  size_t size;               /* of the library's struct */
  const char *accelerator;
  const char *state;         /* ready, disabled, probing */
  uint64_t completed, errors, timeouts, disabled_count;
  unsigned consecutive_failures;
  /* what the NAM's dispatcher expects a task to take here: fixed_ns +
   * work x ns_per_unit (work in the accelerator's unit), learned from
   * small calibration tasks and refined by real ones ("calibrated",
   * "measured"), or the platform's own model ("model"); "calibrating" or
   * "unknown" before any figure */
  const char *speed;
  double fixed_ns, ns_per_unit;
} ember_pair_info;

typedef struct ember_platform_info {
  size_t size;               /* of the library's struct */
  const char *name;
  const char *kind;          /* cpu, opencl, fpga-emu */
  const char *state;
  const char *device;        /* the device's description ("" for cpu) */
  const char *loaded;        /* fpga-emu: the loaded bitstream */
  unsigned workers, queued, running; /* workers: pipeline depth on devices */
  uint64_t completed, failed, retried, timeouts, reprograms;
  uint64_t cache_budget, cache_resident, cache_blocks; /* bytes, blocks */
  uint64_t cache_hits, cache_misses, cache_evictions;
  uint64_t bytes_to, bytes_from;
  size_t n_pairs;
  const ember_pair_info *const *pairs; /* n_pairs of them */
} ember_platform_info;

typedef struct ember_accel_info {
  size_t size;           /* of the library's struct */
  const char *name;
  unsigned version;
  const char *platforms; /* comma-separated */
  unsigned queued;
  const char *origin;    /* "built-in", or the path of the NAM's plugin */
} ember_accel_info;

/* ember_list_accelerators - ask the NAM (or the embedded engine) what it
 * offers; *out gets a listing (free it with ember_listing_free). Returns
 * EMBER_ECONNECT when the client is in fallback (no NAM to ask). */
int ember_list_accelerators(ember_client *client, ember_listing **out);

size_t ember_listing_accelerators(const ember_listing *listing);
/* the i-th accelerator (NULL past the end) */
const ember_accel_info *ember_listing_accelerator(const ember_listing *listing,
                                                  size_t i);
size_t ember_listing_platforms(const ember_listing *listing);
/* the i-th platform (NULL past the end) */
const ember_platform_info *ember_listing_platform(const ember_listing *listing,
                                                  size_t i);
/* ember_listing_free(NULL) is a no-op */
void ember_listing_free(ember_listing *listing);

/* Counters of this client since ember_connect. */
typedef struct ember_client_stats {
  size_t size;               /* sizeof(ember_client_stats), or 0: set it
                                before the call */
  uint64_t tasks_submitted;
  uint64_t tasks_completed;
  uint64_t tasks_fallback;   /* results produced by the CPU fallback */
  uint64_t reconnects;
  /* Bytes of this client's NAM connections (every connection since
   * ember_connect, 0 in embedded mode): bytes_sent and bytes_received are
   * the frames written to and read from the socket, Hello and Welcome
   * included. Over a unix socket a block over the NAM's inline limit (64
   * KiB) is not in the frames: its memfd is passed with the frame and the
   * NAM maps it; bytes_sent_by_fd counts the sizes of the memfds passed
   * (not in bytes_sent). Smaller blocks, and every block over TCP, travel
   * inline, in bytes_sent. An out block that a later task
   * reads on the NAM is in none of them until ember_block_read. */
  uint64_t bytes_sent;
  uint64_t bytes_received;
  uint64_t bytes_sent_by_fd;
  /* The in-process engine's plugins (see ember_connect): loaded from the
   * plugin directory, and refused (files, or the directory itself). */
  uint64_t plugins_loaded;
  uint64_t plugins_refused;
  /* tasks kept while the NAM was away and sent to it once it was back
   * (reconnect_window_ms) */
  uint64_t tasks_resubmitted;
} ember_client_stats;

void ember_client_get_stats(ember_client *client, ember_client_stats *out);

/* ------------------------------------------------------------------------ */
/* Clusters: nodes from the global manager (ember-gam)                      */

typedef struct ember_cluster ember_cluster;

/* Options for ember_cluster_acquire; zero-initialise, then set what you
 * need. */
typedef struct ember_cluster_options {
  size_t size;            /* sizeof(ember_cluster_options), or 0 */
  const char *gam;        /* ember-gam: "tcp:HOST:PORT" or "HOST:PORT";
                             NULL: $EMBER_GAM */
  const char *app_name;   /* the app's name at the GAM and in the NAMs'
                             logs; NULL: "libember" */
  const char *label;      /* what the nodes must offer, e.g. "sw" or
                             "sw@fpga-emu" (required) */
  unsigned count;         /* nodes wanted; 0: 1 */
  unsigned wait_ms;       /* how long the GAM may take to place the app
                             before it answers EMBER_ETIMEDOUT; 0: the
                             GAM's acquire_timeout */
  const ember_options *client; /* for each NAM connection (client_name
                             defaults to app_name); NULL: defaults */
} ember_cluster_options;

/*
 * ember_cluster_acquire - ask the GAM for count nodes offering label, wait
 * until it places the app (delay scheduling: the GAM prefers nodes whose
 * accelerators already serve that label), then connect to each NAM it
 * granted, presenting the signed lease the GAM issued for it. The leases
 * are bound to a key pair made for this call (Ed25519, kept in memory
 * only): each NAM connection proves it holds the secret key, so the leases
 * work only from this process.
 *
 * Each member is an ordinary ember_client (ember_cluster_client): blocks,
 * tasks and the CPU fallback work as with ember_connect. The connection to
 * the GAM stays open while the cluster lives; a library thread reads it.
 * When the GAM ends a lease (node lost or drained, label removed, lease
 * expired, or the GAM connection gone longer than the GAM's app_grace),
 * that member's client drops its NAM connection and never
 * reconnects: its tasks in flight and later ones run on the CPU fallback
 * (or fail with no_fallback in opts->client), and ember_cluster_ended() says
 * so.
 *
 * Returns 0 and *out (free with ember_cluster_release), or: EMBER_EINVAL
 * (no gam or label), EMBER_ECONNECT (the GAM cannot be reached), an error
 * the GAM answered with (EMBER_ETIMEDOUT: not placed within wait_ms;
 * EMBER_ENOTFOUND: no node offers the label, ...), EMBER_ELEASE (a NAM
 * refused its lease: the cluster keys differ), EMBER_EINTERNAL (libsodium
 * failed to start), EMBER_ECONNLOST,
 * EMBER_ENOMEM. ember_last_error() has the detail. Blocks the caller.
 */
int ember_cluster_acquire(const ember_cluster_options *opts,
                          ember_cluster **out);

/* ember_cluster_size - the number of nodes granted (count). */
size_t ember_cluster_size(const ember_cluster *cluster);

/* ember_cluster_client - member i's client (i < size, else NULL); owned by
 * the cluster, valid until ember_cluster_release. Never ember_close it. */
ember_client *ember_cluster_client(ember_cluster *cluster, size_t i);

/* ember_cluster_node - member i's node name at the GAM (NULL past size). */
const char *ember_cluster_node(const ember_cluster *cluster, size_t i);

/* ember_cluster_lease_id - member i's lease id (0 past size). */
uint64_t ember_cluster_lease_id(const ember_cluster *cluster, size_t i);

/* ember_cluster_ended - 1 once the GAM ended member i's lease (its tasks
 * run on the fallback from then on), else 0. Never blocks. */
int ember_cluster_ended(ember_cluster *cluster, size_t i);

/* ember_cluster_app_id - the app's id at the GAM. */
uint64_t ember_cluster_app_id(const ember_cluster *cluster);

/*
 * ember_cluster_release - give every lease back to the GAM (Release), close
 * the GAM connection and every member's client, and free the cluster.
 * Release the blocks and free the tasks of every member first, as for
 * ember_close. ember_cluster_release(NULL) is a no-op.
 *
 * Threads: the accessors may be called from any thread; release must not
 * race with them.
 */
void ember_cluster_release(ember_cluster *cluster);

#ifdef __cplusplus
}
#endif

#endif
