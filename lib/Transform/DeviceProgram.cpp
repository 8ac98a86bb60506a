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
  // Buffer writes after every node: first the moves of their values, then
  // the writes, so the program ends with one block of them.
  std::vector<int> writes;
  for (size_t w = 0; w < pg.stateWrites.size(); ++w) {
    const StateWrite &write = pg.stateWrites[w];
    if (!pg.tensors[static_cast<size_t>(write.state)].pieceOn(device))
      continue;
    if (write.adapter >= 0 && ran.insert(write.adapter).second)
      out.push_back({ProgramStep::RunAdapter, write.adapter});
    writes.push_back(static_cast<int>(w));
  }
  for (int w : writes)
    out.push_back({ProgramStep::WriteState, w});
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
