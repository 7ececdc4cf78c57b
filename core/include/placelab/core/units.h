// Human-readable quantities, the one way every console report and summary prints them:
// "12.345 ms", "1.50 GiB", "11.3 GB/s". (Values quoted back from a file: numbers.h.)
#pragma once

#include <cstdint>
#include <string>

namespace placelab {

std::string format_seconds(double seconds);
std::string format_bytes(int64_t bytes);
std::string format_rate(double bytes_per_second);
std::string format_flops(double flops);

}  // namespace placelab
