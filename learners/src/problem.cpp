#include "placelab/learners/problem.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "placelab/core/error.h"
#include "problem_fields.h"

namespace placelab {

ShapeSlots output_shape(const KernelSignature& sig) {
  ShapeSlots s{};
  const auto& d = sig.dims;
  const auto put = [&](std::initializer_list<int64_t> dims) {
    int i = 0;
    for (int64_t x : dims) s[static_cast<std::size_t>(i++)] = static_cast<double>(x);
  };
  switch (sig.cls) {
    case KernelClass::kGemm: put({d[3], d[0], d[1]}); break;
    case KernelClass::kConv2D: {
      const int64_t stride = std::max<int64_t>(d[7], 1);
      put({d[0], d[4], (d[2] + 2 * d[8] - d[5]) / stride + 1, (d[3] + 2 * d[8] - d[6]) / stride + 1});
      break;
    }
    case KernelClass::kConv2DBackpropInput: put({d[0], d[1], d[2], d[3]}); break;
    case KernelClass::kConv2DBackpropFilter: put({d[4], d[1], d[5], d[6]}); break;
    case KernelClass::kElementwise: put({d[0]}); break;
    case KernelClass::kReduction: put({d[1]}); break;
    case KernelClass::kEmbedding: put({d[2], d[1]}); break;
    case KernelClass::kSoftmax: put({d[0], d[1]}); break;
    case KernelClass::kCopy: put({d[0] / 4}); break;
    case KernelClass::kNoop: break;
  }
  return s;
}

namespace {

// An op's scope: its name without the last '/' component ("conv1/Conv2D" → "conv1"), and without
// TensorFlow's "gradients/" prefix, whose names mirror the forward scope
// ("gradients/conv1/Conv2D_grad/x" → "conv1/Conv2D_grad"); a top-level name is its own scope.
std::string scope_of(std::string name) {
  if (name.rfind("gradients/", 0) == 0) name.erase(0, 10);
  const auto slash = name.rfind('/');
  return slash == std::string::npos ? name : name.substr(0, slash);
}

}  // namespace

PlacementProblem describe_problem(const OpGraph& graph, const Grouping& grouping) {
  if (grouping.num_ops() != graph.num_ops())
    throw InputError("grouping of " + std::to_string(grouping.num_ops()) + " ops for a graph of " +
                     std::to_string(graph.num_ops()) + " ops: must describe the same graph");
  const std::size_t n = graph.num_ops(), G = grouping.num_groups();
  PlacementProblem p;

  std::set<std::string> types;
  for (OpId v = 0; v < n; ++v) types.insert(graph.op(v).type);
  p.op_types.assign(types.begin(), types.end());
  std::map<std::string, uint32_t> type_index;
  for (std::size_t i = 0; i < p.op_types.size(); ++i) type_index[p.op_types[i]] = static_cast<uint32_t>(i);

  p.op_type.resize(n);
  p.op_shape.resize(n);
  p.op_flops.resize(n);
  p.op_output_bytes.resize(n);
  p.op_persistent_bytes.resize(n);
  p.op_topological_index.resize(n);
  const std::vector<OpId> topo = graph.topological_order();
  for (std::size_t i = 0; i < topo.size(); ++i) p.op_topological_index[topo[i]] = static_cast<uint32_t>(i);
  for (OpId v = 0; v < n; ++v) {
    const Op& op = graph.op(v);
    p.op_type[v] = type_index.at(op.type);
    p.op_shape[v] = output_shape(op.kernel);
    p.op_flops[v] = op.flops;
    p.op_output_bytes[v] = static_cast<double>(op.output_bytes);
    p.op_persistent_bytes[v] = static_cast<double>(op.persistent_bytes);
    graph.for_each_out_edge(v, [&](OpId dst, const Tensor& t) {
      if (!t.control) p.op_edges.emplace_back(v, dst);
    });
  }

  const std::size_t T = p.op_types.size();
  detail::reset_group_fields(p, G);
  std::vector<uint32_t> first_topo(G, UINT32_MAX);
  std::vector<std::map<std::string, uint32_t>> prefixes(G);  // every scope prefix → member ops under it
  for (OpId v = 0; v < n; ++v) {
    const GroupId g = grouping.group_of(v);
    ++p.group_size[g];
    p.group_type_counts[g * T + p.op_type[v]] += 1;
    for (int k = 0; k < kShapeSlots; ++k) p.group_shape[g][static_cast<std::size_t>(k)] += p.op_shape[v][static_cast<std::size_t>(k)];
    p.group_flops[g] += p.op_flops[v];
    p.group_output_bytes[g] += p.op_output_bytes[v];
    p.group_persistent_bytes[g] += p.op_persistent_bytes[v];
    first_topo[g] = std::min(first_topo[g], p.op_topological_index[v]);
    const std::string s = scope_of(graph.op(v).name);
    for (std::size_t slash = s.find('/'); slash != std::string::npos; slash = s.find('/', slash + 1))
      ++prefixes[g][s.substr(0, slash)];
    ++prefixes[g][s];
  }

  std::map<std::pair<GroupId, GroupId>, PlacementProblem::GroupEdge> edges;
  for (OpId v = 0; v < n; ++v)
    graph.for_each_out_edge(v, [&](OpId dst, const Tensor& t) {
      const GroupId a = grouping.group_of(v), b = grouping.group_of(dst);
      if (t.control || a == b) return;
      auto [it, fresh] = edges.try_emplace({a, b}, PlacementProblem::GroupEdge{a, b, 0, 0.0});
      ++it->second.count;
      it->second.bytes += static_cast<double>(t.bytes);
    });
  for (const auto& [key, e] : edges) p.group_edges.push_back(e);

  p.topological_order.resize(G);
  for (GroupId g = 0; g < G; ++g) p.topological_order[g] = g;
  std::stable_sort(p.topological_order.begin(), p.topological_order.end(),
                   [&](GroupId a, GroupId b) { return first_topo[a] < first_topo[b]; });

  // Names: the deepest scope that holds at least 80 % of the members, with "+" when not all of
  // them ("encoder/layer_3+": the layer with its optimizer updates and gradient sums); "group<k>"
  // when none does; repeats get "#2", "#3"…
  std::map<std::string, int> uses;
  p.group_names.resize(G);
  for (GroupId g = 0; g < G; ++g) {
    std::string name;
    uint32_t count = 0;
    for (const auto& [prefix, under] : prefixes[g]) {
      const auto depth = [](const std::string& x) { return std::count(x.begin(), x.end(), '/'); };
      if (5 * under >= 4 * p.group_size[g] && (name.empty() || depth(prefix) > depth(name))) name = prefix, count = under;
    }
    if (name.empty()) name = "group" + std::to_string(g);
    else if (count < p.group_size[g]) name += "+";
    const int k = ++uses[name];
    p.group_names[g] = k == 1 ? name : name + "#" + std::to_string(k);
  }
  return p;
}

nn::Index group_feature_size(std::size_t groups, std::size_t op_types) {
  return static_cast<nn::Index>(2 * groups + op_types + kShapeSlots + 3);
}

nn::Index group_feature_size(const PlacementProblem& p) { return group_feature_size(p.num_groups, p.op_types.size()); }

template <typename T>
nn::Matrix<T> group_feature_matrix(const PlacementProblem& p, std::span<const GroupId> order) {
  const auto G = static_cast<nn::Index>(p.num_groups);
  const auto types = static_cast<nn::Index>(p.op_types.size());
  PLACELAB_CHECK(static_cast<nn::Index>(order.size()) == G) << "order of " << order.size() << " groups for " << G;
  // Column g of the unordered matrix, in double, then scaled and reordered.
  nn::Matrix<double> f = nn::Matrix<double>::Zero(group_feature_size(p), G);
  for (const PlacementProblem::GroupEdge& e : p.group_edges) {
    f(e.to, e.from) += e.count;      // the from-group's out row e.to
    f(G + e.from, e.to) += e.count;  // the to-group's in row e.from
  }
  for (nn::Index g = 0; g < G; ++g) {
    for (nn::Index t = 0; t < types; ++t) f(2 * G + t, g) = p.group_type_counts[static_cast<std::size_t>(g * types + t)];
    for (int k = 0; k < kShapeSlots; ++k) f(2 * G + types + k, g) = p.group_shape[static_cast<std::size_t>(g)][static_cast<std::size_t>(k)];
    auto hp = f.col(g).head(2 * G + types + kShapeSlots);
    hp /= hp.maxCoeff() + 1.0;
  }
  detail::put_scaled_sizes(p, 2 * G + types + kShapeSlots, f);
  nn::Matrix<T> out(f.rows(), G);
  for (nn::Index i = 0; i < G; ++i) out.col(i) = f.col(order[static_cast<std::size_t>(i)]).template cast<T>();
  return out;
}

template nn::Matrix<float> group_feature_matrix<float>(const PlacementProblem&, std::span<const GroupId>);
template nn::Matrix<double> group_feature_matrix<double>(const PlacementProblem&, std::span<const GroupId>);

}  // namespace placelab
