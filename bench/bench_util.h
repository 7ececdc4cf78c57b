// What the benchmark programs share: the smoke run. `make bench` measures every benchmark at every
// size; CTest runs each program once with PLACELAB_BENCH_SMOKE=1 and --benchmark_min_time=0
// (bench/CMakeLists.txt), every benchmark for one iteration at a size capped by smoke_size, so that
// a benchmark that throws or aborts fails the test suite and not only the reports.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace placelab::bench {

// True in CTest's smoke run.
inline bool smoke() {
  static const bool on = std::getenv("PLACELAB_BENCH_SMOKE") != nullptr;
  return on;
}

// `n`, or at most `cap` in the smoke run: the size a benchmark builds its input at.
inline int64_t smoke_size(int64_t n, int64_t cap) { return smoke() ? std::min(n, cap) : n; }

}  // namespace placelab::bench
