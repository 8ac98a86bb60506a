#pragma once
/// Learning-rate schedules, as nanoGPT's get_lr (step is 0-based):
///
///   warmup (step < W):        lr * (step + 1) / (W + 1)
///   constant, after warmup:   lr
///   cosine, after decay (step > D):  min_lr
///   cosine, W <= step <= D:   r = (step - W) / (D - W)
///                             min_lr + 0.5 * (1 + cos(pi * r)) * (lr - min_lr)
///
/// with W = warmup_steps and D = decay_steps (0 means train.steps). All in
/// double precision, in this order, so a Python reference gets the same bits.

#include <cstdint>
#include <string>

namespace nnsc::rt {

struct LrScheduleConfig;

class LrSchedule {
public:
  /// `totalSteps` stands in for decay_steps when that is 0.
  LrSchedule(const LrScheduleConfig &config, double baseLr, int64_t totalSteps);

  /// The learning rate of 0-based `step`.
  double at(int64_t step) const;

  const std::string &name() const { return name_; }

private:
  std::string name_;
  double baseLr_, minLr_;
  int64_t warmup_, decay_;
};

} // namespace nnsc::rt
