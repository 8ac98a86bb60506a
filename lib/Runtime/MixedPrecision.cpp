// Low-precision shards with float32 masters (MixedPrecision.h).
#include "nnsc/Runtime/MixedPrecision.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

namespace nnsc::rt {

at::ScalarType precisionDtype(const std::string &name) {
  if (name == "bf16")
    return at::kBFloat16;
  if (name == "fp16")
    return at::kHalf;
  return at::kFloat;
}

MixedPrecision::MixedPrecision(const PrecisionConfig &config, std::vector<at::Tensor> &shards,
                               const std::vector<bool> &trainable)
    : config_(config), compute_(precisionDtype(config.mode)),
      reduce_(precisionDtype(config.gradReduceDtype)), masters_(shards.size()),
      released_(shards.size(), false) {
  at::NoGradGuard noGrad;
  for (size_t i = 0; i < shards.size(); ++i) {
    at::Tensor &t = shards[i];
    original_.push_back(t.scalar_type());
    if (!t.is_floating_point())
      continue;
    if (trainable[i]) {
      masters_[i] = t.detach().to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
      masters_[i].requires_grad_(true);
    }
    t = t.detach().to(compute_).requires_grad_(bool(trainable[i]));
  }
  shards_ = shards;
  if (config.mode == "fp16")
    scaler_ = std::make_unique<LossScaler>(config.lossScale);
}

at::Tensor MixedPrecision::fullPrecision(size_t i) const {
  if (released_[i])
    return at::Tensor();
  if (masters_[i].defined())
    return masters_[i];
  return shards_[i].detach().to(original_[i]);
}

at::ScalarType MixedPrecision::fullDtype(size_t i) const {
  return masters_[i].defined() ? at::kFloat : original_[i];
}

void MixedPrecision::releaseMaster(size_t i) {
  at::NoGradGuard noGrad;
  if (!masters_[i].defined() || released_[i])
    return;
  masters_[i].set_(); // no elements; the same tensor, so the reducer's holder too
  released_[i] = true;
}

int64_t MixedPrecision::masterBytes() const {
  int64_t bytes = 0;
  for (const at::Tensor &m : masters_)
    if (m.defined())
      bytes += int64_t(m.nbytes());
  return bytes;
}

void MixedPrecision::restore(size_t i, const at::Tensor &value) {
  at::NoGradGuard noGrad;
  if (masters_[i].defined() && !released_[i]) {
    masters_[i].copy_(value);
    shards_[i].copy_(masters_[i]);
    return;
  }
  shards_[i].copy_(value);
}

void MixedPrecision::foldGrads() {
  at::NoGradGuard noGrad;
  for (size_t i = 0; i < shards_.size(); ++i) {
    at::Tensor &shard = shards_[i];
    if (!masters_[i].defined() || !shard.grad().defined())
      continue;
    at::Tensor &main = masters_[i].mutable_grad();
    if (main.defined())
      main.add_(shard.grad());
    else
      main = shard.grad().to(at::kFloat);
    shard.mutable_grad() = at::Tensor();
  }
}

Expected<bool> MixedPrecision::unscale(CommBackend &world, at::Device device,
                                       const std::vector<at::Tensor> &more) {
  if (!scaler_)
    return false;
  at::NoGradGuard noGrad;
  // One flag on the device, read once: a sync the skip decision needs anyway.
  at::Tensor flag = at::zeros({1}, at::TensorOptions().dtype(at::kFloat).device(device));
  const double inverse = 1.0 / scaler_->scale();
  auto check = [&](at::Tensor g) {
    g.mul_(inverse);
    flag.add_(at::logical_not(at::isfinite(g)).any().to(at::kFloat));
  };
  for (const at::Tensor &m : masters_)
    if (m.defined() && m.grad().defined())
      check(m.grad());
  for (const at::Tensor &g : more)
    check(g);
  std::vector<at::Tensor> bufs{flag};
  Status st = world.allReduce(bufs, ReduceOp::Max)->wait();
  if (!st.isOk())
    return st.withContext("agreeing on fp16 gradient overflow");
  return bufs[0].item<float>() > 0;
}

void MixedPrecision::updateScale(bool overflow) {
  if (scaler_)
    scaler_->update(overflow);
}

void MixedPrecision::copyMastersToShards() {
  at::NoGradGuard noGrad;
  for (size_t i = 0; i < shards_.size(); ++i)
    if (masters_[i].defined() && !released_[i])
      shards_[i].copy_(masters_[i]);
}

} // namespace nnsc::rt
