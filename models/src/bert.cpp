// BERT-Base fine-tuning on SQuAD as Google's run_squad.py builds it in TF 1.x: embeddings
// (word lookup, one-hot token types, positions), `layers` transformer layers with decomposed
// layer norm, tanh-approximated GELU and dropout 0.1, the start/end span head and its loss.
// The pooler of BertModel is not on the SQuAD loss's path, so no op of it runs in a step.
#include <cmath>
#include <string>

#include "generators.h"
#include "placelab/core/error.h"

namespace placelab::models::detail {
namespace {

constexpr double kDropout = 0.1;

Value dense(TrainingGraphBuilder& b, Value x, std::string_view name, int64_t units) {
  auto s = b.scope(name);
  return b.dense(x, b.variable("kernel", {b.shape(x).back(), units}), b.variable("bias", {units}));
}

// 0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³))), op by op as modeling.gelu; PyTorch (HF's
// BertIntermediate) one F.gelu kernel.
Value gelu(TrainingGraphBuilder& b, Value x) {
  auto s = b.scope("gelu");
  if (b.options().framework == Framework::kPyTorch) return b.gelu(x);
  Value inner = b.scale(b.add(x, b.scale(b.pow(x, 3), 0.044715)), std::sqrt(2 / M_PI));
  return b.mul(x, b.scale(b.add_constant(b.tanh(inner), 1), 0.5));
}

}  // namespace

void build_bert(TrainingGraphBuilder& b, const GenOptions& o) {
  const int64_t n = o.integer("batch"), seq = o.integer("seq"), hidden = o.integer("hidden"),
                heads = o.integer("heads"), vocab = o.integer("vocab");
  const int layers = static_cast<int>(o.integer("layers"));
  if (hidden % heads != 0)
    throw InputError("model 'bert_base': hidden = " + std::to_string(hidden) + ": must be a multiple of heads = " +
                     std::to_string(heads));
  if (seq > 512) throw InputError("model 'bert_base': seq = " + std::to_string(seq) + ": must be <= 512 positions");
  const int64_t head_dim = hidden / heads, tokens = n * seq;
  // input ids, token types (TF: one-hot), position ids, the additive attention mask, start and end
  // labels.
  const bool pytorch = b.options().framework == Framework::kPyTorch;
  auto in = b.input_pipeline({{n, seq}, pytorch ? Shape{tokens} : Shape{tokens, 2}, {seq}, {n, 1, 1, seq}, {n}, {n}});
  Value x;
  {
    auto l = b.layer("bert/embeddings", 0);
    Value words = b.gather(b.variable("word_embeddings", {vocab, hidden}), in[0]);  // [n, seq, hidden]
    // run_squad.py multiplies one-hot token types with the table; HF's BertEmbeddings looks them up.
    Value type_table = b.variable("token_type_embeddings", {2, hidden});
    Value types = pytorch ? b.gather(type_table, in[1]) : b.matmul(in[1], type_table);
    Value positions = b.gather(b.variable("position_embeddings", {512, hidden}), in[2]);  // [seq, hidden]
    x = b.add(b.reshape(b.add(words, positions), {tokens, hidden}), types);
    x = b.dropout(b.layer_norm(x), kDropout);
  }
  for (int i = 0; i < layers; ++i) {
    auto l = b.layer("bert/encoder/layer_" + std::to_string(i), i);
    Value attn;
    {
      auto s = b.scope("attention/self");
      auto split_heads = [&](Value v) { return b.transpose(b.reshape(v, {n, seq, heads, head_dim}), {0, 2, 1, 3}); };
      Value q = split_heads(dense(b, x, "query", hidden));
      Value k = split_heads(dense(b, x, "key", hidden));
      Value v = split_heads(dense(b, x, "value", hidden));
      Value scores = b.add(b.scale(b.matmul(q, k, true), 1 / std::sqrt(static_cast<double>(head_dim))), in[3]);
      Value probs = b.dropout(b.softmax(scores), kDropout);
      Value ctx = b.transpose(b.matmul(probs, v), {0, 2, 1, 3});
      attn = b.reshape(ctx, {tokens, hidden});
    }
    {
      auto s = b.scope("attention/output");
      x = b.layer_norm(b.add(b.dropout(dense(b, attn, "dense", hidden), kDropout), x));
    }
    Value inter;
    {
      auto s = b.scope("intermediate");
      inter = gelu(b, dense(b, x, "dense", 4 * hidden));
    }
    auto s = b.scope("output");
    x = b.layer_norm(b.add(b.dropout(dense(b, inter, "dense", hidden), kDropout), x));
  }
  auto l = b.layer("cls/squad", layers - 1);
  Value logits = b.transpose(b.reshape(dense(b, x, "output", 2), {n, seq, 2}), {2, 0, 1});  // [2, n, seq]
  auto start_end = b.split(logits, 0, 2);
  Value start = b.softmax_cross_entropy(b.reshape(start_end[0], {n, seq}), in[4]);
  Value end = b.softmax_cross_entropy(b.reshape(start_end[1], {n, seq}), in[5]);
  b.minimize(b.scale(b.add(start, end), 0.5));
}

}  // namespace placelab::models::detail
