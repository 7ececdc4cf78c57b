#include "placelab/graph/placement.h"

#include <algorithm>
#include <string>

#include "placelab/core/error.h"

namespace placelab {

void check_placement(std::span<const DeviceId> placement, std::size_t num_ops, std::size_t num_devices,
                     const char* what) {
  if (placement.size() != num_ops)
    throw InputError(std::string(what) + ": placement has " + std::to_string(placement.size()) +
                     " entries: must have one per op (" + std::to_string(num_ops) + ")");
  for (std::size_t i = 0; i < placement.size(); ++i)
    if (placement[i] >= num_devices)
      throw InputError(std::string(what) + ": placement[" + std::to_string(i) + "] = " +
                       std::to_string(placement[i]) + ": must be a device id < " + std::to_string(num_devices));
}

}  // namespace placelab
