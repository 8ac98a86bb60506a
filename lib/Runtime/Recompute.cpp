// nnsc.recompute (Recompute.h): a group function run without its activations,
// and run again in backward.
#include "nnsc/Runtime/Recompute.h"

#include <torch/torch.h>

#include <fmt/format.h>

#include "nnsc/Runtime/Program.h"
#include "nnsc/Runtime/RngStreams.h"
#include "nnsc/Runtime/Zero3.h"

namespace nnsc::rt {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The calling program, kept in the autograd context for the backward.
struct ProgramHolder : torch::CustomClassHolder {
  explicit ProgramHolder(const Program &p) : program(p) {}
  Program program;
};

// ZeRO-3 (Zero3.h): the function's parameters whole for the scope's
// lifetime (`backwardFollows`: a training forward, whose release may keep
// them for the re-run). Outputs that are views of them are cloned before the
// release.
class GatheredUnit {
public:
  GatheredUnit(const std::string &function, Zero3Params::Pass pass, bool backwardFollows = false)
      : params_(Zero3Params::active()), function_(function), backwardFollows_(backwardFollows) {
    if (!params_)
      return;
    Status st = params_->gather(function, pass);
    TORCH_CHECK(st.isOk(), fmt::format("nnsc.recompute(\"{}\"): {}", function, st.message()));
  }
  ~GatheredUnit() {
    if (params_)
      params_->release(function_, backwardFollows_);
  }
  GatheredUnit(const GatheredUnit &) = delete;
  GatheredUnit &operator=(const GatheredUnit &) = delete;
  void keep(std::vector<at::Tensor> &outs) const {
    for (at::Tensor &out : outs)
      if (params_ && params_->aliases(out))
        out = out.clone();
  }

private:
  Zero3Params *params_;
  std::string function_;
  bool backwardFollows_;
};

std::vector<at::Tensor> runGroup(const Program &program, const std::string &function,
                                 const std::vector<at::Tensor> &inputs, const c10::Device &device) {
  std::vector<c10::IValue> args(inputs.begin(), inputs.end());
  args.emplace_back(device);
  auto outs = program.run(function, std::move(args), Program::currentMode());
  TORCH_CHECK(outs.isOk(),
              fmt::format("nnsc.recompute(\"{}\"): {}", function, outs.status().message()));
  return outs.take();
}

const Program &callingProgram(const std::string &function) {
  const Program *program = Program::current();
  TORCH_CHECK(program,
              fmt::format("nnsc.recompute(\"{}\"): called outside a rank program", function));
  return *program;
}

// Restores the generator state and forward index it was made with, then puts
// back the ones it found.
class RngReplay {
public:
  explicit RngReplay(const RngSnapshot &forward) : now_(rngSnapshot()) { rngRestore(forward); }
  ~RngReplay() { rngRestore(now_); }
  RngReplay(const RngReplay &) = delete;
  RngReplay &operator=(const RngReplay &) = delete;

private:
  RngSnapshot now_;
};

struct RecomputeFn : torch::autograd::Function<RecomputeFn> {
  static variable_list forward(AutogradContext *ctx, const std::string &function,
                               at::TensorList inputs, c10::Device device) {
    const Program &program = callingProgram(function);
    RngSnapshot rng = rngSnapshot();
    std::vector<at::Tensor> outs;
    {
      at::NoGradGuard noGrad;
      GatheredUnit unit(function, Zero3Params::Pass::Forward, /*backwardFollows=*/true);
      outs = runGroup(program, function, inputs.vec(), device);
      unit.keep(outs);
    }
    // Inputs are kept without autograd's version counter: the program never
    // writes a group's inputs, and buffers a forward updates in place at its
    // end are only read by batch norm in training (which ignores them).
    ctx->saved_data["inputs"] = c10::List<at::Tensor>(inputs.vec());
    ctx->saved_data["function"] = function;
    ctx->saved_data["device"] = device;
    ctx->saved_data["rng_state"] = rng.state;
    ctx->saved_data["rng_forward"] = rng.forward;
    ctx->saved_data["program"] =
        c10::IValue::make_capsule(c10::make_intrusive<ProgramHolder>(program));
    for (at::Tensor &out : outs) {
      TORCH_CHECK(out.defined(),
                  fmt::format("nnsc.recompute(\"{}\"): an output is None", function));
      if (out.is_view()) // a view of an input or of a dropped intermediate
        out = out.clone();
      if (!at::isFloatingType(out.scalar_type()) && !at::isComplexType(out.scalar_type()))
        ctx->mark_non_differentiable({out});
    }
    return outs;
  }

  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    std::string function = ctx->saved_data["function"].toStringRef();
    c10::Device device = ctx->saved_data["device"].toDevice();
    auto holder = ctx->saved_data["program"].toCapsule();
    const Program &program = static_cast<ProgramHolder *>(holder.get())->program;
    std::vector<at::Tensor> saved = ctx->saved_data["inputs"].toTensorVector();
    std::vector<at::Tensor> inputs, wanted;
    std::vector<size_t> wantedAt;
    for (size_t i = 0; i < saved.size(); ++i) {
      at::Tensor x = saved[i].detach();
      if (saved[i].requires_grad()) {
        x.requires_grad_(true);
        wanted.push_back(x);
        wantedAt.push_back(i);
      }
      inputs.push_back(x);
    }
    // ZeRO-3: the parameters whole again until their gradients are out.
    GatheredUnit unit(function, Zero3Params::Pass::Backward);
    std::vector<at::Tensor> outs;
    {
      RngReplay replay(
          {ctx->saved_data["rng_state"].toTensor(), ctx->saved_data["rng_forward"].toInt()});
      at::AutoGradMode grad(true);
      outs = runGroup(program, function, inputs, device);
    }
    TORCH_CHECK(
        outs.size() == grads.size(),
        fmt::format("nnsc.recompute(\"{}\"): the re-run returned {} tensors, the forward {}",
                    function, outs.size(), grads.size()));
    variable_list roots, rootGrads;
    for (size_t i = 0; i < outs.size(); ++i)
      if (grads[i].defined() && outs[i].requires_grad()) {
        roots.push_back(outs[i]);
        rootGrads.push_back(grads[i]);
      }
    variable_list result(saved.size() + 2); // function name, inputs..., device
    if (roots.empty() || wanted.empty())
      return result;
    variable_list g = torch::autograd::grad(roots, wanted, rootGrads, /*retain_graph=*/false,
                                            /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t k = 0; k < wantedAt.size(); ++k)
      result[wantedAt[k] + 1] = g[k];
    return result;
  }
};

std::vector<at::Tensor> recomputeOp(const std::string &function, at::TensorList inputs,
                                    c10::Device device) {
  const Program &program = callingProgram(function);
  if (!at::GradMode::is_enabled()) { // validation: nothing to keep
    GatheredUnit unit(function, Zero3Params::Pass::Forward);
    std::vector<at::Tensor> outs = runGroup(program, function, inputs.vec(), device);
    unit.keep(outs);
    return outs;
  }
  return RecomputeFn::apply(function, inputs, device);
}

} // namespace

void linkRecomputeOp() {}

} // namespace nnsc::rt

TORCH_LIBRARY_FRAGMENT(nnsc, m) {
  m.def("recompute(str function, Tensor[] inputs, Device device) -> Tensor[]");
  m.impl("recompute", c10::DispatchKey::CompositeImplicitAutograd, TORCH_FN(nnsc::rt::recomputeOp));
}
