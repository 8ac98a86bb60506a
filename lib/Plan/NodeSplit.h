#pragma once
// How one NodePlan splits its node, shared by validation and the memory
// estimate (private to nnsc_plan).

#include "nnsc/IR/Graph.h"
#include "nnsc/Ops/AnnotationSplit.h"
#include "nnsc/Support/Status.h"
#include "nnsc/plan.pb.h"

namespace nnsc::plan {

/// The effect of `np`'s partition on `node`'s tensors. A replicated node
/// (num <= 1) has every input and output whole. Otherwise the node's
/// candidate annotations are bound to its shapes and the identifier (`ident`,
/// or the one at input `input`, dim `dim`) is split into `num` parts.
Expected<ops::SplitEffect> nodeSplitEffect(const ir::Graph &graph, const ir::Node &node,
                                           const proto::NodePlan &np);

} // namespace nnsc::plan
