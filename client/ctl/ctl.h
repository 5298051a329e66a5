/* ctl.h - emberctl's pieces: the HTTP call to the GAM (ctl_http.c), the
 * aligned tables (ctl_table.c) and the commands (ctl_commands.c). */
#ifndef EMBER_CTL_H
#define EMBER_CTL_H

#include <stddef.h>

#include <jansson.h>

typedef struct ctl_options {
  const char *gam;         /* base URL */
  const char *token_file;  /* for changes */
  long timeout_s;
  int json;                /* print the server's JSON */
} ctl_options;

/* One request; the parsed JSON body in *out. 0 on a 2xx, else 1 with a
 * one-line message on stderr (the server's error message when it sent
 * one). */
int ctl_request(const ctl_options *o, const char *method, const char *path,
                json_t **out);

/* A table: rows of cells, printed with aligned columns. */
typedef struct ctl_table {
  size_t cols, rows, cap;
  char **cells;            /* rows x cols, the header first */
} ctl_table;

void ctl_table_init(ctl_table *t, size_t cols, const char *const *header);
void ctl_table_add(ctl_table *t, const char *const *cells);
void ctl_table_print(const ctl_table *t);
void ctl_table_free(ctl_table *t);

/* Commands: argv after the command name; return the exit status. */
int ctl_status(const ctl_options *o);
int ctl_nodes(const ctl_options *o);
int ctl_node(const ctl_options *o, const char *id);
int ctl_label(const ctl_options *o, int add, const char *node,
              const char *label);
int ctl_drain(const ctl_options *o, int drain, const char *node);
int ctl_apps(const ctl_options *o);
int ctl_events(const ctl_options *o, const char *limit);

#endif
