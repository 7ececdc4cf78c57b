// The BFC replay (sim/allocator.h): hand-built allocation sequences whose chunk layout can be
// drawn on paper, and simulated steps that fit by liveness but not in TensorFlow's allocator.
#include "placelab/sim/allocator.h"

#include <gtest/gtest.h>

#include "placelab/core/error.h"
#include "sim_test_util.h"

namespace placelab {
namespace {

using testing::add;
using testing::FixedCostModel;
using testing::mesh_machine;

// A memory timeline on device 0, written by hand: alloc(buffer, bytes) and release(buffer, bytes)
// append samples in order, one time unit apart. No ops ran, so there are no persistent chunks.
struct Script {
  SimResult r;
  double now = 0;
  Script() { r.memory_timeline.push_back({0, 0, 0, 0, MemorySample::kPersistent}); }
  Script& alloc(uint32_t buffer, int64_t bytes) {
    r.memory_timeline.push_back({now += 1, 0, 0, bytes, buffer});
    return *this;
  }
  Script& release(uint32_t buffer, int64_t bytes) {
    r.memory_timeline.push_back({now += 1, 0, 0, -bytes, buffer});
    return *this;
  }
  BfcOutcome replay(int64_t capacity) const { return replay_bfc(OpGraph{}, r, 0, capacity); }
};

TEST(BfcReplay, EnoughFreeBytesInPiecesIsNotEnough) {
  // 4 KiB: A B C D of 1 KiB each fill it. Freeing A and C leaves 2 KiB free as two 1 KiB
  // holes, so a 2 KiB request fails; liveness (2 KiB in use + 2 KiB) would say it fits.
  Script s;
  s.alloc(1, 1024).alloc(2, 1024).alloc(3, 1024).alloc(4, 1024).release(1, 1024).release(3, 1024).alloc(5, 2048);
  BfcOutcome o = s.replay(4096);
  EXPECT_FALSE(o.fits);
  EXPECT_DOUBLE_EQ(o.failed_at_s, 7);
  EXPECT_EQ(o.failed_buffer, 5u);
  EXPECT_EQ(o.failed_request_bytes, 2048);
  EXPECT_EQ(o.free_bytes, 2048);
  EXPECT_EQ(o.largest_free_chunk, 1024);
  EXPECT_EQ(o.peak_bytes, 4096);
}

TEST(BfcReplay, FreedNeighboursMerge) {
  // As above, but B is freed too: A, B and C merge into one 3 KiB chunk @0, which takes a
  // 1.5 KiB request (split: 3 KiB is twice 1.5). Three separate 1 KiB holes could not.
  Script s;
  s.alloc(1, 1024).alloc(2, 1024).alloc(3, 1024).alloc(4, 1024).release(1, 1024).release(3, 1024).release(2, 1024);
  s.alloc(5, 1536);
  EXPECT_TRUE(s.replay(4096).fits);
  // Freeing D merges it with the 1.5 KiB left of the split, before it: a 2.5 KiB hole @1.5K,
  // which takes a 2 KiB request whole (2.5 < 2 × 2, and 512 bytes is under 128 MiB).
  s.release(4, 1024).alloc(6, 2048);
  BfcOutcome o = s.replay(4096);
  EXPECT_TRUE(o.fits);
  EXPECT_EQ(o.peak_bytes, 4096);
}

TEST(BfcReplay, TheSmallestFreeChunkThatFitsIsTaken) {
  // 8 KiB: X 512 @0, Y 256 @512, Z 1 KiB @768, W 256 @1792 and V 6 KiB @2K fill it. Free X and
  // Z: holes of 512 and 1 KiB between chunks in use. A 300-byte request (512 rounded) takes X's
  // hole, the best fit, so 1 KiB still fits in Z's. Worst fit would split Z's hole and fail.
  Script s;
  s.alloc(1, 512).alloc(2, 256).alloc(3, 1024).alloc(4, 256).alloc(5, 6144).release(1, 512).release(3, 1024);
  s.alloc(6, 300).alloc(7, 1024);
  BfcOutcome o = s.replay(8192);
  EXPECT_TRUE(o.fits);
  EXPECT_EQ(o.peak_bytes, 8192);
}

TEST(BfcReplay, AChunkLessThanTwiceTheRequestIsHandedOutWhole) {
  // 4 KiB: A 768 @0, B 256 @768, C 3 KiB @1K fill it; free A. A 512 request takes A's 768 hole
  // whole (768 < 2 × 512, and the 256 left is under 128 MiB), so a further 256 request fails
  // although only 3840 bytes are requested.
  Script s;
  s.alloc(1, 768).alloc(2, 256).alloc(3, 3072).release(1, 768).alloc(4, 512);
  EXPECT_TRUE(s.replay(4096).fits);
  EXPECT_EQ(s.replay(4096).peak_bytes, 4096);
  s.alloc(5, 256);
  BfcOutcome o = s.replay(4096);
  EXPECT_FALSE(o.fits);
  EXPECT_EQ(o.failed_buffer, 5u);
  EXPECT_EQ(o.free_bytes, 0);
  EXPECT_EQ(o.largest_free_chunk, 0);
}

TEST(BfcReplay, AChunkIsSplitWhenTheRestIsAtLeast128MiB) {
  // 448 MiB: 300 MiB @0 and 148 MiB; free the 300. A 200 MiB request is under half of 300
  // MiB's double but would waste 100 MiB < 128: whole. A 160 MiB request would waste 140 MiB
  // ≥ 128: split, leaving 140 MiB free beside it.
  constexpr int64_t MiB = 1 << 20;
  Script whole;
  whole.alloc(1, 300 * MiB).alloc(2, 148 * MiB).release(1, 300 * MiB).alloc(3, 200 * MiB);
  EXPECT_EQ(whole.replay(448 * MiB).peak_bytes, 448 * MiB);
  Script split;
  split.alloc(1, 300 * MiB).alloc(2, 148 * MiB).release(1, 300 * MiB).alloc(3, 160 * MiB).alloc(4, 140 * MiB);
  BfcOutcome o = split.replay(448 * MiB);
  EXPECT_TRUE(o.fits);
  EXPECT_EQ(o.peak_bytes, 448 * MiB);
}

TEST(BfcReplay, RequestsAreRoundedTo256Bytes) {
  Script s;
  s.alloc(1, 1).alloc(2, 257);
  BfcOutcome o = s.replay(1 << 20);
  EXPECT_EQ(o.peak_bytes, 256 + 512);
  // Four 1-byte requests fill 1 KiB.
  Script t;
  t.alloc(1, 1).alloc(2, 1).alloc(3, 1).alloc(4, 1).alloc(5, 1);
  EXPECT_FALSE(t.replay(1024).fits);
  EXPECT_EQ(t.replay(1024).failed_buffer, 5u);
}

TEST(BfcReplay, NeedsARecordedTimeline) {
  EXPECT_THROW(replay_bfc(OpGraph{}, SimResult{}, 0, 1024), Error);
}

TEST(BfcReplay, ASimulatedStepThatFitsByLivenessFailsFromFragmentation) {
  // One GPU of 4 KiB. a [0,1] → A 1 KiB; b [1,2] → B 1 KiB; c [2,3] reads a → C 1 KiB; d [3,4]
  // reads b and c → D 2 KiB. a's output is freed when c finishes, at 3, just before d starts:
  // live B + C + D = 4 KiB, exactly the capacity, so the simulator reports no OOM. In chunks:
  // A @0, B @1K, C @2K; freeing A leaves holes of 1 KiB @0 and 1 KiB @3K, and D fails.
  Machine m = mesh_machine(1, 1, 4096);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 1, 1024);
  add(g, "b", 1, 1024);
  add(g, "c", 1, 1024);
  add(g, "d", 1, 2048);
  g.add_edge(0, 2, Tensor{1024, false});
  g.add_edge(1, 3, Tensor{1024, false});
  g.add_edge(2, 3, Tensor{1024, false});
  Simulator sim(g, cost);
  SimResult r = sim.simulate(Placement{0, 0, 0, 0}, SimOptions{.record_timeline = true});
  ASSERT_FALSE(r.oom);
  EXPECT_EQ(r.devices[0].peak_memory_bytes, 4096);
  BfcOutcome o = replay_bfc(g, r, 0, 4096);
  EXPECT_FALSE(o.fits);
  EXPECT_DOUBLE_EQ(o.failed_at_s, 3);
  EXPECT_EQ(o.failed_buffer, 3u);  // d's output
  EXPECT_EQ(o.free_bytes, 2048);
  EXPECT_EQ(o.largest_free_chunk, 1024);
  // With 5 KiB the hole at the end is 2 KiB and D fits; the chunk peak is then the live peak.
  BfcOutcome roomy = replay_bfc(g, r, 0, 5120);
  EXPECT_TRUE(roomy.fits);
  EXPECT_EQ(roomy.peak_bytes, 4096);
}

TEST(BfcReplay, PersistentChunksComeFirstAndReceivedCopiesAreReplayed) {
  // gpu:0 runs a (persistent 1000, output 100); gpu:1 runs b (persistent 10) reading a's copy.
  // Every buffer allocated on a device is freed there, and the chunk peak is the rounded live
  // peak: gpu:1 holds 256 (10) persistent + 256 (the copy of 100) + b's 256 (50).
  Machine m = mesh_machine(2);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 1, 100, 1000);
  add(g, "b", 1, 50, 10);
  g.add_edge(0, 1, Tensor{100, false});
  Simulator sim(g, cost);
  SimResult r = sim.simulate(Placement{0, 1}, SimOptions{.record_timeline = true});
  EXPECT_EQ(r.devices[1].peak_memory_bytes, 160);
  EXPECT_EQ(replay_bfc(g, r, 1, 1 << 20).peak_bytes, 768);
  EXPECT_EQ(replay_bfc(g, r, 0, 1 << 20).peak_bytes, 1024 + 256);
  // Persistent chunks that do not fit fail at time 0.
  BfcOutcome tight = replay_bfc(g, r, 0, 768);
  EXPECT_FALSE(tight.fits);
  EXPECT_EQ(tight.failed_buffer, MemorySample::kPersistent);
  EXPECT_DOUBLE_EQ(tight.failed_at_s, 0);
  // A received copy's samples name it past the op ids.
  bool copy_seen = false;
  for (const MemorySample& s : r.memory_timeline)
    if (s.device == 1 && s.change == 100) copy_seen = s.buffer >= g.num_ops();
  EXPECT_TRUE(copy_seen);
}

}  // namespace
}  // namespace placelab
