/* cnn_cpu_check.h - the oneDNN stage (cnn_cpu.h) as a cnn_check_backend,
 * for the tests that check it against the reference (test_cnn_cpu_layers,
 * test_cnn_cpu_threads). */
#ifndef CNN_CPU_CHECK_H
#define CNN_CPU_CHECK_H

#include "cnn_cpu.h"
#include "cnn_stage_check.h"

/* cnn_cpu_check_backend - s's calls, for cnn_check_stage. */
cnn_check_backend cnn_cpu_check_backend(cnn_cpu_stage *s);

#endif
