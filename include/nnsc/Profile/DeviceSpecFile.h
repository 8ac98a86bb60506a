#pragma once
/// A measured device spec (the configs/devices/*.yaml format, documented in
/// docs/profile-comm.md): the writer's side; lib/Cost reads it. No LibTorch.

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace nnsc::profile {

struct MeasuredDevice {
  std::string name;        ///< e.g. "cpu-local"
  std::string description; ///< "<model>, <threads> threads"
  std::vector<std::string> sources;
  /// Achieved matmul FLOP/s per dtype ("float32", "bfloat16", ...), in the
  /// order they are written.
  std::vector<std::pair<std::string, double>> flops;
  int64_t memoryBytes = 0;
  double memoryBandwidth = 0; ///< bytes/s
  double launchFloor = 0;     ///< seconds
  double randomRate = 0;      ///< random numbers drawn per second; 0: not written
  double updateBandwidth = 0; ///< the runtime's AdamW at 80 bytes an element; 0: not written
  /// Batched products' rate as a fraction of the float32 matmul rate, per
  /// smallest per-batch dim (efficiency.batched_matmul); empty: not written.
  std::vector<std::pair<int64_t, double>> batchedMatmul;
  /// vector_ops: per kind, [forward s/element, forward s/row, backward
  /// s/element, backward s/row]; empty: not written.
  std::vector<std::pair<std::string, std::array<double, 4>>> vectorOps;
};

/// The spec as YAML text. Efficiencies are written as 1.0: the figures are
/// achieved rates, not datasheet peaks.
std::string formatDeviceSpec(const MeasuredDevice &device);

} // namespace nnsc::profile
