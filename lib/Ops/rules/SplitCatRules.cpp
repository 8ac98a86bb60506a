// Splitting one tensor into several and joining several into one: the dim
// that is cut or joined is a numeral on every side (never split), the other
// dims split together.
#include <fmt/format.h>

#include "RuleUtil.h"

namespace nnsc::ops::rules {

// split / split_with_sizes / chunk / tensor_split: the pieces' sizes are read
// from the outputs. Equal pieces write the cut dim as `(k p)`: k pieces of
// size p each, so splitting p cuts every piece alike (the input interleaved
// over k blocks) -- how a fused q/k/v projection's output stays split by
// heads through its split. Unequal pieces fix the cut dim.
std::vector<std::string> splitRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 1 || n.outputs.empty())
    return {};
  const ir::Shape &in = inShape(g, n, 0);
  auto d = normDim(intArg(n, "dim").value_or(0), in.size());
  if (!d)
    return {};
  NameGen names;
  Dims ins = names.take(in.size());
  std::string piece = names.next();
  // tensor_split's indices are positions in the whole dim, which no local
  // argument rewrite adjusts: its cut dim stays fixed.
  bool equal = n.outputs.size() > 1 && n.op != "aten::tensor_split";
  std::vector<Dims> outs;
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    const ir::Shape &out = outShape(g, n, o);
    if (out.size() != in.size())
      return {};
    equal = equal && out[*d] == outShape(g, n, 0)[*d];
    outs.push_back(ins);
    outs.back()[*d] = std::to_string(out[*d]);
  }
  if (equal) {
    for (Dims &out : outs)
      out[*d] = piece;
    ins[*d] = fmt::format("({} {})", n.outputs.size(), piece);
  } else {
    ins[*d] = std::to_string(in[*d]);
  }
  return single(annoStr({ins}, outs));
}

std::vector<std::string> unbindRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 1 || n.outputs.empty())
    return {};
  const ir::Shape &in = inShape(g, n, 0);
  auto d = normDim(intArg(n, "dim").value_or(0), in.size());
  if (!d)
    return {};
  Dims ins = NameGen().take(in.size()), out = ins;
  out.erase(out.begin() + static_cast<long>(*d));
  ins[*d] = std::to_string(in[*d]);
  return single(annoStr({ins}, std::vector<Dims>(n.outputs.size(), out)));
}

std::vector<std::string> catRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.empty() || n.outputs.size() != 1)
    return {};
  const ir::Shape &out = outShape(g, n, 0);
  auto d = normDim(intArg(n, "dim").value_or(0), out.size());
  if (!d)
    return {};
  Dims names = NameGen().take(out.size());
  std::vector<Dims> ins;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const ir::Shape &in = inShape(g, n, i);
    if (in.size() != out.size())
      return {}; // e.g. a legacy empty 1-d operand
    ins.push_back(names);
    ins.back()[*d] = std::to_string(in[*d]);
  }
  names[*d] = std::to_string(out[*d]);
  return single(annoStr(ins, {names}));
}

std::vector<std::string> stackRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.empty() || n.outputs.size() != 1)
    return {};
  const ir::Shape &first = inShape(g, n, 0);
  auto d = normDim(intArg(n, "dim").value_or(0), first.size() + 1);
  if (!d)
    return {};
  Dims names = NameGen().take(first.size()), out = names;
  out.insert(out.begin() + static_cast<long>(*d), std::to_string(n.inputs.size()));
  return single(annoStr(std::vector<Dims>(n.inputs.size(), names), {out}));
}

} // namespace nnsc::ops::rules
