/* plf_probe.h - the "plf" accelerator's calibration tasks (acc_descriptor's
 * make_probe). */
#ifndef EMBER_PLF_PROBE_H
#define EMBER_PLF_PROBE_H

#include "accel.h"

int plf_make_probe(unsigned size, acc_probe *probe);

#endif
