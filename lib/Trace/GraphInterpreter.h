#pragma once
// Runs a graph's nodes on real tensors with LibTorch's own operators: the
// traced graph as nnsc will execute it. Used by the trace's self-check.
// Private to the Trace library.

#include <functional>
#include <unordered_map>

#include <torch/script.h>

#include "nnsc/IR/Graph.h"
#include "nnsc/Support/Status.h"

namespace nnsc::trace {

/// IR tensor id → value.
using TensorValues = std::unordered_map<int64_t, at::Tensor>;

/// Executes every node of `graph` in order. `values` must hold the graph's
/// inputs, parameters, buffers and constants; each node's outputs are added.
/// `afterNode` sees each node once its outputs are in `values`; an error it
/// returns stops the run. Ops run as the graph names them (functional twins
/// of in-place ops included); an op or argument LibTorch rejects is an error
/// naming the node.
Status interpretGraph(const ir::Graph &graph, TensorValues &values,
                      const std::function<Status(const ir::Node &)> &afterNode);

} // namespace nnsc::trace
