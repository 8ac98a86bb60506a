#pragma once
// The trace's self-check (TraceOptions::verify): the traced graph, run with
// LibTorch's operators, must compute what LibTorch computes executing the
// archive itself. Private to the Trace library.

#include <string>
#include <vector>

#include <torch/script.h>

#include "nnsc/IR/Graph.h"
#include "nnsc/Support/Status.h"

namespace nnsc::trace {

struct SelfCheckInput {
  torch::jit::Module *module = nullptr;
  torch::jit::Graph *inlined = nullptr; ///< forward, inlined
  const std::vector<at::Tensor> *samples = nullptr;
  const std::vector<std::string> *names = nullptr;
  const ir::Graph *traced = nullptr; ///< the graph being checked, before pruning
  uint64_t seed = 0;
};

/// Traces the archive once more on CPU keeping every value LibTorch computes,
/// checks that this trace has the same nodes as `traced` (a meta trace must
/// equal a CPU one), runs the graph node by node with LibTorch's operators and
/// compares every node's outputs with LibTorch's values, then the forward's
/// outputs and every buffer with a fresh copy of the module running its own
/// forward. On success returns a one-line summary; on a mismatch an error
/// naming the first node (module path, source line) or the output or buffer
/// that differs.
Expected<std::string> selfCheckTrace(const SelfCheckInput &in);

} // namespace nnsc::trace
