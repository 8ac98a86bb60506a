// What one plan device runs, in order, and its local arguments (Partition.h).
#include <set>

#include "nnsc/Ops/LocalArgs.h"
#include "nnsc/Transform/Partition.h"

namespace nnsc::transform {

std::vector<ProgramStep> deviceProgram(const PartitionedGraph &pg, int device) {
  std::vector<ProgramStep> out;
  std::set<int> ran;
  for (size_t n = 0; n < pg.parts.size(); ++n) {
    const NodePart *part = pg.partOn(static_cast<int64_t>(n), device);
    if (!part)
      continue;
    for (int a : part->inputAdapters)
      if (a >= 0 && ran.insert(a).second)
        out.push_back({ProgramStep::RunAdapter, a});
    out.push_back({ProgramStep::RunNode, static_cast<int>(n)});
  }
  return out;
}

Expected<std::vector<ir::Argument>> localArgs(const ir::Graph &graph, const NodePart &part) {
  ops::LocalShapes local;
  for (const SubTensor &s : part.inputs)
    local.inputs.push_back(s.shape());
  for (const SubTensor &s : part.outputs)
    local.outputs.push_back(s.shape());
  return ops::localizeArgs(graph, graph.nodes().at(static_cast<size_t>(part.node)), local);
}

} // namespace nnsc::transform
