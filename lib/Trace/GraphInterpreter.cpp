#include "GraphInterpreter.h"

#include <fmt/format.h>

#include "GraphExecutor.h"

namespace nnsc::trace {

namespace {

bool isTensorType(const c10::TypePtr &t) {
  c10::TypePtr e = t;
  if (auto opt = t->cast<c10::OptionalType>())
    e = opt->getElementType();
  return e->kind() == c10::TypeKind::TensorType;
}

bool isTensorListType(const c10::TypePtr &t) {
  auto list = t->cast<c10::ListType>();
  return list && isTensorType(list->getElementType());
}

// Whether the node's recorded arguments are this schema's, by name and kind.
bool argsFit(const c10::FunctionSchema &schema, const ir::Node &node) {
  const auto &params = schema.arguments();
  if (schema.is_mutable() || node.args.size() > params.size())
    return false;
  for (size_t i = 0; i < node.args.size(); ++i) {
    const ir::ArgValue &v = node.args[i].value;
    const c10::TypePtr &type = params[i].type();
    if (node.args[i].name != params[i].name())
      return false;
    if (std::holds_alternative<ir::TensorRef>(v) != isTensorType(type) &&
        !std::holds_alternative<ir::NoneValue>(v))
      return false;
    if (std::holds_alternative<ir::TensorListRef>(v) && !isTensorListType(type))
      return false;
  }
  for (size_t i = node.args.size(); i < params.size(); ++i)
    if (!params[i].default_value() && !params[i].kwarg_only())
      return false;
  return true;
}

Expected<std::shared_ptr<torch::jit::Operator>> findOperator(const ir::Node &node) {
  const auto &ops = torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(node.op));
  std::shared_ptr<torch::jit::Operator> fallback;
  for (const auto &op : ops) {
    if (!argsFit(op->schema(), node))
      continue;
    if (op->schema().overload_name() == node.overload)
      return op;
    if (!fallback)
      fallback = op;
  }
  if (fallback)
    return fallback;
  return errorf("LibTorch has no operator {} taking these arguments", node.op);
}

c10::IValue listValue(const ir::TensorListRef &refs, const c10::TypePtr &type, const ir::Node &node,
                      const TensorValues &values) {
  auto elem = type->expectRef<c10::ListType>().getElementType();
  if (elem->cast<c10::OptionalType>()) { // Tensor?[]: None where the index is negative
    c10::impl::GenericList list(elem);
    for (int32_t i : refs.indices)
      list.push_back(i < 0 ? c10::IValue() : c10::IValue(values.at(node.inputs.at(i))));
    return list;
  }
  c10::List<at::Tensor> list;
  for (int32_t i : refs.indices)
    list.push_back(values.at(node.inputs.at(static_cast<size_t>(i))));
  return list;
}

c10::IValue argValue(const ir::ArgValue &v, const c10::Argument &param, const ir::Node &node,
                     const TensorValues &values) {
  struct Visitor {
    const c10::Argument &param;
    const ir::Node &node;
    const TensorValues &values;
    c10::IValue operator()(const ir::NoneValue &) const { return {}; }
    c10::IValue operator()(bool b) const { return b; }
    c10::IValue operator()(int64_t i) const { return i; }
    c10::IValue operator()(double d) const { return d; }
    c10::IValue operator()(const std::string &s) const { return s; }
    c10::IValue operator()(const std::vector<int64_t> &v) const { return c10::List<int64_t>(v); }
    c10::IValue operator()(const std::vector<double> &v) const { return c10::List<double>(v); }
    c10::IValue operator()(const std::vector<bool> &v) const {
      c10::List<bool> l;
      for (bool b : v)
        l.push_back(b);
      return l;
    }
    c10::IValue operator()(ir::DType d) const {
      if (d == ir::DType::Unspecified)
        return {};
      return static_cast<int64_t>(toScalarType(d));
    }
    c10::IValue operator()(const ir::DeviceValue &) const { return c10::Device(c10::kCPU); }
    c10::IValue operator()(const ir::TensorRef &r) const {
      return values.at(node.inputs.at(static_cast<size_t>(r.index)));
    }
    c10::IValue operator()(const ir::TensorListRef &r) const {
      return listValue(r, param.type(), node, values);
    }
  };
  return std::visit(Visitor{param, node, values}, v);
}

// The generated programs write view-by-size as reshape (a traced graph drops
// `contiguous`, so a view may meet a non-contiguous input): run it so too.
ir::Node asProgramWritesIt(const ir::Node &node) {
  ir::Node n = node;
  if ((n.op == "aten::view" || n.op == "aten::_unsafe_view") && n.args.size() == 2 &&
      n.args[1].name == "size") {
    n.op = "aten::reshape";
    n.overload.clear();
    n.args[1].name = "shape";
  } else if (n.op == "aten::view_as") {
    n.op = "aten::reshape_as";
    n.overload.clear();
  }
  return n;
}

Status runNode(const ir::Node &original, TensorValues &values) {
  ir::Node node = asProgramWritesIt(original);
  auto op = findOperator(node);
  if (!op)
    return op.status();
  const auto &params = (*op)->schema().arguments();
  torch::jit::Stack stack;
  for (size_t i = 0; i < params.size(); ++i) {
    if (i < node.args.size())
      stack.push_back(argValue(node.args[i].value, params[i], node, values));
    else
      stack.push_back(*params[i].default_value());
  }
  try {
    (*op)->getOperation()(stack);
  } catch (const std::exception &e) {
    std::string what = e.what();
    return errorf("{}", what.substr(0, what.find('\n')));
  }
  std::vector<at::Tensor> outs;
  for (const c10::IValue &v : stack) {
    if (v.isTensor())
      outs.push_back(v.toTensor());
    else if (v.isTensorList())
      for (const at::Tensor &t : v.toTensorVector())
        outs.push_back(t);
  }
  if (outs.size() != node.outputs.size())
    return errorf("returned {} tensors where the graph has {}", outs.size(), node.outputs.size());
  for (size_t i = 0; i < outs.size(); ++i)
    values[node.outputs[i]] = outs[i];
  return Status::ok();
}

} // namespace

Status interpretGraph(const ir::Graph &graph, TensorValues &values,
                      const std::function<Status(const ir::Node &)> &afterNode) {
  for (const ir::Node &node : graph.nodes()) {
    Status st = runNode(node, values);
    if (!st.isOk())
      return Status::error(fmt::format(
          "{}: error: running node %{} ({}{}) of the traced graph: {}", node.locString(), node.id,
          node.op, node.modulePath.empty() ? "" : " in " + node.modulePath, st.message()));
    NNSC_RETURN_IF_ERROR(afterNode(node));
  }
  return Status::ok();
}

} // namespace nnsc::trace
