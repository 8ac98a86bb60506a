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
/// nnsc-run's precision.mode (docs/trainer-config.md). BFloat16 and Float16
/// are mixed precision: 16-bit weights, activations and gradients, float32
/// masters, main gradients and optimizer states, losses in float32
/// (Cost/PrecisionView.h says which tensors are in which dtype).
enum class Precision { Float32, BFloat16, Float16 };

/// "sgd", "momentum", "adam", "adamw"; "fp32", "bf16", "fp16".
const char *optimizerName(Optimizer o);
const char *precisionName(Precision p);
Expected<Optimizer> parseOptimizer(const std::string &name);
/// "fp32", "bf16", "fp16", or "mixed" (bf16, its name before fp16 was priced).
Expected<Precision> parsePrecision(const std::string &name);
/// True for bf16 and fp16.
inline bool isMixed(Precision p) { return p != Precision::Float32; }
/// The dtype the program computes in: float32, bfloat16 or float16.
ir::DType computeDType(Precision p);

struct MemoryOptions {
  Optimizer optimizer = Optimizer::AdamW;
  Precision precision = Precision::Float32;
  int zero = 0;   ///< ZeRO stage: 1 shards optimizer states (and masters) over the
                  ///< data-parallel group, 2 also gradients, 3 also the parameters
                  ///< one recompute group alone reads (whole while it runs)
  int dpSize = 1; ///< data-parallel copies (runtime_ngpus / plan_ngpus)
  /// ZeRO in blocks (plan zero_ngroups): states shard over dpSize / zeroNgroups
  /// copies, the blocks hold replicas.
  int zeroNgroups = 1;
  /// ZeRO-3 with prefetch (nnsc-run's data_parallel.zero3_prefetch, on by
  /// default): while a group runs the next group's parameters arrive, so two
  /// consecutive groups are whole at once instead of one.
  bool zero3Prefetch = true;
};

/// Bytes of optimizer state per trainable element: sgd 0, momentum 4, adam
/// and adamw 8 (exp_avg, exp_avg_sq in float32); mixed precision adds the
/// float32 master copy (4).
double optimizerBytesPerElement(const MemoryOptions &options);
/// Bytes of gradient per trainable element: its dtype's in fp32; in mixed
/// precision 2 + 4, the 16-bit gradient backward writes and the float32 main
/// gradient it is added into (Megatron's main_grad: with the 2-byte weight
/// and Adam's 12, 20 bytes per parameter).
double gradBytesPerElement(const MemoryOptions &options, ir::DType dtype);

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
  /// The recompute group that alone reads it on this device (ZeRO-3 shards
  /// its values and gathers them while the group runs); -1 none.
  int recomputeGroup = -1;
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
