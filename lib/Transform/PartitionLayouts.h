#pragma once
// The RVD layouts a node part reads and writes under its plan entry
// (private to nnsc_transform).

#include <vector>

#include "nnsc/IR/Graph.h"
#include "nnsc/Plan/NodeSplit.h"
#include "nnsc/Support/Status.h"
#include "nnsc/Transform/RvdLayout.h"

namespace nnsc::transform {

/// One layout per node input (what the parts read) and output (what they
/// write), over the node's devices in part order.
struct NodeLayouts {
  std::vector<RvdLayout> inputs;
  std::vector<RvdLayout> outputs;
};

/// Layouts for `node` split as `split` on `devices`: a whole node reads and
/// writes every tensor replicated; a split node reads split inputs as D
/// chunks, addends of a value split as partial sums (V), the others
/// replicated, and writes D chunks, or partial sums (V) for a value split.
/// `shareOutput`: an output that the split does not cut and that is not a
/// value split is written as V too (a loss reduced per part); otherwise such
/// an output is replicated (the annotation promises equal values).
Expected<NodeLayouts> nodeLayouts(const ir::Graph &graph, const ir::Node &node,
                                  const plan::ResolvedSplit &split, const std::vector<int> &devices,
                                  bool shareOutput);

/// `layout` with its partial sums held whole: the V count moved into R. How
/// state is stored when its reader wants partial sums (an addend).
Expected<RvdLayout> withoutPartials(const RvdLayout &layout);

/// The fully replicated layout of `shape` over `devices`.
Expected<RvdLayout> replicatedLayout(const ir::Shape &shape, const std::vector<int> &devices);

/// `shape` cut into devices.size() chunks along `dim`.
Expected<RvdLayout> splitLayout(const ir::Shape &shape, int dim, const std::vector<int> &devices);

/// Groups of devices holding the same piece (same V and D coordinates),
/// each in R order, sorted by first member.
std::vector<std::vector<int>> replicaGroups(const RvdLayout &layout);

} // namespace nnsc::transform
