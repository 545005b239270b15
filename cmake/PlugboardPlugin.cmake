# plugboard_add_plugin(<name> SOURCES ... [LIBS ...])
# Builds libplugboard-<name>.so with hidden visibility, so that only the ABI
# entry symbol is exported, into the build tree's <libdir>/plugboard/.
function(plugboard_add_plugin name)
  cmake_parse_arguments(P "" "" "SOURCES;LIBS" ${ARGN})
  set(target plugboard-${name})
  add_library(${target} MODULE ${P_SOURCES})
  target_link_libraries(${target} PRIVATE plugboard::plugin_api ${P_LIBS})
  target_compile_options(${target} PRIVATE ${PLUGBOARD_WARNINGS})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY ${PLUGBOARD_PLUGIN_OUTPUT_DIR})
  # Fail at link time, not at dlopen time, on an undefined symbol.
  target_link_options(${target} PRIVATE -Wl,--no-undefined)
  install(TARGETS ${target} LIBRARY DESTINATION ${PLUGBOARD_PLUGIN_INSTALL_DIR})
endfunction()
