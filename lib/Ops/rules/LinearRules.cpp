// Rules for the contractions: linear, matmul and friends, einsum.
#include "RuleUtil.h"
#include "Rules.h"

namespace nnsc::ops::rules {
namespace {

// linear(x [*, k], w [n, k], bias?): the contracted k is a reduction, so
// splitting it leaves the output a partial sum. A bias ([n], [1] or 0-dim) is
// an addend (`+`): along k it is value-split, added by one part only, which is
// nnScaler's TransformRule for the bias and Megatron's row-parallel linear.
std::vector<std::string> linearRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() < 2 || n.outputs.size() != 1 || inRank(g, n, 0) == 0)
    return {};
  size_t wRank = inRank(g, n, 1);
  if (n.inputs.size() == 2)
    return single(wRank == 2 ? "* k+, n k+ -> * n" : "* k+, k+ -> *");
  const ir::Shape &bias = inShape(g, n, 2);
  if (wRank != 2)
    return {};
  int64_t outFeatures = inShape(g, n, 1)[0];
  std::string b = bias.empty()                     ? "()"
                  : bias == ir::Shape{outFeatures} ? "n"
                  : bias == ir::Shape{1}           ? "1"
                                                   : "";
  if (b.empty())
    return {};
  return single("* k+, n k+, +" + b + " -> * n");
}

/// Batch dims of a matmul operand: its dims before the last two.
ir::Shape batchOf(const ir::Shape &s) {
  return s.size() > 2 ? ir::Shape(s.begin(), s.end() - 2) : ir::Shape{};
}

/// The operand and output dims of `a @ b` with contracted dim named `k`.
std::optional<std::vector<Dims>> matmulDims(const ir::Shape &a, const ir::Shape &b,
                                            const ir::Shape &out, const std::string &k) {
  if (a.empty() || b.empty())
    return std::nullopt;
  size_t tail = (a.size() > 1 ? 1 : 0) + (b.size() > 1 ? 1 : 0);
  if (out.size() < tail)
    return std::nullopt;
  ir::Shape outBatch(out.begin(), out.end() - static_cast<long>(tail));
  Dims batch = NameGen({"m", "k", "n"}).take(outBatch.size());
  auto ba = broadcastDims(batchOf(a), outBatch, batch);
  auto bb = broadcastDims(batchOf(b), outBatch, batch);
  if (!ba || !bb)
    return std::nullopt;
  Dims da = *ba, db = *bb, dout = batch;
  if (a.size() > 1) {
    da.push_back("m");
    dout.push_back("m");
  }
  da.push_back(k);
  db.push_back(k);
  if (b.size() > 1) {
    db.push_back("n");
    dout.push_back("n");
  }
  return std::vector<Dims>{da, db, dout};
}

std::vector<std::string> matmulRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 2 || n.outputs.size() != 1)
    return {};
  auto dims = matmulDims(inShape(g, n, 0), inShape(g, n, 1), outShape(g, n, 0), "k+");
  if (!dims)
    return {};
  return single(annoStr({(*dims)[0], (*dims)[1]}, {(*dims)[2]}));
}

// addmm / baddbmm / addmv: beta * self + alpha * (a @ b). k is a reduction
// and self an addend (linear in it): along k, one part adds self and the
// others zeros, so the partial sums add up to the result.
std::vector<std::string> addmmRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 3 || n.outputs.size() != 1)
    return {};
  const ir::Shape &out = outShape(g, n, 0);
  auto dims = matmulDims(inShape(g, n, 1), inShape(g, n, 2), out, "k+");
  if (!dims)
    return {};
  auto self = broadcastDims(inShape(g, n, 0), out, (*dims)[2]);
  if (!self)
    return {};
  return single(annoStr({addendDims(*self), (*dims)[0], (*dims)[1]}, {(*dims)[2]}));
}

std::vector<std::string> outerRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 2 || inRank(g, n, 0) != 1 || inRank(g, n, 1) != 1)
    return {};
  return single("a, b -> a b");
}

std::vector<std::string> dotRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 2 || inRank(g, n, 0) != 1 || inRank(g, n, 1) != 1)
    return {};
  // The 0-dim result can only be '?', which makes the op replicate-only.
  return single("k+, k+ -> ?");
}

} // namespace

std::vector<std::string> einsumRule(const ir::Graph &g, const ir::Node &n);

void registerLinearRules(OpRegistry &registry) {
  registry.add("aten::linear", linearRule);
  for (const char *op : {"aten::matmul", "aten::mm", "aten::bmm"})
    registry.add(op, matmulRule);
  for (const char *op : {"aten::addmm", "aten::baddbmm", "aten::addmv"})
    registry.add(op, addmmRule);
  registry.add("aten::outer", outerRule);
  registry.add("aten::ger", outerRule);
  registry.add("aten::dot", dotRule);
  registry.add("aten::vdot", dotRule);
  registry.add("aten::einsum", einsumRule);
}

} // namespace nnsc::ops::rules
