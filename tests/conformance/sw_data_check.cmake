# Regenerate the sw pair files into OUT with GEN and compare them with the
# committed ones in DATA (cmake -P; run by the sw_data_reproducible test).
file(MAKE_DIRECTORY ${OUT})
execute_process(COMMAND ${GEN} ${DATA}/emboss_test_hum1.fa ${OUT}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "sw-make-pairs failed: ${rc}")
endif()
foreach(f dna_queries.fa dna_refs.fa dna_long_queries.fa dna_long_refs.fa)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT}/${f}
                          ${DATA}/${f} RESULT_VARIABLE diff)
  if(NOT diff EQUAL 0)
    message(FATAL_ERROR "${f}: regenerated file differs from tests/data/sw/${f}")
  endif()
endforeach()
message(STATUS "sw test data reproduced byte for byte")
