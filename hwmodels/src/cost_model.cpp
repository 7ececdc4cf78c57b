#include "placelab/hwmodels/cost_model.h"

#include <algorithm>
#include <map>

#include "placelab/core/error.h"
#include "placelab/hwmodels/machine.h"

namespace placelab {

std::string_view cost_source_name(CostSource source) {
  switch (source) {
    case CostSource::kGraph: return "graph";
    case CostSource::kMeasured: return "measured";
    case CostSource::kClassFit: return "fit";
    case CostSource::kAnalytic: return "analytic";
  }
  return "analytic";
}

CostSourceSummary summarize_cost_sources(const OpGraph& graph, const CostModel& cost,
                                         std::span<const DeviceId> device_of_op) {
  PLACELAB_CHECK(device_of_op.size() == graph.num_ops()) << device_of_op.size() << " devices for " << graph.num_ops() << " ops";
  CostSourceSummary s;
  s.total.op_type = "(all)";
  s.per_op.reserve(graph.num_ops());
  std::map<std::string, CostSourceRow, std::less<>> rows;
  for (Phase p : {Phase::kForward, Phase::kBackward, Phase::kUpdate, Phase::kOther})
    s.by_phase.push_back(CostSourceRow{.op_type = std::string(phase_name(p))});
  for (OpId id = 0; id < graph.num_ops(); ++id) {
    const Op& op = graph.op(id);
    const CostLookup c = cost.lookup(op, device_of_op[id]);
    s.per_op.push_back(c);
    const auto k = static_cast<std::size_t>(c.source);
    CostSourceRow& row = rows[op.type];
    row.op_type = op.type;
    ++row.ops[k];
    row.time_s[k] += c.time_s;
    ++s.total.ops[k];
    s.total.time_s[k] += c.time_s;
    CostSourceRow& phase = s.by_phase[static_cast<std::size_t>(op.phase)];
    ++phase.ops[k];
    phase.time_s[k] += c.time_s;
  }
  for (auto& [type, row] : rows) s.by_type.push_back(std::move(row));
  std::stable_sort(s.by_type.begin(), s.by_type.end(),
                   [](const CostSourceRow& a, const CostSourceRow& b) { return a.total_time_s() > b.total_time_s(); });
  return s;
}

std::optional<double> measured_time_s(const Op& op, const Device& device) {
  std::optional<double> by_kind;
  const std::string_view kind = device_kind_name(device.kind);
  for (const MeasuredTime& m : op.measured_s) {
    if (m.device == device.name) return m.time_s;
    if (m.device == kind) by_kind = m.time_s;
  }
  return by_kind;
}

void check_measured_times(const OpGraph& graph, const Machine& machine) {
  for (OpId id = 0; id < graph.num_ops(); ++id) {
    const Op& op = graph.op(id);
    for (const MeasuredTime& m : op.measured_s) {
      if (m.device == device_kind_name(DeviceKind::kCpu) || m.device == device_kind_name(DeviceKind::kGpu) ||
          machine.find_device(m.device))
        continue;
      std::string valid;
      for (const Device& d : machine.devices) valid += (valid.empty() ? "" : ", ") + d.name;
      throw InputError("op \"" + op.name + "\": measured_s key \"" + m.device + "\": machine " + machine.name +
                       " has no device of this name and it is no device kind; valid keys are cpu, gpu, " + valid);
    }
  }
}

double CostModel::op_time_s(const Op& op, DeviceId device) const {
  if (!op.measured_s.empty()) {
    PLACELAB_CHECK(device < machine_->devices.size()) << "device " << device << " of " << machine_->devices.size();
    if (std::optional<double> t = measured_time_s(op, machine_->devices[device])) return *t;
  }
  return model_op_time_s(op, device);
}

CostLookup CostModel::lookup(const Op& op, DeviceId device) const {
  if (!op.measured_s.empty()) {
    PLACELAB_CHECK(device < machine_->devices.size()) << "device " << device << " of " << machine_->devices.size();
    if (std::optional<double> t = measured_time_s(op, machine_->devices[device])) return {*t, CostSource::kGraph};
  }
  return model_lookup(op, device);
}

std::vector<DeviceId> CostModel::op_time_representatives(const OpGraph& graph) const {
  const std::size_t nd = machine_->devices.size();
  std::vector<uint8_t> named(nd, 0);
  for (OpId id = 0; id < graph.num_ops(); ++id)
    for (const MeasuredTime& m : graph.op(id).measured_s)
      if (auto d = machine_->find_device(m.device)) named[*d] = 1;
  std::vector<DeviceId> rep(nd);
  // By model representative: the first device of its class that no op names.
  std::vector<DeviceId> first_unnamed(nd, static_cast<DeviceId>(nd));
  for (DeviceId d = 0; d < nd; ++d) {
    const DeviceId r = op_time_representative(d);
    PLACELAB_CHECK(r < nd) << describe() << ": op_time_representative(" << d << ") = " << r;
    if (named[d]) {
      rep[d] = d;
      continue;
    }
    DeviceId& first = first_unnamed[r];
    if (first == nd) first = named[r] ? d : r;
    rep[d] = first;
  }
  return rep;
}

double CostModel::transfer_time_s(int64_t bytes, DeviceId src, DeviceId dst) const {
  if (src == dst) return 0;
  const Route& r = machine_->route(src, dst);
  return r.latency_s + static_cast<double>(bytes) / r.bandwidth_Bps;
}

double CostModel::dispatch_time_s(const Op& /*op*/) const {
  const std::optional<DeviceId> cpu = machine_->default_cpu();
  return cpu ? machine_->devices[*cpu].dispatch_s : kDefaultDispatchS;
}

}  // namespace placelab
