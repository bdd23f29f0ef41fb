# Runs COMMAND (a list) and passes only if its exit code is as expected (EXIT: 0, the default, or
# "failure" for any non-zero code) and its output matches the regular expression EXPECT. Tests use
# it instead of CTest's PASS_REGULAR_EXPRESSION, which ignores the exit code: a program that prints
# the expected line and then fails in its teardown must fail.
if(NOT DEFINED EXIT)
  set(EXIT 0)
endif()
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(EXIT STREQUAL "failure")
  if(rc EQUAL 0)
    message(FATAL_ERROR "expected a failure, but the command succeeded")
  endif()
elseif(NOT rc EQUAL EXIT)
  message(FATAL_ERROR "expected exit code ${EXIT}, got ${rc}")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output does not match: ${EXPECT}")
endif()
message("exit code ${rc} and output as expected")
