#pragma once
/// The text form of a partitioned graph's communication (`nnsc-plan --print`
/// after the node table):
///
///   communication over 2 plan devices: 4 adapters
///     adapter 0: %48 float32[2, 32, 32] R1V2D1,1,1 -> R2V1D1,1,1 on [0,1]
///         from node 25 aten::linear (transformer.h.0.attn.c_proj); read by node 26 ...
///       1. all_reduce group [0,1] -> [2, 32, 32]: forward all_reduce, backward identity
///   per layer (collectives; local splits and identities not counted):
///     transformer.h.0: forward 2 all_reduce; backward 2 all_reduce
///   gradient reducers: ...
///   loss %90: ...
///
/// Output depends only on the graph and the partitioned graph.

#include <ostream>
#include <string>

#include "nnsc/IR/Graph.h"
#include "nnsc/Transform/Partition.h"

namespace nnsc::transform {

/// Prints the sections above for `pg`, made from `graph`.
void printCommunication(const ir::Graph &graph, const PartitionedGraph &pg, std::ostream &os);

/// "transformer.h.0" for "transformer.h.0.attn.c_proj": a module path cut
/// after its first all-digit component; "<other>" when it has none.
std::string layerOf(const std::string &modulePath);

/// "all_reduce(group [0,1])", "all_gather(dim=2, group [0,1])": one CommOp.
std::string formatCommOp(const CommOp &op);

} // namespace nnsc::transform
