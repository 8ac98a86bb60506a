// validatePlan: the checks every plan passes before codegen sees it.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "nnsc/Plan/NodeSplit.h"
#include "nnsc/Plan/Pipeline.h"
#include "nnsc/Plan/Plan.h"

namespace nnsc::plan {

Status checkPlanEnvelope(const proto::Plan &plan) {
  if (plan.format_version() == 0 || plan.format_version() > kPlanFormatVersion)
    return errorf("unsupported plan format version {} (this build reads 1..{})",
                  plan.format_version(), kPlanFormatVersion);
  if (plan.plan_ngpus() <= 0)
    return errorf("plan_ngpus is {}; expected a positive number", plan.plan_ngpus());
  // Bounded before anything loops over ranks (codegen lays out each one).
  if (plan.runtime_ngpus() > kMaxRuntimeNgpus)
    return errorf("runtime_ngpus {} is above the limit of {} devices", plan.runtime_ngpus(),
                  kMaxRuntimeNgpus);
  if (plan.runtime_ngpus() <= 0 || plan.runtime_ngpus() % plan.plan_ngpus() != 0)
    return errorf("runtime_ngpus {} is not a positive multiple of plan_ngpus {}",
                  plan.runtime_ngpus(), plan.plan_ngpus());
  if (plan.micro_batches() <= 0)
    return errorf("micro_batches is {}; expected a positive number", plan.micro_batches());
  if (plan.zero() < 0 || plan.zero() > kMaxZeroStage)
    return errorf("zero is {}; this build implements ZeRO stages 0 to {}", plan.zero(),
                  kMaxZeroStage);
  NNSC_RETURN_IF_ERROR(checkZeroNgroups(plan));
  // ZeRO-2 reduces every micro-batch's gradients as its backward ends; a
  // pipeline's accumulate over the schedule (DeepSpeed refuses the pair too).
  if (plan.zero() >= 2 && !plan.schedule().empty())
    return errorf("zero {} with a pipeline ({} schedule): ZeRO-{} reduce-scatters each "
                  "micro-batch's gradients, a pipeline accumulates them over its schedule; use "
                  "zero 1 (optimizer states sharded)",
                  plan.zero(), plan.schedule(), plan.zero());
  return checkZero3(plan);
}

// ZeRO-3 gathers a recompute group's parameters when the group runs (its
// forward, and the re-run in backward) and releases them after.
Status checkZero3(const proto::Plan &plan) {
  if (plan.zero() == 3 &&
      std::none_of(plan.nodes().begin(), plan.nodes().end(),
                   [](const proto::NodePlan &np) { return np.recompute_group() >= 0; }))
    return errorf("zero 3 without recompute groups: ZeRO-3 gathers each recompute group's "
                  "parameters when the group runs and releases them after; add "
                  "--recompute-modules CLASS (for example the transformer block) or a plan "
                  "file's recompute: list");
  return Status::ok();
}

Status checkZeroNgroups(const proto::Plan &plan) {
  const int n = plan.zero_ngroups();
  if (n < 0)
    return errorf("zero_ngroups is {}; expected a positive number of blocks", n);
  if (n <= 1)
    return Status::ok();
  if (plan.zero() == 0)
    return errorf("zero_ngroups {} without ZeRO: the blocks shard ZeRO's states; set zero 1 or 2",
                  n);
  const int copies = plan.runtime_ngpus() / std::max(1, plan.plan_ngpus());
  if (copies % n != 0)
    return errorf("zero_ngroups {} does not divide the {} data-parallel copies (runtime_ngpus "
                  "{} / plan_ngpus {}): every block must hold whole copies",
                  n, copies, plan.runtime_ngpus(), plan.plan_ngpus());
  return Status::ok();
}

namespace {

Status checkStages(const proto::Plan &plan, std::set<int> &stageIds) {
  for (const proto::Stage &s : plan.stages()) {
    if (!stageIds.insert(s.id()).second)
      return errorf("stage {} is declared twice", s.id());
    for (int d : s.devices())
      if (d < 0 || d >= plan.plan_ngpus())
        return errorf("stage {} lists device {} outside 0..{}", s.id(), d, plan.plan_ngpus() - 1);
  }
  if (stageIds.empty())
    return errorf("the plan declares no stage");
  return Status::ok();
}

Status checkNode(const proto::Plan &plan, const ir::Graph &graph, const proto::NodePlan &np,
                 const std::set<int> &stageIds) {
  const ir::Node &node = graph.nodes()[static_cast<size_t>(np.node())];
  if (np.devices().empty())
    return errorf("node {} ({}) runs on no device", node.id, node.op);
  std::set<int> seen;
  for (int d : np.devices()) {
    if (d < 0 || d >= plan.plan_ngpus())
      return errorf("node {} ({}) is placed on device {} outside 0..{}", node.id, node.op, d,
                    plan.plan_ngpus() - 1);
    if (!seen.insert(d).second)
      return errorf("node {} ({}) lists device {} twice", node.id, node.op, d);
  }
  if (np.num() < 1) // a stage's split has as many parts as it lists devices (below)
    return errorf("node {} ({}) is split into {} parts; expected 1 or more", node.id, node.op,
                  np.num());
  if (np.num() > 1 && np.devices_size() != np.num())
    return errorf("node {} ({}) is split into {} parts but lists {} devices", node.id, node.op,
                  np.num(), np.devices_size());
  if (!stageIds.count(np.stage()))
    return errorf("node {} ({}) is in stage {}, which the plan does not declare", node.id, node.op,
                  np.stage());
  // A group holds at least one node: ids past the node count are damage (the
  // printer and the runtime loop over every id up to the largest).
  if (np.recompute_group() < -1 || np.recompute_group() >= plan.nodes_size())
    return errorf("node {} ({}) is in recompute group {}; expected -1 (none) or a group id "
                  "below {}, the plan's node count",
                  node.id, node.op, np.recompute_group(), plan.nodes_size());
  auto effect = nodeSplitEffect(graph, node, np);
  if (!effect)
    return effect.status().withContext(describeNode(node));
  return Status::ok();
}

// A split input is fed in plan_ngpus equal parts along a dim it has.
Status checkInputs(const proto::Plan &plan, const ir::Graph &graph) {
  std::set<int64_t> seen;
  for (const proto::InputPlan &in : plan.inputs()) {
    bool isInput =
        std::find(graph.inputs.begin(), graph.inputs.end(), in.tensor()) != graph.inputs.end();
    if (!isInput)
      return errorf("input plan names tensor %{}, which is not a graph input", in.tensor());
    if (!seen.insert(in.tensor()).second)
      return errorf("input %{} is planned twice", in.tensor());
    if (in.num() <= 1)
      continue;
    const ir::Tensor &t = graph.tensor(in.tensor());
    if (in.num() != plan.plan_ngpus())
      return errorf("input '{}' is split into {} parts; expected plan_ngpus ({})", t.name, in.num(),
                    plan.plan_ngpus());
    if (in.dim() < 0 || in.dim() >= static_cast<int>(t.shape.size()))
      return errorf("input '{}' has no dim {} (shape {})", t.name, in.dim(),
                    ir::shapeString(t.shape));
    if (t.shape[static_cast<size_t>(in.dim())] % in.num() != 0)
      return errorf("dim {} of input '{}' (size {}) does not split into {} parts", in.dim(), t.name,
                    t.shape[static_cast<size_t>(in.dim())], in.num());
  }
  return Status::ok();
}

} // namespace

Status validatePlan(const proto::Plan &plan, const ir::Graph &graph) {
  NNSC_RETURN_IF_ERROR(checkPlanEnvelope(plan));
  std::set<int> stageIds;
  NNSC_RETURN_IF_ERROR(checkStages(plan, stageIds));
  if (plan.nodes_size() != static_cast<int>(graph.nodes().size()))
    return errorf("the plan has {} nodes but the graph has {}; was it made for another graph?",
                  plan.nodes_size(), graph.nodes().size());
  for (int i = 0; i < plan.nodes_size(); ++i) {
    const proto::NodePlan &np = plan.nodes(i);
    if (np.node() != i)
      return errorf("plan entry {} is for node {}; expected one entry per node in order", i,
                    np.node());
    NNSC_RETURN_IF_ERROR(checkNode(plan, graph, np, stageIds));
  }
  if (plan.stages_size() > 1)
    NNSC_RETURN_IF_ERROR(checkPipelineStages(plan, graph));
  return checkInputs(plan, graph);
}

} // namespace nnsc::plan
