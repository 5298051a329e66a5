# sw kernel benchmark: prints GCUPS per kernel variant (asserts nothing).
# Uses swt_fasta from tests/conformance (FASTA reader, seqset builder).
add_executable(sw_kernels ${CMAKE_CURRENT_LIST_DIR}/sw_kernels.c)
pkg_check_modules(PARASAIL_BENCH REQUIRED IMPORTED_TARGET parasail-1)
target_link_libraries(sw_kernels PRIVATE swt_fasta ember_accel
                      Threads::Threads PkgConfig::PARASAIL_BENCH ssw)
target_compile_definitions(sw_kernels PRIVATE
                           EMBER_SOURCE_DIR="${CMAKE_SOURCE_DIR}")

# OpenCL sw kernels: GCUPS per OpenCL device next to the CPU kernels.
if(EMBER_HAVE_OPENCL)
  add_executable(sw_opencl_bench ${CMAKE_CURRENT_LIST_DIR}/sw_opencl.c)
  target_link_libraries(sw_opencl_bench PRIVATE swt_fasta ember_accel)
  target_compile_definitions(sw_opencl_bench PRIVATE
                             EMBER_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
endif()
