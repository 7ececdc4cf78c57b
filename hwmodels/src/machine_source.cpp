#include "placelab/hwmodels/machine_source.h"

#include <filesystem>
#include <fstream>

#include "placelab/hwmodels/machine_io.h"

namespace placelab {

bool is_calibrated_machine_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("calibration:", 0) == 0) return true;
  return false;
}

std::unique_ptr<MachineSource> load_machine_source(const std::string& name_or_path) {
  auto out = std::make_unique<MachineSource>();
  const std::filesystem::path path(name_or_path);
  std::error_code ec;  // a name the system cannot look up is no file: the loaders below say so
  if (std::filesystem::is_regular_file(path, ec) && is_calibrated_machine_file(path)) {
    CalibratedMachine cm = load_calibrated_machine(path);
    out->machine = std::move(cm.machine);
    out->calibration = std::make_unique<Calibration>(std::move(cm.calibration));
    out->cost = std::make_unique<CalibratedCostModel>(out->machine, *out->calibration);
  } else {
    out->machine = load_machine(name_or_path);
    out->cost = std::make_unique<AnalyticCostModel>(out->machine);
  }
  return out;
}

}  // namespace placelab
