// Human-readable quantities for console reports: "12.3 ms", "1.50 GiB", "11.3 GB/s".
#pragma once

#include <cstdint>
#include <string>

namespace placelab::cli {

std::string format_seconds(double seconds);
std::string format_bytes(int64_t bytes);
std::string format_rate(double bytes_per_second);
std::string format_flops(double flops);

}  // namespace placelab::cli
