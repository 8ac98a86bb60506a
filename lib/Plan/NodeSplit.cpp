#include "NodeSplit.h"

#include <fmt/format.h>

#include "nnsc/Ops/Annotation.h"

namespace nnsc::plan {

namespace {

ops::SplitEffect wholeEffect(const ir::Node &node) {
  ops::SplitEffect e;
  e.inputDims.assign(node.inputs.size(), -1);
  e.outputDims.assign(node.outputs.size(), -1);
  return e;
}

std::vector<ir::Shape> shapesOf(const ir::Graph &graph, const std::vector<int64_t> &ids) {
  std::vector<ir::Shape> shapes;
  for (int64_t id : ids)
    shapes.push_back(graph.tensor(id).shape);
  return shapes;
}

} // namespace

Expected<ops::SplitEffect> nodeSplitEffect(const ir::Graph &graph, const ir::Node &node,
                                           const proto::NodePlan &np) {
  if (np.num() <= 1)
    return wholeEffect(node);
  if (node.annotations.empty())
    return errorf("{} is replicate-only (no partition annotation) but the plan splits it into {}",
                  node.op, np.num());
  auto candidates = ops::parseCandidates(node.annotations);
  if (!candidates)
    return candidates.status();
  auto bound =
      ops::bindFirstMatch(*candidates, shapesOf(graph, node.inputs), shapesOf(graph, node.outputs));
  if (!bound)
    return bound.status();
  std::string ident = np.ident();
  if (ident.empty()) {
    auto at = ops::identAt(*bound, np.input(), np.dim());
    if (!at)
      return at.status();
    ident = *at;
  }
  return ops::splitEffect(*bound, ident, np.num());
}

} // namespace nnsc::plan
