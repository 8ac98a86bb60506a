#include "nnsc/Runtime/LrSchedule.h"

#include <cmath>

#include "nnsc/Runtime/TrainerConfig.h"

namespace nnsc::rt {

LrSchedule::LrSchedule(const LrScheduleConfig &config, double baseLr, int64_t totalSteps)
    : name_(config.name), baseLr_(baseLr), minLr_(config.minLr), warmup_(config.warmupSteps),
      decay_(config.decaySteps > 0 ? config.decaySteps : totalSteps) {}

double LrSchedule::at(int64_t step) const {
  if (step < warmup_)
    return baseLr_ * double(step + 1) / double(warmup_ + 1);
  if (name_ != "cosine")
    return baseLr_;
  if (step > decay_ || decay_ <= warmup_)
    return minLr_;
  double ratio = double(step - warmup_) / double(decay_ - warmup_);
  double coeff = 0.5 * (1.0 + std::cos(M_PI * ratio));
  return minLr_ + coeff * (baseLr_ - minLr_);
}

} // namespace nnsc::rt
