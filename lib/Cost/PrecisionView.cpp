// The graph in the dtypes mixed precision runs it in (PrecisionView.h).
#include "nnsc/Cost/PrecisionView.h"

#include <algorithm>
#include <variant>

#include "nnsc/Ops/MixedPrecisionOps.h"

namespace nnsc::cost {

namespace {

// Per tensor, the nodes that read it.
std::vector<std::vector<int64_t>> usesOf(const ir::Graph &graph) {
  std::vector<std::vector<int64_t>> uses(graph.tensors().size());
  for (const ir::Node &node : graph.nodes())
    for (int64_t t : node.inputs)
      uses[static_cast<size_t>(t)].push_back(node.id);
  return uses;
}

bool hasDTypeArgument(const ir::Node &node) {
  return std::any_of(node.args.begin(), node.args.end(), [](const ir::Argument &a) {
    return std::holds_alternative<ir::DType>(a.value);
  });
}

bool lowered(const ir::Tensor &t) {
  return t.dtype == ir::DType::Float32 &&
         (t.kind == ir::TensorKind::Param || t.kind == ir::TensorKind::Buffer ||
          t.kind == ir::TensorKind::Input);
}

// The dtype a float32 output of `node` has when its inputs have the view's
// dtypes (`graph` already holds them for every input).
ir::DType outputDType(const ir::Graph &graph, const ir::Node &node, ir::DType low) {
  if (ops::isLowPrecisionOp(node.op))
    return low; // nnsc-run casts a matmul's float32 inputs down first
  if (hasDTypeArgument(node))
    return ir::DType::Float32;
  if (node.op == "aten::type_as" || (node.op == "aten::to" && node.inputs.size() == 2))
    return graph.tensor(node.inputs[1]).dtype;
  bool floating = false, dimensioned = false, float32 = false, float32Scalar = false;
  for (int64_t id : node.inputs) {
    const ir::Tensor &t = graph.tensor(id);
    if (!ir::isFloatingPoint(t.dtype))
      continue;
    floating = true;
    bool wide = t.dtype == ir::DType::Float32 || t.dtype == ir::DType::Float64;
    if (t.shape.empty()) {
      float32Scalar |= wide;
      continue;
    }
    dimensioned = true;
    float32 |= wide;
  }
  if (!floating || float32 || (!dimensioned && float32Scalar))
    return ir::DType::Float32;
  return low;
}

// True when `node` computes in float32 under mixed precision whatever its
// inputs: a loss operator, or a log_softmax all of whose `uses` are.
bool computesInFloat32(const ir::Graph &graph, const ir::Node &node,
                       const std::vector<std::vector<int64_t>> &uses) {
  if (ops::isLossOp(node.op))
    return true;
  if (!ops::isLogSoftmax(node.op) || node.outputs.empty())
    return false;
  const std::vector<int64_t> &readers = uses[static_cast<size_t>(node.outputs[0])];
  return !readers.empty() && std::all_of(readers.begin(), readers.end(), [&](int64_t n) {
    return ops::isLossOp(graph.nodes()[static_cast<size_t>(n)].op);
  });
}

} // namespace

ir::Graph atPrecision(const ir::Graph &graph, Precision precision) {
  ir::Graph view = graph;
  if (!isMixed(precision))
    return view;
  const ir::DType low = computeDType(precision);
  for (ir::Tensor &t : view.tensors())
    if (lowered(t))
      t.dtype = low;
  std::vector<std::vector<int64_t>> uses = usesOf(graph);
  for (const ir::Node &node : view.nodes()) {
    bool float32 = computesInFloat32(view, node, uses);
    for (int64_t id : node.outputs) {
      ir::Tensor &t = view.tensor(id);
      if (t.dtype == ir::DType::Float32 && !float32)
        t.dtype = outputDType(view, node, low);
    }
  }
  return view;
}

} // namespace nnsc::cost
