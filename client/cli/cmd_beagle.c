/*
 * cmd_beagle.c - `ember beagle -- COMMAND ARGS...`: run a program built
 * against BEAGLE 3.1 (libhmsbeagle.so.1, e.g. Debian's MrBayes) on ember:
 * exec COMMAND with libember-beagle's private directory first on
 * LD_LIBRARY_PATH and EMBER_NAM naming what the library connects to.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "ember/ember.h"

#define CMD "beagle"

#ifndef EMBER_BEAGLE_INSTALL_DIR
#error "EMBER_BEAGLE_INSTALL_DIR must be defined by the build"
#endif
#if !defined(EMBER_BEAGLE_BUILD_REL) || !defined(EMBER_BEAGLE_INSTALL_REL)
#error "EMBER_BEAGLE_BUILD_REL and EMBER_BEAGLE_INSTALL_REL must be defined"
#endif

#define BEAGLE_SONAME "libhmsbeagle.so.1"

static const char beagle_help[] =
    "Usage: ember beagle [--nam ADDR | --embedded] [--] COMMAND [ARGS...]\n"
    "  or:  ember beagle --print-libdir\n"
    "\n"
    "Run COMMAND, a program built against BEAGLE 3.1 (libhmsbeagle.so.1,\n"
    "such as Debian's MrBayes), with its likelihood calls done by ember's plf\n"
    "accelerator: libember-beagle, a library with BEAGLE's interface and\n"
    "SONAME kept in a private directory, comes first on COMMAND's\n"
    "LD_LIBRARY_PATH. The system's libhmsbeagle is left as it is.\n"
    "\n"
    "  --nam ADDR      the library's instances live on the NAM at unix:PATH\n"
    "                  or tcp:HOST:PORT\n"
    "  --embedded      the engine in-process, no NAM\n"
    "                  (neither: $EMBER_NAM, else unix:" EMBER_DEFAULT_SOCKET "\n"
    "                  if it exists, else embedded); COMMAND gets the choice\n"
    "                  as EMBER_NAM\n"
    "  --print-libdir  print the library's directory and exit\n"
    "  -h, --help      this text\n"
    "\n"
    "The directory is the build tree's when this ember runs from a build\n"
    "tree, else the installed one: " EMBER_BEAGLE_INSTALL_DIR "\n"
    "(or the same place beside a prefix that moved).\n"
    "The library reports failures through BEAGLE's return codes only; set\n"
    "EMBER_BEAGLE_DEBUG=1 for their messages on standard error, or\n"
    "EMBER_BEAGLE_DEBUG=/path/file to append them to that file.\n"
    "\n"
    "Example:\n"
    "  ember beagle --embedded -- mb run.nex\n"
    "  (with 'set usebeagle=yes' in run.nex's mrbayes block)\n"
    "\n"
    "Exit status: COMMAND's, or 1 when the library is missing, 2 bad usage,\n"
    "126 COMMAND cannot be run, 127 COMMAND was not found.\n";

enum { OPT_NAM = 256, OPT_EMBEDDED, OPT_PRINT_LIBDIR };

static const struct option beagle_options[] = {
    {"nam", required_argument, NULL, OPT_NAM},
    {"embedded", no_argument, NULL, OPT_EMBEDDED},
    {"print-libdir", no_argument, NULL, OPT_PRINT_LIBDIR},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

static int has_library(const char *dir) {
  char path[PATH_MAX];
  struct stat st;
  if (snprintf(path, sizeof path, "%s/%s", dir, BEAGLE_SONAME) >=
      (int)sizeof path)
    return 0;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* dir/rel when it holds the library: into out, 1 */
static int try_dir(const char *dir, const char *rel, char *out, size_t len) {
  char path[PATH_MAX], real[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/%s", dir, rel) >= (int)sizeof path ||
      !realpath(path, real) || !has_library(real))
    return 0;
  snprintf(out, len, "%s", real);
  return 1;
}

/* The build tree's directory (found from this executable), else the
 * installed one (beside this executable's prefix, else as configured);
 * "" when none holds the library. */
static void find_libdir(char *out, size_t len) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) {
      *slash = '\0';
      if (try_dir(exe, EMBER_BEAGLE_BUILD_REL, out, len) ||
          try_dir(exe, EMBER_BEAGLE_INSTALL_REL, out, len))
        return;
    }
  }
  if (has_library(EMBER_BEAGLE_INSTALL_DIR)) {
    snprintf(out, len, "%s", EMBER_BEAGLE_INSTALL_DIR);
    return;
  }
  out[0] = '\0';
}

static int run_beagle(int argc, char **argv) {
  const char *nam = NULL;
  int embedded = 0, print_libdir = 0, c;
  optind = 0;
  opterr = 0;
  /* '+': options end at COMMAND, whose own options are its own */
  while ((c = getopt_long(argc, argv, "+:h", beagle_options, NULL)) != -1) {
    switch (c) {
    case OPT_NAM: nam = optarg; break;
    case OPT_EMBEDDED: embedded = 1; break;
    case OPT_PRINT_LIBDIR: print_libdir = 1; break;
    case 'h': fputs(beagle_help, stdout); return CLI_OK;
    default: return cli_getopt_error(CMD, c, argv);
    }
  }
  if (nam && embedded)
    return cli_usage_error(CMD, "--nam and --embedded exclude each other");
  if (nam && !nam[0]) return cli_usage_error(CMD, "--nam: an empty address");
  if (!print_libdir && optind >= argc)
    return cli_usage_error(CMD, "no command to run");
  if (print_libdir && optind < argc)
    return cli_usage_error(CMD, "--print-libdir runs no command");

  char libdir[PATH_MAX];
  find_libdir(libdir, sizeof libdir);
  if (!libdir[0]) {
    cli_error(CMD, "libember-beagle (" BEAGLE_SONAME ") is in neither the "
              "build tree nor " EMBER_BEAGLE_INSTALL_DIR);
    return CLI_FAIL;
  }
  if (print_libdir) {
    printf("%s\n", libdir);
    return CLI_OK;
  }

  /* what the library connects to: ember_connect's default, made explicit
   * for the library (which is embedded without EMBER_NAM) */
  const char *address = nam;
  if (embedded) address = "embedded";
  if (!address) {
    const char *env = getenv("EMBER_NAM");
    if (env && env[0])
      address = env;
    else if (access(EMBER_DEFAULT_SOCKET, F_OK) == 0)
      address = "unix:" EMBER_DEFAULT_SOCKET;
    else
      address = "embedded";
  }
  if (setenv("EMBER_NAM", address, 1) != 0) {
    cli_error(CMD, "cannot set EMBER_NAM: %s", strerror(errno));
    return CLI_FAIL;
  }
  const char *old = getenv("LD_LIBRARY_PATH");
  size_t need = strlen(libdir) + (old && old[0] ? strlen(old) + 1 : 0) + 1;
  char *path = malloc(need);
  if (!path) {
    cli_error(CMD, "out of memory");
    return CLI_FAIL;
  }
  snprintf(path, need, "%s%s%s", libdir, old && old[0] ? ":" : "",
           old && old[0] ? old : "");
  if (setenv("LD_LIBRARY_PATH", path, 1) != 0) {
    cli_error(CMD, "cannot set LD_LIBRARY_PATH: %s", strerror(errno));
    free(path);
    return CLI_FAIL;
  }
  free(path);
  fflush(stdout);
  execvp(argv[optind], argv + optind);
  int e = errno;
  cli_error(CMD, "cannot run '%s': %s", argv[optind], strerror(e));
  return e == ENOENT ? 127 : 126;
}

const cli_command cli_cmd_beagle = {
    .name = CMD,
    .summary = "run a BEAGLE program (MrBayes) on ember's plf accelerator",
    .help = beagle_help,
    .run = run_beagle,
};
