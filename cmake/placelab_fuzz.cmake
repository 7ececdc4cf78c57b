# PLACELAB_FUZZ=ON builds the libFuzzer targets of fuzz/ (docs/reliability.md, "Fuzzing"). Clang
# 16 or later only: every placelab library is then compiled with -fsanitize=fuzzer-no-link, so that the fuzzer
# sees coverage inside the loaders and not only in the target's own file; the targets link
# libFuzzer's main with -fsanitize=fuzzer. Combine with PLACELAB_SANITIZERS=address;undefined (as
# `make fuzz` does) so that memory errors and undefined behaviour are findings too.
if(PLACELAB_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang" OR CMAKE_CXX_COMPILER_VERSION VERSION_LESS 16)
    message(FATAL_ERROR "PLACELAB_FUZZ=ON needs Clang >= 16 (libFuzzer; lambdas capturing structured bindings); configure with -DCMAKE_CXX_COMPILER=clang++-16")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
  # The customary macro of fuzzing builds: limits that bound work per input are set lower where a
  # legitimate but large input would otherwise pass the fuzzer's hang limit (hwmodels/cluster.h).
  add_compile_definitions(FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
  add_custom_target(fuzzers)
endif()

# placelab_add_fuzzer(<name> SOURCES ... DEPS ...): a libFuzzer executable, part of `fuzzers`.
function(placelab_add_fuzzer name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} placelab::warnings)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  add_dependencies(fuzzers ${name})
endfunction()
