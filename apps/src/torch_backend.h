// A placement run for real by PyTorch: `placelab verify --backend torch` and a scenario's
// `verify: {backend: torch}` hand the placement, as the module map export-placement writes, to
// `python3 -m placelab.torch measure`, which places the user's model with placelab.torch.place,
// trains it a few steps and reports the step time (docs/pytorch.md). The C++ side never links torch.
//
//   TorchRunner runner(graph, machine, {.model = "torchvision:resnet50", .args = {"--batch", "8"}});
//   TorchRun r = runner.run(placement, /*check=*/true);   // r.median_s, r.mapped, r.max_grad_rel_error
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/graph/placement.h"
#include "placelab/hwmodels/machine.h"
#include "placelab/sim/environment.h"

namespace placelab::cli {

// Which model placelab.torch builds: a spec (`torchvision:NAME` or `module:function`, a factory;
// docs/python.md) and the flags that go with it (`--batch 8 --image 224`), as `capture` took them.
struct TorchModelSpec {
  std::string model;
  std::vector<std::string> args;
  int steps = 6;  // training steps per measurement; the first is warm-up and not counted
};

// What one measurement gave (the keys of measure's result JSON).
struct TorchRun {
  std::vector<double> steps_s;               // the counted steps
  double median_s = 0;
  std::vector<std::string> devices;          // torch devices the model used
  std::map<std::string, std::string> mapped; // devices this host lacks, run on another ("cuda:1" -> "cpu")
  int64_t moves = 0;                         // values moved between devices per forward
  // With check: the placed step against the unplaced one (relative errors), else nullopt.
  std::optional<double> loss_rel_error, max_grad_rel_error;
  std::string worst_parameter;
};

// The largest relative error of the loss or any gradient that counts as "the same training step":
// float32 sums in another order differ by a few ulps per addition, far below it.
inline constexpr double kTorchNumericsTolerance = 1e-5;

// `text` split at whitespace: the flags of --torch-args ("--batch 8 --image 224"). No quoting: the
// flags of a model spec are words.
std::vector<std::string> split_words(std::string_view text);

class TorchRunner {
 public:
  // `graph` is the captured graph the placements are of (its ops name their modules).
  TorchRunner(const OpGraph& graph, const Machine& machine, TorchModelSpec spec);
  // Runs `placement` as its module map; InputError when it splits a module (PyTorch runs a module
  // on one device) or when measure fails (its message is on stderr). Devices this host lacks run
  // on the CPU (TorchRun::mapped says which).
  TorchRun run(const Placement& placement, bool check) const;
  // Runs the unplaced model with everything on one torch device ("cpu", "cuda:0").
  TorchRun run_all_on(const std::string& torch_device) const;

 private:
  TorchRun measure(const std::vector<std::string>& how) const;
  const OpGraph& graph_;
  const Machine& machine_;
  TorchModelSpec spec_;
};

// A scenario's `verify: {backend: torch}`: each placement measured by TorchRunner (with the
// numerical check), its source saying whether devices were mapped to the CPU and how close the
// placed step's loss and gradients came to the unplaced model's.
std::unique_ptr<Environment> make_torch_verify_environment(const OpGraph& graph, const Machine& machine,
                                                           TorchModelSpec spec);

}  // namespace placelab::cli
