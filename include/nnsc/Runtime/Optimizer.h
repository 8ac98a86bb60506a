#pragma once
/// Optimizers over a rank's local shards, written out so that later ZeRO can
/// shard their states. The updates follow PyTorch 1.13's single-tensor
/// (foreach=False) code paths of torch.optim.AdamW, Adam and SGD operation
/// for operation, so results match PyTorch bit for bit:
///
///   AdamW: step += 1; p *= 1 - lr*wd; m = m*b1 + g*(1-b1); v = v*b2 + g*g*(1-b2);
///          p += -(lr / (1 - b1^step)) * m / (sqrt(v) / sqrt(1 - b2^step) + eps)
///          (wd only on shards of tensors with >= 2 dims, as nanoGPT's groups)
///   Adam:  as AdamW but g = g + wd*p instead of the decoupled decay (same shards)
///   SGD:   g = g + wd*p (all shards); buf = g (first step) or buf*momentum + g;
///          p += -lr*buf
///
/// Shards whose grad is undefined are skipped, as PyTorch skips p.grad None.
///
/// With `foreach` the same operations run as multi-tensor ATen ops
/// (torch._foreach_*) over each group of parameters that share a device, a
/// dtype and a weight decay, as torch.optim's foreach=True does: a handful of
/// kernels per group instead of several per tensor. On cpu those ops loop
/// over the tensors with the single-tensor kernels, so both paths agree bit
/// for bit there (OptimizerTest checks it).
///
/// With `fused` (LibTorch 2.4+) PyTorch's fused kernels do the update, as
/// torch.optim's fused=True: the same formulas in one kernel per group,
/// equal to torch.optim's fused path bit for bit and to the others up to
/// rounding (the kernels compute the bias corrections themselves).

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "nnsc/Runtime/Comm.h"
#include "nnsc/Runtime/TrainerConfig.h"

namespace nnsc::rt {

/// The element-wise updates above on tensors of one shape (whole parameters
/// or equal ranges of a parameter, its grad and its states, as ZeRO-1 uses
/// them). `step` is the parameter's step count after this step's increment;
/// `wd` the weight decay that applies to it.
void adamUpdate(const OptimizerConfig &config, at::Tensor param, at::Tensor grad,
                at::Tensor &expAvg, at::Tensor &expAvgSq, double step, double lr, double wd,
                bool decoupled);
/// SGD; `buffer` is the momentum buffer, `first` whether this is its first
/// step (then it becomes a copy of the grad).
void sgdUpdate(const OptimizerConfig &config, at::Tensor param, at::Tensor grad, at::Tensor &buffer,
               bool first, double lr);

/// The same updates as multi-tensor ops (torch.optim's _multi_tensor_adam(w)
/// and _multi_tensor_sgd) over lists of tensors on one device, of one dtype
/// and one weight decay: `steps[i]` is tensor i's step count after this
/// step's increment. `buffers` as sgdUpdate's, all of them `first` or none.
void adamForeachUpdate(const OptimizerConfig &config, const std::vector<at::Tensor> &params,
                       std::vector<at::Tensor> grads, const std::vector<at::Tensor> &expAvgs,
                       const std::vector<at::Tensor> &expAvgSqs, const std::vector<double> &steps,
                       double lr, double wd, bool decoupled);
void sgdForeachUpdate(const OptimizerConfig &config, const std::vector<at::Tensor> &params,
                      std::vector<at::Tensor> grads, std::vector<at::Tensor> &buffers, bool first,
                      double lr);

/// Whether this LibTorch has the fused kernels the two functions below call
/// (torch._fused_adam_, _fused_adamw_ and _fused_sgd_ on cpu and cuda: 2.4+).
bool fusedOptimizerAvailable();

/// The same updates as PyTorch's fused kernels (torch.optim's fused=True):
/// one kernel call per device and dtype among `params` does the whole
/// update, each tensor read once. Lists as the foreach functions'; the step
/// counts reach the kernel as float32 scalars on the parameters' device (one
/// copy, from pinned memory on cuda). With SGD momentum and `first`, an
/// undefined buffer is allocated (the kernel copies the gradient into it).
/// Requires fusedOptimizerAvailable().
void adamFusedUpdate(const OptimizerConfig &config, const std::vector<at::Tensor> &params,
                     const std::vector<at::Tensor> &grads, const std::vector<at::Tensor> &expAvgs,
                     const std::vector<at::Tensor> &expAvgSqs, const std::vector<double> &steps,
                     double lr, double wd, bool decoupled);
void sgdFusedUpdate(const OptimizerConfig &config, const std::vector<at::Tensor> &params,
                    const std::vector<at::Tensor> &grads, std::vector<at::Tensor> &buffers,
                    bool first, double lr);

/// One trainable tensor: its (unique) name, the leaf, and whether Adam(W)'s
/// weight decay applies (the full tensor has >= 2 dims; SGD ignores it).
struct OptimParam {
  std::string name;
  at::Tensor param;
  bool decay = true;
};

class Optimizer {
public:
  Optimizer(const OptimizerConfig &config, std::vector<OptimParam> params);

  /// One update of every parameter with a defined grad, at learning rate `lr`.
  void step(double lr);
  /// Zeroes the grads in place (kept allocated; same values as set-to-none).
  void zeroGrad();

  /// The state tensors, keyed "<name>/exp_avg", "<name>/exp_avg_sq",
  /// "<name>/step" (float32 scalar) and "<name>/momentum_buffer".
  std::map<std::string, at::Tensor> state() const;
  /// Restores state() of a previous run; every key must name a parameter.
  Status loadState(const std::map<std::string, at::Tensor> &state, const std::string &from);

  const std::vector<OptimParam> &params() const { return params_; }
  /// Whether zeroGrad() (and step(), unless usesFused()) takes the
  /// multi-tensor path: config foreach true, or auto with parameters on cuda.
  bool usesForeach() const;
  /// Whether step() calls the fused kernels (config fused true).
  bool usesFused() const { return config_.fused == "true"; }

private:
  struct Slot {
    at::Tensor expAvg, expAvgSq, step, momentumBuffer;
  };
  static double advanceAdam(const at::Tensor &param, Slot &s);
  void adamStep(const OptimParam &p, Slot &s, double lr, bool decoupled);
  void sgdStep(const OptimParam &p, Slot &s, double lr);
  void adamForeach(const std::vector<size_t> &members, double lr, double wd, bool decoupled);
  void sgdForeach(const std::vector<size_t> &members, double lr);
  void sgdFused(const std::vector<size_t> &members, double lr);

  OptimizerConfig config_;
  std::vector<OptimParam> params_;
  std::vector<Slot> slots_;
};

/// How the global gradient norm spans ranks.
struct GradNormScope {
  /// nullptr, or the world group when one model copy spans several ranks
  /// (plan_ngpus > 1): then squares are summed over all ranks, each shard
  /// divided by its replica count, and the sum divided by dpSize.
  CommBackend *world = nullptr;
  int64_t dpSize = 1;
  at::Device device{at::kCPU}; ///< where the reduction runs when a rank has no gradient
  /// clip_grad_norm_'s foreach path (PyTorch 2.x takes it on cuda): the
  /// norms in one _foreach_norm, the scaling in one _foreach_mul_ (2.1+; a
  /// loop before). Equal to the per-tensor path up to the norm kernels'
  /// summation order.
  bool foreach = false;
};

/// Global L2 norm of the grads of `params` (replicas[i] copies of each in a
/// model copy) and, when maxNorm > 0, scaling as torch.nn.utils.clip_grad_norm_:
/// coef = min(1, max_norm / (norm + 1e-6)) multiplies every grad. With one
/// rank per model copy the norm is torch.norm(torch.stack(norms)) exactly.
/// Returns the norm as a float32 scalar on the gradients' device, unread: a
/// GPU step clips without waiting for its kernels, and the trainer reads
/// the norms of the steps between two log lines at once.
Expected<at::Tensor> clipGradNorm(const std::vector<at::Tensor> &params,
                                  const std::vector<int> &replicas, double maxNorm,
                                  const GradNormScope &scope);

} // namespace nnsc::rt
