# check_command.cmake — runs one `dlop` command for CTest and checks both its exit status and
# its output (stdout and stderr together), which PASS_REGULAR_EXPRESSION alone cannot do.
# -DCOMMAND=<program> -DARGS=<args separated by |> -DEXPECT_STATUS=<n> -DEXPECT_REGEX=<regex>
# [-DEXPECT_ONCE=<text>]: that literal text must occur exactly once in the output.
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND ${COMMAND} ${args} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(output "${out}${err}")
if(NOT status STREQUAL "${EXPECT_STATUS}")
  message(FATAL_ERROR "`dlop ${ARGS}` exited with ${status}, expected ${EXPECT_STATUS}; output:\n${output}")
endif()
if(NOT output MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "`dlop ${ARGS}` output does not match /${EXPECT_REGEX}/:\n${output}")
endif()
if(DEFINED EXPECT_ONCE)
  string(LENGTH "${output}" total)
  string(REPLACE "${EXPECT_ONCE}" "" without "${output}")
  string(LENGTH "${without}" remaining)
  string(LENGTH "${EXPECT_ONCE}" one)
  math(EXPR count "(${total} - ${remaining}) / ${one}")
  if(NOT count EQUAL 1)
    message(FATAL_ERROR "`dlop ${ARGS}` output has \"${EXPECT_ONCE}\" ${count} times, expected once:\n${output}")
  endif()
endif()
message(STATUS "`dlop ${ARGS}`: status ${status}, output matches")
