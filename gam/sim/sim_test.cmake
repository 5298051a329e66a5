# Runs ember-gam-sim (SIM) with ARGS; passes when it exits 0 and prints the
# table down to its closing line.
execute_process(COMMAND ${SIM} ${ARGS} RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ember-gam-sim exited ${rc}")
endif()
foreach(want "throughput / optimum" "accelerator utilization" "\navg "
             "away from the optimum on average: delay")
  string(FIND "${out}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "ember-gam-sim printed no '${want}'")
  endif()
endforeach()
