// Placements: one device id per op. A device id indexes Machine::devices (hwmodels/).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace placelab {

using DeviceId = uint16_t;

// placement[op] is the device that runs op. Plain vectors so batches are cheap to store and pass
// as spans; validate with check_placement before handing one to code that trusts it.
using Placement = std::vector<DeviceId>;

// Throws InputError when `placement` has a size other than `num_ops` or a device id ≥ num_devices.
// `what` names the placement's origin (a file, "random:3") in the message.
void check_placement(std::span<const DeviceId> placement, std::size_t num_ops, std::size_t num_devices,
                     const char* what);

}  // namespace placelab
