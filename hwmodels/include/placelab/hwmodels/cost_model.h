// The cost model: how long an op takes on a device and how long a transfer takes between two
// devices. The simulator asks it once per graph when it prepares; learners never see it. An op's
// own measured time (Op::measured_s, from the graph file) comes before every model's answer.
// AnalyticCostModel is a roofline with per-kernel-class efficiency; calibrated models (from
// measurements) derive from CostModel too.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/hwmodels/machine.h"

namespace placelab {

// Where a predicted op time came from: a user comparing a prediction with a real run needs to
// know which ops were measured and which were guessed from a fit or the roofline.
// In order of precedence: a cost model answers the first that has a time.
enum class CostSource : uint8_t {
  kGraph,     // the graph carries the user's measured time for the op (Op::measured_s)
  kMeasured,  // the op's exact kernel signature was measured on the device (calibration)
  kClassFit,  // the device's fit for the op's kernel class
  kAnalytic,  // none of these: the analytic roofline
};
inline constexpr int kNumCostSources = 4;
std::string_view cost_source_name(CostSource source);  // "graph", "measured", "fit", "analytic"

// The op's measured time on `device` (Op::measured_s): the entry keyed by the device's name, else
// the one keyed by its kind ("cpu", "gpu"), else nullopt.
std::optional<double> measured_time_s(const Op& op, const Device& device);

// Throws InputError when an op of `graph` has a measured time keyed by neither a device kind nor a
// device name of `machine`, naming the op, the key and the valid names.
void check_measured_times(const OpGraph& graph, const Machine& machine);

struct CostLookup {
  double time_s = 0;  // launch overhead included, as CostModel::op_time_s
  CostSource source = CostSource::kAnalytic;
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  // Seconds one execution of `op` takes on `device`, launch overhead included. Never negative.
  // The op's own measured time for the device (measured_time_s; noop ops too) wins over every
  // model; else the model's answer (model_op_time_s).
  double op_time_s(const Op& op, DeviceId device) const;
  // The same time and its source: kGraph for a measured time of the op, else model_lookup's.
  CostLookup lookup(const Op& op, DeviceId device) const;
  // Seconds a transfer of `bytes` (≥ 0; 0 still pays latency) from src to dst holds its route:
  // latency + bytes / bandwidth; 0 when src == dst.
  // The default uses the machine's route; calibrated models may override per device pair.
  virtual double transfer_time_s(int64_t bytes, DeviceId src, DeviceId dst) const;
  // Whether transfer_time_s(bytes, src, dst) is latency + bytes / bandwidth for every byte count,
  // so the simulator may tabulate its line without probing it (16.8 million pairs at 4,096
  // devices). The default promises nothing; a model that promises it must not let a subclass
  // change transfer_time_s (the models here make it final).
  virtual bool transfer_is_affine(DeviceId /*src*/, DeviceId /*dst*/) const { return false; }
  // Host seconds an eager framework's thread spends issuing `op` (docs/simulator.md, "Eager
  // execution"): Python, dispatcher, autograd and the launch call. The default is the dispatch_s
  // of the machine's first CPU (kDefaultDispatchS without a CPU); a calibration from a trace
  // answers per op type. Finite, >= 0.
  virtual double dispatch_time_s(const Op& op) const;
  // A short description for reports ("analytic roofline", "calibrated: host.yaml").
  virtual std::string describe() const = 0;
  // The device whose op costs `device` shares: a device id ≤ `device`, of the same kind, for which
  // model_op_time_s and model_lookup answer exactly as for `device` for every op; all devices of
  // one such class name the same representative. Measured times keyed by a device name can tell
  // two of them apart: op_time_representatives(graph) accounts for those. The simulator prices
  // each op once per representative, so a machine of 512 identical GPUs costs what one GPU does to
  // prepare. The default promises nothing: every device is its own.
  virtual DeviceId op_time_representative(DeviceId device) const { return device; }
  // Per device, the representative for pricing the ops of `graph`: op_time_representative, except
  // that a device some op names in a measured time is its own, and the others of its class
  // share the first one no op names. A device id ≤ the device, of the same kind; every device
  // maps to one that maps to itself.
  std::vector<DeviceId> op_time_representatives(const OpGraph& graph) const;

  const Machine& machine() const { return *machine_; }

 protected:
  explicit CostModel(const Machine& machine) : machine_(&machine) {}
  // The model's own time for `op` on `device` (no measured time of the op applies), as op_time_s.
  virtual double model_op_time_s(const Op& op, DeviceId device) const = 0;
  // The same time and its source. Models that measure nothing answer kAnalytic.
  virtual CostLookup model_lookup(const Op& op, DeviceId device) const {
    return {model_op_time_s(op, device), CostSource::kAnalytic};
  }

 private:
  const Machine* machine_;  // not owned; must outlive the model
};

// Fraction of peak a kernel class reaches, separately for compute and memory, per device kind.
struct ClassEfficiency {
  double compute = 1.0;  // of Device::peak_flops_per_s
  double memory = 1.0;   // of Device::memory_bandwidth_Bps
};

// Roofline: time = launch_overhead + max(flops / (peak · eff.compute), bytes / (bw · eff.memory)).
// flops and bytes come from the op (Op::flops, Op::bytes_accessed), falling back to the kernel
// signature (kernel_flops / kernel_bytes) when the op leaves them 0. A noop kernel costs the
// launch overhead only. The default efficiencies and their sources are in docs/machines.md.
//
//   AnalyticCostModel cost(machine);              // defaults; or pass edited Options
//   double t = cost.op_time_s(graph.op(id), 1);   // seconds on machine.devices[1]
class AnalyticCostModel : public CostModel {
 public:
  struct Options {
    // Indexed [kind][class]: kind 0 = CPU, 1 = GPU (efficiency_index(DeviceKind)); class by
    // static_cast<int>(KernelClass). Every value must lie in (0, 1].
    std::array<std::array<ClassEfficiency, kNumKernelClasses>, 2> efficiency;
    Options();  // sensible defaults per class (documented in docs/machines.md)
    // Throws InputError "efficiency[gpu][gemm].compute = 1.5: must be in (0, 1]".
    void validate() const;
  };
  static constexpr int efficiency_index(DeviceKind kind) { return kind == DeviceKind::kCpu ? 0 : 1; }

  // Validates `options` (InputError). `machine` must be finalised and outlive the model.
  explicit AnalyticCostModel(const Machine& machine, Options options = {});
  std::string describe() const override { return "analytic roofline"; }
  // Devices with equal kind, peak_flops, memory_bandwidth_Bps, launch_overhead_s and efficiency
  // profile: the only fields op_time_s reads.
  DeviceId op_time_representative(DeviceId device) const override;
  // The machine's route, latency + bytes / bandwidth: affine for every pair.
  double transfer_time_s(int64_t bytes, DeviceId src, DeviceId dst) const final {
    return CostModel::transfer_time_s(bytes, src, dst);
  }
  bool transfer_is_affine(DeviceId /*src*/, DeviceId /*dst*/) const final { return true; }
  const Options& options() const { return options_; }

 protected:
  // Requires device < machine().num_devices().
  double model_op_time_s(const Op& op, DeviceId device) const override;

 private:
  Options options_;
  std::vector<DeviceId> representative_;  // per device
};

// Per op type, how many ops (and how many seconds of one step) each cost source priced: the
// answer to "how much of this prediction was measured?" (`placelab simulate --cost-sources`).
struct CostSourceRow {
  std::string op_type;  // Op::type; "(all)" for the totals row
  std::array<int64_t, kNumCostSources> ops{};
  std::array<double, kNumCostSources> time_s{};
  int64_t total_ops() const { return ops[0] + ops[1] + ops[2] + ops[3]; }
  double total_time_s() const { return time_s[0] + time_s[1] + time_s[2] + time_s[3]; }
};
struct CostSourceSummary {
  CostSourceRow total;
  std::vector<CostSourceRow> by_type;  // largest total time first, ties by type name
  std::vector<CostSourceRow> by_phase; // indexed by Phase; op_type holds the phase's name
  std::vector<CostLookup> per_op;      // indexed by OpId
};
// Prices every op of `graph` on device_of_op[op] (one entry per op) with `cost`.
CostSourceSummary summarize_cost_sources(const OpGraph& graph, const CostModel& cost,
                                         std::span<const DeviceId> device_of_op);

}  // namespace placelab
