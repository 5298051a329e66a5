/*
 * test_beagle_mrbayes.c - Debian's MrBayes (mb, unchanged) on
 * libember-beagle: each analysis runs with the system's libhmsbeagle, then
 * through `ember beagle --embedded -- mb`, then through
 * `ember beagle --nam unix:SOCK -- mb` against a real ember-nam (harness.c)
 * on its cpu platform and, for the first analysis, on its emulated FPGA
 * board (BEAGLE resources "ember cpu" and "ember fpga-emu", chosen with
 * MrBayes's beagleresource; the embedded runs pick theirs with
 * beagleGetBenchmarkedResourceList, MrBayes's default);
 * the log-likelihoods mb prints (the initial ones, every chain line, the
 * best state) must be the same digit for digit, and its .p and .t files
 * byte for byte (but for their "[ID: N]" lines, which mb draws from the
 * clock).
 *
 *   test_beagle_mrbayes EMBER_CLI DATA_DIR SYSTEM_LIBHMSBEAGLE
 *
 * Analyses (fixed seed and swapseed, two chains, one run, no diagnostics):
 *   primates.nex, GTR+G, MrBayes's default dynamic scaling (RAW scalers,
 *     fixed scaling through destinationScaleRead), 2000 generations;
 *   the same with beaglescaling=always (log scalers, accumulated and
 *     removed factors);
 *   primates.nex in two partitions (codon positions 1+2 and 3), unlinked
 *     models: on fpga-emu MrBayes keeps one instance for both (pattern
 *     partitions, the ByPartition calls, several models and rate sets);
 *   replicase.nex as codons with omegavar=ny98: three omega classes, so
 *     BEAGLE's root and edge sums over three subsets (count 3).
 * Exits 77 (skipped) when mb or the system's libhmsbeagle is missing.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static const char *cli, *data, *sys_beagle;
static char work[256];
static int failures;

typedef struct analysis {
  const char *name, *file, *commands;
} analysis;

static const analysis analyses[] = {
    {"primates, dynamic scaling", "primates.nex",
     "  lset nst=6 rates=gamma;\n"
     "  mcmc ngen=2000 samplefreq=100 printfreq=100 nchains=2 nruns=1 "
     "diagnfreq=100000;\n"},
    {"primates, always scaling", "primates.nex",
     "  set beaglescaling=always;\n"
     "  lset nst=6 rates=gamma;\n"
     "  mcmc ngen=2000 samplefreq=100 printfreq=100 nchains=2 nruns=1 "
     "diagnfreq=100000;\n"},
    {"primates, two partitions", "primates.nex",
     "  charset pos12 = 1-.\\3 2-.\\3;\n"
     "  charset pos3 = 3-.\\3;\n"
     "  partition bycodon = 2: pos12, pos3;\n"
     "  set partition=bycodon;\n"
     "  lset applyto=(all) nst=6 rates=gamma;\n"
     "  unlink shape=(all) revmat=(all) statefreq=(all);\n"
     "  prset applyto=(all) ratepr=variable;\n"
     "  mcmc ngen=1000 samplefreq=100 printfreq=100 nchains=2 nruns=1 "
     "diagnfreq=100000;\n"},
    {"replicase, codons, omegavar=ny98", "replicase.nex",
     "  lset nucmodel=codon omegavar=ny98;\n"
     "  mcmc ngen=100 samplefreq=20 printfreq=20 nchains=2 nruns=1 "
     "diagnfreq=100000;\n"},
};
#define N_ANALYSES (sizeof analyses / sizeof *analyses)

static int run_sh(const char *cmd) {
  int st = system(cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
    free(s);
    s = NULL;
  }
  if (s) s[n] = '\0';
  fclose(f);
  return s;
}

/* The log-likelihood lines of mb's output, the time column of the chain
 * lines dropped; *n gets how many. */
static char *lnl_lines(const char *out, int *n) {
  size_t cap = strlen(out) + 1, len = 0;
  char *r = malloc(cap);
  *n = 0;
  if (!r) return NULL;
  r[0] = '\0';
  for (const char *p = out; *p;) {
    const char *e = strchr(p, '\n');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    char line[1024];
    snprintf(line, sizeof line, "%.*s", (int)(l < 1000 ? l : 1000), p);
    const char *t = line + strspn(line, " \t");
    int chain_line = (strstr(t, " -- [") || strstr(t, " -- (")) &&
                     t[0] >= '0' && t[0] <= '9';
    int initial = strncmp(t, "Chain ", 6) == 0 && strstr(t, " -- ");
    int best = strstr(t, "Log likelihood of best state") != NULL;
    if (chain_line) {   /* "N -- [a] (b) -- 0:00:01": drop the time */
      char *last = strrchr(line, '-');
      if (last && last > line && last[-1] == '-' && strchr(last, ':'))
        last[-2] = '\0';
    }
    if (chain_line || initial || best) {
      len += (size_t)snprintf(r + len, cap - len, "%s\n", t);
      (*n)++;
    }
    p = e ? e + 1 : p + l;
  }
  return r;
}

/* Run one analysis with a prefix command ("" for the system's BEAGLE);
 * mb's output goes to OUT.txt and its .p and .t files are kept as OUT.p,
 * OUT.t. Returns mb's status. */
static int run_mb(const analysis *a, const char *prefix, const char *out) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "cd %s && rm -f %s.p %s.t %s.mcmc %s.ckp && %s mb batch.nex "
           ">%s.txt 2>&1 && cp %s.p %s.p && cp %s.t %s.t",
           work, a->file, a->file, a->file, a->file, prefix, out, a->file,
           out, a->file, out);
  return run_sh(cmd);
}

/* The same bytes but for the "[ID: N]" lines (mb draws the run's ID from
 * the clock, not the seed). */
static int same_files(const char *x, const char *y) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "cd %s && grep -v '^\\[ID: ' %s >%s.noid; "
           "grep -v '^\\[ID: ' %s >%s.noid; cmp -s %s.noid %s.noid",
           work, x, x, y, y, x, y);
  return run_sh(cmd) == 0;
}

static void fail(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "FAIL: ");
  fprintf(stderr, fmt, a, b);
  fputc('\n', stderr);
  failures++;
}

/* Compare OUT's log-likelihoods and files with the reference's. */
static void compare(const analysis *a, const char *ref, const char *out,
                    const char *what) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s.txt", work, ref);
  char *r = slurp(path);
  snprintf(path, sizeof path, "%s/%s.txt", work, out);
  char *o = slurp(path);
  if (!r || !o) {
    fail("%s: no output of %s", a->name, what);
    free(r);
    free(o);
    return;
  }
  int nr, no;
  char *lr = lnl_lines(r, &nr), *lo = lnl_lines(o, &no);
  if (!strstr(o, "Rsrc Name : ember "))
    fail("%s, %s: mb did not run on libember-beagle", a->name, what);
  if (nr < 5)
    fail("%s: only a few log-likelihood lines in %s", a->name, ref);
  else if (strcmp(lr, lo) != 0) {
    fail("%s, %s: the log-likelihoods differ from BEAGLE's:", a->name, what);
    fprintf(stderr, "--- BEAGLE\n%s--- %s\n%s", lr, what, lo);
  }
  char x[64], y[64];
  snprintf(x, sizeof x, "%s.p", ref);
  snprintf(y, sizeof y, "%s.p", out);
  if (!same_files(x, y)) fail("%s, %s: the .p files differ", a->name, what);
  snprintf(x, sizeof x, "%s.t", ref);
  snprintf(y, sizeof y, "%s.t", out);
  if (!same_files(x, y)) fail("%s, %s: the .t files differ", a->name, what);
  snprintf(x, sizeof x, "%s.p", ref);
  snprintf(y, sizeof y, "%s.p", out);
  int same_p = same_files(x, y);
  printf("%-34s %-9s %3d log-likelihood lines %s, .p and .t %s\n", a->name,
         what, no, strcmp(lr, lo) == 0 ? "identical" : "DIFFERENT",
         same_p && same_files(x, y) ? "identical" : "differ");
  free(lr);
  free(lo);
  free(r);
  free(o);
}

/* batch.nex for analysis a, with more `set` options (" name=value"). */
static int write_batch(const analysis *a, const char *set_extra) {
  char batch[1024], bpath[512];
  snprintf(batch, sizeof batch,
           "begin mrbayes;\n"
           "  set autoclose=yes nowarn=yes seed=12345 swapseed=54321 "
           "usebeagle=yes beagleprecision=double%s;\n"
           "  execute %s;\n%s  quit;\nend;\n",
           set_extra, a->file, a->commands);
  snprintf(bpath, sizeof bpath, "%s/batch.nex", work);
  FILE *f = fopen(bpath, "w");
  if (!f || fputs(batch, f) < 0 || fclose(f) != 0) {
    if (f) fclose(f);
    fail("%s: cannot write %s", a->name, bpath);
    return -1;
  }
  return 0;
}

/* The BEAGLE resource number of the NAM's fpga-emu kind: libember-beagle
 * lists the kinds it has in the order cpu, opencl, fpga-emu. */
static int fpga_resource(const char *address) {
  static const char *const order[] = {"cpu", "opencl", "fpga-emu"};
  int have[3] = {0, 0, 0};
  ember_client *c = NULL;
  ember_listing *l = NULL;
  if (ember_connect(address, NULL, &c) == 0 &&
      ember_list_accelerators(c, &l) == 0)
    for (size_t i = 0; i < ember_listing_platforms(l); i++)
      for (int k = 0; k < 3; k++)
        if (strcmp(ember_listing_platform(l, i)->kind, order[k]) == 0)
          have[k] = 1;
  ember_listing_free(l);
  ember_close(c);
  return have[2] ? have[0] + have[1] : -1;
}

static int have_mb(void) {
  return run_sh("command -v mb >/dev/null 2>&1") == 0;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s EMBER_CLI DATA_DIR SYSTEM_LIBHMSBEAGLE\n",
            argv[0]);
    return 2;
  }
  cli = argv[1];
  data = argv[2];
  sys_beagle = argv[3];
  struct stat st;
  if (!have_mb() || stat(sys_beagle, &st) != 0) {
    printf("SKIP: mb (mrbayes) or %s missing\n", sys_beagle);
    return 77;
  }
  /* the reference run must see the system's library, and ours only what
   * `ember beagle` sets */
  unsetenv("LD_LIBRARY_PATH");
  unsetenv("EMBER_NAM");
  snprintf(work, sizeof work, "/tmp/ember-mb.XXXXXX");
  if (!mkdtemp(work)) {
    perror("mkdtemp");
    return 1;
  }
  nam_proc nam;
  /* one emulated FPGA board with a plf bitstream, on a virtual clock */
  static const char *const sets[] = {"fpga-emu.boards=1",
                                     "fpga-emu.bitstreams=plf",
                                     "fpga-emu.clock=virtual", NULL};
  int have_nam = nam_start(&nam, sets) == 0;
  if (!have_nam) fail("%s%s: ember-nam did not start", "", "");

  for (size_t i = 0; i < N_ANALYSES; i++) {
    const analysis *a = &analyses[i];
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp %s/%s %s/", data, a->file, work);
    if (run_sh(cmd) != 0) {
      fail("%s: cannot copy %s", a->name, a->file);
      continue;
    }
    if (write_batch(a, "") != 0) continue;
    if (run_mb(a, "", "sys") != 0) {
      fail("%s: mb with the system's BEAGLE failed (see %s/sys.txt)",
           a->name, work);
      continue;
    }
    char prefix[1024];
    snprintf(prefix, sizeof prefix, "%s beagle --embedded --", cli);
    if (run_mb(a, prefix, "embedded") != 0)
      fail("%s: `ember beagle --embedded -- mb` failed (see %s/embedded.txt)",
           a->name, work);
    else
      compare(a, "sys", "embedded", "embedded");
    if (!have_nam) continue;
    /* on the NAM's cpu (resource 0; MrBayes's benchmark would pick the
     * emulated board, faster on its virtual clock) */
    if (write_batch(a, " beagleresource=0") != 0) continue;
    snprintf(prefix, sizeof prefix, "%s beagle --nam %s --", cli,
             nam.unix_addr);
    if (run_mb(a, prefix, "nam") != 0)
      fail("%s: `ember beagle --nam -- mb` failed (see %s/nam.txt)", a->name,
           work);
    else
      compare(a, "sys", "nam", "ember-nam");
    if (i != 0 && i != 2) continue;
    /* the same on the NAM's fpga-emu board; with two partitions MrBayes
     * keeps one instance for both there (its multi-partition mode: the
     * ByPartition calls), as it does on no CPU resource */
    int fpga = fpga_resource(nam.unix_addr);
    char extra[64];
    snprintf(extra, sizeof extra, " beagleresource=%d", fpga);
    if (fpga < 0) {
      fail("%s%s: the NAM has no fpga-emu platform", "", "");
    } else if (write_batch(a, extra) != 0) {
      continue;
    } else if (run_mb(a, prefix, "fpga") != 0) {
      fail("%s: `ember beagle --nam -- mb` on fpga-emu failed (see "
           "%s/fpga.txt)", a->name, work);
    } else {
      compare(a, "sys", "fpga", "fpga-emu");
      char path[512];
      snprintf(path, sizeof path, "%s/fpga.txt", work);
      char *o = slurp(path);
      if (!o || !strstr(o, "Rsrc Name : ember fpga-emu"))
        fail("%s%s: the fpga-emu run was not on ember fpga-emu", "", "");
      if (i == 2 && (!o || !strstr(o, " for 2 divisions:")))
        fail("%s%s: MrBayes did not use one instance for both partitions",
             "", "");
      free(o);
    }
  }
  if (have_nam) {
    /* the NAM ran them: its plf tasks, on its cpu platform */
    ember_client *c = NULL;
    ember_listing *l = NULL;
    uint64_t done = 0, on_fpga = 0, on_cpu = 0;
    if (ember_connect(nam.unix_addr, NULL, &c) == 0 &&
        ember_list_accelerators(c, &l) == 0) {
      for (size_t i = 0; i < ember_listing_platforms(l); i++) {
        const ember_platform_info *p = ember_listing_platform(l, i);
        for (size_t k = 0; k < p->n_pairs; k++)
          if (strcmp(p->pairs[k]->accelerator, "plf") == 0) {
            done += p->pairs[k]->completed;
            if (strcmp(p->kind, "fpga-emu") == 0)
              on_fpga += p->pairs[k]->completed;
            if (strcmp(p->kind, "cpu") == 0)
              on_cpu += p->pairs[k]->completed;
          }
      }
    }
    ember_listing_free(l);
    ember_close(c);
    printf("ember-nam completed %llu plf tasks: %llu on cpu, %llu on "
           "fpga-emu\n", (unsigned long long)done,
           (unsigned long long)on_cpu, (unsigned long long)on_fpga);
    if (on_cpu < 100) fail("%s%s: cpu ran (almost) no plf tasks", "", "");
    if (on_fpga < 100) fail("%s%s: fpga-emu ran (almost) no plf tasks", "", "");
    nam_cleanup(&nam);
  }
  if (failures == 0) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", work);
    run_sh(cmd);
  } else {
    fprintf(stderr, "kept %s\n", work);
  }
  printf("%d failures\n", failures);
  return failures ? 1 : 0;
}
