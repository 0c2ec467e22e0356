# DlopFindCheck.cmake — finds Check (the C unit-test framework) for the unit tests and for the
# `dlop-check` compliance suite. Sets DLOP_CHECK_FOUND, CHECK_INCLUDE_DIR and DLOP_CHECK_LIBS
# (static Check when available, so binaries built here also run where Check is not installed).
# DLOP_CHECK_ROOT may name a folder where the Debian packages were unpacked.
if(DEFINED DLOP_CHECK_FOUND)
  return() # included from several places: find once
endif()
find_path(CHECK_INCLUDE_DIR check.h HINTS ${DLOP_CHECK_ROOT}/usr/include)
find_library(CHECK_LIBRARY NAMES libcheck_pic.a libcheck.a check
  HINTS ${DLOP_CHECK_ROOT}/usr/lib/x86_64-linux-gnu ${DLOP_CHECK_ROOT}/usr/lib)
find_library(SUBUNIT_LIBRARY NAMES libsubunit.a subunit
  HINTS ${DLOP_CHECK_ROOT}/usr/lib/x86_64-linux-gnu ${DLOP_CHECK_ROOT}/usr/lib)
if(CHECK_INCLUDE_DIR AND CHECK_LIBRARY)
  set(DLOP_CHECK_FOUND TRUE)
  set(DLOP_CHECK_LIBS ${CHECK_LIBRARY} m rt pthread)
  if(SUBUNIT_LIBRARY)
    list(APPEND DLOP_CHECK_LIBS ${SUBUNIT_LIBRARY})
  endif()
else()
  set(DLOP_CHECK_FOUND FALSE)
  set(DLOP_CHECK_LIBS "")
endif()
