// What an executor allocates before it runs a placement — every op's kernel buffers
// (cpu::CpuKernel::required_bytes) on its device and both ends of every copy — and the out-of-memory
// verdict on it. One rule for the CPU and CUDA executors, so that both refuse and report the same
// placements in the same words (and the CPU tests check the CUDA executor's rule too).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/hwmodels/machine.h"

namespace placelab {

// One copy of a producer's output between devices, as graph/transfers.h decides them.
struct BufferCopy {
  DeviceId src = 0, dst = 0;
  int64_t bytes = 0;
};

// Bytes of buffers per device of `num_devices` (the placement's and copies' devices are below it).
// Throws InputError naming the op when one kernel needs more than max_kernel_bytes; `limit_option`
// names the option that sets that limit, for the message.
std::vector<double> executor_buffer_bytes(const OpGraph& graph, std::span<const DeviceId> placement,
                                          std::span<const BufferCopy> copies, std::size_t num_devices,
                                          int64_t max_kernel_bytes, std::string_view limit_option);

// ExecutionResult::oom_message for the first device whose buffers exceed its memory; nullopt when
// every device's fit.
std::optional<std::string> buffers_oom_message(const Machine& machine, std::span<const double> bytes);

// "1.23 GB": the executors' messages.
std::string gigabytes(double bytes);

}  // namespace placelab
