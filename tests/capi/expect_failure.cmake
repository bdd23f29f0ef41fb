# Runs COMMAND (a list) and passes only if it fails (non-zero exit code) and its output matches the
# regular expression EXPECT.
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "expected a failure, but the command succeeded")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output does not match: ${EXPECT}")
endif()
message("failed as expected (exit code ${rc})")
