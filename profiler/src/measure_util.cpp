#include "measure_util.h"

#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <utility>

#include "placelab/core/error.h"

namespace placelab {

double median(std::vector<double> v) {
  PLACELAB_CHECK(!v.empty()) << "median of nothing";
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace placelab

namespace placelab::detail {

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

std::string utc_now_iso() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void stamp(Calibration& cal, std::string backend) {
  cal.backend = std::move(backend);
  cal.host = host_name();
  cal.created = utc_now_iso();
}

void report_progress(const CalibrationProgressCallback& progress, const char* stage, const std::string& item, int done,
                     int total) {
  if (progress) progress(CalibrationProgress{stage, item, done, total});
}

}  // namespace placelab::detail
