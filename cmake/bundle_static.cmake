# bundle_static.cmake - make the installed libember.a (cmake -P, called from
# client/CMakeLists.txt with CC, AR, OBJCOPY, OUT and ARCHIVES).
#
# A program linking libember.a must not meet our internal names (nam_*,
# proto_*, log_*, sw_* ...) in its own namespace, and should not have to
# list our internal archives. So the archives are partially linked (ld -r)
# into one object, every global symbol but the public API (ember_NAME, not
# ember__NAME) is made local, and that object is the archive.
string(REPLACE "|" ";" ARCHIVES "${ARCHIVES}")  # '|' kept the list one argument
get_filename_component(dir ${OUT} DIRECTORY)
file(MAKE_DIRECTORY ${dir})
set(obj ${dir}/libember_all.o)
execute_process(
  COMMAND ${CC} -r -nostdlib -o ${obj} -Wl,--whole-archive ${ARCHIVES}
          -Wl,--no-whole-archive
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "libember.a: partial link failed")
endif()
# a negated pattern first: objcopy applies the first that matches
execute_process(
  COMMAND ${OBJCOPY} --wildcard --keep-global-symbol=!ember__*
          --keep-global-symbol=ember_* ${obj}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "libember.a: localizing internal symbols failed")
endif()
file(REMOVE ${OUT})
execute_process(COMMAND ${AR} rcs ${OUT} ${obj} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "libember.a: ar failed")
endif()
file(REMOVE ${obj})
