#include "placelab/learners/grouping.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <unordered_map>

#include "partition.h"
#include "placelab/core/error.h"
#include "placelab/core/keys.h"

namespace placelab {

namespace {

// Union-find over op ids; the representative of a set is always its smallest member, which keeps
// every result independent of the order in which unions happen.
class UnionFind {
 public:
  explicit UnionFind(std::size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0u); }
  uint32_t find(uint32_t x) {
    while (parent_[x] != x) {
      parent_[x] = parent_[parent_[x]];
      x = parent_[x];
    }
    return x;
  }
  // Returns the surviving representative.
  uint32_t unite(uint32_t a, uint32_t b) {
    a = find(a);
    b = find(b);
    if (a == b) return a;
    if (b < a) std::swap(a, b);
    parent_[b] = a;
    return a;
  }
  std::vector<GroupId> labels() {
    std::vector<GroupId> out(parent_.size());
    for (uint32_t i = 0; i < parent_.size(); ++i) out[i] = find(i);
    return out;
  }

 private:
  std::vector<uint32_t> parent_;
};

// Unions ops that share a non-empty colocation key.
void unite_colocation(const OpGraph& graph, UnionFind& uf) {
  std::unordered_map<std::string_view, OpId> first;
  for (OpId op = 0; op < graph.num_ops(); ++op) {
    const std::string& key = graph.op(op).colocation;
    if (key.empty()) continue;
    auto [it, inserted] = first.emplace(key, op);
    if (!inserted) uf.unite(it->second, op);
  }
}

// Unions ops with equal keys (empty keys never match anything).
void unite_by_key(const std::vector<std::string>& keys, UnionFind& uf) {
  std::unordered_map<std::string_view, OpId> first;
  for (OpId op = 0; op < keys.size(); ++op) {
    if (keys[op].empty()) continue;
    auto [it, inserted] = first.emplace(keys[op], op);
    if (!inserted) uf.unite(it->second, op);
  }
}

}  // namespace

Grouping Grouping::identity(std::size_t num_ops) {
  std::vector<GroupId> labels(num_ops);
  std::iota(labels.begin(), labels.end(), GroupId{0});
  return Grouping(std::move(labels));
}

Grouping::Grouping(std::vector<GroupId> group_of_op) : group_of_op_(std::move(group_of_op)) {
  std::unordered_map<GroupId, GroupId> dense;
  for (GroupId& g : group_of_op_) {
    auto [it, inserted] = dense.emplace(g, static_cast<GroupId>(dense.size()));
    g = it->second;
  }
  num_groups_ = dense.size();
}

std::vector<std::vector<OpId>> Grouping::members() const {
  std::vector<std::vector<OpId>> out(num_groups_);
  for (OpId op = 0; op < group_of_op_.size(); ++op) out[group_of_op_[op]].push_back(op);
  return out;
}

Placement Grouping::expand(std::span<const DeviceId> group_devices) const {
  PLACELAB_CHECK(group_devices.size() == num_groups_)
      << "group placement has " << group_devices.size() << " entries for " << num_groups_ << " groups";
  Placement out(group_of_op_.size());
  for (std::size_t op = 0; op < out.size(); ++op) out[op] = group_devices[group_of_op_[op]];
  return out;
}

Placement Grouping::majority(std::span<const DeviceId> op_devices, std::span<const DeviceId> allowed) const {
  PLACELAB_CHECK(op_devices.size() == group_of_op_.size() && !allowed.empty())
      << "op placement has " << op_devices.size() << " entries for " << group_of_op_.size() << " ops";
  std::vector<uint32_t> votes(num_groups_ * allowed.size(), 0);
  for (std::size_t op = 0; op < op_devices.size(); ++op) {
    const auto it = std::find(allowed.begin(), allowed.end(), op_devices[op]);
    if (it != allowed.end()) ++votes[group_of_op_[op] * allowed.size() + static_cast<std::size_t>(it - allowed.begin())];
  }
  Placement out(num_groups_);
  for (std::size_t g = 0; g < num_groups_; ++g) {
    const auto row = votes.begin() + static_cast<std::ptrdiff_t>(g * allowed.size());
    out[g] = allowed[static_cast<std::size_t>(std::max_element(row, row + static_cast<std::ptrdiff_t>(allowed.size())) - row)];
  }
  return out;
}

Placement Grouping::contract(std::span<const DeviceId> op_devices) const {
  PLACELAB_CHECK(op_devices.size() == group_of_op_.size())
      << "op placement has " << op_devices.size() << " entries for " << group_of_op_.size() << " ops";
  Placement out(num_groups_);
  std::vector<bool> seen(num_groups_, false);
  for (std::size_t op = 0; op < op_devices.size(); ++op) {
    const GroupId g = group_of_op_[op];
    if (!seen[g]) {
      seen[g] = true;
      out[g] = op_devices[op];
    } else if (out[g] != op_devices[op]) {
      throw Error("placement splits group " + std::to_string(g) + ": op " + std::to_string(op) + " is on device " +
                  std::to_string(op_devices[op]) + ", the group's first op on " + std::to_string(out[g]));
    }
  }
  return out;
}

Grouping group_by_colocation(const OpGraph& graph) {
  UnionFind uf(graph.num_ops());
  unite_colocation(graph, uf);
  return Grouping(uf.labels());
}

namespace {

// Calls visit(g) for each group g other than r that a data edge of an op of `frontier` (r's ops
// that may still have such an edge; consumers: out-edges, else in-edges) leads to or comes from,
// until visit returns false. Only data edges count: a control edge moves no tensor, so colocating
// gains nothing. An op whose edges of that direction all stay inside r is dropped from the
// frontier for good (groups only grow), so a long chain collapsed into one group is not rescanned
// op by op at every later merge — what made the merges quadratic.
template <typename Visit>
void scan_frontier(const OpGraph& graph, UnionFind& uf, std::vector<OpId>& frontier, uint32_t r, bool consumers,
                   Visit&& visit) {
  bool go_on = true;
  for (std::size_t i = 0; i < frontier.size() && go_on;) {
    bool outside = false;
    auto edge = [&](OpId other, const Tensor& t) {
      if (t.control || !go_on) return;
      const uint32_t g = uf.find(other);
      if (g == r) return;
      outside = true;
      go_on = visit(g);
    };
    if (consumers) graph.for_each_out_edge(frontier[i], edge);
    else graph.for_each_in_edge(frontier[i], edge);
    if (outside) {
      ++i;
    } else {
      frontier[i] = frontier.back();
      frontier.pop_back();
    }
  }
}

// The one group other than r that r's ops send data to (consumers) or receive data from
// (producers), or r itself when there is none or several.
uint32_t sole_neighbour(const OpGraph& graph, UnionFind& uf, std::vector<OpId>& frontier, uint32_t r, bool consumers) {
  uint32_t found = r;
  bool several = false;
  scan_frontier(graph, uf, frontier, r, consumers, [&](uint32_t g) {
    if (found == r) found = g;
    else if (found != g) several = true;
    return !several;
  });
  return several ? r : found;
}

// Groups' op lists as merges grow them: each list moves into the larger one (so an op moves
// O(log n) times), and per direction the frontier of sole_neighbour.
struct GroupLists {
  std::vector<std::vector<OpId>> out_frontier, in_frontier;
  GroupLists(const OpGraph& graph, UnionFind& uf) : out_frontier(graph.num_ops()), in_frontier(graph.num_ops()) {
    for (OpId op = 0; op < graph.num_ops(); ++op) {
      out_frontier[uf.find(op)].push_back(op);
      in_frontier[uf.find(op)].push_back(op);
    }
  }
  void merge(uint32_t keep, uint32_t gone) {
    for (auto* lists : {&out_frontier, &in_frontier}) {
      auto& a = (*lists)[keep];
      auto& b = (*lists)[gone];
      if (a.size() < b.size()) a.swap(b);
      a.insert(a.end(), b.begin(), b.end());
      b.clear();
      b.shrink_to_fit();
    }
  }
};

// Mirhoseini et al.'s merge, from the groups `uf` holds: merge a group into its only consumer group
// and repeat until no group has exactly one consumer group. With `anchored` (indexed by op, true for
// an op of a fixed unit), only groups without an anchored op move; a group that absorbs one is
// anchored from then on.
void merge_single_consumers(const OpGraph& graph, UnionFind& uf, std::vector<bool> anchored = {}) {
  const std::size_t n = graph.num_ops();
  GroupLists lists(graph, uf);
  if (!anchored.empty())
    for (OpId op = 0; op < n; ++op)
      if (anchored[op]) anchored[uf.find(op)] = true;  // by representative from here on

  // Worklist in descending representative order: consumers tend to have larger ids than their
  // producers, so chains collapse from the end in one sweep; merges re-queue the producers whose
  // consumer sets changed. Merging g into its only consumer h cannot create a cycle: every path
  // out of g already passes through h.
  std::vector<uint32_t> work;
  std::vector<bool> queued(n, false);
  for (uint32_t r = 0; r < n; ++r)
    if (uf.find(r) == r) {
      work.push_back(r);
      queued[r] = true;
    }
  std::vector<uint32_t> producers;
  while (!work.empty()) {
    const uint32_t r = work.back();
    work.pop_back();
    queued[r] = false;
    if (uf.find(r) != r || (!anchored.empty() && anchored[r])) continue;
    const uint32_t h = sole_neighbour(graph, uf, lists.out_frontier[r], r, /*consumers=*/true);
    if (h == r) continue;
    // r's producer groups (outside r), read before the merge; h among them means h consumed r,
    // and the merged group may now have one consumer less than h had.
    producers.clear();
    scan_frontier(graph, uf, lists.in_frontier[r], r, /*consumers=*/false, [&](uint32_t g) {
      producers.push_back(g);
      return true;
    });
    const bool h_fed_r = std::find(producers.begin(), producers.end(), h) != producers.end();
    const bool h_pending = queued[h];
    const uint32_t keep = uf.unite(r, h);
    const uint32_t gone = keep == r ? h : r;
    if (!anchored.empty()) anchored[keep] = anchored[r] || anchored[h];
    lists.merge(keep, gone);
    for (uint32_t p : producers) {
      const uint32_t pr = uf.find(p);
      if (pr != keep && !queued[pr]) {
        queued[pr] = true;
        work.push_back(pr);
      }
    }
    // The merged group's consumers are h's, less r: it needs a look only if h had not had one
    // yet or r was among h's consumers.
    if ((h_pending || h_fed_r) && !queued[keep]) {
      queued[keep] = true;
      work.push_back(keep);
    }
  }
}

// Merges every group without an anchored op whose data inputs all come from one other group into
// that group, until none is left. The case it is for: TensorFlow sums the gradients a tensor gets
// from several consumers in an AddN named in the bare "gradients/" scope ("gradients/AddN_7": a
// weight's sum of its per-step gradients), which names no unit, and colocates it with the tensor's
// producer under colocate_gradients_with_ops (as tensorflow/nmt and the papers' setups run). Its
// consumers (the global-norm clipping) are elsewhere, so the single-consumer merge leaves it alone.
void merge_sole_producers(const OpGraph& graph, UnionFind& uf, const std::vector<bool>& anchored_ops) {
  const std::size_t n = graph.num_ops();
  std::vector<bool> anchored(n, false);
  for (OpId op = 0; op < n; ++op)
    if (anchored_ops[op]) anchored[uf.find(op)] = true;
  GroupLists lists(graph, uf);
  for (bool merged = true; merged;) {
    merged = false;
    for (uint32_t r = 0; r < n; ++r) {
      if (uf.find(r) != r || anchored[r] || lists.in_frontier[r].empty()) continue;
      const uint32_t producer = sole_neighbour(graph, uf, lists.in_frontier[r], r, /*consumers=*/false);
      if (producer == r) continue;
      const uint32_t keep = uf.unite(r, producer);
      const uint32_t gone = keep == r ? producer : r;
      anchored[keep] = anchored[r] || anchored[producer];
      lists.merge(keep, gone);
      merged = true;
    }
  }
}

// The hand-made unit of a name for group_by_model_units: the gradient scope is dropped (TF names
// an op's gradient after it); an RNN op's unit ends at its time-step component ("t<digits>", the
// zoo's per-step scope); any other op's is the first two components of its scope, where a
// torchvision Inception branch layer ("branch7x7dbl_3", "branch3x3_2a") stands for its branch
// ("branch7x7dbl"). Empty for a top-level name.
std::string model_unit_key(std::string_view name, bool time_steps) {
  if (name.starts_with("gradients/")) name.remove_prefix(10);
  const std::size_t last = name.rfind('/');
  if (last == std::string_view::npos) return {};
  const std::string_view scope = name.substr(0, last);
  auto is_digit = [](char ch) { return ch >= '0' && ch <= '9'; };
  std::vector<std::string_view> parts;
  for (std::size_t begin = 0; begin <= scope.size();) {
    std::size_t end = scope.find('/', begin);
    if (end == std::string_view::npos) end = scope.size();
    const std::string_view c = scope.substr(begin, end - begin);
    if (c.size() >= 2 && c[0] == 't' && std::all_of(c.begin() + 1, c.end(), is_digit)) {
      if (time_steps || parts.empty()) return std::string(scope.substr(0, end));  // an RNN time step
      break;  // the scope of the cell or step, without the time step
    }
    parts.push_back(c);
    begin = end + 1;
  }
  std::string key(parts[0]);
  if (parts.size() < 2) return key;
  std::string_view second = parts[1];
  if (second.starts_with("branch")) {  // branch5x5_1, branch3x3_2a -> branch5x5, branch3x3
    std::size_t end = second.size();
    if (end > 0 && second[end - 1] >= 'a' && second[end - 1] <= 'z' && end >= 2 && is_digit(second[end - 2])) --end;
    std::size_t digits = end;
    while (digits > 0 && is_digit(second[digits - 1])) --digits;
    if (digits < end && digits > 0 && second[digits - 1] == '_') second = second.substr(0, digits - 1);
  }
  return key + "/" + std::string(second);
}

}  // namespace

Grouping group_by_single_consumer(const OpGraph& graph) {
  UnionFind uf(graph.num_ops());
  unite_colocation(graph, uf);
  merge_single_consumers(graph, uf);
  return Grouping(uf.labels());
}

Grouping group_by_model_units(const OpGraph& graph, bool time_steps) {
  std::vector<std::string> keys(graph.num_ops());
  for (OpId op = 0; op < graph.num_ops(); ++op) {  // a colocated op joins the unit of its key (a variable)
    const Op& o = graph.op(op);
    keys[op] = model_unit_key(o.colocation.empty() ? o.name : o.colocation, time_steps);
  }
  UnionFind uf(graph.num_ops());
  unite_by_key(keys, uf);
  unite_colocation(graph, uf);
  std::vector<bool> anchored(graph.num_ops());
  for (OpId op = 0; op < graph.num_ops(); ++op) anchored[op] = !keys[op].empty();
  merge_single_consumers(graph, uf, anchored);
  merge_sole_producers(graph, uf, anchored);
  return Grouping(uf.labels());
}

Grouping group_by_name_prefix(const OpGraph& graph, int levels) {
  if (levels < 1)
    throw InputError("name_prefix.levels = " + std::to_string(levels) + ": must be >= 1");
  std::vector<std::string> keys(graph.num_ops());
  for (OpId op = 0; op < graph.num_ops(); ++op) {
    const std::string& name = graph.op(op).name;
    // The scope of the op is its name without the last component; a top-level op is its own key.
    const std::size_t last = name.rfind('/');
    if (last == std::string::npos) {
      keys[op] = "\x01" + name;  // cannot collide with a scope (names hold no control characters)
      continue;
    }
    // Cut after the `levels`-th '/', but never past the scope (the last '/').
    std::size_t end = name.find('/');
    for (int taken = 1; taken < levels && end < last; ++taken) end = name.find('/', end + 1);
    keys[op] = name.substr(0, end);
  }
  UnionFind uf(graph.num_ops());
  unite_by_key(keys, uf);
  unite_colocation(graph, uf);
  return Grouping(uf.labels());
}

Grouping group_by_layer(const OpGraph& graph) {
  std::vector<std::string> keys(graph.num_ops());
  for (OpId op = 0; op < graph.num_ops(); ++op)
    if (graph.op(op).layer >= 0) keys[op] = std::to_string(graph.op(op).layer);
  UnionFind uf(graph.num_ops());
  unite_by_key(keys, uf);
  unite_colocation(graph, uf);
  return Grouping(uf.labels());
}

Grouping group_by_module(const OpGraph& graph, int depth) {
  if (depth < 0) throw InputError("module_depth = " + std::to_string(depth) + ": must be >= 0 (0: whole paths)");
  std::vector<std::string> keys(graph.num_ops());
  bool any = false;
  for (OpId op = 0; op < graph.num_ops(); ++op) {
    std::string_view module = graph.op(op).module;
    any = any || !module.empty();
    if (depth > 0) {
      // The first `depth` names of the path: "layer1.0.conv1" at depth 2 is "layer1.0".
      std::size_t end = std::string_view::npos;
      for (int level = 0; level < depth; ++level) {
        end = module.find('.', level == 0 ? 0 : end + 1);
        if (end == std::string_view::npos) break;
      }
      if (end != std::string_view::npos) module = module.substr(0, end);
    }
    // The model's own ops (module "": its functional ops outside every submodule, the loss, the
    // input) are one group too, as PyTorch runs them on the model's device; "/" is in no module
    // path (named_modules joins names with '.'), so the key cannot meet a real one.
    std::string key(1, module.empty() ? '/' : 'm');
    key.append(module);
    keys[op] = std::move(key);
  }
  if (!any)
    throw InputError("grouping = \"module\": the graph names no PyTorch module (Op::module); capture it with "
                     "placelab.torch.capture (docs/python.md) or use another grouping");
  UnionFind uf(graph.num_ops());
  unite_by_key(keys, uf);
  unite_colocation(graph, uf);
  return Grouping(uf.labels());
}

void GroupingOptions::validate() const {
  if (num_groups < 1 || num_groups > kMaxGroupCount)
    throw InputError("metis.num_groups = " + std::to_string(num_groups) + ": must be in [1, " +
                     std::to_string(kMaxGroupCount) + "]");
  if (!(imbalance > 1.0) || imbalance > 10.0)
    throw InputError("metis.imbalance = " + std::to_string(imbalance) + ": must be in (1, 10]");
  if (module_depth < 0 || module_depth > kMaxModuleDepth)
    throw InputError("module_depth = " + std::to_string(module_depth) + ": must be in [0, " +
                     std::to_string(kMaxModuleDepth) + "] (0: whole paths)");
}

namespace {
// Colocation groups contracted, weighted by FLOPs and bytes, partitioned by `partition`.
template <typename Partition>
Grouping group_by_partition(const OpGraph& graph, const GroupingOptions& options, Partition&& partition) {
  options.validate();
  const Grouping units = group_by_colocation(graph);
  const detail::WeightedGraph wg =
      detail::contract_graph(graph, units, [&](OpId op) { return detail::op_flops(graph.op(op)); });
  const std::vector<int32_t> part = partition(wg, options.num_groups, options.seed, options.imbalance);
  std::vector<GroupId> labels(graph.num_ops());
  for (OpId op = 0; op < graph.num_ops(); ++op) labels[op] = static_cast<GroupId>(part[units.group_of(op)]);
  return Grouping(std::move(labels));
}
}  // namespace

Grouping group_by_metis(const OpGraph& graph, const GroupingOptions& options) {
  return group_by_partition(graph, options, detail::metis_partition);
}

Grouping group_by_scotch(const OpGraph& graph, const GroupingOptions& options) {
  return group_by_partition(graph, options, detail::scotch_partition);
}

namespace {

Grouping group_per_op(const OpGraph& graph) {
  std::vector<GroupId> labels(graph.num_ops());
  std::iota(labels.begin(), labels.end(), 0u);
  return Grouping(std::move(labels));
}

// The groupers a scenario names, in the order messages list them: one table for make_grouping's
// dispatch and grouping_names().
struct NamedGrouper {
  std::string_view name;
  Grouping (*make)(const OpGraph&, const GroupingOptions&);
  bool rule = true;  // false: a partitioner, which a group count steers, or "none"
};
constexpr NamedGrouper kGroupers[] = {
    {"colocation", [](const OpGraph& g, const GroupingOptions&) { return group_by_colocation(g); }},
    {"single_consumer", [](const OpGraph& g, const GroupingOptions&) { return group_by_single_consumer(g); }},
    {"name_prefix", [](const OpGraph& g, const GroupingOptions&) { return group_by_name_prefix(g, 2); }},
    {"layer", [](const OpGraph& g, const GroupingOptions&) { return group_by_layer(g); }},
    {"model_units", [](const OpGraph& g, const GroupingOptions&) { return group_by_model_units(g, true); }},
    {"scope_units", [](const OpGraph& g, const GroupingOptions&) { return group_by_model_units(g, false); }},
    {"metis", [](const OpGraph& g, const GroupingOptions& o) { return group_by_metis(g, o); }, false},
    {"scotch", [](const OpGraph& g, const GroupingOptions& o) { return group_by_scotch(g, o); }, false},
    {"module", [](const OpGraph& g, const GroupingOptions& o) { return group_by_module(g, o.module_depth); }},
    {"none", [](const OpGraph& g, const GroupingOptions&) { return group_per_op(g); }, false},
};

}  // namespace

std::string default_grouping(const OpGraph& graph) {
  for (OpId op = 0; op < graph.num_ops(); ++op)
    if (!graph.op(op).module.empty()) return "module";
  return "colocation";
}

std::span<const std::string_view> grouping_names() {
  static const std::vector<std::string_view> kNames = [] {
    std::vector<std::string_view> names;
    for (const NamedGrouper& g : kGroupers) names.push_back(g.name);
    return names;
  }();
  return kNames;
}

bool is_grouping_rule(std::string_view name) {
  for (const NamedGrouper& g : kGroupers)
    if (g.name == name) return g.rule;
  return false;
}

Grouping make_grouping(const OpGraph& graph, const std::string& name, const GroupingOptions& options) {
  for (const NamedGrouper& g : kGroupers)
    if (g.name == name) return g.make(graph, options);
  throw InputError("grouping = \"" + name + "\": must be one of " + join_names(grouping_names()));
}

}  // namespace placelab
