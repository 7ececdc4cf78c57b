#include "placelab/models/zoo.h"

#include <functional>
#include <map>
#include <mutex>

#include "generators.h"
#include "placelab/core/error.h"
#include "placelab/core/keys.h"
#include "placelab/core/numbers.h"

namespace placelab::models {
namespace {

using detail::GenOptions;

ModelOption batch(int64_t def, std::string source) {
  return {"batch", std::to_string(def), "examples per step (" + std::move(source) + ")", {}};
}
ModelOption optimizer(std::string def) {
  return {"optimizer", std::move(def),
          "update rule; slot memory per parameter: sgd 0, momentum 1, rmsprop 2, adam 2, adamw 2 (BERT's, in TF ops)",
          {"sgd", "momentum", "rmsprop", "adam", "adamw"}};
}
ModelOption shape_ops() {
  return {"shape_ops", "true",
          "emit the Shape/BroadcastGradientArgs bookkeeping ops TF 1.0-1.2 gradients ran every step (no FLOPs)",
          {"true", "false"}};
}
ModelOption granularity_option() {
  return {"granularity", "op", "op: TensorFlow 1.x ops; layer: one op per layer and phase", {"op", "layer"}};
}
ModelOption batch_norm(std::string def) {
  return {"batch_norm", std::move(def), "fused: FusedBatchNorm ops; decomposed: moments + elementwise ops (TF 1.0 slim)",
          {"fused", "decomposed"}};
}
// The framework whose training program the graph is (docs/models.md, "TensorFlow and PyTorch forms").
ModelOption framework() {
  return {"framework", "tensorflow",
          "tensorflow: the TF-1 graph the papers ran; pytorch: the ops a PyTorch training step launches (fused batch "
          "and layer norm, addmm, one-kernel GELU and dropout, log_softmax + nll_loss, no shape/bookkeeping ops), for "
          "comparison with PyTorch profiler traces",
          {"tensorflow", "pytorch"}};
}
ModelOption integer(std::string key, int64_t def, std::string description) {
  return {std::move(key), std::to_string(def), std::move(description), {}};
}

struct Entry {
  ModelInfo info;
  std::function<void(TrainingGraphBuilder&, const GenOptions&)> build;
  // The integer options the op count grows in proportion to (an unrolled RNN's layers and steps, a
  // transformer's layers): make_model estimates a spec's ops from the default's before building.
  std::vector<std::string> scales_ops = {};
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> kEntries = [] {
    std::vector<Entry> e;
    e.push_back({{"cifar10_cnn",
                  "TensorFlow CIFAR-10 tutorial CNN (Spotlight): 2 conv blocks of conv/pool/LRN, 2 FC layers, softmax",
                  {batch(128, "the tutorial's"), optimizer("sgd"), granularity_option(), shape_ops(),
                   integer("image", 24, "side of the cropped input images, pixels")},
                  ExpertStrategy::kSingleGpu},
                 detail::build_cifar10_cnn});
    for (int depth : {50, 101, 200}) {
      e.push_back({{"resnet" + std::to_string(depth),
                    "ResNet-" + std::to_string(depth) +
                        " v1.5 (torchvision layout) on 224x224 ImageNet images (Post: batch 32)",
                    {batch(32, "Post"), optimizer("momentum"), granularity_option(), shape_ops(), batch_norm("fused"),
                     integer("image", 224, "side of the input images, pixels"), framework()},
                    ExpertStrategy::kSingleGpu},
                   [depth](TrainingGraphBuilder& b, const GenOptions& o) { detail::build_resnet(b, o, depth); }});
    }
    e.push_back({{"alexnet",
                  "AlexNet (torchvision layout: 5 convolutions with biases, 3 max pools, dropout, 3 linear layers) on "
                  "224x224 images",
                  {batch(128, "Krizhevsky et al. 2012"), optimizer("momentum"), granularity_option(),
                   shape_ops(), integer("image", 224, "side of the input images, pixels"), framework()},
                  ExpertStrategy::kSingleGpu},
                 detail::build_alexnet});
    e.push_back({{"inception_v3",
                  "Inception-V3 (torchvision layout) on 299x299 images, as tensorflow/models/inception trained it "
                  "(RMSProp, weight decay, moving averages; Mirhoseini 2017 and Post: batch 32)",
                  {batch(32, "Mirhoseini 2017, Post; EAGLE used 1"), optimizer("rmsprop"), granularity_option(), shape_ops(),
                   batch_norm("decomposed"),
                   {"aux_logits", "true", "the auxiliary classifier on Mixed_6e, loss weight 0.4", {"true", "false"}},
                   framework()},
                  ExpertStrategy::kSingleGpu},
                 detail::build_inception_v3});
    e.push_back({{"rnnlm",
                  "LSTM language model (Zaremba et al.), unrolled, per-step softmax (Post: 4 layers, batch 64, "
                  "fits one K80; Mirhoseini: 40 steps)",
                  {batch(64, "Post, Mirhoseini"), optimizer("adam"), granularity_option(), shape_ops(),
                   integer("layers", 4, "LSTM layers"),
                   // 1024 units: Post runs the 4-layer model on one K80 (0.44 s/step); with 2048 units
                   // the 160 per-step weight gradients TF's AddN holds until aggregation need ~27 GB.
                   integer("hidden", 1024, "LSTM units"),
                   integer("seq", 40, "unrolled time steps"), integer("vocab", 10000, "vocabulary (PTB)")},
                  ExpertStrategy::kLayerPerGpu},
                 detail::build_rnnlm, {"layers", "seq"}});
    e.push_back({{"nmt",
                  "attentional LSTM encoder-decoder (legacy TF seq2seq attention decoder; Post: 2/4/8 layers, "
                  "batch 64, WMT16 as tensorflow/nmt prepares it; Mirhoseini 2017's: seq=40,vocab=32000)",
                  {batch(64, "Mirhoseini, Post"), optimizer("adam"), granularity_option(), shape_ops(),
                   integer("layers", 2, "LSTM layers in the encoder and in the decoder"),
                   integer("hidden", 1024, "LSTM units and embedding size"),
                   // Post's WMT16 (its Table 1 and the NMT-4 memory fact): tensorflow/nmt's
                   // wmt16.json keeps sentences up to 50 tokens; vocab.bpe.32000 holds 36,546 + 3 tokens.
                   integer("seq", 50, "source and target length (WMT16, tensorflow/nmt: 50; Mirhoseini: 40)"),
                   integer("vocab", 36549, "BPE vocabulary of each language (WMT16 vocab.bpe.32000; Mirhoseini: 32000)")},
                  ExpertStrategy::kLayerPerGpu},
                 detail::build_nmt, {"layers", "seq"}});
    e.push_back({{"gnmt",
                  "GNMT as in tensorflow/nmt (EAGLE: 4 layers, batch 256; wmt16_gnmt_4_layer.json otherwise): "
                  "bidirectional first encoder layer, residual layers, Bahdanau attention from the bottom decoder "
                  "layer fed to all layers",
                  {batch(256, "EAGLE"), optimizer("sgd"), granularity_option(), shape_ops(), integer("layers", 4, "LSTM layers"),
                   // 1024 units, tensorflow/nmt's wmt16_gnmt_4_layer.json, which EAGLE says it left as default.
                   // Its text says 256 units, but its own measurements contradict that: 256 units fit one
                   // P100 and give an expert step of 0.39 s; 1024 units are OOM and give 1.60 s (EAGLE:
                   // OOM and 1.661 s). docs/models.md has the figures.
                   integer("hidden", 1024, "LSTM units and embedding size (EAGLE's text: 256; see docs/models.md)"),
                   integer("seq", 50, "source and target length (EAGLE: 20 to 50; wmt16_gnmt_4_layer.json: 50)"),
                   integer("vocab", 36549, "BPE vocabulary of each language (tensorflow/nmt's WMT16 vocab.bpe.32000)")},
                  ExpertStrategy::kLayerPerGpu},
                 detail::build_gnmt, {"layers", "seq"}});
    e.push_back({{"bert_base",
                  "BERT-Base fine-tuning on SQuAD as Google's run_squad.py (EAGLE: seq 384, batch 24)",
                  {batch(24, "EAGLE"), optimizer("adamw"), granularity_option(), shape_ops(),
                   integer("layers", 12, "transformer layers"), integer("hidden", 768, "hidden size"),
                   integer("heads", 12, "attention heads"), integer("seq", 384, "sequence length"),
                   integer("vocab", 30522, "WordPiece vocabulary (uncased)"), framework()},
                  ExpertStrategy::kSingleGpu},
                 detail::build_bert, {"layers"}});
    return e;
  }();
  return kEntries;
}


}  // namespace

int64_t detail::GenOptions::integer(const std::string& key) const {
  auto it = values.find(key);
  PLACELAB_CHECK(it != values.end()) << "generator reads unknown option " << key;
  return parse_number<int64_t>(it->second).value_or(0);
}
const std::string& detail::GenOptions::text(const std::string& key) const {
  auto it = values.find(key);
  PLACELAB_CHECK(it != values.end()) << "generator reads unknown option " << key;
  return it->second;
}

ModelSpec ModelSpec::parse(std::string_view text) {
  ModelSpec spec;
  auto colon = text.find(':');
  spec.name = std::string(text.substr(0, colon));
  auto fail = [&](const std::string& rule) { throw InputError("model spec '" + std::string(text) + "': " + rule); };
  if (spec.name.empty()) fail("empty model name");
  if (colon == std::string_view::npos) return spec;
  std::string_view rest = text.substr(colon + 1);
  while (true) {
    auto comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    auto eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == item.size())
      fail("option '" + std::string(item) + "' is not key=value");
    std::string key(item.substr(0, eq));
    if (!spec.options.emplace(key, std::string(item.substr(eq + 1))).second) fail("option '" + key + "' given twice");
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return spec;
}

std::string ModelSpec::to_string() const {
  std::string out = name;
  char sep = ':';
  for (const auto& [k, v] : options) {
    out += sep + k + "=" + v;
    sep = ',';
  }
  return out;
}

std::span<const ModelInfo> model_zoo() {
  static const std::vector<ModelInfo> kInfos = [] {
    std::vector<ModelInfo> v;
    for (const Entry& e : entries()) v.push_back(e.info);
    return v;
  }();
  return kInfos;
}

const ModelInfo* find_model(std::string_view name) {
  for (const ModelInfo& m : model_zoo())
    if (m.name == name) return &m;
  return nullptr;
}

namespace {

// The op count of `entry` at its defaults, built once per model and process.
std::size_t default_op_count(const Entry& entry) {
  static std::mutex mutex;
  static std::map<std::string, std::size_t> counts;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (auto it = counts.find(entry.info.name); it != counts.end()) return it->second;
  }
  const std::size_t n = make_model(ModelSpec{entry.info.name, {}}).graph.num_ops();
  const std::lock_guard<std::mutex> lock(mutex);
  counts[entry.info.name] = n;
  return n;
}

}  // namespace

namespace {

// The largest value of a zoo model's integer option. Every tensor's bytes and every op's FLOPs
// are products of these (batch x image² x channels, batch x seq x vocab, hidden² x 4 …), held in
// 64 bits: `resnet50:image=2147483647` printed -3 TiB of edges and `rnnlm:hidden=1073741824` a
// negative op time. The bounds are far above any published configuration (ImageNet crops of 224
// to 600 px, vocabularies of 30k to 256k, hidden sizes up to 25,600) and keep every product below
// 2^63. Op counts (layers, seq) are bounded again by the builder's op limit.
int64_t max_option_value(std::string_view key) {
  if (key == "batch") return 65'536;
  if (key == "image") return 1'024;
  if (key == "hidden") return 65'536;
  if (key == "heads") return 1'024;
  if (key == "vocab") return 10'000'000;
  return 100'000;  // layers, seq: the op-count bound decides
}

}  // namespace

Model make_model(const ModelSpec& spec) {
  const Entry* entry = nullptr;
  std::vector<std::string> names;
  for (const Entry& e : entries()) {
    names.push_back(e.info.name);
    if (e.info.name == spec.name) entry = &e;
  }
  if (!entry) throw InputError("model '" + spec.name + "': unknown model; the zoo has " + join_names(names));
  GenOptions o;
  std::vector<std::string> keys;
  for (const ModelOption& opt : entry->info.options) {
    o.values[opt.key] = opt.default_value;
    keys.push_back(opt.key);
  }
  for (const auto& [key, value] : spec.options) {
    const ModelOption* opt = nullptr;
    for (const ModelOption& c : entry->info.options)
      if (c.key == key) opt = &c;
    std::string where = "model '" + spec.to_string() + "': " + key + " = " + value;
    if (!opt) throw InputError("model '" + spec.to_string() + "': unknown option '" + key + "'; " + spec.name +
                               " takes " + join_names(keys));
    if (opt->choices.empty()) {
      const std::optional<int64_t> v = parse_number<int64_t>(value);
      const int64_t most = max_option_value(key);
      if (!v || *v <= 0 || *v > most)
        throw InputError(where + ": must be a positive integer, at most " + std::to_string(most));
    } else if (std::find(opt->choices.begin(), opt->choices.end(), value) == opt->choices.end()) {
      throw InputError(where + ": must be one of " + join_names(opt->choices));
    }
    o.values[key] = value;
  }
  BuilderOptions bo;
  if (auto it = o.values.find("framework"); it != o.values.end()) bo.framework = *framework_from_name(it->second);
  const bool pytorch = bo.framework == Framework::kPyTorch;
  if (pytorch) {
    // The PyTorch form has no TF bookkeeping; an explicit request for it is a contradiction.
    for (const char* key : {"shape_ops", "batch_norm"}) {
      if (!o.values.count(key)) continue;
      auto given = spec.options.find(key);
      const char* pytorch_value = std::string_view(key) == "shape_ops" ? "false" : "fused";
      if (given != spec.options.end() && given->second != pytorch_value)
        throw InputError("model '" + spec.to_string() + "': " + key + " = " + given->second + ": framework=pytorch has " +
                         key + "=" + pytorch_value);
      o.values[key] = pytorch_value;
    }
  }
  bo.granularity = *granularity_from_name(o.text("granularity"));
  bo.optimizer = *optimizer_from_name(o.text("optimizer"));
  // torch.optim.AdamW is one fused update per parameter, as Adam's; TF 1.x built it from ops.
  if (pytorch && bo.optimizer == Optimizer::kAdamWeightDecay) bo.optimizer = Optimizer::kAdam;
  if (auto it = o.values.find("batch_norm"); it != o.values.end())
    bo.batch_norm = it->second == "fused" ? BatchNormStyle::kFused : BatchNormStyle::kDecomposed;
  // The TF 1.x training scripts these graphs reproduce: tensorflow/models/inception and the
  // CIFAR-10 tutorial keep moving averages of all variables.
  bo.variable_moving_averages = !pytorch && (spec.name == "inception_v3" || spec.name == "cifar10_cnn");
  // The seq2seq, language-model and BERT scripts clip gradients by their global norm.
  bo.clip_gradients = spec.name == "rnnlm" || spec.name == "nmt" || spec.name == "gnmt" || spec.name == "bert_base";
  bo.shape_ops = o.text("shape_ops") == "true";
  // cifar10.train(): apply_gradients with the global step, an exponentially decayed learning rate,
  // the averages' decay from num_updates = global_step, and _add_loss_summaries' loss averages.
  bo.global_step = bo.exponential_decay_learning_rate = bo.loss_moving_averages = spec.name == "cifar10_cnn";
  // A spec far above the defaults is refused before it is built: the default's op count (built once
  // per model) times the growth of the options the count is proportional to.
  double growth = 1;
  for (const std::string& key : entry->scales_ops) {
    for (const ModelOption& opt : entry->info.options)
      if (opt.key == key) growth *= static_cast<double>(o.integer(key)) / static_cast<double>(*parse_number<int64_t>(opt.default_value));
  }
  if (growth > 1) {
    const double estimate = static_cast<double>(default_op_count(*entry)) * growth;
    if (estimate > static_cast<double>(detail::kMaxModelOps))
      throw InputError("model '" + spec.to_string() + "': about " + std::to_string(static_cast<int64_t>(estimate)) + " ops (" +
                       std::to_string(default_op_count(*entry)) + " at the defaults), more than " +
                       std::to_string(detail::kMaxModelOps) + ", the most a zoo model is built with (fewer layers or a "
                       "shorter sequence)");
  }
  TrainingGraphBuilder b(bo);
  try {
    entry->build(b, o);
  } catch (const InputError& e) {
    throw InputError("model '" + spec.to_string() + "': " + e.what());
  }
  Model m;
  m.spec = {spec.name, o.values};
  m.stats = b.stats();
  m.graph = std::move(b).finish();
  m.expert = entry->info.expert;
  return m;
}

}  // namespace placelab::models
