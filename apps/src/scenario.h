// Scenario files (docs/scenarios.md): one placement experiment — a model on a machine, the
// learners and baselines to compare, the sample budget, seeds, verification on hardware and where
// results go. Parsed with full validation: unknown keys and bad values name the file and line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "placelab/hwmodels/machine.h"
#include "placelab/learners/registry.h"

namespace placelab::cli {

// Bounds on what a small file can ask for: a name is a folder name; seeds and samples are work and
// memory (a billion seeds or 2^63 samples would allocate or run without end).
inline constexpr std::size_t kMaxNameLength = 200;
// Whether `name` can name a folder placelab writes: letters, digits, '.', '_', '-', not starting
// with '.', at most kMaxNameLength characters — never a path (a scenario's name, sweep --name).
bool is_plain_name(std::string_view name);
inline constexpr int64_t kMaxSeeds = 1000;
inline constexpr int64_t kMaxSamples = 100'000'000;
inline constexpr int64_t kMaxBatch = 10'000;  // a batch is evaluated whole: a stop waits for it
inline constexpr int64_t kMaxVerifyRounds = 100;  // `verify.rounds`, `verify --rounds`: interleaved rounds

// The values of a scenario's `devices:`, the device lists its learners may place on
// (learner_devices).
inline constexpr std::string_view kDeviceLists[] = {"all", "gpus", "tensorflow"};

// One entry of `learners:`: a registry learner (learners/registry.h) and the options the scenario
// set, already validated; every other option keeps the paper's default.
struct LearnerSpec {
  LearnerConfig config;  // config.name is the registry's canonical name, also for an alias
  int line = 0;          // of the entry in the scenario file, for errors found when the run starts
};

struct VerifySpec {
  std::string backend;  // "" (off), "cpu" or "torch"
  // torch: the model placelab.torch builds (`model:`, a spec such as torchvision:resnet50) and its
  // flags (`args:`, "--batch 8"), as `python3 -m placelab.torch capture` took them.
  std::string torch_model, torch_args;
  int64_t every = 0;    // measure the current best every N samples
  int steps = 5;        // executor steps per measurement (the first is warm-up)
  // Re-time the graph's kernels in situ around each measurement and report the simulator's
  // prediction with them beside the file's (needs a `calibrate --backend cpu` machine file).
  bool in_situ = false;
  int rounds = 1;       // interleaved rounds per measurement (median); 3 when in_situ and unset
  int line = 0;         // of `verify:` in the scenario file, for errors found when the run starts
};

// A published figure to print beside ours in report.md: seconds per step, or OOM.
struct PaperFigure {
  double step_time_s = 0;
  bool oom = false;
};

struct Scenario {
  std::filesystem::path file;       // the scenario file; relative paths inside resolve from its folder
  std::string name;                 // default: the file stem
  std::string description;
  std::string model;                // zoo spec, or empty when `graph` is set
  std::filesystem::path graph;      // graph JSON file, or empty when `model` is set
  std::string machine = "k80x4";    // preset, machine YAML or calibrated machine file
  std::string devices = "all";      // which devices learners may use: one of kDeviceLists
  // One of grouping_names() (learners/grouping.h); empty: default_grouping(graph), decided when the
  // graph is loaded ("module" for a PyTorch graph, else "colocation").
  std::string grouping;
  int metis_groups = 256;
  int module_depth = 0;             // grouping "module": path names kept (0: whole paths)
  // grouping "module": also run each learner placing single ops (which PyTorch cannot run) and
  // report its best beside the executable one.
  bool op_level = true;
  int64_t samples = 2400;           // per learner and seed
  int64_t batch = 12;               // placements per evaluation batch
  std::vector<uint64_t> seeds{1};
  std::vector<LearnerSpec> learners;
  // `run --baselines-only`: the learners the file names, left out of this run (`learners` is then
  // empty, so the summary's fingerprint is not the whole scenario's); summary.json and report.md
  // name them.
  std::vector<std::string> skipped_learners;
  std::vector<std::string> baselines;  // canonical registry names
  VerifySpec verify;
  int64_t checkpoint_every = 600;   // samples between checkpoints (0 = off)
  std::filesystem::path output;     // default results/<name>
  std::string paper_source;         // where the paper figures come from
  // Where the simulation disagrees with the paper and why, in words; printed under report.md's table.
  std::string paper_notes;
  std::map<std::string, PaperFigure> paper;  // canonical learner or baseline name → figure
};

// Parses and validates a scenario file. Throws InputError "file:line: key = value: rule".
Scenario read_scenario(const std::filesystem::path& path);

// The devices the scenario's learners place on (its action space), in machine order, by its
// `devices`: "all" every device; "gpus" the GPUs; "tensorflow" the device list TensorFlow 1.x
// gives a placer — one CPU device for the whole host (`/cpu:0`) plus the GPUs — where the host's
// device is the machine's first CPU (Machine::default_cpu: where cpu_only ops run, as TensorFlow
// runs them on that same `/cpu:0`) and any other CPU is left out (docs/scenarios.md). Throws
// InputError naming the scenario file when the list would be empty or `tensorflow` finds no CPU.
std::vector<DeviceId> learner_devices(const Scenario& s, const Machine& machine);
// A sweep's scenarios, all read and validated before anything runs (`placelab sweep`, its MPI
// form and placelab.sweep): each file once, no two scenarios of one name or output folder (a
// name is the sweep's log file, the output its results), and the sweep's name a plain name
// (it names results/sweep-<name>).
std::vector<Scenario> read_sweep(const std::vector<std::filesystem::path>& files, const std::string& sweep_name);

// Fingerprints (16 hex digits: FNV-1a 64 of a canonical JSON) of what determines results, so that
// --resume and sweep reuse only results of this scenario as it is now. The scenario's: its model
// spec or graph file's content, machine (a file's or a preset's content too), devices, grouping, groups, samples,
// batch and verify settings — not its name, description, paper figures, output or checkpoint
// interval. A run's adds a learner's name, its options as set and the seed; a summary's, the
// learners, baselines and seeds.
// The run and summary fingerprints take the scenario's, which reads its files, computed once.
std::string scenario_fingerprint(const Scenario& s);
std::string run_fingerprint(const std::string& scenario_print, const LearnerSpec& learner, uint64_t seed);
std::string summary_fingerprint(const std::string& scenario_print, const Scenario& s, const std::vector<uint64_t>& seeds);

}  // namespace placelab::cli
