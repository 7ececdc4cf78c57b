// CPU devices: a device is a disjoint set of logical cores of this machine. These helpers find
// the cores the process may use, split them into devices and pin threads to a device's cores, for
// the CPU calibration backend and the CPU executor.
#pragma once

#include <functional>
#include <span>
#include <vector>

namespace placelab::cpu {

// The logical cores this process may run on (its affinity mask), ascending. Never empty: when
// the mask cannot be read, every online core.
std::vector<int> available_cores();

// Splits `cores` into consecutive disjoint sets of `cores_per_device` (≥ 1) cores; a remainder
// too small for a device is left unused. `max_devices` > 0 keeps at most that many devices.
// Throws InputError when not even one device fits.
std::vector<std::vector<int>> split_cores(std::span<const int> cores, int cores_per_device, int max_devices = 0);

// Core sets for `num_devices` devices when nobody chose them: the available cores split evenly
// (device i gets the i-th share); with fewer cores than devices, device i gets core i mod #cores
// (devices then share cores and measured times include the contention).
std::vector<std::vector<int>> default_device_cores(int num_devices);

// Pins the calling thread to `cores`. Returns false when the OS refuses (a core outside the
// cgroup, no permission); the thread then keeps its previous affinity.
bool pin_current_thread(std::span<const int> cores);

// Runs `fn` on a new thread pinned to `cores` (best effort, as pin_current_thread) and waits for
// it; an exception thrown by `fn` is rethrown here.
void run_pinned(std::span<const int> cores, const std::function<void()>& fn);

}  // namespace placelab::cpu
