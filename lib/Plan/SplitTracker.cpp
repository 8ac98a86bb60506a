// Tracking tensor splits while a plan is built; the "follow" rule.
#include "SplitTracker.h"

#include "nnsc/Plan/NodeSplit.h"

namespace nnsc::plan {

void SplitTracker::record(const ir::Node &node, const proto::NodePlan &np,
                          const ops::SplitEffect &effect) {
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    TensorSplit s;
    if (np.num() > 1 && effect.valueSplit)
      s = {-1, np.num(), true, 1};
    else if (np.num() > 1 && effect.outputDims[o] >= 0)
      s = {effect.outputDims[o], np.num(), false, effect.outputBlocks[o]};
    splits_.at(node.outputs[o]) = s;
  }
}

namespace {

// The node split along `ident` interleaved over `interleave`, if that keeps
// the input split as `s`.
std::optional<proto::NodePlan> followIdent(const ir::Graph &graph, const ir::Node &node,
                                           const ops::BoundAnno &bound, int input,
                                           const TensorSplit &s, const std::string &ident,
                                           int64_t interleave, const std::vector<int> &devices,
                                           const std::string &rule) {
  auto effect = ops::splitEffect(bound, ident, static_cast<int>(devices.size()), interleave);
  auto i = static_cast<size_t>(input);
  if (!effect || effect->inputDims[i] != s.dim || effect->inputBlocks[i] != s.blocks)
    return std::nullopt;
  auto np = splitNodeByIdent(graph, node, ident, devices, rule, static_cast<int>(interleave));
  if (!np)
    return std::nullopt;
  return np.take();
}

// The node split along a member of the input's split dim, if one keeps the
// input's split: a member with members of total size L left of it leaves
// L * g blocks when interleaved over g.
std::optional<proto::NodePlan> followOne(const ir::Graph &graph, const ir::Node &node,
                                         const ops::BoundAnno &bound, int input,
                                         const TensorSplit &s, const std::vector<int> &devices,
                                         const std::string &rule) {
  const ops::ShapeAnno &shape = bound.expanded.inputs.at(static_cast<size_t>(input));
  if (shape.unknown || s.dim >= static_cast<int>(shape.dims.size()))
    return std::nullopt;
  int64_t left = 1;
  for (const ops::DimIdent &member : shape.dims[static_cast<size_t>(s.dim)].idents) {
    if (!member.numeric && s.blocks % left == 0)
      if (auto np = followIdent(graph, node, bound, input, s, member.name, s.blocks / left, devices,
                                rule))
        return np;
    left *= bound.sizes.at(member.name);
  }
  return std::nullopt;
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
    if (auto np = followOne(graph, node, *bound, static_cast<int>(i), s, devices, rule))
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
