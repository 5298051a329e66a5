/* config.c - the configuration table engine (see config.h). */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ini.h>

#include "ember/ember_errors.h"
#include "log.h"

#define STRING_MAX_DEFAULT 4096 /* CONFIG_STRING bytes when max is 0 */
#define LIST_MAX_DEFAULT   64   /* CONFIG_LIST items when max is 0 */
#define ITEM_MAX           4096 /* bytes of one list item */
#define VALUE_MAX          65536 /* bytes of one --set value */
#define TABLE_MAX          256  /* entries of one table */
#define NAME_MAX_LEN       64   /* bytes of an entry name */
#define SECTION_MAX_LEN    48   /* libinih keeps 49 bytes of a section name */
#define SHOW_MAX           64   /* bytes of user text quoted in a message */
#define WRAP_COLUMNS       78

const config_enum_value config_log_levels[] = {
  {"error", LOG_LVL_ERR},   {"warning", LOG_LVL_WARN},
  {"notice", LOG_LVL_NOTICE}, {"info", LOG_LVL_INFO},
  {"debug", LOG_LVL_DEBUG}, {NULL, 0},
};

/* A parsed value before it is stored in the daemon's struct. */
typedef union value {
  bool b;
  int i;
  uint64_t u;
  char *s;
  config_list l;
} value;

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */

static void fmt(char *buf, size_t len, const char *f, ...)
    __attribute__((format(printf, 3, 4)));

static void fmt(char *buf, size_t len, const char *f, ...) {
  va_list ap;
  if (!buf || len == 0) return;
  va_start(ap, f);
  vsnprintf(buf, len, f, ap);
  va_end(ap);
}

/* Copy user text for a message: at most SHOW_MAX bytes, "..." after a cut. */
typedef struct shown { char s[SHOW_MAX + 4]; } shown;

static shown show(const char *text) {
  shown r;
  size_t n = strlen(text);
  if (n <= SHOW_MAX) {
    memcpy(r.s, text, n + 1);
  } else {
    memcpy(r.s, text, SHOW_MAX);
    memcpy(r.s + SHOW_MAX, "...", 4);
  }
  return r;
}

static void *field(const config_entry *e, void *cfg) {
  return (char *)cfg + e->offset;
}

static const void *cfield(const config_entry *e, const void *cfg) {
  return (const char *)cfg + e->offset;
}

static int64_t string_max(const config_entry *e) {
  return e->max > 0 ? e->max : STRING_MAX_DEFAULT;
}

static int64_t list_max(const config_entry *e) {
  return e->max > 0 ? e->max : LIST_MAX_DEFAULT;
}

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* Length of the section part of name ("sec.key" -> 3), 0 when top-level. */
static size_t section_len(const char *name) {
  const char *dot = strchr(name, '.');
  return dot ? (size_t)(dot - name) : 0;
}

static const char *key_part(const char *name) {
  size_t n = section_len(name);
  return n ? name + n + 1 : name;
}

const config_entry *config_find(const config_entry *table, const char *name) {
  for (const config_entry *e = table; e->name; e++)
    if (strcmp(e->name, name) == 0) return e;
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Formatting of values                                                      */

/* Output either to a FILE or to a bounded buffer; used counts every byte
 * asked for, like snprintf's return value. */
typedef struct sink {
  FILE *f;
  char *buf;
  size_t len;
  size_t used;
} sink;

static void put(sink *s, const char *str, size_t n) {
  if (s->f) {
    fwrite(str, 1, n, s->f);
  } else if (s->len > 0 && s->used < s->len - 1) {
    size_t room = s->len - 1 - s->used;
    memcpy(s->buf + s->used, str, n < room ? n : room);
  }
  s->used += n;
}

static void puts_(sink *s, const char *str) { put(s, str, strlen(str)); }

static void format_int(int64_t n, bool octal, char *buf, size_t len) {
  if (octal && n > 0)
    snprintf(buf, len, "0%" PRIo64, (uint64_t)n);
  else
    snprintf(buf, len, "%" PRId64, n);
}

static const struct unit { const char *name; uint64_t mult; }
    size_units[] = {
      {"TiB", 1ull << 40}, {"GiB", 1ull << 30}, {"MiB", 1ull << 20},
      {"KiB", 1ull << 10}, {"T", 1ull << 40},   {"G", 1ull << 30},
      {"M", 1ull << 20},   {"K", 1ull << 10},   {"B", 1},
      {NULL, 0}},
    duration_units[] = {
      {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1}, {NULL, 0}};

/* Largest unit that divides n exactly (the first entries are preferred). */
static void format_units(uint64_t n, const struct unit *units, char *buf,
                         size_t len) {
  if (n == 0) {
    snprintf(buf, len, "0");
    return;
  }
  for (const struct unit *u = units; u->name; u++) {
    if (n % u->mult == 0) {
      snprintf(buf, len, "%" PRIu64 "%s", n / u->mult,
               u->mult == 1 && units == size_units ? "" : u->name);
      return;
    }
  }
  snprintf(buf, len, "%" PRIu64, n);
}

static void format_bound(const config_entry *e, int64_t n, char *buf,
                         size_t len) {
  if (e->type == CONFIG_SIZE)
    format_units((uint64_t)n, size_units, buf, len);
  else if (e->type == CONFIG_DURATION)
    format_units((uint64_t)n, duration_units, buf, len);
  else
    format_int(n, e->flags & CONFIG_OCTAL, buf, len);
}

static void format_value(const config_entry *e, const void *cfg, sink *s) {
  const void *p = cfield(e, cfg);
  char num[32];
  switch (e->type) {
  case CONFIG_BOOL:
    puts_(s, *(const bool *)p ? "true" : "false");
    break;
  case CONFIG_INT:
    format_int(*(const int *)p, e->flags & CONFIG_OCTAL, num, sizeof num);
    puts_(s, num);
    break;
  case CONFIG_SIZE:
    format_units(*(const uint64_t *)p, size_units, num, sizeof num);
    puts_(s, num);
    break;
  case CONFIG_DURATION:
    format_units(*(const uint64_t *)p, duration_units, num, sizeof num);
    puts_(s, num);
    break;
  case CONFIG_STRING: {
    const char *str = *(char *const *)p;
    size_t n = str ? strlen(str) : 0;
    /* quote what the parser would otherwise trim or unquote */
    bool quote = n > 0 && (is_blank(str[0]) || is_blank(str[n - 1]) ||
                           (str[0] == '"' && n > 1 && str[n - 1] == '"'));
    if (quote) put(s, "\"", 1);
    if (n) put(s, str, n);
    if (quote) put(s, "\"", 1);
    break;
  }
  case CONFIG_ENUM: {
    int v = *(const int *)p;
    const config_enum_value *ev = e->enums;
    while (ev && ev->name && ev->value != v) ev++;
    if (ev && ev->name) {
      puts_(s, ev->name);
    } else {
      snprintf(num, sizeof num, "%d", v);
      puts_(s, num);
    }
    break;
  }
  case CONFIG_LIST: {
    const config_list *l = p;
    for (size_t i = 0; i < l->count; i++) {
      if (i) put(s, ", ", 2);
      puts_(s, l->items[i]);
    }
    break;
  }
  }
}

int config_format_value(const config_entry *table, const void *cfg,
                        const char *name, char *buf, size_t len) {
  const config_entry *e = config_find(table, name);
  sink s = {NULL, buf, len, 0};
  if (!e) {
    if (len) buf[0] = '\0';
    return EMBER_ENOTFOUND;
  }
  format_value(e, cfg, &s);
  if (len == 0) return EMBER_ETOOBIG;
  buf[s.used < len ? s.used : len - 1] = '\0';
  return s.used < len ? 0 : EMBER_ETOOBIG;
}

/* ------------------------------------------------------------------------ */
/* Parsing of values                                                         */

static int bad(char *why, size_t wl, const char *f, ...)
    __attribute__((format(printf, 3, 4)));

static int bad(char *why, size_t wl, const char *f, ...) {
  va_list ap;
  if (why && wl) {
    va_start(ap, f);
    vsnprintf(why, wl, f, ap);
    va_end(ap);
  }
  return EMBER_ECONFIG;
}

static int check_bounds(const config_entry *e, const char *text, bool above,
                        bool below, char *why, size_t wl) {
  char b[32];
  if (above) {
    format_bound(e, e->max, b, sizeof b);
    return bad(why, wl, "%s is above the maximum %s", show(text).s, b);
  }
  if (below) {
    format_bound(e, e->min, b, sizeof b);
    return bad(why, wl, "%s is below the minimum %s", show(text).s, b);
  }
  return 0;
}

static int parse_bool(const char *text, bool *out, char *why, size_t wl) {
  static const char *const yes[] = {"true", "yes", "on", "1"};
  static const char *const no[] = {"false", "no", "off", "0"};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
    if (strcasecmp(text, yes[i]) == 0) { *out = true; return 0; }
    if (strcasecmp(text, no[i]) == 0) { *out = false; return 0; }
  }
  return bad(why, wl, "'%s' is not a boolean (true/false, yes/no, on/off, 1/0)",
             show(text).s);
}

static int parse_int(const config_entry *e, const char *text, int *out,
                     char *why, size_t wl) {
  bool octal = e->flags & CONFIG_OCTAL;
  const char *p = text + (text[0] == '-' || text[0] == '+');
  char *end;
  long long n;
  if (!isdigit((unsigned char)*p) || (octal && p != text))
    return bad(why, wl, "'%s' is not %s", show(text).s,
               octal ? "an octal number" : "an integer");
  errno = 0;
  n = strtoll(text, &end, octal ? 8 : 10);
  if (*end)
    return bad(why, wl, "'%s' is not %s", show(text).s,
               octal ? "an octal number" : "an integer");
  if (check_bounds(e, text, errno == ERANGE ? n > 0 : n > e->max,
                   errno == ERANGE ? n < 0 : n < e->min, why, wl))
    return EMBER_ECONFIG;
  *out = (int)n;
  return 0;
}

/* A number with a unit: sizes and durations. */
static int parse_units(const config_entry *e, const char *text,
                       uint64_t *out, char *why, size_t wl) {
  bool size = e->type == CONFIG_SIZE;
  const struct unit *units = size ? size_units : duration_units;
  const char *what = size ? "a size" : "a duration";
  const struct unit *u;
  char *end;
  unsigned long long n;
  uint64_t mult = 1;
  bool overflow;
  if (!isdigit((unsigned char)text[0]))
    return bad(why, wl, "'%s' is not %s", show(text).s, what);
  errno = 0;
  n = strtoull(text, &end, 10);
  overflow = errno == ERANGE;
  while (is_blank(*end)) end++;
  if (*end) {
    for (u = units; u->name && strcmp(u->name, end) != 0; u++) {}
    if (!u->name) {
      if (isdigit((unsigned char)*end) || *end == '.' || *end == '-')
        return bad(why, wl, "'%s' is not %s", show(text).s, what);
      return bad(why, wl, "'%s' has an unknown unit '%s' (use %s)",
                 show(text).s, show(end).s,
                 size ? "K, M, G, T, KiB, MiB, GiB, TiB or none for bytes"
                      : "ms, s, m or h");
    }
    mult = u->mult;
  } else if (!size && n != 0) {
    return bad(why, wl, "'%s' needs a unit (ms, s, m or h)", show(text).s);
  }
  if (n > UINT64_MAX / mult) overflow = true;
  n *= mult;
  if (check_bounds(e, text, overflow || n > (uint64_t)e->max,
                   n < (uint64_t)e->min, why, wl))
    return EMBER_ECONFIG;
  *out = n;
  return 0;
}

static int parse_string(const config_entry *e, const char *text, char **out,
                        char *why, size_t wl) {
  size_t n = strlen(text);
  if (n >= 2 && text[0] == '"' && text[n - 1] == '"') {
    text++;
    n -= 2;
  }
  if ((int64_t)n > string_max(e))
    return bad(why, wl, "%zu bytes, more than the maximum %" PRId64, n,
               string_max(e));
  *out = malloc(n + 1);
  if (!*out) {
    bad(why, wl, "out of memory");
    return EMBER_ENOMEM;
  }
  memcpy(*out, text, n);
  (*out)[n] = '\0';
  if (e->check) {
    char r[256] = "";
    if (e->check(*out, r, sizeof r)) {
      bad(why, wl, "'%s': %s", show(*out).s, r);
      free(*out);
      *out = NULL;
      return EMBER_ECONFIG;
    }
  }
  return 0;
}

static int parse_enum(const config_entry *e, const char *text, int *out,
                      char *why, size_t wl) {
  char names[512];
  size_t used = 0;
  for (const config_enum_value *ev = e->enums; ev->name; ev++) {
    if (strcmp(ev->name, text) == 0) {
      *out = ev->value;
      return 0;
    }
  }
  names[0] = '\0';
  for (const config_enum_value *ev = e->enums; ev->name; ev++) {
    int n = snprintf(names + used, sizeof names - used, "%s%s",
                     ev == e->enums ? "" : ", ", ev->name);
    if (n < 0 || (size_t)n >= sizeof names - used) break;
    used += (size_t)n;
  }
  return bad(why, wl, "'%s' is not one of %s", show(text).s, names);
}

/* One allocation: count + 1 pointers, then the items' bytes. */
static int list_alloc(config_list *l, size_t count, size_t bytes) {
  l->items = malloc((count + 1) * sizeof(char *) + bytes);
  l->count = 0;
  return l->items ? 0 : EMBER_ENOMEM;
}

static int parse_list(const config_entry *e, const char *text,
                      config_list *out, char *why, size_t wl) {
  size_t count = 0, i = 0;
  const char *p = text;
  char *dst;
  while (is_blank(*p)) p++;
  if (*p) {
    count = 1;
    for (const char *c = p; *c; c++) count += *c == ',';
  }
  if ((int64_t)count > list_max(e))
    return bad(why, wl, "%zu items, more than the maximum %" PRId64, count,
               list_max(e));
  if ((int64_t)count < e->min)
    return bad(why, wl, "needs at least %" PRId64 " item%s", e->min,
               e->min == 1 ? "" : "s");
  if (list_alloc(out, count, strlen(text) + 1)) {
    bad(why, wl, "out of memory");
    return EMBER_ENOMEM;
  }
  dst = (char *)(out->items + count + 1);
  for (i = 0; i < count; i++) {
    const char *end = strchr(p, ',');
    size_t n;
    if (!end) end = p + strlen(p);
    while (is_blank(*p)) p++;
    n = (size_t)(end - p);
    while (n && is_blank(p[n - 1])) n--;
    if (n == 0) {
      bad(why, wl, "item %zu is empty", i + 1);
      goto fail;
    }
    if (n > ITEM_MAX) {
      bad(why, wl, "item %zu is %zu bytes, more than the maximum %d", i + 1,
          n, ITEM_MAX);
      goto fail;
    }
    memcpy(dst, p, n);
    dst[n] = '\0';
    out->items[i] = dst;
    if (e->check) {
      char r[256] = "";
      if (e->check(dst, r, sizeof r)) {
        bad(why, wl, "'%s': %s", show(dst).s, r);
        goto fail;
      }
    }
    dst += n + 1;
    p = *end ? end + 1 : end;
  }
  out->items[count] = NULL;
  out->count = count;
  return 0;
fail:
  free(out->items);
  out->items = NULL;
  return EMBER_ECONFIG;
}

/* Parse text (already trimmed) as e's type into v. Returns 0,
 * EMBER_ECONFIG or EMBER_ENOMEM with the reason in why. */
static int parse_value(const config_entry *e, const char *text, value *v,
                       char *why, size_t wl) {
  int rc;
  for (const char *c = text; *c; c++)
    if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f)
      return bad(why, wl, "contains a control character");
  switch (e->type) {
  case CONFIG_BOOL: rc = parse_bool(text, &v->b, why, wl); break;
  case CONFIG_INT: rc = parse_int(e, text, &v->i, why, wl); break;
  case CONFIG_SIZE:
  case CONFIG_DURATION: rc = parse_units(e, text, &v->u, why, wl); break;
  case CONFIG_ENUM: rc = parse_enum(e, text, &v->i, why, wl); break;
  case CONFIG_STRING: return parse_string(e, text, &v->s, why, wl);
  case CONFIG_LIST: return parse_list(e, text, &v->l, why, wl);
  default: return bad(why, wl, "unknown type %d", (int)e->type);
  }
  if (rc == 0 && e->check) {
    char r[256] = "";
    if (e->check(text, r, sizeof r))
      return bad(why, wl, "'%s': %s", show(text).s, r);
  }
  return rc;
}

static void free_value(const config_entry *e, value *v) {
  if (e->type == CONFIG_STRING) {
    free(v->s);
    v->s = NULL;
  } else if (e->type == CONFIG_LIST) {
    free(v->l.items);
    v->l.items = NULL;
    v->l.count = 0;
  }
}

/* Store v in cfg, taking its memory; frees the old value if free_old. */
static void store(const config_entry *e, void *cfg, value *v, bool free_old) {
  void *p = field(e, cfg);
  switch (e->type) {
  case CONFIG_BOOL: *(bool *)p = v->b; break;
  case CONFIG_INT:
  case CONFIG_ENUM: *(int *)p = v->i; break;
  case CONFIG_SIZE:
  case CONFIG_DURATION: *(uint64_t *)p = v->u; break;
  case CONFIG_STRING:
    if (free_old) free(*(char **)p);
    *(char **)p = v->s;
    break;
  case CONFIG_LIST:
    if (free_old) free(((config_list *)p)->items);
    *(config_list *)p = v->l;
    break;
  }
}

static int apply(const config_entry *e, void *cfg, const char *text,
                 char *why, size_t wl) {
  value v;
  int rc = parse_value(e, text, &v, why, wl);
  if (rc) return rc;
  store(e, cfg, &v, true);
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Table check, init, free                                                   */

/* Lower-case letters, digits, '_' and '-' (section "fpga-emu", named
 * after its platform kind), starting with a letter. */
static bool valid_name_part(const char *s, size_t n) {
  if (n == 0 || !islower((unsigned char)s[0])) return false;
  for (size_t i = 0; i < n; i++)
    if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) &&
        s[i] != '_' && s[i] != '-')
      return false;
  return true;
}

static int check_entry(const config_entry *e, char *err, size_t el) {
  size_t n = strlen(e->name), sec = section_len(e->name);
  const char *key = key_part(e->name);
  char why[256] = "";
  value v;
  if (n > NAME_MAX_LEN || sec > SECTION_MAX_LEN ||
      (sec && !valid_name_part(e->name, sec)) ||
      !valid_name_part(key, strlen(key)))
    return bad(err, el, "entry '%s': bad name", e->name);
  if (!e->help || !e->help[0] || !e->def)
    return bad(err, el, "entry '%s': no help or no default", e->name);
  if (e->flags & ~(CONFIG_RELOADABLE | CONFIG_OCTAL) ||
      ((e->flags & CONFIG_OCTAL) && e->type != CONFIG_INT))
    return bad(err, el, "entry '%s': bad flags", e->name);
  switch (e->type) {
  case CONFIG_INT:
    if (e->min < INT_MIN || e->max > INT_MAX ||
        ((e->flags & CONFIG_OCTAL) && e->min < 0))
      return bad(err, el, "entry '%s': bounds outside int", e->name);
    /* fall through */
  case CONFIG_SIZE:
  case CONFIG_DURATION:
    if (e->min > e->max || (e->type != CONFIG_INT && e->min < 0))
      return bad(err, el, "entry '%s': bad bounds", e->name);
    break;
  case CONFIG_STRING:
    if (e->min != 0 || e->max < 0 || e->max > VALUE_MAX)
      return bad(err, el, "entry '%s': bad bounds", e->name);
    break;
  case CONFIG_LIST:
    if (e->min < 0 || e->max < 0 || e->min > list_max(e))
      return bad(err, el, "entry '%s': bad bounds", e->name);
    break;
  case CONFIG_ENUM:
    if (!e->enums || !e->enums[0].name)
      return bad(err, el, "entry '%s': no enum names", e->name);
    break;
  case CONFIG_BOOL:
    break;
  default:
    return bad(err, el, "entry '%s': unknown type", e->name);
  }
  if (parse_value(e, e->def, &v, why, sizeof why))
    return bad(err, el, "entry '%s': default '%s': %s", e->name, e->def, why);
  free_value(e, &v);
  return 0;
}

int config_check_table(const config_entry *table, char *err, size_t err_len) {
  const config_entry *e;
  size_t count = 0;
  fmt(err, err_len, "%s", "");
  if (!table) return bad(err, err_len, "no table");
  for (e = table; e->name; e++) {
    int rc = check_entry(e, err, err_len);
    if (rc) return rc;
    if (++count > TABLE_MAX)
      return bad(err, err_len, "more than %d entries", TABLE_MAX);
    for (const config_entry *o = table; o < e; o++)
      if (strcmp(o->name, e->name) == 0)
        return bad(err, err_len, "entry '%s' twice", e->name);
    /* sections: after the top-level keys, each in one run */
    if (e > table) {
      size_t sec = section_len(e->name), psec = section_len(e[-1].name);
      bool same = sec == psec && memcmp(e->name, e[-1].name, sec) == 0;
      if (!same && sec == 0)
        return bad(err, err_len, "entry '%s': top-level key after a section",
                   e->name);
      for (const config_entry *o = table; !same && o < e; o++)
        if (section_len(o->name) == sec && memcmp(o->name, e->name, sec) == 0)
          return bad(err, err_len, "entry '%s': section split in two runs",
                     e->name);
    }
  }
  return 0;
}

int config_init(const config_entry *table, void *cfg) {
  for (const config_entry *e = table; e->name; e++) {
    value v;
    char why[256] = "";
    int rc = parse_value(e, e->def, &v, why, sizeof why);
    if (rc) return rc;
    store(e, cfg, &v, false);
  }
  return 0;
}

void config_free(const config_entry *table, void *cfg) {
  for (const config_entry *e = table; e->name; e++) {
    void *p = field(e, cfg);
    if (e->type == CONFIG_STRING) {
      free(*(char **)p);
      *(char **)p = NULL;
    } else if (e->type == CONFIG_LIST) {
      config_list *l = p;
      free(l->items);
      l->items = NULL;
      l->count = 0;
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Files and --set                                                           */

typedef struct load_ctx {
  const config_entry *table;
  void *cfg;
  FILE *f;
  const char *path;
  int line;           /* lines handed to libinih so far */
  int err_line;       /* line of the first error found here, 0: none */
  int rc;             /* its code */
  int read_errno;     /* nonzero: reading the file failed */
  char *err;
  size_t err_len;
  int seen[TABLE_MAX]; /* line where each key was set, 0: not yet */
} load_ctx;

static void load_error(load_ctx *c, int rc, const char *f, ...)
    __attribute__((format(printf, 3, 4)));

static void load_error(load_ctx *c, int rc, const char *f, ...) {
  char reason[512];
  va_list ap;
  va_start(ap, f);
  vsnprintf(reason, sizeof reason, f, ap);
  va_end(ap);
  fmt(c->err, c->err_len, "%s:%d: %s", c->path, c->line, reason);
  c->err_line = c->line;
  c->rc = rc;
}

static bool section_known(const config_entry *table, const char *name,
                          size_t n) {
  if (n == 0) return false;
  for (const config_entry *e = table; e->name; e++)
    if (section_len(e->name) == n && memcmp(e->name, name, n) == 0)
      return true;
  return false;
}

/* A "[section]" line must name a section of the table, with nothing but a
 * comment after it. Lines libinih calls syntax errors are left to it. */
static void check_section_line(load_ctx *c, const char *line) {
  const char *close = strchr(line, ']'), *after;
  for (const char *p = line + 1; close && p < close; p++)
    if (is_blank(p[0]) && p[1] == ';') return;
  if (!close) return;
  after = close + 1;
  while (isspace((unsigned char)*after)) after++;
  if (*after && *after != ';' && *after != '#') {
    load_error(c, EMBER_ECONFIG, "syntax error");
    return;
  }
  if (!section_known(c->table, line + 1, (size_t)(close - line - 1))) {
    char name[SHOW_MAX + 1];
    size_t n = (size_t)(close - line - 1);
    if (n > SHOW_MAX) n = SHOW_MAX;
    memcpy(name, line + 1, n);
    name[n] = '\0';
    load_error(c, EMBER_ECONFIG, "unknown section '%s'", name);
  }
}

/* libinih's reader: one whole line at a time, leading blanks removed (so
 * that libinih's multi-line continuation never applies), lines that do not
 * fit and NUL bytes refused. Returns NULL at the end or after an error. */
static char *read_line(char *str, int num, void *stream) {
  load_ctx *c = stream;
  size_t cap = num > 2 ? (size_t)num - 2 : 0, n = 0;
  bool any = false, leading = true, nul = false;
  int ch;
  if (c->err_line || c->read_errno) return NULL;
  while ((ch = getc(c->f)) != EOF) {
    any = true;
    if (ch == '\n') break;
    if (ch == '\0') nul = true;
    if (leading && is_blank((char)ch)) continue;
    leading = false;
    if (n < cap) str[n] = (char)ch;
    n++;
  }
  if (ferror(c->f)) {
    c->read_errno = errno ? errno : EIO;
    return NULL;
  }
  if (!any) return NULL;
  c->line++;
  if (n > cap) {
    load_error(c, EMBER_ECONFIG, "line longer than %zu bytes", cap);
    return NULL;
  }
  if (nul) {
    load_error(c, EMBER_ECONFIG, "syntax error");
    return NULL;
  }
  str[n] = '\n';
  str[n + 1] = '\0';
  if (str[0] == '[') {
    check_section_line(c, str);
    if (c->err_line) return NULL;
  }
  return str;
}

static int on_key(void *user, const char *section, const char *name,
                  const char *val) {
  load_ctx *c = user;
  char full[NAME_MAX_LEN + 2];
  char why[512];
  const config_entry *e = NULL;
  int n, rc;
  size_t idx;
  if (c->err_line) return 0;
  n = section[0] ? snprintf(full, sizeof full, "%s.%s", section, name)
                 : snprintf(full, sizeof full, "%s", name);
  if (n >= 0 && (size_t)n < sizeof full) e = config_find(c->table, full);
  if (!e) {
    load_error(c, EMBER_ECONFIG, "unknown key '%s'", show(full).s);
    return 0;
  }
  idx = (size_t)(e - c->table);
  if (idx < TABLE_MAX && c->seen[idx]) {
    load_error(c, EMBER_ECONFIG, "key '%s': already set on line %d", e->name,
               c->seen[idx]);
    return 0;
  }
  rc = apply(e, c->cfg, val, why, sizeof why);
  if (rc) {
    load_error(c, rc, "key '%s': %s", e->name, why);
    return 0;
  }
  if (idx < TABLE_MAX) c->seen[idx] = c->line;
  return 1;
}

int config_load_file(const config_entry *table, void *cfg, const char *path,
                     char *err, size_t err_len) {
  load_ctx c;
  int ret;
  fmt(err, err_len, "%s", "");
  memset(&c, 0, sizeof c);
  c.table = table;
  c.cfg = cfg;
  c.path = path;
  c.err = err;
  c.err_len = err_len;
  c.f = fopen(path, "r");
  if (!c.f) {
    fmt(err, err_len, "%s: cannot open: %s", path, strerror(errno));
    return EMBER_ECONFIG;
  }
  errno = 0;
  ret = ini_parse_stream(read_line, &c, on_key, &c);
  fclose(c.f);
  if (c.read_errno) {
    fmt(err, err_len, "%s: cannot read: %s", path, strerror(c.read_errno));
    return EMBER_ECONFIG;
  }
  if (ret == -2) {
    fmt(err, err_len, "%s: out of memory", path);
    return EMBER_ENOMEM;
  }
  if (ret > 0 && (c.err_line == 0 || ret < c.err_line)) {
    fmt(err, err_len, "%s:%d: syntax error", path, ret);
    return EMBER_ECONFIG;
  }
  if (c.err_line) return c.rc;
  if (ret != 0) {
    fmt(err, err_len, "%s: cannot parse (libinih error %d)", path, ret);
    return EMBER_ECONFIG;
  }
  return 0;
}

int config_set(const config_entry *table, void *cfg, const char *assignment,
               char *err, size_t err_len) {
  const char *eq = strchr(assignment, '=');
  const char *k = assignment, *v;
  const config_entry *e = NULL;
  char key[NAME_MAX_LEN + 1];
  char why[512];
  char *text;
  size_t kn, vn;
  int rc;
  fmt(err, err_len, "%s", "");
  if (!eq) {
    fmt(err, err_len, "--set %s: expected KEY=VALUE", show(assignment).s);
    return EMBER_ECONFIG;
  }
  while (is_blank(*k)) k++;
  kn = (size_t)(eq - k);
  while (kn && is_blank(k[kn - 1])) kn--;
  if (kn < sizeof key) {
    memcpy(key, k, kn);
    key[kn] = '\0';
    e = config_find(table, key);
  }
  if (!e) {
    char shown_key[SHOW_MAX + 1];
    size_t n = kn < SHOW_MAX ? kn : SHOW_MAX;
    memcpy(shown_key, k, n);
    shown_key[n] = '\0';
    fmt(err, err_len, "--set %s: unknown key '%s'", show(assignment).s,
        shown_key);
    return EMBER_ECONFIG;
  }
  v = eq + 1;
  while (is_blank(*v)) v++;
  vn = strnlen(v, VALUE_MAX + 1);
  if (vn > VALUE_MAX) {
    fmt(err, err_len, "--set %s: value longer than %d bytes",
        show(assignment).s, VALUE_MAX);
    return EMBER_ECONFIG;
  }
  while (vn && is_blank(v[vn - 1])) vn--;
  text = malloc(vn + 1);
  if (!text) {
    fmt(err, err_len, "--set %s: out of memory", show(assignment).s);
    return EMBER_ENOMEM;
  }
  memcpy(text, v, vn);
  text[vn] = '\0';
  rc = apply(e, cfg, text, why, sizeof why);
  free(text);
  if (rc) fmt(err, err_len, "--set %s: %s", show(assignment).s, why);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Example, dump, reload                                                     */

/* Write text as "# " comment lines of at most WRAP_COLUMNS columns. */
static void wrap(FILE *out, const char *text) {
  size_t col = 0;
  const char *p = text;
  for (;;) {
    size_t n;
    while (isspace((unsigned char)*p)) p++;
    if (!*p) break;
    for (n = 0; p[n] && !isspace((unsigned char)p[n]); n++) {}
    if (col > 0 && col + 1 + n > WRAP_COLUMNS) {
      fputc('\n', out);
      col = 0;
    }
    if (col == 0) {
      fputc('#', out);
      col = 1;
    }
    fputc(' ', out);
    fwrite(p, 1, n, out);
    col += 1 + n;
    p += n;
  }
  if (col) fputc('\n', out);
}

static void describe(const config_entry *e, char *buf, size_t len) {
  char lo[32], hi[32], names[512] = "";
  size_t used = 0;
  format_bound(e, e->min, lo, sizeof lo);
  format_bound(e, e->max, hi, sizeof hi);
  switch (e->type) {
  case CONFIG_BOOL:
    used = (size_t)snprintf(buf, len,
                            "Type: boolean (true/false, yes/no, on/off, 1/0).");
    break;
  case CONFIG_INT:
    used = (size_t)snprintf(buf, len, "Type: %s, %s to %s.",
                            e->flags & CONFIG_OCTAL ? "octal integer"
                                                    : "integer",
                            lo, hi);
    break;
  case CONFIG_SIZE:
    used = (size_t)snprintf(buf, len,
                            "Type: size in bytes, %s to %s (suffixes K, M, G,"
                            " T or KiB, MiB, GiB, TiB: powers of 1024).",
                            lo, hi);
    break;
  case CONFIG_DURATION:
    used = (size_t)snprintf(buf, len,
                            "Type: duration, %s to %s (units ms, s, m, h).",
                            lo, hi);
    break;
  case CONFIG_STRING:
    used = (size_t)snprintf(buf, len, "Type: string, at most %" PRId64
                            " bytes.", string_max(e));
    break;
  case CONFIG_ENUM:
    for (const config_enum_value *ev = e->enums; ev->name; ev++) {
      size_t n = strlen(names);
      snprintf(names + n, sizeof names - n, "%s%s",
               ev == e->enums ? "" : ", ", ev->name);
    }
    used = (size_t)snprintf(buf, len, "Type: one of %s.", names);
    break;
  case CONFIG_LIST:
    used = (size_t)snprintf(buf, len,
                            "Type: comma-separated list, %" PRId64 " to %"
                            PRId64 " items.", e->min, list_max(e));
    break;
  }
  if (used < len)
    snprintf(buf + used, len - used, " %s",
             e->flags & CONFIG_RELOADABLE ? "Reloadable on SIGHUP."
                                          : "Changing it needs a restart.");
}

/* Print "[section]" when e starts a section other than the previous one. */
static void section_header(const config_entry *table, const config_entry *e,
                           FILE *out, bool blank_before) {
  size_t sec = section_len(e->name);
  if (sec == 0) return;
  if (e > table && section_len(e[-1].name) == sec &&
      memcmp(e[-1].name, e->name, sec) == 0)
    return;
  fprintf(out, "%s[%.*s]\n", blank_before ? "\n" : "", (int)sec, e->name);
}

void config_write_example(const config_entry *table, FILE *out,
                          const char *header) {
  bool first = true;
  if (header) {
    const char *p = header;
    while (*p) {
      size_t n = strcspn(p, "\n");
      if (n)
        fprintf(out, "# %.*s\n", (int)n, p);
      else
        fputs("#\n", out);
      p += n;
      if (*p) p++;
    }
    first = false;
  }
  for (const config_entry *e = table; e->name; e++) {
    char meta[1024];
    section_header(table, e, out, !first);
    if (!first) fputc('\n', out);
    first = false;
    wrap(out, e->help);
    describe(e, meta, sizeof meta);
    wrap(out, meta);
    fprintf(out, "#%s =%s%s\n", key_part(e->name), e->def[0] ? " " : "",
            e->def);
  }
}

void config_dump(const config_entry *table, const void *cfg, FILE *out) {
  for (const config_entry *e = table; e->name; e++) {
    sink count = {NULL, NULL, 0, 0}, file = {out, NULL, 0, 0};
    section_header(table, e, out, e > table);
    format_value(e, cfg, &count);
    fprintf(out, "%s =%s", key_part(e->name), count.used ? " " : "");
    format_value(e, cfg, &file);
    fputc('\n', out);
  }
}

static bool values_equal(const config_entry *e, const void *a,
                         const void *b) {
  const void *pa = cfield(e, a), *pb = cfield(e, b);
  switch (e->type) {
  case CONFIG_BOOL: return *(const bool *)pa == *(const bool *)pb;
  case CONFIG_INT:
  case CONFIG_ENUM: return *(const int *)pa == *(const int *)pb;
  case CONFIG_SIZE:
  case CONFIG_DURATION: return *(const uint64_t *)pa == *(const uint64_t *)pb;
  case CONFIG_STRING: {
    const char *sa = *(char *const *)pa, *sb = *(char *const *)pb;
    return strcmp(sa ? sa : "", sb ? sb : "") == 0;
  }
  case CONFIG_LIST: {
    const config_list *la = pa, *lb = pb;
    if (la->count != lb->count) return false;
    for (size_t i = 0; i < la->count; i++)
      if (strcmp(la->items[i], lb->items[i]) != 0) return false;
    return true;
  }
  }
  return false;
}

/* A deep copy of e's value in cfg. */
static int copy_value(const config_entry *e, const void *cfg, value *v) {
  const void *p = cfield(e, cfg);
  switch (e->type) {
  case CONFIG_BOOL: v->b = *(const bool *)p; return 0;
  case CONFIG_INT:
  case CONFIG_ENUM: v->i = *(const int *)p; return 0;
  case CONFIG_SIZE:
  case CONFIG_DURATION: v->u = *(const uint64_t *)p; return 0;
  case CONFIG_STRING: {
    const char *s = *(char *const *)p;
    size_t n = s ? strlen(s) : 0;
    v->s = malloc(n + 1);
    if (!v->s) return EMBER_ENOMEM;
    if (n) memcpy(v->s, s, n);
    v->s[n] = '\0';
    return 0;
  }
  case CONFIG_LIST: {
    const config_list *l = p;
    size_t bytes = 0;
    char *dst;
    for (size_t i = 0; i < l->count; i++) bytes += strlen(l->items[i]) + 1;
    if (list_alloc(&v->l, l->count, bytes)) return EMBER_ENOMEM;
    dst = (char *)(v->l.items + l->count + 1);
    for (size_t i = 0; i < l->count; i++) {
      size_t n = strlen(l->items[i]) + 1;
      memcpy(dst, l->items[i], n);
      v->l.items[i] = dst;
      dst += n;
    }
    v->l.items[l->count] = NULL;
    v->l.count = l->count;
    return 0;
  }
  }
  return EMBER_EINTERNAL;
}

int config_reload(const config_entry *table, void *live_cfg,
                  const void *new_cfg,
                  void (*note)(const char *key, int applied, void *user),
                  void *user) {
  for (const config_entry *e = table; e->name; e++) {
    bool reload = e->flags & CONFIG_RELOADABLE;
    if (values_equal(e, live_cfg, new_cfg)) continue;
    if (reload) {
      value v;
      int rc = copy_value(e, new_cfg, &v);
      if (rc) return rc;
      store(e, live_cfg, &v, true);
    }
    if (note) note(e->name, reload, user);
  }
  return 0;
}
