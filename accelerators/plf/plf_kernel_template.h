/*
 * plf_kernel_template.h - how the plf kernel bodies are written once and
 * instantiated per precision: a body header is included once with
 *   PLF_REAL double, PLF_SFX d, PLF_LOG log
 * and once with
 *   PLF_REAL float,  PLF_SFX f, PLF_LOG logf
 * and names its functions and types through PLF_T(name), which is name_d or
 * name_f (plf_update_d, plf_child_f, ...).
 */
#ifndef EMBER_PLF_KERNEL_TEMPLATE_H
#define EMBER_PLF_KERNEL_TEMPLATE_H

#define PLF_CAT2_(a, b) a##_##b
#define PLF_CAT2(a, b) PLF_CAT2_(a, b)
#define PLF_T(name) PLF_CAT2(name, PLF_SFX)

#endif
