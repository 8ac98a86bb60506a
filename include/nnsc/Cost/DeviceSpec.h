#pragma once
/// What one accelerator (or this CPU) can do, for the roofline cost model:
/// peak dense FLOP/s per dtype, memory bandwidth and capacity, the smallest
/// time any kernel takes, and the fraction of peak real kernels reach.
/// File format: configs/devices/<id>.yaml, every key in docs/devices.md.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nnsc/IR/Types.h"
#include "nnsc/Support/Status.h"

namespace nnsc::cost {

struct DeviceSpec {
  std::string name;        ///< device id, e.g. "h100-sxm"
  std::string description; ///< one line for reports
  std::vector<std::string> sources;
  /// Peak dense FLOP/s by dtype key: float64 float32 tf32 bfloat16 float16 float8.
  std::map<std::string, double> flops;
  /// Float32 matmul-class work at flops["tf32"] (the trainer's
  /// precision.tf32; nnsc-plan --tf32). Not a spec key: a property of the run.
  bool tf32 = false;
  double memoryBytes = 0;      ///< capacity
  double memoryBandwidth = 0;  ///< bytes/s
  double launchFloor = 0;      ///< seconds: the smallest time of any kernel
  double matmulEfficiency = 1; ///< achieved fraction of peak FLOP/s on matmul-class work
  double memoryEfficiency = 1; ///< achieved fraction of peak bandwidth
  /// Batched products of small matrices (attention's scores and context:
  /// [batch, m, k] x [batch, k, n]) run below a large GEMM's rate, the more
  /// the smaller the matrices. Per smallest dim of the per-batch product
  /// (min of m, n, k), ascending: the fraction of the matmul rate they
  /// reach; between points interpolated in log2 of the dim, past the ends
  /// the nearest. Empty (the key absent): 1, the matmul rate.
  std::vector<std::pair<double, double>> batchedMatmul;
  /// Random numbers drawn per second (dropout masks, bernoulli, rand): what
  /// bounds those ops on a CPU, where each draw costs tens of instructions.
  /// 0 (the key absent): not a limit, random ops are priced by their bytes
  /// as on a GPU.
  double randomRate = 0;
  /// Ops a CPU's vector units bound, not its memory: transcendental
  /// functions, activations, selects, and the row-wise softmax, norms and
  /// losses, by kind (vectorKinds()): seconds per element and per row,
  /// forward and backward, as nnsc-profile-device times them. An op of a
  /// kind listed costs at least elements x perElement + rows x perRow. A
  /// kind absent (every GPU spec): its bytes and FLOPs alone price it.
  struct VectorCost {
    double forwardPerElement = 0, forwardPerRow = 0;
    double backwardPerElement = 0, backwardPerRow = 0;
  };
  std::map<std::string, VectorCost> vectorOps;
  /// Bytes/s of the optimizer's in-place updates, counted as the step model
  /// counts them (AdamW 80 bytes an element): what nnsc-profile-device
  /// measures the runtime's AdamW at. On a CPU in-place updates beat the
  /// copy the bandwidth is measured with (no write-allocate reads). 0 (the
  /// key absent): memory_bandwidth x efficiency.memory.
  double updateBandwidth = 0;

  /// Peak FLOP/s for work in `dtype`: its own key when the spec has one, else
  /// float32's (integer and bool work, a dtype the datasheet omits).
  double peakFlops(ir::DType dtype) const;
  /// batchedMatmul at a per-batch product whose smallest dim is `dim`.
  double batchedMatmulEfficiency(double dim) const;
};

/// The kinds of vector_ops: exp (exp, log, the trigonometric functions, erf,
/// tanh, sigmoid, silu, mish, softplus), gelu, select (where, masked_fill), softmax
/// (softmax, log_softmax, per row of the reduced dim), norm (layer, rms,
/// group, batch norms, per normalized row), loss (cross entropy, per row).
const std::vector<std::string> &vectorKinds();

/// The spec keys of flops: (float64 float32 tf32 bfloat16 float16 float8).
const std::vector<std::string> &flopsKeys();

/// Parses a device spec; `path` names the file in messages. Every key is
/// required except `sources` and `description`; `flops` must hold float32.
/// Errors: "path:line:col: error: ..." naming the key (unknown, missing,
/// not a number, negative or zero).
Expected<DeviceSpec> parseDeviceSpec(const std::string &text, const std::string &path);

/// Reads and parses `path`.
Expected<DeviceSpec> loadDeviceSpec(const std::string &path);

} // namespace nnsc::cost
