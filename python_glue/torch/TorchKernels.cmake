# python_glue/torch/TorchKernels.cmake — dlop/_torch_kernels.so: dlop.torch's C++ kernels inside
# PyTorch's dispatcher (torch_kernels.cpp), built only where the build's Python has PyTorch (its
# headers and libraries come with the wheel); elsewhere skipped with a message, and dlop.torch
# runs its kernels in Python. A PyTorch's C++ ABI is its own, so the library records the version
# it was built for, and the Python ABI, and dlop.torch uses it only with those.
set(dlop_torch_python "${DLOP_PYTHON}")
if(NOT dlop_torch_python)
  set(dlop_torch_python "${PROJECT_BINARY_DIR}/venv/bin/python")
endif()
set(dlop_torch_found "")
if(EXISTS "${dlop_torch_python}" OR DLOP_PYTHON)
  # find_spec first: most machines have no PyTorch, and importing one takes seconds
  execute_process(COMMAND ${dlop_torch_python} -c
    "import importlib.util; print('yes' if importlib.util.find_spec('torch') else '')"
    OUTPUT_VARIABLE dlop_torch_found OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
if(dlop_torch_found)
  execute_process(COMMAND ${dlop_torch_python} -c
    "import os, sysconfig, torch; from torch.utils import cpp_extension as c; print(torch.__version__); print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); print(','.join(c.include_paths())); print(os.path.join(os.path.dirname(torch.__file__), 'lib')); print(sysconfig.get_config_var('SOABI')); print(sysconfig.get_paths()['include'])"
    OUTPUT_VARIABLE dlop_torch_facts OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_VARIABLE dlop_torch_error
    RESULT_VARIABLE dlop_torch_result)
  if(NOT dlop_torch_result EQUAL 0)
    message(STATUS "dlop: PyTorch is installed for ${dlop_torch_python} but importing it failed "
      "(${dlop_torch_error}): dlop/_torch_kernels.so is not built; dlop.torch's kernels run in Python")
    set(dlop_torch_found "")
  endif()
endif()
if(dlop_torch_found)
  string(REPLACE "\n" ";" dlop_torch_facts "${dlop_torch_facts}")
  list(GET dlop_torch_facts 0 dlop_torch_version)
  list(GET dlop_torch_facts 1 dlop_torch_cxx11_abi)
  list(GET dlop_torch_facts 2 dlop_torch_includes)
  list(GET dlop_torch_facts 3 dlop_torch_lib)
  # the interpreter's own ABI and headers: the library uses CPython's full API (not the
  # limited one _C uses), so it serves only that interpreter's ABI
  list(GET dlop_torch_facts 4 dlop_torch_soabi)
  list(GET dlop_torch_facts 5 dlop_torch_python_include)
  string(REPLACE "," ";" dlop_torch_includes "${dlop_torch_includes}")
  add_library(dlop_torch_kernels MODULE ${CMAKE_CURRENT_SOURCE_DIR}/torch/torch_kernels.cpp)
  target_include_directories(dlop_torch_kernels SYSTEM PRIVATE ${dlop_torch_includes}
    ${dlop_torch_python_include})
  target_compile_features(dlop_torch_kernels PRIVATE cxx_std_17)
  target_compile_definitions(dlop_torch_kernels PRIVATE
    _GLIBCXX_USE_CXX11_ABI=${dlop_torch_cxx11_abi} DLOP_TORCH_VERSION="${dlop_torch_version}"
    DLOP_TORCH_PYTHON_SOABI="${dlop_torch_soabi}")
  set(dlop_torch_libraries ${dlop_torch_lib}/libtorch.so ${dlop_torch_lib}/libtorch_cpu.so
    ${dlop_torch_lib}/libc10.so ${dlop_torch_lib}/libtorch_python.so)
  if(EXISTS ${dlop_torch_lib}/libtorch_cuda.so)
    list(APPEND dlop_torch_libraries ${dlop_torch_lib}/libtorch_cuda.so)
    target_compile_definitions(dlop_torch_kernels PRIVATE DLOP_TORCH_CUDA)
  endif()
  target_link_libraries(dlop_torch_kernels PRIVATE dlop ${dlop_torch_libraries})
  # default visibility: python_error's type info must be the one PyTorch's bindings catch
  target_compile_options(dlop_torch_kernels PRIVATE -O2 -Wall -Wno-unused-parameter)
  set_target_properties(dlop_torch_kernels PROPERTIES
    PREFIX "" OUTPUT_NAME "_torch_kernels" SUFFIX ".so"
    LIBRARY_OUTPUT_DIRECTORY ${DLOP_PYTHON_PACKAGE_DIR}
    BUILD_RPATH "${PROJECT_BINARY_DIR}/lib;${dlop_torch_lib}"
    # libdlop where _C finds it (the wheel's own, or the prefix's), then PyTorch's libraries
    INSTALL_RPATH "${DLOP_PYTHON_INSTALL_RPATH};${dlop_torch_lib}")
  add_dependencies(dlop_python dlop_torch_kernels)
  install(TARGETS dlop_torch_kernels LIBRARY DESTINATION dlop COMPONENT python)
  message(STATUS "dlop: dlop.torch's C++ kernels build against PyTorch ${dlop_torch_version} "
    "(${dlop_torch_lib})")
else()
  message(STATUS "dlop: no PyTorch for ${dlop_torch_python}: dlop/_torch_kernels.so is not "
    "built; dlop.torch's kernels run in Python")
endif()
