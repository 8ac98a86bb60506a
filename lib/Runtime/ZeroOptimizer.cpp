#include "nnsc/Runtime/ZeroOptimizer.h"

#include <cmath>
#include <numeric>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "nnsc/Runtime/OptimizerStateKey.h"

namespace nnsc::rt {

namespace {

// As Optimizer.cpp: torch.norm(t, 2.0) over every dim.
at::Tensor l2Norm(const at::Tensor &t) {
  std::vector<int64_t> dims(t.dim());
  std::iota(dims.begin(), dims.end(), 0);
  return at::norm(t, c10::Scalar(2.0), dims, false);
}

} // namespace

ZeroOptimizer::ZeroOptimizer(const OptimizerConfig &config, Reducer &reducer,
                             std::vector<OptimParam> params)
    : config_(config), reducer_(reducer), params_(std::move(params)), steps_(params_.size()),
      buckets_(reducer.numBuckets()) {
  for (size_t i = 0; i < params_.size(); ++i) {
    index_[params_[i].name] = i;
    shapes_.push_back(params_[i].param.sizes().vec());
  }
  if (params_.empty())
    return;
  // Mixed precision: this rank's ranges of the whole masters, one flat per
  // bucket; ZeRO-3: of the values of each unit bucket's parameters.
  at::NoGradGuard noGrad;
  if (reducer_.hasMainGrads())
    masterDtype_ = reducer_.params()[0].scalar_type();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (!masterDtype_ && reducer_.bucketUnit(b) < 0)
      continue;
    const ZeroBucketLayout &layout = reducer_.zeroLayout(b);
    at::Tensor &flat = buckets_[b].master;
    // The bucket's own dtype: a reducer's buckets may differ in it.
    flat = at::zeros({layout.shardNumel},
                     params_[reducer_.bucketMembers(b)[0]].param.options().requires_grad(false));
    for (const ZeroPiece &piece : layout.pieces)
      flat.narrow(0, piece.shardOffset, piece.length)
          .copy_(
              params_[reducer_.bucketMembers(b)[piece.member]].param.detach().reshape({-1}).narrow(
                  0, piece.paramOffset, piece.length));
  }
}

// States in the parameters' dtype (float32 masters), whatever the reduction's.
at::ScalarType ZeroOptimizer::stateDtype(size_t bucket) const {
  return params_[reducer_.bucketMembers(bucket)[0]].param.scalar_type();
}

void ZeroOptimizer::allocate(size_t bucket, bool momentum) {
  BucketState &b = buckets_[bucket];
  auto zeros = [&] {
    const at::Tensor &shard = reducer_.gradShard(bucket);
    return at::zeros_like(shard, shard.options().dtype(stateDtype(bucket)));
  };
  if (momentum && !b.momentumBuffer.defined())
    b.momentumBuffer = zeros();
  if (!momentum && !b.expAvg.defined()) {
    b.expAvg = zeros();
    b.expAvgSq = zeros();
  }
}

bool ZeroOptimizer::usesForeach() const {
  if (config_.foreach != "auto")
    return config_.foreach == "true";
  return buckets_.size() > 0 && reducer_.gradShard(0).is_cuda();
}

// Every owned piece of every bucket, as ranges of the flats (or of the
// parameter without mixed precision), grouped by weight decay. Updated one
// by one, with foreach as one multi-tensor update per group (a handful of
// kernels for the whole step), or with fused as one fused kernel per group:
// element-wise, so the results agree with the unsharded optimizer's.
void ZeroOptimizer::update(double lr) {
  const bool sgd = config_.name == "sgd", momentum = sgd && config_.momentum != 0;
  struct Lists {
    std::vector<at::Tensor> params, grads, avgs, sqs, buffers;
    std::vector<double> steps;
  };
  std::map<bool, Lists> groups;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (!sgd || momentum)
      allocate(b, sgd);
    BucketState &s = buckets_[b];
    at::Tensor shard = reducer_.gradShard(b);
    if (shard.scalar_type() != stateDtype(b)) // bf16/fp16 reduction, float32 masters
      shard = shard.to(stateDtype(b));
    for (const ZeroPiece &piece : reducer_.zeroLayout(b).pieces) {
      size_t k = reducer_.bucketMembers(b)[piece.member];
      Lists &l = groups[!sgd && params_[k].decay];
      auto range = [&](const at::Tensor &flat) {
        return flat.narrow(0, piece.shardOffset, piece.length);
      };
      l.params.push_back(s.master.defined() ? range(s.master)
                                            : params_[k].param.detach().view({-1}).narrow(
                                                  0, piece.paramOffset, piece.length));
      l.grads.push_back(range(shard));
      if (momentum)
        l.buffers.push_back(range(s.momentumBuffer));
      if (sgd)
        continue;
      l.avgs.push_back(range(s.expAvg));
      l.sqs.push_back(range(s.expAvgSq));
      l.steps.push_back(steps_[k].item<float>()); // a host tensor: no device sync
    }
  }
  const bool foreach = usesForeach(), fused = config_.fused == "true";
  for (auto &[decay, l] : groups) {
    const double wd = decay ? config_.weightDecay : 0.0;
    if (fused && sgd)
      sgdFusedUpdate(config_, l.params, l.grads, l.buffers, !momentumStarted_, lr);
    else if (fused)
      adamFusedUpdate(config_, l.params, l.grads, l.avgs, l.sqs, l.steps, lr, wd,
                      config_.name == "adamw");
    else if (foreach && sgd)
      sgdForeachUpdate(config_, l.params, l.grads, l.buffers, !momentumStarted_, lr);
    else if (foreach)
      adamForeachUpdate(config_, l.params, l.grads, l.avgs, l.sqs, l.steps, lr, wd,
                        config_.name == "adamw");
    else
      for (size_t i = 0; i < l.params.size(); ++i) {
        at::Tensor none;
        if (sgd)
          sgdUpdate(config_, l.params[i], l.grads[i], momentum ? l.buffers[i] : none,
                    !momentumStarted_, lr);
        else
          adamUpdate(config_, l.params[i], l.grads[i], l.avgs[i], l.sqs[i], l.steps[i], lr, wd,
                     config_.name == "adamw");
      }
  }
}

Status ZeroOptimizer::step(double lr) {
  at::NoGradGuard noGrad;
  for (at::Tensor &s : steps_) {
    if (!s.defined())
      s = at::zeros({}, at::TensorOptions().dtype(at::kFloat));
    s.add_(1);
  }
  update(lr);
  momentumStarted_ = true;
  // Mixed precision: the masters' ranges travel rounded to the low dtype
  // (half the bytes), or in float32 where the backend would widen them; the
  // weights get the same bits either way.
  // ZeRO-3's unit buckets are gathered when their unit runs next.
  std::vector<at::Tensor> owned(buckets_.size());
  std::vector<size_t> which;
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (reducer_.bucketUnit(b) < 0) {
      which.push_back(b);
      if (masterDtype_)
        owned[b] = gatherSource(b);
    }
  if (which.empty())
    return Status::ok();
  return reducer_.gatherParams(owned, {}, which);
}

at::Tensor ZeroOptimizer::gatherSource(size_t b) const {
  const at::Tensor &master = buckets_[b].master;
  at::ScalarType low = reducer_.params()[reducer_.bucketMembers(b)[0]].scalar_type();
  if (master.scalar_type() == low || !reducer_.group().carriesNatively(low))
    return master;
  return master.to(low);
}

bool ZeroOptimizer::shardsValues(const std::string &local) const {
  auto it = index_.find(local);
  if (it == index_.end())
    return false;
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (size_t k : reducer_.bucketMembers(b))
      if (k == it->second)
        return reducer_.bucketUnit(b) >= 0;
  return false;
}

Expected<std::map<std::string, at::Tensor>> ZeroOptimizer::gatherMasters() {
  std::map<std::string, at::Tensor> out;
  std::vector<at::Tensor> owned(buckets_.size()), whole(params_.size());
  std::vector<size_t> which;
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (buckets_[b].master.defined()) {
      owned[b] = buckets_[b].master;
      which.push_back(b);
    }
  if (which.empty())
    return out;
  for (size_t b : which)
    for (size_t k : reducer_.bucketMembers(b))
      whole[k] = at::empty(shapes_[k], owned[b].options());
  NNSC_RETURN_IF_ERROR(reducer_.gatherParams(owned, whole, which));
  for (size_t b : which)
    for (size_t k : reducer_.bucketMembers(b))
      out[params_[k].name] = whole[k];
  return out;
}

void ZeroOptimizer::loadMaster(const std::string &local, const at::Tensor &value) {
  at::NoGradGuard noGrad;
  size_t k = index_.at(local);
  at::Tensor flat = value.reshape({-1});
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (const ZeroPiece &piece : reducer_.zeroLayout(b).pieces)
      if (reducer_.bucketMembers(b)[piece.member] == k)
        buckets_[b]
            .master.narrow(0, piece.shardOffset, piece.length)
            .copy_(flat.narrow(0, piece.paramOffset, piece.length));
}

void ZeroOptimizer::zeroGrad() {
  reducer_.clearGradShards(); // ZeRO-2: the next step's micro-batches sum afresh
  for (auto &p : params_) {
    at::Tensor g = p.param.mutable_grad();
    if (g.defined())
      g.detach().zero_();
  }
}

at::Tensor ZeroOptimizer::gradSquareSum() const {
  // Summed where the shards are: a copy to the host per bucket would wait for
  // the GPU every step.
  at::Tensor sum;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    at::Tensor n = l2Norm(reducer_.gradShard(b)).to(at::kDouble);
    sum = sum.defined() ? sum + n * n : n * n;
  }
  if (sum.defined() && reducer_.shardCopies() > 1)
    sum = sum / double(reducer_.shardCopies());
  return sum.defined() ? sum : at::zeros({}, at::TensorOptions().dtype(at::kDouble));
}

void ZeroOptimizer::scaleGrads(const at::Tensor &coef) {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    at::Tensor g = reducer_.gradShard(b);
    g.mul_(coef.to(g.device()));
  }
}

std::map<std::string, at::Tensor> ZeroOptimizer::state() const {
  std::map<std::string, at::Tensor> out;
  for (size_t i = 0; i < params_.size(); ++i)
    if (steps_[i].defined() && config_.name != "sgd")
      out[optimizerStateKey(params_[i].name, "step")] = steps_[i];
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const BucketState &s = buckets_[b];
    for (const ZeroPiece &piece : reducer_.zeroLayout(b).pieces) {
      const std::string &name = params_[reducer_.bucketMembers(b)[piece.member]].name;
      auto add = [&](const char *field, const at::Tensor &t) {
        if (t.defined())
          out[optimizerStateKey(name, field, piece.paramOffset)] =
              t.narrow(0, piece.shardOffset, piece.length);
      };
      add("exp_avg", s.expAvg);
      add("exp_avg_sq", s.expAvgSq);
      add("momentum_buffer", s.momentumBuffer);
    }
  }
  return out;
}

// Copies `v` (a piece at `offset`, or the whole shard when offset < 0) into
// the owned ranges of parameter `param`'s state `field`.
Status ZeroOptimizer::loadField(size_t param, const std::string &field, int64_t offset,
                                const at::Tensor &v, const std::string &key,
                                const std::string &from) {
  const std::vector<int64_t> &shape = shapes_[param];
  if (offset < 0 && v.sizes() != at::IntArrayRef(shape))
    return errorf("{}: error: optimizer state '{}' has shape [{}]; the parameter has [{}]", from,
                  key, fmt::join(v.sizes(), ", "), fmt::join(shape, ", "));
  bool momentum = field == "momentum_buffer";
  if (!momentum && field != "exp_avg" && field != "exp_avg_sq")
    return errorf("{}: error: unknown optimizer state '{}'", from, key);
  at::Tensor flat = v.reshape({-1});
  bool matched = offset < 0;
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (const ZeroPiece &piece : reducer_.zeroLayout(b).pieces) {
      if (reducer_.bucketMembers(b)[piece.member] != param)
        continue;
      at::Tensor src;
      if (offset < 0)
        src = flat.narrow(0, piece.paramOffset, piece.length);
      else if (piece.paramOffset == offset && piece.length == flat.numel())
        src = flat;
      else
        continue;
      matched = true;
      allocate(b, momentum);
      BucketState &s = buckets_[b];
      at::Tensor &dst = momentum ? s.momentumBuffer : field == "exp_avg" ? s.expAvg : s.expAvgSq;
      dst.narrow(0, piece.shardOffset, piece.length).copy_(src);
    }
  if (!matched)
    return errorf("{}: error: optimizer state '{}' ({} elements) is no part this rank owns under "
                  "ZeRO (another partition: other bucket sizes or group); merge the checkpoint "
                  "with nnsc-merge-ckpt and resume from the merged file",
                  from, key, flat.numel());
  momentumStarted_ = momentumStarted_ || momentum;
  return Status::ok();
}

Status ZeroOptimizer::loadState(const std::map<std::string, at::Tensor> &state,
                                const std::string &from) {
  at::NoGradGuard noGrad;
  for (const auto &[key, value] : state) {
    auto k = parseOptimizerStateKey(key);
    auto it = k ? index_.find(k->param) : index_.end();
    if (it == index_.end())
      return errorf("{}: error: optimizer state '{}' names no parameter of this rank", from, key);
    if (k->field == "step" && k->offset < 0) {
      steps_[it->second] = value.to(at::kCPU, at::kFloat).reshape({}).clone();
      continue;
    }
    NNSC_RETURN_IF_ERROR(loadField(it->second, k->field, k->offset,
                                   value.to(params_[it->second].param.device()), key, from));
  }
  return Status::ok();
}

int64_t ZeroOptimizer::stateBytes() const {
  int64_t bytes = 0;
  for (const BucketState &b : buckets_)
    for (const at::Tensor *t : {&b.expAvg, &b.expAvgSq, &b.momentumBuffer, &b.master})
      if (t->defined() && (t != &b.master || masterDtype_)) // ZeRO-3's values are no state
        bytes += int64_t(t->nbytes());
  for (const at::Tensor &s : steps_)
    if (s.defined())
      bytes += int64_t(s.nbytes());
  return bytes;
}

Expected<at::Tensor> clipGradNormSharded(const std::vector<at::Tensor> &params,
                                         const std::vector<int> &replicas,
                                         const std::vector<ZeroOptimizer *> &sharded,
                                         double maxNorm, CommBackend &world, int64_t dpSize,
                                         at::Device device) {
  at::NoGradGuard noGrad;
  const double dp = double(std::max<int64_t>(1, dpSize));
  // Summed on the run's device (NCCL reduces device tensors only), also where
  // every trainable tensor is a shard and `params` is empty.
  at::Tensor local = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(device));
  std::vector<at::Tensor> grads;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].grad().defined())
      continue;
    grads.push_back(params[i].grad());
    at::Tensor n = l2Norm(grads.back().detach()).to(at::kDouble);
    local.add_(n * n / double(replicas[i] > 0 ? replicas[i] : 1));
  }
  // A shard's elements are held by this rank alone in the whole job, where a
  // plain shard counts once per copy (and replica): weigh them alike.
  for (ZeroOptimizer *z : sharded)
    local.add_(z->gradSquareSum().to(device) * dp);
  std::vector<at::Tensor> bufs{local};
  NNSC_RETURN_IF_ERROR(world.allReduce(bufs)->wait());
  at::Tensor total = (bufs[0] / dp).sqrt().to(at::kFloat).reshape({});
  if (maxNorm > 0) {
    at::Tensor coef = (total + 1e-6).reciprocal() * maxNorm;
    coef = at::clamp_max(coef, 1.0);
    for (auto &g : grads)
      g.detach().mul_(coef.to(g.device()));
    for (ZeroOptimizer *z : sharded)
      z->scaleGrads(coef);
  }
  return total;
}

} // namespace nnsc::rt
