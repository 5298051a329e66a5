# sw kernel benchmark: prints GCUPS per kernel variant (asserts nothing).
# Uses swt_fasta from tests/conformance (FASTA reader, seqset builder).
add_executable(sw_kernels ${CMAKE_CURRENT_LIST_DIR}/sw_kernels.c)
target_link_libraries(sw_kernels PRIVATE swt_fasta ember_accel
                      Threads::Threads)
target_compile_definitions(sw_kernels PRIVATE
                           EMBER_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
