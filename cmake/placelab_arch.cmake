# The x86-64 instruction set the C++ code is compiled for. The neural placers (learners/nn) run
# their LSTMs and attention in float on Eigen, which with AVX2 + FMA runs them 2-3x faster than on
# the x86-64 baseline's SSE2 (a 2048 × 512 × 12 float GEMM: 23 → 60 GFLOP/s; tanh 1.0 → 0.3 ns per
# value on the development VM) — what the speed targets in docs/learners.md need.
#   AUTO      x86-64-v3 (AVX2, FMA, Haswell / Zen and later) when the build machine runs it
#   v3        x86-64-v3 always (the binaries need such a CPU)
#   baseline  the compiler's default
# -ffp-contract=off stops the compiler fusing a*b+c in our own code, so the simulator's and the
# table learners' arithmetic is the same whichever is chosen (Eigen's kernels use FMA on purpose).
set(PLACELAB_ARCH "AUTO" CACHE STRING "x86-64 instruction set: AUTO, v3 or baseline")
set_property(CACHE PLACELAB_ARCH PROPERTY STRINGS AUTO v3 baseline)

set(_placelab_use_v3 OFF)
if(PLACELAB_ARCH STREQUAL "v3")
  set(_placelab_use_v3 ON)
elseif(PLACELAB_ARCH STREQUAL "AUTO" AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$"
       AND NOT CMAKE_CROSSCOMPILING)
  set(_placelab_probe ${CMAKE_BINARY_DIR}/CMakeFiles/placelab_cpu_probe.cpp)
  file(WRITE ${_placelab_probe}
    "int main() { __builtin_cpu_init(); return __builtin_cpu_supports(\"avx2\") && __builtin_cpu_supports(\"fma\") ? 0 : 1; }\n")
  try_run(_placelab_probe_run _placelab_probe_compiled ${CMAKE_BINARY_DIR}/CMakeFiles/placelab_cpu_probe ${_placelab_probe})
  if(_placelab_probe_compiled AND _placelab_probe_run EQUAL 0)
    set(_placelab_use_v3 ON)
  endif()
elseif(NOT PLACELAB_ARCH STREQUAL "baseline" AND NOT PLACELAB_ARCH STREQUAL "AUTO")
  message(FATAL_ERROR "PLACELAB_ARCH=${PLACELAB_ARCH}: must be AUTO, v3 or baseline")
endif()

if(_placelab_use_v3)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-march=x86-64-v3> $<$<COMPILE_LANGUAGE:CXX>:-ffp-contract=off>)
  message(STATUS "placelab: compiling for x86-64-v3 (AVX2, FMA)")
else()
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-ffp-contract=off>)
  message(STATUS "placelab: compiling for the baseline x86-64 instruction set")
endif()
