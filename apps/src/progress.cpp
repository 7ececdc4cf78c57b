#include "progress.h"
#include "placelab/core/units.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include <fmt/format.h>


namespace placelab::cli {

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)),
      total_(total),
      enabled_(enabled),
      tty_(isatty(fileno(stderr)) != 0),
      start_(std::chrono::steady_clock::now()) {}

void ProgressBar::update(int64_t done, double best_s) { draw(done, best_s, false); }

void ProgressBar::finish(int64_t done, double best_s) { draw(done, best_s, true); }

void ProgressBar::draw(int64_t done, double best_s, bool final) {
  if (!enabled_ || total_ <= 0) return;
  double frac = std::min(1.0, static_cast<double>(done) / static_cast<double>(total_));
  int decile = static_cast<int>(frac * 10);
  if (!tty_ && !final && decile == last_decile_) return;
  last_decile_ = decile;
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
  double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0;
  constexpr int kWidth = 24;
  int filled = static_cast<int>(frac * kWidth);
  std::string bar = std::string(static_cast<std::size_t>(filled), '#') + std::string(static_cast<std::size_t>(kWidth - filled), '.');
  std::string best = std::isfinite(best_s) ? format_seconds(best_s) : "-";
  std::string line = fmt::format("{:<22} [{}] {:>6}/{:<6} best {:>10}  {:>7.0f} samples/s  ETA {:>4.0f} s", label_, bar,
                                 done, total_, best, rate, final ? 0.0 : eta);
  if (tty_)
    fmt::print(stderr, "\r{}{}", line, final ? "\n" : "");
  else
    fmt::print(stderr, "{}\n", line);
  std::fflush(stderr);
}

}  // namespace placelab::cli
