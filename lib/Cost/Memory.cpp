// Per-device memory: state, gradients, optimizer, saved activations.
#include "nnsc/Cost/Memory.h"

#include <algorithm>
#include <map>
#include <set>

namespace nnsc::cost {

const char *optimizerName(Optimizer o) {
  switch (o) {
  case Optimizer::Sgd:
    return "sgd";
  case Optimizer::Momentum:
    return "momentum";
  case Optimizer::Adam:
    return "adam";
  case Optimizer::AdamW:
    return "adamw";
  }
  return "?";
}

const char *precisionName(Precision p) {
  switch (p) {
  case Precision::BFloat16:
    return "bf16";
  case Precision::Float16:
    return "fp16";
  default:
    return "fp32";
  }
}

ir::DType computeDType(Precision p) {
  switch (p) {
  case Precision::BFloat16:
    return ir::DType::BFloat16;
  case Precision::Float16:
    return ir::DType::Float16;
  default:
    return ir::DType::Float32;
  }
}

Expected<Optimizer> parseOptimizer(const std::string &name) {
  for (Optimizer o : {Optimizer::Sgd, Optimizer::Momentum, Optimizer::Adam, Optimizer::AdamW})
    if (name == optimizerName(o))
      return o;
  return errorf("error: unknown optimizer '{}'; expected one of: adam, adamw, momentum, sgd", name);
}

Expected<Precision> parsePrecision(const std::string &name) {
  for (Precision p : {Precision::Float32, Precision::BFloat16, Precision::Float16})
    if (name == precisionName(p))
      return p;
  if (name == "mixed")
    return Precision::BFloat16;
  return errorf("error: unknown precision '{}'; expected one of: fp32, bf16, fp16 (mixed: bf16)",
                name);
}

double optimizerBytesPerElement(const MemoryOptions &options) {
  double states = 0;
  if (options.optimizer == Optimizer::Momentum)
    states = 4;
  else if (options.optimizer == Optimizer::Adam || options.optimizer == Optimizer::AdamW)
    states = 8;
  return states + (isMixed(options.precision) ? 4 : 0);
}

double gradBytesPerElement(const MemoryOptions &options, ir::DType dtype) {
  if (isMixed(options.precision) && ir::isFloatingPoint(dtype))
    return 2 + 4;
  return static_cast<double>(ir::dtypeSize(dtype));
}

namespace {

void addState(const DeviceLoad &load, const MemoryOptions &o, DeviceMemory &m) {
  // ZeRO shards over the copies in a block (zero_ngroups).
  double dp = std::max(1.0, double(std::max(1, o.dpSize)) / std::max(1, o.zeroNgroups));
  std::map<int, double> gatheredBytes; // ZeRO-3: per recompute group, while it runs
  for (const StateHolding &s : load.state) {
    bool mixed = isMixed(o.precision) && ir::isFloatingPoint(s.dtype);
    double elt = mixed ? 2 : static_cast<double>(ir::dtypeSize(s.dtype));
    m.paramElements += s.elements;
    // ZeRO-3 shards what one recompute group alone reads; the rest stays whole.
    bool sharded = o.zero >= 3 && s.trainable && s.recomputeGroup >= 0;
    m.paramBytes += s.elements * elt / (sharded ? dp : 1);
    // Gathered, the whole values arrive in a buffer of their own beside the
    // range this rank keeps (Runtime/Zero3.cpp).
    if (sharded)
      gatheredBytes[s.recomputeGroup] += s.elements * elt;
    if (!s.trainable)
      continue;
    m.gradBytes += s.elements * gradBytesPerElement(o, s.dtype) / (o.zero >= 2 ? dp : 1);
    m.optimizerBytes += s.elements * optimizerBytesPerElement(o) / (o.zero >= 1 ? dp : 1);
  }
  // One group's parameters are whole at a time (its forward, or its re-run
  // in backward), beside the ranges; with prefetch also the group after it
  // (forward) or before it (backward): the largest such pair. The runtime
  // learns its order from the gathers, so a group without sharded weights
  // between two is no gap: the two are neighbours.
  double largest = 0, previous = 0;
  for (const auto &[group, bytes] : gatheredBytes) {
    largest = std::max(largest, bytes + (o.zero3Prefetch ? previous : 0));
    previous = bytes;
  }
  m.paramBytes += largest;
}

// Tensors a set of parts keeps, by id (largest local piece), plus extras.
struct Kept {
  std::map<int64_t, double> tensors;
  double extra = 0;
  double masks = 0; ///< dropout mask elements among extra
  double bytes() const {
    double b = extra;
    for (const auto &[id, bytes] : tensors)
      b += bytes;
    return b;
  }
  void add(int64_t id, const TensorInfo &t) {
    if (t.isState)
      return; // parameters and buffers live anyway
    double &b = tensors[id];
    b = std::max(b, t.bytes());
  }
};

void keepSaved(const DevicePart &part, const OpCost &cost, Kept &kept) {
  for (int i : cost.saved.inputs)
    kept.add(part.inputIds[static_cast<size_t>(i)], part.shapes.inputs[static_cast<size_t>(i)]);
  for (int o : cost.saved.outputs)
    kept.add(part.outputIds[static_cast<size_t>(o)], part.shapes.outputs[static_cast<size_t>(o)]);
  kept.extra += cost.saved.extraBytes;
  kept.masks += cost.saved.maskElements;
}

// The backward working set of one part: output gradients in, input
// gradients out.
double backwardWorkingSet(const DevicePart &part, const OpCost &cost) {
  if (cost.backward.kernels == 0)
    return 0;
  double b = 0;
  for (const TensorInfo &t : part.shapes.outputs)
    b += t.bytes();
  for (const TensorInfo &t : part.shapes.inputs)
    if (t.needsGrad)
      b += t.bytes();
  return b;
}

} // namespace

DeviceMemory deviceMemory(const DeviceLoad &load, const MemoryOptions &options) {
  DeviceMemory m;
  m.device = load.device;
  addState(load, options, m);
  Kept kept;
  std::map<int, Kept> groupSaved;           // what each recompute group recomputes
  std::map<int, std::set<int64_t>> written; // tensors each group writes
  double step = 0;
  for (const DevicePart &part : load.parts) {
    OpCost cost = opCost(part.shapes);
    step = std::max(step, backwardWorkingSet(part, cost));
    if (part.recomputeGroup < 0) {
      keepSaved(part, cost, kept);
      continue;
    }
    keepSaved(part, cost, groupSaved[part.recomputeGroup]);
    for (size_t i = 0; i < part.inputIds.size(); ++i)
      if (!written[part.recomputeGroup].count(part.inputIds[i]))
        kept.add(part.inputIds[i], part.shapes.inputs[i]); // a group input
    for (int64_t o : part.outputIds)
      written[part.recomputeGroup].insert(o);
  }
  double group = 0, groupMasks = 0;
  for (const auto &[g, k] : groupSaved)
    if (k.bytes() > group)
      group = k.bytes(), groupMasks = k.masks;
  m.activationBytes = kept.bytes();
  m.transientBytes = std::max(step, group);
  m.maskElements = kept.masks + (group > step ? groupMasks : 0);
  return m;
}

} // namespace nnsc::cost
