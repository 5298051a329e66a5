# embed_cl.cmake - turn an OpenCL C file into a C header holding it as a
# string (run at build time by ember_add_accelerator, EmberAccelerator.cmake):
#   cmake -DIN=sw.cl -DOUT=sw_cl_source.h -DNAME=acc_sw_cl_source -P embed_cl.cmake
file(READ "${IN}" text)
string(REPLACE "\\" "\\\\" text "${text}")
string(REPLACE "\"" "\\\"" text "${text}")
string(REGEX REPLACE "\n$" "" text "${text}")
string(REPLACE "\n" "\\n\"\n\"" text "${text}")
get_filename_component(src "${IN}" NAME)
file(WRITE "${OUT}.tmp"
  "/* generated from ${src} by embed_cl.cmake at build time, do not edit */\n"
  "static const char ${NAME}[] =\n\"${text}\\n\";\n")
file(RENAME "${OUT}.tmp" "${OUT}")
