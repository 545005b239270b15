# plugboard_add_plugin(<name> SOURCES ... [LIBS ...])
# Builds libplugboard-<name>.so with hidden visibility, so that only the ABI
# entry symbol is exported, into the build tree's <libdir>/plugboard/.
# SOURCES may include .cu files (in a project with CUDA enabled).
set(PLUGBOARD_PLUGIN_EXPORTS_MAP ${CMAKE_CURRENT_LIST_DIR}/plugin-exports.map)

function(plugboard_add_plugin name)
  cmake_parse_arguments(P "" "" "SOURCES;LIBS" ${ARGN})
  set(target plugboard-${name})
  add_library(${target} MODULE ${P_SOURCES})
  target_link_libraries(${target} PRIVATE plugboard::plugin_api ${P_LIBS})
  # nvcc does not take GCC's warning flags directly: hand them to its host compiler.
  string(REPLACE ";" "," cuda_warnings "${PLUGBOARD_WARNINGS}")
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:C,CXX>:${PLUGBOARD_WARNINGS}>"
    "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${cuda_warnings}>")
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY ${PLUGBOARD_PLUGIN_OUTPUT_DIR})
  # Fail at link time, not at dlopen time, on an undefined symbol; and
  # export the entry symbol only (hidden visibility alone still leaves weak
  # standard-library instantiations exported).
  target_link_options(${target} PRIVATE -Wl,--no-undefined
    "LINKER:--version-script=${PLUGBOARD_PLUGIN_EXPORTS_MAP}")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${PLUGBOARD_PLUGIN_EXPORTS_MAP})
  install(TARGETS ${target} LIBRARY DESTINATION ${PLUGBOARD_PLUGIN_INSTALL_DIR})
endfunction()
