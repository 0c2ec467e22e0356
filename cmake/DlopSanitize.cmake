# DlopSanitize.cmake — a build with the sanitizers named in DLOP_SANITIZE (address,undefined in
# build/sanitize, which scripts/test builds CPU-only): every C/C++ target compiled and linked with
# them, and the runtime options that make any finding a test failure with its stack trace.
set(DLOP_SANITIZE_FLAGS -fsanitize=${DLOP_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer)
# The default build type (RelWithDebInfo: -O2 -g) becomes -O1 -g1 here (the plugins' kernel
# files keep their own -O3), as ASan's documentation advises -O1: it nearly halves this tree's
# compile time, and its tests ran within noise of -O2. -g1 keeps the line tables (and inlined
# frames) that the sanitizers' stack traces print; it drops only the variables' debug info.
if(CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
  list(APPEND DLOP_SANITIZE_FLAGS -O1 -g1)
endif()
add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${DLOP_SANITIZE_FLAGS}>")
add_link_options(-fsanitize=${DLOP_SANITIZE})
# Fixtures that crash on purpose (a null store in a constructor or a thunk, for the plugin probe
# and dlop check's crash reports) compile without instrumentation: UBSan would stop them first
# with its own exit status, and the tests are about the signal.
set(DLOP_UNSANITIZED_FLAGS -fno-sanitize=all)

# ctest reads this file with the tree's test list (TEST_INCLUDE_FILES), so `ctest` in the build
# tree runs every entry with these options however it is started; a variable already set in the
# environment wins, to try other options by hand.
# - halt_on_error: the first finding ends the process with a non-zero status (the test fails);
# - detect_leaks: LeakSanitizer at the exit of every process, Check's forked test processes and
#   dlop-check's included, so a leak is an error of the test that made it (LeakSanitizer stops
#   the process's threads with ptrace: where a container forbids that, every test fails saying
#   so, and ASAN_OPTIONS=detect_leaks=0 in the environment runs the rest);
# - CK_TIMEOUT_MULTIPLIER: Check's per-test time limits, for code that runs 2-3x slower;
# - DLOP_CHECK_LARGE_ELEMENTS=131075: `dlop check`'s large run shape at 2^17 + 3 elements
#   instead of 2^20 + 3 (docs/compliance.md). Filling, copying and comparing its buffers
#   element by element was three quarters of the compliance entries' CPU time here; at 2^17 + 3
#   the same code runs (the bundled CPU kernels' split into 32768-element thread chunks, an odd
#   tail), and the main tree runs the full size;
# - DLOP_TEST_SCALE=0.25: tests that repeat one path over many cases (Hypothesis examples,
#   corrupt plugin files, NVRTC compiles of every dtype) run a share of them here, each in the
#   instrumented code; the main tree runs them all. Each such test says what it cuts.
set(DLOP_SANITIZE_TEST_ENV ${PROJECT_BINARY_DIR}/sanitize_environment.cmake)
file(WRITE ${DLOP_SANITIZE_TEST_ENV} [=[
# Written by cmake/DlopSanitize.cmake: the sanitizers' runtime options for this tree's tests.
if(NOT DEFINED ENV{ASAN_OPTIONS})
  set(ENV{ASAN_OPTIONS} "halt_on_error=1:detect_leaks=1:print_summary=1")
endif()
if(NOT DEFINED ENV{UBSAN_OPTIONS})
  set(ENV{UBSAN_OPTIONS} "halt_on_error=1:print_stacktrace=1:print_summary=1")
endif()
if(NOT DEFINED ENV{CK_TIMEOUT_MULTIPLIER})
  set(ENV{CK_TIMEOUT_MULTIPLIER} "3")
endif()
if(NOT DEFINED ENV{DLOP_CHECK_LARGE_ELEMENTS})
  set(ENV{DLOP_CHECK_LARGE_ELEMENTS} "131075")
endif()
if(NOT DEFINED ENV{DLOP_TEST_SCALE})
  set(ENV{DLOP_TEST_SCALE} "0.25")
endif()
]=])
set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY TEST_INCLUDE_FILES ${DLOP_SANITIZE_TEST_ENV})

# The Python tests: the interpreter is not instrumented, so AddressSanitizer's runtime must be
# the first library of the process (LD_PRELOAD); LeakSanitizer is off there, since CPython keeps
# much of its memory to the end on purpose and every run would read as leaking; PYTHONMALLOC=malloc
# puts Python's objects on ASan's heap instead of pymalloc's arenas, so a reference the
# extension drops too early is a use after free that ASan sees.
# DLOP_SANITIZED_TREE: for the few Python tests whose subject cannot be sanitized (they say why)
set(DLOP_SANITIZE_PYTHON_ENV "PYTHONMALLOC=malloc" "DLOP_SANITIZED_TREE=1")
# libstdc++ is preloaded right after the ASan runtime: the interpreter does not link it, so
# ASan finds no __cxa_throw to intercept and stops at the first C++ exception of a library the
# tests load (jaxlib throws one while importing jax: "CHECK failed ... real___cxa_throw").
if(DLOP_SANITIZE MATCHES "address")
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
    OUTPUT_VARIABLE DLOP_SANITIZE_ASAN_RUNTIME OUTPUT_STRIP_TRAILING_WHITESPACE)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libstdc++.so.6
    OUTPUT_VARIABLE DLOP_SANITIZE_STDCXX OUTPUT_STRIP_TRAILING_WHITESPACE)
  list(APPEND DLOP_SANITIZE_PYTHON_ENV "LD_PRELOAD=${DLOP_SANITIZE_ASAN_RUNTIME}:${DLOP_SANITIZE_STDCXX}"
    "ASAN_OPTIONS=halt_on_error=1:detect_leaks=0:print_summary=1")
endif()

# dlop_sanitize_scale_timeouts(): called at the end of a folder's test definitions, makes the
# TIMEOUT of each of its ctest entries 3x, as the sanitized code runs 2-3x slower (CPU time of
# `dlop check` measured 2.2-2.7x that of the plain build).
function(dlop_sanitize_scale_timeouts)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(test IN LISTS tests)
    get_test_property(${test} TIMEOUT timeout)
    if(timeout)
      math(EXPR timeout "${timeout} * 3")
      set_tests_properties(${test} PROPERTIES TIMEOUT ${timeout})
    endif()
  endforeach()
endfunction()
