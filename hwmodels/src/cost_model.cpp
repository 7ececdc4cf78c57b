#include "placelab/hwmodels/cost_model.h"

#include <algorithm>
#include <map>

#include "placelab/graph/error.h"

namespace placelab {

std::string_view cost_source_name(CostSource source) {
  switch (source) {
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

double CostModel::transfer_time_s(int64_t bytes, DeviceId src, DeviceId dst) const {
  if (src == dst) return 0;
  const Route& r = machine_->route(src, dst);
  return r.latency_s + static_cast<double>(bytes) / r.bandwidth_Bps;
}

}  // namespace placelab
