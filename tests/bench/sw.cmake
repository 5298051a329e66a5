# sw kernel benchmark: prints GCUPS per kernel variant (asserts nothing).
# Uses swt_fasta from tests/conformance (FASTA reader, seqset builder).
add_executable(sw_kernels ${CMAKE_CURRENT_LIST_DIR}/sw_kernels.c)
pkg_check_modules(PARASAIL_BENCH REQUIRED IMPORTED_TARGET parasail-1)
target_link_libraries(sw_kernels PRIVATE swt_fasta ember_accel
                      Threads::Threads PkgConfig::PARASAIL_BENCH ssw)
target_compile_definitions(sw_kernels PRIVATE
                           EMBER_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
