/*
 * plf_vs_beagle.c - ember's plf accelerator against BEAGLE (Debian's
 * libhmsbeagle, its CPU implementations), with a STREAM triad (a[i] = b[i]
 * + q c[i], double, one thread, 3 x 256 MiB) measured in the same run to
 * compare bandwidths with:
 *
 *   (1) plf_kernel_bench.c: the BEAGLE multi-FPGA paper's single-node
 *       kernel (4 states, 1 category, one partials update, scale
 *       accumulation, root lnL) at 1,048,576 and 8,192,000 sites, double
 *       and single precision, one thread;
 *   (2) plf_traversal.c: full traversals under GTR+G4, the same plf_plan
 *       ops on BEAGLE and on ember's executor: (2a) a simulated 1,024-taxon
 *       Yule-shaped tree with 100,000 patterns, (2b) the largest DNA
 *       alignment of tests/data/plf (nucleic.phy, 54 x 886) with its tree
 *       and the GTRG model of its reference rows; double and single
 *       precision, 1 and 2 threads.
 *
 *   plf_vs_beagle [--kernel] [--traversal] [--simulated] [--real]
 *                 [--sites N]... [--taxa N] [--patterns N] [--vectors N]
 *                 [--threads 1|2] [--reps N] [--double-only] [--seed N]
 *                 [--alignment FILE --tree FILE [--model SPEC]
 *                  [--reference LNL]]
 *
 * --kernel and --traversal pick the parts (default both), --simulated and
 * --real the traversals (default both); a bare number is a --sites.
 * Prints figures and asserts nothing (a benchmark, not a test; not run by
 * ctest). BEAGLE is a test dependency only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plf_bench_common.h"

#define DATA EMBER_SOURCE_DIR "/tests/data/plf/"
/* reference_lnl.tsv's GTRG */
#define GTRG "GTR{1.2,3.9,0.8,1.1,4.5}+F{0.3,0.2,0.25,0.25}+G4{0.5}"

static void usage(void) {
  fprintf(stderr,
          "usage: plf_vs_beagle [--kernel] [--traversal] [--simulated] "
          "[--real] [--sites N]...\n"
          "         [--taxa N] [--patterns N] [--vectors N] [--threads 1|2] "
          "[--reps N]\n"
          "         [--double-only] [--seed N] [--alignment FILE --tree FILE "
          "[--model SPEC]\n"
          "         [--reference LNL]]\n");
}

int main(int argc, char **argv) {
  int sizes[16], nsizes = 0, kernel = 0, traversal = 0;
  pb_traversal_opts o = {.taxa = 1024, .patterns = 100000,
                         .alignment = DATA "nucleic.phy",
                         .tree = DATA "nucleic.tree", .model = GTRG,
                         .reference = -5525.832171, .max_threads = 2,
                         .reps = 5, .single = 1, .seed = 42};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int takes = 1;
    if (strcmp(a, "--kernel") == 0) kernel = 1, takes = 0;
    else if (strcmp(a, "--traversal") == 0) traversal = 1, takes = 0;
    else if (strcmp(a, "--simulated") == 0) o.simulated = 1, takes = 0;
    else if (strcmp(a, "--real") == 0) o.real = 1, takes = 0;
    else if (strcmp(a, "--double-only") == 0) o.single = 0, takes = 0;
    else if (a[0] >= '0' && a[0] <= '9' && nsizes < 16)
      sizes[nsizes++] = atoi(a), takes = 0;
    else if (!v) {
      usage();
      return 2;
    } else if (strcmp(a, "--sites") == 0 && nsizes < 16)
      sizes[nsizes++] = atoi(v);
    else if (strcmp(a, "--taxa") == 0) o.taxa = atoi(v);
    else if (strcmp(a, "--patterns") == 0) o.patterns = atoi(v);
    else if (strcmp(a, "--vectors") == 0) o.vectors = atoi(v);
    else if (strcmp(a, "--threads") == 0) o.max_threads = atoi(v);
    else if (strcmp(a, "--reps") == 0) o.reps = atoi(v);
    else if (strcmp(a, "--seed") == 0) o.seed = strtoull(v, NULL, 10);
    else if (strcmp(a, "--alignment") == 0) o.alignment = v, o.reference = 0;
    else if (strcmp(a, "--tree") == 0) o.tree = v;
    else if (strcmp(a, "--model") == 0) o.model = v;
    else if (strcmp(a, "--reference") == 0) o.reference = atof(v);
    else {
      usage();
      return 2;
    }
    i += takes;
  }
  if (o.taxa < 8 || o.patterns < 1 || o.reps < 1 || o.max_threads < 1 ||
      o.max_threads > 2 || o.vectors < 0) {
    usage();
    return 2;
  }
  for (int s = 0; s < nsizes; s++)
    if (sizes[s] < 1) {
      usage();
      return 2;
    }
  if (!kernel && !traversal) kernel = traversal = 1;
  if (!o.simulated && !o.real) o.simulated = o.real = 1;
  if (!nsizes) {
    sizes[nsizes++] = 1048576;
    sizes[nsizes++] = 8192000;
  }
  double triad = pb_triad_gbs((size_t)1 << 25, 10); /* 3 x 256 MiB */
  printf("plf_vs_beagle: STREAM triad (1 thread, 3 x 256 MiB): %.2f GB/s\n\n",
         triad);
  if (kernel && pb_kernel_bench(sizes, nsizes, triad)) return 1;
  if (traversal && pb_traversal_bench(&o, triad)) return 1;
  return 0;
}
