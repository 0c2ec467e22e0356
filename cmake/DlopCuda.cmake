# DlopCuda.cmake — compile a .cu file with nvcc into a fatbin and embed it in a target.
# The fatbin holds SASS for each DLOP_CUDA_ARCHS entry plus PTX for the newest, so newer GPUs JIT it.
# Used by dlop's own build and, installed in <libdir>/cmake/dlop, by find_package(dlop): it
# names only the dlop::headers target, which both define, and no path of the source tree.
if(DLOP_WITH_CUDA)
  find_program(DLOP_NVCC nvcc HINTS /usr/local/cuda/bin ENV CUDA_HOME PATH_SUFFIXES bin)
  if(NOT DLOP_NVCC)
    message(FATAL_ERROR "DLOP_WITH_CUDA is ON but nvcc was not found: install the CUDA toolkit or configure with -DDLOP_WITH_CUDA=OFF")
  endif()
endif()

# dlop_embed_fatbin(TARGET SOURCE SYMBOL)
#   Compiles SOURCE (.cu) to a fatbin and links it into TARGET as a hidden, 16-byte-aligned
#   byte array named SYMBOL (declare it `extern const unsigned char SYMBOL[];`).
#   Defines DLOP_HAVE_CUDA_KERNELS=1 on TARGET when CUDA is enabled, 0 otherwise.
#   DLOP_NVCC_FLAGS (a list, empty by default) adds nvcc options, as set where this is called:
#   plugins exported by dlop.export_plugin set --fmad=false to round as dlop's NVRTC kernels do.
function(dlop_embed_fatbin target source symbol)
  if(NOT DLOP_WITH_CUDA)
    target_compile_definitions(${target} PRIVATE DLOP_HAVE_CUDA_KERNELS=0)
    return()
  endif()
  get_filename_component(src "${source}" ABSOLUTE)
  set(fatbin "${CMAKE_CURRENT_BINARY_DIR}/${symbol}.fatbin")
  set(asm "${CMAKE_CURRENT_BINARY_DIR}/${symbol}.S")
  set(gencode "")
  foreach(arch IN LISTS DLOP_CUDA_ARCHS)
    list(APPEND gencode "-gencode=arch=compute_${arch},code=sm_${arch}")
    set(last_arch ${arch})
  endforeach()
  list(APPEND gencode "-gencode=arch=compute_${last_arch},code=compute_${last_arch}")
  get_target_property(include_dirs dlop::headers INTERFACE_INCLUDE_DIRECTORIES)
  set(include_flags "")
  foreach(dir IN LISTS include_dirs)
    string(REGEX REPLACE "^\\$<BUILD_INTERFACE:(.*)>$" "\\1" dir "${dir}")
    if(NOT dir MATCHES "^\\$<")
      list(APPEND include_flags "-I${dir}")
    endif()
  endforeach()
  add_custom_command(
    OUTPUT "${fatbin}"
    COMMAND ${DLOP_NVCC} -fatbin -O3 -std=c++17 ${DLOP_NVCC_FLAGS} ${gencode} ${include_flags} -o "${fatbin}" "${src}"
    DEPENDS "${src}"
    IMPLICIT_DEPENDS CXX "${src}"
    COMMENT "nvcc: ${source} -> ${symbol}.fatbin"
    VERBATIM)
  file(WRITE "${asm}.in"
    "/* generated: embeds ${symbol}.fatbin; hidden so the plugin exports only its entry symbol */\n"
    "  .section .rodata\n  .balign 16\n  .globl ${symbol}\n  .hidden ${symbol}\n"
    "${symbol}:\n  .incbin \"${fatbin}\"\n  .byte 0\n"
    "  .section .note.GNU-stack,\"\",@progbits\n")
  configure_file("${asm}.in" "${asm}" COPYONLY)
  set_source_files_properties("${asm}" PROPERTIES OBJECT_DEPENDS "${fatbin}")
  target_sources(${target} PRIVATE "${asm}")
  target_compile_definitions(${target} PRIVATE DLOP_HAVE_CUDA_KERNELS=1)
endfunction()
