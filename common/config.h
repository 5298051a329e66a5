/*
 * config.h - the configuration table engine shared by the daemons.
 *
 * A daemon describes its configuration once, as a const table of
 * config_entry (name, type, default, bounds, reloadable or not, help, and
 * where the value lives in the daemon's config struct). The same table
 *   - fills the struct with the defaults          config_init
 *   - reads an INI file                           config_load_file
 *   - applies --set key=value                     config_set
 *   - writes the commented example config         config_write_example
 *   - prints the effective values                 config_dump
 *   - answers the status API                      config_format_value
 *   - applies a SIGHUP reload                     config_reload
 *   - frees what it allocated                     config_free
 * and config_check_table() lets a unit test prove that every default parses.
 *
 * File syntax (parsed by libinih): "key = value" lines, '#' or ';' comments
 * at the start of a line, " ;" inline comments, at most
 * CONFIG_MAX_LINE bytes a line. Keys before any section are top-level; a
 * "[section]" line makes the following keys "section.key". Unknown keys and
 * sections, bad values and keys given twice are errors.
 *
 * Value syntax by type (C type of the field in brackets):
 *   CONFIG_BOOL     [bool]      true/false, yes/no, on/off, 1/0
 *   CONFIG_INT      [int]       decimal, min..max; with CONFIG_OCTAL the text
 *                               is octal ("0660", printed the same way)
 *   CONFIG_SIZE     [uint64_t]  bytes: a number with an optional suffix
 *                               K M G T or KiB MiB GiB TiB (all powers of
 *                               1024) or B, min..max
 *   CONFIG_DURATION [uint64_t]  milliseconds: a number with a unit ms s m h
 *                               (0 needs none), min..max
 *   CONFIG_STRING   [char *]    the text (surrounding double quotes are
 *                               removed), at most max bytes (0: 4096)
 *   CONFIG_ENUM     [int]       one of the names in enums, stored as its value
 *   CONFIG_LIST     [config_list] comma-separated items, whitespace trimmed;
 *                               empty items are errors; min..max items
 *                               (max 0: 64), each at most 4096 bytes
 * Control characters are refused in every value.
 *
 * Errors: functions return 0 or a negative EMBER_E* (ember_errors.h) and
 * write one line of detail to err (always NUL-terminated when err_len > 0):
 *   PATH:LINE: key 'NAME': REASON      a bad value in a file
 *   PATH:LINE: unknown key 'NAME'      (also: unknown section, syntax error,
 *                                       line too long)
 *   PATH: cannot open: STRERROR
 *   --set NAME=VALUE: REASON
 *
 * Threads: none of this is thread-safe on one config struct; the daemon's
 * loop thread owns it. Nothing here logs or exits.
 */
#ifndef EMBER_CONFIG_H
#define EMBER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum config_type {
  CONFIG_BOOL,
  CONFIG_INT,
  CONFIG_SIZE,
  CONFIG_DURATION,
  CONFIG_STRING,
  CONFIG_ENUM,
  CONFIG_LIST,
} config_type;

/* config_entry.flags */
#define CONFIG_RELOADABLE 0x1u /* config_reload applies a change on SIGHUP */
#define CONFIG_OCTAL      0x2u /* CONFIG_INT read and printed in octal */

/* Longest line of a config file, in bytes, without the line end (libinih's
 * line buffer is fixed at build time). */
#define CONFIG_MAX_LINE 198

/* A CONFIG_LIST value. items has count strings and a NULL after them; the
 * whole list is one allocation owned by the config struct. */
typedef struct config_list {
  char **items;
  size_t count;
} config_list;

/* One name of a CONFIG_ENUM; an entry with name NULL ends the array. */
typedef struct config_enum_value {
  const char *name;
  int value;
} config_enum_value;

/* The names of the log levels (LOG_LVL_* of log.h), for a daemon's
 * log_level key. */
extern const config_enum_value config_log_levels[];

/*
 * A per-value check beyond type and bounds, e.g. the form of an address.
 * Called with each item of a CONFIG_LIST, or the text of any other type once
 * it has parsed. Returns 0, or EMBER_ECONFIG with the reason in why (the
 * engine adds the quoted text in front of it).
 */
typedef int (*config_check_fn)(const char *text, char *why, size_t why_len);

/* One key. A table is an array ended by an entry whose name is NULL. */
typedef struct config_entry {
  const char *name;      /* "key", or "section.key" */
  config_type type;
  unsigned flags;        /* CONFIG_RELOADABLE, CONFIG_OCTAL */
  size_t offset;         /* of the field in the daemon's struct: CONFIG_AT */
  const char *def;       /* the default, in the file's syntax */
  int64_t min, max;      /* numbers: bounds; STRING: max bytes (0: 4096);
                            LIST: min and max items (max 0: 64) */
  const config_enum_value *enums; /* CONFIG_ENUM only */
  config_check_fn check; /* optional */
  const char *help;      /* one paragraph, written into the example */
} config_entry;

/*
 * CONFIG_AT(struct type, field, C type) - offsetof(), but refuses to compile
 * when the field does not have the C type the entry's config_type needs.
 */
#define CONFIG_AT(stype, field, ctype)                                       \
  (offsetof(stype, field) +                                                  \
   0 * sizeof(_Generic(((stype *)0)->field, ctype: 1)))

/*
 * config_check_table - check a table: names well formed and unique,
 * sections contiguous and after the top-level keys, bounds sane, help
 * present, every default parses and lies within its bounds.
 * Returns 0, or EMBER_ECONFIG with the first problem in err. For unit tests.
 */
int config_check_table(const config_entry *table, char *err, size_t err_len);

/*
 * config_init - set every field named by the table to its default.
 * cfg must be zeroed or freed with config_free (old values are not freed).
 * Returns 0, EMBER_ENOMEM, or EMBER_ECONFIG for a default that does not
 * parse (a bug in the table, caught by config_check_table); on error some
 * fields are set and cfg must be released with config_free.
 */
int config_init(const config_entry *table, void *cfg);

/*
 * config_load_file - read the INI file at path into cfg (already set by
 * config_init), key by key. Stops at the first error.
 * Returns 0, EMBER_ECONFIG (unknown key or section, syntax error, bad value,
 * key given twice, file that cannot be opened or read) or EMBER_ENOMEM, with
 * the detail in err. On error cfg holds a mix of old and new values: it is
 * still valid for config_free, but should not be used.
 */
int config_load_file(const config_entry *table, void *cfg, const char *path,
                     char *err, size_t err_len);

/*
 * config_set - apply one "key=value" assignment (from --set), as the file
 * would; call it after config_load_file so that it takes precedence.
 * Returns 0, EMBER_ECONFIG or EMBER_ENOMEM with the detail in err.
 */
int config_set(const config_entry *table, void *cfg, const char *assignment,
               char *err, size_t err_len);

/*
 * config_write_example - write a commented example config to out: header
 * (may be NULL; each of its lines prefixed "# "), then for each key its help
 * wrapped at 78 columns, its type, bounds and whether SIGHUP reloads it, and
 * "#key = default". Loading the file with the '#' of those last lines
 * removed gives the defaults.
 */
void config_write_example(const config_entry *table, FILE *out,
                          const char *header);

/* config_dump - write "key = value" for every key, as config_format_value
 * formats it, with [section] lines where needed. */
void config_dump(const config_entry *table, const void *cfg, FILE *out);

/*
 * config_format_value - the value of key name in cfg, formatted as the file
 * takes it (sizes and durations in the largest exact unit, octal ints with
 * a leading 0, list items joined by ", "), into buf.
 * Returns 0, EMBER_ENOTFOUND for an unknown name, or EMBER_ETOOBIG when buf
 * is too small (buf then holds as much as fits, NUL-terminated).
 */
int config_format_value(const config_entry *table, const void *cfg,
                        const char *name, char *buf, size_t len);

/*
 * config_reload - compare new_cfg (a fresh config_init + load + sets) with
 * live_cfg. Each changed key is reported to note (may be NULL): reloadable
 * ones are copied into live_cfg first (applied = 1), the others are left
 * alone (applied = 0). new_cfg is not changed; the caller frees it.
 * Returns 0, or EMBER_ENOMEM (keys before the failing one are applied).
 */
int config_reload(const config_entry *table, void *live_cfg,
                  const void *new_cfg,
                  void (*note)(const char *key, int applied, void *user),
                  void *user);

/* config_free - free the strings and lists of cfg and set them to NULL.
 * Safe on a zeroed struct, an init'ed one, or twice. */
void config_free(const config_entry *table, void *cfg);

/* config_find - the entry called name, or NULL. */
const config_entry *config_find(const config_entry *table, const char *name);

#endif
