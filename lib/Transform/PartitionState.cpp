// Gradient reducers and the loss (PartitionState.h).
#include "PartitionState.h"

#include <algorithm>
#include <map>

namespace nnsc::transform {

int64_t lossNodeOf(const ir::Graph &graph) {
  if (graph.lossOutput < 0 || graph.lossOutput >= static_cast<int>(graph.outputs.size()))
    return -1;
  int64_t loss = graph.outputs[static_cast<size_t>(graph.lossOutput)];
  for (const ir::Node &node : graph.nodes())
    if (std::find(node.outputs.begin(), node.outputs.end(), loss) != node.outputs.end())
      return node.id;
  return -1;
}

std::vector<GradReducer> gradReducers(const ir::Graph &graph, const PartitionedGraph &pg,
                                      const std::vector<bool> &keepPartial) {
  std::vector<GradReducer> out;
  for (const ir::Tensor &t : graph.tensors()) {
    if (t.kind != ir::TensorKind::Param || !t.requiresGrad)
      continue;
    const TensorPlacement &p = pg.tensors[static_cast<size_t>(t.id)];
    std::map<std::pair<std::vector<int64_t>, std::vector<int64_t>>, size_t> byShard;
    for (size_t i = 0; i < p.pieces.size(); ++i) {
      const SubTensor &s = p.pieces[i];
      auto [it, fresh] = byShard.try_emplace({s.start, s.stop}, out.size());
      if (fresh)
        out.push_back(
            {t.id,
             s,
             {},
             keepPartial[static_cast<size_t>(t.id)] ? GradReduce::Sum : GradReduce::Average});
      out[it->second].devices.push_back(p.layout.devices()[i]);
    }
  }
  for (GradReducer &r : out)
    std::sort(r.devices.begin(), r.devices.end());
  return out;
}

LossInfo lossInfo(const ir::Graph &graph, const PartitionedGraph &pg,
                  const std::vector<plan::ResolvedSplit> &splits) {
  LossInfo info;
  info.node = lossNodeOf(graph);
  if (info.node < 0)
    return info;
  info.tensor = graph.outputs[static_cast<size_t>(graph.lossOutput)];
  const TensorPlacement &p = pg.tensors[static_cast<size_t>(info.tensor)];
  const plan::ResolvedSplit &split = splits[static_cast<size_t>(info.node)];
  info.partial = p.layout.v() > 1;
  // A value split adds up as it is; a part that reduced its own share of a
  // split dimension (a mean) counts in proportion to that share.
  double scale = 1.0;
  if (info.partial && !split.effect.valueSplit && split.identSize > 0)
    scale = static_cast<double>(split.identSize / split.num) / static_cast<double>(split.identSize);
  for (size_t i = 0; i < p.pieces.size(); ++i)
    info.parts.push_back({p.layout.devices()[i], p.pieces[i], scale});
  return info;
}

} // namespace nnsc::transform
