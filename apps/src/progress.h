// A one-line progress display on stderr: samples, best step time, samples/s and ETA. Redraws in
// place on a terminal; prints a line per 10 % otherwise (CI logs stay short).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace placelab::cli {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, bool enabled);
  // Reports `done` of `total` with the best step time so far (inf when nothing ran yet).
  void update(int64_t done, double best_s);
  // Ends the line (with a final update).
  void finish(int64_t done, double best_s);

 private:
  void draw(int64_t done, double best_s, bool final);
  std::string label_;
  int64_t total_;
  bool enabled_, tty_;
  int last_decile_ = -1;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace placelab::cli
