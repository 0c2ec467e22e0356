# DlopPlugin.cmake — dlop_add_plugin(NAME SOURCES a.c b.cu ...): a plugin shared object that
# exports only dlop_plugin_init, with each .cu compiled into an embedded fatbin (DlopCuda.cmake).
# Used by dlop's own build and, installed, by find_package(dlop); it names only dlop::headers.
function(dlop_add_plugin name)
  cmake_parse_arguments(ARG "" "OUTPUT_DIRECTORY" "SOURCES" ${ARGN})
  set(c_sources "")
  set(cu_sources "")
  foreach(src IN LISTS ARG_SOURCES)
    if(src MATCHES "\\.cu$")
      list(APPEND cu_sources "${src}")
    else()
      list(APPEND c_sources "${src}")
    endif()
  endforeach()
  add_library(${name} MODULE ${c_sources})
  target_link_libraries(${name} PRIVATE dlop::headers)
  set_target_properties(${name} PROPERTIES
    PREFIX "lib" C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden)
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  endif()
  # A plugin must not depend on libdlop: unresolved symbols are an error at link time.
  target_link_options(${name} PRIVATE "-Wl,--no-undefined")
  target_link_libraries(${name} PRIVATE m)
  foreach(cu IN LISTS cu_sources)
    get_filename_component(stem "${cu}" NAME_WE)
    dlop_embed_fatbin(${name} "${cu}" "${name}_${stem}_fatbin")
  endforeach()
  if(NOT cu_sources)
    target_compile_definitions(${name} PRIVATE DLOP_HAVE_CUDA_KERNELS=0)
  endif()
endfunction()

# dlop_embed_text(TARGET FILE SYMBOL)
#   Links the text of FILE into TARGET as a hidden, NUL-terminated char array named SYMBOL
#   (declare it `extern const char SYMBOL[];`), rebuilt when FILE changes: what an op's scalar
#   body names as its prelude (ABI 1.2), kept in a header the op's own kernels include, so the
#   two are one text.
function(dlop_embed_text target file symbol)
  get_filename_component(path "${file}" ABSOLUTE)
  set(asm "${CMAKE_CURRENT_BINARY_DIR}/${symbol}.S")
  file(WRITE "${asm}.in"
    "/* generated: embeds ${path} as a NUL-terminated string, hidden */\n"
    "  .section .rodata\n  .globl ${symbol}\n  .hidden ${symbol}\n"
    "${symbol}:\n  .incbin \"${path}\"\n  .byte 0\n"
    "  .section .note.GNU-stack,\"\",@progbits\n")
  configure_file("${asm}.in" "${asm}" COPYONLY)
  set_source_files_properties("${asm}" PROPERTIES OBJECT_DEPENDS "${path}")
  target_sources(${target} PRIVATE "${asm}")
endfunction()
