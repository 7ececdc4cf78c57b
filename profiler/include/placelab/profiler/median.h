// The median of repeated measurements: what every calibration backend and the cluster
// calibration's ping-pong report of a timed repetition.
#pragma once

#include <vector>

namespace placelab {

// The median of `v` (the mean of the two middle values for an even count). Checks v is non-empty.
double median(std::vector<double> v);

}  // namespace placelab
