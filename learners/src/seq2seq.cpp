#include "placelab/learners/seq2seq.h"

#include <cmath>

#include "placelab/core/error.h"
#include "placelab/learners/nn/functions.h"
#include "decide.h"
#include "require.h"

namespace placelab {

using nn::Index;

void Seq2SeqOptions::validate(const std::string& owner) const {
  using detail::require;
  require(hidden >= 2 && hidden <= 4096, owner, "hidden", std::to_string(hidden), "must be in [2, 4096]");
  require(!bidirectional || hidden % 2 == 0, owner, "hidden", std::to_string(hidden),
          "must be even with a bidirectional encoder (half per direction)");
  require(layers >= 1 && layers <= 8, owner, "layers", std::to_string(layers), "must be in [1, 8]");
  require(forget_bias >= -10 && forget_bias <= 10, owner, "forget_bias", format_6g(forget_bias), "must be in [-10, 10]");
  require(temperature > 0 && std::isfinite(temperature), owner, "temperature", format_6g(temperature), "must be > 0");
  require(tanh_constant >= 0 && std::isfinite(tanh_constant), owner, "tanh_constant", format_6g(tanh_constant),
          "must be >= 0 (0 = unbounded)");
  require(!hp_memory_pairing || bidirectional, owner, "hp_memory_pairing", "true", "needs a bidirectional encoder");
  require(!hp_memory_pairing || attention != AttentionPlacement::kNone, owner, "hp_memory_pairing", "true",
          "needs attention");
}

template <typename T>
Seq2SeqPolicy<T>::Seq2SeqPolicy(const Seq2SeqOptions& options, Index input_size, Index steps, Index num_devices,
                                Rng& rng)
    : options_(options), input_size_(input_size), steps_(steps), devices_(num_devices), hidden_(options.hidden) {
  options_.validate("seq2seq");
  PLACELAB_CHECK(input_size >= 0 && steps >= 1 && num_devices >= 1 && num_devices <= 65535)
      << "seq2seq of " << steps << " steps over " << num_devices << " devices, input " << input_size;
  const Index H = hidden_;
  const auto fb = static_cast<T>(options_.forget_bias);
  const bool attend = options_.attention != AttentionPlacement::kNone;
  Index in = input_size;
  if (input_size == 0) {
    step_embedding_ = nn::Embedding<T>("encoder.input", steps, H);
    in = H;
  }
  for (int l = 0; l < options_.layers; ++l) {
    const std::string name = "encoder.l" + std::to_string(l);
    if (options_.bidirectional) enc_bi_.emplace_back(name, in, H / 2, options_.hp_memory_pairing && l + 1 == options_.layers, fb);
    else enc_uni_.emplace_back(name, in, H, false, fb);
    in = H;
  }
  device_embedding_ = nn::Embedding<T>("decoder.device", num_devices + 1, H);
  for (int l = 0; l < options_.layers; ++l)
    dec_.emplace_back("decoder.l" + std::to_string(l),
                      l == 0 && options_.attention == AttentionPlacement::kBefore ? 2 * H : H, H, fb);
  if (attend) attention_ = nn::Attention<T>("attention", H, H, H);
  head_ = nn::Linear<T>("output", attend ? 2 * H : H, num_devices);

  // Registered once every layer is in place (the set holds pointers), in a fixed order.
  if (input_size == 0) step_embedding_.register_params(params_);
  for (auto& e : enc_uni_) e.register_params(params_);
  for (auto& e : enc_bi_) e.register_params(params_);
  device_embedding_.register_params(params_);
  for (auto& d : dec_) d.register_params(params_);
  if (attend) attention_.register_params(params_);
  head_.register_params(params_);

  if (input_size == 0) step_embedding_.init(rng);
  for (auto& e : enc_uni_) e.init(rng);
  for (auto& e : enc_bi_) e.init(rng);
  device_embedding_.init(rng);
  for (auto& d : dec_) d.init(rng);
  if (attend) attention_.init(rng);
  head_.init(rng);
  if (options_.uniform_start) head_.W.value.setZero();

  const auto L = static_cast<std::size_t>(options_.layers);
  dec_h0_.resize(L);
  dec_c0_.resize(L);
  gates_.resize(L);
  C_.resize(L);
  H_.resize(L);
  ddec_P_.resize(L);
  dh_carry_.resize(L);
  dc_carry_.resize(L);
}

template <typename T>
void Seq2SeqPolicy<T>::encode(const Matrix& inputs) {
  const Index S = steps_, H = hidden_;
  if (input_size_ > 0) {
    PLACELAB_CHECK(inputs.rows() == input_size_ && (inputs.cols() == S || inputs.cols() == S * batch_))
        << "seq2seq inputs " << inputs.rows() << " × " << inputs.cols() << " for " << S << " steps of " << batch_;
    enc_batch_ = inputs.cols() / S;
    X_ = inputs;
  } else {
    enc_batch_ = 1;
    X_ = step_embedding_.E.value;
  }
  const Matrix* x = &X_;
  for (int l = 0; l < options_.layers; ++l) {
    const auto k = static_cast<std::size_t>(l);
    // The decoder's layer l starts from the encoder's layer l final state, one column per placement.
    if (options_.bidirectional) {
      enc_bi_[k].forward(*x, S, enc_batch_);
      x = &enc_bi_[k].outputs();
      dec_h0_[k] = enc_bi_[k].final_h();
      dec_c0_[k] = enc_bi_[k].final_c();
    } else {
      enc_uni_[k].forward(*x, S, enc_batch_);
      x = &enc_uni_[k].outputs();
      dec_h0_[k] = enc_uni_[k].final_h();
      dec_c0_[k] = enc_uni_[k].final_c();
    }
    if (enc_batch_ == 1 && batch_ > 1) {
      const Matrix h = dec_h0_[k], c = dec_c0_[k];
      dec_h0_[k].resize(H, batch_);
      dec_c0_[k].resize(H, batch_);
      dec_h0_[k].colwise() = h.col(0);
      dec_c0_[k].colwise() = c.col(0);
    }
  }
  if (options_.attention != AttentionPlacement::kNone) attention_.set_memory(*x, S, enc_batch_);
}

template <typename T>
void Seq2SeqPolicy<T>::forward(const Matrix& inputs, Index batch, DecodeMode mode, std::vector<uint16_t>& choices,
                               Matrix& noise, double noise_std, Rng* rng) {
  const Index S = steps_, H = hidden_, D = devices_, B = batch;
  detail::prepare_decisions<T>(mode, S, B, D, choices, noise, noise_std, rng);
  batch_ = batch;
  encode(inputs);

  const auto L = static_cast<std::size_t>(options_.layers);
  for (std::size_t l = 0; l < L; ++l) {
    gates_[l].resize(4 * H, S * B);
    C_[l].resize(H, S * B);
    H_[l].resize(H, S * B);
  }
  const bool attend = options_.attention != AttentionPlacement::kNone;
  if (attend) att_probs_.resize(S, S * B);
  head_in_.resize(attend ? 2 * H : H, S * B);
  shaped_.resize(D, S * B);
  probs_.resize(D, S * B);
  logits_step_.resize(D, B);
  P0_.resize(4 * H, B);
  log_probs_.assign(static_cast<std::size_t>(B), 0.0);
  input_ids_.assign(static_cast<std::size_t>(S * B), 0);
  // Layer 0's input is a device embedding (or "go"): its gate contribution is a table lookup.
  const nn::LstmCell<T>& cell0 = dec_[0];
  table_.resize(4 * H, D + 1);
  table_.noalias() = cell0.Wx.value.leftCols(H) * device_embedding_.E.value;
  table_.colwise() += cell0.b.value.col(0);
  for (Index s = 0; s < S; ++s) {
    this->check_stop();
    decode_step(s, mode, choices, noise, noise_std, rng);
  }
}

template <typename T>
void Seq2SeqPolicy<T>::decode_step(Index s, DecodeMode mode, std::vector<uint16_t>& choices, Matrix& noise,
                                   double noise_std, Rng* rng) {
  const Index S = steps_, H = hidden_, D = devices_, B = batch_;
  const std::size_t top = static_cast<std::size_t>(options_.layers) - 1;
  const auto block = [&](Matrix& m) { return m.middleCols(s * B, B); };
  for (Index b = 0; b < B; ++b) {
    const Index id = s == 0 ? D : choices[static_cast<std::size_t>(b * S + s - 1)];
    input_ids_[static_cast<std::size_t>(s * B + b)] = id;
    P0_.col(b) = table_.col(id);
  }
  if (options_.attention == AttentionPlacement::kBefore) {
    // EAGLE: the context for step s comes from the decoder's state before it and joins its input.
    const nn::In<T> query = s == 0 ? nn::In<T>(dec_h0_[top]) : nn::In<T>(H_[top].middleCols((s - 1) * B, B));
    auto context = head_in_.bottomRows(H).middleCols(s * B, B);
    attention_.forward(query, block(att_probs_), context);
    nn::multiply(P0_, dec_[0].Wx.value.rightCols(H), context, /*accumulate=*/true);
  }
  for (std::size_t l = 0; l <= top; ++l) {
    if (l > 0) dec_[l].project_input(H_[l - 1].middleCols(s * B, B), P0_);
    const nn::In<T> h_prev = s == 0 ? nn::In<T>(dec_h0_[l]) : nn::In<T>(H_[l].middleCols((s - 1) * B, B));
    const nn::In<T> c_prev = s == 0 ? nn::In<T>(dec_c0_[l]) : nn::In<T>(C_[l].middleCols((s - 1) * B, B));
    dec_[l].step(P0_, h_prev, c_prev, block(gates_[l]), block(C_[l]), block(H_[l]));
  }
  head_in_.topRows(H).middleCols(s * B, B) = block(H_[top]);
  if (options_.attention == AttentionPlacement::kAfter)
    attention_.forward(block(H_[top]), block(att_probs_), head_in_.bottomRows(H).middleCols(s * B, B));
  head_.forward(block(head_in_), logits_step_);
  auto shaped = block(shaped_);
  nn::shape_logits<T>(logits_step_, static_cast<T>(options_.temperature), static_cast<T>(options_.tanh_constant), shaped);
  detail::decide_step<T>(shaped, s, S, mode, choices, noise, noise_std, rng, logits_step_, block(probs_), log_probs_);
}

template <typename T>
void Seq2SeqPolicy<T>::backward(const Matrix& dlogits) {
  const Index S = steps_, H = hidden_, D = devices_, B = batch_;
  PLACELAB_CHECK(B > 0 && dlogits.rows() == D && dlogits.cols() == S * B)
      << "dlogits " << dlogits.rows() << " × " << dlogits.cols() << " after a forward of " << S << " × " << B;
  const std::size_t top = static_cast<std::size_t>(options_.layers) - 1;
  const bool before = options_.attention == AttentionPlacement::kBefore;

  // Output layer over every step at once; with attention after the LSTM, its backward too (the
  // queries are the decoder's outputs, so nothing waits on the recurrence).
  dshaped_.resize(D, S * B);
  nn::shape_logits_backward<T>(shaped_, dlogits, static_cast<T>(options_.temperature),
                               static_cast<T>(options_.tanh_constant), dshaped_);
  head_.backward(head_in_, dshaped_, &dhead_in_);
  dq_.resize(H, B);
  if (options_.attention == AttentionPlacement::kAfter)
    for (Index s = 0; s < S; ++s) {
      attention_.backward(H_[top].middleCols(s * B, B), att_probs_.middleCols(s * B, B),
                          dhead_in_.bottomRows(H).middleCols(s * B, B), dq_);
      dhead_in_.topRows(H).middleCols(s * B, B) += dq_;
    }

  // The decoder's recurrence, last step first, top layer first.
  for (std::size_t l = 0; l <= top; ++l) {
    ddec_P_[l].resize(4 * H, S * B);
    dh_carry_[l].setZero(H, B);
    dc_carry_[l].setZero(H, B);
  }
  dtable_.setZero(4 * H, D + 1);
  dh_.resize(H, B);
  for (Index s = S - 1; s >= 0; --s) {
    this->check_stop();
    for (std::size_t l = top + 1; l-- > 0;) {
      dh_ = dh_carry_[l];
      if (l == top) dh_ += dhead_in_.topRows(H).middleCols(s * B, B);
      else dh_ += dx_below_;
      const nn::In<T> c_prev = s == 0 ? nn::In<T>(dec_c0_[l]) : nn::In<T>(C_[l].middleCols((s - 1) * B, B));
      auto dP = ddec_P_[l].middleCols(s * B, B);
      dec_[l].step_backward(gates_[l].middleCols(s * B, B), c_prev, C_[l].middleCols(s * B, B), dh_, dc_carry_[l], dP);
      dec_[l].recurrent_backward(dP, dh_carry_[l]);
      if (l > 0) {
        dx_below_.resize(H, B);
        nn::multiply(dx_below_, dec_[l].Wx.value.transpose(), dP);
        continue;
      }
      // Layer 0: its input part came from the device table (and, before attention, the context).
      for (Index b = 0; b < B; ++b) dtable_.col(input_ids_[static_cast<std::size_t>(s * B + b)]) += dP.col(b);
      if (before) {
        // The context fed both this step's input and its output layer.
        dctx_ = dhead_in_.bottomRows(H).middleCols(s * B, B);
        nn::multiply(dctx_, dec_[0].Wx.value.rightCols(H).transpose(), dP, /*accumulate=*/true);
        const nn::In<T> query = s == 0 ? nn::In<T>(dec_h0_[top]) : nn::In<T>(H_[top].middleCols((s - 1) * B, B));
        attention_.backward(query, att_probs_.middleCols(s * B, B), dctx_, dq_);
        dh_carry_[top] += dq_;  // the query was the top layer's state one step earlier
      }
    }
  }

  // Weight gradients of the decoder cells, one GEMM per kind over every step.
  for (std::size_t l = 0; l <= top; ++l) {
    nn::LstmCell<T>& cell = dec_[l];
    if (S > 1) cell.accumulate_recurrent(ddec_P_[l].rightCols((S - 1) * B), H_[l].leftCols((S - 1) * B));
    cell.accumulate_recurrent(ddec_P_[l].leftCols(B), dec_h0_[l]);
    if (l > 0) {
      cell.project_input_backward(H_[l - 1], ddec_P_[l], nullptr);
      continue;
    }
    cell.b.grad.col(0) += ddec_P_[0].rowwise().sum();
    cell.Wx.grad.leftCols(H).noalias() += dtable_ * device_embedding_.E.value.transpose();
    device_embedding_.E.grad.noalias() += cell.Wx.value.leftCols(H).transpose() * dtable_;
    if (before) cell.Wx.grad.rightCols(H).noalias() += ddec_P_[0] * head_in_.bottomRows(H).transpose();
  }
  encoder_backward();
}

template <typename T>
void Seq2SeqPolicy<T>::encoder_backward() {
  const Index B = batch_;
  const std::size_t top = static_cast<std::size_t>(options_.layers) - 1;
  // The decoder's initial state was the encoder's final state, copied to every placement.
  for (std::size_t l = 0; l <= top; ++l)
    if (enc_batch_ == 1 && B > 1) {
      dh_carry_[l] = Matrix(dh_carry_[l].rowwise().sum());
      dc_carry_[l] = Matrix(dc_carry_[l].rowwise().sum());
    }
  const Matrix* dH = nullptr;
  if (options_.attention != AttentionPlacement::kNone) {
    attention_.memory_backward(dM_);
    dH = &dM_;
  }
  for (std::size_t l = top + 1; l-- > 0;) {
    const Matrix& x = l == 0 ? X_ : (options_.bidirectional ? enc_bi_[l - 1].outputs() : enc_uni_[l - 1].outputs());
    const bool want_dx = l > 0 || input_size_ == 0;
    if (options_.bidirectional)
      enc_bi_[l].backward(x, dH, &dh_carry_[l], &dc_carry_[l], want_dx ? &dmem_ : nullptr);
    else
      enc_uni_[l].backward(x, dH, &dh_carry_[l], &dc_carry_[l], want_dx ? &dmem_ : nullptr);
    if (!want_dx) break;
    if (l == 0) {
      step_embedding_.E.grad += dmem_;
      break;
    }
    dM_ = dmem_;
    dH = &dM_;
  }
}

namespace detail {

template <typename T>
void prepare_decisions(DecodeMode mode, Index steps, Index batch, Index devices, std::vector<uint16_t>& choices,
                       nn::Matrix<T>& noise, double noise_std, const Rng* rng) {
  const Index n = steps * batch;
  PLACELAB_CHECK(batch >= 1) << "placer batch " << batch;
  PLACELAB_CHECK(mode != DecodeMode::kSample || rng) << "sampling needs an rng";
  if (mode == DecodeMode::kGiven) {
    PLACELAB_CHECK(static_cast<Index>(choices.size()) == n) << choices.size() << " choices for " << n;
    for (uint16_t c : choices) PLACELAB_CHECK(c < devices) << "choice " << c << " of " << devices << " devices";
    PLACELAB_CHECK(noise.size() == 0 || (noise.rows() == devices && noise.cols() == n)) << "noise shape";
  } else {
    choices.assign(static_cast<std::size_t>(n), 0);
    if (mode == DecodeMode::kSample && noise_std > 0) noise.resize(devices, n);
    else noise.resize(0, 0);
  }
}

template <typename T>
void decide_step(const nn::In<T>& shaped, Index s, Index steps, DecodeMode mode, std::vector<uint16_t>& choices,
                 nn::Matrix<T>& noise, double noise_std, Rng* rng, nn::Matrix<T>& logits, nn::Out<T> probs,
                 std::vector<double>& log_probs) {
  const Index D = shaped.rows(), B = shaped.cols();
  logits = shaped;
  if (noise.size() > 0) {
    if (mode == DecodeMode::kSample) {
      // The Hierarchical Planner's logit noise: std = noise_std × the RMS of the step's logits.
      const double rms = std::sqrt(shaped.template cast<double>().squaredNorm() / static_cast<double>(shaped.size()));
      for (Index b = 0; b < B; ++b)
        for (Index d = 0; d < D; ++d) noise(d, s * B + b) = static_cast<T>(noise_std * rms * standard_normal(*rng));
    }
    logits += noise.middleCols(s * B, B);
  }
  nn::softmax_columns<T>(logits, probs);
  for (Index b = 0; b < B; ++b) {
    uint16_t& choice = choices[static_cast<std::size_t>(b * steps + s)];
    if (mode == DecodeMode::kSample) {
      choice = static_cast<uint16_t>(nn::sample_category(probs.col(b).data(), D, uniform01(*rng)));
    } else if (mode == DecodeMode::kGreedy) {
      Index best = 0;
      logits.col(b).maxCoeff(&best);
      choice = static_cast<uint16_t>(best);
    }
    // log p from the logits, exact even where p underflows.
    const double mx = static_cast<double>(logits.col(b).maxCoeff());
    double sum = 0;
    for (Index d = 0; d < D; ++d) sum += std::exp(static_cast<double>(logits(d, b)) - mx);
    log_probs[static_cast<std::size_t>(b)] += static_cast<double>(logits(choice, b)) - mx - std::log(sum);
  }
}

template void prepare_decisions<float>(DecodeMode, Index, Index, Index, std::vector<uint16_t>&, nn::Matrix<float>&,
                                       double, const Rng*);
template void prepare_decisions<double>(DecodeMode, Index, Index, Index, std::vector<uint16_t>&, nn::Matrix<double>&,
                                        double, const Rng*);
template void decide_step<float>(const nn::In<float>&, Index, Index, DecodeMode, std::vector<uint16_t>&,
                                 nn::Matrix<float>&, double, Rng*, nn::Matrix<float>&, nn::Out<float>,
                                 std::vector<double>&);
template void decide_step<double>(const nn::In<double>&, Index, Index, DecodeMode, std::vector<uint16_t>&,
                                  nn::Matrix<double>&, double, Rng*, nn::Matrix<double>&, nn::Out<double>,
                                  std::vector<double>&);

}  // namespace detail

template class Seq2SeqPolicy<float>;
template class Seq2SeqPolicy<double>;

}  // namespace placelab
