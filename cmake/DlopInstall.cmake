# DlopInstall.cmake — install rules for the author kit: the find_package(dlop) CMake package
# (exported targets, config and version files, the dlop_add_plugin helper modules) and dlop.pc.
# The headers, libdlop, the dlop command and the bundled plugins install from their own folders.
include(CMakePackageConfigHelpers)

set(DLOP_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/dlop)

# The plugin ABI version, read from the header that defines it, for the config and .pc files.
file(STRINGS ${PROJECT_SOURCE_DIR}/sdk/include/dlop/version.h DLOP_ABI_LINES
  REGEX "^#define DLOP_ABI_(MAJOR|MINOR) [0-9]+")
string(REGEX REPLACE ".*DLOP_ABI_MAJOR ([0-9]+).*" "\\1" DLOP_ABI_MAJOR_VALUE "${DLOP_ABI_LINES}")
string(REGEX REPLACE ".*DLOP_ABI_MINOR ([0-9]+).*" "\\1" DLOP_ABI_MINOR_VALUE "${DLOP_ABI_LINES}")
set(DLOP_ABI_VERSION_TEXT "${DLOP_ABI_MAJOR_VALUE}.${DLOP_ABI_MINOR_VALUE}")
if(NOT DLOP_ABI_VERSION_TEXT MATCHES "^[0-9]+\\.[0-9]+$")
  message(FATAL_ERROR "could not read DLOP_ABI_MAJOR/MINOR from sdk/include/dlop/version.h (got '${DLOP_ABI_VERSION_TEXT}')")
endif()

# dlop::headers (the include directory), dlop::dlop (libdlop, for hosts) and dlop::cli (the
# dlop command), from the install(TARGETS ... EXPORT dlopTargets) lines in sdk/.
install(EXPORT dlopTargets NAMESPACE dlop:: DESTINATION ${DLOP_INSTALL_CMAKEDIR}
  FILE dlopTargets.cmake)

# Paths in the config file are relative to where it is installed (PACKAGE_INIT), so the
# prefix may be chosen at install time (`cmake --install build --prefix DIR`) or moved later.
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/dlopConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/dlopConfig.cmake
  INSTALL_DESTINATION ${DLOP_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR DLOP_PLUGIN_INSTALL_DIR)
# Before 1.0 a minor release may change the SDK (not the plugin ABI, which has its own
# version): find_package(dlop 0.1) accepts 0.1.x only.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/dlopConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/cmake/dlopConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/dlopConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/DlopCuda.cmake
  ${PROJECT_SOURCE_DIR}/cmake/DlopPlugin.cmake
  DESTINATION ${DLOP_INSTALL_CMAKEDIR})

# pkg-config: the prefix is found from the .pc file's own location (${pcfiledir}), for the same
# reason. DLOP_PC_PREFIX_FROM_PCFILEDIR is the way up from <libdir>/pkgconfig to the prefix.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  message(FATAL_ERROR "dlop.pc: CMAKE_INSTALL_LIBDIR must be relative to the prefix, got '${CMAKE_INSTALL_LIBDIR}'")
endif()
file(RELATIVE_PATH DLOP_PC_PREFIX_FROM_PCFILEDIR "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" DLOP_PC_PREFIX_FROM_PCFILEDIR "${DLOP_PC_PREFIX_FROM_PCFILEDIR}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/dlop.pc.in ${PROJECT_BINARY_DIR}/dlop.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/dlop.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
