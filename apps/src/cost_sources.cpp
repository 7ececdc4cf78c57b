#include "cost_sources.h"
#include "placelab/core/units.h"

#include <fmt/format.h>


namespace placelab::cli {
namespace {

constexpr CostSource kSources[] = {CostSource::kGraph, CostSource::kMeasured, CostSource::kClassFit, CostSource::kAnalytic};

void print_row(const CostSourceRow& r) {
  std::string cells;
  for (CostSource c : kSources) {
    const auto k = static_cast<std::size_t>(c);
    cells += fmt::format(" {:>6} {:>11}", r.ops[k], r.ops[k] ? format_seconds(r.time_s[k]) : "-");
  }
  fmt::print("{:<28} {:>6}{}\n", r.op_type, r.total_ops(), cells);
}

nlohmann::json row_json(const CostSourceRow& r) {
  nlohmann::json j = {{"type", r.op_type}, {"ops", r.total_ops()}, {"time_s", r.total_time_s()}};
  for (CostSource c : kSources) {
    const auto k = static_cast<std::size_t>(c);
    j[std::string(cost_source_name(c))] = {{"ops", r.ops[k]}, {"time_s", r.time_s[k]}};
  }
  return j;
}

}  // namespace

void print_cost_sources(const CostSourceSummary& s, std::size_t max_rows) {
  fmt::print("{:<28} {:>6} {:>18} {:>18} {:>18} {:>18}\n", "op type", "ops", "graph", "measured", "fit", "analytic");
  CostSourceRow rest{.op_type = "(other types)"};
  for (std::size_t i = 0; i < s.by_type.size(); ++i) {
    if (i < max_rows) {
      print_row(s.by_type[i]);
      continue;
    }
    for (std::size_t k = 0; k < rest.ops.size(); ++k) {
      rest.ops[k] += s.by_type[i].ops[k];
      rest.time_s[k] += s.by_type[i].time_s[k];
    }
  }
  if (s.by_type.size() > max_rows) print_row(rest);
  print_row(s.total);
  fmt::print("by phase:\n");
  for (const CostSourceRow& r : s.by_phase)
    if (r.total_ops() > 0) print_row(r);
}

nlohmann::json cost_sources_json(const CostSourceSummary& s, const OpGraph& graph, const Machine& machine,
                                 const Placement& placement) {
  nlohmann::json j;
  j["total"] = row_json(s.total);
  j["by_type"] = nlohmann::json::array();
  for (const CostSourceRow& r : s.by_type) j["by_type"].push_back(row_json(r));
  j["by_phase"] = nlohmann::json::array();
  for (const CostSourceRow& r : s.by_phase)
    if (r.total_ops() > 0) j["by_phase"].push_back(row_json(r));
  j["ops"] = nlohmann::json::array();
  for (OpId id = 0; id < graph.num_ops(); ++id)
    j["ops"].push_back({{"name", graph.op(id).name},
                        {"type", graph.op(id).type},
                        {"phase", phase_name(graph.op(id).phase)},
                        {"device", machine.devices[placement[id]].name},
                        {"source", cost_source_name(s.per_op[id].source)},
                        {"time_s", s.per_op[id].time_s}});
  return j;
}

}  // namespace placelab::cli
