#include "MetaStandIns.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/script.h>

namespace nnsc::trace {

namespace {

using TensorMap = std::map<const c10::TensorImpl *, at::Tensor>;

// A CPU stand-in for a meta tensor: a broadcast zero (no memory), or a real
// zero tensor when the operator writes into it (in-place and out= forms).
at::Tensor standIn(const at::Tensor &t, bool written, TensorMap &back) {
  at::TensorOptions cpu = t.options().device(at::kCPU);
  at::Tensor s = written ? at::zeros(t.sizes(), cpu) : at::zeros({}, cpu).expand(t.sizes());
  back[s.unsafeGetTensorImpl()] = t;
  return s;
}

c10::IValue toStandIn(const c10::IValue &v, bool written, TensorMap &back) {
  if (v.isTensor())
    return v.toTensor().is_meta() ? standIn(v.toTensor(), written, back) : v;
  if (v.isTensorList()) {
    c10::List<at::Tensor> list;
    for (const at::Tensor &t : v.toTensorVector())
      list.push_back(t.is_meta() ? standIn(t, written, back) : t);
    return list;
  }
  if (v.isList()) { // e.g. Tensor?[] of aten::index
    c10::impl::GenericList list(v.toList().elementType());
    for (const c10::IValue &e : v.toListRef())
      list.push_back(toStandIn(e, written, back));
    return list;
  }
  if (v.isDevice() && v.toDevice().is_meta())
    return c10::Device(c10::kCPU);
  return v;
}

// Results go back to meta: an input the op wrote into is that input again, a
// fresh tensor becomes an empty meta tensor of its shape and dtype. 0-dim CPU
// results stay as they are (CPU scalars mix with tensors of any device).
c10::IValue toMetaResult(const c10::IValue &v, const TensorMap &back) {
  if (v.isTensor()) {
    const at::Tensor &t = v.toTensor();
    if (auto it = back.find(t.unsafeGetTensorImpl()); it != back.end()) {
      // An out= kernel resizes its output (functional forms pass an empty
      // {0} one): the meta tensor takes the shape the CPU kernel gave it.
      at::Tensor meta = it->second;
      if (meta.sizes() != t.sizes())
        meta.resize_(t.sizes());
      return meta;
    }
    if (t.is_meta() || t.dim() == 0)
      return t;
    return at::empty(t.sizes(), t.options().device(at::kMeta));
  }
  if (v.isTensorList()) {
    c10::List<at::Tensor> list;
    for (const at::Tensor &t : v.toTensorVector())
      list.push_back(toMetaResult(t, back).toTensor());
    return list;
  }
  return v;
}

bool writesArgument(const c10::FunctionSchema &schema, size_t i) {
  const auto &args = schema.arguments();
  return i < args.size() && args[i].alias_info() && args[i].alias_info()->isWrite();
}

// The kernel itself: the dispatcher calls it for an operator with meta
// arguments whenever that operator has no Meta kernel of its own.
void metaStandInKernel(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
  const c10::FunctionSchema &schema = op.schema();
  static const bool debug = std::getenv("NNSC_DEBUG_META") != nullptr;
  if (debug)
    std::fprintf(stderr, "nnsc-trace: meta stand-in runs %s\n",
                 toString(op.operator_name()).c_str());
  size_t n = schema.arguments().size();
  TensorMap back;
  auto first = stack->end() - static_cast<std::ptrdiff_t>(n);
  for (size_t i = 0; i < n; ++i)
    first[i] = toStandIn(first[i], writesArgument(schema, i), back);
  op.callBoxed(stack);
  size_t results = schema.returns().size();
  for (auto it = stack->end() - static_cast<std::ptrdiff_t>(results); it != stack->end(); ++it)
    *it = toMetaResult(*it, back);
}

// aten::convolution_overrideable is what aten::_convolution calls for a
// device it has no backend for (meta in LibTorch 1.13); its schema is
// aten::convolution's, so the CPU convolution runs on the stand-ins.
void metaConvolutionKernel(const c10::OperatorHandle &, torch::jit::Stack *stack) {
  static const c10::OperatorHandle conv =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution", "");
  metaStandInKernel(conv, stack);
}

// aten::one_hot refuses meta tensors (its class count may come from the
// data); with an explicit num_classes the result's shape is known.
at::Tensor metaOneHot(const at::Tensor &self, int64_t numClasses) {
  TORCH_CHECK(numClasses >= 0,
              "one_hot on the meta device needs an explicit num_classes; trace with --device cpu");
  std::vector<int64_t> shape = self.sizes().vec();
  shape.push_back(numClasses);
  return at::empty(shape, self.options().dtype(at::kLong));
}

// aten::where, shapes only: torch.where and SDPA's math path (which a meta
// trace takes) call it on [B, H, L, S] scores, which a stand-in would
// materialize on the CPU (8 GiB a layer for Llama-3-8B at 8K tokens). 1.13
// implements where.self on the CPU, 2.x through where.self_out.
std::vector<int64_t> whereShape(const at::Tensor &condition, const at::Tensor &self,
                                const at::Tensor &other) {
  return at::infer_size(at::infer_size(condition.sizes(), self.sizes()), other.sizes());
}

at::Tensor metaWhere(const at::Tensor &condition, const at::Tensor &self, const at::Tensor &other) {
  return at::empty(whereShape(condition, self, other),
                   self.options().dtype(at::result_type(self, other)).device(at::kMeta));
}

at::Tensor &metaWhereOut(const at::Tensor &condition, const at::Tensor &self,
                         const at::Tensor &other, at::Tensor &out) {
  out.resize_(whereShape(condition, self, other));
  return out;
}

// aten::repeat_interleave.self_int is composite: it builds a repeats tensor
// and sizes its result from that tensor's data, which meta tensors lack (the
// result came out empty). With an int count the shape is known.
void metaRepeatInterleaveKernel(const c10::OperatorHandle &, torch::jit::Stack *stack) {
  c10::IValue outputSize = torch::jit::pop(*stack);
  c10::IValue dim = torch::jit::pop(*stack);
  int64_t repeats = torch::jit::pop(*stack).toInt();
  at::Tensor self = torch::jit::pop(*stack).toTensor();
  std::vector<int64_t> shape = self.sizes().vec();
  if (dim.isNone()) {
    shape = {self.numel() * repeats};
  } else {
    int64_t d = dim.toInt() < 0 ? dim.toInt() + self.dim() : dim.toInt();
    shape.at(static_cast<size_t>(d)) *= repeats;
  }
  if (!outputSize.isNone() && !dim.isNone())
    shape.at(static_cast<size_t>(dim.toInt() < 0 ? dim.toInt() + self.dim() : dim.toInt())) =
        outputSize.toInt();
  torch::jit::push(*stack, at::empty(shape, self.options()));
}

bool needsStandIn(const c10::OperatorHandle &op) {
  using c10::DispatchKey;
  if (!op.hasSchema() || op.hasKernelForDispatchKey(DispatchKey::Meta))
    return false;
  // Composite kernels run on meta by calling other operators.
  for (DispatchKey k :
       {DispatchKey::CompositeImplicitAutograd, DispatchKey::CompositeExplicitAutograd,
        DispatchKey::CompositeExplicitAutogradNonFunctional})
    if (op.hasKernelForDispatchKey(k))
      return false;
  return op.hasKernelForDispatchKey(DispatchKey::CPU);
}

struct Registry {
  std::mutex mutex;
  std::set<std::string> covered;                                     // "name.overload"
  std::vector<std::unique_ptr<c10::RegistrationHandleRAII>> handles; // kept for the process
};

Registry &registry() {
  static auto *r = new Registry; // never destroyed: kernels stay registered until exit
  return *r;
}

// Kernels of nnsc's own for operators the generic stand-in cannot serve (or
// serves at too high a cost); each only where the LibTorch has no Meta kernel.
size_t installOverrides(Registry &r, c10::Dispatcher &dispatcher) {
  struct Override {
    const char *name;
    const char *overload;
    c10::KernelFunction kernel;
  };
  const Override overrides[] = {
      {"aten::convolution_overrideable", "",
       c10::KernelFunction::makeFromBoxedFunction<&metaConvolutionKernel>()},
      {"aten::one_hot", "", c10::KernelFunction::makeFromUnboxedRuntimeFunction(&metaOneHot)},
      {"aten::where", "self", c10::KernelFunction::makeFromUnboxedRuntimeFunction(&metaWhere)},
      {"aten::repeat_interleave", "self_int",
       c10::KernelFunction::makeFromBoxedFunction<&metaRepeatInterleaveKernel>()},
      {"aten::where", "self_out",
       c10::KernelFunction::makeFromUnboxedRuntimeFunction(&metaWhereOut)},
  };
  size_t added = 0;
  for (const Override &o : overrides) {
    c10::OperatorName name(o.name, o.overload);
    std::string key = name.name + "." + name.overload_name;
    auto op = dispatcher.findOp(name);
    if (r.covered.count(key) || !op || op->hasKernelForDispatchKey(c10::DispatchKey::Meta))
      continue;
    r.handles.push_back(std::make_unique<c10::RegistrationHandleRAII>(
        dispatcher.registerImpl(name, c10::DispatchKey::Meta, o.kernel, {}, nullptr,
                                "nnsc meta override (lib/Trace/MetaStandIns.cpp)")));
    r.covered.insert(key);
    ++added;
  }
  return added;
}

} // namespace

size_t installMetaStandIns() {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  c10::Dispatcher &dispatcher = c10::Dispatcher::singleton();
  size_t added = installOverrides(r, dispatcher);
  for (const c10::OperatorName &name : dispatcher.getAllOpNames()) {
    std::string key = name.name + "." + name.overload_name;
    if (r.covered.count(key))
      continue;
    auto op = dispatcher.findOp(name);
    if (!op || !needsStandIn(*op))
      continue;
    r.handles.push_back(std::make_unique<c10::RegistrationHandleRAII>(
        dispatcher.registerImpl(name, c10::DispatchKey::Meta,
                                c10::KernelFunction::makeFromBoxedFunction<&metaStandInKernel>(),
                                {}, nullptr, "nnsc meta stand-in (lib/Trace/MetaStandIns.cpp)")));
    r.covered.insert(key);
    ++added;
  }
  return added;
}

size_t metaStandInCount() {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.covered.size();
}

} // namespace nnsc::trace
