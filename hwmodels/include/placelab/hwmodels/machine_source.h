// A machine named the way users name one — a preset, a machine YAML file, or a calibrated machine
// file (docs/calibration.md) — loaded together with the cost model the simulator should use for
// it: analytic for presets and plain machine files, calibrated for files with a `calibration:`
// block. The command line, scenarios and the Python module all resolve machines through here, so
// "which cost model goes with which file" is decided in one place.
//
//   std::unique_ptr<MachineSource> ms = load_machine_source("k80x4");
//   Simulator sim(graph, *ms->cost);
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "placelab/hwmodels/calibration.h"
#include "placelab/hwmodels/cost_model.h"
#include "placelab/hwmodels/machine.h"

namespace placelab {

// A machine and its cost model. Not movable: `cost` points into this object (machine and
// calibration), so it lives behind a unique_ptr.
struct MachineSource {
  Machine machine;
  std::unique_ptr<Calibration> calibration;  // null for uncalibrated machines
  std::unique_ptr<CostModel> cost;           // refers to machine and calibration above
  MachineSource() = default;
  MachineSource(MachineSource&&) = delete;
};

// True when the file at `path` is a calibrated machine file: it has a top-level `calibration:` key.
// False when it cannot be read (the loader then reports the file).
bool is_calibrated_machine_file(const std::filesystem::path& path);

// Loads a preset by name or a machine file (load_machine's rules), a calibrated machine file when
// the file has a `calibration:` block (load_calibrated_machine). Throws InputError naming the file,
// line and field, or listing the presets for an unknown name.
std::unique_ptr<MachineSource> load_machine_source(const std::string& name_or_path);

}  // namespace placelab
