#pragma once
/// The dynamic loss scale of fp16 training, as plain numbers (no LibTorch):
/// Megatron's DynamicGradScaler, which with hysteresis 1 is PyTorch's
/// GradScaler with a floor. After a step whose gradients held an inf or NaN
/// on any rank (the step was skipped) the hysteresis budget drops by one and,
/// once spent, the scale is multiplied by the backoff factor (not below the
/// minimum); after `growthInterval` clean steps in a row the scale is
/// multiplied by the growth factor and the budget refilled.

#include <cstdint>

#include "nnsc/Runtime/TrainerConfig.h"

namespace nnsc::rt {

/// What a checkpoint keeps of a LossScaler, so a resumed run scales as the
/// uninterrupted one would.
struct LossScaleState {
  double scale = 1;
  int64_t cleanSteps = 0; ///< clean steps since the last change
  int64_t hysteresisLeft = 1;
};

class LossScaler {
public:
  explicit LossScaler(const LossScaleConfig &config)
      : config_(config), state_{config.initial, 0, config.hysteresis} {}

  double scale() const { return state_.scale; }

  /// After a step: `overflow` says whether its gradients were not finite.
  void update(bool overflow) {
    if (overflow) {
      state_.cleanSteps = 0;
      if (--state_.hysteresisLeft <= 0) {
        state_.scale = state_.scale * config_.backoffFactor;
        if (state_.scale < config_.minScale)
          state_.scale = config_.minScale;
      }
      return;
    }
    if (++state_.cleanSteps < config_.growthInterval)
      return;
    state_.cleanSteps = 0;
    state_.hysteresisLeft = config_.hysteresis;
    state_.scale *= config_.growthFactor;
  }

  const LossScaleState &state() const { return state_; }
  void setState(const LossScaleState &state) { state_ = state; }

private:
  LossScaleConfig config_;
  LossScaleState state_;
};

} // namespace nnsc::rt
