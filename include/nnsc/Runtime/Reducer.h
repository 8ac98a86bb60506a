#pragma once
/// Gradient averaging across data-parallel copies, overlapped with backward
/// (a manifest Reducer). Gradients are grouped into buckets of about
/// bucket_bytes in reverse registration order (the order backward produces
/// them); a post-hook on each leaf's gradient accumulator launches the
/// asynchronous allreduce of a flattened bucket once all its grads are
/// ready, buckets strictly in order so every rank issues the same sequence.
/// finish() waits, copies the results back and divides them (by the group
/// size when averaging, or by an explicit divisor).
///
/// With bucket views (useBucketViews, on by default in nnsc-run) the
/// gradients live in the buckets, as DDP's gradient_as_bucket_view and
/// Megatron's contiguous gradient buffer keep them: before the first backward
/// each parameter's .grad (mixed precision: its master's, when the buckets
/// are float32) becomes a view of its bucket, backward accumulates into it in
/// place, and a launch sends it as it is. No copy in or out, and no second
/// copy of the gradients in memory. The optimizer's zeroGrad zeroes the
/// views in place (as it does); a .grad replaced from outside is copied in
/// at the launch and becomes a view again at finish().
///
/// Under ZeRO-1 (`scatter`) each bucket is padded to a multiple of the group
/// size and reduce-scattered instead (ZeroLayout.h): this rank receives only
/// its range of the summed gradient, gradShard(bucket), and the parameters'
/// .grad keep their local (unreduced) values. After the optimizer updated the
/// owned elements, gatherParams() all-gathers every bucket's parameters.
///
/// ZeRO-2 (`shardGrads`) also shards the gradients, as DeepSpeed's stage 2
/// does: every backward reduces, a bucket's gradients are copied into a flat
/// of its own at the launch and dropped there (the parameters' and masters'
/// .grad become undefined), the flat is released as soon as its
/// reduce-scatter is done (at most kZero2InFlight buckets in flight, waited
/// for in the backward that launches the next ones), and the received range
/// is added to gradShard(), which sums the step's micro-batches until the
/// optimizer clears it (clearGradShards), in float32 under mixed precision
/// whatever the reduction's dtype. So a rank holds its range of the gradients
/// plus the few buckets on the wire, instead of all of them. After a failed
/// wait nothing more is sent or waited for; finish() returns the error.
///
/// ZeRO in blocks (`cross`, nnScaler's zero_ngroups): `group` is the
/// reducer's ranks in this rank's block, and `cross` those at its place in
/// every block. A bucket is reduce-scattered inside the block, then its shard
/// all-reduced over `cross`: every block ends with the same shards (the
/// optimizer's states are replicated over the blocks, sharded inside them),
/// and the parameters' all-gather stays in the block. Inside backward, once
/// more than kZero2InFlight reduce-scatters are under way, the oldest is
/// waited for and its cross sum sent (ZeRO-2 frees the bucket's flat there);
/// ZeRO-2 waits for a cross sum once kZero2InFlight more are under way.
///
/// ZeRO-3 (`units`, with ZeRO-2): each parameter may belong to a unit (a
/// recompute function, Zero3.h); a bucket never mixes units, so a unit's
/// buckets can be gathered and released on their own.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "nnsc/Runtime/Comm.h"
#include "nnsc/Runtime/ZeroLayout.h"

namespace torch::autograd {
struct Node;
}

namespace nnsc::rt {

class Reducer {
public:
  /// `params` (leaves with requires_grad) in registration order, `names`
  /// theirs for messages. The reduced gradients are the sums over the group
  /// divided by `divisor` when it is > 0, else by the group size when
  /// `average`, else left as sums. `scatter`: ZeRO-1 (above), `shardGrads`
  /// with it: ZeRO-2, `cross` with it: ZeRO in blocks (`average` then divides
  /// by both groups' sizes), `units` (one per param, -1 none; empty: none):
  /// ZeRO-3's buckets. Installs the hooks; the Reducer must outlive every
  /// backward pass over them.
  Reducer(std::shared_ptr<CommBackend> group, std::vector<at::Tensor> params,
          std::vector<std::string> names, int64_t bucketBytes, bool average,
          std::chrono::milliseconds timeout, int64_t divisor = 0, bool scatter = false,
          bool shardGrads = false, std::shared_ptr<CommBackend> cross = nullptr,
          std::vector<int> units = {});
  ~Reducer();
  Reducer(const Reducer &) = delete;
  Reducer &operator=(const Reducer &) = delete;

  /// Mixed precision (MixedPrecision.h): `mainGrads[k]` is the float32 master
  /// of params()[k]. A bucket then holds each param's grad plus its master's
  /// grad (earlier micro-batches, already folded), in `dtype`; finish() writes
  /// the reduced values into the masters' grads (ZeRO: into gradShard(), in
  /// `dtype`; ZeRO-2: in float32) and drops both local parts. The masters serve as holders of
  /// the float32 gradients only: under ZeRO their values are sharded
  /// (ZeroOptimizer) and may be released. Call before the first backward.
  void setMainGrads(std::vector<at::Tensor> mainGrads, at::ScalarType dtype);

  /// ZeRO-2 (above): the constructor's `shardGrads`, with `scatter`.
  bool shardsGradients() const { return shardGrads_; }
  /// ZeRO-2: the step's gradient shards restart from zero (after the update).
  void clearGradShards() { shardsHold_ = false; }
  /// ZeRO-2: buckets whose reduce-scatter may be under way at once.
  static constexpr size_t kZero2InFlight = 2;

  /// Gradients as views of the buckets (above), from the next prepare() on;
  /// call before the first backward. Mixed precision keeps its copies when
  /// the buckets are 16-bit or scatter (the float32 main grads are no views
  /// then). A group of one (nothing to reduce) allocates no buckets.
  void useBucketViews(bool on) { viewsWanted_ = on; }
  /// True once the gradients' holders are views of the buckets.
  bool bucketViews() const { return viewsBound_; }
  /// Whether useBucketViews(true) binds views in this configuration.
  bool viewsPossible() const;

  /// Arms the hooks for the next backward. With `reduce` false (a micro-batch
  /// before the last one) gradients only accumulate locally.
  void prepare(bool reduce);

  /// Pipelines (after prepare(false)): arms one parameter before the backward
  /// that finishes its gradient (the last backward of the last chunk that
  /// reads it), so its bucket launches while later chunks still run backward.
  void arm(size_t param);
  /// Pipelines, after the schedule: arms every parameter not armed yet,
  /// keeping what was launched; finish() then launches the rest.
  void armAll();

  /// After the last backward: launches buckets whose grads never arrived
  /// (unused parameters count as zeros), waits for all with the timeout and
  /// writes the averaged grads back. The error names the group.
  Status finish();

  size_t numBuckets() const { return buckets_.size(); }
  /// Whether a step reduces anything (a group of one may still divide); a
  /// reducer that does not allocates no buckets.
  bool reduces() const { return group_->size() > 1 || cross_ || divisor_ != 1; }
  bool scatters() const { return scatter_; }
  /// True after setMainGrads (mixed precision).
  bool hasMainGrads() const { return !mainGrads_.empty(); }
  CommBackend &group() const { return *group_; }
  /// Ranks holding each element of gradShard() and of the optimizer's
  /// states: one per block (1 without blocks).
  int shardCopies() const { return cross_ ? cross_->size() : 1; }
  const std::vector<at::Tensor> &params() const { return params_; }
  const std::vector<std::string> &names() const { return names_; }

  /// ZeRO: bucket `b`'s members (indices into params()) in flat order, its
  /// partition, and this rank's range of the reduced gradient (valid after
  /// finish() of a step that reduced; S elements, divided as configured).
  const std::vector<size_t> &bucketMembers(size_t b) const { return buckets_[b].members; }
  /// Where each member starts in the bucket's flat.
  const std::vector<int64_t> &bucketOffsets(size_t b) const { return buckets_[b].offsets; }
  /// ZeRO-3: the unit of bucket b's parameters, -1 none.
  int bucketUnit(size_t b) const { return units_.empty() ? -1 : units_[buckets_[b].members[0]]; }
  const ZeroBucketLayout &zeroLayout(size_t b) const { return buckets_[b].zero; }
  const at::Tensor &gradShard(size_t b) const { return buckets_[b].shard; }

  /// ZeRO: sends this rank's range of every bucket to the group and writes
  /// every member's elements into `into[k]` (all buckets launched, then
  /// waited for in order). `owned[b]` is this rank's range of bucket b
  /// (zeroLayout(b).shardNumel elements, any dtype: mixed precision sends
  /// the rounded float32 masters); empty: this rank's range of the
  /// parameters themselves. `into` empty: the parameters; else one tensor
  /// per parameter, its shape. `which`: the buckets to gather (empty: all;
  /// an owned entry may be undefined: this rank's range of the parameters).
  /// The error names the group.
  Status gatherParams(const std::vector<at::Tensor> &owned = {},
                      const std::vector<at::Tensor> &into = {},
                      const std::vector<size_t> &which = {});
  /// Buckets whose allreduce has been launched since prepare().
  size_t launchedBuckets() const { return nextLaunch_; }

private:
  struct Bucket {
    std::vector<size_t> members; ///< indices into params_
    std::vector<int64_t> offsets;
    int64_t numel = 0;
    size_t pending = 0;
    at::Tensor flat;  ///< numel elements; ZeRO: zero.padded
    at::Tensor shard; ///< ZeRO: this rank's range of the reduced flat
    at::Tensor incoming; ///< ZeRO-2: a later micro-batch's range, added to shard
    ZeroBucketLayout zero;
    WorkPtr work;
    bool crossing = false; ///< blocks: `work` is the shard's sum over cross_
    bool dividedFirst = false; ///< the flat was divided before its reduction
  };
  Status waitBucket(size_t i, const char *what);
  void sumOverBlocks(size_t i);
  void buildBuckets(int64_t bucketBytes);
  void partitionBuckets();
  void installHooks();
  void markReady(size_t param);
  void launch(Bucket &b);
  void launchSharded(Bucket &b);
  Status complete(size_t i);
  void drainTo(size_t keep);
  void crossTo(size_t keep);
  void bindViews();
  at::TensorOptions flatOptions(const Bucket &b) const;
  /// The tensor whose .grad holds params_[k]'s reduced gradient: the param,
  /// or its float32 master under mixed precision.
  at::Tensor &holder(size_t k) { return mainGrads_.empty() ? params_[k] : mainGrads_[k]; }

  std::shared_ptr<CommBackend> group_;
  std::shared_ptr<CommBackend> cross_; ///< ZeRO in blocks, or null
  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> mainGrads_; ///< masters of params_, or empty
  std::optional<at::ScalarType> flatDtype_;
  std::vector<std::string> names_;
  std::vector<int> units_; ///< ZeRO-3: per param, -1 none; empty: none
  int64_t divisor_; ///< 1: keep the sums
  std::chrono::milliseconds timeout_;
  bool scatter_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucketOf_;
  std::vector<bool> seen_;
  std::vector<bool> armed_; ///< per param: its next gradient is its last of the step
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hookKeys_;
  size_t nextLaunch_ = 0;
  bool active_ = false; ///< a reduction is under way: finish() completes it
  bool viewsWanted_ = false;
  bool viewsBound_ = false;
  bool shardGrads_ = false; ///< ZeRO-2
  bool shardsHold_ = false; ///< ZeRO-2: gradShard() holds this step's earlier micro-batches
  size_t nextComplete_ = 0; ///< ZeRO-2: buckets before this one are reduced and released
  size_t nextCrossed_ = 0;  ///< blocks: buckets before this one are summed over cross_
  Status deferred_;         ///< ZeRO-2 or blocks: the first failure of a wait inside backward
};

} // namespace nnsc::rt
