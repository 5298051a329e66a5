/*
 * ctl.h - what emberctl's pieces share: the options, exit codes and
 * command table (emberctl.c), one request to the GAM's admin API
 * (ctl_http.c), aligned tables (ctl_table.c) and the cells that go in them
 * (ctl_format.c). The commands live in ctl_nodes.c and ctl_apps.c.
 */
#ifndef EMBER_CTL_H
#define EMBER_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

/* Exit codes of every command. */
enum {
  CTL_OK = 0,
  CTL_FAIL = 1,   /* the GAM cannot be reached or answered an error */
  CTL_USAGE = 2   /* bad options or arguments */
};

#define CTL_DEFAULT_GAM "http://127.0.0.1:7080"
#define CTL_DEFAULT_TOKEN_FILE "/etc/ember/gam.token"

typedef struct ctl_options {
  const char *gam;          /* the admin API's base URL */
  const char *token_file;   /* read only for changes */
  long timeout_ms;
  bool json;                /* print the server's JSON, pretty */
} ctl_options;

/* One command: `emberctl NAME ARGS...` runs run(o, argc, argv) with argv[0]
 * being NAME, once argc - 1 is within [min_args, max_args]. */
typedef struct ctl_command {
  const char *name;
  const char *args;      /* "NODE LABEL", for the usage text */
  const char *summary;
  int min_args, max_args;
  int (*run)(const ctl_options *o, int argc, char **argv);
  const char *details;   /* `emberctl NAME --help`: lines after the usage */
} ctl_command;

extern const ctl_command ctl_cmd_status, ctl_cmd_nodes, ctl_cmd_node,
    ctl_cmd_label, ctl_cmd_drain, ctl_cmd_undrain, ctl_cmd_apps,
    ctl_cmd_events;

/* ctl_error - "emberctl: message" on stderr; returns CTL_FAIL. */
int ctl_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* ctl_usage_error - the same plus a hint to --help; returns CTL_USAGE. */
int ctl_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- ctl_http.c */

/*
 * ctl_request - method ("GET", "PUT", "DELETE", "POST") on the API path
 * (already escaped, see ctl_path). Changes send the bearer token read
 * from o->token_file. 0 with the parsed reply in *out (the caller
 * releases it), or CTL_FAIL after a one-line message on stderr: the GAM
 * unreachable, the server's error message for an HTTP error, a reply that
 * is not JSON.
 */
int ctl_request(const ctl_options *o, const char *method, const char *path,
                json_t **out);

/* ctl_path - "/v1/nodes/" + node, then "/" + rest... up to a NULL, each
 * piece percent-escaped (so a node id with a '/' stays one segment). A
 * malloc'd string, or NULL when out of memory. */
char *ctl_path(const char *prefix, ...) __attribute__((sentinel));

/* ctl_read_token - the token in path (trimmed; visible ASCII only, so it
 * cannot break the header). A malloc'd string, or NULL after a message. */
char *ctl_read_token(const char *path);

/* ctl_print_json - j indented by 2, in the server's key order. */
int ctl_print_json(const json_t *j);

/* ---- ctl_table.c: rows of cells printed with aligned columns */

typedef struct ctl_table ctl_table;

/* A table with cols columns and its header row; NULL when out of memory. */
ctl_table *ctl_table_new(size_t cols, const char *const *header);
/* Right-align column col (numbers). */
void ctl_table_right(ctl_table *t, size_t col);
/* Append a row of cols cells (copied; NULL or "" prints as "-"). A failure is
 * remembered and reported by ctl_table_print. */
void ctl_table_add(ctl_table *t, const char *const *cells);
/* Columns two spaces apart, widths in UTF-8 characters, no trailing
 * spaces. 0, or -1 when a row could not be added or f fails. */
int ctl_table_print(const ctl_table *t, FILE *f);
void ctl_table_free(ctl_table *t);  /* NULL is a no-op */

/* ---- ctl_format.c: cells, each written into buf (always terminated) */

/* 230 -> "230ms", 4200 -> "4.2s", 754000 -> "12m34s", "3h04m", "2d03h". */
const char *ctl_format_age(int64_t ms, char *buf, size_t len);
/* Unix milliseconds as local "YYYY-MM-DD HH:MM:SS". */
const char *ctl_format_time(int64_t unix_ms, char *buf, size_t len);
/* A JSON array of strings joined by sep; "-" when empty. Cut to fit. */
const char *ctl_format_list(const json_t *arr, const char *sep, char *buf,
                            size_t len);
/* A node's "load" array: the busy accelerators, "sw 25% 3q, plf 60%",
 * or "idle". */
const char *ctl_format_load(const json_t *load, char *buf, size_t len);
/* A JSON integer (or "-" when absent). */
const char *ctl_format_int(const json_t *v, char *buf, size_t len);
/* The string at key in object o, or "-". */
const char *ctl_str(const json_t *o, const char *key);

#endif
