# plugboard_add_conformance_test(<plugin target> [NAME <test name>] [TIMEOUT <s>]
#                                [ARGS <checker args>...] [ENVIRONMENT <VAR=value>...])
#
# Registers a ctest that runs plugboard-plugin-check against the plugin
# built by <plugin target> (e.g. plugboard-ethernet), passing ARGS (e.g.
# --set tls=tcp) before the plugin path, with ENVIRONMENT set. Callable from any directory,
# before or after the plugin and the checker are defined: the requests are
# collected and registered at the end of the top-level directory, each only
# if its plugin target exists (a transport that is not built is no error).
include_guard(GLOBAL)

function(plugboard_add_conformance_test target)
  cmake_parse_arguments(C "" "NAME;TIMEOUT" "ARGS;ENVIRONMENT" ${ARGN})
  if(NOT C_NAME)
    string(REGEX REPLACE "^plugboard-" "" short "${target}")
    set(C_NAME "plugin_check_${short}")
  endif()
  if(NOT C_TIMEOUT)
    set(C_TIMEOUT 300)
  endif()
  set_property(GLOBAL APPEND PROPERTY PLUGBOARD_CONFORMANCE_TESTS ${C_NAME})
  set_property(GLOBAL PROPERTY PLUGBOARD_CONFORMANCE_${C_NAME}_TARGET ${target})
  set_property(GLOBAL PROPERTY PLUGBOARD_CONFORMANCE_${C_NAME}_ARGS "${C_ARGS}")
  set_property(GLOBAL PROPERTY PLUGBOARD_CONFORMANCE_${C_NAME}_TIMEOUT ${C_TIMEOUT})
  set_property(GLOBAL PROPERTY PLUGBOARD_CONFORMANCE_${C_NAME}_ENVIRONMENT "${C_ENVIRONMENT}")
endfunction()

# Runs once, deferred to the end of the top-level CMakeLists.txt.
function(_plugboard_register_conformance_tests)
  if(NOT PLUGBOARD_BUILD_TESTS OR NOT TARGET plugboard-plugin-check)
    return()
  endif()
  get_property(names GLOBAL PROPERTY PLUGBOARD_CONFORMANCE_TESTS)
  foreach(name IN LISTS names)
    get_property(target GLOBAL PROPERTY PLUGBOARD_CONFORMANCE_${name}_TARGET)
    get_property(args GLOBAL PROPERTY PLUGBOARD_CONFORMANCE_${name}_ARGS)
    get_property(timeout GLOBAL PROPERTY PLUGBOARD_CONFORMANCE_${name}_TIMEOUT)
    get_property(environment GLOBAL PROPERTY PLUGBOARD_CONFORMANCE_${name}_ENVIRONMENT)
    if(NOT TARGET ${target})
      continue()
    endif()
    add_test(NAME ${name} COMMAND $<TARGET_FILE:plugboard-plugin-check> ${args} $<TARGET_FILE:${target}>)
    # 77: the plugin's init said this machine lacks its hardware (a skip).
    set_tests_properties(${name} PROPERTIES TIMEOUT ${timeout} LABELS "plugin;conformance" SKIP_RETURN_CODE 77)
    if(environment)
      set_tests_properties(${name} PROPERTIES ENVIRONMENT "${environment}")
    endif()
  endforeach()
endfunction()

cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL _plugboard_register_conformance_tests)
