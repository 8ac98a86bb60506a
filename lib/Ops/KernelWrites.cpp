// Inputs a kernel updates in place (KernelWrites.h).
#include "nnsc/Ops/KernelWrites.h"

#include <algorithm>
#include <string_view>

namespace nnsc::ops {

namespace {

// The boolean argument that switches the running-statistics update on.
const char *trainingFlagOf(const std::string &op) {
  if (op == "aten::batch_norm" || op == "aten::native_batch_norm")
    return "training";
  if (op == "aten::instance_norm")
    return "use_input_stats";
  return nullptr;
}

} // namespace

std::vector<int> kernelWrittenInputs(const ir::Node &node) {
  const char *flag = trainingFlagOf(node.op);
  if (!flag)
    return {};
  const ir::Argument *training = node.arg(flag);
  if (!training || !std::holds_alternative<bool>(training->value) ||
      !std::get<bool>(training->value))
    return {};
  std::vector<int> out;
  for (std::string_view name : {"running_mean", "running_var"})
    if (const ir::Argument *a = node.arg(name))
      if (const auto *ref = std::get_if<ir::TensorRef>(&a->value))
        out.push_back(ref->index);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<bool> writtenBuffers(const ir::Graph &graph) {
  std::vector<bool> written(graph.tensors().size(), false);
  for (const ir::Node &node : graph.nodes())
    for (int i : kernelWrittenInputs(node))
      written[static_cast<size_t>(node.inputs[static_cast<size_t>(i)])] = true;
  for (const ir::StateUpdate &u : graph.stateUpdates)
    written[static_cast<size_t>(u.state)] = true;
  for (const ir::Tensor &t : graph.tensors())
    if (t.kind != ir::TensorKind::Buffer)
      written[static_cast<size_t>(t.id)] = false;
  return written;
}

} // namespace nnsc::ops
