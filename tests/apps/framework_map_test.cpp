// Placements in a framework's terms (apps/src/framework_map.h): device spellings, PyTorch module
// paths from ONNX scopes, and the majority rule of torch_module_map.
#include "framework_map.h"

#include <gtest/gtest.h>

#include "placelab/core/error.h"

namespace {

using placelab::cli::framework_device;
using placelab::cli::torch_module_map;
using placelab::cli::torch_module_path;
using placelab::models::Framework;

TEST(FrameworkDevice, SpellsCpuAndGpuAsEachFrameworkDoes) {
  EXPECT_EQ(framework_device("gpu:3", Framework::kPyTorch), "cuda:3");
  EXPECT_EQ(framework_device("cpu:0", Framework::kPyTorch), "cpu");
  EXPECT_EQ(framework_device("gpu:3", Framework::kTensorFlow), "/device:GPU:3");
  EXPECT_EQ(framework_device("cpu:1", Framework::kTensorFlow), "/device:CPU:1");
  for (const char* bad : {"host1/gpu:0", "gpu", "gpu:", "gpu:x", "gpu:-1", "tpu:0", "gpu:1x"})
    EXPECT_THROW(framework_device(bad, Framework::kPyTorch), placelab::InputError) << bad;
}

TEST(TorchModulePath, JoinsAttributeNamesAndKeepsFullPaths) {
  // PyTorch 1.13 names a Sequential's children by their full path, other children by attribute.
  EXPECT_EQ(torch_module_path("layer1/layer1.0/conv1"), "layer1.0.conv1");
  EXPECT_EQ(torch_module_path("layer1/0/conv1"), "layer1.0.conv1");
  EXPECT_EQ(torch_module_path("stem"), "stem");
  EXPECT_EQ(torch_module_path("head/head.1"), "head.1");
  // A level that only starts with the path's text (no dot after it) is a child's attribute name.
  EXPECT_EQ(torch_module_path("layer/layerx"), "layer.layerx");
}

TEST(TorchModuleMap, ModulesTakeTheDeviceMostOfTheirOpsAreOn) {
  const std::vector<std::string> scopes = {"stem", "layer1/layer1.0", "layer1/layer1.0/conv1", "unused"};
  const std::vector<std::pair<std::string, std::string>> ops = {
      {"input/IteratorGetNext", "cpu:0"},
      {"stem/Conv2D", "gpu:0"},
      {"layer1/layer1.0/Add", "gpu:1"},
      {"layer1/layer1.0/conv1/Conv2D", "gpu:1"},
      {"layer1/layer1.0/conv1/layer1.0.conv1.weight/read", "gpu:0"},
      {"gradients/layer1/layer1.0/conv1/Conv2D_grad/Conv2DBackpropFilter", "gpu:1"},
      {"Momentum/update_layer1/layer1.0/conv1/layer1.0.conv1.weight/ApplyMomentum", "gpu:0"},
      {"gradients/stem/Conv2D_grad/Conv2DBackpropFilter", "gpu:0"},
      {"gradients/AddN", "gpu:0"},
  };
  const auto m = torch_module_map(ops, scopes);
  // conv1: two ops on gpu:0, two on gpu:1: the tie goes to the name first in byte order.
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"stem", "cuda:0"}, {"layer1.0", "cuda:1"}, {"layer1.0.conv1", "cuda:0"}};
  EXPECT_EQ(m.modules, expected);
  EXPECT_EQ(m.split, std::vector<std::string>{"layer1.0.conv1"});
  EXPECT_EQ(m.outside, (std::vector<std::string>{"input/IteratorGetNext", "gradients/AddN"}));
}

}  // namespace
