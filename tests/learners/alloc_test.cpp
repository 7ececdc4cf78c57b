// "No heap allocation per time step": once its workspaces have grown to a batch's shape, a forward
// and backward pass of the seq2seq policy allocates a few per-pass buffers, about as many for 160
// steps as for 80 — the time steps themselves (LSTM cells, attention queries, output heads, Eigen's
// GEMM packing included) allocate nothing. The test binary links with -Wl,--wrap=malloc, so every
// malloc our code and the Eigen code inlined into it make goes through the counter below;
// operator new, which the standard containers use, is counted too (it calls malloc).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "placelab/learners/seq2seq.h"

namespace {
std::atomic<long> g_mallocs{0};
}

extern "C" void* __real_malloc(std::size_t size);
extern "C" void* __wrap_malloc(std::size_t size) {
  g_mallocs.fetch_add(1, std::memory_order_relaxed);
  return __real_malloc(size);
}

// Replacing operator new makes GCC warn (-Wmismatched-new-delete) where the standard library's
// delete frees it; tests/learners/CMakeLists.txt turns that warning off for this file.
void* operator new(std::size_t size) {
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;  // counted by __wrap_malloc
  throw std::bad_alloc();
}

namespace placelab {
namespace {

struct Case {
  AttentionPlacement attention;
  bool bidirectional;
  int layers;
};
class Seq2SeqAllocation : public ::testing::TestWithParam<Case> {};

// Heap allocations of one warm forward + backward pass over `groups` steps.
long allocations_per_pass(const Case& c, nn::Index groups) {
  Seq2SeqOptions o;
  o.hidden = 256;  // large enough that Eigen's GEMM packing exceeds its stack limit unless split
  o.attention = c.attention;
  o.bidirectional = c.bidirectional;
  o.layers = c.layers;
  o.tanh_constant = 1.0;
  const nn::Index devices = 5, batch = 12, features = 30;
  Rng rng(1);
  Seq2SeqPolicy<float> policy(o, features, groups, devices, rng);
  nn::Matrix<float> x = nn::Matrix<float>::Random(features, groups);
  nn::Matrix<float> noise, dlogits = nn::Matrix<float>::Random(devices, groups * batch);
  std::vector<uint16_t> choices;
  auto pass = [&](DecodeMode mode) {
    policy.forward(x, batch, mode, choices, noise, mode == DecodeMode::kSample ? 0.5 : 0.0, &rng);
    policy.params().zero_grad();
    policy.backward(dlogits);
  };
  pass(DecodeMode::kSample);  // workspaces grow to the batch's shapes here
  pass(DecodeMode::kGiven);
  const long before = g_mallocs.load();
  pass(DecodeMode::kGiven);
  return g_mallocs.load() - before;
}

TEST_P(Seq2SeqAllocation, TimeStepsAllocateNothing) {
  // 80 more steps would mean at least 80 more allocations if a step allocated. A few whole-sequence
  // products (weight gradients, the encoder's input projection) pack in buffers that grow with the
  // sequence and move from Eigen's stack to the heap past 128 KB: per pass, a handful.
  const long short_run = allocations_per_pass(GetParam(), 80), long_run = allocations_per_pass(GetParam(), 160);
  EXPECT_LT(long_run - short_run, 16) << "allocations grow with the number of steps: " << short_run << " for 80, "
                                      << long_run << " for 160";
  EXPECT_LE(long_run, 48) << "allocations of one pass";
}

INSTANTIATE_TEST_SUITE_P(Variants, Seq2SeqAllocation,
                         ::testing::Values(Case{AttentionPlacement::kAfter, true, 1},
                                           Case{AttentionPlacement::kBefore, false, 2},
                                           Case{AttentionPlacement::kNone, true, 2}));

}  // namespace
}  // namespace placelab
