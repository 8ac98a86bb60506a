#pragma once
/// Inputs an operator's kernel writes in place without an SSA result:
/// aten::batch_norm (and native_batch_norm) in training and
/// aten::instance_norm with use_input_stats update their running_mean and
/// running_var arguments inside the kernel. Such an input must be the stored
/// buffer itself, never a copy made by communication, or the update is lost.

#include <vector>

#include "nnsc/IR/Graph.h"

namespace nnsc::ops {

/// Indices into node.inputs of the tensors the kernel of `node` updates in
/// place (ascending; empty for most ops and for norms in evaluation mode).
std::vector<int> kernelWrittenInputs(const ir::Node &node);

/// The buffers the forward of `graph` changes: those a kernel updates in
/// place and those a state update writes. By tensor id (size = tensors).
std::vector<bool> writtenBuffers(const ir::Graph &graph);

} // namespace nnsc::ops
