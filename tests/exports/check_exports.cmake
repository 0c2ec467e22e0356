# check_exports.cmake — libdlop exports its API and nothing else: the functions in its dynamic
# symbol table (nm -D --defined-only) are exactly those the public headers mark DLOP_API, so no
# internal dlop__ name and nothing without the dlop_ prefix is exported, and no API is missing.
# -DNM=<nm> -DLIBRARY=<libdlop.so> -DHEADERS=<sdk/include/dlop>
execute_process(COMMAND ${NM} -D --defined-only ${LIBRARY}
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "`${NM} -D --defined-only ${LIBRARY}` failed (${status}): ${err}")
endif()
# Lines read "<address> <type> <name>"; the name is the last field.
string(REGEX MATCHALL "[^ \n]+\n" exported "${out}\n")
list(TRANSFORM exported STRIP)
list(SORT exported)
if(NOT exported)
  message(FATAL_ERROR "${LIBRARY} exports no symbol at all:\n${out}")
endif()

# Every declaration reads "DLOP_API <return type> dlop_<name>(" on its first line.
file(GLOB headers ${HEADERS}/*.h)
set(declared "")
foreach(header IN LISTS headers)
  file(READ ${header} text)
  string(REGEX MATCHALL "DLOP_API [^;(\n]*[ *]dlop_[A-Za-z0-9_]+\\(" found "${text}")
  foreach(declaration IN LISTS found)
    string(REGEX REPLACE ".*[ *](dlop_[A-Za-z0-9_]+)\\($" "\\1" name "${declaration}")
    list(APPEND declared ${name})
  endforeach()
endforeach()
list(SORT declared)
if(NOT declared)
  message(FATAL_ERROR "no DLOP_API declaration found in ${HEADERS}/*.h")
endif()

set(internal ${exported})
list(FILTER internal INCLUDE REGEX "^dlop__")
set(unexpected ${exported})
list(REMOVE_ITEM unexpected ${declared})
list(FILTER unexpected EXCLUDE REGEX "^dlop__")
set(missing ${declared})
list(REMOVE_ITEM missing ${exported})
if(internal OR unexpected OR missing)
  list(JOIN internal " " internal)
  list(JOIN unexpected " " unexpected)
  list(JOIN missing " " missing)
  message(FATAL_ERROR "${LIBRARY} must export exactly the DLOP_API functions of ${HEADERS}:\n"
    "  internal dlop__ symbols exported: ${internal}\n"
    "  other symbols exported without DLOP_API: ${unexpected}\n"
    "  DLOP_API functions not exported: ${missing}\n"
    "(libdlop is compiled with hidden visibility; mark public declarations DLOP_API, "
    "dlop/export.h)")
endif()
list(LENGTH exported count)
message(STATUS "${LIBRARY} exports ${count} symbols, all DLOP_API functions")
