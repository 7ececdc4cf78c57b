# placelab_add_library(<name> SOURCES ... DEPS ...): the library placelab_<name>, aliased
# placelab::<name>, public headers under <name>/include.
function(placelab_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(placelab_${name} ${ARG_SOURCES})
  add_library(placelab::${name} ALIAS placelab_${name})
  set_target_properties(placelab_${name} PROPERTIES EXPORT_NAME ${name} POSITION_INDEPENDENT_CODE ON)
  target_include_directories(placelab_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:include>)
  target_link_libraries(placelab_${name} PUBLIC ${ARG_DEPS} PRIVATE placelab::warnings ${ARG_PRIVATE_DEPS})
  set_property(GLOBAL APPEND PROPERTY PLACELAB_LIBRARIES placelab_${name})
endfunction()

# placelab_add_test(<name> [SERIAL] SOURCES ... DEPS ...): a GoogleTest executable registered with
# CTest. SERIAL: its tests never run beside other tests (timing checks on this machine's cores).
function(placelab_add_test name)
  cmake_parse_arguments(ARG "SERIAL" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main placelab::warnings)
  target_compile_definitions(${name} PRIVATE
    PLACELAB_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    PLACELAB_SHARED_DIR="${PROJECT_SOURCE_DIR}/../shared")
  include(GoogleTest)
  if(ARG_SERIAL)
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 600 RUN_SERIAL TRUE)
  else()
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 600)
  endif()
endfunction()

# placelab_add_bench(<name> SOURCES ... DEPS ...): a Google Benchmark program.
function(placelab_add_bench name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} benchmark::benchmark placelab::warnings)
endfunction()
