// The plan's device loads for the cost model (Memory.h).
#include "nnsc/Plan/Memory.h"

#include <map>
#include <set>

#include "nnsc/Plan/NodeSplit.h"
#include "nnsc/Plan/Pipeline.h"
#include "nnsc/Plan/PipelineSchedule.h"

namespace nnsc::plan {

namespace {

bool isState(const ir::Tensor &t) {
  return t.kind == ir::TensorKind::Param || t.kind == ir::TensorKind::Buffer ||
         t.kind == ir::TensorKind::Constant;
}

cost::TensorInfo localInfo(const ir::Tensor &t, int splitDim, int num, bool needsGrad) {
  cost::TensorInfo info{t.shape, t.dtype, needsGrad, isState(t)};
  if (splitDim >= 0 && num > 1 && static_cast<size_t>(splitDim) < info.shape.size())
    info.shape[static_cast<size_t>(splitDim)] /= num;
  return info;
}

cost::DevicePart makePart(const ir::Graph &graph, const ir::Node &node, const proto::NodePlan &np,
                          const ops::SplitEffect &effect, const std::vector<bool> &flow) {
  cost::DevicePart part;
  part.node = node.id;
  part.recomputeGroup = np.recompute_group();
  part.shapes.node = &node;
  int num = std::max(1, np.num());
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const ir::Tensor &t = graph.tensor(node.inputs[i]);
    part.shapes.inputs.push_back(
        localInfo(t, effect.inputDims[i], num, flow[static_cast<size_t>(t.id)]));
    part.inputIds.push_back(t.id);
  }
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    const ir::Tensor &t = graph.tensor(node.outputs[o]);
    int dim = effect.valueSplit ? -1 : effect.outputDims[o];
    part.shapes.outputs.push_back(localInfo(t, dim, num, flow[static_cast<size_t>(t.id)]));
    part.outputIds.push_back(t.id);
  }
  return part;
}

// The fraction of each parameter/buffer each device holds: the largest part
// any node on that device reads (a whole read wins over a split one); and
// the recompute group that alone reads it there (-1 none, -2 not read yet).
struct Held {
  double fraction = 0;
  int group = -2;
};
using Holdings = std::map<std::pair<int, int64_t>, Held>;

void holdState(const ir::Graph &graph, const ir::Node &node, const proto::NodePlan &np,
               const ops::SplitEffect &effect, Holdings &held) {
  double partFraction = np.num() > 1 ? 1.0 / np.num() : 1.0;
  for (int d : np.devices())
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const ir::Tensor &t = graph.tensor(node.inputs[i]);
      if (t.kind != ir::TensorKind::Param && t.kind != ir::TensorKind::Buffer)
        continue;
      Held &h = held[{d, t.id}];
      h.fraction = std::max(h.fraction, effect.inputDims[i] >= 0 ? partFraction : 1.0);
      int g = std::max(-1, np.recompute_group());
      h.group = h.group == -2 || h.group == g ? g : -1;
    }
}

void addHoldings(const ir::Graph &graph, Holdings &held, std::vector<cost::DeviceLoad> &loads) {
  // State that no node reads still lives somewhere: codegen keeps it on device 0.
  std::set<int64_t> read;
  for (const auto &entry : held)
    read.insert(entry.first.second);
  for (const ir::Tensor &t : graph.tensors())
    if ((t.kind == ir::TensorKind::Param || t.kind == ir::TensorKind::Buffer) && !read.count(t.id))
      held[{0, t.id}] = {1.0, -1};
  for (const auto &[key, h] : held) {
    const ir::Tensor &t = graph.tensor(key.second);
    cost::StateHolding s;
    s.tensor = t.id;
    s.elements = h.fraction * static_cast<double>(ir::numel(t.shape));
    s.recomputeGroup = std::max(-1, h.group);
    s.dtype = t.dtype;
    s.trainable = t.kind == ir::TensorKind::Param && t.requiresGrad;
    loads[static_cast<size_t>(key.first)].state.push_back(s);
  }
}

// A pipelined device holds the activations of every micro-batch whose
// forward has run and whose backward has not: per chunk, one micro-batch's
// saved tensors, summed over the schedule's passes at their peak.
void holdInFlight(const proto::Plan &plan, const cost::DeviceLoad &load, int stages,
                  const cost::MemoryOptions &options, cost::DeviceMemory &m) {
  int chunks = std::max(1, plan.stages_size() / stages);
  int physical = -1;
  std::vector<cost::DeviceLoad> perChunk(static_cast<size_t>(chunks));
  for (const cost::DevicePart &part : load.parts) {
    int vs = plan.nodes(static_cast<int>(part.node)).stage();
    physical = vs % stages;
    perChunk[static_cast<size_t>(std::min(vs / stages, chunks - 1))].parts.push_back(part);
  }
  if (physical < 0)
    return;
  std::vector<double> saved;
  for (const cost::DeviceLoad &chunk : perChunk)
    saved.push_back(cost::deviceMemory(chunk, options).activationBytes);
  auto passes = pipelinePasses(plan.schedule().empty() ? "1f1b" : plan.schedule(), stages, chunks,
                               std::max(1, plan.micro_batches()), physical);
  if (!passes) // validatePlan has checked the schedule
    return;
  m.activationBytes = peakActivations(*passes, saved);
  m.inFlight = peakInFlight(*passes);
}

} // namespace

std::vector<cost::DeviceLoad> deviceLoads(const ir::Graph &graph, const proto::Plan &plan) {
  std::vector<cost::DeviceLoad> loads(static_cast<size_t>(plan.plan_ngpus()));
  for (size_t d = 0; d < loads.size(); ++d)
    loads[d].device = static_cast<int>(d);
  std::vector<bool> flow = cost::gradientFlow(graph);
  Holdings held;
  for (const proto::NodePlan &np : plan.nodes()) {
    const ir::Node &node = graph.nodes()[static_cast<size_t>(np.node())];
    auto effect = nodeSplitEffect(graph, node, np);
    if (!effect) // validatePlan has checked every node; skip defensively otherwise
      continue;
    holdState(graph, node, np, *effect, held);
    cost::DevicePart part = makePart(graph, node, np, *effect, flow);
    for (int d : np.devices())
      loads[static_cast<size_t>(d)].parts.push_back(part);
  }
  addHoldings(graph, held, loads);
  return loads;
}

std::vector<cost::DeviceMemory> estimateMemory(const ir::Graph &graph, const proto::Plan &plan,
                                               cost::MemoryOptions options) {
  options.zero = plan.zero();
  options.dpSize = plan.runtime_ngpus() / std::max(1, plan.plan_ngpus());
  options.zeroNgroups = std::max(1, plan.zero_ngroups());
  std::vector<cost::DeviceMemory> memory;
  const int stages = physicalStages(plan);
  for (const cost::DeviceLoad &load : deviceLoads(graph, plan)) {
    cost::DeviceMemory m = cost::deviceMemory(load, options);
    if (stages > 1)
      holdInFlight(plan, load, stages, options, m);
    memory.push_back(m);
  }
  return memory;
}

} // namespace nnsc::plan
