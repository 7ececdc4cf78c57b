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

# placelab_add_test(<name> [SERIAL|SLOW|GPU] SOURCES ... DEPS ... [PROPERTIES <name> <value>...]): a
# GoogleTest executable registered with CTest (each test with PROPERTIES too, single values only)
# under one label, which `make test-fast` (ctest -L fast) selects by:
#   fast    the default: unit tests, the whole label well under a minute on two cores;
#   slow    programs whose tests take seconds each (runs of the CLI, timing on this machine's cores);
#   serial  never beside other tests (timing checks that need this machine's cores to themselves);
#   gpu     tests that need a GPU (they skip with the reason on machines without one).
function(placelab_add_test name)
  cmake_parse_arguments(ARG "SERIAL;SLOW;GPU" "" "SOURCES;DEPS;PROPERTIES" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main placelab::warnings)
  target_compile_definitions(${name} PRIVATE
    PLACELAB_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    PLACELAB_SHARED_DIR="${PROJECT_SOURCE_DIR}/../shared")
  set(properties TIMEOUT 600 ${ARG_PROPERTIES})
  if(ARG_SERIAL)
    list(APPEND properties RUN_SERIAL TRUE LABELS serial)
  elseif(ARG_SLOW)
    list(APPEND properties LABELS slow)
  elseif(ARG_GPU)
    list(APPEND properties LABELS gpu)
  else()
    list(APPEND properties LABELS fast)
  endif()
  include(GoogleTest)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES ${properties})
endfunction()

# placelab_add_bench(<name> SOURCES ... DEPS ...): a Google Benchmark program, and with the tests
# its smoke run <name>_smoke (label slow): every benchmark once, at a small size
# (bench/bench_util.h), so that one that throws fails the suite.
function(placelab_add_bench name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} benchmark::benchmark placelab::warnings)
  if(PLACELAB_BUILD_TESTS)
    add_test(NAME ${name}_smoke COMMAND ${name} --benchmark_min_time=0)
    set_tests_properties(${name}_smoke PROPERTIES ENVIRONMENT PLACELAB_BENCH_SMOKE=1 LABELS slow TIMEOUT 600)
  endif()
endfunction()
