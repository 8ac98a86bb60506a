#include "nnsc/Runtime/Optimizer.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "nnsc/Torch/Compat.h"

namespace nnsc::rt {

namespace {

// torch.norm(t, 2.0) of PyTorch 1.13 for p numeric and dim None: _VF.norm
// over every dim.
at::Tensor l2Norm(const at::Tensor &t) {
  std::vector<int64_t> dims(t.dim());
  std::iota(dims.begin(), dims.end(), 0);
  return at::norm(t, c10::Scalar(2.0), dims, false);
}

} // namespace

Optimizer::Optimizer(const OptimizerConfig &config, std::vector<OptimParam> params)
    : config_(config), params_(std::move(params)), slots_(params_.size()) {}

// Operation for operation as the torch.optim of the PyTorch this LibTorch
// belongs to (its single-tensor path), so the two agree bit for bit.
void adamUpdate(const OptimizerConfig &config, at::Tensor param, at::Tensor grad,
                at::Tensor &expAvg, at::Tensor &expAvgSq, double step, double lr, double wd,
                bool decoupled) {
  const double b1 = config.beta1, b2 = config.beta2;
  if (decoupled)
    param.mul_(1 - lr * wd);
  else if (wd != 0)
    grad = grad.add(param, wd);
#if NNSC_TORCH_AT_LEAST(2, 0)
  expAvg.lerp_(grad, 1 - b1);
#else
  expAvg.mul_(b1).add_(grad, 1 - b1);
#endif
  expAvgSq.mul_(b2).addcmul_(grad, grad, 1 - b2);
  double bias1 = 1 - std::pow(b1, step);
  double bias2 = 1 - std::pow(b2, step);
  double stepSize = lr / bias1;
#if NNSC_TORCH_AT_LEAST(2, 0)
  double bias2Sqrt = std::pow(bias2, 0.5);
#else
  double bias2Sqrt = std::sqrt(bias2);
#endif
  at::Tensor denom = (expAvgSq.sqrt() / bias2Sqrt).add_(config.eps);
  param.addcdiv_(expAvg, denom, -stepSize);
}

void sgdUpdate(const OptimizerConfig &config, at::Tensor param, at::Tensor grad, at::Tensor &buffer,
               bool first, double lr) {
  at::Tensor dp = grad;
  const double wd = config.weightDecay; // one group, as torch.optim.SGD(params)
  if (wd != 0)
    dp = dp.add(param, wd);
  if (config.momentum != 0) {
    if (first && buffer.defined())
      buffer.copy_(dp); // a preallocated (ZeRO) buffer: the same values as clone()
    else if (first)
      buffer = dp.clone().detach();
    else
      buffer.mul_(config.momentum).add_(dp, 1.0);
    dp = buffer;
  }
  param.add_(dp, -lr);
}

// Adam's state of `param`, made at its first step as PyTorch does; then the
// step count advances. Returns the count after this step.
double Optimizer::advanceAdam(const at::Tensor &param, Slot &s) {
  if (!s.step.defined()) {
    s.step = at::zeros({}, at::TensorOptions().dtype(at::kFloat));
    s.expAvg = at::zeros_like(param, at::MemoryFormat::Preserve);
    s.expAvgSq = at::zeros_like(param, at::MemoryFormat::Preserve);
  }
  s.step.add_(1);
  return s.step.item<float>(); // a host tensor: no device sync
}

void Optimizer::adamStep(const OptimParam &p, Slot &s, double lr, bool decoupled) {
  at::Tensor param = p.param;
  double step = advanceAdam(param, s);
  adamUpdate(config_, param, param.grad(), s.expAvg, s.expAvgSq, step, lr,
             p.decay ? config_.weightDecay : 0.0, decoupled);
}

void Optimizer::sgdStep(const OptimParam &p, Slot &s, double lr) {
  sgdUpdate(config_, p.param, p.param.grad(), s.momentumBuffer, !s.momentumBuffer.defined(), lr);
}

bool Optimizer::usesForeach() const {
  if (config_.foreach != "auto")
    return config_.foreach == "true";
  return std::any_of(params_.begin(), params_.end(),
                     [](const OptimParam &p) { return p.param.is_cuda(); });
}

// torch.optim's _multi_tensor_adam(w) (capturable=False) for one group: the
// step counts stay on the host, their bias corrections become scalar lists.
void adamForeachUpdate(const OptimizerConfig &config, const std::vector<at::Tensor> &params,
                       std::vector<at::Tensor> grads, const std::vector<at::Tensor> &expAvgs,
                       const std::vector<at::Tensor> &expAvgSqs, const std::vector<double> &steps,
                       double lr, double wd, bool decoupled) {
  const double b1 = config.beta1, b2 = config.beta2;
  std::vector<c10::Scalar> stepSizes, bias2Sqrts;
  for (double step : steps) {
    stepSizes.emplace_back(lr / (1 - std::pow(b1, step)) * -1);
#if NNSC_TORCH_AT_LEAST(2, 0)
    bias2Sqrts.emplace_back(std::pow(1 - std::pow(b2, step), 0.5));
#else
    bias2Sqrts.emplace_back(std::sqrt(1 - std::pow(b2, step)));
#endif
  }
  if (decoupled)
    at::_foreach_mul_(params, 1 - lr * wd);
  else if (wd != 0)
    grads = at::_foreach_add(grads, params, wd);
#if NNSC_TORCH_AT_LEAST(2, 0)
  at::_foreach_lerp_(expAvgs, grads, 1 - b1);
#else
  at::_foreach_mul_(expAvgs, b1);
  at::_foreach_add_(expAvgs, grads, 1 - b1);
#endif
  at::_foreach_mul_(expAvgSqs, b2);
  at::_foreach_addcmul_(expAvgSqs, grads, grads, 1 - b2);
  std::vector<at::Tensor> denom = at::_foreach_sqrt(expAvgSqs);
  at::_foreach_div_(denom, bias2Sqrts);
  at::_foreach_add_(denom, config.eps);
  at::_foreach_addcdiv_(params, expAvgs, denom, stepSizes);
}

// torch.optim's _multi_tensor_sgd (no dampening, no nesterov) for one group.
void sgdForeachUpdate(const OptimizerConfig &config, const std::vector<at::Tensor> &params,
                      std::vector<at::Tensor> grads, std::vector<at::Tensor> &buffers, bool first,
                      double lr) {
  if (config.weightDecay != 0)
    grads = at::_foreach_add(grads, params, config.weightDecay);
  if (config.momentum != 0) {
    if (first) {
      for (size_t i = 0; i < buffers.size(); ++i)
        if (buffers[i].defined())
          buffers[i].copy_(grads[i]); // a preallocated (ZeRO) buffer: clone()'s values
        else
          buffers[i] = grads[i].clone().detach();
    } else {
      at::_foreach_mul_(buffers, config.momentum);
      at::_foreach_add_(buffers, grads, 1.0);
    }
    grads = buffers;
  }
  at::_foreach_add_(params, grads, -lr);
}

bool fusedOptimizerAvailable() { return NNSC_TORCH_AT_LEAST(2, 4); }

#if NNSC_TORCH_AT_LEAST(2, 4)
namespace {

// Positions in `params` by device and dtype: torch.optim groups tensors
// so before a fused call, whose kernels take one device and dtype each.
std::vector<std::vector<size_t>> byDeviceAndDtype(const std::vector<at::Tensor> &params) {
  std::map<std::pair<std::string, int>, std::vector<size_t>> groups;
  for (size_t i = 0; i < params.size(); ++i)
    groups[{params[i].device().str(), int(params[i].scalar_type())}].push_back(i);
  std::vector<std::vector<size_t>> out;
  for (auto &[key, members] : groups)
    out.push_back(std::move(members));
  return out;
}

std::vector<at::Tensor> pick(const std::vector<at::Tensor> &all, const std::vector<size_t> &idx) {
  std::vector<at::Tensor> out;
  for (size_t i : idx)
    out.push_back(all[i]);
  return out;
}

// The step counts of one fused call as float32 scalars on `device`, where
// torch.optim's fused path keeps them: views of one tensor, copied there
// once (queued from pinned memory on cuda, not waited for).
std::vector<at::Tensor> stepTensors(const std::vector<double> &steps,
                                    const std::vector<size_t> &idx, at::Device device) {
  std::vector<float> values;
  for (size_t i : idx)
    values.push_back(float(steps[i]));
  at::Tensor t = at::tensor(values, at::TensorOptions().dtype(at::kFloat));
  if (device.is_cuda())
    t = t.pin_memory().to(device, /*non_blocking=*/true);
  return t.unbind(0);
}

} // namespace
#endif

void adamFusedUpdate(const OptimizerConfig &config, const std::vector<at::Tensor> &params,
                     const std::vector<at::Tensor> &grads, const std::vector<at::Tensor> &expAvgs,
                     const std::vector<at::Tensor> &expAvgSqs, const std::vector<double> &steps,
                     double lr, double wd, bool decoupled) {
#if NNSC_TORCH_AT_LEAST(2, 4)
  for (const std::vector<size_t> &idx : byDeviceAndDtype(params)) {
    std::vector<at::Tensor> p = pick(params, idx), g = pick(grads, idx), m = pick(expAvgs, idx),
                            v = pick(expAvgSqs, idx),
                            t = stepTensors(steps, idx, params[idx[0]].device());
    if (decoupled)
      at::_fused_adamw_(p, g, m, v, {}, t, lr, config.beta1, config.beta2, wd, config.eps,
                        /*amsgrad=*/false, /*maximize=*/false);
    else
      at::_fused_adam_(p, g, m, v, {}, t, lr, config.beta1, config.beta2, wd, config.eps,
                       /*amsgrad=*/false, /*maximize=*/false);
  }
#else
  TORCH_CHECK(false, "fused optimizer kernels need LibTorch 2.4 or later; this is ", TORCH_VERSION);
#endif
}

void sgdFusedUpdate(const OptimizerConfig &config, const std::vector<at::Tensor> &params,
                    const std::vector<at::Tensor> &grads, std::vector<at::Tensor> &buffers,
                    bool first, double lr) {
#if NNSC_TORCH_AT_LEAST(2, 4)
  const bool momentum = config.momentum != 0;
  if (momentum && first)
    for (size_t i = 0; i < buffers.size(); ++i)
      if (!buffers[i].defined())
        buffers[i] = at::empty_like(grads[i]);
  for (const std::vector<size_t> &idx : byDeviceAndDtype(params))
    at::_fused_sgd_(pick(params, idx), pick(grads, idx),
                    momentum ? pick(buffers, idx) : std::vector<at::Tensor>{}, config.weightDecay,
                    config.momentum, lr, /*dampening=*/0.0, /*nesterov=*/false,
                    /*maximize=*/false, /*is_first_step=*/momentum && first);
#else
  TORCH_CHECK(false, "fused optimizer kernels need LibTorch 2.4 or later; this is ", TORCH_VERSION);
#endif
}

void Optimizer::adamForeach(const std::vector<size_t> &members, double lr, double wd,
                            bool decoupled) {
  std::vector<at::Tensor> params, grads, avgs, sqs;
  std::vector<double> steps;
  for (size_t k : members) {
    at::Tensor param = params_[k].param;
    Slot &s = slots_[k];
    steps.push_back(advanceAdam(param, s));
    params.push_back(param);
    grads.push_back(param.grad());
    avgs.push_back(s.expAvg);
    sqs.push_back(s.expAvgSq);
  }
  if (usesFused())
    adamFusedUpdate(config_, params, grads, avgs, sqs, steps, lr, wd, decoupled);
  else
    adamForeachUpdate(config_, params, grads, avgs, sqs, steps, lr, wd, decoupled);
}

// A group whose momentum buffers exist for some members only (a parameter
// without a grad at the first step) is two fused calls: one that starts the
// new buffers and one that continues the others.
void Optimizer::sgdFused(const std::vector<size_t> &members, double lr) {
  std::vector<size_t> started, fresh;
  for (size_t k : members)
    (slots_[k].momentumBuffer.defined() ? started : fresh).push_back(k);
  auto update = [&](const std::vector<size_t> &part, bool first) {
    if (part.empty())
      return;
    std::vector<at::Tensor> params, grads, buffers;
    for (size_t k : part) {
      params.push_back(params_[k].param);
      grads.push_back(params_[k].param.grad());
      buffers.push_back(slots_[k].momentumBuffer);
    }
    sgdFusedUpdate(config_, params, grads, buffers, first, lr);
    for (size_t i = 0; i < part.size(); ++i)
      slots_[part[i]].momentumBuffer = buffers[i];
  };
  update(started, false);
  update(fresh, true);
}

void Optimizer::sgdForeach(const std::vector<size_t> &members, double lr) {
  std::vector<at::Tensor> params, grads;
  for (size_t k : members) {
    params.push_back(params_[k].param);
    grads.push_back(params_[k].param.grad());
  }
  if (config_.momentum == 0) {
    std::vector<at::Tensor> none;
    sgdForeachUpdate(config_, params, grads, none, false, lr);
    return;
  }
  // A group whose buffers exist for some members only (a parameter without a
  // grad at the first step) steps those one by one, as torch.optim does.
  bool started = std::all_of(members.begin(), members.end(),
                             [&](size_t k) { return slots_[k].momentumBuffer.defined(); });
  bool none = std::none_of(members.begin(), members.end(),
                           [&](size_t k) { return slots_[k].momentumBuffer.defined(); });
  if (!started && !none) {
    for (size_t k : members)
      sgdStep(params_[k], slots_[k], lr);
    return;
  }
  std::vector<at::Tensor> buffers;
  for (size_t k : members)
    buffers.push_back(slots_[k].momentumBuffer);
  sgdForeachUpdate(config_, params, grads, buffers, none, lr);
  for (size_t i = 0; i < members.size(); ++i)
    slots_[members[i]].momentumBuffer = buffers[i];
}

void Optimizer::step(double lr) {
  at::NoGradGuard noGrad;
  if (usesForeach() || usesFused()) {
    // Groups as torch.optim forms them: device, dtype, and (Adam) weight decay.
    std::map<std::tuple<std::string, int, bool>, std::vector<size_t>> groups;
    for (size_t i = 0; i < params_.size(); ++i) {
      const at::Tensor &p = params_[i].param;
      if (p.grad().defined())
        groups[{p.device().str(), int(p.scalar_type()), params_[i].decay}].push_back(i);
    }
    for (const auto &[key, members] : groups) {
      if (config_.name == "sgd" && usesFused())
        sgdFused(members, lr);
      else if (config_.name == "sgd")
        sgdForeach(members, lr);
      else
        adamForeach(members, lr, std::get<2>(key) ? config_.weightDecay : 0.0,
                    config_.name == "adamw");
    }
    return;
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].param.grad().defined())
      continue;
    if (config_.name == "sgd")
      sgdStep(params_[i], slots_[i], lr);
    else
      adamStep(params_[i], slots_[i], lr, config_.name == "adamw");
  }
}

void Optimizer::zeroGrad() {
  if (usesForeach()) {
    std::vector<at::Tensor> grads;
    for (auto &p : params_)
      if (p.param.grad().defined())
        grads.push_back(p.param.mutable_grad().detach());
    if (!grads.empty()) // none here: every parameter is a ZeRO optimizer's
      at::_foreach_zero_(grads);
    return;
  }
  for (auto &p : params_) {
    at::Tensor g = p.param.mutable_grad();
    if (g.defined())
      g.detach().zero_();
  }
}

std::map<std::string, at::Tensor> Optimizer::state() const {
  std::map<std::string, at::Tensor> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Slot &s = slots_[i];
    const std::string &n = params_[i].name;
    if (s.step.defined()) {
      out[n + "/step"] = s.step;
      out[n + "/exp_avg"] = s.expAvg;
      out[n + "/exp_avg_sq"] = s.expAvgSq;
    }
    if (s.momentumBuffer.defined())
      out[n + "/momentum_buffer"] = s.momentumBuffer;
  }
  return out;
}

Status Optimizer::loadState(const std::map<std::string, at::Tensor> &state,
                            const std::string &from) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < params_.size(); ++i)
    index[params_[i].name] = i;
  for (const auto &[key, value] : state) {
    size_t slash = key.rfind('/');
    auto it = index.find(key.substr(0, slash));
    if (slash == std::string::npos || it == index.end())
      return errorf("{}: error: optimizer state '{}' names no parameter of this rank", from, key);
    const at::Tensor &param = params_[it->second].param;
    std::string field = key.substr(slash + 1);
    at::Tensor v = value.to(param.device());
    Slot &s = slots_[it->second];
    if (field != "step" && v.sizes() != param.sizes())
      return errorf("{}: error: optimizer state '{}' has shape {}; the parameter has {}", from, key,
                    fmt::join(v.sizes(), "x"), fmt::join(param.sizes(), "x"));
    if (field == "step") // on the host, as torch.optim keeps it: read every update
      s.step = value.to(at::kCPU, at::kFloat).reshape({}).clone();
    else if (field == "exp_avg")
      s.expAvg = v;
    else if (field == "exp_avg_sq")
      s.expAvgSq = v;
    else if (field == "momentum_buffer")
      s.momentumBuffer = v;
    else
      return errorf("{}: error: unknown optimizer state '{}'", from, key);
  }
  return Status::ok();
}

Expected<at::Tensor> clipGradNorm(const std::vector<at::Tensor> &params,
                                  const std::vector<int> &replicas, double maxNorm,
                                  const GradNormScope &scope) {
  at::NoGradGuard noGrad;
  std::vector<at::Tensor> grads, norms;
  std::vector<int> copies;
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].grad().defined()) {
      grads.push_back(params[i].grad().detach());
      if (!scope.foreach)
        norms.push_back(l2Norm(grads.back()));
      copies.push_back(replicas[i] > 0 ? replicas[i] : 1);
    }
  if (scope.foreach && !grads.empty())
    norms = at::_foreach_norm(grads, 2);
  at::Tensor total;
  if (!scope.world) {
    total = norms.empty() ? at::zeros({}) : l2Norm(at::stack(norms));
  } else {
    // One device reduction, no host read per parameter: the sum of the
    // squared norms (each over its replicas) stays on the gradients' device,
    // where NCCL wants it.
    at::Device device = grads.empty() ? scope.device : grads[0].device();
    at::Tensor sq = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(device));
    if (!norms.empty()) {
      at::Tensor n = at::stack(norms).to(at::kDouble);
      std::vector<double> count(copies.begin(), copies.end());
      at::Tensor c = at::tensor(count, at::TensorOptions().dtype(at::kDouble));
      // From pinned memory the copy is queued, not waited for (a copy from
      // pageable memory synchronises the GPU every step).
      c = device.is_cuda() ? c.pin_memory().to(device, /*non_blocking=*/true) : c.to(device);
      sq = (n * n / c).sum().reshape({1});
    }
    std::vector<at::Tensor> bufs{sq};
    NNSC_RETURN_IF_ERROR(scope.world->allReduce(bufs)->wait());
    total = (bufs[0] / double(scope.dpSize)).sqrt().to(at::kFloat).reshape({});
  }
  if (maxNorm > 0 && !grads.empty()) {
    at::Tensor coef = (total + 1e-6).reciprocal() * maxNorm;
    coef = at::clamp_max(coef, 1.0).to(grads[0].device());
#if NNSC_TORCH_AT_LEAST(2, 1)
    if (scope.foreach) {
      at::_foreach_mul_(grads, coef);
      return total;
    }
#endif
    for (auto &g : grads)
      g.mul_(coef.to(g.device()));
  }
  return total;
}

} // namespace nnsc::rt
