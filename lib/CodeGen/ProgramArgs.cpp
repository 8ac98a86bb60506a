// Writing one call's arguments: leading tensors positionally, the rest by
// keyword (TorchScript accepts keyword-only schema arguments only by
// keyword, and the IR does not say which ones those are), and 0-dim
// constants inline when the op has a Scalar overload that computes the same.
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "Literals.h"
#include "ProgramWriter.h"

namespace nnsc::codegen {

namespace {

int typeCategory(ir::DType t) {
  switch (t) {
  case ir::DType::Bool:
    return 0;
  case ir::DType::Complex64:
  case ir::DType::Complex128:
    return 3;
  default:
    return ir::isFloatingPoint(t) ? 2 : 1;
  }
}

// (op, argument) pairs whose Tensor overload has a Scalar twin.
bool hasScalarOverload(const std::string &op, const std::string &arg) {
  static const std::set<std::string> otherOps = {
      "aten::add",        "aten::sub",        "aten::mul",          "aten::div",
      "aten::remainder",  "aten::fmod",       "aten::floor_divide", "aten::true_divide",
      "aten::rsub",       "aten::eq",         "aten::ne",           "aten::lt",
      "aten::le",         "aten::gt",         "aten::ge",           "aten::bitwise_and",
      "aten::bitwise_or", "aten::bitwise_xor"};
  if (arg == "other")
    return otherOps.count(op) > 0;
  return (op == "aten::pow" && arg == "exponent") || (op == "aten::masked_fill" && arg == "value");
}

// A 0-dim tensor operand and a Python scalar promote alike when the scalar's
// category does not exceed the other operand's (and that operand has dims,
// or the same dtype: two 0-dim tensors promote like dimensioned ones).
bool canInlineScalar(const ir::Graph &graph, const ir::Node &node, size_t argIndex,
                     const ir::Tensor &c) {
  if (argIndex == 0 || !hasScalarOverload(node.op, node.args[argIndex].name))
    return false;
  const auto *self = std::get_if<ir::TensorRef>(&node.args[0].value);
  if (!self || self->index < 0 || static_cast<size_t>(self->index) >= node.inputs.size())
    return false;
  const ir::Tensor &s = graph.tensor(node.inputs[static_cast<size_t>(self->index)]);
  if (typeCategory(c.dtype) > typeCategory(s.dtype))
    return false;
  return !s.shape.empty() || s.dtype == c.dtype;
}

bool isTensorArg(const ir::ArgValue &v) {
  return std::holds_alternative<ir::TensorRef>(v) || std::holds_alternative<ir::TensorListRef>(v);
}

template <typename T, typename F> std::string listText(const std::vector<T> &v, F format) {
  std::vector<std::string> parts;
  for (const T &x : v)
    parts.push_back(format(x));
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

} // namespace

std::string argumentName(const std::string &op, const ir::Argument &arg) {
  if ((op == "aten::view" || op == "aten::_unsafe_view") && arg.name == "size")
    return "shape"; // written as aten::reshape
  return arg.name;
}

Status ProgramWriter::defineScalarConstant(const ir::Tensor &t, const std::string &user) {
  auto literal = constantScalarLiteral(t);
  if (!literal)
    return errorf("error: constant %{} ({}{}) used by {} has no recorded value; nnsc-trace "
                  "records the data of constants with at most 4096 elements traced on cpu",
                  t.id, ir::dtypeName(t.dtype), ir::shapeString(t.shape), user);
  std::string name = fmt::format("c{}", t.id);
  os_ << fmt::format("    {} = torch.full([], {}, dtype={}, layout=None, device=device, "
                     "pin_memory=None)  # constant %{}: {}[]\n",
                     name, *literal, scalarTypeCode(t.dtype), t.id, ir::dtypeName(t.dtype));
  names_[t.id] = name;
  defined_.insert(t.id);
  return Status::ok();
}

Expected<std::string> ProgramWriter::tensorText(const ir::Node &node, size_t argIndex,
                                                int32_t inputIndex) {
  if (inputIndex < 0 || static_cast<size_t>(inputIndex) >= node.inputs.size())
    return Status::internal(fmt::format("error: node {} ({}) refers to input {} of {}", node.id,
                                        node.op, inputIndex, node.inputs.size()));
  size_t input = static_cast<size_t>(inputIndex);
  if (inputAdapters_ && input < inputAdapters_->size() && (*inputAdapters_)[input] >= 0) {
    auto it = adapterNames_.find((*inputAdapters_)[input]);
    if (it == adapterNames_.end())
      return Status::internal(fmt::format("error: node {} ({}) reads adapter {} before it runs "
                                          "on rank {}",
                                          node.id, node.op, (*inputAdapters_)[input],
                                          layout_.rank));
    return it->second;
  }
  const ir::Tensor &t = graph_.tensor(node.inputs[input]);
  if (t.kind == ir::TensorKind::Constant && t.shape.empty() && !defined_.count(t.id)) {
    if (canInlineScalar(graph_, node, argIndex, t))
      if (auto literal = constantScalarLiteral(t))
        return *literal;
    std::string user = fmt::format("{} at {}", node.op, node.locString());
    NNSC_RETURN_IF_ERROR(defineScalarConstant(t, user));
  }
  if (!defined_.count(t.id))
    return Status::internal(fmt::format("error: node {} ({}) reads %{} before it is computed "
                                        "on rank {}",
                                        node.id, node.op, t.id, layout_.rank));
  return names_.at(t.id);
}

Expected<std::string> ProgramWriter::valueText(const ir::Node &node, size_t argIndex,
                                               std::vector<std::string> &notes) {
  const ir::Argument &arg = node.args[argIndex];
  const ir::ArgValue &v = arg.value;
  if (const auto *ref = std::get_if<ir::TensorRef>(&v))
    return tensorText(node, argIndex, ref->index);
  if (const auto *refs = std::get_if<ir::TensorListRef>(&v)) {
    std::vector<std::string> parts;
    for (int32_t i : refs->indices) {
      if (i < 0) {
        parts.push_back("None");
        continue;
      }
      auto text = tensorText(node, argIndex, i);
      if (!text)
        return text.status();
      parts.push_back(*text);
    }
    return fmt::format("[{}]", fmt::join(parts, ", "));
  }
  if (const auto *dt = std::get_if<ir::DType>(&v)) {
    if (*dt == ir::DType::Unspecified)
      return std::string("None");
    notes.push_back(fmt::format("{} {} = {}", arg.name, scalarTypeCode(*dt), ir::dtypeName(*dt)));
    return std::to_string(scalarTypeCode(*dt));
  }
  return std::visit(
      [](const auto &x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, ir::NoneValue>)
          return "None";
        else if constexpr (std::is_same_v<T, bool>)
          return x ? "True" : "False";
        else if constexpr (std::is_same_v<T, int64_t>)
          return pyInt(x);
        else if constexpr (std::is_same_v<T, double>)
          return pyFloat(x);
        else if constexpr (std::is_same_v<T, std::string>)
          return pyString(x);
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
          return listText(x, pyInt);
        else if constexpr (std::is_same_v<T, std::vector<double>>)
          return listText(x, pyFloat);
        else if constexpr (std::is_same_v<T, std::vector<bool>>)
          return listText(x, [](bool b) { return std::string(b ? "True" : "False"); });
        else if constexpr (std::is_same_v<T, ir::DeviceValue>)
          return "device";
        else
          return "None"; // tensors and dtypes are handled above
      },
      v);
}

Expected<std::string> ProgramWriter::callArgs(const ir::Node &node,
                                              std::vector<std::string> &notes) {
  std::vector<std::string> parts;
  bool keyword = false;
  for (size_t i = 0; i < node.args.size(); ++i) {
    const ir::Argument &arg = node.args[i];
    auto text = valueText(node, i, notes);
    if (!text)
      return text.status();
    bool reserved = arg.name.empty() || isPythonKeyword(arg.name);
    if (!keyword && (isTensorArg(arg.value) || reserved)) {
      parts.push_back(*text);
      continue;
    }
    if (reserved)
      return errorf("error: argument '{}' of {} at {} must be passed by keyword, but Python "
                    "reserves that name",
                    arg.name, node.op, node.locString());
    keyword = true;
    parts.push_back(fmt::format("{}={}", argumentName(node.op, arg), *text));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

} // namespace nnsc::codegen
