#include "placelab/profiler/verify.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "measure_util.h"
#include "placelab/core/error.h"
#include "placelab/profiler/activity.h"

namespace placelab {

VerifyReport compare_step(const SimResult& predicted, const ExecutionResult& measured, const Machine& machine) {
  VerifyReport r;
  r.predicted_s = predicted.step_time_s;
  r.measured_s = measured.step_time_s;
  r.oom = predicted.oom || measured.oom;
  r.error = measured.step_time_s > 0 ? (predicted.step_time_s - measured.step_time_s) / measured.step_time_s : 0;
  r.measured_steps_s = measured.step_times_s;
  for (std::size_t d = 0; d < machine.num_devices(); ++d)
    r.devices.push_back({machine.devices[d].name, d < predicted.devices.size() ? predicted.devices[d].busy_s : 0,
                         d < measured.device_busy_s.size() ? measured.device_busy_s[d] : 0});
  return r;
}

VerifyReport verify_placement(const OpGraph& graph, std::span<const DeviceId> placement, const CostModel& cost,
                              const CpuExecutor& executor) {
  Simulator sim(graph, cost);
  SimResult predicted = sim.simulate(placement);
  ExecutionResult measured = executor.run(placement);
  return compare_step(predicted, measured, cost.machine());
}

std::vector<ExecutionResult> measure_interleaved(const CpuExecutor& executor, std::span<const Placement> placements,
                                                 int rounds, const std::function<void(int, std::size_t)>& after_run,
                                                 const std::function<void(int)>& before_round) {
  if (rounds < 1) throw InputError("rounds = " + std::to_string(rounds) + ": must be >= 1");
  std::vector<std::vector<ExecutionResult>> runs(placements.size());
  for (int r = 0; r < rounds; ++r) {
    if (before_round) before_round(r);
    for (std::size_t i = 0; i < placements.size(); ++i) {
      if (r > 0 && runs[i].front().oom) continue;
      runs[i].push_back(executor.run(placements[i]));
      if (after_run) after_run(r, i);
    }
  }
  std::vector<ExecutionResult> out;
  out.reserve(placements.size());
  for (std::vector<ExecutionResult>& rs : runs) {
    ExecutionResult combined = rs.back();  // the last round's timeline and counts
    if (!combined.oom && rs.size() > 1) {
      auto median_of = [&](auto field) {
        std::vector<double> v;
        for (const ExecutionResult& x : rs) v.push_back(field(x));
        return detail::median(std::move(v));
      };
      combined.step_time_s = median_of([](const ExecutionResult& x) { return x.step_time_s; });
      for (std::size_t d = 0; d < combined.device_busy_s.size(); ++d) {
        combined.device_busy_s[d] = median_of([d](const ExecutionResult& x) { return x.device_busy_s[d]; });
        combined.device_copy_s[d] = median_of([d](const ExecutionResult& x) { return x.device_copy_s[d]; });
      }
      std::vector<double> steps;
      for (const ExecutionResult& x : rs) steps.insert(steps.end(), x.step_times_s.begin(), x.step_times_s.end());
      combined.step_times_s = std::move(steps);
    }
    out.push_back(std::move(combined));
  }
  return out;
}

InSituVerifyEnvironment::InSituVerifyEnvironment(const OpGraph& graph, const Machine& machine,
                                                 const Calibration& calibration, CpuExecutorOptions options, int rounds)
    : graph_(graph), machine_(machine), calibration_(calibration), executor_(graph, machine, options), rounds_(rounds) {
  if (rounds < 1) throw InputError("in-situ verify: rounds = " + std::to_string(rounds) + ": must be >= 1");
  if (calibration.devices.size() != machine.num_devices())
    throw InputError("in-situ verify: the calibration has " + std::to_string(calibration.devices.size()) +
                     " devices, the machine " + std::to_string(machine.num_devices()));
  for (const DeviceCalibration& d : calibration.devices)
    if (d.cores.empty()) throw InputError("in-situ verify: calibrated device " + d.device + " has no cores");
}

InSituMeasurement measure_interleaved_in_situ(const OpGraph& graph, const Machine& machine, const CpuExecutor& executor,
                                              const Calibration& calibration, std::span<const Placement> placements,
                                              int rounds, const std::function<void(int, std::size_t)>& after_run,
                                              const std::function<void(int)>& before_round) {
  InSituSampler sampler(graph, machine, executor, InSituOptions{.steps = executor.options().steps});
  InSituMeasurement out;
  out.measured = measure_interleaved(executor, placements, rounds, after_run, [&](int round) {
    if (before_round) before_round(round);
    sampler.run_round();
  });
  out.calibration = calibration;
  sampler.apply(out.calibration);
  return out;
}

std::vector<Measurement> InSituVerifyEnvironment::evaluate(std::span<const Placement> placements) {
  const ActivityMeter meter;
  const InSituMeasurement m = measure_interleaved_in_situ(graph_, machine_, executor_, calibration_, placements, rounds_);
  const MachineActivity activity = meter.stop();
  CalibratedCostModel cost(machine_, m.calibration);
  Simulator sim(graph_, cost);
  std::vector<Measurement> out;
  for (std::size_t i = 0; i < placements.size(); ++i)
    out.push_back({.step_time_s = m.measured[i].step_time_s,
                   .oom = m.measured[i].oom,
                   .source = activity.reliable() ? std::string("cpu") : "cpu, UNRELIABLE: " + activity.describe(),
                   .predicted_s = sim.simulate(placements[i]).step_time_s});
  return out;
}

std::vector<std::vector<int>> device_cores(const CalibratedMachine& calibrated) {
  std::vector<std::vector<int>> out;
  for (const Device& d : calibrated.machine.devices) {
    const DeviceCalibration* dc = calibrated.calibration.find_device(d.name);
    if (!dc || dc->cores.empty()) return {};
    out.push_back(dc->cores);
  }
  return out;
}

namespace {

std::vector<double> ranks(std::span<const double> v) {
  std::vector<std::size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < idx.size();) {
    std::size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
    const double avg = 0.5 * static_cast<double>(i + j) + 1;  // ties share their mean rank
    for (std::size_t k = i; k <= j; ++k) r[idx[k]] = avg;
    i = j + 1;
  }
  return r;
}

}  // namespace

double spearman_correlation(std::span<const double> a, std::span<const double> b) {
  PLACELAB_CHECK(a.size() == b.size()) << a.size() << " vs " << b.size();
  if (a.size() < 2) return 0;
  std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n, mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (std::size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0;
}

VerifySummary summarize(std::span<const VerifyReport> reports) {
  VerifySummary s;
  std::vector<double> abs_err, pred, meas;
  for (const VerifyReport& r : reports) {
    if (r.oom) continue;
    abs_err.push_back(std::abs(r.error));
    pred.push_back(r.predicted_s);
    meas.push_back(r.measured_s);
  }
  s.placements = static_cast<int>(abs_err.size());
  if (abs_err.empty()) return s;
  s.worst_abs_error = *std::max_element(abs_err.begin(), abs_err.end());
  s.median_abs_error = detail::median(abs_err);
  s.spearman = spearman_correlation(pred, meas);
  return s;
}

}  // namespace placelab
