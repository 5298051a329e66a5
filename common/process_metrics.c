/* process_metrics.c - process_* metrics from /proc/self
 * (process_metrics.h). */
#include "process_metrics.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* /proc/self/stat after the command name (which may hold spaces and
 * parentheses: the last ')' ends it). Fields from 3 (state) on, as in
 * proc(5): utime 14, stime 15, starttime 22, vsize 23, rss 24. */
static int read_stat(process_metrics *m) {
  char buf[1024];
  FILE *f = fopen("/proc/self/stat", "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  if (!p) return -1;
  unsigned long long utime, stime, start, vsize;
  long long rss;
  if (sscanf(p + 2,
             "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d "
             "%*d %*d %*d %*d %llu %llu %lld",
             &utime, &stime, &start, &vsize, &rss) != 5)
    return -1;
  long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
  if (tick <= 0 || page <= 0) return -1;
  m->cpu_seconds = (double)(utime + stime) / (double)tick;
  m->virtual_bytes = vsize;
  m->resident_bytes = rss > 0 ? (uint64_t)rss * (uint64_t)page : 0;
  /* starttime counts ticks since boot: add the boot time */
  f = fopen("/proc/stat", "r");
  if (!f) return -1;
  char line[256];
  unsigned long long btime = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "btime %llu", &btime) == 1) break;
  fclose(f);
  if (!btime) return -1;
  m->start_time_seconds = (double)btime + (double)start / (double)tick;
  return 0;
}

static int count_fds(uint64_t *out) {
  /* open() then fdopendir(), not opendir(): opendir opens through libc's
   * internal call, which ThreadSanitizer does not see, so reusing the
   * number of a socket another thread just closed looked like a race */
  int fd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return -1;
  }
  uint64_t n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  *out = n > 0 ? n - 1 : 0;  /* not the one opendir holds */
  return 0;
}

int process_metrics_read(process_metrics *out) {
  memset(out, 0, sizeof *out);
  int rc = read_stat(out);
  if (count_fds(&out->open_fds) != 0) rc = -1;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
    out->max_fds = rl.rlim_cur == RLIM_INFINITY ? 0 : (uint64_t)rl.rlim_cur;
  else
    rc = -1;
  return rc;
}

static void family(FILE *f, const char *name, const char *type,
                   const char *help) {
  fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void process_metrics_write(FILE *f) {
  process_metrics m;
  process_metrics_read(&m);
  if (m.start_time_seconds > 0) {
    family(f, "process_cpu_seconds_total", "counter",
           "Total user and system CPU time spent in seconds.");
    fprintf(f, "process_cpu_seconds_total %.2f\n", m.cpu_seconds);
    family(f, "process_resident_memory_bytes", "gauge",
           "Resident memory size in bytes.");
    fprintf(f, "process_resident_memory_bytes %llu\n",
            (unsigned long long)m.resident_bytes);
    family(f, "process_virtual_memory_bytes", "gauge",
           "Virtual memory size in bytes.");
    fprintf(f, "process_virtual_memory_bytes %llu\n",
            (unsigned long long)m.virtual_bytes);
    family(f, "process_start_time_seconds", "gauge",
           "Start time of the process since unix epoch in seconds.");
    fprintf(f, "process_start_time_seconds %.2f\n", m.start_time_seconds);
  }
  if (m.open_fds) {
    family(f, "process_open_fds", "gauge", "Number of open file descriptors.");
    fprintf(f, "process_open_fds %llu\n", (unsigned long long)m.open_fds);
  }
  if (m.max_fds) {
    family(f, "process_max_fds", "gauge",
           "Maximum number of open file descriptors.");
    fprintf(f, "process_max_fds %llu\n", (unsigned long long)m.max_fds);
  }
}
