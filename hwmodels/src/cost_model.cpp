#include "placelab/hwmodels/cost_model.h"

namespace placelab {

double CostModel::transfer_time_s(int64_t bytes, DeviceId src, DeviceId dst) const {
  if (src == dst) return 0;
  const Route& r = machine_->route(src, dst);
  return r.latency_s + static_cast<double>(bytes) / r.bandwidth_Bps;
}

}  // namespace placelab
