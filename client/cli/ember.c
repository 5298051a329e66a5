/*
 * ember.c - the `ember` tool: main, --help, --version and the dispatch to
 * one subcommand per file (cmd_*.c).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "ember/ember.h"

#ifndef EMBER_VERSION
#error "EMBER_VERSION must be defined by the build"
#endif

static const cli_command *const commands[] = {
    &cli_cmd_align,
    &cli_cmd_lnl,
    &cli_cmd_train,
    &cli_cmd_accelerators,
    &cli_cmd_beagle,
};
#define N_COMMANDS (sizeof commands / sizeof *commands)

static const cli_command *find_command(const char *name) {
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (strcmp(commands[i]->name, name) == 0) return commands[i];
  return NULL;
}

static void usage(FILE *f) {
  fputs("Usage: ember COMMAND [options]\n"
        "  or:  ember help COMMAND\n"
        "  or:  ember --version\n"
        "\n"
        "Run work on the accelerators of an ember node accelerator manager\n"
        "(NAM), or in-process when there is none.\n"
        "\n"
        "Commands:\n", f);
  for (size_t i = 0; i < N_COMMANDS; i++)
    fprintf(f, "  %-14s %s\n", commands[i]->name, commands[i]->summary);
  fputs("  help           show a command's options\n"
        "\n"
        "Every command takes --nam ADDR (unix:PATH or tcp:HOST:PORT) or\n"
        "--embedded; without them $EMBER_NAM, else unix:" EMBER_DEFAULT_SOCKET "\n"
        "if it exists, else the embedded engine.\n", f);
}

static int unknown_command(const char *name) {
  fprintf(stderr, "ember: unknown command '%s'\n", name);
  fprintf(stderr, "Try 'ember --help' for the commands.\n");
  return CLI_USAGE;
}

static int help(int argc, char **argv) {
  if (argc < 2) {
    usage(stdout);
    return CLI_OK;
  }
  if (argc > 2) {
    fprintf(stderr, "ember: help: one command at a time\n");
    return CLI_USAGE;
  }
  const cli_command *cmd = find_command(argv[1]);
  if (!cmd) return unknown_command(argv[1]);
  fputs(cmd->help, stdout);
  return CLI_OK;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return CLI_USAGE;
  }
  const char *first = argv[1];
  if (strcmp(first, "--help") == 0 || strcmp(first, "-h") == 0)
    return help(1, argv + 1);
  if (strcmp(first, "--version") == 0 || strcmp(first, "-V") == 0) {
    printf("ember %s (protocol %d)\n", EMBER_VERSION, EMBER_PROTOCOL_VERSION);
    return CLI_OK;
  }
  if (strcmp(first, "help") == 0) return help(argc - 1, argv + 1);
  if (first[0] == '-') {
    fprintf(stderr, "ember: unknown option '%s' (options follow the command)\n",
            first);
    fprintf(stderr, "Try 'ember --help' for the commands.\n");
    return CLI_USAGE;
  }
  const cli_command *cmd = find_command(first);
  if (!cmd) return unknown_command(first);
  int rc = cmd->run(argc - 1, argv + 1);
  if (fflush(stdout) != 0 && rc == CLI_OK) {
    fprintf(stderr, "ember: %s: cannot write standard output\n", cmd->name);
    rc = CLI_FAIL;
  }
  return rc;
}
