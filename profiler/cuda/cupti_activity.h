// Collects CUPTI activity records (concurrent kernels, memcpy, peer memcpy, external correlation)
// into placelab::ActivityRecord. CUPTI's activity API is process-global, so at most one collector
// may exist at a time (checked). Create it only when a CUDA device exists: CUPTI calls fail
// without a driver.
#pragma once

#include <cstdint>
#include <vector>

#include "placelab/profiler/cupti_calibrator.h"

namespace placelab::gpu {

class ActivityCollector {
 public:
  // Registers the buffer callbacks and enables the activity kinds. Throws Error from CUPTI.
  ActivityCollector();
  // Flushes and disables the kinds (errors ignored: destructors never throw).
  ~ActivityCollector();
  ActivityCollector(const ActivityCollector&) = delete;
  ActivityCollector& operator=(const ActivityCollector&) = delete;

  // Work launched between push(id) and pop() gets external id `id` (CUSTOM0 kind).
  void push(uint64_t external_id);
  void pop();
  // Completes every outstanding buffer (cuptiActivityFlushAll with the forced flag; call after
  // synchronising the devices) and returns the records gathered since the last take().
  std::vector<ActivityRecord> take();
  // Records CUPTI reported dropped since the collector started.
  uint64_t dropped() const;
};

}  // namespace placelab::gpu
