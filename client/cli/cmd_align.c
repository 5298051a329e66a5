/*
 * cmd_align.c - `ember align`: Smith-Waterman of query i against reference
 * i for every pair of two FASTA/FASTQ files, through ember_sw_align().
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "clock.h"
#include "ember/ember.h"
#include "seqio.h"

#define CMD "align"

#define PROGRESS_MIN_PAIRS 10000

static const char align_help[] =
    "Usage: ember align --query FILE --ref FILE [options]\n"
    "\n"
    "Align query i with reference i for every i (Smith-Waterman: local, affine\n"
    "gaps) on the accelerators of a NAM or in-process, and print one line per\n"
    "pair.\n"
    "\n"
    "Input: FASTA or FASTQ, plain or gzip'd; '-' reads standard input.\n"
    "  --query FILE        the queries\n"
    "  --ref FILE          the references, as many as the queries\n"
    "\n"
    "Scoring (a gap of length k costs open + (k-1) * extend):\n"
    "  --protein           protein sequences (default: DNA)\n"
    "  --match N           DNA: score of a match, 1..127 (default 3)\n"
    "  --mismatch N        DNA: score of a mismatch, -128..-1 (default -3)\n"
    "  --matrix NAME|FILE  protein: BLOSUM45, BLOSUM50, BLOSUM62 (default),\n"
    "                      BLOSUM80, PAM250 or an NCBI-format matrix file\n"
    "  --gap-open N        gap open penalty (default 6 for DNA, 11 for protein)\n"
    "  --gap-extend N      gap extend penalty (default 1)\n"
    "\n"
    "Where it runs:\n"
    "  --nam ADDR          the NAM at unix:PATH or tcp:HOST:PORT\n"
    "  --embedded          the engine in-process, no NAM\n"
    "                      (none of these: $EMBER_NAM, else unix:" EMBER_DEFAULT_SOCKET "\n"
    "                      if it exists, else embedded)\n"
    "  --gam HOST:PORT     ask ember-gam for a node serving --label and\n"
    "                      connect to its NAM with the signed lease\n"
    "  --label L           with --gam: the label (default sw; e.g.\n"
    "                      sw@fpga-emu for a node whose FPGA serves sw)\n"
    "  --threads N         threads of the in-process engine and of the CPU\n"
    "                      fallback (default: one per core)\n"
    "  --platform KIND     only platforms of this kind: cpu, opencl, fpga-emu\n"
    "                      (an error, naming the kinds there are, if the NAM\n"
    "                      has none)\n"
    "  --prefer KIND       platforms of this kind first; others take tasks\n"
    "                      only while those are busy (default: the NAM\n"
    "                      spreads tasks by expected finish time)\n"
    "  --no-fallback       never run a task on the CPU in-process: a task the\n"
    "                      NAM cannot run fails (not with --embedded)\n"
    "  --reconnect-window MS\n"
    "                      when the NAM goes away, wait this long for it to\n"
    "                      come back and send it the tasks that cannot run\n"
    "                      in-process (--platform other than cpu,\n"
    "                      --no-fallback) again; 0: fail them at once\n"
    "                      (default: $EMBER_RECONNECT_WINDOW_MS, else 10000)\n"
    "\n"
    "Output:\n"
    "  --out FILE          write the results to FILE (default: standard output)\n"
    "  --json              a JSON array of objects instead of TSV\n"
    "  --timings           per-stage timings on standard error\n"
    "  -h, --help          this text\n"
    "\n"
    "The TSV has the header line\n"
    "  query  ref  score  query_start  query_end  ref_start  ref_end\n"
    "(tab-separated); coordinates are 0-based and inclusive, -1 when the score\n"
    "is 0. A summary line goes to standard error: pairs, GCUPS, tasks per\n"
    "platform, fallbacks and the address used.\n"
    "\n"
    "When some tasks fail (e.g. the NAM went away for longer than the\n"
    "reconnect window), the pairs that did complete are still written and\n"
    "standard error says how many pairs and tasks did not, and why.\n"
    "\n"
    "Exit status: 0 done, 1 failed (input, NAM, alignment; nothing written),\n"
    "2 bad usage, 3 some pairs did not complete (the others were written).\n";

enum {
  OPT_QUERY = 256, OPT_REF, OPT_PROTEIN, OPT_MATCH, OPT_MISMATCH, OPT_MATRIX,
  OPT_GAP_OPEN, OPT_GAP_EXTEND, OPT_NAM, OPT_EMBEDDED, OPT_THREADS,
  OPT_PLATFORM, OPT_PREFER, OPT_OUT, OPT_JSON, OPT_TIMINGS, OPT_GAM,
  OPT_LABEL, OPT_NO_FALLBACK, OPT_RECONNECT_WINDOW
};

static const struct option align_options[] = {
    {"query", required_argument, NULL, OPT_QUERY},
    {"ref", required_argument, NULL, OPT_REF},
    {"protein", no_argument, NULL, OPT_PROTEIN},
    {"match", required_argument, NULL, OPT_MATCH},
    {"mismatch", required_argument, NULL, OPT_MISMATCH},
    {"matrix", required_argument, NULL, OPT_MATRIX},
    {"gap-open", required_argument, NULL, OPT_GAP_OPEN},
    {"gap-extend", required_argument, NULL, OPT_GAP_EXTEND},
    {"nam", required_argument, NULL, OPT_NAM},
    {"embedded", no_argument, NULL, OPT_EMBEDDED},
    {"gam", required_argument, NULL, OPT_GAM},
    {"label", required_argument, NULL, OPT_LABEL},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"platform", required_argument, NULL, OPT_PLATFORM},
    {"prefer", required_argument, NULL, OPT_PREFER},
    {"out", required_argument, NULL, OPT_OUT},
    {"json", no_argument, NULL, OPT_JSON},
    {"timings", no_argument, NULL, OPT_TIMINGS},
    {"no-fallback", no_argument, NULL, OPT_NO_FALLBACK},
    {"reconnect-window", required_argument, NULL, OPT_RECONNECT_WINDOW},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

typedef struct align_args {
  const char *query, *ref, *matrix, *nam, *platform, *prefer, *out;
  const char *gam, *label;
  int protein, embedded, json, timings, no_fallback;
  int match, mismatch, gap_open, gap_extend, threads;
  int reconnect_window, has_reconnect_window;
  int has_match, has_mismatch, has_gap_open, has_gap_extend;
} align_args;

/* Parse and check the options; returns 0, CLI_USAGE, or -1 after --help. */
static int parse_args(int argc, char **argv, align_args *a) {
  memset(a, 0, sizeof *a);
  opterr = 0;
  int c, rc = 0;
  while ((c = getopt_long(argc, argv, ":h", align_options, NULL)) != -1) {
    switch (c) {
    case OPT_QUERY: a->query = optarg; break;
    case OPT_REF: a->ref = optarg; break;
    case OPT_PROTEIN: a->protein = 1; break;
    case OPT_MATCH:
      rc = cli_parse_int(CMD, "--match", optarg, 1, 127, &a->match);
      a->has_match = 1;
      break;
    case OPT_MISMATCH:
      rc = cli_parse_int(CMD, "--mismatch", optarg, -128, -1, &a->mismatch);
      a->has_mismatch = 1;
      break;
    case OPT_MATRIX: a->matrix = optarg; break;
    case OPT_GAP_OPEN:
      rc = cli_parse_int(CMD, "--gap-open", optarg, 0, 1 << 20, &a->gap_open);
      a->has_gap_open = 1;
      break;
    case OPT_GAP_EXTEND:
      rc = cli_parse_int(CMD, "--gap-extend", optarg, 0, 1 << 20, &a->gap_extend);
      a->has_gap_extend = 1;
      break;
    case OPT_NAM: a->nam = optarg; break;
    case OPT_EMBEDDED: a->embedded = 1; break;
    case OPT_GAM: a->gam = optarg; break;
    case OPT_LABEL: a->label = optarg; break;
    case OPT_THREADS:
      rc = cli_parse_int(CMD, "--threads", optarg, 1, 1024, &a->threads);
      break;
    case OPT_PLATFORM: a->platform = optarg; break;
    case OPT_PREFER: a->prefer = optarg; break;
    case OPT_OUT: a->out = optarg; break;
    case OPT_JSON: a->json = 1; break;
    case OPT_TIMINGS: a->timings = 1; break;
    case OPT_NO_FALLBACK: a->no_fallback = 1; break;
    case OPT_RECONNECT_WINDOW:
      rc = cli_parse_int(CMD, "--reconnect-window", optarg, 0, 86400000,
                         &a->reconnect_window);
      a->has_reconnect_window = 1;
      break;
    case 'h': fputs(align_help, stdout); return -1;
    default: return cli_getopt_error(CMD, c, argv);
    }
    if (rc) return rc;
  }
  if (optind < argc)
    return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
  if (!a->query) return cli_usage_error(CMD, "--query FILE is required");
  if (!a->ref) return cli_usage_error(CMD, "--ref FILE is required");
  if (strcmp(a->query, "-") == 0 && strcmp(a->ref, "-") == 0)
    return cli_usage_error(CMD, "--query and --ref cannot both read standard input");
  if (a->nam && a->embedded)
    return cli_usage_error(CMD, "--nam and --embedded exclude each other");
  if (a->no_fallback && a->embedded)
    return cli_usage_error(CMD, "--no-fallback and --embedded exclude each "
                                "other: embedded, every task runs in-process");
  if (a->gam && (a->nam || a->embedded))
    return cli_usage_error(CMD, "--gam excludes --nam and --embedded: the GAM "
                                "chooses the NAM");
  if (a->gam && !a->gam[0]) return cli_usage_error(CMD, "--gam: an empty address");
  if (a->label && !a->gam)
    return cli_usage_error(CMD, "--label is what to ask the GAM for: it needs "
                                "--gam");
  if (a->label && !a->label[0]) return cli_usage_error(CMD, "--label: an empty label");
  if (a->nam && !a->nam[0])
    return cli_usage_error(CMD, "--nam: an empty address");
  if (a->protein && (a->has_match || a->has_mismatch))
    return cli_usage_error(CMD, "--match and --mismatch score DNA; with --protein "
                                "use --matrix");
  if (!a->protein && a->matrix)
    return cli_usage_error(CMD, "--matrix scores proteins and needs --protein; "
                                "DNA uses --match and --mismatch");
  if (a->matrix && !a->matrix[0])
    return cli_usage_error(CMD, "--matrix: an empty name");
  if (a->platform && cli_check_platform_kind(CMD, "--platform", a->platform))
    return CLI_USAGE;
  if (a->prefer && cli_check_platform_kind(CMD, "--prefer", a->prefer))
    return CLI_USAGE;
  if (a->out && !a->out[0]) return cli_usage_error(CMD, "--out: an empty path");
  return 0;
}

/* The `\r` progress line on a terminal, for long batches only. */
static void on_progress(size_t done, size_t total, void *user) {
  cli_progress_show(user, done, total, PROGRESS_MIN_PAIRS, "aligned", "pairs");
}

/* ember_sw_align marks a pair whose task failed with score -1: such a pair
 * has no line (a real score is never negative). */
static int failed(const ember_sw_result *res) { return res->score < 0; }

static int write_tsv(FILE *f, const seqio_set *q, const seqio_set *r,
                     const ember_sw_result *res) {
  fputs("query\tref\tscore\tquery_start\tquery_end\tref_start\tref_end\n", f);
  for (size_t i = 0; i < q->n; i++)
    if (!failed(&res[i]))
      fprintf(f, "%s\t%s\t%d\t%d\t%d\t%d\t%d\n", q->records[i].name,
              r->records[i].name, (int)res[i].score, (int)res[i].query_start,
              (int)res[i].query_end, (int)res[i].ref_start, (int)res[i].ref_end);
  return ferror(f) ? -1 : 0;
}

/* One object per pair, streamed: a batch of millions of pairs is never
 * held as one JSON tree. */
static int write_json(FILE *f, const seqio_set *q, const seqio_set *r,
                      const ember_sw_result *res) {
  fputs("[\n", f);
  int first = 1;
  for (size_t i = 0; i < q->n; i++) {
    if (failed(&res[i])) continue;
    json_t *o = json_pack(
        "{s:o, s:o, s:i, s:i, s:i, s:i, s:i}", "query",
        cli_json_text(q->records[i].name), "ref",
        cli_json_text(r->records[i].name), "score", (int)res[i].score,
        "query_start", (int)res[i].query_start, "query_end",
        (int)res[i].query_end, "ref_start", (int)res[i].ref_start, "ref_end",
        (int)res[i].ref_end);
    fputs(first ? "  " : ",\n  ", f);
    first = 0;
    int rc = o ? json_dumpf(o, f, 0) : -1;
    json_decref(o);
    if (rc != 0) return -1;
  }
  fputs(first ? "]\n" : "\n]\n", f);
  return ferror(f) ? -1 : 0;
}

static void print_summary(const ember_sw_report *rep, size_t pairs,
                          const char *address) {
  static const char *const kinds[] = {"cpu", "opencl", "fpga-emu",
                                      "fallback"};
  const size_t counts[] = {rep->tasks_cpu, rep->tasks_opencl,
                           rep->tasks_fpga_emu, rep->tasks_fallback};
  char p[32], tasks[256];
  cli_kind_counts(tasks, sizeof tasks, kinds, counts, 4);
  int used = tasks[0] != '\0';
  char cells[32], gcups[32], wall[32];
  if (rep->cells < 1000000)
    snprintf(cells, sizeof cells, "%llu cells", (unsigned long long)rep->cells);
  else if (rep->cells < 1000000000)
    snprintf(cells, sizeof cells, "%.2f Mcells", (double)rep->cells / 1e6);
  else
    snprintf(cells, sizeof cells, "%.2f Gcells", (double)rep->cells / 1e9);
  double g = rep->wall_ns ? (double)rep->cells / (double)rep->wall_ns : 0.0;
  if (g >= 0.01 || g == 0.0) snprintf(gcups, sizeof gcups, "%.2f", g);
  else snprintf(gcups, sizeof gcups, "<0.01");
  cli_format_wall(rep->wall_ns, wall, sizeof wall);
  fprintf(stderr,
          "ember: %s pair%s, %s, %s GCUPS, %zu task%s%s%s%s, %zu retried, "
          "%zu fallback%s, via %s, %s\n",
          cli_group_digits(pairs, p, sizeof p), pairs == 1 ? "" : "s", cells, gcups, rep->tasks,
          rep->tasks == 1 ? "" : "s", used ? " (" : "", tasks, used ? ")" : "",
          rep->tasks_retried, rep->tasks_fallback,
          rep->tasks_fallback == 1 ? "" : "s", address, wall);
}

static void print_timings(const ember_sw_report *rep) {
  static const char *const names[] = {"queued in the NAM", "executing",
                                      "inside the NAM", "round trip"};
  const uint64_t sums[] = {rep->queue_ns, rep->exec_ns, rep->server_ns,
                           rep->round_trip_ns};
  double tasks = rep->tasks ? (double)rep->tasks : 1.0;
  char title[64];
  snprintf(title, sizeof title, "ember: stages of %zu task%s", rep->tasks,
           rep->tasks == 1 ? "" : "s");
  fprintf(stderr, "%-27s%12s%13s\n", title, "summed", "per task");
  for (size_t i = 0; i < 4; i++)
    fprintf(stderr, "  %-24s %9.2f ms %9.3f ms\n", names[i],
            (double)sums[i] / 1e6, (double)sums[i] / 1e6 / tasks);
  fprintf(stderr, "  %-24s %9.2f ms\n", "wall clock", (double)rep->wall_ns / 1e6);
}

static FILE *open_output(const align_args *a) {
  if (!a->out) return stdout;
  FILE *f = fopen(a->out, "w");
  if (!f) cli_error(CMD, "--out: cannot write '%s': %s", a->out, strerror(errno));
  return f;
}

/* Read one input; the message names the option and the file. */
static int read_input(const char *option, const char *path, seqio_set *set) {
  char err[1024];
  if (seqio_read(path, set, err, sizeof err) != 0) {
    cli_error(CMD, "%s: %s", option, err);
    return -1;
  }
  return 0;
}

/* --gam: one node serving the label, placed by the GAM (which prefers a
 * node whose accelerators already serve it) and reached with its lease. */
static int acquire_node(const align_args *a, const ember_options *opts,
                        ember_cluster **out) {
  ember_cluster_options co = {.gam = a->gam, .app_name = "ember-align",
                              .label = a->label ? a->label : "sw",
                              .count = 1, .client = opts};
  int rc = ember_cluster_acquire(&co, out);
  if (rc == 0)
    fprintf(stderr, "ember: the GAM placed this app (id %llu) on node %s "
            "(lease %llu, label %s)\n",
            (unsigned long long)ember_cluster_app_id(*out),
            ember_cluster_node(*out, 0),
            (unsigned long long)ember_cluster_lease_id(*out, 0), co.label);
  return rc;
}

static int align(const align_args *a, const seqio_set *q, const seqio_set *r,
                 FILE *out) {
  ember_options opts = {.size = sizeof opts, .client_name = "ember align",
                        .embedded_threads = (unsigned)a->threads,
                        .no_fallback = a->no_fallback};
  /* the library's 0 is "the default"; the option's 0 is "off" */
  if (a->has_reconnect_window)
    opts.reconnect_window_ms = a->reconnect_window ? a->reconnect_window : -1;
  const char *address = a->embedded ? "embedded" : a->nam;
  ember_client *client = NULL;
  ember_cluster *cluster = NULL;
  int rc = a->gam ? acquire_node(a, &opts, &cluster)
                  : ember_connect(address, &opts, &client);
  if (rc) {
    cli_error(CMD, "cannot open a client for %s: %s%s%s",
              a->gam ? "a node of the GAM" : address ? address
                                                     : "the default address",
              ember_strerror(rc), ember_last_error()[0] ? ": " : "",
              ember_last_error());
    return CLI_FAIL;
  }
  if (cluster) client = ember_cluster_client(cluster, 0);
  const char *used = ember_client_address(client);
  /* tasks that require a device kind cannot run in-process: they wait for
   * the NAM (--reconnect-window) */
  int waits = a->platform && strcmp(a->platform, "cpu") != 0;
  if (strcmp(used, "embedded") != 0 && !ember_is_connected(client))
    cli_error(CMD, "the NAM at %s cannot be reached%s%s; %s", used,
              ember_last_error()[0] ? ": " : "", ember_last_error(),
              waits ? "the tasks wait for it within the reconnect window"
                    : "aligning in-process");

  ember_sw_params params;
  ember_sw_params_default(&params);
  if (a->protein) {
    params.alphabet = EMBER_SW_PROTEIN;
    params.matrix = a->matrix ? a->matrix : "BLOSUM62";
    params.gap_open = 11;
    params.gap_extend = 1;
  } else {
    if (a->has_match) params.match = a->match;
    if (a->has_mismatch) params.mismatch = a->mismatch;
  }
  if (a->has_gap_open) params.gap_open = a->gap_open;
  if (a->has_gap_extend) params.gap_extend = a->gap_extend;
  params.platform = a->platform;
  params.prefer = a->prefer;

  size_t n = q->n;
  ember_seq *qs = calloc(n, sizeof *qs);
  ember_seq *rs = calloc(n, sizeof *rs);
  ember_sw_result *res = calloc(n, sizeof *res);
  if (!qs || !rs || !res) {
    cli_error(CMD, "out of memory for %zu pairs", n);
    rc = CLI_FAIL;
    goto done;
  }
  for (size_t i = 0; i < n; i++) {
    qs[i] = (ember_seq){q->records[i].residues, q->records[i].length};
    rs[i] = (ember_seq){r->records[i].residues, r->records[i].length};
  }
  cli_progress pr = {.tty = isatty(STDERR_FILENO), .start_ns = clock_now_ns()};
  ember_sw_report rep = {.size = sizeof rep};
  int arc = ember_sw_align(client, &params, qs, rs, n, res, &rep, on_progress, &pr);
  cli_progress_clear(&pr);
  if (arc) {
    cli_error(CMD, "%s%s%s", ember_strerror(arc),
              ember_last_error()[0] ? ": " : "", ember_last_error());
    /* what did complete is still worth writing */
    if (rep.pairs_failed == 0 || rep.pairs_failed >= n) {
      rc = CLI_FAIL;
      goto done;
    }
  }
  int wrc = a->json ? write_json(out, q, r, res) : write_tsv(out, q, r, res);
  if (fflush(out) != 0 || wrc != 0) {
    cli_error(CMD, "cannot write %s: %s", a->out ? a->out : "standard output",
              strerror(errno));
    rc = CLI_FAIL;
    goto done;
  }
  print_summary(&rep, n - rep.pairs_failed, used);
  if (a->timings) print_timings(&rep);
  rc = CLI_OK;
  if (arc) {
    char f[32], all[32];
    cli_error(CMD, "%s of %s pairs (%zu of %zu tasks) did not complete; the "
              "other pairs were written",
              cli_group_digits(rep.pairs_failed, f, sizeof f),
              cli_group_digits(n, all, sizeof all), rep.tasks_failed,
              rep.tasks + rep.tasks_failed);
    rc = CLI_PARTIAL;
  }
done:
  free(qs);
  free(rs);
  free(res);
  if (cluster) ember_cluster_release(cluster);  /* the lease goes back */
  else ember_close(client);
  return rc;
}

static int align_main(int argc, char **argv) {
  align_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc < 0) return CLI_OK;
  if (rc) return rc;

  seqio_set q = {0}, r = {0};
  if (read_input("--query", a.query, &q) || read_input("--ref", a.ref, &r)) {
    rc = CLI_FAIL;
    goto done;
  }
  if (q.n != r.n) {
    cli_error(CMD, "--query has %zu sequence%s, --ref has %zu: they are aligned "
                   "pairwise and must be as many", q.n, q.n == 1 ? "" : "s", r.n);
    rc = CLI_FAIL;
    goto done;
  }
  FILE *out = open_output(&a);
  if (!out) {
    rc = CLI_FAIL;
    goto done;
  }
  rc = align(&a, &q, &r, out);
  if (out != stdout) {
    if (fclose(out) != 0 && rc == CLI_OK) {
      cli_error(CMD, "cannot write '%s': %s", a.out, strerror(errno));
      rc = CLI_FAIL;
    }
    /* no broken file left behind; partial results are whole lines */
    if (rc != CLI_OK && rc != CLI_PARTIAL) remove(a.out);
  }
done:
  seqio_free(&q);
  seqio_free(&r);
  return rc;
}

const cli_command cli_cmd_align = {
    .name = "align",
    .summary = "align query i with reference i (Smith-Waterman)",
    .help = align_help,
    .run = align_main,
};
