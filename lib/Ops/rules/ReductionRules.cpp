// Reductions and ops along one dim (softmax, cumsum, topk, sort).
//
// As in nnScaler: a sum-like reduction marks its reduced dims '+' (split them
// and the output is a partial sum); mean, max, var, norm, ... cannot be
// rebuilt from partial sums, so their reduced dims are frozen '^'. A 0-dim
// result can only be annotated '?', which makes the op replicate-only.
#include <algorithm>

#include "RuleUtil.h"
#include "Rules.h"

namespace nnsc::ops::rules {
namespace {

/// The reduced dims named by argument `dimArg`: all dims when it is absent,
/// None or an empty list.
std::optional<std::vector<size_t>> reducedDims(const ir::Node &n, size_t rank,
                                               const char *dimArg = "dim") {
  std::optional<std::vector<int64_t>> dims = intListArg(n, dimArg);
  if (!dims || dims->empty()) {
    std::vector<size_t> all(rank);
    for (size_t d = 0; d < rank; ++d)
      all[d] = d;
    return all;
  }
  return normDims(*dims, rank);
}

/// `in dims -> out dims` for a reduction over `reduced` with `suffix`; every
/// output (values, indices, ...) gets the same dims.
std::vector<std::string> reduceAnno(const ir::Graph &g, const ir::Node &n,
                                    const std::vector<size_t> &reduced, bool keepdim,
                                    std::string_view suffix) {
  Dims in = NameGen().take(inRank(g, n, 0)), out;
  for (size_t d = 0; d < in.size(); ++d) {
    bool isReduced = std::count(reduced.begin(), reduced.end(), d) > 0;
    if (!isReduced)
      out.push_back(in[d]);
    else if (keepdim)
      out.push_back("1");
    if (isReduced)
      addSuffix(in, d, suffix);
  }
  std::vector<Dims> ins{in}, outs(n.outputs.size(), out);
  for (size_t o = 0; o < n.outputs.size(); ++o)
    if (outShape(g, n, o).size() != out.size())
      return {};
  for (size_t i = 1; i < n.inputs.size(); ++i)
    ins.push_back(Dims{}); // e.g. a tensor-valued correction: replicated
  return single(annoStr(ins, outs));
}

std::vector<std::string> reduceRule(const ir::Graph &g, const ir::Node &n,
                                    std::string_view suffix) {
  if (n.inputs.empty() || n.outputs.empty())
    return {};
  if (inRank(g, n, 0) == 0) // a 0-dim input: nothing to split
    return single(annoStr(std::vector<Dims>(n.inputs.size()), std::vector<Dims>(n.outputs.size())));
  auto reduced = reducedDims(n, inRank(g, n, 0));
  if (!reduced)
    return {};
  return reduceAnno(g, n, *reduced, boolArg(n, "keepdim").value_or(false), suffix);
}

std::vector<std::string> sumRule(const ir::Graph &g, const ir::Node &n) {
  return reduceRule(g, n, "+");
}

std::vector<std::string> frozenReduceRule(const ir::Graph &g, const ir::Node &n) {
  return reduceRule(g, n, "^");
}

std::vector<std::string> broadcastPair(const ir::Graph &g, const ir::Node &n) {
  const ir::Shape &out = outShape(g, n, 0);
  Dims dims = NameGen().take(out.size());
  auto a = broadcastDims(inShape(g, n, 0), out, dims);
  auto b = broadcastDims(inShape(g, n, 1), out, dims);
  if (!a || !b)
    return {};
  return single(annoStr({*a, *b}, {dims}));
}

// max/min: max(a, b) is elementwise, max(x, dim) reduces one dim (values and
// indices), max(x) reduces everything.
std::vector<std::string> maxMinRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() == 2 && n.outputs.size() == 1)
    return broadcastPair(g, n);
  return frozenReduceRule(g, n);
}

/// Ops along one dim `dim` (default `fallback`): input and outputs keep their
/// shape, that dim frozen.
std::vector<std::string> alongDimRule(const ir::Graph &g, const ir::Node &n, int64_t fallback) {
  if (n.inputs.empty() || n.outputs.empty())
    return {};
  const ir::Shape &in = inShape(g, n, 0);
  Dims dims = NameGen().take(in.size());
  if (!in.empty()) {
    auto d = normDim(intArg(n, "dim").value_or(fallback), in.size());
    if (!d)
      return {};
    addSuffix(dims, *d, "^");
  }
  for (size_t o = 0; o < n.outputs.size(); ++o)
    if (outShape(g, n, o) != in)
      return {};
  std::vector<Dims> ins{dims};
  ins.resize(n.inputs.size()); // further tensors (none usually): replicated
  return single(annoStr(ins, std::vector<Dims>(n.outputs.size(), dims)));
}

std::vector<std::string> softmaxRule(const ir::Graph &g, const ir::Node &n) {
  return alongDimRule(g, n, -1);
}

// topk: the k results along `dim` are the numeral k.
std::vector<std::string> topkRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 1 || n.outputs.empty() || inRank(g, n, 0) == 0)
    return {};
  const ir::Shape &in = inShape(g, n, 0), &out = outShape(g, n, 0);
  auto d = normDim(intArg(n, "dim").value_or(-1), in.size());
  if (!d || out.size() != in.size())
    return {};
  Dims ins = NameGen().take(in.size()), outs = ins;
  addSuffix(ins, *d, "^");
  outs[*d] = std::to_string(out[*d]);
  return single(annoStr({ins}, std::vector<Dims>(n.outputs.size(), outs)));
}

} // namespace

void registerReductionRules(OpRegistry &registry) {
  for (const char *op : {"aten::sum", "aten::nansum"})
    registry.add(op, sumRule);
  for (const char *op :
       {"aten::mean", "aten::nanmean", "aten::prod", "aten::amax", "aten::amin", "aten::aminmax",
        "aten::argmax", "aten::argmin", "aten::var", "aten::std", "aten::var_mean",
        "aten::std_mean", "aten::norm", "aten::linalg_vector_norm", "aten::frobenius_norm",
        "aten::logsumexp", "aten::any", "aten::all"})
    registry.add(op, frozenReduceRule);
  registry.add("aten::max", maxMinRule);
  registry.add("aten::min", maxMinRule);
  for (const char *op :
       {"aten::softmax", "aten::log_softmax", "aten::_softmax", "aten::_log_softmax",
        "aten::cumsum", "aten::cumprod", "aten::logcumsumexp", "aten::cummax", "aten::cummin",
        "aten::sort", "aten::argsort"})
    registry.add(op, softmaxRule);
  registry.add("aten::topk", topkRule);
}

} // namespace nnsc::ops::rules
