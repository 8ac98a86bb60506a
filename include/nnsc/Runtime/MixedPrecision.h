#pragma once
/// Mixed-precision training (precision.mode bf16 | fp16; docs/trainer-config.md),
/// Megatron's recipe:
///   - the program computes in the low dtype: every floating shard (weights
///     and buffers) and every floating input is converted to it;
///   - every trainable shard has a float32 master; the optimizer, its states,
///     clipping and checkpoints see only the masters; after each update the
///     masters are rounded into the low shards (under ZeRO the ZeroOptimizer
///     keeps this rank's ranges of them and the whole ones are released);
///   - a shard's low-precision gradient is added into its master's float32
///     gradient after every micro-batch (foldGrads), so accumulation over
///     micro-batches happens in float32; the gradient reducers add it
///     themselves on the last micro-batch and reduce in the configured dtype
///     (Reducer::setMainGrads);
///   - fp16 multiplies the loss by a dynamic scale (LossScaler.h) and skips
///     a step whose gradients are not finite on any rank.

#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "nnsc/Runtime/Comm.h"
#include "nnsc/Runtime/LossScaler.h"
#include "nnsc/Runtime/TrainerConfig.h"

namespace nnsc::rt {

/// The at::ScalarType of a precision name: fp32, bf16 or fp16.
at::ScalarType precisionDtype(const std::string &name);

class MixedPrecision {
public:
  /// Replaces every floating tensor of `shards` by a low-precision leaf
  /// (requiring grad where `trainable[i]`) and keeps a float32 master of each
  /// trainable one, taken from the original values. `config.mode` is bf16 or
  /// fp16.
  MixedPrecision(const PrecisionConfig &config, std::vector<at::Tensor> &shards,
                 const std::vector<bool> &trainable);

  at::ScalarType computeDtype() const { return compute_; }
  at::ScalarType reduceDtype() const { return reduce_; }
  const std::string &mode() const { return config_.mode; }

  /// The float32 master of shard `i`; undefined unless the shard is trainable
  /// and floating. Its grad holds the float32 gradient (foldGrads); after
  /// releaseMaster(i) it holds nothing else.
  const at::Tensor &master(size_t i) const { return masters_[i]; }
  /// ZeRO (ZeroOptimizer holds this rank's range of the values): frees the
  /// master's elements in place, keeping the tensor as the holder of its
  /// float32 gradient. fullPrecision(i) is then undefined, restore(i) sets
  /// the low shard only and copyMastersToShards() skips it.
  void releaseMaster(size_t i);
  bool released(size_t i) const { return released_[i]; }
  /// The dtype fullPrecision(i) has: float32 for a master, else the shard's
  /// original dtype.
  at::ScalarType fullDtype(size_t i) const;
  /// What an optimizer, clipping or a checkpoint sees for shard `i`: its
  /// master, or the shard itself cast back to its original dtype; undefined
  /// after releaseMaster(i).
  at::Tensor fullPrecision(size_t i) const;
  /// Sets shard `i` (and its master) from `value`, e.g. a checkpoint's.
  void restore(size_t i, const at::Tensor &value);
  /// Bytes of the masters this object holds (released ones excluded).
  int64_t masterBytes() const;

  /// The factor backward starts from: the loss scale under fp16, else 1.
  double lossScale() const { return scaler_ ? scaler_->scale() : 1.0; }

  /// Adds every shard's low-precision gradient into its master's float32
  /// gradient and drops it (a shard a reducer already handled has none).
  void foldGrads();

  /// fp16: divides the masters' gradients and `more` (ZeRO's gradient
  /// shards) by the loss scale and agrees over `world` (every rank calls it)
  /// whether any rank's are not finite; true means the step must be skipped.
  /// bf16: false, with no communication.
  Expected<bool> unscale(CommBackend &world, at::Device device,
                         const std::vector<at::Tensor> &more = {});

  /// fp16: the scale after a step that was (`overflow`) or was not skipped.
  void updateScale(bool overflow);

  /// Rounds the masters into the low shards (after an optimizer update).
  void copyMastersToShards();

  /// The loss scaler's state (fp16), for checkpoints; nullptr under bf16.
  const LossScaler *scaler() const { return scaler_.get(); }
  LossScaler *scaler() { return scaler_.get(); }

private:
  PrecisionConfig config_;
  at::ScalarType compute_, reduce_;
  std::vector<at::Tensor> shards_;  ///< the low leaves (handles shared with the caller)
  std::vector<at::Tensor> masters_; ///< float32, trainable floating shards only
  std::vector<bool> released_;
  std::vector<at::ScalarType> original_;
  std::unique_ptr<LossScaler> scaler_;
};

} // namespace nnsc::rt
