// The eager execution model (docs/simulator.md, "Eager execution") on hand-computed cases: one
// host thread issuing in program order, GPU streams in launch order, copies that hold both
// streams or block the host, autograd's per-GPU threads in the backward, host-order memory.
#include <gtest/gtest.h>

#include <sstream>

#include "placelab/core/error.h"
#include "placelab/sim/trace.h"
#include "sim_test_util.h"

namespace placelab::testing {
namespace {

// switch_machine (cpu:0 + gpu:0..3, each device 1 s + bytes/1000 from the switch, so a copy of
// 1000 bytes between two devices takes 2 s latency + 1 s) with a host that spends `dispatch_s`
// issuing each op and no launch overhead.
Machine eager_machine(double dispatch_s = 1.0) {
  Machine m = switch_machine();
  m.devices[0].dispatch_s = dispatch_s;
  m.finalize();
  return m;
}

constexpr DeviceId kCpu = 0, kGpu0 = 1, kGpu1 = 2;

OpId add_phase(OpGraph& g, const std::string& name, double seconds, Phase phase, int64_t output_bytes = 0) {
  const OpId id = add(g, name, seconds, output_bytes);
  g.op(id).phase = phase;
  return id;
}

const TimelineEvent& op_event(const SimResult& r, OpId op) {
  for (const TimelineEvent& e : r.timeline)
    if (e.kind == TimelineEvent::Kind::kOp && e.op == op) return e;
  throw Error("no timeline event for op " + std::to_string(op));
}

SimResult run(const OpGraph& g, const Machine& m, const Placement& p) {
  FixedCostModel cost(m);
  Simulator sim(g, cost);
  return sim.simulate(p, {.record_timeline = true});
}

// An eager chain of three ops of `seconds` each, op i reading op i - 1, all on gpu:0.
SimResult chain_on_one_gpu(double seconds) {
  OpGraph g;
  g.set_execution(Execution::kEager);
  for (int i = 0; i < 3; ++i) add(g, "op" + std::to_string(i), seconds);
  g.add_edge(0, 1);
  g.add_edge(1, 2);
  return run(g, eager_machine(), {kGpu0, kGpu0, kGpu0});
}

TEST(Eager, GpuBoundChainRunsBackToBack) {
  const SimResult r = chain_on_one_gpu(5.0);
  // Issued at 1, 2, 3; the stream runs them at [1, 6], [6, 11], [11, 16].
  EXPECT_DOUBLE_EQ(op_event(r, 0).start_s, 1.0);
  EXPECT_DOUBLE_EQ(op_event(r, 2).start_s, 11.0);
  EXPECT_DOUBLE_EQ(r.step_time_s, 16.0);
  EXPECT_DOUBLE_EQ(r.devices[kGpu0].busy_s, 15.0);
  EXPECT_DOUBLE_EQ(r.host_busy_s, 3.0);
}

TEST(Eager, LaunchBoundChainWaitsForTheHost) {
  const SimResult r = chain_on_one_gpu(0.5);
  // Each kernel starts when the host has launched it: [1, 1.5], [2, 2.5], [3, 3.5].
  EXPECT_DOUBLE_EQ(op_event(r, 1).start_s, 2.0);
  EXPECT_DOUBLE_EQ(r.step_time_s, 3.5);
  ASSERT_EQ(r.host_timeline.size(), 3u);
  EXPECT_DOUBLE_EQ(r.host_timeline[2].start_s, 2.0);
  EXPECT_DOUBLE_EQ(r.host_timeline[2].end_s, 3.0);
}

// Two independent ops on two GPUs: the dataflow model runs them at once (5 s); one host thread
// launches the second a dispatch later.
TEST(Eager, OneHostThreadLaunchesDevicesInTurn) {
  OpGraph g;
  g.set_execution(Execution::kEager);
  add(g, "a", 5.0);
  add(g, "b", 5.0);
  const SimResult r = run(g, eager_machine(), {kGpu0, kGpu1});
  EXPECT_DOUBLE_EQ(op_event(r, 1).start_s, 2.0);
  EXPECT_DOUBLE_EQ(r.step_time_s, 7.0);

  OpGraph tf = g;
  tf.set_execution(Execution::kDataflow);
  EXPECT_DOUBLE_EQ(run(tf, eager_machine(), {kGpu0, kGpu1}).step_time_s, 5.0);
}

// A GPU-to-GPU copy runs after the producer on the source's stream, holds both streams, and does
// not block the host: a (gpu:0, [1, 6]) -> copy [6, 9] -> b (gpu:1, issued at 3, runs [9, 11]).
TEST(Eager, CopyBetweenGpusHoldsBothStreams) {
  OpGraph g;
  g.set_execution(Execution::kEager);
  add(g, "a", 5.0, 1000);
  add(g, "b", 2.0);
  g.add_edge(0, 1, {.bytes = 1000});
  const SimResult r = run(g, eager_machine(), {kGpu0, kGpu1});
  EXPECT_EQ(r.transfers, 1);
  const TimelineEvent* copy = nullptr;
  for (const TimelineEvent& e : r.timeline)
    if (e.kind == TimelineEvent::Kind::kTransfer) copy = &e;
  ASSERT_NE(copy, nullptr);
  EXPECT_DOUBLE_EQ(copy->start_s, 6.0);
  EXPECT_DOUBLE_EQ(copy->end_s, 9.0);
  EXPECT_DOUBLE_EQ(op_event(r, 1).start_s, 9.0);
  EXPECT_DOUBLE_EQ(r.step_time_s, 11.0);
  // The host issued the copy at [1, 2] and b at [2, 3]: it never waited for the GPUs.
  ASSERT_EQ(r.host_timeline.size(), 3u);
  EXPECT_DOUBLE_EQ(r.host_timeline[2].end_s, 3.0);
}

// A copy to host memory blocks the host until it is done; a CPU op runs on the host thread.
TEST(Eager, CopyToTheHostBlocksItAndCpuOpsRunOnIt) {
  OpGraph g;
  g.set_execution(Execution::kEager);
  add(g, "a", 5.0, 1000);
  add(g, "c", 2.0);
  add(g, "d", 0.5);
  g.add_edge(0, 1, {.bytes = 1000});
  const SimResult r = run(g, eager_machine(), {kGpu0, kCpu, kGpu1});
  // a [1, 6]; copy issued [1, 2], runs [6, 9], host blocked to 9; c issued [9, 10], runs
  // [10, 12] on the host; d issued [12, 13], runs [13, 13.5].
  EXPECT_DOUBLE_EQ(op_event(r, 1).start_s, 10.0);
  EXPECT_DOUBLE_EQ(op_event(r, 1).end_s, 12.0);
  EXPECT_DOUBLE_EQ(op_event(r, 2).start_s, 13.0);
  EXPECT_DOUBLE_EQ(r.step_time_s, 13.5);
  EXPECT_DOUBLE_EQ(r.host_busy_s, 1 + 8 + 1 + 2 + 1);  // a, the copy's issue and wait, c, d
}

// Autograd issues each GPU's backward ops from a thread of that GPU, in parallel with the other
// GPUs'; the optimizer's ops wait on the main thread until the backward is issued.
TEST(Eager, BackwardIsIssuedByOneThreadPerGpu) {
  OpGraph g;
  g.set_execution(Execution::kEager);
  add_phase(g, "f0", 0.1, Phase::kForward);
  add_phase(g, "f1", 0.1, Phase::kForward);
  add_phase(g, "b1", 0.1, Phase::kBackward);
  add_phase(g, "b0", 0.1, Phase::kBackward);
  add_phase(g, "u0", 0.1, Phase::kUpdate);
  g.add_edge(0, 3);
  g.add_edge(1, 2);
  g.add_edge(3, 4);
  const SimResult r = run(g, eager_machine(), {kGpu0, kGpu1, kGpu1, kGpu0, kGpu0});
  // f0 [1, 1.1], f1 [2, 2.1]; backward() is called at 2: b1 and b0 issued at [2, 3] on their
  // GPUs' threads, run [3, 3.1]; u0 issued by main at [3, 4], runs [4, 4.1].
  EXPECT_DOUBLE_EQ(op_event(r, 2).start_s, 3.0);
  EXPECT_DOUBLE_EQ(op_event(r, 3).start_s, 3.0);
  EXPECT_DOUBLE_EQ(op_event(r, 4).start_s, 4.0);
  EXPECT_DOUBLE_EQ(r.step_time_s, 4.1);
  EXPECT_EQ(r.host_timeline[2].thread, 1u + kGpu1);
  EXPECT_EQ(r.host_timeline[3].thread, 1u + kGpu0);
  EXPECT_EQ(r.host_timeline[4].thread, 0u);
}

// Memory is the host's: a buffer is allocated when its op is issued and freed when its last
// consumer has been issued (the caching allocator reuses it on the stream from then on).
TEST(Eager, MemoryFollowsTheHostOrder) {
  OpGraph g;
  g.set_execution(Execution::kEager);
  add(g, "a", 5.0, 100);
  add(g, "b", 5.0, 200);
  add(g, "c", 5.0, 0);
  g.add_edge(0, 1, {.bytes = 100});
  g.add_edge(1, 2, {.bytes = 200});
  const SimResult r = run(g, eager_machine(), {kGpu0, kGpu0, kGpu0});
  EXPECT_EQ(r.devices[kGpu0].peak_memory_bytes, 300);
  std::vector<std::pair<double, int64_t>> changes;
  for (const MemorySample& m : r.memory_timeline)
    if (m.device == kGpu0 && m.buffer != MemorySample::kPersistent) changes.emplace_back(m.time_s, m.change);
  const std::vector<std::pair<double, int64_t>> expected = {{1, 100}, {2, 200}, {2, -100}, {3, -200}};
  EXPECT_EQ(changes, expected);
  // The received copy of a remote input lives from the copy's issue to its last consumer's.
  OpGraph two = g;
  const SimResult rr = run(two, eager_machine(), {kGpu0, kGpu1, kGpu1});
  EXPECT_EQ(rr.devices[kGpu1].peak_memory_bytes, 300);  // the copy of a (100) + b (200)
  EXPECT_EQ(rr.devices[kGpu0].peak_memory_bytes, 100);
}

// The launch queue: the host blocks in a launch while 1,024 kernels of the GPU are pending.
TEST(Eager, HostBlocksWhenTheLaunchQueueIsFull) {
  OpGraph g;
  g.set_execution(Execution::kEager);
  const int n = 1030;
  for (int i = 0; i < n; ++i) add(g, "op" + std::to_string(i), 10.0);
  const SimResult r = run(g, eager_machine(0.001), Placement(n, kGpu0));
  // Kernel 1024's launch waits for kernel 0 to end at 0.001 + 10.
  EXPECT_NEAR(r.host_timeline[1023].end_s, 1.024, 1e-9);
  EXPECT_NEAR(r.host_timeline[1024].end_s, 10.001, 1e-9);
  EXPECT_NEAR(r.step_time_s, 0.001 + 10.0 * n, 1e-6);
}

TEST(Eager, AnEdgeAgainstProgramOrderIsAnInputError) {
  OpGraph g;
  g.set_execution(Execution::kEager);
  add(g, "a", 1.0);
  add(g, "b", 1.0);
  g.add_edge(1, 0);
  Machine m = eager_machine();
  FixedCostModel cost(m);
  EXPECT_THROW(Simulator(g, cost), InputError);
}

// A parameter (no inputs, no work, only persistent bytes) is a tensor, not a call: the host issues
// only its reader. An op without work that reads something is still a call and costs its issue.
TEST(Eager, ParametersAreNotIssued) {
  OpGraph g;
  g.set_execution(Execution::kEager);
  const OpId w = add(g, "w", 0.0, 0, 400);
  const OpId a = add(g, "a", 5.0);
  const OpId view = add(g, "view", 0.0);
  g.add_edge(w, a);
  g.add_edge(a, view);
  const SimResult r = run(g, eager_machine(), {kGpu0, kGpu0, kGpu0});
  // a is issued at 1 (its own dispatch only) and runs [1, 6]; view is issued at 2, runs at 6.
  EXPECT_DOUBLE_EQ(op_event(r, a).start_s, 1.0);
  EXPECT_DOUBLE_EQ(op_event(r, view).start_s, 6.0);
  EXPECT_DOUBLE_EQ(r.step_time_s, 6.0);
  EXPECT_DOUBLE_EQ(r.host_busy_s, 2.0);
  ASSERT_EQ(r.host_timeline.size(), 2u);
  EXPECT_EQ(r.devices[kGpu0].persistent_bytes, 400);
  // On another GPU the parameter is copied when a needs it: the copy's issue takes [0, 1], it
  // runs [1, 3] (2 s of latency, no bytes); a is issued at 2 and starts when the copy is in.
  const SimResult remote = run(g, eager_machine(), {kGpu1, kGpu0, kGpu0});
  EXPECT_DOUBLE_EQ(op_event(remote, a).start_s, 3.0);
}

// Soft placement, persistent bytes, OOM and determinism are the shared rules.
TEST(Eager, SharesPlacementMemoryAndDeterminismWithDataflow) {
  OpGraph g = random_dag(7, 12, 6);
  g.set_execution(Execution::kEager);
  Machine m = eager_machine(0.01);
  m.devices[kGpu1].memory_bytes = 500;
  m.finalize();
  FixedCostModel cost(m);
  Simulator sim(g, cost);
  std::vector<Placement> batch;
  for (uint32_t s = 0; s < 16; ++s) batch.push_back(random_placement(s, g.num_ops(), m.num_devices()));
  std::vector<SimResult> results(batch.size());
  sim.simulate_batch(batch, results, 4);
  bool some_oom = false;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const SimResult alone = sim.simulate(batch[i]);
    expect_identical(alone, results[i]);
    int64_t persistent = 0;
    for (const DeviceStats& d : alone.devices) persistent += d.persistent_bytes;
    EXPECT_EQ(persistent, g.total_persistent_bytes());
    some_oom = some_oom || alone.oom;
    // The step is at least the busiest device's work and the host's issuing.
    for (const DeviceStats& d : alone.devices) EXPECT_GE(alone.step_time_s, d.busy_s);
    EXPECT_GE(alone.step_time_s, 0.01 * static_cast<double>(g.num_ops()));
  }
  EXPECT_TRUE(some_oom);
}

TEST(Eager, ChromeTraceShowsTheHostThreads) {
  OpGraph g;
  g.set_execution(Execution::kEager);
  add_phase(g, "f", 1.0, Phase::kForward);
  add_phase(g, "b", 1.0, Phase::kBackward);
  g.add_edge(0, 1);
  Machine m = eager_machine();
  const SimResult r = run(g, m, {kGpu0, kGpu0});
  std::ostringstream out;
  write_chrome_trace(r, g, m, out);
  EXPECT_NE(out.str().find("\"host threads\""), std::string::npos);
  EXPECT_NE(out.str().find("\"autograd gpu:0\""), std::string::npos);
}

}  // namespace
}  // namespace placelab::testing
