// The layers of the neural placers, on Eigen with hand-derived backward passes: Linear, Embedding,
// the LSTM cell, an LSTM layer over a batch of sequences (either direction), the bidirectional
// LSTM, and content-based (Bahdanau) attention. Forward passes keep what their backward pass needs
// in member workspaces that are resized only when a shape grows, so a training run allocates
// nothing per time step. Backward passes ADD to the parameters' gradients.
//
//   LstmLayer<float> enc("encoder", /*input=*/F, /*hidden=*/256, /*reverse=*/false);
//   enc.register_params(params);  enc.init(rng);
//   enc.forward(X, /*steps=*/S, /*batch=*/B);          // X: F × S·B (column s·B + b)
//   ... enc.outputs() ...
//   enc.backward(X, &dH, nullptr, nullptr, /*dX=*/nullptr);
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "placelab/learners/nn/tensor.h"
#include "placelab/learners/random.h"

namespace placelab::nn {

// Glorot (Xavier) uniform: U(−a, a), a = √(6 / (rows + cols)), drawn column-major from `rng` —
// TensorFlow's glorot_uniform_initializer, which the Hierarchical Planner's code uses.
template <typename T>
void glorot_uniform(Matrix<T>& m, Rng& rng);

// y = W x + b. W: out × in, b: out × 1 (optional).
template <typename T>
class Linear {
 public:
  Linear() = default;
  Linear(std::string name, Index in, Index out, bool bias = true);
  void register_params(ParamSet<T>& set);
  void init(Rng& rng);  // Glorot W, zero b
  Index in_size() const { return W.value.cols(); }
  Index out_size() const { return W.value.rows(); }
  // Y = W X + b for any number of columns; Y must already have out × X.cols() entries.
  void forward(const In<T>& X, Out<T> Y) const;
  // dW += dY Xᵀ, db += Σ_columns dY, and dX = Wᵀ dY (overwritten) when dX is non-null.
  void backward(const In<T>& X, const In<T>& dY, Matrix<T>* dX);

  Param<T> W, b;

 private:
  bool bias_ = true;
};

// A learned vector per token: E is dim × vocabulary; token k's vector is column k.
template <typename T>
class Embedding {
 public:
  Embedding() = default;
  Embedding(std::string name, Index vocabulary, Index dim);
  void register_params(ParamSet<T>& set);
  void init(Rng& rng);  // Glorot
  Index dim() const { return E.value.rows(); }
  Index vocabulary() const { return E.value.cols(); }

  Param<T> E;
};

// The LSTM cell (Hochreiter & Schmidhuber 1997, with a forget gate): for input x and state (h, c),
//   [i; f; g; o] = [σ; σ; tanh; σ](Wx x + Wh h + b),  c' = f⊙c + i⊙g,  h' = o⊙tanh(c').
// The four gates are stacked in that order in 4H rows. b's forget rows start at `forget_bias`
// (1.0 in TensorFlow and the Hierarchical Planner: a new cell keeps its state). The input part
// Wx x + b is a separate call so a sequence can compute it for all steps in one GEMM, and a decoder
// whose inputs come from a small table (device embeddings) can look it up instead.
template <typename T>
class LstmCell {
 public:
  LstmCell() = default;
  LstmCell(std::string name, Index input, Index hidden, T forget_bias = T(1));
  void register_params(ParamSet<T>& set);
  void init(Rng& rng);  // Glorot Wx and Wh; b = 0 but the forget rows = forget_bias
  Index input_size() const { return Wx.value.cols(); }
  Index hidden_size() const { return Wh.value.cols(); }

  // P = Wx X + b (4H × X.cols()).
  void project_input(const In<T>& X, Out<T> P) const;
  // One step for B columns. P: the input part (4H × B); gates receives the activated gates
  // (4H × B, kept for step_backward), c and h the new state (H × B).
  void step(const In<T>& P, const In<T>& h_prev, const In<T>& c_prev, Out<T> gates, Out<T> c, Out<T> h) const;
  // Backward of one step. dh: the whole gradient reaching h'; dc: on entry the gradient reaching
  // c' from later steps, on return the gradient to c_prev; dP receives the gradient of the gate
  // pre-activations (4H × B), from which recurrent_backward, accumulate_recurrent and
  // project_input_backward take the rest.
  void step_backward(const In<T>& gates, const In<T>& c_prev, const In<T>& c, const In<T>& dh, Out<T> dc,
                     Out<T> dP) const;
  // dh_prev = Whᵀ dP (overwritten).
  void recurrent_backward(const In<T>& dP, Out<T> dh_prev) const;
  // dWh += dP H_prevᵀ, for any number of step blocks at once.
  void accumulate_recurrent(const In<T>& dP, const In<T>& H_prev);
  // dWx += dP Xᵀ, db += Σ_columns dP; dX = Wxᵀ dP (overwritten) when non-null.
  void project_input_backward(const In<T>& X, const In<T>& dP, Matrix<T>* dX);

  Param<T> Wx, Wh, b;

 private:
  T forget_bias_ = T(1);
};

// An LSTM over a batch of sequences, forwards (s = 0 … S−1) or, with `reverse`, backwards
// (s = S−1 … 0). Outputs are stored at their input's position in either direction.
template <typename T>
class LstmLayer {
 public:
  LstmLayer() = default;
  LstmLayer(std::string name, Index input, Index hidden, bool reverse = false, T forget_bias = T(1));
  void register_params(ParamSet<T>& set) { cell_.register_params(set); }
  void init(Rng& rng) { cell_.init(rng); }
  Index hidden_size() const { return cell_.hidden_size(); }
  Index input_size() const { return cell_.input_size(); }
  LstmCell<T>& cell() { return cell_; }

  // X: input × S·B. h0, c0: the initial state (H × B, or H × 1 broadcast to the batch), zero when
  // null. Keeps X's shape and every step's state for backward.
  void forward(const In<T>& X, Index steps, Index batch, const Matrix<T>* h0 = nullptr, const Matrix<T>* c0 = nullptr);
  const Matrix<T>& outputs() const { return H_; }   // H × S·B: h at each input position
  // The state after the last step processed (s = S−1 forwards, s = 0 in reverse), H × B.
  auto final_h() const { return H_.middleCols(last_step() * batch_, batch_); }
  auto final_c() const { return C_.middleCols(last_step() * batch_, batch_); }

  // Backward of the last forward. dH: gradient to outputs() (or null for none); dh_final and
  // dc_final: gradient to the final state (or null). Writes dX (input × S·B) when non-null, and
  // dh0 / dc0 (H × B, or H × 1 summed over the batch when forward broadcast a single column) when
  // non-null.
  void backward(const In<T>& X, const Matrix<T>* dH, const Matrix<T>* dh_final, const Matrix<T>* dc_final,
                Matrix<T>* dX, Matrix<T>* dh0 = nullptr, Matrix<T>* dc0 = nullptr);

 private:
  Index last_step() const { return reverse_ ? 0 : steps_ - 1; }
  LstmCell<T> cell_;
  bool reverse_ = false;
  Index steps_ = 0, batch_ = 0;
  Matrix<T> h0_, c0_;                  // H × B (zero when not given)
  Index init_cols_ = 0;                // columns of the given h0/c0 (1 = broadcast), 0 = none
  Matrix<T> P_, gates_, C_, H_;        // 4H × S·B, 4H × S·B, H × S·B, H × S·B
  Matrix<T> dP_, dh_, dc_, dh_step_;   // backward workspaces
};

// Two LstmLayers, one per direction, each of `hidden` units; outputs() stacks them (2·hidden rows):
// rows [0, hidden) the forward state at step s, rows [hidden, 2·hidden) the backward state at step
// s — or, with `pair_reversed` (how the Hierarchical Planner's public code builds its attention
// memory), the backward state at step S−1−s. final_h/final_c stack the two final states.
template <typename T>
class BiLstm {
 public:
  BiLstm() = default;
  BiLstm(std::string name, Index input, Index hidden, bool pair_reversed = false, T forget_bias = T(1));
  void register_params(ParamSet<T>& set);
  void init(Rng& rng);
  Index hidden_size() const { return 2 * fw_.hidden_size(); }

  void forward(const In<T>& X, Index steps, Index batch, const Matrix<T>* h0 = nullptr, const Matrix<T>* c0 = nullptr);
  const Matrix<T>& outputs() const { return H_; }
  const Matrix<T>& final_h() const { return final_h_; }
  const Matrix<T>& final_c() const { return final_c_; }
  // As LstmLayer::backward, with gradients shaped like outputs() and final_h()/final_c(). dX is
  // overwritten with the sum of both directions' input gradients.
  void backward(const In<T>& X, const Matrix<T>* dH, const Matrix<T>* dh_final, const Matrix<T>* dc_final,
                Matrix<T>* dX, Matrix<T>* dh0 = nullptr, Matrix<T>* dc0 = nullptr);

 private:
  LstmLayer<T> fw_, bw_;
  bool pair_reversed_ = false;
  Index steps_ = 0, batch_ = 0;
  Matrix<T> H_, final_h_, final_c_;
  Matrix<T> dHf_, dHb_, dhf_, dcf_, dhb_, dcb_, dX2_, d0a_, d0b_;
};

// A graph's normalised adjacency with self loops, Â = D^−½ (A + I) D^−½ (Kipf & Welling 2017):
// column j's entries (i, Â_ij) in CSR form. A is the undirected, unweighted adjacency of the edges
// given (either direction, duplicates and self loops ignored); D its degrees plus one.
struct GraphAdjacency {
  Index nodes = 0;
  std::vector<Index> offsets;      // nodes + 1
  std::vector<Index> neighbors;    // the i of each entry, self included, ascending per column
  std::vector<double> weights;     // Â_ij
  static GraphAdjacency normalized(Index nodes, std::span<const std::pair<Index, Index>> edges);
};

// Graph convolution (Kipf & Welling 2017) over a batch of B graphs that share one adjacency:
// Y = W X Â + b, node j's column the weighted sum of its neighbours' (and its own) W x. X: in ×
// nodes·B with column j·B + b for node j of graph b (the placers' step-major layout); Y: out ×
// nodes·B. Activations are the caller's (EAGLE's GCN placer: ReLU after each of two layers).
template <typename T>
class GraphConv {
 public:
  GraphConv() = default;
  GraphConv(std::string name, Index in, Index out);
  void register_params(ParamSet<T>& set);
  void init(Rng& rng);  // Glorot W, zero b
  Index in_size() const { return W.value.cols(); }
  Index out_size() const { return W.value.rows(); }

  void forward(const In<T>& X, const GraphAdjacency& A, Index batch, Out<T> Y);
  // dW += (dY Âᵀ) Xᵀ, db += Σ_columns dY; dX = Wᵀ (dY Âᵀ) (overwritten) when non-null.
  void backward(const In<T>& X, const GraphAdjacency& A, Index batch, const In<T>& dY, Matrix<T>* dX);

  Param<T> W, b;

 private:
  Matrix<T> WX_, dWX_;
};

// Content-based attention (Bahdanau et al. 2015): for a query q and a memory of S vectors m_j,
//   score_j = vᵀ tanh(W1 m_j + W2 q),  a = softmax(score),  context = Σ_j a_j m_j.
// The memory is set once per sequence (its keys W1 m_j are computed then); queries come one step
// at a time, before or after a decoder LSTM. The memory belongs to the whole batch (one column per
// step) or to each sequence (B columns per step). Backward recomputes tanh instead of storing it
// (S·A values per query and step would be S²·A·B for a decoder).
template <typename T>
class Attention {
 public:
  Attention() = default;
  Attention(std::string name, Index memory_size, Index query_size, Index attention_size);
  void register_params(ParamSet<T>& set);
  void init(Rng& rng);  // Glorot W1, W2, v
  Index memory_size() const { return W1.value.cols(); }
  Index query_size() const { return W2.value.cols(); }

  // M: memory_size × steps·memory_batch, memory_batch 1 (shared by every query) or the batch size
  // of the queries to come. Keeps a reference-free copy of M and clears the memory gradients.
  void set_memory(const In<T>& M, Index steps, Index memory_batch);
  Index steps() const { return steps_; }
  // For queries Q (query_size × B): probs (steps × B) and context (memory_size × B).
  void forward(const In<T>& Q, Out<T> probs, Out<T> context);
  // Backward of one forward call (its Q and probs): accumulates dW2 and dv and the keys' and
  // memory's gradients for memory_backward; writes dQ (query_size × B).
  void backward(const In<T>& Q, const In<T>& probs, const In<T>& dcontext, Out<T> dQ);
  // After every backward call of the sequence: dW1 += dK Mᵀ, and dM = W1ᵀ dK + the context
  // gradient (memory_size × steps·memory_batch, overwritten).
  void memory_backward(Matrix<T>& dM);

  Param<T> W1, W2, v;

 private:
  // Column j of the memory or keys for query b.
  Index column(Index j, Index b) const { return j * memory_batch_ + (memory_batch_ == 1 ? 0 : b); }
  Index steps_ = 0, memory_batch_ = 1;
  Matrix<T> M_, K_, dK_, dMctx_;       // memory, keys W1 M, and their gradients
  // Every backward call's context gradient and weights, in call order (queries_ columns in use):
  // memory_backward turns them into dMctx in one product instead of a sweep of M per call.
  Matrix<T> dC_, P_;
  Index queries_ = 0;
  Matrix<T> U_, dU_, DA_;              // W2 Q, its gradient, the gradient to the weights a
  Vector<T> scores_, dscore_, t_;
};

}  // namespace placelab::nn
