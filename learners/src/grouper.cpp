#include "placelab/learners/grouper.h"

#include <algorithm>
#include <cmath>

#include "placelab/core/error.h"
#include "placelab/learners/nn/functions.h"
#include "problem_fields.h"
#include "require.h"

namespace placelab {

nn::Index unit_feature_size(const PlacementProblem& units) {
  return static_cast<nn::Index>(units.op_types.size()) + kShapeSlots + 3 + 1 + 2 * kNeighbourSlots;
}

template <typename T>
nn::Matrix<T> unit_feature_matrix(const PlacementProblem& p) {
  const std::size_t U = p.num_groups, types = p.op_types.size();
  const auto Ti = static_cast<nn::Index>(types);
  std::vector<uint32_t> position(U);
  for (std::size_t i = 0; i < U; ++i) position[p.topological_order[i]] = static_cast<uint32_t>(i);
  // Neighbours: (position, +1 consumer / −1 producer), nearest in the order first.
  std::vector<std::vector<std::pair<uint32_t, int>>> near(U);
  for (const PlacementProblem::GroupEdge& e : p.group_edges) {
    near[e.from].emplace_back(position[e.to], +1);
    near[e.to].emplace_back(position[e.from], -1);
  }
  nn::Matrix<double> f = nn::Matrix<double>::Zero(unit_feature_size(p), static_cast<nn::Index>(U));
  const double scale = 1.0 / static_cast<double>(std::max<std::size_t>(U, 1));
  for (std::size_t u = 0; u < U; ++u) {
    const auto c = static_cast<nn::Index>(u);
    for (std::size_t t = 0; t < types; ++t) f(static_cast<nn::Index>(t), c) = p.group_type_counts[u * types + t];
    for (int k = 0; k < kShapeSlots; ++k) f(Ti + k, c) = p.group_shape[u][static_cast<std::size_t>(k)];
    auto hp = f.col(c).head(Ti + kShapeSlots);
    hp /= hp.maxCoeff() + 1.0;
    f(Ti + kShapeSlots + 3, c) = position[u] * scale;
    auto& n = near[u];
    const auto distance = [&](const std::pair<uint32_t, int>& x) {
      return x.first > position[u] ? x.first - position[u] : position[u] - x.first;
    };
    std::sort(n.begin(), n.end(), [&](const auto& a, const auto& b) {
      return distance(a) != distance(b) ? distance(a) < distance(b) : a < b;
    });
    for (std::size_t k = 0; k < n.size() && k < static_cast<std::size_t>(kNeighbourSlots); ++k) {
      const nn::Index row = Ti + kShapeSlots + 4 + 2 * static_cast<nn::Index>(k);
      f(row, c) = n[k].first * scale;
      f(row + 1, c) = n[k].second;
    }
  }
  detail::put_scaled_sizes(p, Ti + kShapeSlots, f);
  return f.cast<T>();
}

template nn::Matrix<float> unit_feature_matrix<float>(const PlacementProblem&);
template nn::Matrix<double> unit_feature_matrix<double>(const PlacementProblem&);

PlacementProblem merge_units(const PlacementProblem& units, std::span<const GroupId> assignment, std::size_t G) {
  const std::size_t U = units.num_groups, types = units.op_types.size();
  PLACELAB_CHECK(assignment.size() == U) << "assignment of " << assignment.size() << " units for " << U;
  PlacementProblem p;
  p.op_types = units.op_types;
  detail::reset_group_fields(p, G);
  for (std::size_t u = 0; u < U; ++u) {
    const GroupId g = assignment[u];
    PLACELAB_CHECK(g < G) << "unit " << u << " in group " << g << " of " << G;
    p.group_size[g] += units.group_size[u];
    for (std::size_t t = 0; t < types; ++t) p.group_type_counts[g * types + t] += units.group_type_counts[u * types + t];
    for (std::size_t k = 0; k < kShapeSlots; ++k) p.group_shape[g][k] += units.group_shape[u][k];
    p.group_flops[g] += units.group_flops[u];
    p.group_output_bytes[g] += units.group_output_bytes[u];
    p.group_persistent_bytes[g] += units.group_persistent_bytes[u];
  }
  // Edges through a dense G × G table: G is at most a few hundred, units' edges tens of thousands.
  std::vector<uint32_t> count(G * G, 0);
  std::vector<double> bytes(G * G, 0.0);
  for (const PlacementProblem::GroupEdge& e : units.group_edges) {
    const GroupId a = assignment[e.from], b = assignment[e.to];
    if (a == b) continue;
    count[a * G + b] += e.count;
    bytes[a * G + b] += e.bytes;
  }
  for (GroupId a = 0; a < G; ++a)
    for (GroupId b = 0; b < G; ++b)
      if (count[a * G + b] > 0) p.group_edges.push_back({a, b, count[a * G + b], bytes[a * G + b]});
  // First readiness: a learned group is ready when its earliest unit is.
  std::vector<std::size_t> first(G, SIZE_MAX);
  for (std::size_t i = 0; i < U; ++i) {
    const GroupId g = assignment[units.topological_order[i]];
    first[g] = std::min(first[g], i);
  }
  p.topological_order.resize(G);
  for (GroupId g = 0; g < G; ++g) p.topological_order[g] = g;
  std::stable_sort(p.topological_order.begin(), p.topological_order.end(),
                   [&](GroupId a, GroupId b) { return first[a] < first[b]; });
  p.group_names.resize(G);
  for (GroupId g = 0; g < G; ++g) {
    std::string name(1, 'g');  // not "g" + …: GCC 12's -Wrestrict false positive
    p.group_names[g] = std::move(name += std::to_string(g));
  }
  return p;
}

Grouping compose_grouping(const Grouping& units, std::span<const GroupId> assignment) {
  PLACELAB_CHECK(assignment.size() == units.num_groups())
      << "assignment of " << assignment.size() << " units for " << units.num_groups();
  std::vector<GroupId> of(units.num_ops());
  for (OpId v = 0; v < units.num_ops(); ++v) of[v] = assignment[units.group_of(v)];
  return Grouping(std::move(of));
}

std::string to_string(GrouperActivation a) {
  switch (a) {
    case GrouperActivation::kRelu: return "relu";
    case GrouperActivation::kTanh: return "tanh";
    case GrouperActivation::kNone: return "none";
  }
  return "?";
}

GrouperActivation grouper_activation_from_string(const std::string& name) {
  for (GrouperActivation a : {GrouperActivation::kRelu, GrouperActivation::kTanh, GrouperActivation::kNone})
    if (to_string(a) == name) return a;
  throw InputError("grouper activation '" + name + "': expected relu, tanh or none");
}

void GrouperOptions::validate() const {
  using detail::require;
  constexpr std::string_view owner = "grouper";
  require(groups >= 1 && groups <= 65535, owner, "groups", std::to_string(groups), "must be in [1, 65535]");
  require(hidden >= 1 && hidden <= 4096, owner, "hidden", std::to_string(hidden), "must be in [1, 4096]");
}

template <typename T>
FeedForwardGrouper<T>::FeedForwardGrouper(const GrouperOptions& options, nn::Index features, Rng& rng)
    : options_((options.validate(), options)),  // before the layers are sized from it
      hidden_("grouper.hidden", features, options.hidden),
      output_("grouper.output", options.hidden, static_cast<nn::Index>(options.groups)) {
  PLACELAB_CHECK(features >= 1) << "grouper of " << features << " features";
  hidden_.register_params(params_);
  output_.register_params(params_);
  hidden_.init(rng);
  output_.init(rng);
}

// Units are processed in blocks of kBlock columns, so that a block's hidden activations and logits
// stay in cache between the products and the softmax: on GNMT's 44k units the whole-matrix form
// spent as long streaming 45 MB matrices through memory as it did multiplying.
constexpr nn::Index kBlock = 256;

template <typename T>
void FeedForwardGrouper<T>::activate(nn::Out<T> Z) const {
  switch (options_.activation) {
    case GrouperActivation::kRelu: Z = Z.cwiseMax(T(0)); break;
    case GrouperActivation::kTanh: Z.array() = Z.array().tanh(); break;
    case GrouperActivation::kNone: break;
  }
}

template <typename T>
void FeedForwardGrouper<T>::forward(const nn::In<T>& X) {
  const nn::Index U = X.cols(), G = static_cast<nn::Index>(options_.groups);
  act_.resize(options_.hidden, U);
  log_probs_.resize(G, U);
  probs_.resize(G, U);
  for (nn::Index u0 = 0; u0 < U; u0 += kBlock) {
    const nn::Index n = std::min(kBlock, U - u0);
    auto act = act_.middleCols(u0, n);
    auto logits = log_probs_.middleCols(u0, n);  // the logits, made log-probabilities in place
    hidden_.forward(X.middleCols(u0, n), act);
    activate(act);
    output_.forward(act, logits);
    nn::softmax_and_log_columns<T>(logits, probs_.middleCols(u0, n), logits);
  }
}

template <typename T>
double FeedForwardGrouper<T>::sample(Rng& rng, std::vector<GroupId>& assignment) const {
  const nn::Index U = probs_.cols(), G = probs_.rows();
  assignment.resize(static_cast<std::size_t>(U));
  double log_p = 0;
  for (nn::Index u = 0; u < U; ++u) {
    const nn::Index g = nn::sample_category(probs_.col(u).data(), G, uniform01(rng));
    assignment[static_cast<std::size_t>(u)] = static_cast<GroupId>(g);
    log_p += static_cast<double>(log_probs_(g, u));
  }
  return log_p;
}

template <typename T>
void FeedForwardGrouper<T>::greedy(std::vector<GroupId>& assignment) const {
  assignment.resize(static_cast<std::size_t>(log_probs_.cols()));
  for (nn::Index u = 0; u < log_probs_.cols(); ++u) {
    nn::Index g = 0;
    log_probs_.col(u).maxCoeff(&g);
    assignment[static_cast<std::size_t>(u)] = static_cast<GroupId>(g);
  }
}

template <typename T>
double FeedForwardGrouper<T>::log_prob(std::span<const GroupId> assignment) const {
  PLACELAB_CHECK(static_cast<nn::Index>(assignment.size()) == log_probs_.cols())
      << "grouping of " << assignment.size() << " units for " << log_probs_.cols();
  double log_p = 0;
  for (nn::Index u = 0; u < log_probs_.cols(); ++u)
    log_p += static_cast<double>(log_probs_(static_cast<nn::Index>(assignment[static_cast<std::size_t>(u)]), u));
  return log_p;
}

template <typename T>
double FeedForwardGrouper<T>::mean_entropy() const {
  const double sum = -(probs_.array() * log_probs_.array()).template cast<double>().sum();
  return sum / static_cast<double>(std::max<nn::Index>(probs_.cols(), 1));
}

template <typename T>
void FeedForwardGrouper<T>::backward(const nn::In<T>& X, std::span<const std::vector<GroupId>> assignments,
                                     std::span<const double> coefficients, double entropy_weight) {
  PLACELAB_CHECK(assignments.size() == coefficients.size())
      << assignments.size() << " groupings for " << coefficients.size() << " coefficients";
  double total = 0;
  for (double c : coefficients) total += c;
  backward_impl(
      X, assignments, [&](std::size_t k, nn::Index) { return coefficients[k]; }, [&](nn::Index) { return total; },
      entropy_weight);
}

template <typename T>
void FeedForwardGrouper<T>::backward(const nn::In<T>& X, std::span<const std::vector<GroupId>> assignments,
                                     std::span<const std::vector<double>> unit_coefficients, double entropy_weight) {
  PLACELAB_CHECK(assignments.size() == unit_coefficients.size())
      << assignments.size() << " groupings for " << unit_coefficients.size() << " coefficient rows";
  for (const std::vector<double>& c : unit_coefficients)
    PLACELAB_CHECK(static_cast<nn::Index>(c.size()) == X.cols()) << c.size() << " coefficients for " << X.cols() << " units";
  backward_impl(
      X, assignments,
      [&](std::size_t k, nn::Index u) { return unit_coefficients[k][static_cast<std::size_t>(u)]; },
      [&](nn::Index u) {
        double t = 0;
        for (const std::vector<double>& c : unit_coefficients) t += c[static_cast<std::size_t>(u)];
        return t;
      },
      entropy_weight);
}

template <typename T>
template <typename Coefficient, typename Total>
void FeedForwardGrouper<T>::backward_impl(const nn::In<T>& X, std::span<const std::vector<GroupId>> assignments,
                                          const Coefficient& coefficient, const Total& total, double entropy_weight) {
  const nn::Index U = probs_.cols(), G = probs_.rows(), H = options_.hidden;
  PLACELAB_CHECK(X.cols() == U) << "backward over " << X.cols() << " units after a forward over " << U;
  for (const std::vector<GroupId>& a : assignments)
    PLACELAB_CHECK(static_cast<nn::Index>(a.size()) == U) << "grouping of " << a.size() << " units for " << U;
  const T w = static_cast<T>(entropy_weight / static_cast<double>(std::max<nn::Index>(U, 1)));
  dlogits_.resize(G, kBlock);
  dact_.resize(H, kBlock);
  ones_.setOnes(kBlock);
  for (nn::Index u0 = 0; u0 < U; u0 += kBlock) {
    const nn::Index n = std::min(kBlock, U - u0);
    auto P = probs_.middleCols(u0, n);
    auto L = log_probs_.middleCols(u0, n);
    auto dZ = dlogits_.leftCols(n);
    // d/dz of Σ_k c_k log p(a_k) = Σ_k c_k (onehot(a_k) − p): the one-hots added in place.
    for (nn::Index j = 0; j < n; ++j) dZ.col(j) = P.col(j) * static_cast<T>(-total(u0 + j));
    for (std::size_t k = 0; k < assignments.size(); ++k)
      for (nn::Index j = 0; j < n; ++j)
        dZ(static_cast<nn::Index>(assignments[k][static_cast<std::size_t>(u0 + j)]), j) +=
            static_cast<T>(coefficient(k, u0 + j));
    if (w != T(0))
      // H = −Σ p log p per column, averaged over U: dH/dz = −p ⊙ (log p − Σ p log p) / U.
      for (nn::Index j = 0; j < n; ++j) {
        const T plogp = (P.col(j).array() * L.col(j).array()).sum();
        dZ.col(j).array() -= w * P.col(j).array() * (L.col(j).array() - plogp);
      }
    // The layers' backward by hand, so the bias gradients are products with ones (Eigen's
    // row-wise sums over a block's columns are several times slower).
    auto act = act_.middleCols(u0, n);
    auto dA = dact_.leftCols(n);
    output_.W.grad.noalias() += dZ * act.transpose();
    output_.b.grad.noalias() += dZ * ones_.head(n);
    dA.noalias() = output_.W.value.transpose() * dZ;
    switch (options_.activation) {
      case GrouperActivation::kRelu: dA.array() *= (act.array() > T(0)).template cast<T>(); break;
      case GrouperActivation::kTanh: dA.array() *= T(1) - act.array().square(); break;
      case GrouperActivation::kNone: break;
    }
    hidden_.W.grad.noalias() += dA * X.middleCols(u0, n).transpose();
    hidden_.b.grad.noalias() += dA * ones_.head(n);
  }
}

template class FeedForwardGrouper<float>;
template class FeedForwardGrouper<double>;

}  // namespace placelab
