/*
 * beagle_header_check.c - client/beagle/ember_beagle.h against the
 * system's BEAGLE 3.1 header (libhmsbeagle/beagle.h, from libhmsbeagle-dev)
 * at compile time: both are included; ours with EMBER_BEAGLE_CHECK_NAMES
 * names its types and constants ember_check_*, so that
 *   - every prototype of ours, written with BEAGLE's type names, must agree
 *     with BEAGLE's declaration of the same function (else "conflicting
 *     types");
 *   - every constant of ours must exist in BEAGLE's header with the same
 *     value;
 *   - every struct of ours must have BEAGLE's size, and each field BEAGLE's
 *     offset, size and type.
 * Any mismatch stops the build; the program itself only says so.
 */
#include <stddef.h>
#include <stdio.h>

#include <libhmsbeagle/beagle.h>

#define EMBER_BEAGLE_CHECK_NAMES
#include "ember_beagle.h"

/* constants: the same name in BEAGLE's header, the same value */
#define SAME_CONSTANT(name, value)                                           \
  _Static_assert((long)name == (long)(value) &&                              \
                     (long)ember_check_##name == (long)name,                 \
                 #name " differs from BEAGLE's");
EMBER_BEAGLE_RETURN_CODES(SAME_CONSTANT)
EMBER_BEAGLE_FLAGS(SAME_CONSTANT)
EMBER_BEAGLE_BENCHMARK_FLAGS(SAME_CONSTANT)
EMBER_BEAGLE_OP_CODES(SAME_CONSTANT)

/* structs: size, and each field's offset, size and type */
#define SAME_FIELD(type, field)                                              \
  _Static_assert(offsetof(CHECKED, field) == offsetof(OURS, field) &&        \
                     sizeof(((CHECKED *)0)->field) ==                        \
                         sizeof(((OURS *)0)->field) &&                       \
                     __builtin_types_compatible_p(                           \
                         __typeof__(((CHECKED *)0)->field), type),           \
                 "field " #field " differs from BEAGLE's");
/* a list's pointer: to our struct, which is checked on its own */
#define SAME_LIST_FIELD(type, field)                                         \
  _Static_assert(offsetof(CHECKED, field) == offsetof(OURS, field) &&        \
                     sizeof(((CHECKED *)0)->field) ==                        \
                         sizeof(((OURS *)0)->field),                         \
                 "field " #field " differs from BEAGLE's");

#define CHECKED BeagleInstanceDetails
#define OURS ember_check_BeagleInstanceDetails
_Static_assert(sizeof(CHECKED) == sizeof(OURS), "BeagleInstanceDetails");
EMBER_BEAGLE_INSTANCE_DETAILS_FIELDS(SAME_FIELD)
#undef CHECKED
#undef OURS

#define CHECKED BeagleResource
#define OURS ember_check_BeagleResource
_Static_assert(sizeof(CHECKED) == sizeof(OURS), "BeagleResource");
EMBER_BEAGLE_RESOURCE_FIELDS(SAME_FIELD)
#undef CHECKED
#undef OURS

#define CHECKED BeagleResourceList
#define OURS ember_check_BeagleResourceList
_Static_assert(sizeof(CHECKED) == sizeof(OURS), "BeagleResourceList");
EMBER_BEAGLE_RESOURCE_LIST_FIELDS(SAME_LIST_FIELD)
#undef CHECKED
#undef OURS

#define CHECKED BeagleBenchmarkedResource
#define OURS ember_check_BeagleBenchmarkedResource
_Static_assert(sizeof(CHECKED) == sizeof(OURS), "BeagleBenchmarkedResource");
EMBER_BEAGLE_BENCHMARKED_RESOURCE_FIELDS(SAME_FIELD)
#undef CHECKED
#undef OURS

#define CHECKED BeagleBenchmarkedResourceList
#define OURS ember_check_BeagleBenchmarkedResourceList
_Static_assert(sizeof(CHECKED) == sizeof(OURS),
               "BeagleBenchmarkedResourceList");
EMBER_BEAGLE_BENCHMARKED_RESOURCE_LIST_FIELDS(SAME_LIST_FIELD)
#undef CHECKED
#undef OURS

#define CHECKED BeagleOperation
#define OURS ember_check_BeagleOperation
_Static_assert(sizeof(CHECKED) == sizeof(OURS), "BeagleOperation");
EMBER_BEAGLE_OPERATION_FIELDS(SAME_FIELD)
#undef CHECKED
#undef OURS

#define CHECKED BeagleOperationByPartition
#define OURS ember_check_BeagleOperationByPartition
_Static_assert(sizeof(CHECKED) == sizeof(OURS), "BeagleOperationByPartition");
EMBER_BEAGLE_OPERATION_BY_PARTITION_FIELDS(SAME_FIELD)
#undef CHECKED
#undef OURS

int main(void) {
  puts("ember_beagle.h agrees with libhmsbeagle/beagle.h");
  return 0;
}
