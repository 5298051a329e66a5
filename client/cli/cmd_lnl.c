/*
 * cmd_lnl.c - `ember lnl`: the log-likelihood of each tree of a Newick file
 * for an alignment under one substitution model, on the plf accelerator:
 * the options, the output files and the summary around libember's
 * ember_lnl (client/lib/lnl.c holds the instance, the tasks and the
 * planner).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "ember/ember.h"

#define CMD "lnl"

#define PROGRESS_MIN_TREES 1000

static const char lnl_help[] =
    "Usage: ember lnl --alignment FILE --trees FILE --model MODEL [options]\n"
    "\n"
    "Score fixed trees: the log-likelihood of every tree of a file for an\n"
    "alignment under one substitution model (branch lengths and parameters as\n"
    "given, nothing optimised), computed by the plf accelerator of a NAM or\n"
    "in-process, one line per tree.\n"
    "\n"
    "Input:\n"
    "  --alignment FILE    PHYLIP (sequential or interleaved), FASTA or NEXUS,\n"
    "                      plain or gzip'd; the format is detected\n"
    "  --type dna|protein  the data type (default: detected from the letters)\n"
    "  --trees FILE        Newick, one tree per line, every branch with its\n"
    "                      length; each tree holds every taxon of the alignment\n"
    "                      once, names matching exactly\n"
    "  --model MODEL       IQ-TREE syntax: JC, F81, K80{k}, HKY{k},\n"
    "                      GTR{ac,ag,at,cg,ct} (DNA), LG, WAG, JTT (protein),\n"
    "                      then any of +F (counted), +F{f1,...}, +FQ, +G4{alpha},\n"
    "                      +I{p}; e.g. GTR{1.2,3.9,0.8,1.1,4.5}+F+G4{0.5}.\n"
    "                      Values left out take IQ-TREE's starting values\n"
    "  --rates FILE        a PAML rate file (190 exchangeabilities, then 20\n"
    "                      frequencies, as PAML's lg.dat) as the protein\n"
    "                      matrix; --model then gives only the modifiers\n"
    "                      (+G4{0.5}+I{0.1}...) or is left out\n"
    "\n"
    "Computation:\n"
    "  --precision double|single\n"
    "                      the accelerator's buffers (default double)\n"
    "  --max-vectors N     partials buffers for ancestral vectors: fewer take\n"
    "                      less memory and recompute what had to be dropped\n"
    "                      (at least ceil(log2 taxa) + 2). Default: the fewest\n"
    "                      with which scoring the trees recomputes nothing\n"
    "                      (planned ahead on the file's first trees), within\n"
    "                      256 MiB of partials (48 MiB of state over tcp)\n"
    "  --threads N         CPU threads of each task, over patterns (default 1)\n"
    "  --instances N       instances scoring trees at once, over trees: each\n"
    "                      its own state block and --max-vectors buffers, the\n"
    "                      batches of trees dealt out in turn (default 1)\n"
    "\n"
    "Where it runs:\n"
    "  --nam ADDR          the NAM at unix:PATH or tcp:HOST:PORT\n"
    "  --embedded          the engine in-process, no NAM\n"
    "                      (none of these: $EMBER_NAM, else unix:" EMBER_DEFAULT_SOCKET "\n"
    "                      if it exists, else embedded; a NAM that cannot be\n"
    "                      reached: in-process, unless --platform asks for\n"
    "                      another kind than cpu)\n"
    "  --platform KIND     only platforms of this kind: cpu, opencl, fpga-emu\n"
    "                      (an error if the NAM has none serving plf)\n"
    "\n"
    "Output:\n"
    "  --json              a JSON array of {\"tree\": N, \"lnl\": X} objects\n"
    "                      instead of TSV (null for a log-likelihood that is\n"
    "                      not finite)\n"
    "  --site-lnl FILE     site log-likelihoods in IQ-TREE's .sitelh layout\n"
    "                      (-wsl): a line \"TREES SITES\", then a line per tree,\n"
    "                      \"TreeN\" padded to 10 characters and the value of\n"
    "                      every site of the alignment, separated by spaces\n"
    "  -h, --help          this text\n"
    "\n"
    "The TSV has the header line \"tree<TAB>lnl\" and one line per tree: its\n"
    "number in the file (from 1) and its log-likelihood with 10 decimals. A\n"
    "summary line goes to standard error: trees, taxa, sites and patterns, the\n"
    "model, tasks per platform, failed tasks, partials buffers (of each\n"
    "instance), recomputed vectors, the address used and the time. Errors in\n"
    "the input name the file and line.\n"
    "\n"
    "A failed task is redone: the instance is set up again on a restored\n"
    "state block and the batch of trees run once more. When some trees cannot\n"
    "be scored (their task failed twice), the others are still written and\n"
    "standard error says how many were not.\n"
    "\n"
    "Exit status: 0 done, 1 failed (input, model, NAM; nothing written),\n"
    "2 bad usage, 3 some trees were not scored (the others were written).\n";

enum {
  OPT_ALIGNMENT = 256, OPT_TREES, OPT_MODEL, OPT_TYPE, OPT_RATES,
  OPT_SITE_LNL, OPT_MAX_VECTORS, OPT_PRECISION, OPT_PLATFORM, OPT_NAM,
  OPT_EMBEDDED, OPT_THREADS, OPT_INSTANCES, OPT_JSON
};

static const struct option lnl_options[] = {
    {"alignment", required_argument, NULL, OPT_ALIGNMENT},
    {"trees", required_argument, NULL, OPT_TREES},
    {"model", required_argument, NULL, OPT_MODEL},
    {"type", required_argument, NULL, OPT_TYPE},
    {"rates", required_argument, NULL, OPT_RATES},
    {"site-lnl", required_argument, NULL, OPT_SITE_LNL},
    {"max-vectors", required_argument, NULL, OPT_MAX_VECTORS},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"platform", required_argument, NULL, OPT_PLATFORM},
    {"nam", required_argument, NULL, OPT_NAM},
    {"embedded", no_argument, NULL, OPT_EMBEDDED},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"instances", required_argument, NULL, OPT_INSTANCES},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

typedef struct lnl_args {
  const char *alignment, *trees, *model, *rates, *site_lnl, *nam, *platform;
  const char *type;                 /* "dna", "protein" or NULL */
  int single, embedded, json, threads, instances, max_vectors;
} lnl_args;

/* Parse and check the options; returns 0, CLI_USAGE, or -1 after --help. */
static int parse_args(int argc, char **argv, lnl_args *a) {
  memset(a, 0, sizeof *a);
  opterr = 0;
  int c, rc = 0;
  while ((c = getopt_long(argc, argv, ":h", lnl_options, NULL)) != -1) {
    switch (c) {
    case OPT_ALIGNMENT: a->alignment = optarg; break;
    case OPT_TREES: a->trees = optarg; break;
    case OPT_MODEL: a->model = optarg; break;
    case OPT_RATES: a->rates = optarg; break;
    case OPT_SITE_LNL: a->site_lnl = optarg; break;
    case OPT_TYPE:
      if (strcmp(optarg, "dna") == 0 || strcmp(optarg, "protein") == 0)
        a->type = optarg;
      else
        return cli_usage_error(CMD, "--type: '%s' is not dna or protein",
                               optarg);
      break;
    case OPT_PRECISION:
      if (strcmp(optarg, "double") == 0) a->single = 0;
      else if (strcmp(optarg, "single") == 0) a->single = 1;
      else
        return cli_usage_error(CMD, "--precision: '%s' is not double or "
                               "single", optarg);
      break;
    case OPT_MAX_VECTORS:
      rc = cli_parse_int(CMD, "--max-vectors", optarg, 1, 1 << 20,
                         &a->max_vectors);
      break;
    case OPT_PLATFORM: a->platform = optarg; break;
    case OPT_NAM: a->nam = optarg; break;
    case OPT_EMBEDDED: a->embedded = 1; break;
    case OPT_THREADS:
      rc = cli_parse_int(CMD, "--threads", optarg, 1, 1024, &a->threads);
      break;
    case OPT_INSTANCES:
      rc = cli_parse_int(CMD, "--instances", optarg, 1, 256, &a->instances);
      break;
    case OPT_JSON: a->json = 1; break;
    case 'h': fputs(lnl_help, stdout); return -1;
    default: return cli_getopt_error(CMD, c, argv);
    }
    if (rc) return rc;
  }
  if (optind < argc)
    return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
  if (!a->alignment) return cli_usage_error(CMD, "--alignment FILE is required");
  if (!a->trees) return cli_usage_error(CMD, "--trees FILE is required");
  if (!a->alignment[0]) return cli_usage_error(CMD, "--alignment: an empty path");
  if (!a->trees[0]) return cli_usage_error(CMD, "--trees: an empty path");
  if (a->rates && !a->rates[0]) return cli_usage_error(CMD, "--rates: an empty path");
  if (!a->model && !a->rates)
    return cli_usage_error(CMD, "--model MODEL is required (or --rates FILE)");
  if (a->model && !a->model[0] && !a->rates)
    return cli_usage_error(CMD, "--model: an empty model");
  if (a->rates && a->model && a->model[0] && a->model[0] != '+')
    return cli_usage_error(CMD, "--model '%s': with --rates the matrix comes "
                           "from the file; give only its modifiers (e.g. "
                           "+G4{0.5}+I{0.1})", a->model);
  if (a->site_lnl && !a->site_lnl[0])
    return cli_usage_error(CMD, "--site-lnl: an empty path");
  if (a->nam && a->embedded)
    return cli_usage_error(CMD, "--nam and --embedded exclude each other");
  if (a->nam && !a->nam[0]) return cli_usage_error(CMD, "--nam: an empty address");
  if (a->platform && cli_check_platform_kind(CMD, "--platform", a->platform))
    return CLI_USAGE;
  return 0;
}

/* ---- input ---------------------------------------------------------------- */

typedef struct lnl_input {
  ember_alignment *aln;
  ember_model *model;
  ember_trees *trees;
} lnl_input;

static void input_free(lnl_input *in) {
  ember_trees_free(in->trees);
  ember_model_free(in->model);
  ember_alignment_free(in->aln);
  memset(in, 0, sizeof *in);
}

/* Read the alignment, the model and the trees; messages name the option
 * and "file:line". Returns 0 or CLI_FAIL. */
static int read_input(const lnl_args *a, lnl_input *in) {
  if (ember_alignment_read(a->alignment, a->type, &in->aln) != 0) {
    cli_error(CMD, "--alignment: %s", ember_last_error());
    return CLI_FAIL;
  }
  size_t taxa = ember_alignment_taxa(in->aln);
  if (taxa < 2) {
    cli_error(CMD, "--alignment: %s: %zu taxon; a tree needs at least 2",
              a->alignment, taxa);
    return CLI_FAIL;
  }
  if (ember_model_parse(a->model, a->rates, in->aln, &in->model) != 0) {
    cli_error(CMD, "%s: %s", a->rates ? "--rates" : "--model",
              ember_last_error());
    return CLI_FAIL;
  }
  if (ember_trees_read(a->trees, in->aln, &in->trees) != 0) {
    cli_error(CMD, "--trees: %s", ember_last_error());
    return CLI_FAIL;
  }
  return 0;
}

/* ---- output --------------------------------------------------------------- */

typedef struct lnl_out {
  int json;
  size_t rows;               /* trees written */
  size_t non_finite;
  FILE *site;                /* --site-lnl's lines, before their header */
  size_t sites;
  int write_failed;          /* standard output or --site-lnl */
} lnl_out;

static int write_row(lnl_out *o, size_t tree, double lnl) {
  if (!isfinite(lnl)) o->non_finite++;
  if (o->json) {
    fputs(o->rows ? ",\n  " : "[\n  ", stdout);
    if (isfinite(lnl)) printf("{\"tree\": %zu, \"lnl\": %.17g}", tree, lnl);
    else printf("{\"tree\": %zu, \"lnl\": null}", tree);
  } else {
    if (o->rows == 0) fputs("tree\tlnl\n", stdout);
    printf("%zu\t%.10f\n", tree, lnl);
  }
  o->rows++;
  return ferror(stdout) ? -1 : 0;
}

/* Tree number tree's site log-likelihoods. */
static int write_sites(lnl_out *o, size_t tree, const double *site_lnl) {
  char name[32];
  snprintf(name, sizeof name, "Tree%zu", tree);
  fprintf(o->site, "%-10s", name);
  for (size_t s = 0; s < o->sites; s++)
    fprintf(o->site, " %.10f", site_lnl[s]);
  fputc('\n', o->site);
  return ferror(o->site) ? -1 : 0;
}

/* --site-lnl FILE: the header (the trees written), then the lines. */
static int finish_sites(lnl_out *o, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    cli_error(CMD, "--site-lnl: cannot write '%s': %s", path, strerror(errno));
    return -1;
  }
  fprintf(f, "%zu %zu\n", o->rows, o->sites);
  rewind(o->site);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, o->site)) > 0)
    if (fwrite(buf, 1, n, f) != n) break;
  int bad = ferror(o->site) || ferror(f);
  if (fclose(f) != 0 || bad) {
    cli_error(CMD, "--site-lnl: cannot write '%s': %s", path, strerror(errno));
    remove(path);
    return -1;
  }
  return 0;
}

/* ---- progress and summary -------------------------------------------------- */

static void print_summary(const lnl_input *in, const lnl_args *a,
                          const ember_lnl_report *st, size_t trees,
                          const char *address, uint64_t wall_ns) {
  static const char *const kinds[] = {"cpu", "opencl", "fpga-emu", "other"};
  const size_t counts[] = {st->tasks_cpu, st->tasks_opencl,
                           st->tasks_fpga_emu, st->tasks_other};
  char tasks[256];
  cli_kind_counts(tasks, sizeof tasks, kinds, counts, 4);
  int used = tasks[0] != '\0';
  char t[32], sites[32], pats[32], rec[32], wall[32], inst[48] = "";
  cli_format_wall(wall_ns, wall, sizeof wall);
  if (st->instances > 1)
    snprintf(inst, sizeof inst, " x %zu instances", st->instances);
  fprintf(stderr,
          "ember: %s tree%s, %zu taxa, %s sites (%s patterns), %s, %s, "
          "%zu task%s%s%s%s, %zu failed, %zu partials buffers%s (%s "
          "recomputed), via %s, %s\n",
          cli_group_digits(trees, t, sizeof t), trees == 1 ? "" : "s",
          ember_alignment_taxa(in->aln),
          cli_group_digits(ember_alignment_sites(in->aln), sites, sizeof sites),
          cli_group_digits(ember_alignment_patterns(in->aln), pats,
                           sizeof pats),
          ember_model_name(in->model), a->single ? "single" : "double",
          st->tasks, st->tasks == 1 ? "" : "s", used ? " (" : "", tasks,
          used ? ")" : "", st->tasks_failed, st->vectors, inst,
          cli_group_digits(st->recomputed, rec, sizeof rec), address, wall);
}

/* ---- the run ------------------------------------------------------------- */

/* Connect; a NAM that cannot be reached leaves the work to the embedded
 * engine (state blocks never fall back on their own), unless --platform
 * asks for a kind the embedded engine lacks. */
static int open_client(const lnl_args *a, ember_client **client) {
  ember_options opts = {.size = sizeof opts, .client_name = "ember lnl"};
  const char *address = a->embedded ? "embedded" : a->nam;
  int rc = ember_connect(address, &opts, client);
  if (rc) {
    cli_error(CMD, "cannot open a client for %s: %s%s%s",
              address ? address : "the default address", ember_strerror(rc),
              ember_last_error()[0] ? ": " : "", ember_last_error());
    return CLI_FAIL;
  }
  const char *used = ember_client_address(*client);
  if (strcmp(used, "embedded") == 0 || ember_is_connected(*client)) return 0;
  char why[512];
  snprintf(why, sizeof why, "%s", ember_last_error());
  if (a->platform && strcmp(a->platform, "cpu") != 0) {
    cli_error(CMD, "the NAM at %s cannot be reached%s%s; --platform %s needs "
              "it", used, why[0] ? ": " : "", why, a->platform);
    ember_close(*client);
    *client = NULL;
    return CLI_FAIL;
  }
  cli_error(CMD, "the NAM at %s cannot be reached%s%s; scoring in-process",
            used, why[0] ? ": " : "", why);
  ember_close(*client);
  *client = NULL;
  rc = ember_connect("embedded", &opts, client);
  if (rc) {
    cli_error(CMD, "cannot start the embedded engine: %s", ember_strerror(rc));
    return CLI_FAIL;
  }
  return 0;
}

/* --max-vectors below the minimum is bad usage (ember_lnl would refuse it
 * too, without naming the option). */
static int check_vectors(const lnl_args *a, const lnl_input *in) {
  size_t taxa = ember_alignment_taxa(in->aln);
  size_t min = ember_lnl_min_vectors(taxa);
  if (a->max_vectors && (size_t)a->max_vectors < min)
    return cli_usage_error(CMD, "--max-vectors: %d is below the minimum %zu "
                           "for %zu taxa (ceil(log2 taxa) + 2)",
                           a->max_vectors, min, taxa);
  return 0;
}

/* ember_lnl's callbacks: each tree's row (and sites), then the progress
 * of its batch. */
typedef struct scoring {
  lnl_out *o;
  cli_progress pr;
} scoring;

static int on_tree(size_t tree, double lnl, const double *site_lnl,
                   size_t sites, void *user) {
  scoring *sc = user;
  (void)sites;
  if (write_row(sc->o, tree + 1, lnl) != 0 ||
      (site_lnl && write_sites(sc->o, tree + 1, site_lnl) != 0)) {
    sc->o->write_failed = 1;
    return -1;
  }
  return 0;
}

static void on_progress(size_t done, size_t total, void *user) {
  scoring *sc = user;
  cli_progress_show(&sc->pr, done, total, PROGRESS_MIN_TREES, "scored",
                    "trees");
}

static int score(const lnl_args *a, lnl_input *in, lnl_out *o) {
  ember_client *client = NULL;
  int rc = open_client(a, &client);
  if (rc) return rc;
  const char *address = ember_client_address(client);
  uint64_t start = clock_now_ns();
  if ((rc = check_vectors(a, in))) goto done;
  ember_lnl_params p;
  ember_lnl_params_default(&p);
  p.precision = a->single ? EMBER_LNL_SINGLE : EMBER_LNL_DOUBLE;
  p.max_vectors = (size_t)a->max_vectors;
  p.threads = (unsigned)a->threads;
  p.instances = (unsigned)a->instances;
  p.platform = a->platform;
  p.site_lnl = o->site != NULL;
  p.tree_cb = on_tree;
  scoring sc = {.o = o, .pr = {.tty = isatty(STDERR_FILENO), .start_ns = start}};
  p.tree_user = &sc;
  ember_lnl_report st = {.size = sizeof st};
  int erc = ember_lnl(client, &p, in->model, in->trees, NULL, NULL, &st,
                      on_progress, &sc);
  if (o->write_failed) {
    cli_progress_clear(&sc.pr);
    cli_error(CMD, "cannot write %s: %s",
              ferror(stdout) ? "standard output" : "--site-lnl",
              strerror(errno));
    rc = CLI_FAIL;
    goto done;
  }
  size_t total = ember_trees_count(in->trees), failed = st.trees_failed;
  if (erc && failed == 0) { /* nothing was scored */
    cli_error(CMD, "%s", ember_last_error());
    rc = CLI_FAIL;
    goto done;
  }
  char first_error[1024];
  snprintf(first_error, sizeof first_error, "%s", erc ? ember_last_error() : "");
  cli_progress_clear(&sc.pr);
  if (o->json && o->rows) fputs("\n]\n", stdout);
  if (fflush(stdout) != 0) {
    cli_error(CMD, "cannot write standard output: %s", strerror(errno));
    rc = CLI_FAIL;
    goto done;
  }
  if (failed) {
    cli_error(CMD, "%s", first_error);
    if (failed == total) {
      rc = CLI_FAIL;
      goto done;
    }
  }
  print_summary(in, a, &st, o->rows, address, clock_now_ns() - start);
  if (o->non_finite)
    cli_error(CMD, "%zu tree%s a log-likelihood that is not finite (a site "
              "of probability 0 under the model?)", o->non_finite,
              o->non_finite == 1 ? " has" : "s have");
  rc = CLI_OK;
  if (failed) {
    char f[32], all[32];
    cli_error(CMD, "%s of %s trees were not scored; the other trees were "
              "written", cli_group_digits(failed, f, sizeof f),
              cli_group_digits(total, all, sizeof all));
    rc = CLI_PARTIAL;
  }
done:
  ember_close(client);
  return rc;
}

static int lnl_main(int argc, char **argv) {
  lnl_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc < 0) return CLI_OK;
  if (rc) return rc;

  lnl_input in = {0};
  lnl_out o = {.json = a.json};
  FILE *site_file = NULL;
  if ((rc = read_input(&a, &in))) goto done;
  if (a.site_lnl) {
    /* refuse a path that cannot be written before any work */
    site_file = fopen(a.site_lnl, "w");
    if (!site_file) {
      cli_error(CMD, "--site-lnl: cannot write '%s': %s", a.site_lnl,
                strerror(errno));
      rc = CLI_FAIL;
      goto done;
    }
    o.site = tmpfile();
    if (!o.site) {
      cli_error(CMD, "--site-lnl: no temporary file: %s", strerror(errno));
      rc = CLI_FAIL;
      goto done;
    }
    o.sites = ember_alignment_sites(in.aln);
  }
  rc = score(&a, &in, &o);
  if (site_file) {
    fclose(site_file);
    site_file = NULL;
    if ((rc == CLI_OK || rc == CLI_PARTIAL) && finish_sites(&o, a.site_lnl))
      rc = CLI_FAIL;
    if (rc != CLI_OK && rc != CLI_PARTIAL) remove(a.site_lnl);
  }
done:
  if (site_file) {
    fclose(site_file);
    remove(a.site_lnl);
  }
  if (o.site) fclose(o.site);
  input_free(&in);
  return rc;
}

const cli_command cli_cmd_lnl = {
    .name = "lnl",
    .summary = "log-likelihoods of fixed trees for an alignment (plf)",
    .help = lnl_help,
    .run = lnl_main,
};
