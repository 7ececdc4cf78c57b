# Install the libraries, headers and the CLI, and export placelabConfig.cmake for find_package.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
get_property(_placelab_libs GLOBAL PROPERTY PLACELAB_LIBRARIES)
install(TARGETS ${_placelab_libs} placelab_warnings EXPORT placelabTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET placelab)
  install(TARGETS placelab RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
foreach(_dir core graph models hwmodels sim profiler learners)
  if(EXISTS ${PROJECT_SOURCE_DIR}/${_dir}/include)
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/${_dir}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  endif()
endforeach()
install(EXPORT placelabTargets NAMESPACE placelab:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/placelab)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/placelabConfig.cmake.in [=[
@PACKAGE_INIT@
include(CMakeFindDependencyMacro)
find_dependency(Threads)
find_dependency(Boost 1.74 CONFIG COMPONENTS graph)
find_dependency(Eigen3 3.4 CONFIG)
find_dependency(yaml-cpp CONFIG)
if(NOT TARGET yaml-cpp::yaml-cpp)  # Debian's yaml-cpp 0.7 exports only `yaml-cpp`
  add_library(yaml-cpp::yaml-cpp INTERFACE IMPORTED)
  target_link_libraries(yaml-cpp::yaml-cpp INTERFACE yaml-cpp)
endif()
find_dependency(nlohmann_json CONFIG)
find_dependency(fmt CONFIG)
find_dependency(spdlog CONFIG)
find_dependency(ZLIB)
find_dependency(Protobuf)
find_dependency(ONNX CONFIG)
if(@PLACELAB_HAVE_CUDA@)
  find_dependency(CUDAToolkit)
endif()
include("${CMAKE_CURRENT_LIST_DIR}/placelabTargets.cmake")
]=])
configure_package_config_file(${CMAKE_CURRENT_BINARY_DIR}/placelabConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/placelabConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/placelab)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/placelabConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/placelabConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/placelabConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/placelab)
