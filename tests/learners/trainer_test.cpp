#include "placelab/learners/trainer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "placelab/core/error.h"
#include "placelab/core/files.h"
#include "placelab/learners/algorithms.h"
#include "placelab/learners/baselines.h"
#include "placelab/sim/sim_environment.h"
#include "placelab/sim/simulator.h"
#include "toy.h"

namespace placelab {
namespace {

using testing::AdditiveEnv;

std::filesystem::path temp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("placelab_trainer_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto p = dir / name;
  std::filesystem::remove(p);
  return p;
}

// Stops the run after `stop_at` samples, as Ctrl-C does. With `killed_copy`, it also keeps a copy of
// the last periodic checkpoint before the stop: what a killed process would leave behind.
class StopAfter : public TrainerObserver {
 public:
  explicit StopAfter(int64_t stop_at, std::filesystem::path killed_copy = {})
      : stop_at_(stop_at), killed_copy_(std::move(killed_copy)) {}
  void on_batch(const TrainerProgress& p) override { samples_ = p.samples; ++batches; }
  // The killed copy: the last checkpoint before stop_at, and the curve file as it is at the end
  // (its lines after that checkpoint's count are ignored on resume, as after a real kill).
  void on_checkpoint(int64_t samples, const std::filesystem::path& path) override {
    ++checkpoints;
    if (killed_copy_.empty()) return;
    const auto overwrite = std::filesystem::copy_options::overwrite_existing;
    if (samples < stop_at_) std::filesystem::copy_file(path, killed_copy_, overwrite);
    std::filesystem::copy_file(checkpoint_curve_path(path), checkpoint_curve_path(killed_copy_), overwrite);
  }
  void on_verify(const VerifyRecord&) override { ++verifies; }
  bool stop_requested() override { return samples_ >= stop_at_; }
  int batches = 0, checkpoints = 0, verifies = 0;

 private:
  int64_t stop_at_;
  std::filesystem::path killed_copy_;
  int64_t samples_ = 0;
};

void expect_same_result(const TrainSummary& a, const TrainSummary& b) {
  EXPECT_EQ(a.samples, b.samples);
  EXPECT_EQ(a.best_step_time_s, b.best_step_time_s);
  EXPECT_EQ(a.best_sample, b.best_sample);
  EXPECT_EQ(a.best_placement, b.best_placement);
  ASSERT_EQ(a.curve.size(), b.curve.size());
  for (std::size_t i = 0; i < a.curve.size(); ++i) {
    EXPECT_EQ(a.curve[i].step_time_s, b.curve[i].step_time_s) << i;
    EXPECT_EQ(a.curve[i].best_s, b.curve[i].best_s) << i;
  }
  ASSERT_EQ(a.verifications.size(), b.verifications.size());
  for (std::size_t i = 0; i < a.verifications.size(); ++i) {
    EXPECT_EQ(a.verifications[i].sample, b.verifications[i].sample);
    EXPECT_EQ(a.verifications[i].measured_s, b.verifications[i].measured_s);
    EXPECT_EQ(a.verifications[i].in_situ_predicted_s, b.verifications[i].in_situ_predicted_s);
  }
}

// A checkpoint holds the learner's state and counts the curve's lines; the curve file only grows
// by the new points, so checkpointing every batch costs no more per checkpoint at the end of a
// run than at its start (it rewrote the whole curve: quadratic in the samples).
TEST(Trainer, CheckpointsAppendTheCurveInsteadOfRewritingIt) {
  const std::size_t G = 8, D = 3;
  const auto costs = testing::random_costs(G, D, 78);
  const Grouping grouping = testing::identity_grouping(G);
  PostLearner post(SearchSpace{G, testing::device_range(D)}, PostOptions{}, 5);
  AdditiveEnv env(costs);
  TrainerOptions o;
  o.sample_budget = 1200;
  o.batch_size = 12;
  o.checkpoint_every = 1;
  o.checkpoint_path = temp_path("every_batch.checkpoint.json");
  struct Sizes : TrainerObserver {
    std::vector<std::uintmax_t> bytes;
    void on_checkpoint(int64_t, const std::filesystem::path& path) override { bytes.push_back(std::filesystem::file_size(path)); }
  } sizes;
  const TrainSummary s = train(post, grouping, env, o, nullptr, &sizes);
  ASSERT_EQ(sizes.bytes.size(), 100u);
  EXPECT_LT(sizes.bytes.back(), sizes.bytes.front() + 200) << "the checkpoint grows with the curve";
  const std::string curve = read_text_file(checkpoint_curve_path(o.checkpoint_path));
  EXPECT_EQ(std::count(curve.begin(), curve.end(), '\n'), 1200);
  EXPECT_EQ(checkpoint_curve_path(o.checkpoint_path).filename(), "every_batch.checkpoint.curve.jsonl");
  EXPECT_EQ(s.curve.size(), 1200u);
}

TEST(Trainer, ResumedRunEndsExactlyLikeAnUninterruptedOne) {
  const std::size_t G = 8, D = 3;
  const auto costs = testing::random_costs(G, D, 77);
  const Grouping grouping = testing::identity_grouping(G);
  const SearchSpace space{G, testing::device_range(D)};
  TrainerOptions o;
  o.sample_budget = 600;
  o.batch_size = 12;
  o.verify_every = 100;
  o.checkpoint_every = 120;

  for (const std::string which : {"post", "reinforce"}) {
    auto make = [&]() -> std::unique_ptr<Learner> {
      if (which == "post") return std::make_unique<PostLearner>(space, PostOptions{}, 5);
      return std::make_unique<ReinforceLearner>(space, ReinforceOptions{}, 5);
    };
    AdditiveEnv env_a(costs), verify_a(costs);
    verify_a.predicted_scale = 1.5;  // its predictions must survive the checkpoint too
    auto a = make();
    o.checkpoint_path = temp_path(which + "_full.json");
    const TrainSummary full = train(*a, grouping, env_a, o, &verify_a);
    EXPECT_EQ(full.status, TrainSummary::Status::kFinished);
    EXPECT_EQ(full.verifications.size(), 6u);
    EXPECT_EQ(full.verifications[0].in_situ_predicted_s, 1.5 * full.verifications[0].measured_s);

    // Stopped after 300 samples (periodic checkpoints at 120 and 240, and one at the stop), then
    // resumed by a fresh process: from 300, or, as if the process had been killed, from 240.
    o.checkpoint_path = temp_path(which + "_cut.json");
    const std::filesystem::path killed = temp_path(which + "_killed.json");
    o.resume = true;
    AdditiveEnv env_b(costs), verify_b(costs);
    verify_b.predicted_scale = 1.5;
    auto b1 = make();
    StopAfter stop(300, killed);
    const TrainSummary cut = train(*b1, grouping, env_b, o, &verify_b, &stop);
    EXPECT_EQ(cut.status, TrainSummary::Status::kStopped);
    EXPECT_EQ(cut.samples, 300);
    EXPECT_EQ(stop.checkpoints, 3);
    EXPECT_EQ(stop.verifies, 3);
    auto b2 = make();
    const TrainSummary resumed = train(*b2, grouping, env_b, o, &verify_b);
    EXPECT_EQ(resumed.resumed_from, 300);
    EXPECT_EQ(resumed.status, TrainSummary::Status::kFinished);
    expect_same_result(full, resumed);

    o.checkpoint_path = killed;
    auto b3 = make();
    const TrainSummary after_kill = train(*b3, grouping, env_b, o, &verify_b);
    EXPECT_EQ(after_kill.resumed_from, 240);
    EXPECT_EQ(after_kill.status, TrainSummary::Status::kFinished);
    expect_same_result(full, after_kill);
    o.resume = false;
  }
}

TEST(Trainer, PostOnTheSimulatorSpreadsParallelBranches) {
  // Four independent 8 ms chains (1 ms ops, 4 KiB tensors) on four GPUs: the best placement gives
  // each chain its own GPU, about 4× faster than one GPU. Grouping by name scope gives one group
  // per chain plus src, sink and save.
  const Machine m = testing::toy_machine(4);
  const testing::FlopsCostModel cost(m);
  const OpGraph g = testing::fork_join(4, 8, 1e10, 4096);
  const Grouping grouping = group_by_name_prefix(g, 2);
  ASSERT_EQ(grouping.num_groups(), 7u);
  const Simulator sim(g, cost);
  SimEnvironment env(sim, 1);
  PostLearner post(SearchSpace{grouping.num_groups(), gpu_devices(m)}, PostOptions{}, 2);
  TrainerOptions o;
  o.sample_budget = 600;
  const TrainSummary s = train(post, grouping, env, o);
  ASSERT_EQ(s.status, TrainSummary::Status::kFinished);
  const double single = sim.simulate(single_gpu_placement(g, m)).step_time_s;
  EXPECT_LT(s.best_step_time_s, 0.3 * single);
  EXPECT_EQ(sim.simulate(s.best_placement).step_time_s, s.best_step_time_s);
  EXPECT_LE(s.best_step_time_s, sim.simulate(heft_placement(g, cost)).step_time_s * 1.001);
}

TEST(Trainer, RecordsCurveBestAndVerification) {
  const std::size_t G = 4, D = 2;
  AdditiveEnv env(testing::random_costs(G, D, 3));
  AdditiveEnv hw(testing::random_costs(G, D, 4));  // "hardware" disagrees with the "simulator"
  PostLearner post(SearchSpace{G, testing::device_range(D)}, PostOptions{}, 1);
  TrainerOptions o;
  o.sample_budget = 120;
  o.verify_every = 60;
  const TrainSummary s = train(post, testing::identity_grouping(G), env, o, &hw);
  ASSERT_EQ(s.curve.size(), 120u);
  double best = 1e300;
  for (std::size_t i = 0; i < s.curve.size(); ++i) {
    EXPECT_EQ(s.curve[i].sample, static_cast<int64_t>(i + 1));
    best = std::min(best, s.curve[i].step_time_s);
    EXPECT_EQ(s.curve[i].best_s, best);
  }
  EXPECT_EQ(s.best_step_time_s, best);
  ASSERT_EQ(s.verifications.size(), 2u);
  const auto hw_time = hw.evaluate(std::vector<Placement>{s.best_placement})[0].step_time_s;
  EXPECT_EQ(s.verifications[1].measured_s, hw_time);
  EXPECT_EQ(s.verifications[1].source, "toy");
  EXPECT_FALSE(s.verifications[1].in_situ_predicted_s.has_value());  // this verify environment predicts nothing
  EXPECT_EQ(env.evaluated, 120);
  hw.predicted_scale = 2;
  PostLearner again(SearchSpace{G, testing::device_range(D)}, PostOptions{}, 1);
  const TrainSummary p = train(again, testing::identity_grouping(G), env, o, &hw);
  ASSERT_EQ(p.verifications.size(), 2u);
  EXPECT_EQ(p.verifications[1].in_situ_predicted_s, 2 * p.verifications[1].measured_s);
}

TEST(Trainer, ReportsWhenNothingFits) {
  AdditiveEnv env(testing::random_costs(3, 2, 1), /*capacity=*/0);
  class AlwaysOom : public Environment {
   public:
    std::vector<Measurement> evaluate(std::span<const Placement> ps) override {
      return std::vector<Measurement>(ps.size(), Measurement{0, true, "oom"});
    }
    std::string name() const override { return "oom"; }
  } oom;
  PostLearner post(SearchSpace{3, {0, 1}}, PostOptions{}, 1);
  TrainerOptions o;
  o.sample_budget = 60;
  const TrainSummary s = train(post, testing::identity_grouping(3), oom, o);
  EXPECT_EQ(s.status, TrainSummary::Status::kNoFeasiblePlacement);
  EXPECT_TRUE(s.best_placement.empty());
}

TEST(Trainer, RejectsBadOptionsAndMismatchedCheckpoints) {
  TrainerOptions o;
  o.batch_size = 0;
  try {
    o.validate();
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "trainer.batch_size = 0: must be >= 1");
  }
  o = TrainerOptions{};
  o.checkpoint_every = 10;
  EXPECT_THROW(o.validate(), InputError);  // no path

  AdditiveEnv env(testing::random_costs(3, 2, 1));
  o.sample_budget = 24;
  o.checkpoint_path = temp_path("mismatch.json");
  PostLearner post(SearchSpace{3, {0, 1}}, PostOptions{}, 1);
  train(post, testing::identity_grouping(3), env, o);
  o.resume = true;
  o.sample_budget = 48;  // another run's checkpoint
  PostLearner again(SearchSpace{3, {0, 1}}, PostOptions{}, 1);
  EXPECT_THROW(train(again, testing::identity_grouping(3), env, o), InputError);
  std::ofstream(o.checkpoint_path) << "{ not json";
  EXPECT_THROW(train(again, testing::identity_grouping(3), env, o), InputError);
}

}  // namespace
}  // namespace placelab
