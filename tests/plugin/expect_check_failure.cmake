# cmake -DCHECKER=<plugboard-plugin-check> -DPLUGIN=<lib.so> -DEXPECT=<regex> [-DARGS="<a b ..>"]
#       -P expect_check_failure.cmake
# Passes when the checker (given ARGS before the plugin) rejects PLUGIN the
# way it should: exit status 1 (not 0, not a crash) and a FAIL line matching EXPECT.
separate_arguments(args UNIX_COMMAND "${ARGS}")
execute_process(COMMAND ${CHECKER} ${args} ${PLUGIN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 120)
if(NOT rc STREQUAL "1")
  message(FATAL_ERROR "expected exit status 1 from ${CHECKER} ${PLUGIN}, got '${rc}'\n${out}\n${err}")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "no line matching '${EXPECT}' in:\n${out}\n${err}")
endif()
message(STATUS "rejected as expected:\n${out}")
