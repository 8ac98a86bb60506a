// Turning one executed TorchScript operator into an IR node: which calls are
// recorded, how their arguments are written, in-place ops in SSA form and
// no-op elimination.
#include "GraphExecutor.h"

#include <fmt/format.h>

namespace nnsc::trace {

using torch::jit::Node;

namespace {

bool isTensorLike(const c10::IValue &v) {
  if (v.isTensor())
    return true;
  if (v.isTensorList())
    return true;
  if (v.isList()) {
    for (const auto &e : v.toListRef())
      if (e.isTensor())
        return true;
  }
  return false;
}

void forEachTensor(const c10::IValue &v, const std::function<void(const at::Tensor &)> &fn) {
  if (v.isTensor()) {
    fn(v.toTensor());
  } else if (v.isList()) {
    for (const auto &e : v.toListRef())
      if (e.isTensor())
        fn(e.toTensor());
  } else if (v.isTuple()) {
    for (const auto &e : v.toTupleRef().elements())
      forEachTensor(e, fn);
  }
}

bool isDeviceType(const c10::TypePtr &t) {
  if (t->kind() == c10::TypeKind::DeviceObjType)
    return true;
  if (auto opt = t->cast<c10::OptionalType>())
    return opt->getElementType()->kind() == c10::TypeKind::DeviceObjType;
  return false;
}

bool isScalarTypeArg(const c10::Argument &a) {
  c10::TypePtr t = a.real_type();
  if (auto opt = t->cast<c10::OptionalType>())
    t = opt->getElementType();
  return t->kind() == c10::TypeKind::ScalarTypeType;
}

} // namespace

bool isDtypeCast(const c10::FunctionSchema &schema, const std::vector<c10::IValue> &inputs) {
  if (schema.name() != "aten::to" || inputs.empty() || !inputs[0].isTensor())
    return false;
  for (size_t i = 1; i < inputs.size() && i < schema.arguments().size(); ++i)
    if (isScalarTypeArg(schema.arguments()[i]) && !inputs[i].isNone())
      return true;
  return false;
}

namespace {

// Ops whose result is their input when the shape and dtype are unchanged.
bool isIdentityWhenSameShape(const std::string &op) {
  static const std::set<std::string> ops = {"aten::view",      "aten::reshape",    "aten::expand",
                                            "aten::expand_as", "aten::contiguous", "aten::to",
                                            "aten::type_as",   "aten::flatten",    "aten::alias",
                                            "aten::view_as",   "aten::reshape_as"};
  return ops.count(op) > 0;
}

bool isInactiveDropout(const std::string &op, const std::vector<c10::IValue> &in) {
  if (op != "aten::dropout" && op != "aten::feature_dropout" && op != "aten::alpha_dropout")
    return false;
  double p = in.size() > 1 && in[1].isDouble() ? in[1].toDouble() : 1.0;
  bool train = in.size() > 2 && in[2].isBool() ? in[2].toBool() : true;
  return p == 0.0 || !train;
}

} // namespace

// Device arguments point at the execution device: traced graphs bake in the
// device they were traced on, and meta tensors cannot mix with CPU ones.
void GraphExecutor::fixDeviceArgs(Node *node, std::vector<c10::IValue> &inputs) const {
  if (!meta_)
    return;
  const c10::FunctionSchema *schema = node->maybeSchema();
  for (size_t i = 0; i < node->inputs().size(); ++i) {
    if (!isDeviceType(node->inputs()[i]->type()))
      continue;
    bool creation =
        schema && i < schema->arguments().size() && schema->arguments()[i].name() == "device";
    if (!inputs[i].isNone() || creation)
      inputs[i] = c10::Device(c10::kMeta);
  }
}

bool GraphExecutor::shouldRecord(Node *node, const std::vector<c10::IValue> &inputs,
                                 const std::vector<c10::IValue> &outputs) const {
  if (node->kind().is_prim() || !node->maybeSchema())
    return false;
  bool tensorOut = false;
  for (const auto &o : outputs)
    tensorOut |= isTensorLike(o);
  if (!tensorOut)
    return false; // sizes, ints, bools: folded into constants
  bool anyTensorIn = false, trackedIn = false;
  for (const auto &in : inputs)
    forEachTensor(in, [&](const at::Tensor &t) {
      anyTensorIn = true;
      trackedIn |= irOf_.count(t.unsafeGetTensorImpl()) > 0;
    });
  // Creation ops (no tensor inputs) are recorded; arithmetic on untracked
  // CPU scalars (folded shape computations) is not.
  return trackedIn || !anyTensorIn;
}

Status GraphExecutor::recordNode(Node *node, const std::vector<c10::IValue> &inputs,
                                 const std::vector<c10::IValue> &outputs) {
  if (!shouldRecord(node, inputs, outputs))
    return Status::ok();
  const c10::FunctionSchema &schema = node->schema();
  std::string opName = schema.name();
  ir::Node n;
  n.overload = schema.overload_name();
  describeNode(node, index_, n);

  // An op that hands back one of its inputs unchanged is dropped: later uses
  // of its output refer to the input's IR tensor. A dtype cast stays, no-op
  // or not (runOperator gave its output an identity of its own).
  if (!schema.is_mutable() && outputs.size() == 1 && outputs[0].isTensor() && !inputs.empty() &&
      inputs[0].isTensor() && !isDtypeCast(schema, inputs)) {
    const at::Tensor &in = inputs[0].toTensor(), &out = outputs[0].toTensor();
    bool same = in.unsafeGetTensorImpl() == out.unsafeGetTensorImpl() ||
                isInactiveDropout(opName, inputs) ||
                (isIdentityWhenSameShape(opName) && in.sizes() == out.sizes() &&
                 in.scalar_type() == out.scalar_type());
    refreshView(in.unsafeGetTensorImpl());
    auto it = irOf_.find(in.unsafeGetTensorImpl());
    if (same && it != irOf_.end()) {
      irOf_[out.unsafeGetTensorImpl()] = it->second;
      noteIdentityView(out, in);
      return Status::ok();
    }
  }

  std::vector<at::Tensor> tensorInputs; // parallel to n.inputs
  for (size_t i = 0; i < inputs.size() && i < schema.arguments().size(); ++i) {
    const c10::Argument &a = schema.arguments()[i];
    ir::Argument arg{a.name(), ir::NoneValue{}};
    const c10::IValue &v = inputs[i];
    if (v.isTensor()) {
      tensorInputs.push_back(v.toTensor());
      n.inputs.push_back(tensorId(v.toTensor(), a.name()));
      arg.value = ir::TensorRef{static_cast<int32_t>(n.inputs.size() - 1)};
    } else if (v.isList() && isTensorLike(v)) {
      ir::TensorListRef refs;
      for (const auto &e : v.toListRef()) {
        if (!e.isTensor()) { // a None in Tensor?[] (x[:, idx]) keeps its position
          refs.indices.push_back(-1);
          continue;
        }
        tensorInputs.push_back(e.toTensor());
        n.inputs.push_back(tensorId(e.toTensor(), a.name()));
        refs.indices.push_back(static_cast<int32_t>(n.inputs.size() - 1));
      }
      arg.value = refs;
    } else if (v.isInt() && isScalarTypeArg(a)) {
      arg.value = fromScalarType(static_cast<c10::ScalarType>(v.toInt()));
    } else if (v.isDevice()) {
      arg.value = ir::DeviceValue{"cpu"}; // the placement is the plan's business
    } else if (v.isNone()) {
      arg.value = ir::NoneValue{};
    } else if (v.isBool()) {
      arg.value = v.toBool();
    } else if (v.isInt()) {
      arg.value = v.toInt();
    } else if (v.isDouble()) {
      arg.value = v.toDouble();
    } else if (v.isString()) {
      arg.value = v.toStringRef();
    } else if (v.isIntList()) {
      arg.value = v.toIntVector();
    } else if (v.isDoubleList()) {
      arg.value = v.toDoubleVector();
    } else if (v.isBoolList()) {
      std::vector<bool> bs;
      for (bool b : v.toBoolList())
        bs.push_back(b);
      arg.value = bs;
    } else {
      return errorAt(node, fmt::format("argument '{}' has a value of type {} that nnsc cannot "
                                       "record",
                                       a.name(), v.tagKind()));
    }
    n.args.push_back(std::move(arg));
  }

  // In SSA form an in-place op becomes its out-of-place twin producing a new
  // tensor; later uses of the mutated tensor, and of every tensor sharing its
  // memory, see the new one (Functionalize.cpp).
  bool inplace = schema.is_mutable();
  if (inplace) {
    auto twin = functionalTwin(node, schema);
    if (!twin)
      return twin.status();
    opName = twin->name;
    n.overload = twin->overload_name;
  }
  n.op = opName;
  std::vector<at::Tensor> tensorOutputs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string hint = node->outputs()[i]->debugName();
    forEachTensor(outputs[i], [&](const at::Tensor &t) {
      if (inplace)
        irOf_.erase(t.unsafeGetTensorImpl());
      n.outputs.push_back(addActivation(t, hint));
      if (snapshots_)
        (*snapshots_)[n.outputs.back()] = t.detach().clone();
      tensorOutputs.push_back(t);
      keepAlive_.push_back(t);
    });
  }
  int64_t id = out_.addNode(std::move(n));
  const ir::Node &recorded = out_.nodes()[static_cast<size_t>(id)];
  if (!inplace) {
    noteViews(recorded, tensorInputs, tensorOutputs);
    return Status::ok();
  }
  if (tensorOutputs.empty() || tensorInputs.empty() ||
      tensorOutputs[0].unsafeGetTensorImpl() != tensorInputs[0].unsafeGetTensorImpl())
    return errorAt(node, "an in-place op that does not return the tensor it writes");
  return propagateWrite(node, tensorOutputs[0], ir::Node(recorded));
}

} // namespace nnsc::trace
