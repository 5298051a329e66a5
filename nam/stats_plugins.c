/* stats_plugins.c - the plugin loader's metrics (see stats.h). */
#include "stats.h"

void nam_stats_render_plugins(FILE *f, const nam_plugins *p) {
  nam_stats_family(f, "plugins_loaded", "gauge",
         "Accelerator plugins loaded from plugin_dir at start-up.");
  fprintf(f, "ember_nam_plugins_loaded %zu\n", p->count);
  nam_stats_family(f, "plugins_refused_total", "counter",
         "Plugin files (or plugin_dir itself) refused at start-up, by "
         "reason: unsafe, dlopen, symbol, abi, incomplete, clash.");
  for (int r = 0; r < ACC_PLUGIN_N_REFUSALS; r++) {
    fputs("ember_nam_plugins_refused_total{", f);
    nam_stats_put_label(f, "reason",
                        acc_plugin_refusal_name((enum acc_plugin_refusal)r));
    fprintf(f, "} %llu\n", (unsigned long long)p->refused[r]);
  }
}
