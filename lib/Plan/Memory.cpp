#include "nnsc/Plan/Memory.h"

#include <map>
#include <set>

#include "nnsc/Plan/NodeSplit.h"

namespace nnsc::plan {

namespace {

// AdamW keeps exp_avg and exp_avg_sq per trainable element, in float32.
constexpr double kOptimizerBytesPerElement = 8.0;

double tensorBytes(const ir::Tensor &t) {
  return static_cast<double>(ir::numel(t.shape)) * static_cast<double>(ir::dtypeSize(t.dtype));
}

bool isState(const ir::Tensor &t) {
  return t.kind == ir::TensorKind::Param || t.kind == ir::TensorKind::Buffer;
}

// The fraction of each parameter/buffer that each device holds: the largest
// part any node on that device reads (a whole read wins over a split one).
using Holdings = std::map<std::pair<int, int64_t>, double>;

void addNode(const ir::Graph &graph, const ir::Node &node, const proto::NodePlan &np,
             const ops::SplitEffect &effect, Holdings &held, std::vector<DeviceMemory> &mem) {
  double partFraction = np.num() > 1 ? 1.0 / np.num() : 1.0;
  for (int d : np.devices()) {
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const ir::Tensor &t = graph.tensor(node.inputs[i]);
      if (!isState(t))
        continue;
      double f = effect.inputDims[i] >= 0 ? partFraction : 1.0;
      double &h = held[{d, t.id}];
      h = std::max(h, f);
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      // a value split leaves a full-size partial sum on every device
      double f = !effect.valueSplit && effect.outputDims[o] >= 0 ? partFraction : 1.0;
      mem[static_cast<size_t>(d)].activationBytes += f * tensorBytes(graph.tensor(node.outputs[o]));
    }
  }
}

} // namespace

std::vector<DeviceMemory> estimateMemory(const ir::Graph &graph, const proto::Plan &plan) {
  std::vector<DeviceMemory> mem(static_cast<size_t>(plan.plan_ngpus()));
  for (size_t d = 0; d < mem.size(); ++d)
    mem[d].device = static_cast<int>(d);
  Holdings held;
  for (const proto::NodePlan &np : plan.nodes()) {
    const ir::Node &node = graph.nodes()[static_cast<size_t>(np.node())];
    auto effect = nodeSplitEffect(graph, node, np);
    if (effect) // validatePlan has checked every node; skip defensively otherwise
      addNode(graph, node, np, *effect, held, mem);
  }
  // State that no node reads still lives somewhere: codegen keeps it on device 0.
  std::set<int64_t> read;
  for (const auto &entry : held)
    read.insert(entry.first.second);
  for (const ir::Tensor &t : graph.tensors())
    if (isState(t) && !read.count(t.id))
      held[{0, t.id}] = 1.0;
  for (const auto &[key, fraction] : held) {
    const ir::Tensor &t = graph.tensor(key.second);
    DeviceMemory &m = mem[static_cast<size_t>(key.first)];
    double elements = fraction * static_cast<double>(ir::numel(t.shape));
    m.paramElements += static_cast<int64_t>(elements);
    m.paramBytes += fraction * tensorBytes(t);
    if (t.kind == ir::TensorKind::Param && t.requiresGrad) {
      m.gradBytes += fraction * tensorBytes(t);
      m.optimizerBytes += elements * kOptimizerBytesPerElement;
    }
  }
  return mem;
}

} // namespace nnsc::plan
