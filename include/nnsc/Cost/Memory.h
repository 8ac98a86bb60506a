#pragma once
/// Memory of one device during training, from the parts it runs and the
/// state it holds: parameters and buffers, gradients, optimizer states
/// (per optimizer and precision, ZeRO), activations saved for backward (per
/// op, from what each op's backward keeps: OpCost's Saved), recompute
/// groups, and the transient peak of the backward.

#include <cstdint>
#include <string>
#include <vector>

#include "nnsc/Cost/OpCost.h"

namespace nnsc::cost {

enum class Optimizer { Sgd, Momentum, Adam, AdamW };
enum class Precision {
  Float32, ///< parameters, gradients and states in float32
  Mixed,   ///< 16-bit parameters and gradients, float32 master copy and states
};

/// "sgd", "momentum", "adam", "adamw"; "fp32", "mixed".
const char *optimizerName(Optimizer o);
const char *precisionName(Precision p);
Expected<Optimizer> parseOptimizer(const std::string &name);
Expected<Precision> parsePrecision(const std::string &name);

struct MemoryOptions {
  Optimizer optimizer = Optimizer::AdamW;
  Precision precision = Precision::Float32;
  int zero = 0;   ///< ZeRO stage: 1 shards optimizer states (and masters) over the
                  ///< data-parallel group, 2 also gradients, 3 also parameters
  int dpSize = 1; ///< data-parallel copies (runtime_ngpus / plan_ngpus)
};

/// Bytes of optimizer state per trainable element: sgd 0, momentum 4, adam
/// and adamw 8 (exp_avg, exp_avg_sq in float32); mixed precision adds the
/// float32 master copy (4): Adam mixed = 2 + 2 + 12 = 16 bytes per parameter
/// with the 16-bit weight and gradient, as in the ZeRO paper.
double optimizerBytesPerElement(const MemoryOptions &options);

/// One node part on the device.
struct DevicePart {
  int64_t node = -1;
  int recomputeGroup = -1; ///< -1: none
  OpShapes shapes;
  std::vector<int64_t> inputIds; ///< IR tensor ids, one per shapes.inputs
  std::vector<int64_t> outputIds;
};

/// A piece of a parameter or buffer the device holds.
struct StateHolding {
  int64_t tensor = -1;
  double elements = 0;
  ir::DType dtype = ir::DType::Float32;
  bool trainable = false; ///< a parameter with requires_grad
};

/// What a device runs and holds; parts in program (topological) order.
struct DeviceLoad {
  int device = 0;
  std::vector<DevicePart> parts;
  std::vector<StateHolding> state;
};

struct DeviceMemory {
  int device = 0;
  double paramElements = 0; ///< parameters and buffers
  double paramBytes = 0;
  double gradBytes = 0;
  double optimizerBytes = 0;
  /// Saved for backward: one micro-batch, or in a pipeline the most its
  /// schedule keeps alive at once (inFlight micro-batches, over its chunks).
  double activationBytes = 0;
  int inFlight = 1;
  double transientBytes = 0;  ///< the largest backward working set on top
  /// Dropout mask elements in activations and transient, at one byte each
  /// there (OpCost.h Saved::maskElements).
  double maskElements = 0;
  double total() const {
    return paramBytes + gradBytes + optimizerBytes + activationBytes + transientBytes;
  }
};

/// The memory of `load` under `options`. Activations: each saved tensor
/// counts once however many ops save it; parameters and buffers never count
/// as activations. A recompute group keeps only its inputs (tensors its
/// parts read that no part of the group wrote); its own saved tensors come
/// back during its backward, a transient. The transient is the larger of
/// the largest recompute group's saved tensors and the largest single
/// backward step (its output gradients plus its input gradients).
DeviceMemory deviceMemory(const DeviceLoad &load, const MemoryOptions &options);

} // namespace nnsc::cost
