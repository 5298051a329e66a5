# ember_protobuf_c(<target> <proto>...): generate C with protoc-c at build time
# and build it into an object library named <target>.
function(ember_protobuf_c target)
  set(srcs)
  foreach(proto ${ARGN})
    get_filename_component(abs ${proto} ABSOLUTE)
    get_filename_component(dir ${abs} DIRECTORY)
    get_filename_component(name ${abs} NAME_WE)
    file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR} ${dir})
    set(outdir ${CMAKE_BINARY_DIR}/gen)
    set(out_c ${outdir}/${rel}/${name}.pb-c.c)
    set(out_h ${outdir}/${rel}/${name}.pb-c.h)
    add_custom_command(
      OUTPUT ${out_c} ${out_h}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${outdir}
      COMMAND ${PROTOC_C} --proto_path=${CMAKE_SOURCE_DIR} --c_out=${outdir} ${abs}
      DEPENDS ${abs}
      COMMENT "protoc-c ${rel}/${name}.proto"
      VERBATIM)
    list(APPEND srcs ${out_c})
  endforeach()
  add_library(${target} STATIC ${srcs})
  target_include_directories(${target} PUBLIC ${CMAKE_BINARY_DIR}/gen)
  target_link_libraries(${target} PUBLIC PkgConfig::PROTOBUFC)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  # generated code is not ours to keep warning-free
  target_compile_options(${target} PRIVATE -Wno-error -Wno-missing-prototypes)
endfunction()
