// The cost-source tables of `simulate --cost-sources` and `inspect --machine`: which ops were
// priced from exact measurements, class fits or the analytic roofline, by op type.
#pragma once

#include <nlohmann/json.hpp>

#include "placelab/graph/placement.h"
#include "placelab/hwmodels/cost_model.h"

namespace placelab::cli {

// A console table: one row per op type (largest time first, at most `max_rows`, the rest summed
// in one row), then the totals.
void print_cost_sources(const CostSourceSummary& s, std::size_t max_rows = 25);
// {"total": {...}, "by_type": [...], "ops": [{name, type, device, source, time_s}]}.
nlohmann::json cost_sources_json(const CostSourceSummary& s, const OpGraph& graph, const Machine& machine,
                                 const Placement& placement);

}  // namespace placelab::cli
