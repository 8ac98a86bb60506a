// Losses, following nnScaler: with reduction 'none' the batch dims split; with
// 'sum' they are reductions ('+': the parts are partial sums); with 'mean'
// they are frozen (a mean of a part is not a partial sum of the mean). The
// class dim is always frozen (log-softmax over it). A reduced loss is 0-dim,
// which the grammar can only write '?': such an op is replicate-only until
// 0-dim outputs can carry a partial-sum value split.
#include "RuleUtil.h"
#include "Rules.h"

namespace nnsc::ops::rules {
namespace {

enum class Reduction { None = 0, Mean = 1, Sum = 2 };

Reduction reductionOf(const ir::Node &n) {
  int64_t r = intArg(n, "reduction").value_or(1);
  if (r == 0)
    return Reduction::None;
  return r == 2 ? Reduction::Sum : Reduction::Mean;
}

std::string_view batchSuffix(Reduction r) {
  return r == Reduction::Sum ? "+" : r == Reduction::Mean ? "^" : "";
}

// cross_entropy_loss / nll_loss / nll_loss_nd / nll_loss2d:
// input [C] or [N, C, *d], target [] or [N, *d] (class indices) or the
// input's shape (class probabilities), optional weight [C].
std::vector<std::string> classLossRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() < 2 || n.outputs.empty() || inRank(g, n, 0) == 0)
    return {};
  const ir::Shape &in = inShape(g, n, 0), &target = inShape(g, n, 1);
  Reduction red = reductionOf(n);
  size_t classDim = in.size() == 1 ? 0 : 1;
  Dims dims = NameGen().take(in.size());
  Dims outDims = dims;
  outDims.erase(outDims.begin() + static_cast<long>(classDim));
  for (size_t d = 0; d < dims.size(); ++d)
    addSuffix(dims, d, d == classDim ? "^" : batchSuffix(red));
  Dims indexTarget = dims;
  indexTarget.erase(indexTarget.begin() + static_cast<long>(classDim));
  std::vector<Dims> ins{dims};
  if (target.size() == in.size())
    ins.push_back(dims);
  else if (target.size() + 1 == in.size())
    ins.push_back(indexTarget);
  else
    return {};
  for (size_t i = 2; i < n.inputs.size(); ++i)
    ins.push_back({dims[classDim]}); // class weights
  std::vector<Dims> outs{red == Reduction::None ? outDims : Dims{}};
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
  Reduction red = reductionOf(n);
  Dims dims = withSuffix(NameGen().take(in.size()), batchSuffix(red));
  std::vector<Dims> ins;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    auto d = broadcastDims(inShape(g, n, i), in, dims);
    if (!d)
      return {};
    ins.push_back(*d);
  }
  return single(annoStr(ins, {red == Reduction::None ? dims : Dims{}}));
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
