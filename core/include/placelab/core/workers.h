// Work spread over a fixed number of workers, the caller being worker 0: the route search, the
// simulator's pair table and its batches share this one way of starting and joining threads.
#pragma once

#include <cstddef>
#include <thread>
#include <vector>

namespace placelab {

// Runs step(w) for every w in [0, workers): worker 0 on the calling thread, the others on
// threads joined before it returns. jthreads: a thread the system refuses to start leaves the
// started ones joined, not a std::terminate.
template <typename Step>
void run_on_workers(std::size_t workers, const Step& step) {
  std::vector<std::jthread> pool;
  if (workers > 1) pool.reserve(workers - 1);
  for (std::size_t w = 1; w < workers; ++w) pool.emplace_back(step, w);
  step(std::size_t{0});
}

}  // namespace placelab
