# Installs what a user of an installed Plugboard needs beyond the targets
# themselves: the CMake package (PlugboardConfig.cmake, its version file,
# the exported targets, the plugin helper) and plugboard.pc.
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

set(PLUGBOARD_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Plugboard)

# ABI version the installed transport.h describes, read from the header.
file(STRINGS ${PROJECT_SOURCE_DIR}/plugin-api/include/plugboard/transport.h abi_lines
     REGEX "^#define PB_TRANSPORT_ABI_(MAJOR|MINOR) ")
string(REGEX REPLACE ".*MAJOR ([0-9]+).*" "\\1" abi_major "${abi_lines}")
string(REGEX REPLACE ".*MINOR ([0-9]+).*" "\\1" abi_minor "${abi_lines}")
set(PLUGBOARD_TRANSPORT_ABI "${abi_major}.${abi_minor}")

install(EXPORT PlugboardTargets
  NAMESPACE Plugboard::
  FILE PlugboardTargets.cmake
  DESTINATION ${PLUGBOARD_CMAKE_INSTALL_DIR})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/PlugboardConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/PlugboardConfig.cmake
  INSTALL_DESTINATION ${PLUGBOARD_CMAKE_INSTALL_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR PLUGBOARD_PLUGIN_INSTALL_DIR)
# 0.x: any 0.y satisfies a request for 0.x; the ABI has its own version.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/PlugboardConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES
    ${PROJECT_BINARY_DIR}/cmake/PlugboardConfig.cmake
    ${PROJECT_BINARY_DIR}/cmake/PlugboardConfigVersion.cmake
    ${CMAKE_CURRENT_LIST_DIR}/PlugboardPlugin.cmake
    ${CMAKE_CURRENT_LIST_DIR}/plugin-exports.map
  DESTINATION ${PLUGBOARD_CMAKE_INSTALL_DIR})

# pkg-config: paths relative to the .pc file, so `cmake --install --prefix`
# anywhere gives a working file.
file(RELATIVE_PATH PLUGBOARD_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" PLUGBOARD_PC_TO_PREFIX "${PLUGBOARD_PC_TO_PREFIX}")
if(CMAKE_DL_LIBS)
  set(PLUGBOARD_PC_DL "-l${CMAKE_DL_LIBS}")
endif()
# A CUDA build exports PLUGBOARD_HAVE_CUDA and links the CUDA runtime.
set(PLUGBOARD_PC_CFLAGS_EXTRA "")
set(PLUGBOARD_PC_LIBS_EXTRA "")
if(PLUGBOARD_HAVE_CUDA)
  foreach(dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
    string(APPEND PLUGBOARD_PC_CFLAGS_EXTRA " -I${dir}")
  endforeach()
  string(APPEND PLUGBOARD_PC_CFLAGS_EXTRA " -DPLUGBOARD_HAVE_CUDA=1")
  set(PLUGBOARD_PC_LIBS_EXTRA " -L${CUDAToolkit_LIBRARY_DIR} -lcudart")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/plugboard.pc.in ${PROJECT_BINARY_DIR}/plugboard.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/plugboard.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
