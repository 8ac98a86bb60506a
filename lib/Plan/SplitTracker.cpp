// Tracking tensor splits while a plan is built; the "follow" rule.
#include "SplitTracker.h"

#include "nnsc/Plan/NodeSplit.h"

namespace nnsc::plan {

void SplitTracker::record(const ir::Node &node, const proto::NodePlan &np,
                          const ops::SplitEffect &effect) {
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    TensorSplit s;
    if (np.num() > 1 && effect.valueSplit)
      s = {-1, np.num(), true};
    else if (np.num() > 1 && effect.outputDims[o] >= 0)
      s = {effect.outputDims[o], np.num(), false};
    splits_.at(node.outputs[o]) = s;
  }
}

namespace {

// The node split along the identifier at (input, dim), if that keeps the
// input split along `dim`.
std::optional<proto::NodePlan> followOne(const ir::Graph &graph, const ir::Node &node,
                                         const ops::BoundAnno &bound, int input, int dim,
                                         const std::vector<int> &devices, const std::string &rule) {
  auto ident = ops::identAt(bound, input, dim);
  if (!ident)
    return std::nullopt;
  auto effect = ops::splitEffect(bound, *ident, static_cast<int>(devices.size()));
  if (!effect || effect->inputDims[static_cast<size_t>(input)] != dim)
    return std::nullopt;
  auto np = splitNodeByIdent(graph, node, *ident, devices, rule);
  if (!np)
    return std::nullopt;
  return np.take();
}

} // namespace

std::optional<proto::NodePlan> followInputs(const ir::Graph &graph, const ir::Node &node,
                                            const SplitTracker &tracker,
                                            const std::vector<int> &devices,
                                            const std::string &rule) {
  if (node.annotations.empty() || devices.size() < 2)
    return std::nullopt;
  auto bound = bindNode(graph, node);
  if (!bound)
    return std::nullopt;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const TensorSplit &s = tracker.of(node.inputs[i]);
    if (s.partial || s.dim < 0 || s.num != static_cast<int>(devices.size()))
      continue;
    if (auto np = followOne(graph, node, *bound, static_cast<int>(i), s.dim, devices, rule))
      return np;
  }
  return std::nullopt;
}

proto::Plan newPlan(const std::string &policy, int planNgpus, int runtimeNgpus) {
  proto::Plan plan;
  plan.set_policy(policy);
  plan.set_plan_ngpus(planNgpus);
  plan.set_runtime_ngpus(runtimeNgpus);
  proto::Stage *stage = plan.add_stages();
  stage->set_id(0);
  for (int d = 0; d < planNgpus; ++d)
    stage->add_devices(d);
  return plan;
}

Status addNodePlan(const ir::Graph &graph, const ir::Node &node, proto::NodePlan np,
                   proto::Plan &plan, SplitTracker &tracker) {
  auto effect = nodeSplitEffect(graph, node, np);
  if (!effect)
    return Status::internal(effect.status().withContext(describeNode(node)).message());
  tracker.record(node, np, *effect);
  *plan.add_nodes() = std::move(np);
  return Status::ok();
}

} // namespace nnsc::plan
