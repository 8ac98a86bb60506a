// Dim reordering, size-1 dims, broadcasting copies, splitting and joining.
#include <algorithm>

#include "RuleUtil.h"
#include "Rules.h"

namespace nnsc::ops::rules {
namespace {

bool oneOutput(const ir::Node &n) { return n.inputs.size() == 1 && n.outputs.size() == 1; }

std::vector<std::string> permuteRule(const ir::Graph &g, const ir::Node &n) {
  auto dims = intListArg(n, "dims");
  size_t rank = oneOutput(n) ? inRank(g, n, 0) : 0;
  if (!oneOutput(n) || !dims || dims->size() != rank)
    return {};
  Dims in = NameGen().take(rank), out;
  for (int64_t d : *dims) {
    auto k = normDim(d, rank);
    if (!k)
      return {};
    out.push_back(in[*k]);
  }
  return single(annoStr({in}, {out}));
}

// transpose(dim0, dim1), swapaxes, and t() (swaps the dims of a 2-d tensor).
std::vector<std::string> transposeRule(const ir::Graph &g, const ir::Node &n) {
  if (!oneOutput(n))
    return {};
  size_t rank = inRank(g, n, 0);
  Dims in = NameGen().take(rank), out = in;
  bool isT = n.op == "aten::t";
  if (isT && rank < 2)
    return single(annoStr({in}, {out}));
  auto d0 = normDim(isT ? 0 : intArg(n, "dim0").value_or(INT64_MAX), rank);
  auto d1 = normDim(isT ? 1 : intArg(n, "dim1").value_or(INT64_MAX), rank);
  if (!d0 || !d1)
    return {};
  std::swap(out[*d0], out[*d1]);
  return single(annoStr({in}, {out}));
}

// squeeze: removed size-1 dims are the numeral 1. A named dim that is not 1
// stays but is frozen: split to size 1 it would be squeezed away.
std::vector<std::string> squeezeRule(const ir::Graph &g, const ir::Node &n) {
  if (!oneOutput(n))
    return {};
  const ir::Shape &shape = inShape(g, n, 0);
  std::optional<std::vector<size_t>> dims = std::vector<size_t>{};
  if (auto listed = intListArg(n, "dim"))
    dims = normDims(*listed, shape.size());
  else
    for (size_t d = 0; d < shape.size(); ++d)
      dims->push_back(d);
  if (!dims)
    return {};
  Dims in = NameGen().take(shape.size()), out;
  for (size_t d = 0; d < shape.size(); ++d) {
    bool listed = std::count(dims->begin(), dims->end(), d) > 0;
    if (listed && shape[d] == 1) {
      in[d] = "1";
      continue;
    }
    if (listed)
      addSuffix(in, d, "^");
    out.push_back(in[d]);
  }
  return single(annoStr({in}, {out}));
}

std::vector<std::string> unsqueezeRule(const ir::Graph &g, const ir::Node &n) {
  if (!oneOutput(n))
    return {};
  size_t rank = inRank(g, n, 0);
  auto d = normDim(intArg(n, "dim").value_or(INT64_MAX), rank + 1);
  if (!d)
    return {};
  Dims in = NameGen().take(rank), out = in;
  out.insert(out.begin() + static_cast<long>(*d), "1");
  return single(annoStr({in}, {out}));
}

// expand / expand_as / broadcast_to: new leading dims and expanded size-1
// dims are numerals (fixed); the others split with the input. expand_as's
// `other` has the output's shape and splits with it.
std::vector<std::string> expandRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.empty() || n.outputs.size() != 1)
    return {};
  const ir::Shape &in = inShape(g, n, 0), &out = outShape(g, n, 0);
  if (in.size() > out.size())
    return {};
  size_t lead = out.size() - in.size();
  Dims names = NameGen().take(in.size()), ins, outs = numerals(out);
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] == out[lead + d]) {
      ins.push_back(names[d]);
      outs[lead + d] = names[d];
    } else if (in[d] == 1) {
      ins.push_back("1");
    } else {
      return {};
    }
  }
  std::vector<Dims> all{ins};
  for (size_t i = 1; i < n.inputs.size(); ++i)
    all.push_back(inShape(g, n, i) == out ? outs : Dims{});
  return single(annoStr(all, {outs}));
}

// repeat: repeated dims are numerals on both sides, dims repeated once split.
std::vector<std::string> repeatRule(const ir::Graph &g, const ir::Node &n) {
  auto repeats = intListArg(n, "repeats");
  if (!oneOutput(n) || !repeats)
    return {};
  const ir::Shape &in = inShape(g, n, 0), &out = outShape(g, n, 0);
  if (repeats->size() < in.size() || out.size() != repeats->size())
    return {};
  size_t lead = out.size() - in.size();
  Dims names = NameGen().take(in.size()), ins, outs = numerals(out);
  for (size_t d = 0; d < in.size(); ++d) {
    bool once = (*repeats)[lead + d] == 1;
    ins.push_back(once ? names[d] : std::to_string(in[d]));
    if (once)
      outs[lead + d] = names[d];
  }
  return single(annoStr({ins}, {outs}));
}

} // namespace

std::vector<std::string> splitRule(const ir::Graph &g, const ir::Node &n);
std::vector<std::string> unbindRule(const ir::Graph &g, const ir::Node &n);
std::vector<std::string> catRule(const ir::Graph &g, const ir::Node &n);
std::vector<std::string> stackRule(const ir::Graph &g, const ir::Node &n);

void registerShapeRules(OpRegistry &registry) {
  registry.add("aten::permute", permuteRule);
  for (const char *op : {"aten::transpose", "aten::swapaxes", "aten::swapdims", "aten::t"})
    registry.add(op, transposeRule);
  registry.add("aten::squeeze", squeezeRule);
  registry.add("aten::unsqueeze", unsqueezeRule);
  for (const char *op : {"aten::expand", "aten::expand_as", "aten::broadcast_to"})
    registry.add(op, expandRule);
  registry.add("aten::repeat", repeatRule);
  for (const char *op : {"aten::split", "aten::split_with_sizes", "aten::chunk",
                         "aten::unsafe_split", "aten::unsafe_chunk", "aten::tensor_split"})
    registry.add(op, splitRule);
  registry.add("aten::unbind", unbindRule);
  registry.add("aten::cat", catRule);
  registry.add("aten::concat", catRule);
  registry.add("aten::concatenate", catRule);
  registry.add("aten::stack", stackRule);
}

} // namespace nnsc::ops::rules
