// Measured peak memory beside the planner's estimate (MemoryReport.h).
#include "MemoryReport.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "nnsc/Runtime/AllocationCounter.h"

namespace nnsc::rt {

namespace {

bool measuring(const TrainerConfig &config) {
  return config.reportMemory == "true" && config.device == "cpu";
}

// Bytes of optimizer state per trainable element, as Optimizer and
// ZeroOptimizer keep them: Adam(W) two float32 moments, SGD with momentum
// one buffer.
double optimizerBytesPerElement(const OptimizerConfig &o) {
  if (o.name == "adam" || o.name == "adamw")
    return 8;
  return o.momentum != 0 ? 4 : 0;
}

std::string mib(double bytes) { return fmt::format("{:.2f} MiB", bytes / (1024.0 * 1024.0)); }

std::string breakdown(const TrainerState &s) {
  const proto::MemoryEstimate &e = s.manifest.memory_estimate();
  double optimizer = estimatedBytes(s) - e.param_bytes() - e.grad_bytes() - e.comm_bytes() -
                     e.activation_bytes() - e.transient_bytes();
  return fmt::format("rank 0: params {}, grads {}, optimizer {}, grad buckets {}, activations {}, "
                     "transient {}",
                     mib(e.param_bytes()), mib(e.grad_bytes()), mib(optimizer), mib(e.comm_bytes()),
                     mib(e.activation_bytes()), mib(e.transient_bytes()));
}

} // namespace

void startMemoryMeasurement(const TrainerConfig &config) {
  if (!measuring(config))
    return;
  installCpuAllocationCounter();
  resetCpuPeakBytes();
}

double estimatedBytes(const TrainerState &s) {
  if (!s.manifest.has_memory_estimate())
    return 0;
  const proto::MemoryEstimate &e = s.manifest.memory_estimate();
  double optimizer = e.trainable_elements() * optimizerBytesPerElement(s.config.optimizer);
  if (s.manifest.zero() > 0 && !s.zero.empty())
    optimizer /= std::max(1, s.manifest.dp_size());
  return e.param_bytes() + e.grad_bytes() + optimizer + e.comm_bytes() + e.activation_bytes() +
         e.transient_bytes();
}

Status reportMemory(TrainerState &s, std::ostream &out) {
  if (!measuring(s.config))
    return Status::ok();
  const int64_t world = s.env.worldSize;
  at::Tensor values = at::zeros({2, world}, at::TensorOptions().dtype(at::kDouble));
  values[0][s.env.rank] = double(cpuPeakBytes());
  values[1][s.env.rank] = estimatedBytes(s);
  std::vector<at::Tensor> bufs{values};
  NNSC_RETURN_IF_ERROR(s.comm->world().allReduce(bufs)->wait());
  if (!s.isLogger())
    return Status::ok();
  std::vector<std::string> measured, estimated;
  for (int64_t r = 0; r < world; ++r) {
    measured.push_back(mib(values[0][r].item<double>()));
    double e = values[1][r].item<double>();
    estimated.push_back(e > 0 ? mib(e) : "none");
  }
  out << fmt::format("nnsc-run: peak memory per rank (live CPU tensor storage, counting "
                     "allocator): measured {}; plan estimate {}",
                     fmt::join(measured, " | "), fmt::join(estimated, " | "))
      << std::endl;
  if (s.manifest.has_memory_estimate())
    out << fmt::format("nnsc-run: estimate of {}", breakdown(s)) << std::endl;
  return Status::ok();
}

} // namespace nnsc::rt
