#include "placelab/profiler/executor_buffers.h"

#include <cstdio>

#include "placelab/core/error.h"
#include "placelab/profiler/cpu_kernels.h"

namespace placelab {

std::string gigabytes(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g GB", bytes / 1e9);
  return buf;
}

std::vector<double> executor_buffer_bytes(const OpGraph& graph, std::span<const DeviceId> placement,
                                          std::span<const BufferCopy> copies, std::size_t num_devices,
                                          int64_t max_kernel_bytes, std::string_view limit_option) {
  std::vector<double> bytes(num_devices, 0);
  for (OpId op = 0; op < graph.num_ops(); ++op) {
    const KernelSignature& sig = graph.op(op).kernel;
    const int64_t need = cpu::CpuKernel::required_bytes(sig);
    if (need > max_kernel_bytes)
      throw InputError("op " + graph.op(op).name + ": " + to_string(sig) + " needs " + gigabytes(static_cast<double>(need)) +
                       " of kernel buffers, above the executor's limit of " +
                       gigabytes(static_cast<double>(max_kernel_bytes)) + " (" + std::string(limit_option) + ")");
    bytes[placement[op]] += static_cast<double>(need);
  }
  for (const BufferCopy& c : copies) {
    bytes[c.src] += static_cast<double>(c.bytes);
    bytes[c.dst] += static_cast<double>(c.bytes);
  }
  return bytes;
}

std::optional<std::string> buffers_oom_message(const Machine& machine, std::span<const double> bytes) {
  for (std::size_t d = 0; d < bytes.size(); ++d) {
    const auto memory = static_cast<double>(machine.devices[d].memory_bytes);
    if (bytes[d] > memory)
      return machine.devices[d].name + " needs " + gigabytes(bytes[d]) + " of buffers, " + gigabytes(bytes[d] - memory) +
             " more than its memory";
  }
  return std::nullopt;
}

}  // namespace placelab
