// Machines the profiler tests run on: n CPU "devices" sharing this host's memory.
#pragma once

#include <cstdint>
#include <string>

#include "placelab/hwmodels/machine.h"

namespace placelab {

inline Machine cpus(int n, int64_t memory_bytes = int64_t{1} << 32) {
  Machine m;
  m.name = "cpus";
  for (int i = 0; i < n; ++i)
    m.devices.push_back({.name = "cpu:" + std::to_string(i), .kind = DeviceKind::kCpu, .peak_flops_per_s = 1e10,
                         .memory_bandwidth_Bps = 1e10, .memory_bytes = memory_bytes, .streams = 1});
  for (int i = 1; i < n; ++i)
    m.links.push_back({.a = "cpu:0", .b = "cpu:" + std::to_string(i), .kind = LinkKind::kMemory, .bandwidth_Bps = 1e10});
  m.finalize();
  return m;
}

}  // namespace placelab
