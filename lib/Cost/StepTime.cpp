// The step-time model (StepTime.h).
#include "nnsc/Cost/StepTime.h"

#include <algorithm>
#include <map>

namespace nnsc::cost {

namespace {

ir::DType partDType(const OpShapes &p, ir::DType forced) {
  if (forced != ir::DType::Unspecified)
    return forced;
  for (const TensorInfo &t : p.outputs)
    if (ir::isFloatingPoint(t.dtype))
      return t.dtype;
  return ir::DType::Float32;
}

struct Bucket {
  double ready = 0; ///< seconds into the backward when its last gradient is ready
  int64_t bytes = 0;
  std::vector<int> ranks;
};

// The runtime's buckets (Runtime/Reducer.h): per reducer group, shards in
// reverse registration (tensor) order, a bucket closed once it reaches
// bucketBytes.
std::vector<Bucket> buildBuckets(const std::vector<ReadyShard> &shards, int64_t bucketBytes) {
  std::map<std::vector<int>, std::vector<const ReadyShard *>> byGroup;
  for (const ReadyShard &g : shards)
    if (g.ranks.size() > 1)
      byGroup[g.ranks].push_back(&g);
  std::vector<Bucket> buckets;
  for (auto &[ranks, group] : byGroup) {
    std::sort(group.begin(), group.end(),
              [](const ReadyShard *a, const ReadyShard *b) { return a->tensor > b->tensor; });
    Bucket b{0, 0, ranks};
    for (const ReadyShard *g : group) {
      b.bytes += g->bytes;
      b.ready = std::max(b.ready, g->ready);
      if (b.bytes >= bucketBytes) {
        buckets.push_back(b);
        b = Bucket{0, 0, ranks};
      }
    }
    if (b.bytes > 0)
      buckets.push_back(b);
  }
  std::stable_sort(buckets.begin(), buckets.end(),
                   [](const Bucket &a, const Bucket &b) { return a.ready < b.ready; });
  return buckets;
}

// The optimizer part of a step, as the runtime runs it after the gradients
// are reduced (Runtime/Trainer.cpp): the global gradient norm (one norm
// kernel reading each gradient, then a few on the norms), the update, and
// the gradients zeroed (one kernel writing each). The norm's all-reduce over
// ranks is added by stepTime. The update: memory-bound kernels per tensor,
// counted as the runtime's single-tensor updates run them, in float32 bytes
// read + written per element:
//   sgd       p.add_(g)                                             12, 1 kernel
//   momentum  buf.mul_, buf.add_(g), p.add_(buf)                    32, 3 kernels
//   adam(w)   p.mul_ (decay), m.lerp_(g), v.mul_, v.addcmul_(g, g),
//             sqrt(v), / bias, + eps, p.addcdiv_(m, denom)          80, 8 kernels
// Mixed precision adds the cast of the float32 master to the 16-bit weight.
double optimizerSeconds(const StepInput &in, const Cluster &c, const MemoryOptions &o) {
  double perElement = 12;
  int kernels = 1;
  if (o.optimizer == Optimizer::Momentum)
    perElement = 32, kernels = 3;
  else if (o.optimizer == Optimizer::Adam || o.optimizer == Optimizer::AdamW)
    perElement = 80, kernels = 8;
  if (isMixed(o.precision))
    perElement += 6, kernels += 1;
  Work w{in.trainableElements * 4, in.trainableElements * perElement,
         in.trainableTensors * kernels, false};
  // Norm and zeroing: 4 bytes an element each, a kernel per tensor each, and
  // the norms stacked, squared, weighed and summed.
  constexpr int kNormKernels = 5;
  Work normAndZero{0, in.trainableElements * 8, in.trainableTensors * 2 + kNormKernels, false};
  double others = workSeconds(normAndZero, ir::DType::Float32, c.device);
  if (c.device.updateBandwidth > 0) // measured as these bytes, on the runtime's AdamW
    return w.bytes / c.device.updateBandwidth + w.kernels * c.device.launchFloor + others;
  return workSeconds(w, ir::DType::Float32, c.device) + others;
}

} // namespace

std::vector<double> backwardSeconds(const StepInput &in, const Cluster &cluster,
                                    const StepOptions &options, double *forward,
                                    std::vector<double> *forwardEach) {
  std::vector<double> backward(in.parts.size());
  if (forwardEach)
    forwardEach->assign(in.parts.size(), 0.0);
  for (size_t i = 0; i < in.parts.size(); ++i) {
    OpCost cost = opCost(in.parts[i]);
    ir::DType dt = partDType(in.parts[i], options.computeDType);
    if (forward)
      *forward += workSeconds(cost.forward, dt, cluster.device);
    if (forwardEach)
      (*forwardEach)[i] = workSeconds(cost.forward, dt, cluster.device);
    backward[i] = workSeconds(cost.backward, dt, cluster.device);
    if (i < in.recomputed.size() && in.recomputed[i])
      backward[i] += workSeconds(cost.forward, dt, cluster.device);
  }
  return backward;
}

// The ranks of `ranks` in the first one's ZeRO block of `blockRanks` ranks
// (all of them without blocks).
std::vector<int> firstBlock(const std::vector<int> &ranks, int blockRanks) {
  if (blockRanks <= 0)
    return ranks;
  std::vector<int> block;
  for (int r : ranks)
    if (r / blockRanks == ranks.front() / blockRanks)
      block.push_back(r);
  return block;
}

// A bucket's reduction: one all-reduce over its ranks, or in ZeRO's blocks
// one inside the first block (reduce-scatter and the parameters' all-gather)
// and one of its shard over the blocks.
Expected<double> bucketTime(const Bucket &b, const Cluster &cluster, int blockRanks) {
  std::vector<int> block = firstBlock(b.ranks, blockRanks), cross;
  if (block.size() < 2 || block.size() == b.ranks.size())
    return cluster.commTime(Collective::AllReduce, b.bytes, b.ranks);
  for (size_t i = 0; i < b.ranks.size(); i += block.size())
    cross.push_back(b.ranks[i]);
  auto inside = cluster.commTime(Collective::AllReduce, b.bytes, block);
  if (!inside)
    return inside;
  auto over = cluster.commTime(
      Collective::AllReduce, (b.bytes + int64_t(block.size()) - 1) / int64_t(block.size()), cross);
  if (!over)
    return over;
  return *inside + *over;
}

Expected<ReduceTime> reduceTime(const std::vector<ReadyShard> &shards, const Cluster &cluster,
                                int64_t bucketBytes, int blockRanks) {
  ReduceTime r;
  for (const Bucket &b : buildBuckets(shards, bucketBytes)) {
    auto t = bucketTime(b, cluster, blockRanks);
    if (!t)
      return t.status();
    r.end = std::max(r.end, b.ready) + *t;
    r.seconds += *t;
    ++r.buckets;
  }
  return r;
}

Expected<StepBreakdown> stepTime(const StepInput &in, const Cluster &cluster,
                                 const StepOptions &options) {
  StepBreakdown s;
  s.device = in.device;
  s.microBatches = std::max(1, options.microBatches);
  std::vector<double> forward;
  std::vector<double> backward = backwardSeconds(in, cluster, options, &s.forwardCompute,
                                                 options.memory.zero >= 3 ? &forward : nullptr);
  for (double b : backward)
    s.backwardCompute += b;
  for (const CommCall &call : in.comm) {
    auto t = cluster.commTime(call.collective, call.bytes, call.ranks);
    if (!t)
      return t.status();
    double staging = 0;
    if (call.stagingBytes > 0) {
      Work copy;
      copy.bytes = double(call.stagingBytes);
      copy.kernels = 1;
      staging = workSeconds(copy, ir::DType::Float32, cluster.device);
    }
    (call.backward ? s.backwardComm : s.forwardComm) += *t + staging;
  }
  // Backward runs the parts in reverse: part i's gradients are ready once
  // the backward of parts i..end has run.
  std::vector<double> readyAfter(in.parts.size() + 1, 0);
  for (size_t i = in.parts.size(); i-- > 0;)
    readyAfter[i] = readyAfter[i + 1] + backward[i];
  std::vector<ReadyShard> shards;
  for (const GradShard &g : in.grads)
    shards.push_back({g.tensor, g.bytes, g.ranks, readyAfter[static_cast<size_t>(g.firstReader)]});
  auto reduce = reduceTime(shards, cluster, options.bucketBytes, options.zeroBlockRanks);
  if (!reduce)
    return reduce.status();
  s.gradReduce = reduce->seconds;
  s.buckets = reduce->buckets;
  if (options.memory.zero >= 3) { // each group's values gathered twice a micro-batch (or once)
    // over the copies of a block, as the runtime shards them (zero_ngroups)
    std::map<int, std::pair<int64_t, std::vector<int>>> groups;
    for (const GradShard &g : in.grads) {
      std::vector<int> block = firstBlock(g.ranks, options.zeroBlockRanks);
      if (g.recomputeGroup >= 0 && block.size() > 1) {
        groups[g.recomputeGroup].first += g.valueBytes;
        groups[g.recomputeGroup].second = std::move(block);
      }
    }
    std::vector<double> gather; // per group, in group (program) order
    std::vector<int> order;
    for (const auto &[group, what] : groups) {
      auto t = cluster.commTime(Collective::AllGather, what.first, what.second);
      if (!t)
        return t.status();
      gather.push_back(*t);
      order.push_back(group);
    }
    const bool overlap = options.memory.zero3Prefetch && in.groups.size() == in.parts.size();
    if (!overlap) {
      for (double t : gather)
        s.paramGather += 2 * t;
      if (options.memory.zero3Prefetch && !gather.empty())
        s.paramGather -= gather.back(); // kept whole for its re-run
    } else if (!gather.empty()) {
      // Each group's compute, forward and backward (its re-run included).
      std::map<int, double> fwd, bwd;
      for (size_t i = 0; i < in.parts.size(); ++i)
        if (in.groups[i] >= 0) {
          fwd[in.groups[i]] += forward[i];
          bwd[in.groups[i]] += backward[i];
        }
      // The forward's first is waited for; its last stays whole for its
      // re-run, which backward runs first.
      const size_t n = gather.size();
      s.paramGather += gather[0];
      for (size_t i = 1; i < n; ++i)              // forward: during the group before
        s.paramGather += std::max(0.0, gather[i] - fwd[order[i - 1]]);
      for (size_t i = 0; i + 1 < n; ++i) // backward: during the group after
        s.paramGather += std::max(0.0, gather[i] - bwd[order[i + 1]]);
    }
  }
  s.gradReduceExposed = std::max(0.0, reduce->end - s.backwardCompute);
  s.optimizer = optimizerSeconds(in, cluster, options.memory);
  if (in.normRanks.size() > 1) {
    auto t = cluster.commTime(Collective::AllReduce, 8, in.normRanks);
    if (!t)
      return t.status();
    s.optimizer += *t;
  }
  return s;
}

} // namespace nnsc::cost
