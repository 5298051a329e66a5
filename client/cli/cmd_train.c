/*
 * cmd_train.c - `ember train`: train a convolutional network (a darknet
 * .cfg) on MNIST idx files with the cnn accelerator, split into pipeline
 * stages over NAMs, the embedded engine or nodes the GAM grants: the
 * options, the epoch lines, the --plot chart and the summary around
 * libember's ember_train and ember_train_plan (client/lib/train.c).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "ember/ember.h"

#define CMD "train"

#define PROGRESS_MIN_IMAGES 1000

static const char train_help[] =
    "Usage: ember train --net FILE --data DIR [options]\n"
    "\n"
    "Train a convolutional network on the cnn accelerator, split into\n"
    "pipeline stages of balanced work (after FPDeep) that run side by side\n"
    "on a NAM's platforms, on several NAMs, on nodes the GAM grants or\n"
    "in-process; one line per epoch, then the test accuracy.\n"
    "\n"
    "Input:\n"
    "  --net FILE          the network, a darknet .cfg (e.g.\n"
    "                      accelerators/cnn/nets/lenet.cfg,\n"
    "                      darknet_small.cfg): [net], [convolutional],\n"
    "                      [maxpool], [avgpool], [connected], [dropout],\n"
    "                      [softmax] with every key darknet reads for\n"
    "                      them, at darknet's defaults and meaning\n"
    "                      (accelerators/cnn/cnn_net.h); a value ember\n"
    "                      does not run (groups=2, adam=1, tanh, ...)\n"
    "                      is refused with its file:line\n"
    "  --data DIR          MNIST idx files: train-images-idx3-ubyte,\n"
    "                      train-labels-idx1-ubyte, t10k-images-idx3-ubyte,\n"
    "                      t10k-labels-idx1-ubyte, each plain or .gz\n"
    "                      (Fashion-MNIST as Debian installs it:\n"
    "                      /usr/share/datasets/fashion-mnist); without the\n"
    "                      t10k files no test pass. Not needed with --plan\n"
    "  --train-limit N     only the first N training images (default all)\n"
    "  --test-limit N      only the first N test images (default all)\n"
    "\n"
    "Training (values left out: the .cfg's [net] section):\n"
    "  --epochs N          epochs to train (default 1); 0 with --load: only\n"
    "                      evaluate the loaded weights on the test images\n"
    "  --batch B           images per weight update (mini-batch)\n"
    "  --micro-batch M     images per task, dividing B (default: B / the\n"
    "                      .cfg's subdivisions where it writes them, as\n"
    "                      darknet, the batch then M x subdivisions; else\n"
    "                      the largest divisor of B up to 16); batch\n"
    "                      normalisation's statistics are a micro-batch's\n"
    "  --lr X              learning rate (the base of the .cfg's policy)\n"
    "  --momentum X        SGD momentum, in [0, 1)\n"
    "  --decay X           weight decay, in [0, 1]\n"
    "  --seed N            initial weights, the shuffle and dropout's\n"
    "                      masks (default 1)\n"
    "  --sync              each stage updates its weights before it takes\n"
    "                      the next mini-batch, so training equals one\n"
    "                      stage's, bit for bit with --layers-only (a cut\n"
    "                      inside a layer adds in another order, which\n"
    "                      training amplifies). Default: FPDeep's\n"
    "                      pipeline, a stage updates as soon as its\n"
    "                      gradients of the mini-batch are in, later\n"
    "                      images in flight\n"
    "  --load FILE         start from these weights (written by --save)\n"
    "  --save FILE         write the weights after each epoch\n"
    "\n"
    "Where it runs:\n"
    "  --stages N          stages the network is split into (default 1),\n"
    "                      work weighted by each platform's speed for cnn\n"
    "                      as its NAM measured it (platforms alike on a NAM,\n"
    "                      e.g. its emulated boards, share one figure)\n"
    "  --layers-only       stages hold whole layers (default: a stage may\n"
    "                      begin or end inside a convolutional or connected\n"
    "                      layer, with a slice of its input channels (ICP)\n"
    "                      or of its output channels (OCP), whichever\n"
    "                      balances the stages better)\n"
    "  --fixed-splits      cut each layer by input channels, or by output\n"
    "                      channels only when it has fewer input channels\n"
    "                      than stages and more output channels (FPDeep's\n"
    "                      rule), without searching for a better balance\n"
    "  --platform KIND     every stage on a platform of this kind: cpu,\n"
    "                      opencl, fpga-emu (default any)\n"
    "  --nam ADDR          a NAM at unix:PATH or tcp:HOST:PORT; repeat it\n"
    "                      for several NAMs, the stages dealt over them in\n"
    "                      order (no more NAMs than stages)\n"
    "  --embedded          the engine in-process, no NAM (one worker thread\n"
    "                      per stage)\n"
    "                      (none of these: $EMBER_NAM, else unix:" EMBER_DEFAULT_SOCKET "\n"
    "                      if it exists, else embedded; a single NAM that\n"
    "                      cannot be reached: in-process, unless --platform\n"
    "                      asks for another kind than cpu)\n"
    "  --gam HOST:PORT     ask ember-gam for --nodes nodes serving the cnn\n"
    "                      label and connect to their NAMs with the signed\n"
    "                      leases (not with --nam or --embedded)\n"
    "  --nodes N           with --gam: the nodes wanted (at most --stages)\n"
    "\n"
    "Output:\n"
    "  --plan              print the plan (each stage's platform, layers,\n"
    "                      operations, share of the work and expected idle\n"
    "                      share) and exit without training\n"
    "  --json              one JSON object per line: each epoch's {\"epoch\",\n"
    "                      \"epochs\", \"loss\", \"train_accuracy\",\n"
    "                      \"test_accuracy\", \"seconds\", \"images_per_second\",\n"
    "                      \"stages\": [{\"platform\", \"busy\"}]}, then\n"
    "                      {\"test_accuracy\", \"epochs\", \"loss\",\n"
    "                      \"train_accuracy\", \"seconds\", \"tasks\"}\n"
    "                      (accuracies as shares in [0, 1]; null for a value\n"
    "                      that is not a number, e.g. without test images);\n"
    "                      with --plan, {\"plan\": TEXT}\n"
    "  --plot FILE.png     after training, a chart of the loss (left axis)\n"
    "                      and the training and test accuracy (right axis)\n"
    "                      per epoch, drawn by gnuplot (which must be\n"
    "                      installed: checked before training)\n"
    "  -h, --help          this text\n"
    "\n"
    "After each epoch a line on standard output, e.g.\n"
    "  epoch 1/5  loss 0.5123  train 81.20%  test 85.31%  1234 img/s  "
    "busy 92% 88%\n"
    "(the epoch numbers count those of --load's weights; \"test -\" without\n"
    "test images, else an evaluation: batch normalisation's rolling\n"
    "statistics, no dropout; busy: each stage's share of the epoch spent\n"
    "running its tasks). On a terminal, a progress line on standard error during each\n"
    "epoch. At the end a summary line goes to standard error and\n"
    "\"test accuracy 0.8931\" (\"-\" without test images) to standard\n"
    "output.\n"
    "\n"
    "Exit status: 0 done, 1 failed (input, network, data, NAM, GAM, gnuplot),\n"
    "2 bad usage.\n";

enum {
  OPT_NET = 256, OPT_DATA, OPT_EPOCHS, OPT_BATCH, OPT_MICRO_BATCH, OPT_LR,
  OPT_MOMENTUM, OPT_DECAY, OPT_STAGES, OPT_PLATFORM, OPT_NAM, OPT_GAM,
  OPT_NODES, OPT_EMBEDDED, OPT_SYNC, OPT_PLAN, OPT_SAVE, OPT_LOAD, OPT_PLOT,
  OPT_JSON, OPT_SEED, OPT_TRAIN_LIMIT, OPT_TEST_LIMIT, OPT_LAYERS_ONLY,
  OPT_FIXED_SPLITS
};

static const struct option train_options[] = {
    {"net", required_argument, NULL, OPT_NET},
    {"data", required_argument, NULL, OPT_DATA},
    {"epochs", required_argument, NULL, OPT_EPOCHS},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"micro-batch", required_argument, NULL, OPT_MICRO_BATCH},
    {"lr", required_argument, NULL, OPT_LR},
    {"momentum", required_argument, NULL, OPT_MOMENTUM},
    {"decay", required_argument, NULL, OPT_DECAY},
    {"stages", required_argument, NULL, OPT_STAGES},
    {"platform", required_argument, NULL, OPT_PLATFORM},
    {"nam", required_argument, NULL, OPT_NAM},
    {"gam", required_argument, NULL, OPT_GAM},
    {"nodes", required_argument, NULL, OPT_NODES},
    {"embedded", no_argument, NULL, OPT_EMBEDDED},
    {"sync", no_argument, NULL, OPT_SYNC},
    {"layers-only", no_argument, NULL, OPT_LAYERS_ONLY},
    {"fixed-splits", no_argument, NULL, OPT_FIXED_SPLITS},
    {"plan", no_argument, NULL, OPT_PLAN},
    {"save", required_argument, NULL, OPT_SAVE},
    {"load", required_argument, NULL, OPT_LOAD},
    {"plot", required_argument, NULL, OPT_PLOT},
    {"json", no_argument, NULL, OPT_JSON},
    {"seed", required_argument, NULL, OPT_SEED},
    {"train-limit", required_argument, NULL, OPT_TRAIN_LIMIT},
    {"test-limit", required_argument, NULL, OPT_TEST_LIMIT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

typedef struct train_args {
  const char *net, *data, *platform, *gam, *save, *load, *plot;
  const char **nams;                /* argc entries, n_nams used */
  size_t n_nams;
  int embedded, sync, plan, json, layers_only, fixed_splits;
  int epochs, batch, micro_batch, stages, nodes, train_limit, test_limit;
  int has_epochs, has_seed;
  double lr, momentum, decay;       /* < 0: the .cfg's */
  uint64_t seed;
} train_args;

/* text as a whole finite number in [min, max]; else CLI_USAGE. */
static int parse_double(const char *option, const char *text, double min,
                        double max, double *out) {
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (text[0] == '\0' || *end != '\0' || text[0] == ' ' || text[0] == '\t' ||
      !isfinite(v))
    return cli_usage_error(CMD, "%s: '%s' is not a number", option, text);
  if (errno == ERANGE || v < min || v > max)
    return cli_usage_error(CMD, "%s: %s is out of range [%g, %g]", option,
                           text, min, max);
  *out = v;
  return 0;
}

/* text as a whole decimal number that fits 64 bits; else CLI_USAGE. */
static int parse_u64(const char *option, const char *text, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (text[0] < '0' || text[0] > '9' || *end != '\0')
    return cli_usage_error(CMD, "%s: '%s' is not a whole number", option, text);
  if (errno == ERANGE)
    return cli_usage_error(CMD, "%s: %s is out of range [0, %llu]", option,
                           text, (unsigned long long)UINT64_MAX);
  *out = (uint64_t)v;
  return 0;
}

/* Check the combinations; returns 0 or CLI_USAGE. */
static int check_args(const train_args *a) {
  if (!a->net) return cli_usage_error(CMD, "--net FILE is required");
  if (!a->net[0]) return cli_usage_error(CMD, "--net: an empty path");
  if (!a->data && !a->plan)
    return cli_usage_error(CMD, "--data DIR is required (the MNIST idx "
                           "files; not with --plan)");
  if (a->data && !a->data[0]) return cli_usage_error(CMD, "--data: an empty path");
  for (size_t i = 0; i < a->n_nams; i++)
    if (!a->nams[i][0]) return cli_usage_error(CMD, "--nam: an empty address");
  if (a->n_nams && a->embedded)
    return cli_usage_error(CMD, "--nam and --embedded exclude each other");
  if (a->gam && (a->n_nams || a->embedded))
    return cli_usage_error(CMD, "--gam excludes --nam and --embedded: the GAM "
                           "picks the nodes");
  if (a->gam && !a->gam[0]) return cli_usage_error(CMD, "--gam: an empty address");
  if (a->gam && !a->nodes)
    return cli_usage_error(CMD, "--gam needs --nodes N (the nodes to ask the "
                           "GAM for)");
  if (a->nodes && !a->gam)
    return cli_usage_error(CMD, "--nodes is what to ask the GAM for: it needs "
                           "--gam");
  int stages = a->stages ? a->stages : 1;
  if (a->nodes > stages)
    return cli_usage_error(CMD, "--nodes %d is more than the %d stage%s: each "
                           "node takes one stage at least (raise --stages)",
                           a->nodes, stages, stages == 1 ? "" : "s");
  if (a->n_nams > (size_t)stages)
    return cli_usage_error(CMD, "%zu NAMs for %d stage%s: each NAM takes one "
                           "stage at least (raise --stages)", a->n_nams,
                           stages, stages == 1 ? "" : "s");
  if (a->batch && a->micro_batch && a->batch % a->micro_batch != 0)
    return cli_usage_error(CMD, "--micro-batch %d does not divide --batch %d",
                           a->micro_batch, a->batch);
  if (a->has_epochs && a->epochs == 0 && !a->load && !a->plan)
    return cli_usage_error(CMD, "--epochs 0 evaluates --load's weights: it "
                           "needs --load FILE");
  if (a->load && !a->load[0]) return cli_usage_error(CMD, "--load: an empty path");
  if (a->save && !a->save[0]) return cli_usage_error(CMD, "--save: an empty path");
  if (a->plot && !a->plot[0]) return cli_usage_error(CMD, "--plot: an empty path");
  if (a->plan && (a->save || a->plot))
    return cli_usage_error(CMD, "--plan trains nothing: not with %s",
                           a->save ? "--save" : "--plot");
  if (a->plot && a->has_epochs && a->epochs == 0)
    return cli_usage_error(CMD, "--plot draws the epochs trained: not with "
                           "--epochs 0");
  if (a->platform && cli_check_platform_kind(CMD, "--platform", a->platform))
    return CLI_USAGE;
  return 0;
}

/* Parse and check the options; returns 0, CLI_USAGE, or -1 after --help.
 * a->nams is malloc'd (free it) when 0 is returned. */
static int parse_args(int argc, char **argv, train_args *a) {
  memset(a, 0, sizeof *a);
  a->lr = a->momentum = a->decay = -1;
  a->nams = calloc((size_t)argc, sizeof *a->nams);
  if (!a->nams) {
    cli_error(CMD, "out of memory");
    return CLI_FAIL;
  }
  opterr = 0;
  int c, rc = 0;
  while ((c = getopt_long(argc, argv, ":h", train_options, NULL)) != -1) {
    switch (c) {
    case OPT_NET: a->net = optarg; break;
    case OPT_DATA: a->data = optarg; break;
    case OPT_EPOCHS:
      rc = cli_parse_int(CMD, "--epochs", optarg, 0, 1000000, &a->epochs);
      a->has_epochs = 1;
      break;
    case OPT_BATCH:
      rc = cli_parse_int(CMD, "--batch", optarg, 1, 1 << 20, &a->batch);
      break;
    case OPT_MICRO_BATCH:
      rc = cli_parse_int(CMD, "--micro-batch", optarg, 1, 1 << 20,
                         &a->micro_batch);
      break;
    case OPT_LR: rc = parse_double("--lr", optarg, 0, 10, &a->lr); break;
    case OPT_MOMENTUM:
      rc = parse_double("--momentum", optarg, 0, 0.999999, &a->momentum);
      break;
    case OPT_DECAY: rc = parse_double("--decay", optarg, 0, 1, &a->decay); break;
    case OPT_STAGES:
      rc = cli_parse_int(CMD, "--stages", optarg, 1, 1024, &a->stages);
      break;
    case OPT_PLATFORM: a->platform = optarg; break;
    case OPT_NAM: a->nams[a->n_nams++] = optarg; break;
    case OPT_GAM: a->gam = optarg; break;
    case OPT_NODES:
      rc = cli_parse_int(CMD, "--nodes", optarg, 1, 1024, &a->nodes);
      break;
    case OPT_EMBEDDED: a->embedded = 1; break;
    case OPT_SYNC: a->sync = 1; break;
    case OPT_LAYERS_ONLY: a->layers_only = 1; break;
    case OPT_FIXED_SPLITS: a->fixed_splits = 1; break;
    case OPT_PLAN: a->plan = 1; break;
    case OPT_SAVE: a->save = optarg; break;
    case OPT_LOAD: a->load = optarg; break;
    case OPT_PLOT: a->plot = optarg; break;
    case OPT_JSON: a->json = 1; break;
    case OPT_SEED:
      rc = parse_u64("--seed", optarg, &a->seed);
      a->has_seed = 1;
      break;
    case OPT_TRAIN_LIMIT:
      rc = cli_parse_int(CMD, "--train-limit", optarg, 1, 1 << 30,
                         &a->train_limit);
      break;
    case OPT_TEST_LIMIT:
      rc = cli_parse_int(CMD, "--test-limit", optarg, 1, 1 << 30,
                         &a->test_limit);
      break;
    case 'h': fputs(train_help, stdout); rc = -1; break;
    default: rc = cli_getopt_error(CMD, c, argv); break;
    }
    if (rc) break;
  }
  if (rc == 0 && optind < argc)
    rc = cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
  if (rc == 0) rc = check_args(a);
  if (rc) {
    free(a->nams);
    a->nams = NULL;
  }
  return rc;
}

/* ---- checks before any work ------------------------------------------------ */

/* An executable named prog in $PATH. */
static int in_path(const char *prog) {
  const char *path = getenv("PATH");
  if (!path || !path[0]) path = "/usr/local/bin:/usr/bin:/bin";
  while (1) {
    const char *end = strchr(path, ':');
    size_t len = end ? (size_t)(end - path) : strlen(path);
    char file[4096];
    int n = len ? snprintf(file, sizeof file, "%.*s/%s", (int)len, path, prog)
                : snprintf(file, sizeof file, "./%s", prog);
    struct stat st;
    if (n > 0 && (size_t)n < sizeof file && stat(file, &st) == 0 &&
        S_ISREG(st.st_mode) && access(file, X_OK) == 0)
      return 1;
    if (!end) return 0;
    path = end + 1;
  }
}

/* The files the options name, so that a wrong path is reported by its
 * option before clients are opened. Returns 0 or CLI_FAIL. */
static int check_files(const train_args *a) {
  const char *files[][2] = {{"--net", a->net}, {"--load", a->load}};
  for (size_t i = 0; i < 2; i++) {
    if (!files[i][1]) continue;
    FILE *f = fopen(files[i][1], "r");
    struct stat st;
    if (!f) {
      cli_error(CMD, "%s: cannot read '%s': %s", files[i][0], files[i][1],
                strerror(errno));
      return CLI_FAIL;
    }
    int dir = fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode);
    fclose(f);
    if (dir) {
      cli_error(CMD, "%s: '%s' is a directory", files[i][0], files[i][1]);
      return CLI_FAIL;
    }
  }
  if (a->data && !a->plan) {
    struct stat st;
    if (stat(a->data, &st) != 0) {
      cli_error(CMD, "--data: cannot read '%s': %s", a->data, strerror(errno));
      return CLI_FAIL;
    }
    if (!S_ISDIR(st.st_mode)) {
      cli_error(CMD, "--data: '%s' is not a directory (of MNIST idx files)",
                a->data);
      return CLI_FAIL;
    }
  }
  if (a->plot) {
    if (!in_path("gnuplot")) {
      cli_error(CMD, "--plot: gnuplot is not installed (no gnuplot in $PATH; "
                "Debian: apt install gnuplot-nox)");
      return CLI_FAIL;
    }
    char dir[4096];
    const char *slash = strrchr(a->plot, '/');
    if (slash)
      snprintf(dir, sizeof dir, "%.*s", (int)(slash - a->plot + 1), a->plot);
    else
      snprintf(dir, sizeof dir, ".");
    if (access(dir, W_OK) != 0) {
      cli_error(CMD, "--plot: cannot write '%s': %s", a->plot,
                strerror(errno));
      return CLI_FAIL;
    }
  }
  return 0;
}

/* ---- clients ----------------------------------------------------------- */

typedef struct train_clients {
  ember_client **v;
  size_t n;
  ember_cluster *cluster;   /* --gam: owns v's clients */
  char where[512];          /* for the summary */
} train_clients;

static void close_clients(train_clients *tc) {
  if (tc->cluster) {
    ember_cluster_release(tc->cluster);  /* the leases go back */
  } else {
    for (size_t i = 0; i < tc->n; i++) ember_close(tc->v[i]);
  }
  free(tc->v);
  memset(tc, 0, sizeof *tc);
}

static void connect_error(const char *address, int rc) {
  cli_error(CMD, "cannot open a client for %s: %s%s%s",
            address ? address : "the default address", ember_strerror(rc),
            ember_last_error()[0] ? ": " : "", ember_last_error());
}

/* --gam: --nodes nodes serving cnn, placed by the GAM and reached with
 * their leases. */
static int acquire_nodes(const train_args *a, const ember_options *opts,
                         train_clients *tc) {
  ember_cluster_options co = {.size = sizeof co, .gam = a->gam,
                              .app_name = "ember-train", .label = "cnn",
                              .count = (unsigned)a->nodes, .client = opts};
  int rc = ember_cluster_acquire(&co, &tc->cluster);
  if (rc) {
    cli_error(CMD, "cannot get %d node%s serving cnn from the GAM at %s: %s%s%s",
              a->nodes, a->nodes == 1 ? "" : "s", a->gam, ember_strerror(rc),
              ember_last_error()[0] ? ": " : "", ember_last_error());
    return CLI_FAIL;
  }
  size_t n = ember_cluster_size(tc->cluster);
  if (n == 0) {
    cli_error(CMD, "the GAM at %s granted no node", a->gam);
    return CLI_FAIL;
  }
  for (size_t i = 0; i < n; i++) {
    tc->v[i] = ember_cluster_client(tc->cluster, i);
    tc->n++;
    fprintf(stderr, "ember: the GAM placed this app (id %llu) on node %s "
            "(lease %llu, label cnn)\n",
            (unsigned long long)ember_cluster_app_id(tc->cluster),
            ember_cluster_node(tc->cluster, i),
            (unsigned long long)ember_cluster_lease_id(tc->cluster, i));
  }
  snprintf(tc->where, sizeof tc->where, "%zu node%s of the GAM at %s", n,
           n == 1 ? "" : "s", a->gam);
  return 0;
}

/* One client (--nam ADDR, --embedded or the default address); a single NAM
 * that cannot be reached leaves the work to the embedded engine (state
 * blocks never fall back on their own), unless --platform asks for a kind
 * the embedded engine lacks. */
static int open_one(const train_args *a, ember_options *opts,
                    train_clients *tc) {
  const char *address = a->embedded ? "embedded" : a->n_nams ? a->nams[0]
                                                             : NULL;
  ember_client *client = NULL;
  int rc = ember_connect(address, opts, &client);
  if (rc) {
    connect_error(address, rc);
    return CLI_FAIL;
  }
  const char *used = ember_client_address(client);
  if (strcmp(used, "embedded") != 0 && !ember_is_connected(client)) {
    char why[512];
    snprintf(why, sizeof why, "%s", ember_last_error());
    if (a->platform && strcmp(a->platform, "cpu") != 0) {
      cli_error(CMD, "the NAM at %s cannot be reached%s%s; --platform %s "
                "needs it", used, why[0] ? ": " : "", why, a->platform);
      ember_close(client);
      return CLI_FAIL;
    }
    cli_error(CMD, "the NAM at %s cannot be reached%s%s; training in-process",
              used, why[0] ? ": " : "", why);
    ember_close(client);
    client = NULL;
    rc = ember_connect("embedded", opts, &client);
    if (rc) {
      cli_error(CMD, "cannot start the embedded engine: %s",
                ember_strerror(rc));
      return CLI_FAIL;
    }
  }
  tc->v[tc->n++] = client;
  snprintf(tc->where, sizeof tc->where, "%s", ember_client_address(client));
  return 0;
}

/* Several NAMs, each of which must be reachable. */
static int open_nams(const train_args *a, ember_options *opts,
                     train_clients *tc) {
  size_t used = 0;
  for (size_t i = 0; i < a->n_nams; i++) {
    ember_client *client = NULL;
    int rc = ember_connect(a->nams[i], opts, &client);
    if (rc) {
      connect_error(a->nams[i], rc);
      return CLI_FAIL;
    }
    tc->v[tc->n++] = client;
    if (!ember_is_connected(client)) {
      cli_error(CMD, "the NAM at %s cannot be reached%s%s", a->nams[i],
                ember_last_error()[0] ? ": " : "", ember_last_error());
      return CLI_FAIL;
    }
    int n = snprintf(tc->where + used, sizeof tc->where - used, "%s%s",
                     i ? ", " : "", a->nams[i]);
    if (n > 0 && (size_t)n < sizeof tc->where - used) used += (size_t)n;
  }
  return 0;
}

static int open_clients(const train_args *a, train_clients *tc) {
  memset(tc, 0, sizeof *tc);
  size_t want = a->gam ? (size_t)a->nodes : a->n_nams > 1 ? a->n_nams : 1;
  tc->v = calloc(want, sizeof *tc->v);
  if (!tc->v) {
    cli_error(CMD, "out of memory");
    return CLI_FAIL;
  }
  /* in-process, a worker thread per stage lets the stages run side by
   * side */
  ember_options opts = {.size = sizeof opts, .client_name = "ember train"};
  if (!a->gam && a->n_nams == 0)
    opts.embedded_threads = (unsigned)(a->stages ? a->stages : 1);
  int rc = a->gam ? acquire_nodes(a, &opts, tc)
           : a->n_nams > 1 ? open_nams(a, &opts, tc)
                           : open_one(a, &opts, tc);
  if (rc) close_clients(tc);
  return rc;
}

/* ---- output ------------------------------------------------------------ */

/* One epoch's figures, kept for --plot. */
typedef struct epoch_row {
  unsigned epoch;
  double loss, train, test;
} epoch_row;

typedef struct train_run {
  const train_args *a;
  cli_progress pr;
  uint64_t epoch_start_ns;
  unsigned trained;         /* epochs of this call reported so far */
  unsigned first, last;     /* from the first report: epoch numbers of this
                               call's first and last epochs */
  epoch_row *rows;
  size_t n_rows, cap_rows;
  char platforms[256];      /* the stages' platforms, for the summary */
  size_t stages;
  int write_failed, no_memory;
} train_run;

static json_t *json_number(double v) {
  return isfinite(v) ? json_real(v) : json_null();
}

/* Print obj as one line and release it; -1 when it cannot be written. */
static int print_json_line(json_t *obj) {
  char *text = obj ? json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER |
                                       JSON_REAL_PRECISION(10))
                   : NULL;
  json_decref(obj);
  if (!text) return -1;
  int bad = puts(text) == EOF || fflush(stdout) != 0;
  free(text);
  return bad ? -1 : 0;
}

/* ep's stage fields, when the library's struct has them. */
static size_t epoch_stages(const ember_train_epoch *ep) {
  if (ep->size < offsetof(ember_train_epoch, stage_platform) +
                     sizeof ep->stage_platform ||
      !ep->stage_busy || !ep->stage_platform)
    return 0;
  return ep->n_stages;
}

static int print_epoch_json(const ember_train_epoch *ep) {
  json_t *o = json_object(), *stages = json_array();
  if (!o || !stages) {
    json_decref(o);
    json_decref(stages);
    return -1;
  }
  json_object_set_new(o, "epoch", json_integer(ep->epoch));
  json_object_set_new(o, "epochs", json_integer(ep->epochs));
  json_object_set_new(o, "loss", json_number(ep->loss));
  json_object_set_new(o, "train_accuracy", json_number(ep->train_accuracy));
  json_object_set_new(o, "test_accuracy", json_number(ep->test_accuracy));
  json_object_set_new(o, "seconds", json_number(ep->seconds));
  json_object_set_new(o, "images_per_second",
                      json_number(ep->images_per_second));
  size_t n = epoch_stages(ep);
  for (size_t s = 0; s < n; s++) {
    const char *p = ep->stage_platform[s];
    json_array_append_new(stages, json_pack("{s:o, s:o}", "platform",
                                            p ? cli_json_text(p) : json_null(),
                                            "busy",
                                            json_number(ep->stage_busy[s])));
  }
  json_object_set_new(o, "stages", stages);
  return print_json_line(o);
}

static int print_epoch_text(const ember_train_epoch *ep) {
  printf("epoch %u/%u  loss %.4f  train %.2f%%  ", ep->epoch, ep->epochs,
         ep->loss, 100 * ep->train_accuracy);
  if (isnan(ep->test_accuracy)) fputs("test -", stdout);
  else printf("test %.2f%%", 100 * ep->test_accuracy);
  printf("  %.0f img/s", ep->images_per_second);
  size_t n = epoch_stages(ep);
  if (n) fputs("  busy", stdout);
  for (size_t s = 0; s < n; s++) printf(" %.0f%%", 100 * ep->stage_busy[s]);
  putchar('\n');
  return fflush(stdout) != 0 || ferror(stdout) ? -1 : 0;
}

static int keep_row(train_run *r, const ember_train_epoch *ep) {
  if (r->n_rows == r->cap_rows) {
    size_t cap = r->cap_rows ? 2 * r->cap_rows : 16;
    epoch_row *rows = realloc(r->rows, cap * sizeof *rows);
    if (!rows) return -1;
    r->rows = rows;
    r->cap_rows = cap;
  }
  r->rows[r->n_rows++] = (epoch_row){ep->epoch, ep->loss, ep->train_accuracy,
                                     ep->test_accuracy};
  return 0;
}

static void note_platforms(train_run *r, const ember_train_epoch *ep) {
  size_t n = epoch_stages(ep), used = 0;
  r->stages = n;
  r->platforms[0] = '\0';
  for (size_t s = 0; s < n; s++) {
    const char *p = ep->stage_platform[s] ? ep->stage_platform[s] : "?";
    int k = snprintf(r->platforms + used, sizeof r->platforms - used, "%s%s",
                     s ? ", " : "", p);
    if (k < 0 || (size_t)k >= sizeof r->platforms - used) break;
    used += (size_t)k;
  }
}

/* ember_train's callbacks: the progress of an epoch, then its line. */
static int on_epoch(const ember_train_epoch *ep, void *user) {
  train_run *r = user;
  cli_progress_clear(&r->pr);
  r->pr.shown = 0;
  if (r->a->plot && keep_row(r, ep) != 0) {
    r->no_memory = 1;
    return -1;
  }
  if ((r->a->json ? print_epoch_json(ep) : print_epoch_text(ep)) != 0) {
    r->write_failed = 1;
    return -1;
  }
  r->trained++;
  r->first = ep->epoch - r->trained + 1;
  r->last = ep->epochs;
  note_platforms(r, ep);
  r->epoch_start_ns = clock_now_ns();
  return 0;
}

static void on_progress(size_t done, size_t total, void *user) {
  train_run *r = user;
  if (!r->pr.tty) return;
  char verb[64], note[64] = "", rate[32];
  /* the epoch's number is known from the first report on, or without
   * --load (numbers count the loaded weights' epochs) */
  if (r->trained)
    snprintf(verb, sizeof verb, "epoch %u/%u", r->first + r->trained, r->last);
  else if (!r->a->load)
    snprintf(verb, sizeof verb, "epoch 1/%d",
             r->a->has_epochs ? r->a->epochs : 1);
  else
    snprintf(verb, sizeof verb, "training");
  double s = (double)(clock_now_ns() - r->epoch_start_ns) / 1e9;
  if (done && s > 0)
    snprintf(note, sizeof note, "%s img/s",
             cli_group_digits((uint64_t)((double)done / s), rate, sizeof rate));
  cli_progress_show_note(&r->pr, done, total, PROGRESS_MIN_IMAGES, verb,
                         "images", note[0] ? note : NULL);
}

/* gnuplot's single-quoted string: ' doubled. */
static void gp_string(FILE *gp, const char *s) {
  fputc('\'', gp);
  for (; *s; s++) {
    if (*s == '\'') fputc('\'', gp);
    fputc(*s, gp);
  }
  fputc('\'', gp);
}

/* --plot: loss on the left axis, accuracies (%) on the right, by gnuplot
 * reading the script and the data inline. Returns 0 or CLI_FAIL. */
static int draw_plot(const train_args *a, const epoch_row *rows, size_t n) {
  if (n == 0) {
    cli_error(CMD, "--plot: no epoch to draw");
    return CLI_FAIL;
  }
  void (*pipe_was)(int) = signal(SIGPIPE, SIG_IGN);
  FILE *gp = popen("gnuplot", "w");
  if (!gp) {
    cli_error(CMD, "--plot: cannot run gnuplot: %s", strerror(errno));
    signal(SIGPIPE, pipe_was);
    return CLI_FAIL;
  }
  int tests = 0;
  for (size_t i = 0; i < n; i++) tests += !isnan(rows[i].test);
  const char *slash = strrchr(a->net, '/');
  fputs("if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
        "  set terminal pngcairo size 800,500\n"
        "} else {\n"
        "  set terminal png size 800,500\n"
        "}\n"
        "set output ", gp);
  gp_string(gp, a->plot);
  fputs("\nset title ", gp);
  gp_string(gp, slash ? slash + 1 : a->net);
  fputs(" noenhanced\n"
        "set xlabel 'epoch'\n"
        "set ylabel 'loss'\n"
        "set y2label 'accuracy (%)'\n"
        "set ytics nomirror\n"
        "set y2tics\n"
        "set yrange [0:*]\n"
        "set y2range [0:100]\n"
        "set grid\n"
        "set key below\n"
        "set bmargin 6\n", gp);
  unsigned first = rows[0].epoch, last = rows[n - 1].epoch;
  if (first == last)
    fprintf(gp, "set xrange [%u:%u]\n", first - 1, last + 1);
  else
    fprintf(gp, "set xrange [%u:%u]\n", first, last);
  if (last - first <= 20) fputs("set xtics 1\n", gp);
  fputs("$data << EOD\n", gp);
  for (size_t i = 0; i < n; i++)
    fprintf(gp, "%u %.9g %.9g %.9g\n", rows[i].epoch, rows[i].loss,
            rows[i].train, rows[i].test);
  fputs("EOD\n"
        "plot $data using 1:2 axes x1y1 with linespoints title 'loss', \\\n"
        "     $data using 1:(100*$3) axes x1y2 with linespoints "
        "title 'train accuracy'", gp);
  if (tests)
    fputs(", \\\n     $data using 1:(100*$4) axes x1y2 with linespoints "
          "title 'test accuracy'", gp);
  fputs("\nset output\n", gp);
  int write_bad = ferror(gp);
  int status = pclose(gp);
  signal(SIGPIPE, pipe_was);
  struct stat st;
  if (write_bad || status != 0 || stat(a->plot, &st) != 0 || st.st_size == 0) {
    cli_error(CMD, "--plot: gnuplot could not draw '%s'%s", a->plot,
              status != 0 ? " (it failed; see its messages above)" : "");
    return CLI_FAIL;
  }
  return 0;
}

static void print_summary(const train_args *a, const train_run *r,
                          const ember_train_result *res,
                          const train_clients *tc, uint64_t wall_ns) {
  char wall[32], tasks[32];
  cli_format_wall(wall_ns, wall, sizeof wall);
  unsigned stages = a->stages ? (unsigned)a->stages : 1;
  char trained[64];
  if (res->epochs)
    snprintf(trained, sizeof trained, "%u epoch%s (to epoch %u)", res->epochs,
             res->epochs == 1 ? "" : "s", r->last);
  else
    snprintf(trained, sizeof trained, "no training (weights evaluated)");
  fprintf(stderr, "ember: %s of %s, %u stage%s%s%s%s, %s task%s, via %s, %s\n",
          trained, a->net, stages, stages == 1 ? "" : "s",
          r->platforms[0] ? " (" : "", r->platforms,
          r->platforms[0] ? ")" : "",
          cli_group_digits(res->tasks, tasks, sizeof tasks),
          res->tasks == 1 ? "" : "s", tc->where, wall);
}

static void set_params(const train_args *a, train_run *r,
                       ember_train_params *p) {
  ember_train_params_default(p);
  p->net_path = a->net;
  p->data_dir = a->data;
  p->epochs = a->has_epochs ? (unsigned)a->epochs : 1;
  if (a->batch) p->batch = (unsigned)a->batch;
  if (a->micro_batch) p->micro_batch = (unsigned)a->micro_batch;
  if (a->lr >= 0) p->learning_rate = a->lr;
  if (a->momentum >= 0) p->momentum = a->momentum;
  if (a->decay >= 0) p->decay = a->decay;
  if (a->stages) p->stages = (unsigned)a->stages;
  p->platform = a->platform;
  if (a->sync) p->sync = 1;
  if (a->layers_only) p->layer_split_only = 1;
  if (a->fixed_splits) p->fixed_splits = 1;
  if (a->has_seed) p->seed = a->seed;
  p->train_limit = (size_t)a->train_limit;
  p->test_limit = (size_t)a->test_limit;
  p->load_path = a->load;
  p->save_path = a->save;
  p->epoch_cb = on_epoch;
  p->progress = on_progress;
  p->user = r;
}

/* The library's reason for rc. */
static void train_error(int rc) {
  const char *why = ember_last_error();
  cli_error(CMD, "%s", why && why[0] ? why : ember_strerror(rc));
}

static int plan(const train_args *a, train_clients *tc,
                const ember_train_params *p) {
  char *text = NULL;
  int erc = ember_train_plan(tc->v, tc->n, p, &text);
  if (erc) {
    train_error(erc);
    return CLI_FAIL;
  }
  int bad;
  if (a->json) {
    json_t *o = json_object();
    if (o) json_object_set_new(o, "plan", cli_json_text(text ? text : ""));
    bad = print_json_line(o);
  } else {
    bad = fputs(text ? text : "", stdout) == EOF;
    if (!bad && text && text[0] && text[strlen(text) - 1] != '\n')
      bad = putchar('\n') == EOF;
  }
  free(text);
  if (bad) {
    cli_error(CMD, "cannot write standard output: %s", strerror(errno));
    return CLI_FAIL;
  }
  return CLI_OK;
}

static int train(const train_args *a, train_clients *tc,
                 ember_train_params *p, train_run *r) {
  uint64_t start = clock_now_ns();
  r->pr = (cli_progress){.tty = isatty(STDERR_FILENO), .start_ns = start};
  r->epoch_start_ns = start;
  ember_train_result res = {.size = sizeof res};
  int erc = ember_train(tc->v, tc->n, p, &res);
  cli_progress_clear(&r->pr);
  if (r->write_failed) {
    cli_error(CMD, "cannot write standard output: %s", strerror(errno));
    return CLI_FAIL;
  }
  if (r->no_memory) {
    cli_error(CMD, "out of memory");
    return CLI_FAIL;
  }
  if (erc) {
    train_error(erc);
    return CLI_FAIL;
  }
  if (a->json) {
    json_t *o = json_object();
    if (o) {
      json_object_set_new(o, "test_accuracy", json_number(res.test_accuracy));
      json_object_set_new(o, "epochs", json_integer(res.epochs));
      json_object_set_new(o, "loss", json_number(res.loss));
      json_object_set_new(o, "train_accuracy",
                          json_number(res.train_accuracy));
      json_object_set_new(o, "seconds", json_number(res.seconds));
      json_object_set_new(o, "tasks", json_integer((json_int_t)res.tasks));
    }
    if (print_json_line(o) != 0) {
      cli_error(CMD, "cannot write standard output: %s", strerror(errno));
      return CLI_FAIL;
    }
  } else {
    print_summary(a, r, &res, tc, clock_now_ns() - start);
    if (isnan(res.test_accuracy)) puts("test accuracy -");
    else printf("test accuracy %.4f\n", res.test_accuracy);
  }
  if (fflush(stdout) != 0) {
    cli_error(CMD, "cannot write standard output: %s", strerror(errno));
    return CLI_FAIL;
  }
  if (a->plot) return draw_plot(a, r->rows, r->n_rows);
  return CLI_OK;
}

static int train_main(int argc, char **argv) {
  train_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc < 0) return CLI_OK;
  if (rc) return rc;
  train_clients tc;
  if ((rc = check_files(&a)) == 0 && (rc = open_clients(&a, &tc)) == 0) {
    train_run r = {.a = &a};
    ember_train_params p;
    set_params(&a, &r, &p);
    rc = a.plan ? plan(&a, &tc, &p) : train(&a, &tc, &p, &r);
    free(r.rows);
    close_clients(&tc);
  }
  free(a.nams);
  return rc;
}

const cli_command cli_cmd_train = {
    .name = "train",
    .summary = "train a CNN on MNIST-style images (cnn)",
    .help = train_help,
    .run = train_main,
};
