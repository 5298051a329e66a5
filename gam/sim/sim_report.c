/*
 * sim_report.c - the simulator's table, CSV and gnuplot figure
 * (sim_report.h).
 */
#include "sim_report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

double sim_row_throughput(const sim_row *r, int kind) {
  uint64_t ms = r->res[kind].makespan_ns;
  return ms ? (double)r->optimum_ns / (double)ms : 0;
}

double sim_row_utilization(const sim_row *r, const sim_model *m, int kind) {
  uint64_t ms = r->res[kind].makespan_ns;
  return ms ? (double)r->res[kind].busy_ns / ((double)m->nodes * (double)ms)
            : 0;
}

/* "0", "1/6", ..., "1" */
static void share_label(const sim_row *r, char *buf, size_t len) {
  if (r->mix == 0) snprintf(buf, len, "0");
  else if (r->mix == SIM_MIXES - 1) snprintf(buf, len, "1");
  else snprintf(buf, len, "%u/%u", r->mix, SIM_MIXES - 1);
}

static bool any_ran(const sim_row *rows, size_t n, int kind) {
  for (size_t i = 0; i < n; i++)
    if (rows[i].ran[kind]) return true;
  return false;
}

static double mean(const sim_row *rows, size_t n, const sim_model *m,
                   int kind, bool util) {
  double sum = 0;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (!rows[i].ran[kind]) continue;
    sum += util ? sim_row_utilization(&rows[i], m, kind)
                : sim_row_throughput(&rows[i], kind);
    k++;
  }
  return k ? sum / k : 0;
}

void sim_report_table(FILE *out, const sim_model *m, const sim_row *rows,
                      size_t n) {
  fprintf(out,
          "ember-gam-sim: %u nodes x 1 FPGA, %u slots, %u apps per mix, "
          "reprogram %llu-%llu ms, heartbeat %llu ms, sticky bound %llu ms, "
          "delay_max_skips %u, seed %llu\n\n",
          m->nodes, m->slots, m->apps,
          (unsigned long long)(m->reprogram_min_ns / SIM_MS),
          (unsigned long long)(m->reprogram_max_ns / SIM_MS),
          (unsigned long long)(m->heartbeat_ns / SIM_MS),
          (unsigned long long)(m->reprogram_bound_ns / SIM_MS),
          m->delay_max_skips, (unsigned long long)m->seed);
  fprintf(out, "%-4s %-8s %9s  %-26s %-26s %s\n", "", "", "",
          "throughput / optimum", "accelerator utilization", "reprograms");
  fprintf(out, "%-4s %-8s %9s ", "mix", "LR share", "optimum");
  for (int pass = 0; pass < 3; pass++) {
    for (int k = 0; k < SIM_POLICIES; k++)
      fprintf(out, " %7s", gam_policy_name((gam_policy_kind)k));
    fprintf(out, pass < 2 ? "  " : "\n");
  }
  for (size_t i = 0; i < n; i++) {
    const sim_row *r = &rows[i];
    char share[16];
    share_label(r, share, sizeof share);
    fprintf(out, "%-4u %-8s %8.1fs ", r->mix, share,
            (double)r->optimum_ns / 1e9);
    for (int pass = 0; pass < 3; pass++) {
      for (int k = 0; k < SIM_POLICIES; k++) {
        if (!r->ran[k]) fprintf(out, " %7s", "-");
        else if (pass == 0) fprintf(out, " %7.3f", sim_row_throughput(r, k));
        else if (pass == 1)
          fprintf(out, " %7.3f", sim_row_utilization(r, m, k));
        else fprintf(out, " %7u", r->res[k].reprograms);
      }
      fprintf(out, pass < 2 ? "  " : "\n");
    }
  }
  fprintf(out, "%-4s %-8s %9s ", "avg", "", "");
  for (int pass = 0; pass < 2; pass++) {
    for (int k = 0; k < SIM_POLICIES; k++) {
      if (any_ran(rows, n, k))
        fprintf(out, " %7.3f", mean(rows, n, m, k, pass == 1));
      else fprintf(out, " %7s", "-");
    }
    fprintf(out, "  ");
  }
  fprintf(out, "\n\naway from the optimum on average:");
  for (int k = 0; k < SIM_POLICIES; k++)
    if (any_ran(rows, n, k))
      fprintf(out, " %s %.1f%%", gam_policy_name((gam_policy_kind)k),
              100.0 * (1.0 - mean(rows, n, m, k, false)));
  fprintf(out, "\n");
}

int sim_report_csv(const char *path, const sim_model *m, const sim_row *rows,
                   size_t n) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "ember-gam-sim: %s: %s\n", path, strerror(errno));
    return -1;
  }
  fprintf(f, "mix,lr_share,policy,optimum_s,makespan_s,throughput_vs_optimum,"
             "utilization,reprograms,reprogram_s,mean_wait_s\n");
  for (size_t i = 0; i < n; i++)
    for (int k = 0; k < SIM_POLICIES; k++) {
      const sim_row *r = &rows[i];
      if (!r->ran[k]) continue;
      fprintf(f, "%u,%.4f,%s,%.3f,%.3f,%.4f,%.4f,%u,%.3f,%.3f\n", r->mix,
              r->lr_share, gam_policy_name((gam_policy_kind)k),
              (double)r->optimum_ns / 1e9,
              (double)r->res[k].makespan_ns / 1e9, sim_row_throughput(r, k),
              sim_row_utilization(r, m, k), r->res[k].reprograms,
              (double)r->res[k].reprogram_ns / 1e9, r->res[k].mean_wait_s);
    }
  if (fclose(f) != 0) {
    fprintf(stderr, "ember-gam-sim: %s: %s\n", path, strerror(errno));
    return -1;
  }
  return 0;
}

/* PATH with its .png (if any) replaced by ext. */
static char *beside(const char *png, const char *ext) {
  size_t len = strlen(png);
  if (len > 4 && strcmp(png + len - 4, ".png") == 0) len -= 4;
  char *s = malloc(len + strlen(ext) + 1);
  if (!s) return NULL;
  memcpy(s, png, len);
  strcpy(s + len, ext);
  return s;
}

static int write_data(const char *path, const sim_model *m,
                      const sim_row *rows, size_t n) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "# share");
  for (int k = 0; k < SIM_POLICIES; k++)
    fprintf(f, " thr_%s", gam_policy_name((gam_policy_kind)k));
  for (int k = 0; k < SIM_POLICIES; k++)
    fprintf(f, " util_%s", gam_policy_name((gam_policy_kind)k));
  fprintf(f, "\n");
  for (size_t i = 0; i <= n; i++) {
    char share[16];
    if (i < n) share_label(&rows[i], share, sizeof share);
    else snprintf(share, sizeof share, "avg");
    fprintf(f, "\"%s\"", share);
    for (int pass = 0; pass < 2; pass++)
      for (int k = 0; k < SIM_POLICIES; k++) {
        double v = i < n ? (pass ? sim_row_utilization(&rows[i], m, k)
                                 : sim_row_throughput(&rows[i], k))
                         : mean(rows, n, m, k, pass == 1);
        fprintf(f, " %.4f", v);
      }
    fprintf(f, "\n");
  }
  return fclose(f);
}

/* One panel: a clustered histogram of the policies that ran; first_col is
 * the data column of the first policy. */
static void panel(FILE *f, const char *title, const char *ylabel,
                  const char *dat, int first_col, const sim_row *rows,
                  size_t n) {
  static const char *const colours[SIM_POLICIES] = {"#1b9e77", "#d95f02",
                                                    "#7570b3"};
  fprintf(f, "set title '%s'\nset ylabel '%s'\n", title, ylabel);
  fprintf(f, "plot ");
  bool first = true;
  for (int k = 0; k < SIM_POLICIES; k++) {
    if (!any_ran(rows, n, k)) continue;
    fprintf(f, "%s'%s' using %d:xtic(1) title '%s' lc rgb '%s'",
            first ? "" : ", ", dat, first_col + k,
            gam_policy_name((gam_policy_kind)k), colours[k]);
    first = false;
  }
  fprintf(f, "\n");
}

int sim_report_plot(const char *png, const sim_model *m, const sim_row *rows,
                    size_t n) {
  if (strchr(png, '\'')) { /* it goes into a gnuplot script and a shell */
    fprintf(stderr, "ember-gam-sim: %s: no quote in the plot's name\n", png);
    return -1;
  }
  char *dat = beside(png, ".dat"), *gp = beside(png, ".gp");
  int rc = -1;
  if (!dat || !gp) goto out;
  if (write_data(dat, m, rows, n) != 0) {
    fprintf(stderr, "ember-gam-sim: %s: %s\n", dat, strerror(errno));
    goto out;
  }
  FILE *f = fopen(gp, "w");
  if (!f) {
    fprintf(stderr, "ember-gam-sim: %s: %s\n", gp, strerror(errno));
    goto out;
  }
  /* pngcairo draws smoother text; plain png (libgd) is the fallback */
  int cairo = system("gnuplot -e 'set terminal pngcairo' "
                     "</dev/null >/dev/null 2>&1") == 0;
  fprintf(f, "# generated by ember-gam-sim, do not edit\n");
  fprintf(f, "set terminal %s size 1200,480\n",
          cairo ? "pngcairo font ',10'" : "png");
  fprintf(f, "set output '%s'\n", png);
  fprintf(f, "set multiplot layout 1,2 title 'Scheduling %u apps on %u "
             "FPGA nodes (reprogram %llu-%llu ms)'\n",
          m->apps, m->nodes,
          (unsigned long long)(m->reprogram_min_ns / SIM_MS),
          (unsigned long long)(m->reprogram_max_ns / SIM_MS));
  fprintf(f, "set style data histograms\nset style histogram clustered "
             "gap 1\nset style fill solid 0.85 border -1\nset boxwidth 0.9\n"
             "set yrange [0:1.15]\nset ytics 0.2\nset grid ytics\n"
             "set key top center horizontal\n"
             "set xlabel 'share of LR apps in the mix'\n");
  panel(f, "(a) system throughput / offline optimum", "normalised throughput",
        dat, 2, rows, n);
  panel(f, "(b) accelerator utilization", "FPGA time computing / total",
        dat, 2 + SIM_POLICIES, rows, n);
  fprintf(f, "unset multiplot\n");
  if (fclose(f) != 0) goto out;
  size_t len = strlen(gp) + 64;
  char *cmd = malloc(len);
  if (!cmd) goto out;
  snprintf(cmd, len, "gnuplot '%s'", gp);
  int st = system(cmd);
  free(cmd);
  if (st != 0) {
    fprintf(stderr, "ember-gam-sim: gnuplot %s failed (status %d)\n", gp, st);
    goto out;
  }
  rc = 0;
out:
  free(dat);
  free(gp);
  return rc;
}
