#pragma once
/// A rank program: the TorchScript (Python-syntax) source that nnsc-codegen
/// writes as rank{r}.py, compiled at run time. In the source, `torch.X` names
/// the ATen builtin aten::X (`torch.float32` and the other dtypes and memory
/// formats are constants, `torch.ops.ns.X` is ns::X), `math.X` is aten::X or
/// a constant (`math.pi`), and `ns.X` is the operator ns::X for any
/// registered namespace: `nnsc.X` the collectives of NnscOps.cpp (e.g.
/// `nnsc.all_reduce(x, group=3)`), or a user's TORCH_LIBRARY ops once their
/// library is loaded.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>

#include "nnsc/Support/Status.h"

namespace torch::jit {
struct CompilationUnit;
struct Graph;
struct Node;
struct Value;
} // namespace torch::jit

namespace nnsc::rt {

class Program {
public:
  /// How run() executes a function. Train: as written (the program is
  /// traced from a model in train mode). Eval: as model.eval() would: every
  /// dropout (dropout, feature_dropout, alpha_dropout, feature_alpha_dropout,
  /// native_dropout, in place or not) passes its input through and
  /// batch_norm normalizes with its running statistics, and the program's
  /// writes into its arguments (`p.copy_(...)`: the buffer updates of a
  /// traced train-mode step) are left out, in the function and in
  /// everything it calls (inlined, and nnsc.recompute's groups).
  enum class Mode { Train, Eval };

  /// Compiles every function in `source`. `fileName` labels messages: a
  /// compile error reads "rank0.py:7: error: undefined value foo" followed by
  /// TorchScript's excerpt of the offending line.
  static Expected<Program> compile(const std::string &source, const std::string &fileName);
  /// Reads `path` and compiles it (messages name `path`).
  static Expected<Program> load(const std::string &path);

  /// The functions defined, in source order.
  const std::vector<std::string> &functions() const { return functions_; }
  bool hasFunction(const std::string &name) const;
  /// The parameter names of `function`, in order (to bind shards and inputs).
  Expected<std::vector<std::string>> argumentNames(const std::string &function) const;

  /// Calls `function` with `args` (grad mode as the caller set it). The
  /// result is flattened in order: tuples and lists recursively, a tensor as
  /// itself, None as an undefined tensor, a number as a 0-dim tensor. A
  /// failure (shape mismatch, a collective's error) is returned with the file,
  /// the line being executed and the function name.
  Expected<std::vector<at::Tensor>> run(const std::string &function, std::vector<c10::IValue> args,
                                        Mode mode = Mode::Train) const;
  /// run() of the entry function: the one named by setEntry, else the only
  /// function of the program.
  Expected<std::vector<at::Tensor>> run(std::vector<c10::IValue> args,
                                        Mode mode = Mode::Train) const;
  /// Chooses the function run(args) calls; an error if it is not defined.
  Status setEntry(const std::string &function);

  /// Mixed precision's float32 losses (docs/trainer-config.md, as Megatron's
  /// `logits.float()` before its cross-entropy and autocast's float32 ops):
  /// every tensor input of a loss operator (cross_entropy_loss, the nll_loss
  /// family, mse/l1/smooth_l1/huber, binary_cross_entropy (with logits),
  /// soft_margin, kl_div), and of a log_softmax whose every use is one, is
  /// passed through aten::_autocast_to_full_precision: a bf16 or fp16 tensor
  /// becomes float32 (and its gradient flows back in its own dtype), any
  /// other tensor is itself. Rewrites every function in place; call it before
  /// the first run. Returns how many operators now compute in float32.
  int computeLossesInFloat32();
  /// Mixed precision's 16-bit matmuls (as autocast's lower-precision ops,
  /// Ops/MixedPrecisionOps.h: linear, the matmul family, convolutions,
  /// prelu, scaled_dot_product_attention): every tensor input of those
  /// operators is passed through aten::_autocast_to_reduced_precision, so a
  /// float32 tensor becomes `low` (its gradient flows back in float32) and
  /// anything else is itself. A float32 tensor reaches a matmul where the
  /// model computes in float32 on purpose (an RMSNorm's x.float(), a float32
  /// mask added to the scores); without this the matmul fails on mixed
  /// dtypes. Rewrites every function in place; call it before the first run.
  /// Returns how many operators it changed.
  int computeMatmulsIn(at::ScalarType low);
  /// precision.recipe autocast's float32 side: every tensor input of the
  /// operators CUDA autocast runs in float32 (Ops/MixedPrecisionOps.h:
  /// layer_norm, softmax, log_softmax, exp, sum, the losses, ...) is passed
  /// through aten::_autocast_to_full_precision. With computeMatmulsIn this is
  /// torch.autocast's numerics on float32 weights. Returns how many operators
  /// it changed.
  int computeAutocastFloat32Ops();
  /// The program whose run() is executing on this thread (the innermost
  /// one), or nullptr: how nnsc.recompute finds the group functions of the
  /// program that calls it.
  static const Program *current();
  /// The mode of the innermost run() executing on this thread (Train when
  /// none is).
  static Mode currentMode();

private:
  Program() = default;
  /// Inserts `cast` before every tensor input of the nodes `pick` selects in
  /// every function; `extra` makes the cast's other arguments in a graph.
  int castFunctionInputs(
      const std::function<bool(const torch::jit::Node *)> &pick, c10::Symbol cast,
      const std::function<std::vector<torch::jit::Value *>(torch::jit::Graph &)> &extra);
  Status missing(const std::string &function) const;
  /// The Eval form of `function`, made on first use.
  torch::jit::Function &evalForm(const std::string &function) const;

  std::shared_ptr<torch::jit::CompilationUnit> unit_;
  std::string fileName_;
  std::vector<std::string> functions_;
  std::string entry_;
  struct EvalForms;
  std::shared_ptr<EvalForms> evalForms_;
};

} // namespace nnsc::rt
