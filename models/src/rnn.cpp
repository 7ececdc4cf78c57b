// Recurrent generators: the LSTM language model, the legacy-TF attentional NMT and tensorflow/nmt's
// GNMT, unrolled over time as static graphs (one LSTM cell of ops per layer and step), with
// layer ids for the expert placement: LSTM layer l → l, embeddings → 0, attention and softmax → the
// last layer (GNMT: attention with the bottom layer, as its attention cell wraps layer 0).
#include <string>
#include <vector>

#include "generators.h"

namespace placelab::models::detail {
namespace {

struct LstmVars {
  Value kernel, bias;
};
LstmVars lstm_vars(TrainingGraphBuilder& b, int64_t input, int64_t units) {
  return {b.variable("kernel", {input + units, 4 * units}), b.variable("bias", {4 * units})};
}

std::string step(std::string_view base, int t) { return std::string(base) + "/t" + std::to_string(t); }
std::string cell(std::string_view base, int l) { return std::string(base) + "/cell_" + std::to_string(l); }

// Splits ids [n, T] into T tensors [n] (tf.unstack of the batch-major inputs).
std::vector<Value> unstack(TrainingGraphBuilder& b, Value ids) {
  const Shape s = b.shape(ids);
  std::vector<Value> out;
  for (Value v : b.split(ids, 1, static_cast<int>(s[1]))) out.push_back(b.reshape(v, {s[0]}));
  return out;
}

// An embedding table in layer `name` (layer id 0) and the per-step lookups of `ids`.
std::vector<Value> embed(TrainingGraphBuilder& b, std::string_view name, Value ids, int64_t vocab, int64_t dim) {
  Value table;
  std::vector<Value> steps;
  {
    auto l = b.layer(name, 0);
    table = b.variable("embedding", {vocab, dim});
    steps = unstack(b, ids);
  }
  std::vector<Value> out;
  for (std::size_t t = 0; t < steps.size(); ++t) {
    auto l = b.layer(step(name, static_cast<int>(t)), 0);
    out.push_back(b.gather(table, steps[t]));
  }
  return out;
}

// Per-step softmax layers and the mean of the step losses (legacy sequence_loss).
Value step_softmax(TrainingGraphBuilder& b, const std::vector<Value>& outputs, Value labels, int64_t vocab,
                   int32_t layer) {
  const int64_t units = b.shape(outputs[0])[1];
  Value w, bias;
  std::vector<Value> targets;
  {
    auto l = b.layer("softmax", layer);
    w = b.variable("weights", {units, vocab});
    bias = b.variable("biases", {vocab});
    targets = unstack(b, labels);
  }
  std::vector<Value> losses;
  for (std::size_t t = 0; t < outputs.size(); ++t) {
    auto l = b.layer(step("softmax", static_cast<int>(t)), layer);
    losses.push_back(b.softmax_cross_entropy(b.dense(outputs[t], w, bias), targets[t]));
  }
  auto l = b.layer("loss", layer);
  return b.scale(b.add_n(losses), 1.0 / static_cast<double>(losses.size()));
}

// `layers` stacked LSTM layers unrolled over the sequence `x` (replaced by the top layer's
// outputs), layer l named "<scope>/cell_l" with its variables and steps "<scope>/cell_l/tN", and
// tagged layer l (the unit of expert placements).
void lstm_stack(TrainingGraphBuilder& b, std::string_view scope, std::vector<Value>& x, int layers, int64_t units) {
  for (int l = 0; l < layers; ++l) {
    LstmVars v;
    {
      auto s = b.layer(cell(scope, l), l);
      v = lstm_vars(b, units, units);
    }
    TrainingGraphBuilder::LstmState state;
    for (std::size_t t = 0; t < x.size(); ++t) {
      auto s = b.layer(step(cell(scope, l), static_cast<int>(t)), l);
      state = b.lstm_cell(x[t], state, v.kernel, v.bias);
      x[t] = state.h;
    }
  }
}

}  // namespace

void build_rnnlm(TrainingGraphBuilder& b, const GenOptions& o) {
  const int64_t n = o.integer("batch"), steps = o.integer("seq"), units = o.integer("hidden"), vocab = o.integer("vocab");
  const int layers = static_cast<int>(o.integer("layers"));
  auto in = b.input_pipeline({{n, steps}, {n, steps}});
  std::vector<Value> x = embed(b, "embedding", in[0], vocab, units);
  lstm_stack(b, "rnn", x, layers, units);
  b.minimize(step_softmax(b, x, in[1], vocab, layers - 1));
}

void build_nmt(TrainingGraphBuilder& b, const GenOptions& o) {
  const int64_t n = o.integer("batch"), steps = o.integer("seq"), units = o.integer("hidden"), vocab = o.integer("vocab");
  const int layers = static_cast<int>(o.integer("layers"));
  const int32_t top = layers - 1;
  auto in = b.input_pipeline({{n, steps}, {n, steps}, {n, steps}});  // source, target in, target out
  // Encoder: a stack of LSTM layers over the source.
  std::vector<Value> x = embed(b, "encoder/embedding", in[0], vocab, units);
  lstm_stack(b, "encoder", x, layers, units);
  // Attention states [n, T, H] and their projection (legacy attention_decoder's 1x1 conv).
  Value memory, keys, w_query, v_att, w_out, b_out;
  {
    auto s = b.layer("decoder/attention", top);
    std::vector<Value> parts;
    for (Value h : x) parts.push_back(b.reshape(h, {n, 1, units}));
    memory = b.concat(parts, 1);
    keys = b.matmul(memory, b.variable("memory_kernel", {units, units}));
    w_query = b.variable("query_kernel", {units, units});
    v_att = b.variable("attention_v", {units});
    w_out = b.variable("output_kernel", {2 * units, units});
    b_out = b.variable("output_bias", {units});
  }
  // Decoder with input feeding: each step's input is projected from [embedding, previous attention].
  std::vector<Value> e = embed(b, "decoder/embedding", in[1], vocab, units);
  Value w_in, b_in;
  std::vector<LstmVars> cells;
  {
    auto s = b.layer("decoder/input", 0);
    w_in = b.variable("kernel", {2 * units, units});
    b_in = b.variable("bias", {units});
  }
  for (int l = 0; l < layers; ++l) {
    auto s = b.layer(cell("decoder", l), l);
    cells.push_back(lstm_vars(b, units, units));
  }
  std::vector<TrainingGraphBuilder::LstmState> state(static_cast<std::size_t>(layers));
  Value attention;
  {
    auto s = b.layer("decoder/input", 0);
    attention = b.zeros({n, units});
  }
  std::vector<Value> outputs;
  for (int t = 0; t < static_cast<int>(e.size()); ++t) {
    Value h;
    {
      auto s = b.layer(step("decoder/input", t), 0);
      h = b.dense(b.concat({e[static_cast<std::size_t>(t)], attention}, 1), w_in, b_in);
    }
    for (int l = 0; l < layers; ++l) {
      auto s = b.layer(step(cell("decoder", l), t), l);
      auto& st = state[static_cast<std::size_t>(l)];
      st = b.lstm_cell(h, st, cells[static_cast<std::size_t>(l)].kernel, cells[static_cast<std::size_t>(l)].bias);
      h = st.h;
    }
    auto s = b.layer(step("decoder/attention", t), top);
    // Bahdanau scores v · tanh(keys + W q), softmax over the source, context = Σ a · memory.
    Value q = b.reshape(b.matmul(h, w_query), {n, 1, units});
    Value scores = b.reduce_sum(b.mul(b.tanh(b.add(keys, q)), v_att), {2}, false);
    Value a = b.reshape(b.softmax(scores), {n, steps, 1});
    attention = b.reduce_sum(b.mul(a, memory), {1}, false);
    outputs.push_back(b.dense(b.concat({h, attention}, 1), w_out, b_out));
  }
  b.minimize(step_softmax(b, outputs, in[2], vocab, top));
}

void build_gnmt(TrainingGraphBuilder& b, const GenOptions& o) {
  const int64_t n = o.integer("batch"), steps = o.integer("seq"), units = o.integer("hidden"), vocab = o.integer("vocab");
  const int layers = static_cast<int>(o.integer("layers"));
  const int32_t top = layers - 1;
  constexpr double kDropout = 0.2;  // tensorflow/nmt's default, on every cell input
  auto in = b.input_pipeline({{n, steps}, {n, steps}, {n, steps}});
  const auto T = static_cast<std::size_t>(steps);
  std::vector<Value> x = embed(b, "encoder/embedding", in[0], vocab, units);
  // Layer 0: bidirectional; its output is [forward, backward].
  {
    LstmVars fw, bw;
    {
      auto s = b.layer("encoder/bidirectional", 0);
      {
        auto f = b.scope("fw");
        fw = lstm_vars(b, units, units);
      }
      auto r = b.scope("bw");
      bw = lstm_vars(b, units, units);
    }
    std::vector<Value> out_fw(T), out_bw(T);
    TrainingGraphBuilder::LstmState sf, sb;
    for (std::size_t t = 0; t < T; ++t) {
      auto s = b.layer(step("encoder/bidirectional/fw", static_cast<int>(t)), 0);
      sf = b.lstm_cell(b.dropout(x[t], kDropout), sf, fw.kernel, fw.bias);
      out_fw[t] = sf.h;
    }
    for (std::size_t t = T; t-- > 0;) {
      auto s = b.layer(step("encoder/bidirectional/bw", static_cast<int>(t)), 0);
      sb = b.lstm_cell(b.dropout(x[t], kDropout), sb, bw.kernel, bw.bias);
      out_bw[t] = sb.h;
    }
    for (std::size_t t = 0; t < T; ++t) {
      auto s = b.layer(step("encoder/bidirectional/concat", static_cast<int>(t)), 0);
      x[t] = b.concat({out_fw[t], out_bw[t]}, 1);
    }
  }
  // Uni-directional layers 1..L-1, residual from layer 2 on.
  for (int l = 1; l < layers; ++l) {
    LstmVars v;
    {
      auto s = b.layer(cell("encoder", l), l);
      v = lstm_vars(b, b.shape(x[0])[1], units);
    }
    TrainingGraphBuilder::LstmState st;
    for (std::size_t t = 0; t < T; ++t) {
      auto s = b.layer(step(cell("encoder", l), static_cast<int>(t)), l);
      st = b.lstm_cell(b.dropout(x[t], kDropout), st, v.kernel, v.bias);
      x[t] = l >= 2 ? b.add(st.h, x[t]) : st.h;
    }
  }
  Value memory, keys, w_query, v_att, w_proj;
  {
    auto s = b.layer("decoder/attention", 0);
    std::vector<Value> parts;
    for (Value h : x) parts.push_back(b.reshape(h, {n, 1, units}));
    memory = b.concat(parts, 1);
    keys = b.matmul(memory, b.variable("memory_layer/kernel", {units, units}));
    w_query = b.variable("query_layer/kernel", {units, units});
    v_att = b.variable("attention_v", {units});
  }
  std::vector<Value> e = embed(b, "decoder/embedding", in[1], vocab, units);
  std::vector<LstmVars> cells;
  for (int l = 0; l < layers; ++l) {
    auto s = b.layer(cell("decoder", l), l);
    // Every decoder layer reads [input, attention].
    cells.push_back(lstm_vars(b, 2 * units, units));
  }
  std::vector<TrainingGraphBuilder::LstmState> state(static_cast<std::size_t>(layers));
  Value attention;
  {
    auto s = b.layer("decoder/attention", 0);
    attention = b.zeros({n, units});
  }
  std::vector<Value> outputs;
  for (int t = 0; t < static_cast<int>(T); ++t) {
    Value h;
    {
      auto s = b.layer(step(cell("decoder", 0), t), 0);
      Value input = b.concat({e[static_cast<std::size_t>(t)], attention}, 1);
      state[0] = b.lstm_cell(b.dropout(input, kDropout), state[0], cells[0].kernel, cells[0].bias);
      h = state[0].h;
    }
    {
      auto s = b.layer(step("decoder/attention", t), 0);
      Value q = b.reshape(b.matmul(h, w_query), {n, 1, units});
      Value scores = b.reduce_sum(b.mul(b.tanh(b.add(keys, q)), v_att), {2}, false);
      Value a = b.reshape(b.softmax(scores), {n, 1, steps});
      attention = b.reshape(b.matmul(a, memory), {n, units});
    }
    for (int l = 1; l < layers; ++l) {
      auto s = b.layer(step(cell("decoder", l), t), l);
      auto& st = state[static_cast<std::size_t>(l)];
      const LstmVars& v = cells[static_cast<std::size_t>(l)];
      st = b.lstm_cell(b.dropout(b.concat({h, attention}, 1), kDropout), st, v.kernel, v.bias);
      h = l >= 2 ? b.add(st.h, h) : st.h;
    }
    outputs.push_back(h);
  }
  // One output projection over all steps (tensorflow/nmt's output_layer, no bias).
  auto s = b.layer("decoder/output_projection", top);
  w_proj = b.variable("kernel", {units, vocab});
  Value all = b.concat(outputs, 0);  // [T·n, H], time-major
  Value labels = b.reshape(b.transpose(in[2], {1, 0}), {steps * n});
  b.minimize(b.softmax_cross_entropy(b.matmul(all, w_proj), labels));
}

}  // namespace placelab::models::detail
