# ember_test(NAME SOURCES src... [LIBS lib...] [TIMEOUT s] [LABELS l...] [ARGS a...])
# One executable per test, one process per test, each with a timeout.
pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)

function(ember_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} PkgConfig::CMOCKA)
  target_compile_definitions(${name} PRIVATE
    EMBER_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
    EMBER_BINARY_DIR="${CMAKE_BINARY_DIR}")
  add_test(NAME ${name} COMMAND ${name} ${T_ARGS})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT})
  if(NOT T_LABELS)
    set(T_LABELS ${EMBER_TEST_LABEL})  # set per folder: unit, conformance, ...
  endif()
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
