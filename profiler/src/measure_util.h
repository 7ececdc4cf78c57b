// Small helpers every calibration backend (cpu, cupti, trace) shares: the median of repeated
// measurements and where/when a calibration was made. Private to profiler/.
#pragma once

#include <string>
#include <vector>

namespace placelab::detail {

// The median of `v` (the mean of the two middle values for an even count). Checks v is non-empty.
double median(std::vector<double> v);
// This machine's host name, "localhost" when it cannot be read.
std::string host_name();
// The current time as ISO 8601 UTC, "2026-11-22T01:44:09Z".
std::string utc_now_iso();

}  // namespace placelab::detail
