#include "nnsc/IR/Printer.h"

#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nnsc::ir {

namespace {

std::string tensorType(const Tensor &t) {
  return fmt::format("{}{}", dtypeName(t.dtype), shapeString(t.shape));
}

std::string formatDouble(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eEn") == std::string::npos)
    s += ".0";
  return s;
}

struct ArgPrinter {
  const Node &node;
  std::string ref(int32_t index) const {
    if (index == -1)
      return "None";
    if (index < 0 || index >= static_cast<int32_t>(node.inputs.size()))
      return "%?";
    return fmt::format("%{}", node.inputs[static_cast<size_t>(index)]);
  }
  std::string operator()(const NoneValue &) const { return "None"; }
  std::string operator()(bool v) const { return v ? "true" : "false"; }
  std::string operator()(int64_t v) const { return std::to_string(v); }
  std::string operator()(double v) const { return formatDouble(v); }
  std::string operator()(const std::string &v) const { return fmt::format("\"{}\"", v); }
  std::string operator()(const std::vector<int64_t> &v) const {
    return fmt::format("[{}]", fmt::join(v, ", "));
  }
  std::string operator()(const std::vector<double> &v) const {
    std::vector<std::string> parts;
    for (double d : v)
      parts.push_back(formatDouble(d));
    return fmt::format("[{}]", fmt::join(parts, ", "));
  }
  std::string operator()(const std::vector<bool> &v) const {
    std::vector<std::string> parts;
    for (bool b : v)
      parts.push_back(b ? "true" : "false");
    return fmt::format("[{}]", fmt::join(parts, ", "));
  }
  std::string operator()(DType v) const { return std::string(dtypeName(v)); }
  std::string operator()(const DeviceValue &v) const { return fmt::format("device({})", v.name); }
  std::string operator()(const TensorRef &v) const { return ref(v.index); }
  std::string operator()(const TensorListRef &v) const {
    std::vector<std::string> parts;
    for (auto i : v.indices)
      parts.push_back(ref(i));
    return fmt::format("[{}]", fmt::join(parts, ", "));
  }
};

void printTensorDecl(const Tensor &t, std::ostream &os) {
  os << fmt::format("{:<9}%{} {}: {}", tensorKindName(t.kind), t.id, t.name, tensorType(t));
  if (t.requiresGrad)
    os << " grad";
  if (!t.aliases.empty())
    os << fmt::format(" (alias {})", fmt::join(t.aliases, ", "));
  os << '\n';
}

void printNode(const Graph &g, const Node &n, std::ostream &os) {
  std::vector<std::string> outs;
  for (auto o : n.outputs)
    outs.push_back(fmt::format("%{}: {}", o, tensorType(g.tensor(o))));
  std::vector<std::string> args;
  for (const auto &a : n.args)
    args.push_back(fmt::format("{}={}", a.name, std::visit(ArgPrinter{n}, a.value)));
  os << fmt::format("{} = {}({})\n", fmt::join(outs, ", "), n.op, fmt::join(args, ", "));
  std::string where = n.modulePath.empty() ? "<top>" : n.modulePath;
  if (!n.moduleClass.empty())
    where += fmt::format(" ({})", n.moduleClass);
  os << fmt::format("    # {} {}\n", where, n.locString());
  if (n.annotations.empty())
    os << "    anno: replicate-only\n";
  for (const auto &a : n.annotations)
    os << "    anno: " << a << '\n';
}

} // namespace

std::string printArgValue(const Node &node, const ArgValue &value) {
  return std::visit(ArgPrinter{node}, value);
}

void printGraph(const Graph &g, std::ostream &os) {
  os << fmt::format("graph {} (format {}) from {}; weights {}\n", g.name, Graph::kFormatVersion,
                    g.source.empty() ? "<unknown>" : g.source,
                    g.weightsWritten ? "written" : "not written");
  for (const auto &t : g.tensors())
    if (t.kind != TensorKind::Activation)
      printTensorDecl(t, os);
  for (const auto &n : g.nodes())
    printNode(g, n, os);
  for (size_t i = 0; i < g.outputs.size(); ++i)
    os << fmt::format("output %{}{}\n", g.outputs[i],
                      static_cast<int32_t>(i) == g.lossOutput ? " (loss)" : "");
  for (const auto &u : g.stateUpdates)
    os << fmt::format("update %{} '{}' <- %{}\n", u.state, g.tensor(u.state).name, u.value);
}

std::string printGraph(const Graph &g) {
  std::ostringstream ss;
  printGraph(g, ss);
  return ss.str();
}

} // namespace nnsc::ir
