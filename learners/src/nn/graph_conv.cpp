#include <algorithm>
#include <cmath>

#include "placelab/core/error.h"
#include "placelab/learners/nn/layers.h"

namespace placelab::nn {

GraphAdjacency GraphAdjacency::normalized(Index nodes, std::span<const std::pair<Index, Index>> edges) {
  PLACELAB_CHECK(nodes >= 1) << "a graph of " << nodes << " nodes";
  std::vector<std::vector<Index>> adj(static_cast<std::size_t>(nodes));
  for (Index j = 0; j < nodes; ++j) adj[static_cast<std::size_t>(j)].push_back(j);
  for (const auto& [u, v] : edges) {
    PLACELAB_CHECK(u >= 0 && u < nodes && v >= 0 && v < nodes) << "edge " << u << " → " << v << " of " << nodes;
    if (u == v) continue;
    adj[static_cast<std::size_t>(u)].push_back(v);
    adj[static_cast<std::size_t>(v)].push_back(u);
  }
  std::vector<double> inv_sqrt_degree(static_cast<std::size_t>(nodes));
  for (std::size_t j = 0; j < adj.size(); ++j) {
    std::sort(adj[j].begin(), adj[j].end());
    adj[j].erase(std::unique(adj[j].begin(), adj[j].end()), adj[j].end());
    inv_sqrt_degree[j] = 1.0 / std::sqrt(static_cast<double>(adj[j].size()));
  }
  GraphAdjacency a;
  a.nodes = nodes;
  a.offsets.push_back(0);
  for (std::size_t j = 0; j < adj.size(); ++j) {
    for (Index i : adj[j]) {
      a.neighbors.push_back(i);
      a.weights.push_back(inv_sqrt_degree[static_cast<std::size_t>(i)] * inv_sqrt_degree[j]);
    }
    a.offsets.push_back(static_cast<Index>(a.neighbors.size()));
  }
  return a;
}

namespace {
// Out's node j block = Σ over column j's entries (i, a) of a · In's node i block (B columns each).
// Â is symmetric, so the same gather is the product with Âᵀ in the backward pass.
template <typename T>
void aggregate(const GraphAdjacency& A, Index batch, const In<T>& in, Out<T> out) {
  for (Index j = 0; j < A.nodes; ++j) {
    auto block = out.middleCols(j * batch, batch);
    block.setZero();
    for (Index e = A.offsets[static_cast<std::size_t>(j)]; e < A.offsets[static_cast<std::size_t>(j) + 1]; ++e)
      block += static_cast<T>(A.weights[static_cast<std::size_t>(e)]) *
               in.middleCols(A.neighbors[static_cast<std::size_t>(e)] * batch, batch);
  }
}
}  // namespace

template <typename T>
GraphConv<T>::GraphConv(std::string name, Index in, Index out) {
  PLACELAB_CHECK(in > 0 && out > 0) << "GraphConv " << name << ": " << in << " → " << out;
  W.name = name + ".W";
  W.resize(out, in);
  b.name = name + ".b";
  b.resize(out, 1);
}

template <typename T>
void GraphConv<T>::register_params(ParamSet<T>& set) {
  set.add(W);
  set.add(b);
}

template <typename T>
void GraphConv<T>::init(Rng& rng) {
  glorot_uniform(W.value, rng);
  b.value.setZero();
}

template <typename T>
void GraphConv<T>::forward(const In<T>& X, const GraphAdjacency& A, Index batch, Out<T> Y) {
  PLACELAB_CHECK(batch >= 1 && X.rows() == in_size() && X.cols() == A.nodes * batch && Y.rows() == out_size() &&
                 Y.cols() == X.cols())
      << "GraphConv input " << X.rows() << " × " << X.cols() << " for " << A.nodes << " nodes of " << batch;
  WX_.resize(out_size(), X.cols());
  multiply(WX_, W.value, X);
  aggregate<T>(A, batch, WX_, Y);
  Y.colwise() += b.value.col(0);
}

template <typename T>
void GraphConv<T>::backward(const In<T>& X, const GraphAdjacency& A, Index batch, const In<T>& dY, Matrix<T>* dX) {
  PLACELAB_CHECK(dY.rows() == out_size() && dY.cols() == X.cols()) << "GraphConv dY shape";
  b.grad.col(0) += dY.rowwise().sum();
  dWX_.resize(out_size(), X.cols());
  aggregate<T>(A, batch, dY, dWX_);
  W.grad.noalias() += dWX_ * X.transpose();
  if (dX) {
    dX->resize(in_size(), X.cols());
    multiply(*dX, W.value.transpose(), dWX_);
  }
}

template class GraphConv<float>;
template class GraphConv<double>;

}  // namespace placelab::nn
