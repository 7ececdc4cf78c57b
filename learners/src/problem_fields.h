// Private: the group-level rules that describe_problem and group_feature_matrix (problem.cpp) share
// with the learned groupers' merge_units and unit_feature_matrix (grouper.cpp), so groups and
// units are sized and scaled by one rule.
#pragma once

#include <algorithm>
#include <cmath>

#include "placelab/learners/problem.h"

namespace placelab::detail {

// The group fields of `p` for `groups` groups over `p.op_types`, all zero.
inline void reset_group_fields(PlacementProblem& p, std::size_t groups) {
  p.num_groups = groups;
  p.group_size.assign(groups, 0);
  p.group_type_counts.assign(groups * p.op_types.size(), 0.0);
  p.group_shape.assign(groups, ShapeSlots{});
  p.group_flops.assign(groups, 0.0);
  p.group_output_bytes.assign(groups, 0.0);
  p.group_persistent_bytes.assign(groups, 0.0);
}

// Rows first_row, +1, +2 of `f` (a column per group): log(1 + FLOPs), log(1 + output bytes),
// log(1 + persistent bytes), each divided by its largest value over the groups (0 when that is 0).
inline void put_scaled_sizes(const PlacementProblem& p, nn::Index first_row, nn::Matrix<double>& f) {
  for (auto [row, values] : {std::pair{first_row, &p.group_flops}, std::pair{first_row + 1, &p.group_output_bytes},
                             std::pair{first_row + 2, &p.group_persistent_bytes}}) {
    double top = 0;
    for (double x : *values) top = std::max(top, std::log1p(std::max(x, 0.0)));
    for (std::size_t g = 0; g < values->size(); ++g)
      f(row, static_cast<nn::Index>(g)) = top > 0 ? std::log1p(std::max((*values)[g], 0.0)) / top : 0.0;
  }
}

}  // namespace placelab::detail
