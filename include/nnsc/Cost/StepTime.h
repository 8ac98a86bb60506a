#pragma once
/// Predicted time of one training step of a plan, per device: compute
/// (every part's forward and backward on the device's roofline), the plan's
/// collectives (adapters between parts, forward and backward, priced from
/// the comm table), the gradient all-reduces of the reducers in buckets
/// overlapped with backward as the runtime's Reducer does, micro-batches
/// (gradient accumulation) and the optimizer update.

#include <cstdint>
#include <string>
#include <vector>

#include "nnsc/Cost/Cluster.h"
#include "nnsc/Cost/Memory.h"

namespace nnsc::cost {

/// One collective call a device takes part in, once per micro-batch.
struct CommCall {
  Collective collective = Collective::AllReduce;
  int64_t bytes = 0;      ///< per rank, nccl-tests' size (CommTable.h)
  std::vector<int> ranks; ///< the group, global ranks
  bool backward = false;  ///< runs in the backward pass
  int stage = 0;          ///< the pipeline (virtual) stage whose pass runs it
  /// Bytes the runtime reads and writes on this rank around the backend's
  /// call (Runtime/Collectives.cpp): an all-reduce clones its input, an
  /// all-gather concatenates the gathered parts, a reduce-scatter makes its
  /// chunks contiguous (a copy unless they are leading slices), an all-to-all
  /// stacks and concatenates. The tables time the backend's call alone.
  int64_t stagingBytes = 0;
};

/// A gradient the device reduces after backward (a reducer's shard).
struct GradShard {
  int64_t tensor = -1; ///< bucket order: the runtime registers shards by tensor
  int64_t bytes = 0;
  std::vector<int> ranks; ///< the reducer's group, global ranks
  int firstReader = 0;    ///< index into the parts of the first part reading it
  /// ZeRO-3: the recompute group that alone reads it on this device (its
  /// values are all-gathered when the group runs), -1 none; and the bytes of
  /// those values.
  int recomputeGroup = -1;
  int64_t valueBytes = 0;
};

struct StepInput {
  int device = 0;
  std::vector<OpShapes> parts; ///< program order
  /// Per part (or empty: none): it lies in a recompute group, so its
  /// forward runs again in the backward.
  std::vector<bool> recomputed;
  /// Per part (or empty): its recompute group, -1 none (ZeRO-3's prefetch
  /// overlaps a group's gather with the compute of the group before it).
  std::vector<int> groups;
  std::vector<CommCall> comm;
  std::vector<GradShard> grads;
  double trainableElements = 0; ///< for the optimizer update
  int trainableTensors = 0;
  /// The ranks whose gradients make up one global norm, when there are
  /// several: the runtime sums the squared norm over them with an all-reduce
  /// of one double every step (Runtime/Optimizer.cpp clipGradNorm).
  std::vector<int> normRanks;
};

struct StepOptions {
  int microBatches = 1;
  int64_t bucketBytes = 25ll << 20;                ///< the runtime's reducer bucket size
  MemoryOptions memory;                            ///< optimizer and precision
  /// ZeRO in blocks (memory.zeroNgroups > 1): ranks per block. A reducer's
  /// bucket is then reduced inside a block and a block's share of it (1/g of
  /// the bytes, g its ranks in the block) over the blocks. 0: no blocks.
  int zeroBlockRanks = 0;
  ir::DType computeDType = ir::DType::Unspecified; ///< matmul dtype; Unspecified: the graph's
};

struct StepBreakdown {
  int device = 0;
  double forwardCompute = 0;    ///< one micro-batch
  double backwardCompute = 0;   ///< one micro-batch, recomputed forwards included
  double forwardComm = 0;       ///< one micro-batch
  double backwardComm = 0;      ///< one micro-batch
  double gradReduce = 0;        ///< all buckets' all-reduce time
  double gradReduceExposed = 0; ///< the part not hidden behind the last backward
  double optimizer = 0;
  /// ZeRO-3, one micro-batch: what the all-gathers of each recompute
  /// group's parameters (before its forward and before its re-run in
  /// backward) add to the step. Without prefetch each is waited for whole;
  /// with it (memory.zero3Prefetch) a group's gather runs during the
  /// previous group's compute (the next one's in backward), and only what
  /// outlasts that compute shows, plus the first group's gather; the last
  /// group stays whole from its forward to its re-run, backward's first,
  /// and is gathered once.
  double paramGather = 0;
  int buckets = 0;
  int microBatches = 1;
  /// Pipelined plans: when this device's stage finishes its schedule (every
  /// micro-batch's passes, the waits for other stages and the transfers
  /// between them); its reducers run after it, not overlapped. 0 otherwise.
  double scheduleSeconds = 0;
  double bubbleSeconds = 0; ///< of scheduleSeconds, the time the stage waits
  double total() const {
    if (scheduleSeconds > 0)
      return scheduleSeconds + gradReduceExposed + optimizer;
    return microBatches *
               (forwardCompute + backwardCompute + forwardComm + backwardComm + paramGather) +
           gradReduceExposed + optimizer;
  }
};

/// The step of one device. Errors: a collective the cluster cannot price.
Expected<StepBreakdown> stepTime(const StepInput &input, const Cluster &cluster,
                                 const StepOptions &options);

/// Seconds of each part's backward, its recomputed forward included (one
/// micro-batch): what stepTime sums into backwardCompute. `forward`, when
/// given, gets the forward's sum; `forwardEach`, each part's forward.
std::vector<double> backwardSeconds(const StepInput &input, const Cluster &cluster,
                                    const StepOptions &options, double *forward = nullptr,
                                    std::vector<double> *forwardEach = nullptr);

/// A gradient shard that is ready `ready` seconds into the backward.
struct ReadyShard {
  int64_t tensor = -1; ///< bucket order, as GradShard::tensor
  int64_t bytes = 0;
  std::vector<int> ranks;
  double ready = 0;
};

/// The reducers after a backward: the shards bucketed as the runtime does,
/// each bucket's all-reduce starting once it is ready and the one before it
/// is done.
struct ReduceTime {
  double seconds = 0; ///< every bucket's all-reduce
  double end = 0;     ///< when the last one finishes, from the backward's start
  int buckets = 0;
};
/// `blockRanks`: StepOptions::zeroBlockRanks.
Expected<ReduceTime> reduceTime(const std::vector<ReadyShard> &shards, const Cluster &cluster,
                                int64_t bucketBytes, int blockRanks = 0);

} // namespace nnsc::cost
