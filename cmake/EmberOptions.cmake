# Build options: warnings, sanitizers, fuzzers, per-ISA flags.
option(EMBER_BUILD_TESTS "Build unit, conformance and integration tests" ON)
option(EMBER_ASAN "Build with AddressSanitizer + UndefinedBehaviorSanitizer" OFF)
option(EMBER_TSAN "Build with ThreadSanitizer" OFF)
option(EMBER_FUZZ "Build libFuzzer targets (needs clang)" OFF)
option(EMBER_WERROR "Turn compiler warnings into errors (CI turns it on)" OFF)

# Where ember-nam looks for accelerator plugins unless plugin_dir says
# otherwise, and where ember-accelerator.pc tells plugins to install.
include(GNUInstallDirs)
set(EMBER_PLUGIN_DIR ${CMAKE_INSTALL_FULL_LIBDIR}/ember/accelerators CACHE PATH
    "Default plugin_dir of ember-nam")

if(EMBER_ASAN AND EMBER_TSAN)
  message(FATAL_ERROR "EMBER_ASAN and EMBER_TSAN cannot be combined")
endif()

add_compile_definitions(_GNU_SOURCE)  # memfd, SCM_RIGHTS, accept4, ucred
add_compile_options(-Wall -Wextra -Wshadow -Wstrict-prototypes
                    -Wmissing-prototypes -Wno-unused-parameter
                    -fno-strict-aliasing)
if(EMBER_WERROR)
  add_compile_options(-Werror)
endif()

if(EMBER_ASAN)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
  add_compile_definitions(EMBER_SANITIZED=1)
endif()
if(EMBER_TSAN)
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
  add_compile_definitions(EMBER_SANITIZED=1)
endif()

# Per-ISA flags for SIMD kernels: each variant lives in its own file, compiled
# with only its own flags, and is chosen at run time (never -march=native).
set(EMBER_FLAGS_SSE41  -msse4.1)
set(EMBER_FLAGS_AVX2   -mavx2)
set(EMBER_FLAGS_AVX512 -mavx512f -mavx512bw -mavx512vl)
