// Groupings: which ops move together. Learners place groups, not ops; a Grouping maps every op to
// a group and expands a per-group placement into the per-op placement the simulator takes. The
// groupers here build the groupings the papers use. Every grouper keeps ops that share a TF
// colocation key (Op::colocation) in one group, and numbers groups densely in the order of their
// smallest op id, so the same graph always yields the same numbering.
//
//   Grouping g = group_by_single_consumer(graph);       // Mirhoseini et al. 2017
//   Placement ops = g.expand(group_devices);            // group_devices.size() == g.num_groups()
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/graph/placement.h"

namespace placelab {

using GroupId = uint32_t;

class Grouping {
 public:
  Grouping() = default;
  // `group_of_op[op]` is op's group. Ids need not be dense or ordered: they are renumbered densely
  // in the order of each group's smallest op id.
  explicit Grouping(std::vector<GroupId> group_of_op);
  // Every op its own group: what a learner that places single ops trains over.
  static Grouping identity(std::size_t num_ops);

  std::size_t num_ops() const { return group_of_op_.size(); }
  std::size_t num_groups() const { return num_groups_; }
  GroupId group_of(OpId op) const { return group_of_op_[op]; }
  std::span<const GroupId> group_of_op() const { return group_of_op_; }
  // The ops of each group, ascending.
  std::vector<std::vector<OpId>> members() const;

  // The op placement that puts every op on its group's device. `group_devices` has one device per
  // group (PLACELAB_CHECK otherwise).
  Placement expand(std::span<const DeviceId> group_devices) const;
  // The group placement of an op placement in which every group's ops share a device: each group
  // takes the device of its smallest op. Throws Error when some group's ops disagree.
  Placement contract(std::span<const DeviceId> op_devices) const;
  // The group placement nearest an op placement that splits groups: each group on the device of
  // `allowed` most of its ops are on (ties to the earlier device in `allowed`; a group with no op
  // on an allowed device, e.g. CPU-only ops, on allowed[0]). A baseline's placement as a start for
  // a learner that places groups.
  Placement majority(std::span<const DeviceId> op_devices, std::span<const DeviceId> allowed) const;

 private:
  std::vector<GroupId> group_of_op_;
  std::size_t num_groups_ = 0;
};

// One group per distinct non-empty Op::colocation key; ops without a key are alone.
Grouping group_by_colocation(const OpGraph& graph);

// Mirhoseini et al. 2017: start from the colocation groups, then merge a group into its only
// consumer group (the one group other than itself that reads its outputs over data edges) and
// repeat until no group has exactly one consumer group. Control edges do not count as consumption.
Grouping group_by_single_consumer(const OpGraph& graph);

// Spotlight: ops share a group when the first `levels` components of their '/'-separated names
// agree, where an op's name without its last component is used ("tower/conv1/Conv2D" →
// "tower/conv1" at 2 levels; "conv1/Conv2D" → "conv1"; "loss" stays "loss"). Colocation groups are
// then unioned in. `levels` ≥ 1 (InputError otherwise).
Grouping group_by_name_prefix(const OpGraph& graph, int levels = 2);

// One group per Op::layer ≥ 0; ops with layer −1 are alone; then colocation groups are unioned in.
Grouping group_by_layer(const OpGraph& graph);

// Mirhoseini et al. 2017 §4's hand-made colocation groups, read from the op names the zoo emits:
// "each LSTM cell, each embedding lookup, each attention step and each softmax prediction step" is
// a group (an RNN op's scope up to its time-step component, "decoder/attention/t15"), and so is
// each Inception branch (the first two scope components, "Mixed_5b/branch5x5_1"; other models get
// the same two-level scopes). Gradient ops join their forward op's unit (the "gradients/" scope
// is dropped); ops with a colocation key follow the key alone. Then Mirhoseini's single-consumer
// merge runs on the result, as the paper's grouper did after the manual groups, and a group of no
// unit whose inputs all come from one group joins it: TensorFlow's sum of a weight's per-step
// gradients ("gradients/AddN_7"), which colocate_gradients_with_ops puts with the weight.
Grouping group_by_model_units(const OpGraph& graph, bool time_steps = true);

// PyTorch graphs (Op::module, from placelab.torch.capture): one group per module path, so that a
// module's forward, backward and optimizer update move together, as PyTorch can move only whole
// modules. A module's own functional ops are its group; its submodules are groups of their own;
// the model's own ops (module "": the loss, the input, functional ops outside every submodule) are
// one group, as placelab.torch.place runs them on the model's device. Colocation groups are
// unioned in. With depth d > 0 a path counts by its first d names ("layer1.0.conv1" at depth 1
// is "layer1"): fewer, larger groups, still each on one device. Throws InputError for a graph
// without module paths.
Grouping group_by_module(const OpGraph& graph, int depth = 0);

// The grouping a graph gets when the scenario names none: "module" for a PyTorch graph (one whose
// ops name their modules), since only whole modules can move there; "colocation" otherwise.
std::string default_grouping(const OpGraph& graph);

// The groupers' options: METIS's and Scotch's partitions, the module grouping's depth.
// The most parts a partitioner is asked for (more than any graph's ops) and the deepest module
// path kept: the bounds of a scenario's `groups:` and `module_depth:` and of the Python module's.
inline constexpr int kMaxGroupCount = 10'000'000;
inline constexpr int kMaxModuleDepth = 64;

struct GroupingOptions {
  int num_groups = 256;      // G, the number of parts asked of METIS or Scotch (≥ 1)
  int seed = 1;              // METIS_OPTION_SEED, Scotch's random seed; same seed ⇒ same grouping
  double imbalance = 1.03;   // allowed max part weight / average part weight (> 1)
  int module_depth = 0;      // "module": module path names kept (0: the whole path, each module its own group)
  // Throws InputError naming the field, value and rule.
  void validate() const;
};

// METIS k-way partition of the op graph into at most options.num_groups groups, minimising the
// tensor bytes cut while balancing compute. Colocation groups are contracted first so no key is
// split. Vertex weight = the op's FLOPs (Op::flops, else the kernel signature's), edge weight =
// tensor bytes (control edges weigh 1), both scaled to METIS's 32-bit idx_t. Parts METIS leaves
// empty are dropped, so the result may have fewer than G groups. Throws Error when METIS fails.
Grouping group_by_metis(const OpGraph& graph, const GroupingOptions& options);

// The same with Scotch's k-way graph partitioning (SCOTCH_graphPart, quality strategy, one thread,
// seeded): a second partitioner for EAGLE's Table I, whose third grouper, NetworkX's asynchronous
// fluid communities, no packaged C or C++ library offers (docs/learners.md).
Grouping group_by_scotch(const OpGraph& graph, const GroupingOptions& options);

// The names make_grouping accepts, in a fixed order: "colocation", "single_consumer",
// "name_prefix" (2 levels), "layer", "model_units", "scope_units" (group_by_model_units without
// time steps), "metis", "scotch", "module" (PyTorch modules), "none" (one group per op). A scenario's `grouping:` is validated against it.
std::span<const std::string_view> grouping_names();
// Whether `name` is a rule over the graph's own structure and names (colocation … module), not a
// partitioner steered by a group count (metis, scotch) or "none": the ones `inspect` counts.
bool is_grouping_rule(std::string_view name);

// The grouping named `name` (one of grouping_names()) with `options` (the partitioners' and the
// module depth). Throws InputError listing the names for any other name.
Grouping make_grouping(const OpGraph& graph, const std::string& name, const GroupingOptions& options = {});

}  // namespace placelab
