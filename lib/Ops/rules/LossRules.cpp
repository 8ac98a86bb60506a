// Losses, following nnScaler: with reduction 'none' the batch dims split (the
// output keeps them); with 'sum' they are reductions ('+': the parts are
// partial sums); with 'mean' they are frozen (a mean over part of the batch is
// not a partial sum of the mean). The class dim is always frozen (log-softmax
// over it). A reduced loss is 0-dim, written '?' (replicate-only).
//
// The graph's loss node is the exception (the node producing
// graph.outputs[graph.lossOutput]): its 0-dim output is written '()', so a
// 'sum' splits by value, and a 'mean' leaves its batch dims plain, absent from
// the output. Each part then computes the mean of its own share of the
// averaged elements, and the partitioner weighs part i by share_i = 1/num, the
// fraction of the split dim it holds (LossInfo in Transform/Partition.h; the
// runtime scales the local loss by it before backward). Every batch dim is
// averaged, so that is also its fraction of the averaged elements, and the
// parts add up to the whole mean. That is right only for the loss: any other
// reader of a per-part mean would take it for the whole value (and a node
// with a second output, nll_loss_forward's total_weight, stays as it was).
// It is right only when the mean divides by a count known from the shapes:
// every element of a pointwise loss (their weights scale terms, not the
// count); every non-class element of a class loss. Class weights make the
// divisor the sum of the targets' weights (data-dependent), so a mean class
// loss with a weight keeps its batch frozen. ignore_index would too, but
// cannot be checked statically: PyTorch always passes one (-100 by default,
// nanoGPT -1), so we assume that no target equals it (docs/annotations.md);
// with ignored targets the parts would be weighed by their shapes instead of
// their counted targets.
#include "RuleUtil.h"
#include "Rules.h"

#include <algorithm>

namespace nnsc::ops::rules {
namespace {

enum class Reduction { None = 0, Mean = 1, Sum = 2 };

Reduction reductionOf(const ir::Node &n) {
  int64_t r = intArg(n, "reduction").value_or(1);
  if (r == 0)
    return Reduction::None;
  return r == 2 ? Reduction::Sum : Reduction::Mean;
}

/// True when `n` produces the graph's loss and no node reads it: its per-part
/// values are weighed by their shares only where the trainer sums the loss
/// (a reader would take them for plain partial sums).
bool isGraphLoss(const ir::Graph &g, const ir::Node &n) {
  if (g.lossOutput < 0 || g.lossOutput >= static_cast<int>(g.outputs.size()))
    return false;
  int64_t loss = g.outputs[static_cast<size_t>(g.lossOutput)];
  if (std::find(n.outputs.begin(), n.outputs.end(), loss) == n.outputs.end())
    return false;
  for (const ir::Node &reader : g.nodes())
    if (std::find(reader.inputs.begin(), reader.inputs.end(), loss) != reader.inputs.end())
      return false;
  return true;
}

/// How the batch dims of a loss node split, and its reduced output.
struct BatchRole {
  std::string_view suffix; ///< "" splits, "+" splits by value, "^" frozen
  Dims reduced;            ///< the reduced output: `()`, or `?` (replicate-only)
};

/// The role of the batch dims of `n` under its reduction. `hasBatch`: the
/// node has dims besides the class dim; `countKnown`: its mean divides by
/// their element count (see the file comment); a sum adds up whatever its
/// weights and counts.
BatchRole batchRole(const ir::Graph &g, const ir::Node &n, bool hasBatch, bool countKnown) {
  Reduction red = reductionOf(n);
  if (red == Reduction::None)
    return {"", {}};
  bool loss = hasBatch && n.outputs.size() == 1 && isGraphLoss(g, n);
  if (red == Reduction::Sum)
    return {"+", loss ? scalarDims() : Dims{}};
  return loss && countKnown ? BatchRole{"", scalarDims()} : BatchRole{"^", {}};
}

// cross_entropy_loss / nll_loss / nll_loss_nd / nll_loss2d:
// input [C] or [N, C, *d], target [] or [N, *d] (class indices) or the
// input's shape (class probabilities), optional weight [C].
std::vector<std::string> classLossRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() < 2 || n.outputs.empty() || inRank(g, n, 0) == 0)
    return {};
  const ir::Shape &in = inShape(g, n, 0), &target = inShape(g, n, 1);
  bool classWeights = n.inputs.size() > 2;
  BatchRole role = batchRole(g, n, in.size() > 1, !classWeights);
  size_t classDim = in.size() == 1 ? 0 : 1;
  Dims dims = NameGen().take(in.size());
  for (size_t d = 0; d < dims.size(); ++d)
    addSuffix(dims, d, d == classDim ? "^" : role.suffix);
  Dims batchDims = dims;
  batchDims.erase(batchDims.begin() + static_cast<long>(classDim));
  std::vector<Dims> ins{dims};
  if (target.size() == in.size())
    ins.push_back(dims);
  else if (target.size() + 1 == in.size())
    ins.push_back(batchDims);
  else
    return {};
  for (size_t i = 2; i < n.inputs.size(); ++i)
    ins.push_back({dims[classDim]}); // class weights
  std::vector<Dims> outs{reductionOf(n) == Reduction::None ? batchDims : role.reduced};
  outs.resize(n.outputs.size()); // nll_loss_forward's total_weight: 0-dim
  return single(annoStr(ins, outs));
}

// mse_loss / l1_loss / smooth_l1_loss / huber_loss / binary_cross_entropy
// (with_logits) / soft_margin_loss / kl_div: elementwise over
// (input, target, weights...) then reduced over everything.
std::vector<std::string> pointwiseLossRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.empty() || n.outputs.size() != 1)
    return {};
  const ir::Shape &in = inShape(g, n, 0);
  BatchRole role = batchRole(g, n, !in.empty(), true);
  Dims dims = withSuffix(NameGen().take(in.size()), role.suffix);
  std::vector<Dims> ins;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    auto d = broadcastDims(inShape(g, n, i), in, dims);
    if (!d)
      return {};
    ins.push_back(*d);
  }
  return single(annoStr(ins, {reductionOf(n) == Reduction::None ? dims : role.reduced}));
}

} // namespace

void registerLossRules(OpRegistry &registry) {
  for (const char *op : {"aten::cross_entropy_loss", "aten::nll_loss", "aten::nll_loss_nd",
                         "aten::nll_loss2d", "aten::nll_loss_forward"})
    registry.add(op, classLossRule);
  for (const char *op :
       {"aten::mse_loss", "aten::l1_loss", "aten::smooth_l1_loss", "aten::huber_loss",
        "aten::binary_cross_entropy", "aten::binary_cross_entropy_with_logits",
        "aten::soft_margin_loss", "aten::kl_div"})
    registry.add(op, pointwiseLossRule);
}

} // namespace nnsc::ops::rules
