#pragma once
/// The stable, readable text form of a graph (`nnsc-trace --print`).
///
///   graph GPT (format 1) from out/model.pt; weights written
///   param    %0 transformer.wte.weight: float32[65, 384] grad (alias lm_head.weight)
///   input    %17 idx: int64[8, 256]
///   %20: float32[8, 256, 384] = aten::embedding(weight=%0, indices=%17, padding_idx=-1, ...)
///       # transformer.wte (Embedding) model.py:141
///       anno: n^ e, * -> * e
///   output %99 (loss)
///
/// Output depends only on the graph: ids in order, never pointer order.

#include <ostream>
#include <string>

#include "nnsc/IR/Graph.h"

namespace nnsc::ir {

void printGraph(const Graph &graph, std::ostream &os);
std::string printGraph(const Graph &graph);
/// One argument's value as printed ("%3", "[%3, %4]", "None", "-1", "true").
std::string printArgValue(const Node &node, const ArgValue &value);

} // namespace nnsc::ir
