// Measured peak memory beside the planner's estimate (MemoryReport.h).
#include "MemoryReport.h"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "TensorIO.h"
#include "nnsc/Runtime/AllocationCounter.h"
#include "nnsc/Runtime/CudaMemory.h"
#include "nnsc/Runtime/Reducer.h"
#include "nnsc/Runtime/ShardTable.h"

namespace nnsc::rt {

namespace {

bool measuring(const TrainerConfig &config) {
  if (config.reportMemory != "true")
    return false;
  return config.device == "cpu" || cudaMemoryStatsAvailable();
}

// What the measurement is, for the report line.
const char *measuredWhat(const TrainerState &s) {
  return s.device.is_cuda() ? "CUDA caching allocator peak"
                            : "live CPU tensor storage, counting allocator";
}

// Bytes of optimizer state per trainable element, as Optimizer and
// ZeroOptimizer keep them: Adam(W) two float32 moments, SGD with momentum
// one buffer.
double optimizerBytesPerElement(const OptimizerConfig &o) {
  if (o.name == "adam" || o.name == "adamw")
    return 8;
  return o.momentum != 0 ? 4 : 0;
}

double shardBytes(const proto::Shard &s) {
  auto type = scalarTypeOfCode(safetensorsCodeOfProtoDType(s.dtype()));
  double n = type ? double(c10::elementSize(*type)) : 4.0;
  for (int64_t d : s.shape())
    n *= static_cast<double>(d);
  return n;
}

int groupSize(const proto::RankManifest &m, int group) {
  for (const proto::CommGroup &g : m.groups())
    if (g.id() == group)
      return std::max(1, g.ranks_size());
  return 1;
}

// The ranks ZeRO shards reducer r's buckets over: its group, or in blocks its
// shard group (1: this rank alone, nothing sharded).
int zeroWidth(const proto::RankManifest &m, int r) {
  const proto::Reducer &red = m.reducers(r);
  if (!red.has_zero_split())
    return groupSize(m, red.group());
  return red.zero_split().shard_group() < 0 ? 1 : groupSize(m, red.zero_split().shard_group());
}

// Gradient bytes each reducer of the manifest reduces.
std::vector<double> reducerBytes(const proto::RankManifest &m) {
  std::vector<double> bytes(static_cast<size_t>(m.reducers_size()), 0.0);
  for (const proto::Shard &sh : m.shards())
    if (sh.reducer() >= 0 && sh.reducer() < m.reducers_size())
      bytes[static_cast<size_t>(sh.reducer())] += shardBytes(sh);
  return bytes;
}

// LibTorch's Gloo has no reduce-scatter: GlooBackend emulates it with an
// all-to-all over a stacked copy of the bucket into a second buffer of the
// same size, then sums its shard. Under ZeRO that staging (two buckets and a
// shard) lives while a bucket is in flight.
double commStagingBytes(const TrainerState &s) {
  if (s.manifest.zero() <= 0 || s.comm->world().name() != "gloo")
    return 0;
  std::vector<double> bytes = reducerBytes(s.manifest);
  double staging = 0;
  for (int r = 0; r < s.manifest.reducers_size(); ++r) {
    int n = zeroWidth(s.manifest, r);
    if (n <= 1)
      continue;
    double bucket = std::min(bytes[static_cast<size_t>(r)],
                             static_cast<double>(s.manifest.reducers(r).bucket_bytes()));
    staging = std::max(staging, 2 * bucket + bucket / n);
  }
  return staging;
}

// Recipe autocast keeps float32 weights: its estimate is fp32's (activations
// that autocast leaves in 16 bits are counted at 4 bytes, an upper bound).
bool mixed(const TrainerState &s) {
  return s.config.precision.mode != "fp32" && s.config.precision.recipe != "autocast";
}

// The planner's estimate for the precision this run computes in: under
// bf16/fp16 the one made on the graph in their dtypes (older manifests
// have only the float32 one).
const proto::MemoryEstimate &estimateOf(const TrainerState &s) {
  if (mixed(s) && s.manifest.has_memory_estimate_16bit())
    return s.manifest.memory_estimate_16bit();
  return s.manifest.memory_estimate();
}

bool zeroShards(const TrainerState &s) { return s.manifest.zero() > 0 && !s.zero.empty(); }

// Mixed precision's float32 main gradients (MixedPrecision.h): each master's
// gradient, which backward's 16-bit ones are added into. Under ZeRO with one
// micro-batch a step they never form (the reducer adds the 16-bit gradients
// into its float32 buckets and keeps its shard); with several they hold the
// earlier micro-batches'.
double mainGradBytes(const TrainerState &s) {
  if (!mixed(s))
    return 0;
  const double all = 4 * estimateOf(s).trainable_elements();
  // ZeRO-2 reduces every micro-batch into its shard: none form either.
  if (!zeroShards(s) || (s.config.train.gradAccumulation > 1 && s.manifest.zero() < 2) ||
      s.reducers.size() != size_t(s.manifest.reducers_size()))
    return all;
  // Only the reducers that shard; one whose rank is alone in its ZeRO block
  // (zero_ngroups) all-reduces into float32 main grads as without ZeRO.
  std::vector<double> elements(s.reducers.size(), 0.0);
  for (const proto::Shard &sh : s.manifest.shards())
    if (sh.reducer() >= 0 && sh.reducer() < s.manifest.reducers_size()) {
      double n = 1;
      for (int64_t d : sh.shape())
        n *= static_cast<double>(d);
      elements[static_cast<size_t>(sh.reducer())] += n;
    }
  double sharded = 0;
  for (size_t r = 0; r < s.reducers.size(); ++r)
    if (s.reducers[r]->scatters())
      sharded += 4 * elements[r];
  return std::max(0.0, all - sharded);
}

// Whether the reducers hold the gradients in their buckets (Reducer.h's
// bucket views): then the buckets are the gradients (mixed precision: the
// float32 main grads) and only ZeRO's shards are more.
bool bucketViews(const TrainerState &s) {
  return std::any_of(s.reducers.begin(), s.reducers.end(),
                     [](const auto &r) { return r->bucketViews(); });
}

// ZeRO-2 (Reducer.h): the flats of the buckets in flight (kZero2InFlight and
// the one launching) and the gradients autograd holds until their bucket
// launches, about one bucket more; a reducer of a single bucket holds its
// gradients and their copy at once. The shard is the estimate's gradients.
double zero2InFlightBytes(double reducerBytes, double bucketCap) {
  return std::min(2 * reducerBytes, double(Reducer::kZero2InFlight + 2) * bucketCap);
}

bool shardsGradients(const TrainerState &s) {
  return std::any_of(s.reducers.begin(), s.reducers.end(),
                     [](const auto &r) { return r->shardsGradients(); });
}

// The gradients the estimate counts that the rank holds after backward:
// ZeRO-2's reducers keep only their shards (counted with the buckets).
double gradBytes(const TrainerState &s) {
  const double grads = estimateOf(s).grad_bytes();
  if (!shardsGradients(s) || s.reducers.size() != size_t(s.manifest.reducers_size()))
    return grads;
  std::vector<double> bytes = reducerBytes(s.manifest);
  double all = 0, sharded = 0;
  for (const proto::Shard &sh : s.manifest.shards())
    if (sh.trainable())
      all += shardBytes(sh);
  for (size_t r = 0; r < s.reducers.size(); ++r)
    if (s.reducers[r]->shardsGradients())
      sharded += bytes[r];
  return all > 0 ? grads * std::max(0.0, 1 - sharded / all) : grads;
}

// The gradient buckets beyond the gradients they hold, in
// precision.grad_reduce_dtype (the manifest counts them in the shards'
// float32): each reducer's gradients (none as views, none where a group of
// one reduces nothing), and under ZeRO this rank's shard; under ZeRO-2 the
// buckets in flight.
double bucketBytes(const TrainerState &s) {
  const double scale = mixed(s) && s.config.precision.gradReduceDtype != "fp32" ? 0.5 : 1.0;
  if (s.reducers.size() != size_t(s.manifest.reducers_size()))
    return estimateOf(s).comm_bytes() * scale;
  std::vector<double> bytes = reducerBytes(s.manifest);
  double total = 0, float32Shards = 0;
  for (int r = 0; r < s.manifest.reducers_size(); ++r) {
    double b = bytes[static_cast<size_t>(r)];
    const Reducer &reducer = *s.reducers[static_cast<size_t>(r)];
    double shard = reducer.scatters() ? b / reducer.group().size() : 0;
    if (reducer.shardsGradients()) {
      // Its shards are float32 whatever the reduction's dtype; bucket_bytes
      // counts the parameters' bytes, 16-bit ones under mixed precision.
      float32Shards += shard;
      double cap = double(s.manifest.reducers(r).bucket_bytes()) * (mixed(s) ? 2 : 1);
      total += zero2InFlightBytes(b, cap);
    } else if (reducer.reduces()) {
      total += reducer.bucketViews() ? shard : b + shard;
    }
  }
  return total * scale + float32Shards;
}

// LibTorch's CPU dropout keeps its mask as a tensor of the input's dtype
// (float32, or 16-bit in mixed precision), where the estimate counted one
// byte per element.
double cpuMaskBytes(const TrainerState &s) {
  return s.device.is_cpu() ? (mixed(s) ? 1 : 3) * estimateOf(s).mask_elements() : 0;
}

// Buckets of the reducer with the most gradient bytes (Reducer closes a
// bucket once it reaches bucket_bytes).
int64_t bucketsOfLargestReducer(const TrainerState &s) {
  std::vector<double> bytes = reducerBytes(s.manifest);
  int64_t most = 0;
  for (int r = 0; r < s.manifest.reducers_size(); ++r) {
    double cap = std::max<double>(1, double(s.manifest.reducers(r).bucket_bytes()));
    most = std::max<int64_t>(most, int64_t(std::ceil(bytes[static_cast<size_t>(r)] / cap)));
  }
  return most;
}

std::string mib(double bytes) { return fmt::format("{:.2f} MiB", bytes / (1024.0 * 1024.0)); }

// "grad buckets B" (copies), or with bucket views what they hold and what
// they add (ZeRO's shards, a reducer that keeps copies).
std::string bucketText(const TrainerState &s) {
  if (shardsGradients(s))
    return "grad buckets in flight " + mib(bucketBytes(s));
  if (!bucketViews(s))
    return "grad buckets " + mib(bucketBytes(s));
  std::string text =
      mixed(s) ? "grad buckets hold the float32 main grads" : "grad buckets hold the grads";
  if (double extra = bucketBytes(s); extra > 0)
    text += " + " + mib(extra);
  return text;
}

std::string breakdown(const TrainerState &s) {
  const proto::MemoryEstimate &e = estimateOf(s);
  std::string grads = mib(gradBytes(s));
  if (mixed(s))
    grads = fmt::format("{} + float32 main grads {}", grads, mib(mainGradBytes(s)));
  std::string text = fmt::format("rank 0{}: params {}, grads {}, optimizer {}{}, {}; "
                                 "activations {} + transient {}",
                                 mixed(s) ? fmt::format(" ({})", s.config.precision.mode) : "",
                                 mib(e.param_bytes()), grads, mib(optimizerBytes(s)),
                                 mixed(s) ? " with float32 masters" : "", bucketText(s),
                                 mib(e.activation_bytes()), mib(e.transient_bytes()));
  if (double b = cpuMaskBytes(s); b > 0)
    text += fmt::format(" + {} dropout masks {}", mixed(s) ? s.config.precision.mode : "float32",
                        mib(b));
  if (double b = commStagingBytes(s); b > 0)
    text += fmt::format("; gloo reduce-scatter staging {} ({})", mib(b),
                        bucketsOfLargestReducer(s) > 1 ? "during the backward" : "after it");
  return text;
}

} // namespace

void startMemoryMeasurement(const TrainerConfig &config, int cudaDevice) {
  if (!measuring(config))
    return;
  if (config.device == "cuda") {
    // A device that does not exist is setupTrainer's error to report.
    if (cudaDevice < int(at::getNumGPUs()))
      resetCudaPeakBytes(cudaDevice);
    return;
  }
  installCpuAllocationCounter();
  resetCpuPeakBytes();
}

double optimizerBytes(const TrainerState &s) {
  const proto::MemoryEstimate &e = estimateOf(s);
  double perElement = optimizerBytesPerElement(s.config.optimizer) + (mixed(s) ? 4 : 0);
  double optimizer = e.trainable_elements() * perElement;
  if (zeroShards(s)) // over the copies of a block (zero_ngroups)
    optimizer /= std::max(1, s.manifest.dp_size() / std::max(1, s.manifest.zero_ngroups()));
  return optimizer;
}

double estimatedBytes(const TrainerState &s) {
  if (!s.manifest.has_memory_estimate())
    return 0;
  const proto::MemoryEstimate &e = estimateOf(s);
  double state =
      e.param_bytes() + gradBytes(s) + mainGradBytes(s) + optimizerBytes(s) + bucketBytes(s);
  double backward = e.activation_bytes() + e.transient_bytes() + cpuMaskBytes(s);
  // With more than one bucket the first reduce-scatters run while the
  // backward still holds its activations; with one, after it.
  double staging = commStagingBytes(s);
  if (bucketsOfLargestReducer(s) > 1)
    return state + backward + staging;
  return state + std::max(backward, staging);
}

Status reportMemory(TrainerState &s, std::ostream &out) {
  if (!measuring(s.config))
    return Status::ok();
  const int64_t world = s.env.worldSize;
  at::Tensor values = at::zeros({2, world}, at::TensorOptions().dtype(at::kDouble));
  values[0][s.env.rank] = s.device.is_cuda() ? double(cudaPeakBytes(s.device.index()))
                                             : double(cpuPeakBytes());
  values[1][s.env.rank] = estimatedBytes(s);
  std::vector<at::Tensor> bufs{values.to(s.device)}; // NCCL reduces device tensors only
  NNSC_RETURN_IF_ERROR(s.comm->world().allReduce(bufs)->wait());
  values = bufs[0].cpu();
  if (!s.isLogger())
    return Status::ok();
  std::vector<std::string> measured, estimated;
  for (int64_t r = 0; r < world; ++r) {
    measured.push_back(mib(values[0][r].item<double>()));
    double e = values[1][r].item<double>();
    estimated.push_back(e > 0 ? mib(e) : "none");
  }
  out << fmt::format("nnsc-run: peak memory per rank ({}): measured {}; plan estimate {}",
                     measuredWhat(s), fmt::join(measured, " | "), fmt::join(estimated, " | "))
      << std::endl;
  if (s.manifest.has_memory_estimate())
    out << fmt::format("nnsc-run: estimate of {}", breakdown(s)) << std::endl;
  return Status::ok();
}

} // namespace nnsc::rt
