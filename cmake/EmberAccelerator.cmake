# EmberAccelerator.cmake - how a built-in accelerator is built.
#
# Included once by the top-level CMakeLists.txt, before any part, so that no
# part depends on another part's directory having run first. It detects
# OpenCL for the whole build (an OpenCL 1.2 ICD loader and CL/cl.h):
#   EMBER_HAVE_OPENCL  ON when both are found
#   ember_opencl       INTERFACE target: the loader, -DEMBER_HAVE_OPENCL and
#                      -DCL_TARGET_OPENCL_VERSION=120 (empty when not found)
#
# ember_add_accelerator(<name>
#     SOURCES <file.c>...           the portable C and the SIMD variants
#     [PROTO <file.proto>...]       parameter and result messages
#     [OPENCL_SOURCES <file.c>...]  host side of the OpenCL implementation
#     [OPENCL_KERNELS <file.cl>...] kernels, embedded as C strings)
# builds accelerator <name> into ember_accel, the library of built-ins:
#   - SOURCES named *_sse41.c, *_avx2.c or *_avx512.c are SIMD variants: each
#     is an OBJECT library compiled with only its own EMBER_FLAGS_<ISA>
#     (cmake/EmberOptions.cmake), on x86 only; every file of the accelerator
#     sees EMBER_<NAME>_HAVE_<ISA> for each variant built, and picks one at
#     run time (never -march=native);
#   - PROTO files go through protoc-c (cmake/ProtobufC.cmake) into the
#     library ember_<name>_proto; include them as
#     "accelerators/<name>/<file>.pb-c.h";
#   - when OpenCL is found, OPENCL_SOURCES are built too and each kernel
#     <stem>.cl becomes the header <stem>_cl_source.h defining the string
#     acc_<stem>_cl_source (cmake/embed_cl.cmake);
#   - registration: accelerators/registry.c lists the built-ins, one line
#     X(<name>) each, naming the descriptor acc_<name>_descriptor; a call
#     without that line stops the configure step.
#
# ember_accelerator_sources(<target> <name> [OPTIONS <opt>...]) compiles the
# accelerator's SOURCES (SIMD variants included, OpenCL left out) into
# another target with OPTIONS added to every file: the fuzz build uses it to
# instrument them.

# ---- OpenCL, for the whole build -----------------------------------------
pkg_check_modules(OPENCL IMPORTED_TARGET GLOBAL OpenCL)
if(OPENCL_FOUND)
  include(CheckIncludeFile)
  set(CMAKE_REQUIRED_INCLUDES ${OPENCL_INCLUDE_DIRS})
  set(CMAKE_REQUIRED_DEFINITIONS -DCL_TARGET_OPENCL_VERSION=120)
  check_include_file(CL/cl.h EMBER_HAVE_CL_CL_H)
  unset(CMAKE_REQUIRED_INCLUDES)
  unset(CMAKE_REQUIRED_DEFINITIONS)
endif()
add_library(ember_opencl INTERFACE)
if(OPENCL_FOUND AND EMBER_HAVE_CL_CL_H)
  set(EMBER_HAVE_OPENCL ON)
  target_compile_definitions(ember_opencl INTERFACE EMBER_HAVE_OPENCL
                             CL_TARGET_OPENCL_VERSION=120)
  target_link_libraries(ember_opencl INTERFACE PkgConfig::OPENCL)
else()
  set(EMBER_HAVE_OPENCL OFF)
  message(STATUS "OpenCL kernels and platform skipped: OpenCL (ICD loader, "
                 "headers) missing")
endif()

# SIMD variants are built on x86 only; elsewhere the scalar code runs.
set(EMBER_ISAS)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|i.86)$")
  set(EMBER_ISAS sse41 avx2 avx512)
endif()

set(EMBER_ACCEL_DIR ${CMAKE_SOURCE_DIR}/accelerators)
set(EMBER_EMBED_CL ${CMAKE_CURRENT_LIST_DIR}/embed_cl.cmake)

function(ember_accelerator_sources target name)
  cmake_parse_arguments(A "" "" "OPTIONS" ${ARGN})
  get_property(srcs GLOBAL PROPERTY EMBER_ACC_${name}_SOURCES)
  get_property(libs GLOBAL PROPERTY EMBER_ACC_${name}_LIBS)
  string(TOUPPER ${name} NAME)
  # split off the SIMD variants; keep those this machine's compiler builds
  set(portable ${srcs})
  set(defs)
  set(variants)
  foreach(isa sse41 avx2 avx512)
    set(files ${srcs})
    list(FILTER files INCLUDE REGEX "_${isa}\\.c$")
    list(REMOVE_ITEM portable ${files})
    if(files AND isa IN_LIST EMBER_ISAS)
      string(TOUPPER ${isa} ISA)
      list(APPEND defs EMBER_${NAME}_HAVE_${ISA})
      list(APPEND variants ${isa})
      set(files_${isa} ${files})
    endif()
  endforeach()
  target_sources(${target} PRIVATE ${portable})
  set_source_files_properties(${portable} TARGET_DIRECTORY ${target}
    PROPERTIES COMPILE_DEFINITIONS "${defs}" COMPILE_OPTIONS "${A_OPTIONS}")
  foreach(isa ${variants})
    string(TOUPPER ${isa} ISA)
    set(obj ${target}_${name}_${isa})
    add_library(${obj} OBJECT ${files_${isa}})
    target_compile_options(${obj} PRIVATE ${EMBER_FLAGS_${ISA}} ${A_OPTIONS})
    target_compile_definitions(${obj} PRIVATE ${defs})
    target_include_directories(${obj} PRIVATE ${EMBER_ACCEL_DIR}
      $<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>)
    target_link_libraries(${obj} PRIVATE ${libs} ember_common)
    set_target_properties(${obj} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:${obj}>)
  endforeach()
endfunction()

function(ember_add_accelerator name)
  cmake_parse_arguments(A "" "" "SOURCES;PROTO;OPENCL_SOURCES;OPENCL_KERNELS"
                        ${ARGN})
  file(READ ${EMBER_ACCEL_DIR}/registry.c registry)
  string(FIND "${registry}" "X(${name})" listed)
  if(listed EQUAL -1)
    message(FATAL_ERROR "accelerator ${name}: add the line X(${name}) to "
                        "ACC_BUILTINS in accelerators/registry.c")
  endif()

  set(lib ember_acc_${name})
  set(libs)
  if(A_PROTO)
    ember_protobuf_c(ember_${name}_proto ${A_PROTO})
    set(libs ember_${name}_proto)
  endif()
  list(TRANSFORM A_SOURCES PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
  set_property(GLOBAL PROPERTY EMBER_ACC_${name}_SOURCES ${A_SOURCES})
  set_property(GLOBAL PROPERTY EMBER_ACC_${name}_LIBS ${libs})

  add_library(${lib} STATIC)
  target_include_directories(${lib} PUBLIC ${EMBER_ACCEL_DIR})
  target_link_libraries(${lib} PUBLIC ${libs} ember_common ember_opencl
                        Threads::Threads)
  set_target_properties(${lib} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  ember_accelerator_sources(${lib} ${name})

  if(EMBER_HAVE_OPENCL AND A_OPENCL_SOURCES)
    set(gendir ${CMAKE_CURRENT_BINARY_DIR}/gen)
    foreach(cl ${A_OPENCL_KERNELS})
      get_filename_component(abs ${cl} ABSOLUTE)
      get_filename_component(stem ${cl} NAME_WE)
      set(out ${gendir}/${stem}_cl_source.h)
      add_custom_command(OUTPUT ${out}
        COMMAND ${CMAKE_COMMAND} -DIN=${abs} -DOUT=${out}
                -DNAME=acc_${stem}_cl_source -P ${EMBER_EMBED_CL}
        DEPENDS ${abs} ${EMBER_EMBED_CL}
        COMMENT "Embedding ${stem}.cl")
      target_sources(${lib} PRIVATE ${out})
    endforeach()
    target_sources(${lib} PRIVATE ${A_OPENCL_SOURCES})
    target_include_directories(${lib} PRIVATE ${gendir})
  endif()

  # registration: the built-ins' library carries this one
  target_link_libraries(ember_accel PUBLIC ${lib})
  # and the installed libember.a bundles it (client/CMakeLists.txt)
  set_property(GLOBAL APPEND PROPERTY EMBER_BUILTIN_ARCHIVES ${lib} ${libs})
endfunction()
