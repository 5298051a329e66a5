/*
 * cli.h - what the subcommands of the `ember` tool share: the command table
 * entry, exit codes, error messages, strict number parsing and JSON
 * strings from names that may not be UTF-8. The tool uses only libember's
 * public API (ember.h).
 */
#ifndef EMBER_CLI_H
#define EMBER_CLI_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

/* Exit codes of every subcommand. */
enum {
  CLI_OK = 0,
  CLI_FAIL = 1,  /* a runtime failure: a file, the NAM, the alignment */
  CLI_USAGE = 2, /* bad options or arguments */
  CLI_PARTIAL = 3 /* some of the work failed; the rest was written */
};

/* One subcommand: `ember NAME ...` runs run(argc, argv) with argv[0] being
 * NAME. help is the full text printed by `ember help NAME` and `--help`. */
typedef struct cli_command {
  const char *name;
  const char *summary;  /* one line for `ember --help` */
  const char *help;
  int (*run)(int argc, char **argv);
} cli_command;

extern const cli_command cli_cmd_align;
extern const cli_command cli_cmd_accelerators;
extern const cli_command cli_cmd_beagle;
extern const cli_command cli_cmd_lnl;
extern const cli_command cli_cmd_train;

/* cli_error - "ember: CMD: message" on stderr. */
void cli_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* cli_check_platform_kind - 0 when kind is a platform kind ember knows;
 * else a usage error naming option and the kinds (CLI_USAGE). */
int cli_check_platform_kind(const char *cmd, const char *option,
                            const char *kind);

/* cli_usage_error - cli_error plus a hint to `ember help CMD`; returns
 * CLI_USAGE so callers can `return cli_usage_error(...)`. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* cli_getopt_error - the message for getopt_long's '?' or ':' answer (the
 * option string must start with ':' and opterr be 0); returns CLI_USAGE. */
int cli_getopt_error(const char *cmd, int c, char **argv);

/* cli_parse_int - text as a whole decimal integer in [min, max]. On error
 * prints "ember: CMD: OPTION: ..." and returns CLI_USAGE; else 0. */
int cli_parse_int(const char *cmd, const char *option, const char *text,
                  long min, long max, int *out);

/* cli_group_digits - v with thousands separators ("100,000") in buf. */
const char *cli_group_digits(uint64_t v, char *buf, size_t len);

/* cli_kind_counts - "cpu 16, fpga-emu 2": each of the n names with its
 * count, those at 0 left out ("" when all are), in buf. Summary lines use
 * it for tasks by platform kind. */
const char *cli_kind_counts(char *buf, size_t len, const char *const *names,
                            const size_t *counts, size_t n);

/* cli_format_wall - ns as "4.2 ms", "120 ms" or "12.3 s", in buf. */
const char *cli_format_wall(uint64_t ns, char *buf, size_t len);

/* The "\r" progress line of a long batch on a terminal: shown once the
 * batch has more than min_total items or has run 2 s, redrawn at most
 * every 100 ms, and cleared before the summary. Zero it, then set tty and
 * start_ns (clock_now_ns(), common/clock.h). */
typedef struct cli_progress {
  int tty;
  uint64_t start_ns, last_ns;
  int shown, width;
} cli_progress;

/* cli_progress_show - "VERB DONE/TOTAL UNIT (P%)", e.g. "scored 10/20
 * trees (50%)". */
void cli_progress_show(cli_progress *pr, size_t done, size_t total,
                       size_t min_total, const char *verb, const char *unit);

/* cli_progress_show_note - the same line with ", NOTE" after it (NULL:
 * none), e.g. "epoch 1/5 640/60,000 images (1%), 1,234 img/s". */
void cli_progress_show_note(cli_progress *pr, size_t done, size_t total,
                            size_t min_total, const char *verb,
                            const char *unit, const char *note);

/* cli_progress_clear - erase the line, if one was shown. */
void cli_progress_clear(cli_progress *pr);

/* cli_json_text - s as a new JSON string (jansson takes only UTF-8): valid
 * UTF-8 kept, every byte that is not part of valid UTF-8 replaced by
 * U+FFFD. NULL when out of memory; the caller owns the reference. */
json_t *cli_json_text(const char *s);

#endif
