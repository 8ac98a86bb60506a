#pragma once
// Gradient reducers and the loss of a partitioned graph (private to
// nnsc_transform; the semantics are documented in Partition.h).

#include <vector>

#include "nnsc/Plan/NodeSplit.h"
#include "nnsc/Transform/Partition.h"

namespace nnsc::transform {

/// The node producing the graph's loss output, or -1.
int64_t lossNodeOf(const ir::Graph &graph);

/// One reducer per distinct shard of every trainable parameter, from its
/// placement: Sum over the devices of a shard when `keepPartial[tensor]`
/// (its reads leave partial gradients), else Average.
std::vector<GradReducer> gradReducers(const ir::Graph &graph, const PartitionedGraph &pg,
                                      const std::vector<bool> &keepPartial);

/// The loss on each device of its placement, and the scale of each part.
LossInfo lossInfo(const ir::Graph &graph, const PartitionedGraph &pg,
                  const std::vector<plan::ResolvedSplit> &splits);

} // namespace nnsc::transform
