/* plugin_loader.c - accelerators from shared objects (plugin_loader.h). */
#include "plugin_loader.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ember/ember_errors.h"

static const char *const refusal_names[ACC_PLUGIN_N_REFUSALS] = {
#define X(id, text) text,
  ACC_PLUGIN_REFUSALS(X)
#undef X
};

const char *acc_plugin_refusal_name(enum acc_plugin_refusal r) {
  return (unsigned)r < ACC_PLUGIN_N_REFUSALS ? refusal_names[r] : "unknown";
}

/* Record a refusal. Returns 0, or EMBER_ENOMEM (counted, not listed). */
static int refuse(acc_plugins *p, enum acc_plugin_refusal r,
                  const char *path, const char *why) {
  p->refused[r]++;
  acc_plugin_refused *l =
      realloc(p->refusals, (p->n_refusals + 1) * sizeof *l);
  if (!l) return EMBER_ENOMEM;
  p->refusals = l;
  char *path_copy = strdup(path), *why_copy = strdup(why);
  if (!path_copy || !why_copy) {
    free(path_copy);
    free(why_copy);
    return EMBER_ENOMEM;
  }
  l[p->n_refusals++] = (acc_plugin_refused){
      .path = path_copy, .reason = r, .why = why_copy};
  return 0;
}

/* Who may change what we load: root and the daemon's own user, nobody
 * through a group or world write bit. Returns NULL or the reason. */
static const char *unsafe_stat(const struct stat *st, int want_dir,
                               char *why, size_t len) {
  if (want_dir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode))
    return want_dir ? "not a directory" : "not a regular file";
  if (st->st_uid != 0 && st->st_uid != geteuid()) {
    snprintf(why, len, "owned by uid %u, neither root nor the process's "
             "user (uid %u)", (unsigned)st->st_uid, (unsigned)geteuid());
    return why;
  }
  if (st->st_mode & (S_IWGRP | S_IWOTH)) {
    snprintf(why, len, "writable by its %s (mode %04o)",
             st->st_mode & S_IWOTH ? "world" : "group",
             (unsigned)(st->st_mode & 07777));
    return why;
  }
  return NULL;
}

/* "NAME.so" with a NAME that does not start with a dot. */
static int plugin_file(const struct dirent *e) {
  size_t n = strlen(e->d_name);
  return e->d_name[0] != '.' && n > 3 && strcmp(e->d_name + n - 3, ".so") == 0;
}

static int name_valid(const char *name) {
  size_t n = name ? strnlen(name, 64) : 0;
  if (n < 1 || n > 63) return 0;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)name[i]) && !strchr("_.-", name[i])) return 0;
  return 1;
}

static int name_taken(const acc_plugins *p, const acc_descriptor *const *b,
                      size_t nb, const char *name) {
  for (size_t i = 0; i < nb; i++)
    if (strcmp(b[i]->name, name) == 0) return 1;
  for (size_t i = 0; i < p->count; i++)
    if (strcmp(p->items[i].acc->name, name) == 0) return 1;
  return 0;
}

/* Checks on the descriptor; returns the refusal or -1 when it is fine. */
static int check_descriptor(const acc_plugins *p,
                            const acc_descriptor *const *b, size_t nb,
                            const acc_descriptor *d, char *why, size_t len) {
  /* abi_version is the first field of every version: safe to read; the
   * engine reads no field past the descriptor's version (accel.h) */
  if (d->abi_version < ACC_ABI_OLDEST || d->abi_version > ACC_ABI_VERSION) {
    snprintf(why, len, "ABI version %u, this ember loads %u to %u",
             d->abi_version, ACC_ABI_OLDEST, ACC_ABI_VERSION);
    return ACC_REFUSAL_ABI;
  }
  if (!name_valid(d->name)) {
    snprintf(why, len, "no valid name (1 to 63 letters, digits, '_', '.', "
             "'-')");
    return ACC_REFUSAL_INCOMPLETE;
  }
  const char *missing = !d->validate ? "validate"
                        : !d->run_cpu ? "run_cpu"
                        : !d->release ? "release"
                        : !d->work    ? "work"
                                      : NULL;
  if (missing) {
    snprintf(why, len, "accelerator %s has no %s function", d->name, missing);
    return ACC_REFUSAL_INCOMPLETE;
  }
  if (name_taken(p, b, nb, d->name)) {
    snprintf(why, len, "accelerator %s is already served (a built-in or an "
             "earlier plugin)", d->name);
    return ACC_REFUSAL_CLASH;
  }
  return -1;
}

/* Load one file of the opened directory. Returns 0, or EMBER_ENOMEM. */
static int load_one(acc_plugins *p, int dirfd, const char *dir,
                    const char *file, const acc_descriptor *const *b,
                    size_t nb) {
  char path[4096], why[256];
  int refused = 0;
  snprintf(path, sizeof path, "%s/%s", dir, file);
  struct stat st;
  if (fstatat(dirfd, file, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return refuse(p, ACC_REFUSAL_UNSAFE, path, strerror(errno));
  }
  if (S_ISLNK(st.st_mode)) {
    return refuse(p, ACC_REFUSAL_UNSAFE, path, "a symbolic link");
  }
  if (!S_ISREG(st.st_mode)) {
    return refuse(p, ACC_REFUSAL_UNSAFE, path, "not a regular file");
  }
  /* O_NOFOLLOW and fstat on the descriptor: the checks hold for the file
   * we load, even if the name is replaced in between */
  int fd = openat(dirfd, file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 || fstat(fd, &st) != 0) {
    refused = refuse(p, ACC_REFUSAL_UNSAFE, path, strerror(errno));
    if (fd >= 0) close(fd);
    return refused;
  }
  const char *bad = unsafe_stat(&st, 0, why, sizeof why);
  if (bad) {
    refused = refuse(p, ACC_REFUSAL_UNSAFE, path, bad);
    close(fd);
    return refused;
  }
  /* the loader knows the object by this name: a refused one is unloaded
   * before fd is closed, an accepted one keeps fd open (see below) */
  char fdpath[64];
  snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", fd);
  void *h = dlopen(fdpath, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    refused = refuse(p, ACC_REFUSAL_DLOPEN, path, e ? e : "dlopen failed");
    close(fd);
    return refused;
  }
  const acc_descriptor *(*entry)(void);
  *(void **)&entry = dlsym(h, ACC_PLUGIN_SYMBOL);
  const acc_descriptor *d = entry ? entry() : NULL;
  int r = ACC_REFUSAL_SYMBOL;
  if (d)
    r = check_descriptor(p, b, nb, d, why, sizeof why);
  else
    snprintf(why, sizeof why, "%s", entry ? ACC_PLUGIN_SYMBOL "() returned NULL"
                                          : "no symbol " ACC_PLUGIN_SYMBOL);
  if (r >= 0) {
    refused = refuse(p, (enum acc_plugin_refusal)r, path, why);
    dlclose(h);
    close(fd);
    return refused;
  }
  acc_plugin *items = realloc(p->items, (p->count + 1) * sizeof *items);
  if (items) p->items = items;
  char *copy = items ? strdup(path) : NULL;
  if (!copy) {
    dlclose(h);
    close(fd);
    return EMBER_ENOMEM;
  }
  /* pinned (RTLD_NODELETE): the descriptor outlives acc_plugins_unload,
   * whoever still points at it; and fd stays open for the process's life,
   * so that no other file is ever opened under the name it was loaded by */
  void *pin = dlopen(fdpath, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  if (pin) dlclose(pin);
  p->items[p->count++] = (acc_plugin){.path = copy, .handle = h, .acc = d};
  return 0;
}

int acc_plugins_load(const char *dir, const acc_descriptor *const *builtins,
                     size_t n_builtins, acc_plugins *p) {
  memset(p, 0, sizeof *p);
  if (!dir || !dir[0]) return 0;
  int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dirfd < 0) {
    if (errno == ENOENT) {
      p->dir_missing = 1;
      return 0;
    }
    return refuse(p, ACC_REFUSAL_UNSAFE, dir,
           errno == ELOOP || errno == ENOTDIR
               ? "the directory is a symbolic link or not a directory"
               : strerror(errno));
  }
  struct stat st;
  char why[256];
  const char *bad = fstat(dirfd, &st) != 0 ? strerror(errno)
                                           : unsafe_stat(&st, 1, why, sizeof why);
  if (bad) {
    close(dirfd);
    return refuse(p, ACC_REFUSAL_UNSAFE, dir, bad);
  }
  struct dirent **names;
  int n = scandirat(dirfd, ".", &names, plugin_file, alphasort);
  if (n < 0) {
    int e = errno;
    snprintf(p->error, sizeof p->error, "%s", strerror(e));
    close(dirfd);
    return e == ENOMEM ? EMBER_ENOMEM : 0;
  }
  int rc = 0;
  for (int i = 0; i < n; i++) {
    if (rc == 0) rc = load_one(p, dirfd, dir, names[i]->d_name, builtins,
                               n_builtins);
    free(names[i]);
  }
  free(names);
  close(dirfd);
  return rc;
}

void acc_plugins_unload(acc_plugins *p) {
  if (!p) return;
  for (size_t i = 0; i < p->count; i++) {
    dlclose(p->items[i].handle);
    free(p->items[i].path);
  }
  free(p->items);
  for (size_t i = 0; i < p->n_refusals; i++) {
    free(p->refusals[i].path);
    free(p->refusals[i].why);
  }
  free(p->refusals);
  memset(p, 0, sizeof *p);
}
