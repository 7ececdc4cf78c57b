// The ONNX importer on real PyTorch exports (torch.onnx.export of torchvision's models and of
// transformer, BERT-style and recurrent language models), which scripts/make-onnx-fixtures.py
// writes. CTest runs the script first (the fixture test onnx_torch_exports, which needs
// python3-torch and python3-torchvision, installed by `make test`) and names each file in a
// PLACELAB_*_ONNX variable; run by hand, set the variables yourself.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <string>

#include "placelab/models/onnx_import.h"
#include "placelab/models/zoo.h"

namespace placelab::models {
namespace {

// The export `option` of the script writes: the file the variable `env` names (a run by hand), or
// <option>.onnx in $PLACELAB_TORCH_EXPORTS (CTest's fixture); "" when neither is there.
std::string export_path(const char* env, const char* option) {
  if (const char* path = std::getenv(env); path != nullptr && *path != '\0') return path;
  if (const char* dir = std::getenv("PLACELAB_TORCH_EXPORTS"); dir != nullptr && *dir != '\0')
    return (std::filesystem::path(dir) / (std::string(option + 2) + ".onnx")).string();
  return "";
}

// Why a test has no export to read, or "" when it has one.
std::string missing(const std::string& path, const char* env, const char* option) {
  if (path.empty())
    return std::string("set ") + env + " to the file scripts/make-onnx-fixtures.py " + option +
           " writes, or PLACELAB_TORCH_EXPORTS to a folder of the script's exports";
  if (!std::filesystem::exists(path))
    return path + ": no such file (the export needs python3-torch and python3-torchvision)";
  return "";
}

// torchvision's ResNet-50 exported by scripts/make-onnx-fixtures.py --resnet50: the import must
// equal the zoo's resnet50 in parameters and forward FLOPs.
TEST(OnnxImport, TorchvisionResnet50MatchesTheZoo) {
  const std::string path = export_path("PLACELAB_RESNET50_ONNX", "--resnet50");
  if (const std::string why = missing(path, "PLACELAB_RESNET50_ONNX", "--resnet50"); !why.empty()) GTEST_SKIP() << why;
  // The file is exported at batch 1 (static); the issue's `import --batch 32` replaces it.
  OnnxImportOptions options;
  options.batch = 32;
  options.optimizer = Optimizer::kMomentum;
  OnnxImportReport report;
  OpGraph imported = import_onnx(path, options, &report);
  Model zoo = make_model(ModelSpec::parse("resnet50:batch=32"));
  std::cout << report.brief_report() << "\n"
            << "zoo resnet50: parameters " << zoo.stats.parameters << ", forward " << zoo.stats.forward_flops / 1e9
            << " GFLOPs; ops imported " << imported.num_ops() << " vs zoo " << zoo.graph.num_ops() << "\n"
            << std::fixed << std::setprecision(0) << "forward FLOPs imported " << report.stats.forward_flops << ", zoo "
            << zoo.stats.forward_flops << std::defaultfloat << "\n";
  EXPECT_EQ(report.stats.parameters, 25'557'032);
  EXPECT_EQ(report.stats.parameters, zoo.stats.parameters);
  EXPECT_NEAR(report.stats.forward_flops, zoo.stats.forward_flops, 1e-9 * zoo.stats.forward_flops);
  EXPECT_TRUE(report.approximations.empty()) << report.brief_report();
  // The same training step: op for op by type (names differ: ONNX scopes vs the zoo's).
  std::map<std::string, int> imported_types, zoo_types;
  for (OpId v = 0; v < imported.num_ops(); ++v) ++imported_types[imported.op(v).type];
  for (OpId v = 0; v < zoo.graph.num_ops(); ++v) ++zoo_types[zoo.graph.op(v).type];
  EXPECT_EQ(imported_types, zoo_types);
  EXPECT_EQ(imported.total_persistent_bytes(), zoo.graph.total_persistent_bytes());
  // Layer granularity: one op per ONNX node scope and phase, the same total work.
  options.granularity = Granularity::kLayer;
  OpGraph layers = import_onnx(path, options);
  EXPECT_LT(layers.num_ops(), imported.num_ops() / 3);
  EXPECT_NEAR(layers.total_flops(), imported.total_flops(), 1e-9 * imported.total_flops());
  std::cout << "layer granularity: " << layers.num_ops() << " ops\n";
}

// Real PyTorch 1.13 exports written by scripts/make-onnx-fixtures.py: each imports with exactly the
// parameters torch counts (sum(p.numel() for p in model.parameters()), printed by the script) and
// no unsupported node.
struct TorchExport {
  const char* env;     // the variable naming the file
  const char* option;  // make-onnx-fixtures.py's option that writes it
  int64_t parameters;  // torch's count
  OnnxImportOptions options;
};

class TorchExportImport : public ::testing::TestWithParam<TorchExport> {};

TEST_P(TorchExportImport, HasTorchsParameterCount) {
  const TorchExport& t = GetParam();
  const std::string path = export_path(t.env, t.option);
  if (const std::string why = missing(path, t.env, t.option); !why.empty()) GTEST_SKIP() << why;
  OnnxImportReport report;
  OpGraph g = import_onnx(path, t.options, &report);
  std::cout << report.brief_report() << "\nops in the training step: " << g.num_ops() << "\n";
  EXPECT_EQ(report.stats.parameters, t.parameters);
}

OnnxImportOptions with_batch(int64_t batch) {
  OnnxImportOptions o;
  o.batch = batch;
  return o;
}
OnnxImportOptions with_dims(std::map<std::string, int64_t> dims) {
  OnnxImportOptions o;
  o.dim_values = std::move(dims);
  return o;
}

INSTANTIATE_TEST_SUITE_P(
    Torch, TorchExportImport,
    ::testing::Values(
        // torchvision inception_v3(aux_logits=False), traced at batch 1: Pad + AveragePool pairs.
        TorchExport{"PLACELAB_INCEPTION_V3_ONNX", "--inception-v3", 23'834'568, with_batch(32)},
        // nn.TransformerEncoder (2 layers, d_model 256, 8 heads) + Linear, sequence-first with both
        // dimensions symbolic: Shape arithmetic, Slice, batched MatMul, decomposed LayerNorm.
        TorchExport{"PLACELAB_TRANSFORMER_ONNX", "--transformer", 1'582'090,
                    with_dims({{"sequence", 128}, {"batch", 32}})},
        // GPT-style: embedding + a learned positional table sliced to the sequence, batch-first
        // pre-norm GELU encoder layers under a causal mask, with batch and sequence symbolic.
        TorchExport{"PLACELAB_CAUSAL_TRANSFORMER_ONNX", "--causal-transformer", 112'612,
                    with_dims({{"batch", 8}, {"sequence", 32}})},
        // BERT as Hugging Face writes it: position/token-type ids from buffers, an additive mask
        // computed from the attention_mask input, view/permute head splits, x[:, 0].
        TorchExport{"PLACELAB_BERT_STYLE_ONNX", "--bert-style", 172'546, with_dims({{"batch", 8}, {"sequence", 32}})},
        // Embedding + 2-layer nn.LSTM with (h0, c0) + Linear, traced at 35 steps of batch 20.
        TorchExport{"PLACELAB_LSTM_LM_ONNX", "--lstm-lm", 11'368'208, {}},
        // The same with a 2-layer nn.GRU and h0.
        TorchExport{"PLACELAB_GRU_LM_ONNX", "--gru-lm", 10'448'656, {}}),
    [](const ::testing::TestParamInfo<TorchExport>& p) {
      std::string name = p.param.option + 2;
      for (char& c : name)
        if (c == '-') c = '_';
      return name;
    });

}  // namespace
}  // namespace placelab::models
