// Small helpers every calibration backend (cpu, cupti, trace) shares: the median of repeated
// measurements (public: profiler/median.h) and where/when a calibration was made. Private to profiler/.
#pragma once

#include <string>
#include <vector>

#include "placelab/hwmodels/calibration.h"
#include "placelab/profiler/cpu_calibrator.h"
#include "placelab/profiler/median.h"

namespace placelab::detail {

using placelab::median;
// This machine's host name, "localhost" when it cannot be read.
std::string host_name();
// The current time as ISO 8601 UTC, "2026-11-22T01:44:09Z".
std::string utc_now_iso();
// A new calibration's header: the backend that makes it, on this host, now.
void stamp(Calibration& cal, std::string backend);
// A stage's progress to the caller's callback, when there is one.
void report_progress(const CalibrationProgressCallback& progress, const char* stage, const std::string& item, int done,
                     int total);

}  // namespace placelab::detail
