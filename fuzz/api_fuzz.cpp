// The C++ entry points the Python module (python/src/) and the CLI's flags hand user values to, on
// arbitrary values: the first byte picks the entry point, the rest are its arguments.
//   0  models::ModelSpec::parse (Graph.from_model, --model): a spec that parses prints back to
//      a text that parses to the same spec.
//   1  Simulator::simulate (Simulator.simulate): device ids of any 16-bit value for the graph's
//      ops; a placement the simulator takes gives a finite step or an OOM.
//   2  Simulator::simulate_batch (Simulator.simulate_batch): rows of such placements and any
//      thread count; each row's result equals simulate()'s of it alone.
//   3  make_grouping (describe_problem, a scenario's grouping:): any grouping name of the list,
//      any group count, seed and module depth.
// The graph is cifar10_cnn (a few hundred ops) on k80x4, built once.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "placelab/hwmodels/cost_model.h"
#include "placelab/hwmodels/machine_io.h"
#include "placelab/learners/grouping.h"
#include "placelab/models/zoo.h"
#include "placelab/sim/simulator.h"

namespace {

using namespace placelab;

struct Fixture {
  models::Model model = models::make_model(models::ModelSpec::parse("cifar10_cnn:batch=32"));
  Machine machine = load_machine("k80x4");
  AnalyticCostModel cost{machine};
  Simulator sim{model.graph, cost};
};

// The next `n` bytes as a little-endian unsigned integer (missing bytes are 0).
uint64_t take(const uint8_t*& data, std::size_t& size, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) {
    v |= static_cast<uint64_t>(size > 0 ? *data : 0) << (8 * i);
    if (size > 0) ++data, --size;
  }
  return v;
}

// A placement of every op from the input's 16-bit values (cycled; all 0 when none are left):
// most are out of range, as a Python list of any ints would be.
Placement placement_from(const uint8_t*& data, std::size_t& size, std::size_t ops) {
  Placement p(ops, 0);
  std::vector<uint16_t> ids;
  while (size >= 2 && ids.size() < ops) ids.push_back(static_cast<uint16_t>(take(data, size, 2)));
  for (std::size_t i = 0; i < ops && !ids.empty(); ++i) p[i] = static_cast<DeviceId>(ids[i % ids.size()] % 8);
  return p;
}

void check_result(const SimResult& r) {
  if (!r.oom && !(std::isfinite(r.step_time_s) && r.step_time_s > 0)) fuzz::finding("a step that is neither finite nor an OOM");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static const Fixture f;
  if (size == 0) return 0;
  const uint8_t which = *data++;
  --size;
  fuzz::expect_input_error_or_success([&] {
    switch (which % 4) {
      case 0: {
        const models::ModelSpec spec = models::ModelSpec::parse(fuzz::as_text(data, size));
        const std::string text = spec.to_string();
        models::ModelSpec back;
        try {
          back = models::ModelSpec::parse(text);
        } catch (const InputError& e) {
          fuzz::finding("a model spec's text does not parse back: " + text + ": " + e.what());
        }
        if (back.to_string() != text) fuzz::finding("a model spec parsed back prints differently: " + text);
        break;
      }
      case 1: {
        const Placement p = placement_from(data, size, f.model.graph.num_ops());
        check_result(f.sim.simulate(p));
        break;
      }
      case 2: {
        const int threads = static_cast<int>(static_cast<int16_t>(take(data, size, 2)));
        const std::size_t rows = 1 + take(data, size, 1) % 4;
        std::vector<Placement> batch;
        for (std::size_t i = 0; i < rows; ++i) batch.push_back(placement_from(data, size, f.model.graph.num_ops()));
        std::vector<SimResult> results(rows);
        f.sim.simulate_batch(batch, results, threads);
        for (std::size_t i = 0; i < rows; ++i) {
          const SimResult alone = f.sim.simulate(batch[i]);
          if (alone.step_time_s != results[i].step_time_s || alone.oom != results[i].oom)
            fuzz::finding("simulate_batch differs from simulate for a row");
          check_result(alone);
        }
        break;
      }
      default: {
        const auto names = grouping_names();
        const std::string name(names[take(data, size, 1) % names.size()]);
        GroupingOptions o;
        o.num_groups = static_cast<int>(static_cast<int32_t>(take(data, size, 4)));
        o.seed = static_cast<int>(static_cast<int32_t>(take(data, size, 4)));
        o.module_depth = static_cast<int>(static_cast<int8_t>(take(data, size, 1)));
        uint64_t bits = take(data, size, 8);
        double imbalance = 0;
        std::memcpy(&imbalance, &bits, sizeof imbalance);
        if (bits % 2 == 0) imbalance = 1.03;  // half the inputs keep the default
        o.imbalance = imbalance;
        o.validate();
        const Grouping g = make_grouping(f.model.graph, name, o);
        if (g.num_ops() != f.model.graph.num_ops()) fuzz::finding("a grouping that does not cover the graph's ops");
        break;
      }
    }
  });
  return 0;
}
