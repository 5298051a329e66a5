# build_example.cmake - the accelerator SDK as a plugin author uses it
# (the plugins_sdk test; test_nam_plugins runs what it builds):
#   1. install the SDK component of the build tree BUILD into OUT/sdk;
#   2. pkg-config finds ember-accelerator there, and accel.h with
#      ember_errors.h compiles on its own with only its Cflags;
#   3. accelerators/example is configured and built out of tree, with
#      PKG_CONFIG_PATH pointing at OUT/sdk: OUT/gc-build/gc.so.
# cmake -DBUILD=... -DSRC=... -DOUT=... -DLIBDIR=lib -DCC=cc -P build_example.cmake
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${OUT}/sdk ${OUT}/gc-build)
run("installing the SDK" ${CMAKE_COMMAND} --install ${BUILD} --component sdk
    --prefix ${OUT}/sdk)
foreach(f include/ember/accel.h include/ember/ember_errors.h
          ${LIBDIR}/pkgconfig/ember-accelerator.pc)
  if(NOT EXISTS ${OUT}/sdk/${f})
    message(FATAL_ERROR "the SDK lacks ${f}")
  endif()
endforeach()

set(ENV{PKG_CONFIG_PATH} ${OUT}/sdk/${LIBDIR}/pkgconfig)
run("pkg-config" pkg-config --cflags ember-accelerator)
string(STRIP "${out}" cflags)
separate_arguments(cflags UNIX_COMMAND "${cflags}")
file(WRITE ${OUT}/standalone.c
  "#include <ember/accel.h>\n#include <ember/ember_errors.h>\n"
  "int main(void) { return ACC_ABI_VERSION == 0 || EMBER_EPARAM == 0; }\n")
run("compiling accel.h alone" ${CC} -std=c11 -Wall -Werror ${cflags}
    -c ${OUT}/standalone.c -o ${OUT}/standalone.o)

run("configuring the example" ${CMAKE_COMMAND} -S ${SRC}/accelerators/example
    -B ${OUT}/gc-build -DCMAKE_BUILD_TYPE=RelWithDebInfo
    -DCMAKE_C_COMPILER=${CC} -DCMAKE_C_FLAGS=-Werror)
run("building the example" ${CMAKE_COMMAND} --build ${OUT}/gc-build)
if(NOT EXISTS ${OUT}/gc-build/gc.so)
  message(FATAL_ERROR "the example built no gc.so")
endif()
message(STATUS "built ${OUT}/gc-build/gc.so against the SDK in ${OUT}/sdk")
