// The papers' single-GPU memory facts, checked on the zoo's training graphs and the presets: which
// models fit one GPU and which run out of memory there (Post Table 1, Mirhoseini 2017, EAGLE).
// The capacities are what TensorFlow's allocator gets (hwmodels/presets), not the board's size.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "placelab/hwmodels/cost_model.h"
#include "placelab/hwmodels/machine_io.h"
#include "placelab/learners/baselines.h"
#include "placelab/models/zoo.h"
#include "placelab/sim/simulator.h"

namespace placelab {
namespace {

struct SingleGpu {
  double peak_gib = 0, capacity_gib = 0;
  bool oom = false;
};

// Simulates the single-GPU baseline (cpu_only ops on the CPU) and reports gpu:0's peak.
SingleGpu single_gpu(std::string_view spec, std::string_view machine_name) {
  models::Model model = models::make_model(models::ModelSpec::parse(spec));
  Machine machine = load_machine(machine_name);
  AnalyticCostModel cost(machine);
  Simulator sim(model.graph, cost);
  Placement p = single_gpu_placement(model.graph, machine);
  SimResult r = sim.simulate(p);
  DeviceId gpu = machine.find_device("gpu:0").value();
  SingleGpu out{static_cast<double>(r.devices[gpu].peak_memory_bytes) / 0x1p30,
                static_cast<double>(machine.devices[gpu].memory_bytes) / 0x1p30, r.oom};
  std::printf("%-22s on %-7s single GPU: peak %6.2f GiB of %5.2f GiB%s\n", std::string(spec).c_str(),
              std::string(machine_name).c_str(), out.peak_gib, out.capacity_gib, out.oom ? "  OOM" : "");
  return out;
}

TEST(PaperMemoryFacts, CnnsAtBatch32FitOneK80) {
  // Post Table 1 and Mirhoseini 2017 ran them on one K80 (ResNet-50 0.86 s, ResNet-200 2.75 s,
  // Inception-V3 1.06 s per step).
  EXPECT_FALSE(single_gpu("resnet50:batch=32", "k80x2").oom);
  EXPECT_FALSE(single_gpu("resnet200:batch=32", "k80x2").oom);
  EXPECT_FALSE(single_gpu("inception_v3:batch=32", "k80x4").oom);
}

TEST(PaperMemoryFacts, BertBaseAtSeq384Batch24DoesNotFitOneP100) {
  // EAGLE: "requires more than 12GB of device RAM ... not able to fit into a single GPU".
  SingleGpu bert = single_gpu("bert_base", "p100x4");
  EXPECT_TRUE(bert.oom);
  EXPECT_GT(bert.peak_gib, 12.0);
}

TEST(PaperMemoryFacts, WmtNmtAtBatch64DoesNotFitOneK80FromFourLayers) {
  // Post Table 1: NMT (WMT16, batch 64) single GPU is OOM. The zoo's default NMT is WMT16 as the TF
  // NMT tutorial prepares it (tensorflow/nmt standard_hparams/wmt16.json: sentences up to 50
  // tokens; BPE vocabulary of 36,546 + 3 special tokens): OOM for 4 and 8 layers here.
  SingleGpu four = single_gpu("nmt:layers=4,batch=64", "k80x4");
  EXPECT_TRUE(four.oom);
  EXPECT_GT(four.peak_gib, four.capacity_gib);
  EXPECT_TRUE(single_gpu("nmt:layers=8,batch=64", "k80x8").oom);
  // Mirhoseini's NMT (40 steps, 32,000 word pieces) is OOM at 8 layers too.
  EXPECT_TRUE(single_gpu("nmt:layers=8,batch=64,seq=40,vocab=32000", "k80x8").oom);
}

TEST(PaperMemoryFacts, GnmtAtBatch256DoesNotFitOneP100) {
  // EAGLE: batch raised from 128 to 256 "such that it cannot fit into a single GPU". The zoo's
  // default is tensorflow/nmt's wmt16_gnmt_4_layer.json (1024 units) at batch 256; EAGLE's text
  // says 256 units, which fit (docs/models.md: its measured step times match 1024 units).
  SingleGpu gnmt = single_gpu("gnmt", "p100x4");
  EXPECT_TRUE(gnmt.oom);
  EXPECT_GT(gnmt.peak_gib, gnmt.capacity_gib);
  EXPECT_FALSE(single_gpu("gnmt:hidden=256", "p100x4").oom);
}

TEST(PaperMemoryFacts, PrintsTheKnownDeviations) {
  // Known deviations from the papers, kept visible rather than asserted: these fit here while
  // Post reports NMT-2 on a K80 OOM (10.28 of 10.50 GiB), as do Mirhoseini-sized NMT-2/4. The
  // bounds only guard against the estimate collapsing (a graph losing its activations would pass
  // silently).
  EXPECT_GT(single_gpu("nmt:layers=2,batch=64", "k80x2").peak_gib, 9.0);
  EXPECT_GT(single_gpu("nmt:layers=2,batch=64,seq=40,vocab=32000", "k80x2").peak_gib, 5.0);
  EXPECT_GT(single_gpu("nmt:layers=4,batch=64,seq=40,vocab=32000", "k80x4").peak_gib, 6.0);
}

}  // namespace
}  // namespace placelab
