// Op costs by class (the table in OpTable.cpp), the roofline time, and
// gradient flow over a graph. Ops with formulas of their own: OpFormulas.cpp.
#include "nnsc/Cost/OpCost.h"

#include <algorithm>
#include <cmath>

#include "OpFormulas.h"
#include "OpTable.h"

namespace nnsc::cost {

const char *costClassName(CostClass c) {
  switch (c) {
  case CostClass::Matmul:
    return "matmul";
  case CostClass::Conv:
    return "conv";
  case CostClass::Attention:
    return "attention";
  case CostClass::Softmax:
    return "softmax";
  case CostClass::Norm:
    return "norm";
  case CostClass::Embedding:
    return "embedding";
  case CostClass::Loss:
    return "loss";
  case CostClass::Elementwise:
    return "elementwise";
  case CostClass::Reduction:
    return "reduction";
  case CostClass::Pool:
    return "pool";
  case CostClass::View:
    return "view";
  case CostClass::DataMovement:
    return "data-movement";
  case CostClass::Index:
    return "index";
  case CostClass::Creation:
    return "creation";
  }
  return "?";
}

std::optional<CostClass> costClassOf(const std::string &op) {
  const OpTraits *t = opTraits(op);
  if (!t)
    return std::nullopt;
  return t->cls;
}

double TensorInfo::numel() const { return static_cast<double>(ir::numel(shape)); }
double TensorInfo::bytes() const { return numel() * static_cast<double>(ir::dtypeSize(dtype)); }

namespace formulas {

double sumBytes(const std::vector<TensorInfo> &ts) {
  double b = 0;
  for (const TensorInfo &t : ts)
    b += t.bytes();
  return b;
}

bool anyNeedsGrad(const OpShapes &p) {
  return std::any_of(p.inputs.begin(), p.inputs.end(),
                     [](const TensorInfo &t) { return t.needsGrad; });
}

double gradInputBytes(const OpShapes &p) {
  double b = 0;
  for (const TensorInfo &t : p.inputs)
    if (t.needsGrad)
      b += t.bytes();
  return b;
}

int gradInputs(const OpShapes &p) {
  return static_cast<int>(std::count_if(p.inputs.begin(), p.inputs.end(),
                                        [](const TensorInfo &t) { return t.needsGrad; }));
}

double outNumel(const OpShapes &p) {
  double n = 0;
  for (const TensorInfo &t : p.outputs)
    n = std::max(n, t.numel());
  return n;
}

// Saved tensors by the table's rule.
Saved savedByRule(const OpShapes &p, SaveRule rule) {
  Saved s;
  auto floating = [&](size_t i) { return ir::isFloatingPoint(p.inputs[i].dtype); };
  switch (rule) {
  case SaveRule::None:
    break;
  case SaveRule::Input:
    if (!p.inputs.empty())
      s.inputs.push_back(0);
    break;
  case SaveRule::Output:
    if (!p.outputs.empty())
      s.outputs.push_back(0);
    break;
  case SaveRule::Inputs:
    for (size_t i = 0; i < p.inputs.size(); ++i)
      if (floating(i))
        s.inputs.push_back(static_cast<int>(i));
    break;
  case SaveRule::Operands:
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      bool otherNeedsGrad = false;
      for (size_t j = 0; j < p.inputs.size(); ++j)
        otherNeedsGrad |= j != i && p.inputs[j].needsGrad;
      // a / b: b's gradient, -g a / b^2, reads b as well.
      bool divisor = i == 1 && p.inputs[i].needsGrad && p.node &&
                     (p.node->op == "aten::div" || p.node->op == "aten::true_divide");
      if (floating(i) && (otherNeedsGrad || divisor))
        s.inputs.push_back(static_cast<int>(i));
    }
    break;
  case SaveRule::InputOutput:
    if (!p.inputs.empty())
      s.inputs.push_back(0);
    if (!p.outputs.empty())
      s.outputs.push_back(0);
    break;
  case SaveRule::Mask:
    s.extraBytes = outNumel(p); // one byte per element (a bool mask)
    s.maskElements = outNumel(p);
    break;
  case SaveRule::Indices:
    for (size_t i = 0; i < p.inputs.size(); ++i)
      if (!floating(i))
        s.inputs.push_back(static_cast<int>(i));
    break;
  }
  return s;
}

double savedBytes(const OpShapes &p, const Saved &s) {
  double b = s.extraBytes;
  for (int i : s.inputs)
    b += p.inputs[static_cast<size_t>(i)].bytes();
  for (int o : s.outputs)
    b += p.outputs[static_cast<size_t>(o)].bytes();
  return b;
}

namespace {

// Elementwise, losses without a formula, data movement, creators: one pass
// over inputs and outputs forward; backward reads the output gradient and
// the saved tensors and writes each input gradient.
OpCost elementwise(const OpShapes &p, const OpTraits &t) {
  OpCost c;
  c.cls = t.cls;
  double n = outNumel(p);
  if (t.cls == CostClass::Reduction && !p.inputs.empty())
    n = p.inputs[0].numel();
  c.forward = {t.fwdFlops * n, sumBytes(p.inputs) + sumBytes(p.outputs), 1, false};
  if (t.cls == CostClass::Creation)
    c.forward.bytes = sumBytes(p.outputs);
  if (t.random)
    c.forward.randomDraws = n; // one draw per element: a dropout mask, bernoulli, rand
  if (!t.differentiable || !anyNeedsGrad(p))
    return c;
  c.saved = savedByRule(p, t.save);
  c.backward = {t.bwdFlops * n * gradInputs(p),
                sumBytes(p.outputs) + savedBytes(p, c.saved) + gradInputBytes(p),
                std::max(1, gradInputs(p)), false};
  return c;
}

// Gathers (index_select, gather, index): forward reads the picked elements
// and the indices and writes them; backward zeroes the input gradient and
// scatter-adds the output gradient into it. Scatters: a copy of self plus
// the scattered source; backward copies the gradient and gathers the
// source's.
OpCost indexOp(const OpShapes &p, const OpTraits &t) {
  OpCost c;
  c.cls = t.cls;
  Saved indices = savedByRule(p, SaveRule::Indices);
  double idx = savedBytes(p, indices), out = sumBytes(p.outputs);
  double self = p.inputs.empty() ? 0 : p.inputs[0].bytes();
  double src = sumBytes(p.inputs) - self - idx;
  bool gather = t.fwdFlops == 0;
  c.forward = {gather ? 0 : outNumel(p), gather ? 2 * out + idx : 2 * self + 2 * src + idx,
               gather ? 1 : 2, false};
  if (!anyNeedsGrad(p))
    return c;
  c.saved = indices;
  if (gather)
    c.backward = {outNumel(p), self + 3 * out + idx, 2, false};
  else
    c.backward = {0, 2 * self + 2 * src + idx, 2, false};
  return c;
}

OpCost sortOp(const OpShapes &p, const OpTraits &t) {
  OpCost c = elementwise(p, t);
  double len = p.inputs.empty() || p.inputs[0].shape.empty()
                   ? 1
                   : static_cast<double>(p.inputs[0].shape.back());
  c.forward.flops *= std::max(1.0, std::log2(std::max(len, 1.0)));
  return c;
}

} // namespace

OpCost byClass(const OpShapes &p, const OpTraits &t) {
  switch (t.cls) {
  case CostClass::View: {
    OpCost c;
    c.cls = CostClass::View;
    return c;
  }
  case CostClass::Index:
    return indexOp(p, t);
  default:
    break;
  }
  const std::string &op = p.node->op;
  if (op == "aten::sort" || op == "aten::argsort" || op == "aten::topk")
    return sortOp(p, t);
  // x.to(dtype) or type_as into the dtype x has returns x itself: nnsc-trace
  // keeps x.float() for mixed precision (where it converts), and in one
  // dtype it costs nothing.
  if ((op == "aten::to" || op == "aten::type_as") && !p.inputs.empty() && !p.outputs.empty() &&
      p.inputs[0].dtype == p.outputs[0].dtype && p.inputs[0].shape == p.outputs[0].shape) {
    OpCost c;
    c.cls = CostClass::View;
    return c;
  }
  return elementwise(p, t);
}

} // namespace formulas

OpCost opCost(const OpShapes &part) {
  static const OpTraits kFallback{CostClass::Elementwise, 1, 1, SaveRule::Inputs, true};
  const OpTraits *t = opTraits(part.node->op);
  if (!t)
    t = &kFallback;
  OpCost c = [&] {
    if (auto special = formulas::special(part, *t))
      return *special;
    return formulas::byClass(part, *t);
  }();
  if (t->vector)
    formulas::tagVector(c, part, t->vector);
  return c;
}

double workSeconds(const Work &work, ir::DType dtype, const DeviceSpec &device) {
  if (work.kernels == 0 && work.flops == 0 && work.bytes == 0)
    return 0;
  // Vector work at the float32 rate: TF32 is a tensor-core (matmul) mode.
  double peak = work.matmul ? device.peakFlops(dtype) : device.flops.at("float32");
  double efficiency = device.matmulEfficiency;
  if (work.matmul && work.batchedDim > 0)
    efficiency *= device.batchedMatmulEfficiency(work.batchedDim);
  double compute = work.flops / (peak * efficiency);
  double memory = work.bytes / (device.memoryBandwidth * device.memoryEfficiency);
  double random = device.randomRate > 0 ? work.randomDraws / device.randomRate : 0;
  double vector = 0;
  if (work.vectorKind && !device.vectorOps.empty()) {
    auto it = device.vectorOps.find(work.vectorKind);
    if (it != device.vectorOps.end()) {
      const DeviceSpec::VectorCost &v = it->second;
      vector = work.backward
                   ? work.elements * v.backwardPerElement + work.rows * v.backwardPerRow
                   : work.elements * v.forwardPerElement + work.rows * v.forwardPerRow;
    }
  }
  return std::max({compute, memory, random, vector}) + work.kernels * device.launchFloor;
}

std::vector<bool> gradientFlow(const ir::Graph &graph) {
  std::vector<bool> flow(graph.tensors().size(), false);
  for (const ir::Tensor &t : graph.tensors())
    if (t.kind == ir::TensorKind::Param && t.requiresGrad)
      flow[static_cast<size_t>(t.id)] = true;
  for (const ir::Node &n : graph.nodes()) {
    const OpTraits *t = opTraits(n.op);
    if (t && !t->differentiable)
      continue;
    bool any = std::any_of(n.inputs.begin(), n.inputs.end(),
                           [&](int64_t id) { return flow[static_cast<size_t>(id)]; });
    if (!any)
      continue;
    for (int64_t o : n.outputs)
      if (ir::isFloatingPoint(graph.tensor(o).dtype))
        flow[static_cast<size_t>(o)] = true;
  }
  return flow;
}

} // namespace nnsc::cost
