# plugboard_add_plugin(<name> SOURCES ... [LIBS ...]
#                      [OUTPUT_DIRECTORY dir] [INSTALL_DIRECTORY dir])
# Builds libplugboard-<name>.so (target plugboard-<name>) with hidden
# visibility and a version script, so that only the ABI entry symbol is
# exported, and installs it where the core looks for plugins.
#
# Used in this source tree and, installed next to PlugboardConfig.cmake, by
# out-of-tree plugins after find_package(Plugboard): in tree the plugin goes
# to the build tree's <libdir>/plugboard/; out of tree to the current binary
# directory (point PLUGBOARD_PLUGIN_PATH there) unless OUTPUT_DIRECTORY says
# otherwise. Either way it installs into <libdir>/plugboard/. SOURCES may
# include .cu files where the project enabled CUDA.
include_guard(GLOBAL)
include(GNUInstallDirs)
set(PLUGBOARD_PLUGIN_EXPORTS_MAP ${CMAKE_CURRENT_LIST_DIR}/plugin-exports.map)

function(plugboard_add_plugin name)
  cmake_parse_arguments(P "" "OUTPUT_DIRECTORY;INSTALL_DIRECTORY" "SOURCES;LIBS" ${ARGN})
  if(TARGET plugboard::plugin_api)
    set(api plugboard::plugin_api)   # this source tree
  else()
    set(api Plugboard::plugin_api)   # an installed Plugboard
  endif()
  if(NOT P_OUTPUT_DIRECTORY)
    if(DEFINED PLUGBOARD_PLUGIN_OUTPUT_DIR)
      set(P_OUTPUT_DIRECTORY ${PLUGBOARD_PLUGIN_OUTPUT_DIR})
    else()
      set(P_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    endif()
  endif()
  if(NOT P_INSTALL_DIRECTORY)
    if(DEFINED PLUGBOARD_PLUGIN_INSTALL_DIR)
      set(P_INSTALL_DIRECTORY ${PLUGBOARD_PLUGIN_INSTALL_DIR})
    else()
      set(P_INSTALL_DIRECTORY ${CMAKE_INSTALL_LIBDIR}/plugboard)
    endif()
  endif()
  set(target plugboard-${name})
  add_library(${target} MODULE ${P_SOURCES})
  target_link_libraries(${target} PRIVATE ${api} ${P_LIBS})
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:C,CXX>:${PLUGBOARD_WARNINGS}>")
  if(PLUGBOARD_WARNINGS)
    # nvcc does not take GCC's warning flags directly: hand them to its host compiler.
    string(REPLACE ";" "," cuda_warnings "${PLUGBOARD_WARNINGS}")
    target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${cuda_warnings}>")
  endif()
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY ${P_OUTPUT_DIRECTORY})
  # Fail at link time, not at dlopen time, on an undefined symbol; and
  # export the entry symbol only (hidden visibility alone still leaves weak
  # standard-library instantiations exported).
  target_link_options(${target} PRIVATE -Wl,--no-undefined
    "LINKER:--version-script=${PLUGBOARD_PLUGIN_EXPORTS_MAP}")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${PLUGBOARD_PLUGIN_EXPORTS_MAP})
  install(TARGETS ${target} LIBRARY DESTINATION ${P_INSTALL_DIRECTORY})
endfunction()
