// The link rule of every copy placelab times (docs/simulator.md, "Transfers"): a copy holds every
// link direction of its route from its start to its end, and starts once it is issued and all of
// them are free — first come, first served, never moved into an earlier idle gap. The eager model
// and the list schedulers' model of TensorFlow's executor (HEFT, m-ETF, m-SCT) book their copies
// here; the dataflow event loop applies the same two steps to its per-direction records, which keep
// each direction's traffic counters on the same cache line.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "placelab/hwmodels/machine.h"

namespace placelab {

class LinkBook {
 public:
  explicit LinkBook(std::size_t link_directions = 0) : free_s_(link_directions, 0.0) {}

  // Every direction free at 0 again, for `link_directions` directions.
  void reset(std::size_t link_directions) { free_s_.assign(link_directions, 0.0); }

  // When a copy issued at `issue_s` over `hops` starts.
  double start_s(std::span<const LinkDirection> hops, double issue_s) const {
    for (LinkDirection h : hops) issue_s = std::max(issue_s, free_s_[h]);
    return issue_s;
  }
  // Holds `hops` until `end_s`.
  void hold(std::span<const LinkDirection> hops, double end_s) {
    for (LinkDirection h : hops) free_s_[h] = end_s;
  }
  // When a copy issued at `issue_s` over `hops`, taking `duration_s`, would end (`commit`: and
  // holds them until then).
  double book(std::span<const LinkDirection> hops, double issue_s, double duration_s, bool commit) {
    const double end = start_s(hops, issue_s) + duration_s;
    if (commit) hold(hops, end);
    return end;
  }

 private:
  std::vector<double> free_s_;  // per link direction: when it is next free
};

}  // namespace placelab
