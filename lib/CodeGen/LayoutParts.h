#pragma once
// Pieces of a rank layout shared by the whole-plan path (RankLayout.cpp) and
// the partitioned path (PartitionLayout.cpp). Private to nnsc_codegen.

#include "nnsc/CodeGen/RankLayout.h"

namespace nnsc::codegen {

/// A shard holding the whole of `t`.
ShardSpec wholeShard(const ir::Tensor &t, std::string localName, bool constant);

/// The model's inputs, in forward order, with safe argument names, fed and
/// used whole.
std::vector<InputSpec> wholeInputs(const ir::Graph &graph);

/// Tensor constants with dims read by `nodes` or returned: they travel as
/// shard arguments (0-dim ones are written inline). Ascending ids.
std::vector<int64_t> constantsWithDims(const ir::Graph &graph, const std::vector<int64_t> &nodes);

/// Fills rank, world size, plan device and copy of `layout` from `job`.
void placeRank(const JobLayout &job, int rank, RankLayout &layout);

/// The partitioned path of layoutRank (plans spanning several devices).
Expected<RankLayout> layoutPartitionedRank(const ir::Graph &graph, const JobLayout &job, int rank);

/// The plan devices holding the same piece of `tensor` as `device` (device
/// included, ascending); empty when `device` holds none.
std::vector<int> bufferHolders(const transform::PartitionedGraph &pg, int64_t tensor, int device);

/// Adds buffer shard `shard` to `layout`'s sync over `group` (kept in
/// ascending group order).
void addBufferSync(RankLayout &layout, int group, const std::string &shard);

/// The recompute group of node `node` (-1: none).
int recomputeGroupOf(const JobLayout &job, int64_t node);

/// The groups of `job` that contain `rank`, ascending ids.
std::vector<CommGroupSpec> groupsOfRank(const JobLayout &job, int rank);

} // namespace nnsc::codegen
